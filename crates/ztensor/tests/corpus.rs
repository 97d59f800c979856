//! The generated corpus (fixtures/valid, fixtures/invalid): every valid file reads back what
//! was written, and every invalid file gives exactly the error listed for it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use ztensor::{Error, ErrorKind, Format, OpenOptions, ReadOptions, Reader, Verify};

fn dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(name)
}

fn tsv(name: &str) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(dir(name).join("EXPECTED.tsv")).unwrap();
    text.lines()
        .skip(1)
        .map(|l| l.split('\t').map(str::to_owned).collect())
        .collect()
}

fn files_in(name: &str) -> BTreeSet<String> {
    let all: BTreeSet<String> = std::fs::read_dir(dir(name))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "EXPECTED.tsv")
        .collect();
    // An OpenVINO model's weights are read with its `.xml`, which has the expectation.
    let beside = |n: &String| {
        n.strip_suffix(".bin")
            .is_some_and(|stem| all.contains(&format!("{stem}.xml")))
    };
    all.iter().filter(|n| !beside(n)).cloned().collect()
}

fn readers(path: &Path) -> Vec<ztensor::Result<Reader>> {
    vec![
        OpenOptions::new().open(path),
        OpenOptions::new().unmapped(true).open(path),
    ]
}

fn hex(b: &[u8]) -> String {
    Sha256::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

#[test]
fn every_valid_file_reads_back_its_values() {
    let lines = tsv("valid");
    let mut by_file: BTreeMap<&str, Vec<&Vec<String>>> = BTreeMap::new();
    for l in &lines {
        by_file.entry(&l[0]).or_default().push(l);
    }
    let listed: BTreeSet<String> = by_file
        .keys()
        .map(|s| s.to_string())
        .chain(["empty.zt".to_string()])
        .collect();
    assert_eq!(
        listed,
        files_in("valid"),
        "every valid fixture is listed in EXPECTED.tsv"
    );
    for file in files_in("valid") {
        for r in readers(&dir("valid").join(&file)) {
            let r = r.unwrap_or_else(|e| panic!("{file}: {e}"));
            let expected = by_file.get(file.as_str()).cloned().unwrap_or_default();
            let n_components: usize = r.objects().iter().map(|o| o.components.len()).sum();
            assert_eq!(
                n_components,
                expected.len(),
                "{file}: every component is listed"
            );
            for l in expected {
                let (object, role, ty, shape, sha) = (&l[1], &l[2], &l[3], &l[4], &l[5]);
                let o = r.object(object).unwrap();
                assert_eq!(&format!("{:?}", o.shape), shape, "{file}/{object}");
                let c = o.component(role).unwrap();
                assert_eq!(c.element.name(), ty, "{file}/{object}/{role}");
                let bytes = c.bytes_with(ReadOptions::verified()).unwrap();
                assert_eq!(&hex(&bytes), sha, "{file}/{object}/{role}");
                if o.format == Format::Dense && ty == "bool" {
                    o.read_bool().unwrap();
                }
                if matches!(
                    o.format,
                    Format::SparseCsr | Format::SparseCoo | Format::QuantizedGroup
                ) {
                    o.read_f32()
                        .unwrap_or_else(|e| panic!("{file}/{object}: {e}"));
                }
            }
            assert!(r.verify().is_ok(), "{file}");
        }
    }
}

/// Opens and reads everything; returns the first error and the stage it came from. The reads
/// check no digest (a copying read would, and only unmapped ones copy): digests and checksums
/// are the verify stage's, the same mapped or not.
fn first_error(path: &Path, mapped: bool) -> Option<(&'static str, Error)> {
    let options = OpenOptions::new().verify(Verify::Never);
    let r = match options.unmapped(!mapped).open(path) {
        Ok(r) => r,
        Err(e) => return Some(("open", e)),
    };
    // In name order, the order the expected errors were recorded in.
    for info in r.objects() {
        let o = r.object(&info.name).unwrap();
        // An unreadable zTensor entry lists no components: its dense read gives the error.
        if info.defect.is_some() {
            if let Err(e) = o.dense_form() {
                return Some(("read", e));
            }
        }
        for c in o.components() {
            if let Err(e) = c.bytes() {
                return Some(("read", e));
            }
        }
        let complex = o.element_type().is_some_and(|t| t.ratio() == 2);
        if o.format != Format::Dense && !complex && !matches!(o.format, Format::Unknown(_)) {
            if let Err(e) = o.read_f32() {
                return Some(("read", e));
            }
        }
        if o.format == Format::Dense && o.element_type().map(|t| t.name()) == Some("bool") {
            if let Err(e) = o.read_bool() {
                return Some(("read", e));
            }
        }
    }
    r.verify()
        .failures
        .into_iter()
        .next()
        .map(|e| ("verify", e))
}

#[test]
fn every_invalid_file_gives_its_error() {
    let lines = tsv("invalid");
    let listed: BTreeSet<String> = lines.iter().map(|l| l[0].clone()).collect();
    assert_eq!(
        listed,
        files_in("invalid"),
        "every invalid fixture is listed in EXPECTED.tsv"
    );
    let mut failures = Vec::new();
    for l in &lines {
        let (file, stage, kind, message) = (&l[0], &l[1], &l[2], &l[3]);
        for mapped in [true, false] {
            match first_error(&dir("invalid").join(file), mapped) {
                None => failures.push(format!("{file}: no error at all")),
                Some((got_stage, e)) => {
                    let got_kind = format!("{:?}", e.kind());
                    if got_stage != stage
                        || &got_kind != kind
                        || !e.message().contains(message.as_str())
                    {
                        failures.push(format!(
                            "{file} (mapped={mapped}): expected {stage}/{kind}/{message:?}, got {got_stage}/{got_kind}/{:?}",
                            e.to_string()
                        ));
                    }
                    assert!(
                        e.path().is_some() || got_stage != "open",
                        "{file}: open errors name the file"
                    );
                }
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn errors_say_whose_fault_it_is() {
    for l in tsv("invalid") {
        assert!(
            [
                "InvalidFile",
                "Unsupported",
                "ChecksumMismatch",
                "LimitExceeded"
            ]
            .contains(&l[2].as_str()),
            "{}: a bad file is never blamed on the caller or the OS",
            l[0]
        );
    }
    let _ = ErrorKind::InvalidFile;
}

/// An object listed as unreadable fails `verify`, in every kind of file: it holds no bytes to
/// digest, and passing over it would call a damaged file sound.
#[test]
fn every_unreadable_object_fails_verify() {
    let mut seen = 0;
    for l in tsv("invalid") {
        let Ok(r) = OpenOptions::new().open(dir("invalid").join(&l[0])) else {
            continue;
        };
        let report = r.verify();
        for o in r.objects() {
            if o.defect.as_ref().is_some_and(|d| !d.skip) {
                seen += 1;
                assert!(
                    report.failures.iter().any(|e| e.object() == Some(&o.name)),
                    "{}: {:?} is unreadable but verify did not say so",
                    l[0],
                    o.name
                );
            }
        }
    }
    assert!(seen >= 40, "only {seen} unreadable objects in the corpus");
}
