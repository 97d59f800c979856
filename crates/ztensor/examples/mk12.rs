//! probe
fn main() -> ztensor::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args[2].parse().unwrap();
    let mut w =
        ztensor::Writer::create_version(&args[1], ztensor::Version::V1_2, Default::default())?;
    for i in 0..n {
        let v = [i as f32, 1.0, 2.0, 3.0];
        w.add(
            &format!("model.layers.{}.block.{}.weight", i / 100, i % 100),
            &[2, 2],
            &v,
        )?;
    }
    w.finish().map(|_| ())
}
