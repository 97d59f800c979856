//! The `expected.json` files the interop scripts write beside the files numpy and torch
//! wrote (tools/interop/make_numpy.py, make_torch.py): per file, per array or tensor, its
//! shape, element type name and row-major little-endian bytes in hex.

/// Checks object `name` of `r` (read from `file`) against its entry `want`: shape, element
/// type and every byte.
pub fn check_object(r: &ztensor::Reader, file: &str, name: &str, want: &serde_json::Value) {
    let o = r
        .object(name)
        .unwrap_or_else(|e| panic!("{file} {name}: {e}"));
    check_listed(&o, file, name, want);
    check_bytes(&o, file, name, want);
}

/// Checks the listing of object `o` (`name`, read from `file`) and the bytes it reads
/// against its entry `want` (`shape`, `type`, `hex`).
#[allow(dead_code)] // not every test that includes this module reads through a view
pub fn check_view(o: &ztensor::ObjectView<'_>, file: &str, name: &str, want: &serde_json::Value) {
    check_listed(o, file, name, want);
    check_bytes(o, file, name, want);
}

fn check_bytes(o: &ztensor::ObjectView<'_>, file: &str, name: &str, want: &serde_json::Value) {
    let bytes = o.bytes().unwrap_or_else(|e| panic!("{file} {name}: {e}"));
    let hex: String = bytes.iter().map(|x| format!("{x:02x}")).collect();
    assert_eq!(hex, want["hex"].as_str().unwrap(), "{file} {name}");
}

/// Checks the listing of object `o` (`name`, read from `file`) against its entry `want`: its
/// shape, which it returns, and its element type.
pub fn check_listed(
    o: &ztensor::ObjectView<'_>,
    file: &str,
    name: &str,
    want: &serde_json::Value,
) -> Vec<u64> {
    let shape: Vec<u64> = want["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap())
        .collect();
    assert_eq!(&o.shape[..], &shape[..], "{file} {name}");
    assert_eq!(
        o.element_type().unwrap().name(),
        want["type"].as_str().unwrap(),
        "{file} {name}"
    );
    shape
}

/// `dir`'s expected.json, as its tools/interop script wrote it.
#[allow(dead_code)] // not every test that includes this module has one
pub fn load(dir: &std::path::Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Opens each file of `expected["files"]` from `dir`, mapped and then unmapped, and checks
/// that it lists exactly the objects of its entry's `key` (`"arrays"`, `"tensors"`, ...),
/// each as [`check_object`] does, and that `verify` passes; `more` checks what the kind adds
/// (its version, its attributes). Returns how many files there were.
#[allow(dead_code)]
pub fn check_every_file(
    dir: &std::path::Path,
    expected: &serde_json::Value,
    key: &str,
    mut more: impl FnMut(&str, &ztensor::Reader, &serde_json::Map<String, serde_json::Value>),
) -> usize {
    let files = expected["files"].as_object().unwrap();
    for (file, want) in files {
        let objects = want[key].as_object().unwrap();
        for unmapped in [false, true] {
            let r = ztensor::OpenOptions::new()
                .unmapped(unmapped)
                .open(dir.join(file))
                .unwrap_or_else(|e| panic!("{file}: {e}"));
            assert_eq!(r.len(), objects.len(), "{file}");
            for (name, want) in objects {
                check_object(&r, file, name, want);
            }
            more(file, &r, objects);
            let report = r.verify();
            assert!(report.is_ok(), "{file}: {:?}", report.failures);
        }
    }
    files.len()
}
