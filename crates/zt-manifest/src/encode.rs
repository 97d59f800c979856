//! Deterministic CBOR encoding: shortest integers and floats, maps in the order given.

use minicbor::Encoder;

use crate::value::Value;

pub(crate) type Enc = Encoder<Vec<u8>>;

// Writing into a Vec cannot fail; minicbor's Result is for fallible sinks.
pub(crate) fn ok<T, E: std::fmt::Debug>(r: Result<T, E>) {
    debug_assert!(r.is_ok(), "encoding into a Vec failed: {:?}", r.err());
}

pub(crate) fn text(e: &mut Enc, s: &str) {
    ok(e.str(s));
}

pub(crate) fn uint(e: &mut Enc, n: u64) {
    ok(e.u64(n));
}

/// Writes a float in the shortest CBOR width that keeps its exact value (NaN as half).
pub(crate) fn float(e: &mut Enc, f: f64) {
    let buf = e.writer_mut();
    let h = half::f16::from_f64(f);
    if f.is_nan() {
        buf.extend_from_slice(&[0xf9, 0x7e, 0x00]);
    } else if h.to_f64() == f {
        buf.push(0xf9);
        buf.extend_from_slice(&h.to_bits().to_be_bytes());
    } else if (f as f32) as f64 == f {
        buf.push(0xfa);
        buf.extend_from_slice(&(f as f32).to_bits().to_be_bytes());
    } else {
        buf.push(0xfb);
        buf.extend_from_slice(&f.to_bits().to_be_bytes());
    }
}

pub(crate) fn value(e: &mut Enc, v: &Value) {
    match v {
        Value::Integer(i) => ok(e.i128(*i)),
        Value::Float(f) => float(e, *f),
        Value::Text(s) => text(e, s),
        Value::Bytes(b) => ok(e.bytes(b)),
        Value::Bool(b) => ok(e.bool(*b)),
        Value::Null => ok(e.null()),
        Value::Array(a) => {
            ok(e.array(a.len() as u64));
            for x in a {
                value(e, x);
            }
        }
        Value::Map(m) => value_map(e, m),
        Value::Tag(t, x) => {
            ok(e.tag(minicbor::data::Tag::new(*t)));
            value(e, x);
        }
    }
}

pub(crate) fn value_map(e: &mut Enc, m: &std::collections::BTreeMap<String, Value>) {
    ok(e.map(m.len() as u64));
    for (k, x) in m {
        text(e, k);
        value(e, x);
    }
}
