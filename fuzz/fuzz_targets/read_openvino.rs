//! Fuzz target: arbitrary bytes opened and read in full (seeded with the `.xml` of the models
//! OpenVINO wrote): the XML walk, `Const` layers' attributes, shapes and sizes. Opened from
//! bytes, a model has no `.bin`: its constants are listed unreadable.
#![no_main]

mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| common::read_everything(data));
