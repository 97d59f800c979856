//! Fuzz target: arbitrary bytes opened and read in full, dequantization included (seeded with
//! the GGUF fixtures).
#![no_main]

mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| common::read_everything(data));
