//! An allocator that says no to the list of a file's objects is an `OutOfMemory` error, not an
//! abort: the lists whose length a file sets (a few hundred bytes an object) are reserved
//! fallibly, for every kind. A global allocator that refuses, while armed, any one allocation
//! over 4 MiB; one test in this binary, so nothing else allocates concurrently.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use ztensor::{ErrorKind, OpenOptions, Version};

#[path = "support/many_tensors.rs"]
mod many_tensors;

use many_tensors::safetensors_of_scalars;

#[path = "support/checkpoint.rs"]
mod support;

/// Refuses allocations over [`LARGEST`] bytes while [`ARMED`].
struct Refusing;

static ARMED: AtomicBool = AtomicBool::new(false);
const LARGEST: usize = 4 << 20;

// SAFETY: defers to the system allocator, or returns null (a refusal the caller must handle).
unsafe impl GlobalAlloc for Refusing {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if ARMED.load(Relaxed) && l.size() > LARGEST {
            return std::ptr::null_mut();
        }
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        if ARMED.load(Relaxed) && new > LARGEST {
            return std::ptr::null_mut();
        }
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static A: Refusing = Refusing;

/// Tensors per file: their list takes some 7 MiB, over what the allocator grants at once.
const TENSORS: usize = 20_000;

/// A GGUF v3 file of one-element f32 tensors, each on its own 32-byte boundary.
fn gguf() -> Vec<u8> {
    let mut out = b"GGUF".to_vec();
    out.extend(3u32.to_le_bytes());
    out.extend((TENSORS as u64).to_le_bytes());
    out.extend(0u64.to_le_bytes());
    for i in 0..TENSORS {
        let name = format!("t{i}");
        out.extend((name.len() as u64).to_le_bytes());
        out.extend(name.as_bytes());
        out.extend(1u32.to_le_bytes());
        out.extend(1u64.to_le_bytes());
        out.extend(0u32.to_le_bytes());
        out.extend((i as u64 * 32).to_le_bytes());
    }
    out.resize(out.len().next_multiple_of(32) + TENSORS * 32, 0);
    out
}

/// An `.npz` of one-element f32 arrays, stored.
fn npz() -> Vec<u8> {
    let mut npy = b"\x93NUMPY\x01\x00".to_vec();
    let mut dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }".to_owned();
    while (10 + dict.len() + 1) % 64 != 0 {
        dict.push(' ');
    }
    dict.push('\n');
    npy.extend((dict.len() as u16).to_le_bytes());
    npy.extend(dict.as_bytes());
    npy.extend(0f32.to_le_bytes());
    let names: Vec<String> = (0..TENSORS).map(|i| format!("t{i}.npy")).collect();
    let entries: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &npy[..])).collect();
    support::zip(&entries, &[])
}

fn zt(version: Version) -> Vec<u8> {
    let mut w = ztensor::Writer::new_version(Vec::new(), version).unwrap();
    for i in 0..TENSORS {
        w.add(&format!("t{i}"), &[1], &[0f32]).unwrap();
    }
    w.finish().unwrap()
}

#[test]
fn a_refused_object_list_is_an_out_of_memory_error() {
    let files = [
        (
            "safetensors",
            safetensors_of_scalars(TENSORS, |i| format!("t{i}")),
        ),
        ("gguf", gguf()),
        ("npz", npz()),
        ("v1.2", zt(Version::V1_2)),
        ("v2", zt(Version::V2)),
    ];
    for (kind, file) in files {
        // Within what the allocator grants, the file opens.
        let r = OpenOptions::new().open_bytes(file.clone()).unwrap();
        assert_eq!(r.objects().len(), TENSORS, "{kind}");
        drop(r);
        ARMED.store(true, Relaxed);
        let result = OpenOptions::new().open_bytes(file).map(drop);
        ARMED.store(false, Relaxed);
        let e = result.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::OutOfMemory, "{kind}: {e}");
        assert!(e.message().starts_with("cannot allocate"), "{kind}: {e}");
        assert_eq!(e.object(), None, "{kind}: not one object's fault: {e}");
    }
}
