//! The `zstd` section: compression and decompression against one core in memory.

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
    let zr = ztensor::open(&zzt)?;
    // The stored frames in memory, each with its declared size (objects are sorted by name).
    let stored: Vec<(Vec<u8>, u64)> = zr
        .iter()
        .map(|o| {
            Ok((
                o.component("data")?.stored_bytes()?.into_owned(),
                o.components[0].decoded_len.unwrap_or(0),
            ))
        })
        .collect::<ztensor::Result<_>>()?;
    drop(zr);
    // As a user's file is: read in from the disk, then opened afresh by every run.
    if drop_page_cache() {
        std::hint::black_box(read_sequential(&zzt, 4 << 20)?);
    }
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
    let mut ours = || {
        let zr = ztensor::open(&zzt)?;
        let res = zr.parallel_objects(|o| o.bytes().map(|b| touch_any(&b)));
        for r in res {
            std::hint::black_box(r?);
        }
        Ok(())
    };
    let [t_z1, t_z1x2, t_z2] = interleaved(runs, &mut [&mut one, &mut two, &mut ours])?;
    let baseline = Some((t_z1, "one-core decompress"));
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
    ] {
        table.add("zstd", row, time, vs);
    }
    Ok(())
}
