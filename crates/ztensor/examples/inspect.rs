//! Opens a tensor file and prints its objects: `cargo run --example inspect -- FILE`.

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: inspect FILE");
        std::process::exit(2);
    };
    let r = match ztensor::open(&path) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    println!("{path}: {}, {} objects", r.version(), r.objects().len());
    for (k, v) in r.attributes() {
        println!("  @{k} = {v:?}");
    }
    for o in r.objects() {
        let ty = o.element_type().map_or("-", |t| t.name());
        println!(
            "  {:<24} {:<16} {:<12} {:?}",
            o.name,
            o.format.name(),
            ty,
            o.shape
        );
        for c in &o.components {
            println!(
                "      {:<14} {:<10} offset {:>8} length {:>8} {}{}",
                c.role,
                c.element.name(),
                c.offset,
                c.length,
                c.encoding,
                c.digest.map(|d| format!(" {d}")).unwrap_or_default()
            );
        }
        if let Some(d) = &o.defect {
            println!("      unreadable: {d}");
        }
    }
}
