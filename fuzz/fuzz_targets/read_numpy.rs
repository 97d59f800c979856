//! Fuzz target: arbitrary bytes opened and read in full, seeded with NumPy .npy and .npz files
//! (the .npy header parser, the zip reader, deflated entries).
#![no_main]

mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| common::read_everything(data));
