//! Fuzz target: arbitrary bytes opened and read in full (seeded with the HDF5 files h5py and
//! Keras wrote): superblocks, object headers and their continuations, B-trees, heaps,
//! dense link storage, attributes.
#![no_main]

mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| common::read_everything(data));
