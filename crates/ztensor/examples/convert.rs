//! Converts any readable file to .zt (v1.2) or .mag: `convert IN OUT [--mag-version 1|300] [--densify]`.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(input), Some(output)) = (args.first(), args.get(1)) else {
        eprintln!("usage: convert IN OUT [--mag-version 1|300] [--densify]");
        std::process::exit(2);
    };
    let v1 = args
        .windows(2)
        .any(|w| w[0] == "--mag-version" && w[1] == "1");
    let densify = args.iter().any(|a| a == "--densify");
    let result = if output.ends_with(".mag") {
        let version = if v1 {
            ztensor::mag::WriteVersion::V1
        } else {
            ztensor::mag::WriteVersion::V300
        };
        ztensor::open(input).and_then(|r| {
            ztensor::write_mag(
                &r,
                output,
                ztensor::MagOptions {
                    version,
                    densify,
                    durability: ztensor::Durability::Synced,
                },
            )
        })
    } else {
        ztensor::upgrade(input, output, Default::default()).map(drop)
    };
    if let Err(e) = result {
        eprintln!("{e}");
        std::process::exit(1);
    }
}
