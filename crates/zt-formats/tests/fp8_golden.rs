//! FP8 decode and encode against golden tables from ml_dtypes (tools/golden/fp8.py).

use zt_formats::fp8::Fp8Format;

fn format(name: &str) -> Fp8Format {
    match name {
        "f8_e4m3fn" => Fp8Format::E4M3Fn,
        "f8_e5m2" => Fp8Format::E5M2,
        "f8_e4m3fnuz" => Fp8Format::E4M3Fnuz,
        "f8_e5m2fnuz" => Fp8Format::E5M2Fnuz,
        other => panic!("unknown format {other}"),
    }
}

fn table(name: &str) -> Vec<Vec<String>> {
    let path = format!(
        "{}/../../fixtures/golden/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .skip(1)
        .map(|l| l.split('\t').map(str::to_owned).collect())
        .collect()
}

#[test]
fn all_4x256_decodes_match_ml_dtypes() {
    let rows = table("fp8_decode.tsv");
    assert_eq!(rows.len(), 1024);
    for r in rows {
        let f = format(&r[0]);
        let code: u8 = r[1].parse().unwrap();
        let got = f.decode(code);
        if r[2] == "nan" {
            assert!(got.is_nan(), "{} {code:#04x}: got {got}", r[0]);
        } else {
            let want = f32::from_bits(u32::from_str_radix(&r[2], 16).unwrap());
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{} {code:#04x}: got {got}, want {want}",
                r[0]
            );
        }
    }
}

#[test]
fn encode_sweep_matches_ml_dtypes() {
    let rows = table("fp8_encode.tsv");
    assert!(rows.len() > 20_000);
    let mut wrong = Vec::new();
    for r in &rows {
        let f = format(&r[0]);
        let x = f32::from_bits(u32::from_str_radix(&r[1], 16).unwrap());
        let want: u8 = r[2].parse().unwrap();
        let got = f.encode(x);
        // Exact codes, NaN codes included: ml_dtypes keeps the sign of a NaN where it can.
        let same = got == want;
        if !same {
            wrong.push(format!(
                "{} {x:e} ({}): got {got:#04x}, want {want:#04x}",
                r[0], r[1]
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} encodes differ:\n{}",
        wrong.len(),
        rows.len(),
        wrong[..wrong.len().min(20)].join("\n")
    );
}
