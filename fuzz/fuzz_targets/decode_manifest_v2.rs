//! Fuzz target: arbitrary bytes as a zTensor v2 manifest (the strict deterministic-CBOR
//! reader and the v2 schema). Whatever decodes keeps the rules it was checked against.
#![no_main]

use ztensor::manifest::{check_name, decode_manifest_v2, DecodeLimits};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(m) = decode_manifest_v2(data, 0, DecodeLimits::default()) {
        for o in &m.objects {
            check_name(&o.name, "object").expect("a decoded name follows the name rules");
            assert!(!o.parts.is_empty(), "a decoded object has parts");
            for p in &o.parts {
                assert_eq!(p.encoding.is_some(), p.decoded_length.is_some());
            }
        }
    }
});
