//! Fuzz target: arbitrary bytes opened and read in full, seeded with zTensor v2 files only
//! (the footer, the deterministic-CBOR manifest, seek tables and v2 layouts).
#![no_main]

mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| common::read_everything(data));
