//! Fuzz target: arbitrary bytes opened and read in full (seeded with the read_zt corpus).
#![no_main]

mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| common::read_everything(data));
