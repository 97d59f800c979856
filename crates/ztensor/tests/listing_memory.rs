//! A safetensors header of many tensors costs memory in proportion to what the safetensors
//! crate itself needs to read it: no tree of JSON values beside the listing. One test in this
//! binary, under the counting allocator.

#[path = "support/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::{peak, Counting};

#[global_allocator]
static A: Counting = Counting;

/// Tensors in the header: enough that per-tensor costs dominate.
const TENSORS: usize = 200_000;

fn header_file() -> Vec<u8> {
    let mut header = String::from("{");
    for i in 0..TENSORS {
        let start = i * 4;
        header.push_str(&format!(
            r#""model.layers.{i}.weight":{{"dtype":"F32","shape":[1],"data_offsets":[{start},{}]}},"#,
            start + 4
        ));
    }
    header.pop();
    header.push('}');
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend(header.as_bytes());
    file.extend(vec![0u8; TENSORS * 4]);
    file
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
