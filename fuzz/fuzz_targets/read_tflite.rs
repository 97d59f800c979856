//! Fuzz target: arbitrary bytes opened and read in full (seeded with the models TensorFlow's
//! converter wrote): the FlatBuffer reader's tables, vtables, vectors and strings, buffers
//! inline and past the FlatBuffer, quantization parameters.
#![no_main]

mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| common::read_everything(data));
