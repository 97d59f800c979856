//! Writes a file of N small dense objects (default 100,000), for timing `zt info` and opening:
//! `cargo run --release --example many_objects -- OUT.zt [N] [v1.2]` (v2 by default, which
//! places each object on a 64 KiB boundary: a million make 62 GB; v1.2 packs them by 64
//! bytes).

fn main() -> ztensor::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let out = args.first().map(String::as_str).unwrap_or("many.zt");
    let n: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let version = match args.get(2).map(String::as_str) {
        Some("v1.2") => ztensor::Version::V1_2,
        _ => ztensor::Version::default(),
    };
    let mut w = ztensor::Writer::create_version(out, version, ztensor::Durability::Synced)?;
    for i in 0..n {
        let v = [i as f32, 1.0, 2.0, 3.0];
        w.add(
            &format!("model.layers.{}.block.{}.weight", i / 100, i % 100),
            &[2, 2],
            &v,
        )?;
    }
    w.finish()
}
