//! Fuzz target: arbitrary bytes opened and read in full, seeded with PyTorch checkpoints, zip
//! and legacy (the zip reader, the pickle machine, tensors over storages).
#![no_main]

mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| common::read_everything(data));
