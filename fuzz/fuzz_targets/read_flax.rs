//! Fuzz target: arbitrary bytes opened and read in full (seeded with the Flax checkpoints
//! flax and transformers wrote): the msgpack walker, nested extensions, dtype names, chunked
//! arrays, attribute leaves.
#![no_main]

mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| common::read_everything(data));
