//! Memory bounded by the file, case by case (issue 26's hostile files): a counting allocator
//! measures the peak of live heap bytes while each hostile file is opened and read. One test
//! in this binary, so nothing else allocates concurrently.
//!
//! - a broadcast of 24 stored bytes to 2 GiB is refused before anything is allocated, and
//!   `verify` never materializes it;
//! - a rank of 100,000 is refused at open, holding about the header;
//! - an honest compression bomb (a deflated checkpoint storage, a deflated `.npz` entry) is
//!   decoded once, into the buffer handed back: the peak is the decoded size plus a little,
//!   not twice it.

use ztensor::{ErrorKind, OpenOptions};

#[path = "support/counting_alloc.rs"]
mod counting_alloc;
#[path = "support/checkpoint.rs"]
mod support;

use counting_alloc::{peak, Counting};
use support::{checkpoint, zip};

#[global_allocator]
static A: Counting = Counting;

/// What reading one tensor may hold beside its decoded bytes: the inflater's window and
/// tables, the error and the listing's small vectors.
const ALLOWANCE: usize = 1 << 20;

/// An `.npy` of `n` little-endian i32s counting up.
fn npy(n: usize) -> Vec<u8> {
    let mut dict = format!("{{'descr': '<i4', 'fortran_order': False, 'shape': ({n},), }}");
    while (10 + dict.len() + 1) % 64 != 0 {
        dict.push(' ');
    }
    dict.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((dict.len() as u16).to_le_bytes());
    out.extend(dict.as_bytes());
    out.extend((0..n as i32).flat_map(|v| v.to_le_bytes()));
    out
}

/// A safetensors file of one f32 tensor of rank `rank`, every dimension 1.
fn safetensors_of_rank(rank: usize) -> Vec<u8> {
    let shape = vec!["1"; rank].join(",");
    let header = format!(r#"{{"t":{{"dtype":"F32","shape":[{shape}],"data_offsets":[0,4]}}}}"#);
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend(header.as_bytes());
    out.extend([0u8; 4]);
    out
}

#[test]
fn hostile_files_take_memory_in_proportion_to_what_they_store() {
    // The counter counts: a known allocation shows in the peak.
    let (probe, _) = peak(|| drop(std::hint::black_box(vec![1u8; 1 << 20])));
    assert!(probe >= 1 << 20, "{probe}");

    // Case 1: 6 stored i32s as (2^19, 2^10) with strides (0, 0): 2 GiB materialized.
    let broadcast = checkpoint(6, 0, &[1 << 19, 1 << 10], &[0, 0], false);
    let r = OpenOptions::new().open_bytes(broadcast).unwrap();
    let (held, read) = peak(|| r.object("t").unwrap().bytes().map(|b| b.len()));
    let e = read.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{e}");
    assert!(held < ALLOWANCE, "a refused broadcast held {held} bytes");
    let (held, verified) = peak(|| r.verify());
    assert!(verified.is_ok());
    assert!(held < ALLOWANCE, "verify held {held} bytes");

    // Case 5: a rank of 100,000 (a 600 kB header) is refused at open.
    let file = safetensors_of_rank(100_000);
    let len = file.len();
    let (held, opened) = peak(|| OpenOptions::new().open_bytes(file).map(|_| ()));
    let e = opened.unwrap_err();
    assert!(
        e.message().contains("exceeds the cap of 64 dimensions"),
        "{e}"
    );
    assert!(
        held < 4 * len + ALLOWANCE,
        "{held} bytes for a {len}-byte file"
    );

    // Case 6: honest bombs, decoded once.
    let elements = 1u64 << 20;
    let decoded = (elements * 4) as usize;
    let storage = checkpoint(elements, 0, &[elements], &[1], true);
    let r = OpenOptions::new().open_bytes(storage).unwrap();
    let (held, read) = peak(|| r.object("t").unwrap().bytes().map(|b| b.len()));
    assert_eq!(read.unwrap(), decoded);
    assert!(
        held <= decoded + ALLOWANCE,
        "a deflated storage of {decoded} bytes held {held} at the peak"
    );

    let elements = 4usize << 20;
    let decoded = elements * 4;
    let array = npy(elements);
    let npz = zip(&[("a.npy", &array)], &["a.npy"]);
    drop(array);
    let r = OpenOptions::new().open_bytes(npz).unwrap();
    let (held, read) = peak(|| r.object("a").unwrap().bytes().map(|b| b.len()));
    assert_eq!(read.unwrap(), decoded);
    assert!(
        held <= decoded + ALLOWANCE,
        "a deflated .npy of {decoded} bytes held {held} at the peak"
    );

    // Case 7: an ONNX model of 1,000,000 unnamed, empty initializers (two bytes each): listing
    // them would take hundreds of bytes apiece; it stops at the memory budget instead.
    #[cfg(feature = "onnx")]
    {
        let tensors = 1_000_000usize;
        let mut graph = Vec::with_capacity(2 * tensors);
        for _ in 0..tensors {
            graph.extend([0x2a, 0x00]);
        }
        let mut model = vec![0x08, 10, 0x3a];
        let mut n = graph.len();
        while n >= 0x80 {
            model.push((n as u8) | 0x80);
            n >>= 7;
        }
        model.push(n as u8);
        model.extend(graph);
        let len = model.len();
        let limits = ztensor::Limits {
            memory_budget: Some(16 << 20),
            ..Default::default()
        };
        let (held, opened) = peak(|| {
            OpenOptions::new()
                .limits(limits)
                .open_bytes(model)
                .map(|r| r.len())
        });
        let e = opened.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{e}");
        assert!(e.message().contains("memory budget"), "{e}");
        assert!(
            held < len + (16 << 20) + 4 * ALLOWANCE,
            "{held} bytes for a {len}-byte model"
        );
    }
}
