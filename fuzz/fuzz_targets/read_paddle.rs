//! Fuzz target: arbitrary bytes opened and read in full (seeded with the inference
//! parameters Paddle wrote): tensor headers, LoD levels, data lengths. The program beside a
//! file is not fuzzed here: the bytes are opened alone, so their tensors are named by place.
#![no_main]

mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| common::read_everything(data));
