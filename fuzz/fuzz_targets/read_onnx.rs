//! Fuzz target: arbitrary bytes opened and read in full (seeded with the ONNX models onnx
//! wrote): the protobuf walker, subgraph recursion, typed-field decoding, sparse indices.
#![no_main]

mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| common::read_everything(data));
