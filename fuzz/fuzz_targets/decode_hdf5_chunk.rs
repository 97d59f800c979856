//! Fuzz target: an HDF5 chunk through a filter pipeline of up to three of the filters we
//! decode (Blosc, Blosc2, bitshuffle, scale-offset, szip, LZF, LZ4, bzip2, zstd, deflate,
//! shuffle, fletcher32, nbit), with any parameters, into a small 1-d or 2-d dataset
//! (`ztensor::fuzzing::hdf5_chunk_input` says how the bytes are read). Seeded by `cargo xtask
//! fuzz` with the chunks of the HDF5 fixtures.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let (table, stored) = ztensor::fuzzing::hdf5_chunk_input(data);
    let _ = ztensor::fuzzing::decode_hdf5_chunks(&table, stored, 16 << 20);
});
