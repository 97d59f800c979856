//! The sections that run whole programs: the `zt` binary and the Python benchmark.

use super::common::*;

/// The zt binary, whole processes: verify and convert.
pub(super) fn zt_binary(b: &mut Bench) -> Result<()> {
    let Bench {
        dir,
        st,
        zt_sha,
        table,
        t_plain,
        t_sha_raw,
        ..
    } = b;
    // --- the zt binary, whole processes ---
    let zt_bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/release/zt");
    if zt_bin.exists() {
        let out = dir.join("converted.zt");
        let t_v = median(3, || {
            anyhow::ensure!(Command::new(&zt_bin)
                .args(["verify"])
                .arg(&zt_sha)
                .output()?
                .status
                .success());
            Ok(())
        })?;
        table.add(
            "zt",
            "zt verify (sha256, 1 GiB)",
            t_v,
            t_sha_raw.map(|t| (t, "sha2 one core")),
        );
        let t_c = median(3, || {
            anyhow::ensure!(Command::new(&zt_bin)
                .args(["convert"])
                .arg(&st)
                .arg(&out)
                .arg("--force")
                .output()?
                .status
                .success());
            Ok(())
        })?;
        table.add(
            "zt",
            "zt convert safetensors -> zt",
            t_c,
            t_plain.map(|t| (t, "plain write")),
        );
    } else {
        println!("  (build target/release/zt for the whole-process rows: cargo build --release -p zt-cli)");
    }
    Ok(())
}

/// ztio from Python against safetensors (tools/bench/python.sh).
pub(super) fn python(b: &mut Bench) -> Result<()> {
    let scale = b.scale;
    // ztio against safetensors from Python: its own virtual environment and script.
    println!("\n== python: ztio (release build) against safetensors, same workload");
    let status = Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/bench/python.sh"))
        .args(["--scale", &scale.to_string()])
        .status()
        .context("running tools/bench/python.sh")?;
    anyhow::ensure!(status.success(), "tools/bench/python.sh failed");
    Ok(())
}

/// ONNX, HDF5 and PyTorch checkpoints from Python: ztio against onnx, h5py and torch where
/// installed (tools/bench/formats.sh).
pub(super) fn formats(b: &mut Bench) -> Result<()> {
    let scale = b.scale;
    println!("\n== formats: ONNX, HDF5 and PyTorch, ztio (release build) against their readers");
    let status = Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/bench/formats.sh"))
        .args(["--scale", &scale.to_string()])
        .status()
        .context("running tools/bench/formats.sh")?;
    anyhow::ensure!(status.success(), "tools/bench/formats.sh failed");
    Ok(())
}
