//! Fuzz target: arbitrary bytes as the archive a compressed DCP chunk decodes to, listed from
//! its front (`ztensor::fuzzing::list_torch_stream`): the walk over local headers, the pickle
//! that gives the storages' lengths, the search for small records' data descriptors, and the
//! archive's end after each record so closed. Seeded with the PyTorch checkpoints of the
//! fixtures (records with their sizes in their headers) and the archives the compressed
//! chunks of the distributed checkpoints decode to; tests/torch_dcp.rs damages compressed
//! chunks written by torch itself.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = ztensor::fuzzing::list_torch_stream(data);
});
