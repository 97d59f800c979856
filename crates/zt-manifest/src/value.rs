//! Attribute values: a tree that holds every CBOR kind real files use, and round-trips it.

use std::collections::BTreeMap;

/// Attributes of a file or object: text keys, sorted bytewise (the order v1.2 writers use).
pub type Attributes = BTreeMap<String, Value>;

/// One attribute value.
///
/// Integers keep the whole CBOR range (`-2^64 ..= 2^64-1`) in an `i128`. Floats are kept as
/// `f64`, which holds every CBOR half, single and double exactly; the encoder writes each in the
/// shortest of those widths that keeps its value. Map keys are text: zTensor attribute maps are
/// name-keyed, and a non-text key is refused on read.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// An integer.
    Integer(i128),
    /// A floating-point number.
    Float(f64),
    /// UTF-8 text.
    Text(String),
    /// A byte string.
    Bytes(Vec<u8>),
    /// A boolean.
    Bool(bool),
    /// CBOR `null`.
    Null,
    /// An array.
    Array(Vec<Value>),
    /// A map with text keys.
    Map(BTreeMap<String, Value>),
    /// A tagged value (CBOR major type 6), kept as it was.
    Tag(u64, Box<Value>),
}

/// What decoded attribute values may still take in memory ([`crate::DecodeLimits::max_value_bytes`]),
/// charged by every reader that builds [`Value`]s from a file: the CBOR manifests here, and
/// the GGUF and `.mag` readers beside them.
///
/// Each value costs its node (`size_of::<Value>()`) plus its text's or bytes' length, each map
/// entry its key. That is what the tree holds, give or take the allocator's rounding, so a
/// file cannot turn a few hundred MB of one-byte values into tens of GB of them.
///
/// ```
/// use zt_manifest::{Value, ValueBudget};
///
/// let node = std::mem::size_of::<Value>() as u64;
/// let mut budget = ValueBudget::new(10 * node);
/// budget.nodes(9).unwrap();
/// budget.node().unwrap();
/// let e = budget.payload(1).unwrap_err();
/// assert!(e.to_string().contains("the attribute values would take more than"));
/// ```
#[derive(Debug, Clone)]
pub struct ValueBudget(zt_container::internal::MemoryBudget);

impl ValueBudget {
    /// A budget of `cap` bytes.
    pub fn new(cap: u64) -> Self {
        ValueBudget(zt_container::internal::MemoryBudget::raised_by(
            cap,
            "the attribute values",
            "DecodeLimits::max_value_bytes, Limits::memory_budget, zt --max-memory, \
             ztio.open(max_memory=...)",
        ))
    }

    /// Charges one value's node.
    pub fn node(&mut self) -> crate::Result<()> {
        self.0.charge(std::mem::size_of::<Value>() as u64)
    }

    /// Charges `count` values' nodes at once (an array's elements, before its list is
    /// allocated).
    pub fn nodes(&mut self, count: u64) -> crate::Result<()> {
        self.0
            .charge(count.saturating_mul(std::mem::size_of::<Value>() as u64))
    }

    /// Charges `len` bytes of a value's text or bytes.
    pub fn payload(&mut self, len: usize) -> crate::Result<()> {
        self.0.charge(len as u64)
    }

    /// Charges one map entry's key of `len` bytes (its value is charged as a node).
    pub fn key(&mut self, len: usize) -> crate::Result<()> {
        self.0.charge((std::mem::size_of::<String>() + len) as u64)
    }

    /// What has been charged so far.
    pub fn used(&self) -> u64 {
        self.0.used()
    }
}

/// Smallest and largest integer CBOR can hold.
pub const CBOR_INT_MIN: i128 = -(1i128 << 64);
/// Largest integer CBOR can hold.
pub const CBOR_INT_MAX: i128 = (1i128 << 64) - 1;

impl Value {
    /// The text, if this is text.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Text(s) => Some(s),
            _ => None,
        }
    }

    /// The integer, if this is an integer that fits an `i64`.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Integer(i) => i64::try_from(*i).ok(),
            _ => None,
        }
    }

    /// The integer, if this is a non-negative integer that fits a `u64`.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Integer(i) => u64::try_from(*i).ok(),
            _ => None,
        }
    }

    /// The number as `f64`, if this is a float or an integer.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Float(f) => Some(*f),
            Value::Integer(i) => Some(*i as f64),
            _ => None,
        }
    }

    /// A short name of the kind, for messages.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Value::Integer(_) => "integer",
            Value::Float(_) => "float",
            Value::Text(_) => "text",
            Value::Bytes(_) => "bytes",
            Value::Bool(_) => "bool",
            Value::Null => "null",
            Value::Array(_) => "array",
            Value::Map(_) => "map",
            Value::Tag(..) => "tag",
        }
    }
}

macro_rules! from_int {
    ($($t:ty)*) => {$(
        impl From<$t> for Value {
            fn from(v: $t) -> Self {
                Value::Integer(v.into())
            }
        }
    )*};
}
from_int!(i8 i16 i32 i64 u8 u16 u32 u64);

impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Float(v)
    }
}
impl From<f32> for Value {
    fn from(v: f32) -> Self {
        Value::Float(v.into())
    }
}
impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Bool(v)
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Text(v.to_owned())
    }
}
impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Text(v)
    }
}
impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Self {
        Value::Bytes(v)
    }
}
impl From<Vec<Value>> for Value {
    fn from(v: Vec<Value>) -> Self {
        Value::Array(v)
    }
}
