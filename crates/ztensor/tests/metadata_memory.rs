//! Metadata that a file writes in a byte a value, and that would take tens of bytes each in
//! memory: attribute values are charged against `DecodeLimits::max_value_bytes` (256 MiB by
//! default, raised by the memory budget), a `.mag` manifest's tensor entries against the
//! listing budget, as they are built. A counting allocator measures the peak of live heap
//! bytes; one test in this binary, so nothing else allocates concurrently.

use ztensor::manifest::{DecodeLimits, Value};
use ztensor::{ErrorKind, Limits, OpenOptions, Version};

#[path = "support/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::{peak, Counting};

#[global_allocator]
static A: Counting = Counting;

const MIB: usize = 1 << 20;

/// A GGUF v3 file of no tensors and one metadata entry: an array of `n` u8 zeros.
fn gguf_of_zeros(n: u64) -> Vec<u8> {
    let mut out = b"GGUF".to_vec();
    out.extend(3u32.to_le_bytes());
    out.extend(0u64.to_le_bytes()); // tensors
    out.extend(1u64.to_le_bytes()); // metadata entries
    out.extend(4u64.to_le_bytes());
    out.extend(b"bomb");
    out.extend(9u32.to_le_bytes()); // array
    out.extend(0u32.to_le_bytes()); // of u8
    out.extend(n.to_le_bytes());
    out.resize(out.len() + n as usize, 0);
    out
}

/// A GGUF v3 file of `n` one-element f32 tensor infos, all at offset 0, and no data.
fn gguf_of_tensor_infos(n: u32) -> Vec<u8> {
    let mut out = b"GGUF".to_vec();
    out.extend(3u32.to_le_bytes());
    out.extend(u64::from(n).to_le_bytes()); // tensors
    out.extend(0u64.to_le_bytes()); // metadata entries
    for i in 0..n {
        let name = format!("{i:x}");
        out.extend((name.len() as u64).to_le_bytes());
        out.extend(name.as_bytes());
        out.extend(1u32.to_le_bytes()); // dimensions
        out.extend(1u64.to_le_bytes());
        out.extend(0u32.to_le_bytes()); // f32
        out.extend(0u64.to_le_bytes()); // offset
    }
    out
}

/// A `.mag` version 300 file whose manifest is `json`, with no data.
fn mag_v300(json: &str) -> Vec<u8> {
    let meta_offset = 44u64;
    let meta_end = meta_offset + json.len() as u64;
    let blob_offset = meta_end.next_multiple_of(4096);
    let mut out = b"MAG!".to_vec();
    out.extend(300u32.to_le_bytes());
    out.extend(0u32.to_le_bytes()); // aux
    for v in [meta_offset, json.len() as u64, blob_offset, 0] {
        out.extend(v.to_le_bytes());
    }
    out.extend(json.as_bytes());
    out.resize(blob_offset as usize, 0);
    out
}

/// A version 300 manifest with `usr_metadata` and `tensor_map` given as JSON text.
fn manifest(usr_metadata: &str, tensor_map: &str) -> String {
    format!(
        r#"{{"manifest_ver":1,"timestamp":"","magnetron_ver":"","snapshot_ver":"","usr_metadata":{usr_metadata},"tensor_map":{tensor_map}}}"#
    )
}

fn with_value_cap(bytes: u64) -> OpenOptions {
    OpenOptions::new().limits(Limits {
        decode: DecodeLimits {
            max_value_bytes: bytes,
            ..DecodeLimits::default()
        },
        ..Limits::default()
    })
}

/// Opens a copy of `file` with a cap of `cap` bytes on attribute values, which must refuse
/// it as over a limit: the peak of live heap bytes the open added, and the error.
fn refused_with_value_cap(cap: u64, file: &[u8]) -> (usize, ztensor::Error) {
    let copy = file.to_vec();
    let (held, result) = peak(|| with_value_cap(cap).open_bytes(copy).map(drop));
    let e = result.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{e}");
    (held, e)
}

