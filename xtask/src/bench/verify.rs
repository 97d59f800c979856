//! The `verify` section: digests checked on one and two cores.

use super::common::*;

/// Verifying sha256 and crc32c digests on one and two cores, against hashing in memory.
pub(super) fn verify(b: &mut Bench) -> Result<()> {
    let runs = b.runs;
    let Bench {
        tensors,
        dir,
        zt_sha,
        table,
        t_sha_raw,
        ..
    } = b;
    // --- verify ---
    let crc = dir.join("model_crc32c.zt");
    write_zt(
        tensors,
        &crc,
        WriteOptions {
            compression: None,
            digest: Some(DigestAlgorithm::Crc32c),
        },
    )?;
    // As a user's files are: read in from the disk, then opened afresh by every run (a
    // reader kept open would find its pages already mapped from the previous run).
    let _ = read_in_fresh(&[zt_sha, &crc])?;
    // The limit: the same stored bytes, in memory, hashed by the sha2 crate alone.
    let in_ram: Vec<Vec<u8>> = {
        let r = ztensor::open(&zt_sha)?;
        r.iter()
            .map(|o| Ok(o.component("data")?.stored_bytes()?.into_owned()))
            .collect::<ztensor::Result<_>>()?
    };
    let mut hash_one = || {
        for b in &in_ram {
            std::hint::black_box(sha2::Sha256::digest(b));
        }
        Ok(())
    };
    let mut hash_two = || {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build()?;
        pool.install(|| {
            use rayon::prelude::*;
            in_ram.par_iter().with_max_len(1).for_each(|b| {
                std::hint::black_box(sha2::Sha256::digest(b));
            });
        });
        Ok(())
    };
    let verify = |path: &Path, threads: usize| -> Result<()> {
        anyhow::ensure!(ztensor::open(path)?.verify_with_threads(threads).is_ok());
        Ok(())
    };
    let mut sha_one = || verify(zt_sha, 1);
    let mut sha_two = || verify(zt_sha, 2);
    let mut crc_one = || verify(&crc, 1);
    let mut crc_two = || verify(&crc, 2);
    // In turns: these rows are compared with each other, and the machine drifts.
    let [sha_raw, sha_raw2, t_sha1, t_sha2, t_crc1, t_crc2] = interleaved(
        runs,
        &mut [
            &mut hash_one,
            &mut hash_two,
            &mut sha_one,
            &mut sha_two,
            &mut crc_one,
            &mut crc_two,
        ],
    )?;
    let in_ram_one = Some((sha_raw, "one core in RAM"));
    for (row, time, baseline) in [
        ("sha256 in RAM, one core (limit)", sha_raw, None),
        ("sha256 in RAM, two threads (machine)", sha_raw2, in_ram_one),
        (
            "sha256: ztensor open + verify, one core",
            t_sha1,
            in_ram_one,
        ),
        (
            "sha256: ztensor open + verify, two cores",
            t_sha2,
            in_ram_one,
        ),
        ("crc32c: ztensor open + verify, one core", t_crc1, None),
        (
            "crc32c: ztensor open + verify, two cores",
            t_crc2,
            Some((t_crc1, "one core")),
        ),
    ] {
        table.add("verify", row, time, baseline);
    }
    drop(in_ram);
    *t_sha_raw = Some(sha_raw);
    Ok(())
}
