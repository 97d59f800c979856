//! Fuzz target: arbitrary bytes opened and read in full (seeded with the GGML files
//! make_ggml.py had llama.cpp and whisper.cpp write): every magic, the headers tried for an
//! unversioned file, aligned and unaligned records, dense and block tensors.
#![no_main]

mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| common::read_everything(data));
