//! Fuzz target: arbitrary bytes opened and read in full (seeded with the TensorFlow
//! checkpoint indexes TensorFlow wrote): the LevelDB table (footer, block handles, prefix-shared
//! keys, restart points, block CRCs) and the entries' protobuf. Opened from memory, a
//! checkpoint's data files cannot be found: everything before that is what is exercised.
#![no_main]

mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| common::read_everything(data));
