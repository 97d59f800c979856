//! Upgrades zTensor files to v1.2 into a folder, and writes that folder's EXPECTED.tsv (the
//! SHA-256 of every component as our reader decodes it), so tools/interop/check_ztensor.py can
//! compare the original implementation's reading with ours:
//! `cargo run --example upgrade -- OUTDIR FILE...`

use std::fmt::Write as _;

use sha2::{Digest, Sha256};

fn main() -> ztensor::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((out, inputs)) = args.split_first() else {
        eprintln!("usage: upgrade OUTDIR FILE...");
        std::process::exit(2);
    };
    std::fs::create_dir_all(out)
        .map_err(|e| ztensor::Error::io(e, "cannot create the output folder"))?;
    let mut tsv = String::from("file\tobject\trole\ttype\tshape\tsha256\n");
    for input in inputs {
        let name = std::path::Path::new(input)
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let target = std::path::Path::new(out).join(&name);
        let opts = ztensor::ConvertOptions {
            skip_unreadable: true,
            ..Default::default()
        };
        let report = ztensor::upgrade(input, &target, opts)?;
        for (object, why) in &report.skipped {
            println!("{name}: skipped {object}: {why}");
        }
        let r = ztensor::open(&target)?;
        // By name: the order the cross-check script lists them in.
        for info in r.objects() {
            let o = r.object(&info.name)?;
            for c in o.components() {
                let bytes = c.bytes_with(ztensor::ReadOptions::verified())?;
                let sha: String = Sha256::digest(&bytes)
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                let _ = writeln!(
                    tsv,
                    "{name}\t{}\t{}\t{}\t{:?}\t{sha}",
                    o.name,
                    c.role,
                    c.element.name(),
                    o.shape
                );
            }
        }
        println!(
            "{input} -> {} ({} objects)",
            target.display(),
            report.written
        );
    }
    std::fs::write(std::path::Path::new(out).join("EXPECTED.tsv"), tsv)
        .map_err(|e| ztensor::Error::io(e, "cannot write EXPECTED.tsv"))
}
