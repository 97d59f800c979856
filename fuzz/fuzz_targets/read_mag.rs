//! Fuzz target: arbitrary bytes opened and read in full (seeded with the read_mag corpus).
#![no_main]

mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| common::read_everything(data));
