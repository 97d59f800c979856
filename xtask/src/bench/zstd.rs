//! The `zstd` section: compression and decompression against one core in memory, for v1.2
//! (a zstd frame per part) and v2 (zstd-seekable parts of 1 MiB frames).

use super::common::*;

/// zstd level 3: compressing, writing and reading, against one-core decompression in memory.
pub(super) fn zstd(b: &mut Bench) -> Result<()> {
    let (runs, scale) = (b.runs, b.scale);
    let Bench { dir, table, .. } = b;
    // --- zstd, level 3 ---
    let ztensors = workload(true, scale.max(4));
    let zbytes: u64 = ztensors.iter().map(|t| t.bytes.len() as u64).sum();
    for threads in [1usize, 2] {
        let d = median(3, || {
            for t in &ztensors {
                std::hint::black_box(ztensor::formats::zstd_compress_with_threads(
                    &t.bytes, 3, threads,
                )?);
            }
            Ok(())
        })?;
        table.add(
            "zstd",
            &format!(
                "compress {:.0} MiB, {threads} zstd worker(s)",
                zbytes as f64 / 1048576.0
            ),
            d,
            None,
        );
    }
    let zzt = dir.join("model_zstd.zt");
    let t_zw = median(3, || {
        write_zt(
            &ztensors,
            &zzt,
            WriteOptions {
                compression: Some(3),
                digest: None,
            },
        )
    })?;
    table.add(
        "zstd",
        "ztensor Writer, zstd level 3 (both cores)",
        t_zw,
        None,
    );
    let stored = stored_parts(&zzt)?;
    let mut one = || {
        for (s, n) in &stored {
            std::hint::black_box(ztensor::formats::zstd_decompress_exact(s, *n, u64::MAX)?);
        }
        Ok(())
    };
    let mut two = || {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build()?;
        pool.install(|| {
            use rayon::prelude::*;
            stored.par_iter().with_max_len(1).try_for_each(|(s, n)| {
                std::hint::black_box(ztensor::formats::zstd_decompress_exact(s, *n, u64::MAX)?);
                Ok::<_, ztensor::Error>(())
            })
        })?;
        Ok(())
    };
    let mut ours = || read_every_tensor_in_parallel(&zzt);
    // The same tensors as v2, our default output: each part a zstd-seekable blob of 1 MiB
    // frames, which the reader decodes on rayon's pool, frame by frame.
    let zzt2 = dir.join("model_zstd_v2.zt");
    write_zt_version(
        &ztensors,
        &zzt2,
        WriteOptions {
            compression: Some(3),
            digest: None,
        },
        ztensor::Durability::Synced,
        ztensor::Version::V2,
    )?;
    let stored_v2 = stored_parts(&zzt2)?;
    let mut one_v2 = || {
        for (blob, n) in &stored_v2 {
            let mut out = vec![0u8; usize::try_from(*n)?];
            ztensor::formats::seekable::zstd_seekable_decode_into(blob, &mut out)?;
            std::hint::black_box(&out);
        }
        Ok(())
    };
    let mut ours_v2 = || read_every_tensor_in_parallel(&zzt2);
    let [t_z1, t_z1x2, t_z2, t_v2_1, t_v2_2] = interleaved(
        runs,
        &mut [&mut one, &mut two, &mut ours, &mut one_v2, &mut ours_v2],
    )?;
    let baseline = Some((t_z1, "one-core decompress"));
    let baseline_v2 = Some((t_v2_1, "one-core decompress"));
    for (row, time, vs) in [
        ("decompress in memory, one core (baseline)", t_z1, None),
        (
            "decompress in memory, two threads (machine)",
            t_z1x2,
            baseline,
        ),
        (
            "ztensor open + read every tensor, two cores",
            t_z2,
            baseline,
        ),
        (
            "v2 (seekable frames): decompress in memory, one core",
            t_v2_1,
            None,
        ),
        (
            "v2: ztensor open + read every tensor, two cores",
            t_v2_2,
            baseline_v2,
        ),
    ] {
        table.add("zstd", row, time, vs);
    }
    Ok(())
}

/// Opens `path` afresh and reads every tensor on both cores (`Reader::parallel_objects`):
/// what a user's loader of a compressed file does. The decoded bytes are handed on as the
/// baselines hand theirs, not read back: the decode has written every one of them, and a pass
/// over them here (a user's work) would be timed in this row alone (5-9 ms of 125 when it was).
fn read_every_tensor_in_parallel(path: &std::path::Path) -> Result<()> {
    let reader = ztensor::open(path)?;
    for read in reader.parallel_objects(|o| o.bytes().map(|b| std::hint::black_box(b).len())) {
        std::hint::black_box(read?);
    }
    Ok(())
}

/// Every tensor's stored (compressed) part of the file at `path`, in memory, each with its
/// declared decoded size; then the file as a user's is: read in from the disk once (when the
/// page cache can be dropped), to be opened afresh by every run.
fn stored_parts(path: &std::path::Path) -> Result<Vec<(Vec<u8>, u64)>> {
    let reader = ztensor::open(path)?;
    let stored = reader
        .iter()
        .map(|o| {
            Ok((
                o.component("data")?.stored_bytes()?.into_owned(),
                o.components[0].decoded_len.unwrap_or(0),
            ))
        })
        .collect::<ztensor::Result<_>>()?;
    drop(reader);
    let _ = read_in_fresh(&[path])?;
    Ok(stored)
}
