//! Fuzz target: arbitrary bytes opened and read in full (seeded with the Caffe models
//! make_caffe.py wrote): layers of both layouts, blob shapes old and new, packed values.
#![no_main]

mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| common::read_everything(data));
