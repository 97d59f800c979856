//! The `write` section, and the files later sections read when it is skipped.

use super::common::*;

/// Writing the workload: ours, safetensors and a plain write, synced and not, with and without sha256.
pub(super) fn write(b: &mut Bench) -> Result<()> {
    let runs = b.runs;
    let Bench {
        tensors,
        dir,
        zt,
        st,
        zt_sha,
        table,
        t_plain,
        ..
    } = b;
    // --- write ---
    let plain = dir.join("model.raw");
    let sha = WriteOptions {
        compression: None,
        digest: Some(DigestAlgorithm::Sha256),
    };
    let mut plain_all = || {
        let mut f = BufWriter::with_capacity(1 << 20, File::create(&plain)?);
        for t in tensors.iter() {
            f.write_all(&t.bytes)?;
        }
        f.into_inner().context("flush")?.sync_all()?;
        Ok(())
    };
    // Into the page cache only: what a user who asks for no durability waits for.
    let plain_nosync = dir.join("model-nosync.raw");
    let zt_nosync = dir.join("model-nosync.zt");
    let mut plain_cached = || {
        let mut f = BufWriter::with_capacity(1 << 20, File::create(&plain_nosync)?);
        for t in tensors.iter() {
            f.write_all(&t.bytes)?;
        }
        f.flush()?;
        Ok(())
    };
    let mut ours_unsynced = || {
        let unsynced = ztensor::Durability::Unsynced;
        write_zt_with(tensors, &zt_nosync, WriteOptions::default(), unsynced)
    };
    let mut ours = || write_zt(tensors, zt, WriteOptions::default());
    let mut st_write = || {
        let views: Vec<(&str, View<'_>)> =
            tensors.iter().map(|t| (t.name.as_str(), View(t))).collect();
        safetensors::serialize_to_file(views, None, st)?;
        File::open(&st)?.sync_all()?;
        Ok(())
    };
    let mut hash_only = || {
        for t in tensors.iter() {
            std::hint::black_box(sha2::Sha256::digest(&t.bytes));
        }
        Ok(())
    };
    let mut ours_sha = || write_zt(tensors, zt_sha, sha);
    // Into memory (tmpfs), where the disk cannot blur whether hashing overlaps writing.
    let shm = Path::new("/dev/shm");
    let in_memory = shm
        .is_dir()
        .then(|| shm.join(format!("zt-bench-{}.zt", std::process::id())));
    let mut ours_mem = || match &in_memory {
        Some(p) => write_zt(tensors, p, WriteOptions::default()),
        None => Ok(()),
    };
    let mut ours_sha_mem = || match &in_memory {
        Some(p) => write_zt(tensors, p, sha),
        None => Ok(()),
    };
    let outputs = [
        Some(plain.as_path()),
        Some(zt.as_path()),
        Some(st.as_path()),
        None,
        Some(zt_sha.as_path()),
        in_memory.as_deref(),
        in_memory.as_deref(),
        Some(plain_nosync.as_path()),
        Some(zt_nosync.as_path()),
    ];
    let [plain_write, t_ours, t_st, t_hash, t_ours_sha, t_mem, t_sha_mem, t_plain_cached, t_unsynced] =
        interleaved_synced(
            runs,
            outputs,
            &mut [
                &mut plain_all,
                &mut ours,
                &mut st_write,
                &mut hash_only,
                &mut ours_sha,
                &mut ours_mem,
                &mut ours_sha_mem,
                &mut plain_cached,
                &mut ours_unsynced,
            ],
        )?;
    let _ = std::fs::remove_file(&plain_nosync);
    let _ = std::fs::remove_file(&zt_nosync);
    if let Some(p) = &in_memory {
        let _ = std::fs::remove_file(p);
    }
    for (row, time, baseline) in [
        ("plain write_all + fsync (limit)", plain_write, None),
        (
            "ztensor Writer (temp file, fsync, rename)",
            t_ours,
            Some((plain_write, "plain")),
        ),
        (
            "safetensors serialize_to_file + fsync",
            t_st,
            Some((plain_write, "plain")),
        ),
        ("plain write_all, no fsync (limit)", t_plain_cached, None),
        (
            "ztensor Writer, Durability::Unsynced (temp file, rename)",
            t_unsynced,
            Some((t_plain_cached, "plain, no fsync")),
        ),
        ("sha256 of every tensor, one core (no I/O)", t_hash, None),
        (
            "ztensor Writer with sha256 digests",
            t_ours_sha,
            Some((plain_write.slower(t_hash), "max(plain, sha256)")),
        ),
    ] {
        table.add("write", row, time, baseline);
    }
    if in_memory.is_some() {
        table.add("write", "ztensor Writer into tmpfs (no disk)", t_mem, None);
        table.add(
            "write",
            "ztensor Writer into tmpfs, sha256 digests",
            t_sha_mem,
            Some((t_mem.slower(t_hash), "max(tmpfs write, sha256)")),
        );
    }
    *t_plain = Some(plain_write);
    Ok(())
}

/// Makes the files later sections read (the model as `.zt`, `.safetensors` and `.zt` with
/// sha256 digests) when the `write` section that times their writing is skipped.
pub(super) fn make_files(b: &mut Bench) -> Result<()> {
    let Bench {
        tensors,
        zt,
        st,
        zt_sha,
        ..
    } = b;
    // Later sections read these files: make them once, untimed.
    if !zt.exists() {
        write_zt(tensors, zt, WriteOptions::default())?;
    }
    if !st.exists() {
        let views: Vec<(&str, View<'_>)> =
            tensors.iter().map(|t| (t.name.as_str(), View(t))).collect();
        safetensors::serialize_to_file(views, None, st)?;
    }
    if !zt_sha.exists() {
        let sha = WriteOptions {
            compression: None,
            digest: Some(DigestAlgorithm::Sha256),
        };
        write_zt(tensors, zt_sha, sha)?;
    }
    Ok(())
}
