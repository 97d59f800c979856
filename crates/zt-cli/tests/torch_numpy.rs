//! `zt` on PyTorch checkpoints and NumPy files written by torch and numpy: info shows the
//! kind, the non-tensor values and which storage each tensor uses; ls, cat, verify and diff
//! work on them; convert to .zt and .safetensors keeps every value bit for bit.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fx(p: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/interop")
        .join(p)
        .to_string_lossy()
        .into_owned()
}

fn zt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zt"))
        .args(args)
        .output()
        .expect("zt runs")
}

fn ok(args: &[&str]) -> String {
    let o = zt(args);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn info_shows_kind_values_and_shared_storages() {
    let s = ok(&["info", &fx("pytorch/state_dict.pt")]);
    assert!(s.contains("PyTorch checkpoint, 11 objects"), "{s}");
    assert!(s.contains("@epoch = 3"), "{s}");
    // The tied weights name one storage.
    let after = |name: &str| {
        let at = s.find(&format!("{name} ")).unwrap();
        s[at..].lines().nth(1).unwrap().trim().to_owned()
    };
    assert_eq!(after("state_dict.embed.weight"), "@torch.storage = \"0\"");
    assert_eq!(after("state_dict.head.weight"), "@torch.storage = \"0\"");

    let j: serde_json::Value =
        serde_json::from_str(&ok(&["info", "--json", &fx("pytorch/legacy.pt")])).unwrap();
    assert_eq!(j["kind"], "pytorch");
    assert_eq!(j["version"], "legacy");
    let j: serde_json::Value =
        serde_json::from_str(&ok(&["info", "--json", &fx("numpy/v3_c64.npy")])).unwrap();
    assert_eq!(j["kind"], "npy");
    assert_eq!(j["version"], "3.0");
    assert_eq!(j["objects"][0]["type"], "complex64");
    let j: serde_json::Value =
        serde_json::from_str(&ok(&["info", "--json", &fx("numpy/all_deflated.npz")])).unwrap();
    assert_eq!(j["kind"], "npz");
    assert_eq!(j["objects"][0]["components"]["data"]["encoding"], "deflate");
}

#[test]
fn ls_cat_verify() {
    assert_eq!(
        ok(&["ls", &fx("pytorch/pytorch_model.bin")]),
        "0.bias\n0.weight\n2.bias\n2.weight\n"
    );
    let j: serde_json::Value =
        serde_json::from_str(&ok(&["cat", "--json", &fx("numpy/all.npz"), "fortran_f32"])).unwrap();
    assert_eq!(
        j["values"],
        serde_json::json!([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    );
    let raw = zt(&["cat", &fx("pytorch/state_dict.pt"), "state_dict.window"]);
    let want: Vec<u8> = (5i32..11).flat_map(i32::to_le_bytes).collect();
    assert_eq!(raw.stdout, want);
    for f in [
        "pytorch/dtypes.pt",
        "pytorch/legacy_p4.pt",
        "pytorch/big_endian.pt",
        "numpy/all_deflated.npz",
        "numpy/v1_be_fortran_i32.npy",
    ] {
        let s = ok(&["verify", &fx(f)]);
        assert!(s.contains(": OK ("), "{s}");
    }
    let o = zt(&["verify", &fx("numpy/refused_structured.npy")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stdout).contains("a structured .npy array"));
}

/// Every object of `a` and `b` has the same name, shape, type and decoded bytes.
fn same_bits(a: &Path, b: &Path) {
    let (ra, rb) = (ztensor::open(a).unwrap(), ztensor::open(b).unwrap());
    assert_eq!(
        ra.names().collect::<Vec<_>>(),
        rb.names().collect::<Vec<_>>()
    );
    for name in ra.names() {
        let (oa, ob) = (ra.object(name).unwrap(), rb.object(name).unwrap());
        assert_eq!(oa.shape, ob.shape, "{name}");
        assert_eq!(oa.element_type(), ob.element_type(), "{name}");
        assert_eq!(oa.bytes().unwrap(), ob.bytes().unwrap(), "{name}");
    }
}

#[test]
fn convert_keeps_every_value_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let out = |n: &str| dir.path().join(n);
    let s = |p: &PathBuf| p.to_string_lossy().into_owned();
    for (input, outputs) in [
        (
            "pytorch/pytorch_model.bin",
            &["model.zt", "model.safetensors"][..],
        ),
        (
            "pytorch/legacy.pt",
            &["legacy.zt", "legacy.safetensors"][..],
        ),
        ("pytorch/state_dict.pt", &["state.zt"][..]),
        ("pytorch/dtypes.pt", &["dtypes.zt"][..]),
        ("pytorch/big_endian.pt", &["be.zt"][..]),
        ("numpy/all_deflated.npz", &["npz.zt"][..]),
        ("numpy/v1_fortran_f64.npy", &["f.zt", "f.safetensors"][..]),
    ] {
        for o in outputs {
            ok(&["convert", &fx(input), &s(&out(o))]);
            same_bits(Path::new(&fx(input)), &out(o));
            let d = ok(&["diff", &fx(input), &s(&out(o))]);
            assert!(d.contains("hold the same objects and values"), "{d}");
        }
    }
    // merge and rm to v1.2 copy raw blobs as stored, except where elements are gathered.
    ok(&[
        "merge",
        &fx("pytorch/state_dict.pt"),
        &fx("numpy/v1_fortran_f64.npy"),
        "-o",
        &s(&out("merged.zt")),
        "--to",
        "v1.2",
    ]);
    let merged = ztensor::open(out("merged.zt")).unwrap();
    assert_eq!(
        &merged.read::<f32>("state_dict.encoder.layer1.w").unwrap()[..],
        &[0., 3., 6., 9., 1., 4., 7., 10., 2., 5., 8., 11.]
    );
    let f = ztensor::open(fx("numpy/v1_fortran_f64.npy")).unwrap();
    assert_eq!(
        merged.read::<f64>("array").unwrap(),
        f.read::<f64>("array").unwrap()
    );
    ok(&[
        "rm",
        &fx("pytorch/state_dict.pt"),
        "state_dict.empty",
        "-o",
        &s(&out("rm.zt")),
        "--to",
        "v1.2",
    ]);
    let (src, kept) = (
        ztensor::open(fx("pytorch/state_dict.pt")).unwrap(),
        ztensor::open(out("rm.zt")).unwrap(),
    );
    assert_eq!(kept.len(), src.len() - 1);
    for name in kept.names() {
        let a = src.object(name).unwrap().bytes().unwrap();
        assert_eq!(a, kept.object(name).unwrap().bytes().unwrap(), "{name}");
    }
    // Non-text values cannot be safetensors metadata: a usage error, nothing written.
    let o = zt(&[
        "convert",
        &fx("pytorch/state_dict.pt"),
        &s(&out("state.safetensors")),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("safetensors metadata holds text only"));
    assert!(!out("state.safetensors").exists());
}