#[test]
fn metadata_takes_memory_within_its_caps() {
    // GGUF: 16 M one-byte values would be 512 MiB of values. Refused by the default cap
    // before the array is allocated, with where and how to raise it.
    let n = 16 << 20;
    let bomb = gguf_of_zeros(n);
    let (held, result) = peak(|| OpenOptions::new().open_bytes(bomb).map(drop));
    let e = result.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{e}");
    assert_eq!(
        e.message(),
        "the attribute values would take more than the memory budget of 268435456 bytes \
         (raise it: DecodeLimits::max_value_bytes, Limits::memory_budget, zt --max-memory, \
         ztio.open(max_memory=...))"
    );
    assert_eq!(e.offset(), Some(44), "at the array's length");
    assert!(held < 4 * MIB, "held {held} bytes");

    // The same kind of file within a raised cap opens, holding about what it was allowed.
    let small = gguf_of_zeros(100_000);
    let node = std::mem::size_of::<Value>();
    let copy = small.clone();
    let (held, result) = peak(|| with_value_cap(8 * MIB as u64).open_bytes(copy));
    let reader = result.unwrap();
    assert_eq!(
        reader.attributes()["bomb"],
        Value::Array(vec![0u8.into(); 100_000])
    );
    assert!(held < 100_000 * node + 2 * MIB, "held {held} bytes");
    drop(reader);
    let e = with_value_cap(1 << 20)
        .open_bytes(small)
        .map(drop)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{e}");
    // The memory budget raises the cap, never lowers it.
    let raised = OpenOptions::new().memory_budget(1 << 20);
    assert!(raised.open_bytes(gguf_of_zeros(100_000)).is_ok());

    // GGUF: a million tensor infos of 30 bytes, each about 500 in the listing, against a
    // listing budget of 16 MiB.
    let file = gguf_of_tensor_infos(1 << 20);
    let tight = OpenOptions::new().memory_budget(16 << 20);
    let (held, result) = peak(|| tight.open_bytes(file).map(drop));
    let e = result.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{e}");
    assert_eq!(
        e.message(),
        "listing the file's tensors would take more than the memory budget of 16777216 bytes \
         (raise it: Limits::memory_budget, zt --max-memory, ztio.open(max_memory=...))"
    );
    assert_eq!(e.offset(), Some(8), "at the tensor count");
    assert!(held < 4 * MIB, "held {held} bytes");

    // `.mag` version 300: `usr_metadata` of a million zeros, two bytes each in the JSON.
    let zeros = vec!["0"; 1 << 20].join(",");
    let file = mag_v300(&manifest(&format!(r#"{{"z":[{zeros}]}}"#), "{}"));
    let (held, e) = refused_with_value_cap(4 * MIB as u64, &file);
    assert!(
        e.message()
            .starts_with("the attribute values would take more than"),
        "{e}"
    );
    assert!(held < 4 * MIB + 2 * MIB, "held {held} bytes");
    let reader = with_value_cap(64 * MIB as u64).open_bytes(file).unwrap();
    assert!(matches!(&reader.attributes()["z"], Value::Array(a) if a.len() == 1 << 20));
    drop(reader);

    // Values of keys nobody uses count too (the entries' unused keys are kept to refuse
    // repeats): a tensor entry of a million unused keys.
    let keys: Vec<String> = (0..1 << 20).map(|i| format!(r#""k{i}":0"#)).collect();
    let map = format!(r#"{{"t":{{{}}}}}"#, keys.join(","));
    let file = mag_v300(&manifest("{}", &map));
    let e = with_value_cap(4 * MIB as u64)
        .open_bytes(file)
        .map(drop)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{e}");

    // `.mag` version 300: a million tensor entries of seven bytes, each about 150 in memory,
    // against a listing budget of 16 MiB.
    let entries: Vec<String> = (0..1 << 20).map(|i| format!(r#""{i:x}":{{}}"#)).collect();
    let file = mag_v300(&manifest("{}", &format!("{{{}}}", entries.join(","))));
    let tight = OpenOptions::new().limits(Limits {
        memory_budget: Some(16 * MIB as u64),
        ..Limits::default()
    });
    let copy = file.clone();
    let (held, result) = peak(|| tight.open_bytes(copy).map(drop));
    let e = result.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{e}");
    assert_eq!(
        e.message(),
        "the manifest's tensor entries would take more than the memory budget of 16777216 \
         bytes (raise it: Limits::memory_budget, zt --max-memory, ztio.open(max_memory=...))"
    );
    assert!(held < file.len() + 16 * MIB + 8 * MIB, "held {held} bytes");
    // By default (a budget of twice the file plus 64 MiB) the parse goes on to the entries'
    // own fault.
    let e = OpenOptions::new().open_bytes(file).map(drop).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidFile, "{e}");
    assert!(e.message().contains("has no \"shape\""), "{e}");

    // zTensor v1.2 and v2: attribute arrays of one-byte CBOR integers.
    for version in [Version::V1_2, Version::V2] {
        let mut w = ztensor::Writer::new_version(Vec::new(), version).unwrap();
        w.set_attribute("z", Value::Array(vec![0u8.into(); 1 << 20]));
        let file = w.finish().unwrap();
        let (held, _) = refused_with_value_cap(4 * MIB as u64, &file);
        assert!(
            held < file.len() + 4 * MIB + 2 * MIB,
            "{version:?}: held {held} bytes"
        );
        assert!(OpenOptions::new().open_bytes(file).is_ok(), "{version:?}");
    }
}
