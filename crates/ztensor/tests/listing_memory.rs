//! A safetensors header of many tensors costs memory in proportion to what the safetensors
//! crate itself needs to read it: no tree of JSON values beside the listing. One test in this
//! binary, under the counting allocator.

#[path = "support/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::{peak, Counting};

#[path = "support/many_tensors.rs"]
mod many_tensors;

use many_tensors::safetensors_of_scalars;

#[global_allocator]
static A: Counting = Counting;

/// Tensors in the header: enough that per-tensor costs dominate.
const TENSORS: usize = 200_000;

fn header_file() -> Vec<u8> {
    safetensors_of_scalars(TENSORS, |i| format!("model.layers.{i}.weight"))
}

#[test]
fn a_header_of_many_tensors_costs_about_what_the_safetensors_crate_needs() {
    let file = header_file();
    let (crate_peak, parsed) = peak(|| safetensors::SafeTensors::read_metadata(&file).map(drop));
    parsed.unwrap();
    let (ours, reader) = peak(|| ztensor::OpenOptions::new().open_bytes(file.clone()));
    let reader = reader.unwrap();
    assert_eq!(reader.len(), TENSORS);
    // The file itself (opened from bytes) is held by the reader: not the listing's cost.
    let ours = ours - file.len();
    eprintln!("safetensors crate: {crate_peak} bytes; ours: {ours} bytes");
    assert!(
        ours <= crate_peak,
        "ours {ours} bytes, the safetensors crate {crate_peak}"
    );
}
