//! Fuzz target: arbitrary bytes opened and read in full (seeded with the pickles of NumPy
//! arrays Paddle and Python wrote, protocols 2 to 5): the pickle machine's NumPy
//! constructions, byte strings left in the file, latin-1 text, the walk.
#![no_main]

mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| common::read_everything(data));
