//! Fuzz target: arbitrary bytes opened and read in full (seeded with the `.metadata` of the
//! distributed checkpoints torch wrote): the pickle machine on torch's dataclasses and the
//! records read from them (tensors, chunks, storage entries, data file names). Opened from
//! memory, a checkpoint's data files cannot be found: everything before that is exercised
//! (tests/torch_dcp.rs damages the data files).
#![no_main]

mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| common::read_everything(data));
