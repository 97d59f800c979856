//! Fuzz target: arbitrary bytes as a v1 manifest and as a v0.1 index.
#![no_main]

use ztensor::manifest::{decode_index, DecodeLimits, Manifest};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(m) = Manifest::decode(data, 0, DecodeLimits::default()) {
        // What decodes must encode and decode to the same manifest.
        let again = Manifest::decode(&m.encode(), 0, DecodeLimits::default()).expect("re-decoding our own encoding");
        assert_eq!(again.objects.len(), m.objects.len());
    }
    let _ = decode_index(data, 0, DecodeLimits::default());
});
