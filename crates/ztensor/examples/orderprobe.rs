//! probe
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let r = ztensor::open(&args[1]).unwrap();
    let mut names: Vec<String> = r.objects().iter().map(|o| o.name.clone()).collect();
    names.sort();
    let n = names.len();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut random: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        random.swap(i, (state % (i as u64 + 1)) as usize);
    }
    let orders: Vec<(&str, Vec<usize>)> = vec![
        ("name", (0..n).collect()),
        ("reverse0", (0..n).rev().collect()),
        ("name2", (0..n).collect()),
        ("reverse", (0..n).rev().collect()),
        ("random", random),
        ("stride7", (0..7).flat_map(|k| (k..n).step_by(7)).collect()),
        (
            "pairs-back",
            (0..n / 2).rev().flat_map(|p| [2 * p, 2 * p + 1]).collect(),
        ),
        (
            "triples-back",
            (0..n / 3)
                .rev()
                .flat_map(|p| [3 * p, 3 * p + 1, 3 * p + 2])
                .collect(),
        ),
    ];
    for (label, order) in &orders {
        let r = ztensor::open(&args[1]).unwrap();
        let t = std::time::Instant::now();
        let mut acc = 0u64;
        for &i in order {
            let o = r.object(&names[i]).unwrap();
            acc ^= o.read::<f32>().unwrap()[0].to_bits() as u64;
        }
        println!(
            "{label:12} {:7.1} ms {acc}",
            t.elapsed().as_secs_f64() * 1e3
        );
    }
}
