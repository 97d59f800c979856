//! Writes a file of N small dense objects (default 100,000), for timing `zt info` and opening:
//! `cargo run --release --example many_objects -- OUT.zt [N]`.

fn main() -> ztensor::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let out = args.first().map(String::as_str).unwrap_or("many.zt");
    let n: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let mut w = ztensor::Writer::create(out)?;
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
