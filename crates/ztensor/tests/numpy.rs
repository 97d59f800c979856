//! NumPy `.npy` and `.npz` files written by numpy itself (`tools/interop/make_numpy.py`):
//! every array reads as the values numpy was given (row-major, little-endian, compared byte
//! for byte with `expected.json`), mapped and unmapped; stored entries come from the map
//! without a copy; structured and object arrays are refused, naming what they are.

#[path = "support/checkpoint.rs"]
mod checkpoint;
#[path = "support/expected.rs"]
mod expected;

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use ztensor::{ErrorKind, FileVersion, OpenOptions};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/interop/numpy")
}

fn expected() -> serde_json::Value {
    let text = std::fs::read_to_string(dir().join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn every_array_reads_as_numpy_wrote_it() {
    let expected = expected();
    let files = expected["files"].as_object().unwrap();
    assert!(files.len() >= 10);
    let mut checked = 0;
    for (file, arrays) in files {
        for unmapped in [false, true] {
            let r = OpenOptions::new()
                .unmapped(unmapped)
                .open(dir().join(file))
                .unwrap_or_else(|e| panic!("{file}: {e}"));
            let arrays = arrays.as_object().unwrap();
            if file != "mixed.npz" {
                assert_eq!(r.len(), arrays.len(), "{file}");
            }
            for (name, want) in arrays {
                expected::check_object(&r, file, name, want);
                checked += 1;
            }
            assert!(r.verify().is_ok(), "{file}");
        }
    }
    assert!(checked > 100, "{checked}");
}

#[test]
fn kinds_and_versions_are_told() {
    let version = |f: &str| ztensor::open(dir().join(f)).unwrap().version().clone();
    assert_eq!(version("v1_f32.npy"), FileVersion::Npy(1, 0));
    assert_eq!(version("v2_i64.npy"), FileVersion::Npy(2, 0));
    assert_eq!(version("v3_c64.npy"), FileVersion::Npy(3, 0));
    assert_eq!(version("all.npz"), FileVersion::Npz);
    assert_eq!(version("empty.npz"), FileVersion::Npz);
    assert_eq!(version("all.npz").kind(), "npz");
}

#[test]
fn stored_entries_are_borrowed_from_the_map() {
    let r = ztensor::open(dir().join("all.npz")).unwrap();
    for name in ["f32", "u8", "c128", "be_f32"] {
        let o = r.object(name).unwrap();
        let bytes = o.bytes().unwrap();
        assert_eq!(
            matches!(bytes, Cow::Borrowed(_)),
            name != "be_f32",
            "{name}: little-endian stored data is borrowed, big-endian swapped in a copy"
        );
    }
    // A typed read is borrowed when the entry's data happens to be aligned for it.
    let u8s = r.read::<u8>("u8").unwrap();
    assert!(matches!(u8s, Cow::Borrowed(_)));
    // Fortran order and deflated entries are copies.
    assert!(matches!(
        r.object("fortran_f32").unwrap().bytes().unwrap(),
        Cow::Owned(_)
    ));
    let d = ztensor::open(dir().join("all_deflated.npz")).unwrap();
    assert!(matches!(
        d.object("f32").unwrap().bytes().unwrap(),
        Cow::Owned(_)
    ));
    assert_eq!(
        d.object("f32").unwrap().components[0].encoding.name(),
        "deflate"
    );
}

#[test]
fn fortran_order_reads_the_array_not_its_transpose() {
    let r = ztensor::open(dir().join("all.npz")).unwrap();
    let v = r.read::<f32>("fortran_f32").unwrap();
    assert_eq!(&r.object("fortran_f32").unwrap().shape[..], &[2, 3]);
    assert_eq!(&v[..], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    let v = r.read::<u16>("be_fortran_u16").unwrap();
    assert_eq!(&v[..], &[0, 1, 2, 3, 4, 5]);
}

#[test]
fn structured_and_object_arrays_are_refused_by_name() {
    for (file, says) in [
        ("refused_structured.npy", "a structured .npy array"),
        ("refused_object.npy", "an object .npy array"),
    ] {
        let e = ztensor::open(dir().join(file)).err().unwrap();
        assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
        assert!(e.to_string().contains(says), "{e}");
    }
    // In an archive the refused array is one unreadable object; the rest reads.
    let r = ztensor::open(dir().join("mixed.npz")).unwrap();
    assert_eq!(r.names().collect::<Vec<_>>(), ["good", "structured"]);
    let e = r.object("structured").unwrap().bytes().err().unwrap();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    assert!(e.to_string().contains("structured"), "{e}");
    assert_eq!(&r.read::<i32>("good").unwrap()[..], &[0, 1, 2]);
}

#[test]
fn a_corrupt_deflate_stream_is_an_invalid_file() {
    // Overwrite the second half of one deflated array's stream. Its header is inflated at
    // open and its elements when read: either step may meet the damage, and both must say
    // what is wrong and where.
    let bytes = std::fs::read(dir().join("all_deflated.npz")).unwrap();
    let r = OpenOptions::new().open_bytes(bytes.clone()).unwrap();
    let c = r.object("f64").unwrap().components[0].clone();
    let mut broken = bytes;
    let mid = (c.offset + c.length / 2) as usize;
    for b in &mut broken[mid..(c.offset + c.length) as usize] {
        *b = 0xFF;
    }
    let e = match OpenOptions::new().open_bytes(broken) {
        Err(e) => e,
        Ok(r) => r.object("f64").unwrap().bytes().err().unwrap(),
    };
    assert_eq!(e.kind(), ErrorKind::InvalidFile, "{e}");
    assert!(e.to_string().contains("deflate stream"), "{e}");
    assert_eq!(e.object(), Some("f64"));
    // Met at open, the damage makes the array unreadable and its message keeps the offset.
    assert!(
        e.offset().is_some() || e.message().contains("(at offset 0x"),
        "{e}"
    );
}

#[test]
fn verify_checks_every_entry_crc_stored_or_deflated() {
    for file in ["all.npz", "all_deflated.npz"] {
        let bytes = std::fs::read(dir().join(file)).unwrap();
        let r = ztensor::OpenOptions::new()
            .open_bytes(bytes.clone())
            .unwrap();
        let report = r.verify();
        assert!(report.is_ok(), "{file}: {:?}", report.failures);
        assert_eq!(report.checked, r.len(), "{file}: one CRC per entry");

        // A byte near the end of the largest entry's data changed (past a deflated entry's
        // header, which opening inflates): verify names that entry (a stored one by its CRC;
        // a deflated one by its CRC or its inflating).
        let last = r
            .objects()
            .iter()
            .max_by_key(|o| o.components[0].length)
            .unwrap();
        let c = &last.components[0];
        let at = (c.offset + c.length - 2) as usize;
        let mut damaged = bytes;
        damaged[at] ^= 0x10;
        // Opening inflates only a deflated entry's header: damage in its middle is found
        // by verify.
        let r = ztensor::OpenOptions::new().open_bytes(damaged).unwrap();
        let report = r.verify();
        assert!(!report.is_ok(), "{file}: damage not found");
        let named = report.failures.iter().any(|e| {
            e.to_string()
                .contains(&format!("zip entry \"{}", last.name))
        });
        assert!(named, "{file}: {:?}", report.failures);
    }
}

/// A read of a deflated member takes its CRC-32 while inflating it, and only a CRC that
/// matches spares the member a second pass: a member whose stream inflates cleanly but
/// whose directory gives another CRC is refused by every copying read, and a member that
/// matches reads and verifies.
#[test]
fn a_deflated_member_is_crc_checked_as_it_is_inflated() {
    let member = npy_entry("'|u1'", 1, 0);
    let good = checkpoint::zip(&[("a.npy", &member)], &["a.npy"]);
    let r = OpenOptions::new().open_bytes(good.clone()).unwrap();
    for _ in 0..2 {
        assert_eq!(&r.object("a").unwrap().bytes().unwrap()[..], &[1, 2]);
    }
    assert!(r.verify().is_ok());

    // The same archive with the CRC-32 changed in the local and the central header.
    let crc = crc32fast::hash(&member).to_le_bytes();
    let at: Vec<usize> = (0..good.len() - 3)
        .filter(|&i| good[i..i + 4] == crc)
        .collect();
    assert_eq!(at.len(), 2, "the CRC is in both headers");
    let mut lying = good;
    for i in at {
        lying[i] ^= 0x01;
    }
    let r = OpenOptions::new().open_bytes(lying).unwrap();
    for _ in 0..2 {
        let e = r.object("a").unwrap().bytes().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ChecksumMismatch, "{e}");
        assert!(e.to_string().contains("CRC-32 of its bytes is"), "{e}");
        assert!(e.to_string().contains("zip entry \"a.npy\""), "{e}");
    }
}

/// A deflated array far larger than its stored bytes (zeros: about a thousandth) reads: the
/// memory budget counts what the member inflates to, under the decompression cap, not its
/// stored bytes (until 2026-12-04 an array of zeros over about 64 MiB was refused as
/// "exceeds the memory budget").
#[test]
fn a_deflated_array_far_larger_than_its_stored_bytes_reads() {
    let n: u64 = 24 << 20;
    let mut member = npy_header("'<f4'", &format!("({n},)"), 1, 0);
    member.resize(member.len() + 4 * n as usize, 0);
    let npz = checkpoint::zip(&[("a.npy", &member)], &["a.npy"]);
    assert!(npz.len() < 1 << 20, "{}", npz.len());
    let r = OpenOptions::new().open_bytes(npz).unwrap();
    let a = r.object("a").unwrap().read::<f32>().unwrap();
    assert_eq!(a.len() as u64, n);
    assert!(a.iter().all(|&x| x == 0.0));
    assert!(r.verify().is_ok());
}

/// An `.npy` entry of `descr` and version `major.minor` holding two bytes of data.
fn npy_entry(descr: &str, major: u8, minor: u8) -> Vec<u8> {
    let mut out = npy_header(descr, "(2,)", major, minor);
    out.extend([1, 2]);
    out
}

/// The header of an `.npy` of `descr` and `shape` (Python literals), version `major.minor`
/// (1.x: a 2-byte header length), padded to 64 bytes as numpy pads it.
fn npy_header(descr: &str, shape: &str, major: u8, minor: u8) -> Vec<u8> {
    let mut dict = format!("{{'descr': {descr}, 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + dict.len() + 1) % 64 != 0 {
        dict.push(' ');
    }
    dict.push('\n');
    let mut out = vec![0x93, b'N', b'U', b'M', b'P', b'Y', major, minor];
    out.extend((dict.len() as u16).to_le_bytes());
    out.extend(dict.as_bytes());
    out
}

/// In an `.npz`, an array that is not numbers is listed and skipped, and an entry of a
/// format version numpy does not read is listed and unreadable (numpy's archive is lazy: it
/// fails on that array alone): told apart by what the parser found, not by the words of its
/// message.
#[test]
fn an_npz_skips_what_is_not_numbers_and_lists_other_versions_unreadable() {
    let numbers = npy_entry("'|u1'", 1, 0);
    let text = npy_entry("'|S1'", 1, 0);
    let skipped = checkpoint::zip(&[("a.npy", &numbers), ("t.npy", &text)], &[]);
    let r = OpenOptions::new().open_bytes(skipped).unwrap();
    assert!(r.object("t").unwrap().skipped().is_some());
    assert_eq!(&r.object("a").unwrap().bytes().unwrap()[..], &[1, 2]);

    let future = npy_entry("'|u1'", 1, 1);
    let refused = checkpoint::zip(&[("a.npy", &numbers), ("v.npy", &future)], &[]);
    let r = OpenOptions::new().open_bytes(refused).unwrap();
    assert!(r.object("v").unwrap().skipped().is_none());
    let e = r.object("v").unwrap().bytes().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert_eq!(&r.object("a").unwrap().bytes().unwrap()[..], &[1, 2]);
    assert!(e.message().contains("format version 1.1"), "{e}");
}

/// An `.npz` is read by the rules of Python's zipfile, which numpy loads it with: the central
/// directory is found where the end record lies, so bytes inserted before it move every
/// offset (an entry then reads where its moved local header still is); a name that is not
/// flagged UTF-8 is code page 437; a record needing a zip above 6.3 refuses the archive. A
/// checkpoint keeps miniz's rules (torch's reader), which refuse the moved directory.
#[test]
fn an_npz_is_read_by_python_zipfile_rules() {
    let a = npy_entry("'|u1'", 1, 0);
    let zip = checkpoint::zip(&[("a.npy", &a), ("b.npy", &a)], &[]);
    let b_at = 30 + "a.npy".len() + a.len();
    assert_eq!(&zip[b_at..b_at + 4], b"PK\x03\x04");

    let mut moved = zip.clone();
    moved.splice(b_at..b_at, [0u8; 16]);
    let r = OpenOptions::new().open_bytes(moved).unwrap();
    assert_eq!(&r.object("b").unwrap().bytes().unwrap()[..], &[1, 2]);
    let e = r
        .object("a")
        .unwrap()
        .readable()
        .expect_err("a's header moved");
    assert!(e.to_string().contains("bad local header signature"), "{e}");

    let mut cp437 = zip.clone();
    let names: Vec<usize> = (0..cp437.len() - 5)
        .filter(|&i| &cp437[i..i + 5] == b"b.npy")
        .collect();
    assert_eq!(names.len(), 2, "local and central header");
    for i in names {
        cp437[i] = 0xED;
    }
    let r = OpenOptions::new().open_bytes(cp437).unwrap();
    assert_eq!(&r.object("\u{3c6}").unwrap().bytes().unwrap()[..], &[1, 2]);

    let mut newer = zip.clone();
    let central = (0..newer.len() - 4)
        .find(|&i| &newer[i..i + 4] == b"PK\x01\x02")
        .unwrap();
    newer[central + 6] = 64;
    let e = OpenOptions::new()
        .open_bytes(newer)
        .map(|_| ())
        .expect_err("needs zip 6.4");
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(e.message().contains("zip version 6.4"), "{e}");

    // The end record's disk numbers and entry counts zipfile never reads (miniz refuses a
    // checkpoint with these: fixtures/invalid/zip_*.pt).
    let mut counts = zip.clone();
    let eocd = counts.len() - 22;
    assert_eq!(&counts[eocd..eocd + 4], b"PK\x05\x06");
    counts[eocd + 4] = 1; // this disk's number
    counts[eocd + 8..eocd + 12].copy_from_slice(&[0x60, 0xEA, 0x60, 0xEA]); // 60000 records
    let r = OpenOptions::new().open_bytes(counts).unwrap();
    assert_eq!(&r.object("a").unwrap().bytes().unwrap()[..], &[1, 2]);
    assert_eq!(&r.object("b").unwrap().bytes().unwrap()[..], &[1, 2]);

    // The last record's name runs past the directory: zipfile reads it short ("b.npy",
    // all that is left), which its local header matches.
    let mut long_name = zip.clone();
    let last = (0..long_name.len() - 4)
        .rfind(|&i| &long_name[i..i + 4] == b"PK\x01\x02")
        .unwrap();
    long_name[last + 28] += 100;
    let r = OpenOptions::new().open_bytes(long_name).unwrap();
    assert_eq!(&r.object("b").unwrap().bytes().unwrap()[..], &[1, 2]);

    // A checkpoint, read only with the `torch` feature.
    if cfg!(not(feature = "torch")) {
        return;
    }
    let pt = checkpoint::checkpoint(4, 0, &[4], &[1], false);
    let first_data = (30..pt.len() - 4)
        .find(|&i| &pt[i..i + 4] == b"PK\x03\x04")
        .unwrap();
    let mut moved_pt = pt.clone();
    moved_pt.splice(first_data..first_data, [0u8; 16]);
    assert!(ztensor::OpenOptions::new().open_bytes(pt).is_ok());
    let e = OpenOptions::new()
        .open_bytes(moved_pt)
        .map(|_| ())
        .expect_err("miniz's rules");
    assert!(e.to_string().contains("central directory"), "{e}");
}
