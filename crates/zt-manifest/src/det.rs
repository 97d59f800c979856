//! A strict reader of deterministic CBOR (RFC 8949 §4.2.1, "core deterministic"), as zTensor
//! v2 manifests must be encoded: one encoding per value, so two readers can never see two
//! different manifests in the same bytes.
//!
//! Refused, each with the absolute file offset of the item: heads longer than needed,
//! indefinite lengths, reserved heads, tags, simple values other than false/true/null, floats
//! that fit a shorter width (and NaNs other than the half-precision `7e00`), map keys that are
//! not in strictly increasing bytewise order of their encodings (an equal key is a duplicate),
//! invalid UTF-8, lengths that run past the input, nesting deeper than the cap, and trailing
//! bytes. The reader never recurses past the cap and never allocates from a declared length:
//! every item costs at least one byte of input, and lengths are checked against what is left.

use std::collections::BTreeMap;

use zt_container::{Error, Result};

use crate::value::{Value, ValueBudget};

/// The deepest nesting a v2 manifest may have: the root is at depth 0, a value at depth 33
/// is refused.
pub const MAX_DEPTH_V2: usize = 32;

/// `bytes` as text, if they are UTF-8.
///
/// Nearly every text of a manifest is a short ASCII key, name, type or digest (eleven per
/// object of a v2 manifest), where `std::str::from_utf8`'s general loop cost about 80
/// instructions a call, an eighth of a whole open: ASCII is checked a word at a time first.
pub(crate) fn utf8(bytes: &[u8]) -> Option<&str> {
    if bytes.is_ascii() {
        // SAFETY: every byte is below 0x80, and ASCII is UTF-8.
        Some(unsafe { std::str::from_utf8_unchecked(bytes) })
    } else {
        std::str::from_utf8(bytes).ok()
    }
}

/// One item's head: its major type and argument.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Head {
    pub major: u8,
    /// Additional information (0..=27 after checking).
    pub info: u8,
    pub arg: u64,
}

/// A cursor over a deterministic CBOR item, reporting errors at absolute file offsets.
pub(crate) struct Det<'b> {
    input: &'b [u8],
    pos: usize,
    base: u64,
    max_depth: usize,
    /// What the values built so far take.
    values: ValueBudget,
}

impl<'b> Det<'b> {
    /// A reader over `input`, whose first byte is at absolute offset `base` in the file,
    /// nesting at most `max_depth` deep and building values of at most `max_value_bytes`.
    pub fn new(input: &'b [u8], base: u64, max_depth: usize, max_value_bytes: u64) -> Self {
        Det {
            input,
            pos: 0,
            base,
            max_depth,
            values: ValueBudget::new(max_value_bytes),
        }
    }

    /// Charges a map key of `len` bytes, read at `at`, to the values' budget.
    pub fn charge_key(&mut self, len: usize, at: u64) -> Result<()> {
        self.values.key(len).map_err(|e| e.at(at))
    }

    /// Absolute offset of the next byte.
    pub fn offset(&self) -> u64 {
        self.base.saturating_add(self.pos as u64)
    }

    /// The encoded bytes between two positions.
    pub fn slice(&self, from: usize, to: usize) -> &'b [u8] {
        self.input.get(from..to).unwrap_or_default()
    }

    /// An error at the next byte.
    pub fn error(&self, msg: impl Into<String>) -> Error {
        Error::invalid(msg).at(self.offset())
    }

    /// Fails unless every byte has been consumed.
    pub fn expect_end(&self) -> Result<()> {
        let left = self.input.len().saturating_sub(self.pos);
        if left == 0 {
            Ok(())
        } else {
            Err(self.error(format!("CBOR: {left} trailing bytes after the manifest")))
        }
    }

    fn byte(&mut self) -> Result<u8> {
        let b = *self
            .input
            .get(self.pos)
            .ok_or_else(|| self.error("CBOR item runs past the end of the manifest"))?;
        self.pos += 1;
        Ok(b)
    }

    fn take(&mut self, n: u64) -> Result<&'b [u8]> {
        let left = self.input.len().saturating_sub(self.pos);
        match usize::try_from(n).ok().filter(|&n| n <= left) {
            Some(n) => {
                let s = self.input.get(self.pos..self.pos + n).unwrap_or_default();
                self.pos += n;
                Ok(s)
            }
            None => Err(self.too_long(n, left as u64)),
        }
    }

    /// The error for a length of `n` where `left` bytes are left (out of line, as are the
    /// other errors: their formatting would weigh on every read).
    #[cold]
    #[inline(never)]
    fn too_long(&self, n: u64, left: u64) -> Error {
        self.error(format!(
            "CBOR length {n} is larger than the {left} bytes left in the manifest"
        ))
    }

    /// Reads a head, refusing reserved and indefinite forms and non-shortest arguments.
    /// (Floats of major type 7 come back with their raw bits as the argument.)
    #[inline]
    pub fn head(&mut self) -> Result<Head> {
        // Most heads in a manifest are one byte: a small number, a short text, a small map
        // or array. The rest, and every error, take the long way (kept out of line so this
        // path stays a few instructions).
        if let Some((major, info)) = self.one_byte_head() {
            self.pos += 1;
            return Ok(Head {
                major,
                info,
                arg: u64::from(info),
            });
        }
        self.head_in_full()
    }

    /// The major type and argument of the next head when it is one byte of a number, text,
    /// bytes, array or map (not consumed); `None` for every other head.
    #[inline(always)]
    fn one_byte_head(&self) -> Option<(u8, u8)> {
        let b = *self.input.get(self.pos)?;
        let (major, info) = (b >> 5, b & 0x1f);
        (info < 24 && major < 6).then_some((major, info))
    }

    /// [`Det::head`] for every head: longer arguments, floats and simple values, and errors.
    #[inline(never)]
    fn head_in_full(&mut self) -> Result<Head> {
        let at = self.offset();
        let b = self.byte()?;
        let (major, info) = (b >> 5, b & 0x1f);
        let arg = match info {
            0..=23 => u64::from(info),
            24..=27 => {
                let n = 1u64 << (info - 24);
                let bytes = self.take(n)?;
                let v = bytes.iter().fold(0u64, |a, &x| a << 8 | u64::from(x));
                // Floats (major 7, 25..=27) are judged by their value instead.
                let shortest = match info {
                    24 => v >= 24,
                    25 => v > 0xff,
                    26 => v > 0xffff,
                    _ => v > 0xffff_ffff,
                };
                if major != 7 && !shortest {
                    return Err(Error::invalid(format!(
                        "CBOR head is not the shortest for its argument {v} (not deterministic)"
                    ))
                    .at(at));
                }
                if major == 7 && info == 24 {
                    return Err(Error::invalid(format!(
                        "CBOR simple value {v} is not allowed (only false, true, null and floats)"
                    ))
                    .at(at));
                }
                v
            }
            31 => {
                return Err(Error::invalid(
                    "CBOR indefinite length is not allowed in a v2 manifest",
                )
                .at(at))
            }
            _ => {
                return Err(Error::invalid(format!(
                    "CBOR reserved additional information {info} (head byte {b:#04x})"
                ))
                .at(at))
            }
        };
        if major == 6 {
            return Err(Error::invalid("CBOR tags are not allowed in a v2 manifest").at(at));
        }
        if major == 7 && info < 24 && !(20..=22).contains(&info) {
            return Err(Error::invalid(format!(
                "CBOR simple value {info} is not allowed (only false, true, null and floats)"
            ))
            .at(at));
        }
        Ok(Head { major, info, arg })
    }

    /// The next head without consuming it.
    pub fn peek_major(&self) -> Option<u8> {
        self.input.get(self.pos).map(|b| b >> 5)
    }

    /// A text string.
    pub fn text(&mut self, what: &str) -> Result<&'b str> {
        let at = self.offset();
        let n = self.arg_of(3, what, "text", at)?;
        let bytes = self.take(n)?;
        utf8(bytes).ok_or_else(|| not_utf8(what, at))
    }

    /// An unsigned integer.
    pub fn uint(&mut self, what: &str) -> Result<u64> {
        let at = self.offset();
        self.arg_of(0, what, "an unsigned integer", at)
    }

    /// An array's length (checked against the input: every element costs a byte).
    pub fn array(&mut self, what: &str) -> Result<u64> {
        let at = self.offset();
        let n = self.arg_of(4, what, "an array", at)?;
        self.fits(n, 1)?;
        Ok(n)
    }

    /// A map's entry count (checked against the input: every entry costs two bytes).
    pub fn map(&mut self, what: &str) -> Result<u64> {
        let at = self.offset();
        let n = self.arg_of(5, what, "a map", at)?;
        self.fits(n, 2)?;
        Ok(n)
    }

    /// The argument of the next head, which must be of major type `major` (0 to 5); `what`
    /// and `want` name the item and its kind in the error.
    ///
    /// The one-byte head is read here and its argument handed back in a register. Going
    /// through [`Det::head`] built a `Head` on the stack byte by byte and read it back whole,
    /// which the CPU cannot forward from the stores: the stall was most of the time of
    /// `text`, `map` and `array` in profiles of a manifest of 100,000 objects.
    #[inline(always)]
    fn arg_of(&mut self, major: u8, what: &str, want: &str, at: u64) -> Result<u64> {
        match self.one_byte_head() {
            Some((found, info)) if found == major => {
                self.pos += 1;
                Ok(u64::from(info))
            }
            _ => self.arg_in_full(major, what, want, at),
        }
    }

    /// [`Det::arg_of`] for every other head, and for errors.
    #[inline(never)]
    fn arg_in_full(&mut self, major: u8, what: &str, want: &str, at: u64) -> Result<u64> {
        let h = self.head_in_full()?;
        if h.major != major {
            return Err(wrong_kind(what, want, h, at));
        }
        Ok(h.arg)
    }

    /// Refuses a count of items that cannot fit in the bytes left.
    fn fits(&self, count: u64, min_bytes: u64) -> Result<()> {
        let left = self.input.len().saturating_sub(self.pos) as u64;
        if count.saturating_mul(min_bytes) > left {
            return Err(self.too_long(count, left));
        }
        Ok(())
    }

    /// Walks the entries of a map of `n` entries, checking that the encoded keys increase
    /// strictly. `entry` gets the key (text, or `None` for any other kind, already read and
    /// checked) and must consume the value. The map itself is at `depth`.
    pub fn entries(
        &mut self,
        n: u64,
        depth: usize,
        what: &str,
        mut entry: impl FnMut(&mut Self, Option<&'b str>, u64) -> Result<()>,
    ) -> Result<()> {
        let mut prev: Option<&'b [u8]> = None;
        for _ in 0..n {
            let at = self.offset();
            let start = self.pos;
            let key = if self.peek_major() == Some(3) {
                Some(self.text("key")?)
            } else {
                self.skip(depth + 1)?;
                None
            };
            let encoded = self.slice(start, self.pos);
            if let Some(p) = prev {
                if p >= encoded {
                    return Err(misordered_key(p == encoded, key, encoded, what, at));
                }
            }
            prev = Some(encoded);
            entry(self, key, at)?;
        }
        Ok(())
    }

    fn check_depth(&self, depth: usize) -> Result<()> {
        if depth > self.max_depth {
            return Err(Error::invalid(format!(
                "CBOR nesting deeper than {} levels",
                self.max_depth
            ))
            .at(self.offset()));
        }
        Ok(())
    }

    /// Checks and skips one item at `depth`.
    pub fn skip(&mut self, depth: usize) -> Result<()> {
        self.item(depth, false).map(drop)
    }

    /// Reads one item at `depth` as a [`Value`]. Map keys inside values must be text (the
    /// attribute model is name-keyed).
    pub fn value(&mut self, depth: usize) -> Result<Value> {
        self.item(depth, true).map(|v| v.unwrap_or(Value::Null))
    }

    /// One item, checked; built into a value when `build`.
    fn item(&mut self, depth: usize, build: bool) -> Result<Option<Value>> {
        self.check_depth(depth)?;
        let at = self.offset();
        if build {
            self.values.node().map_err(|e| e.at(at))?;
        }
        let h = self.head()?;
        let v = match h.major {
            0 => Value::Integer(i128::from(h.arg)),
            1 => Value::Integer(-1 - i128::from(h.arg)),
            2 => {
                let bytes = self.take(h.arg)?;
                if build {
                    self.values.payload(bytes.len()).map_err(|e| e.at(at))?;
                }
                Value::Bytes(if build { bytes.to_vec() } else { Vec::new() })
            }
            3 => {
                let bytes = self.take(h.arg)?;
                let s = utf8(bytes)
                    .ok_or_else(|| Error::invalid("CBOR text is not valid UTF-8").at(at))?;
                if build {
                    self.values.payload(s.len()).map_err(|e| e.at(at))?;
                }
                Value::Text(if build { s.to_owned() } else { String::new() })
            }
            4 => {
                self.fits(h.arg, 1)?;
                let mut items = Vec::new();
                for _ in 0..h.arg {
                    let v = self.item(depth + 1, build)?;
                    if let Some(v) = v.filter(|_| build) {
                        items.push(v);
                    }
                }
                Value::Array(items)
            }
            5 => {
                self.fits(h.arg, 2)?;
                let mut m = BTreeMap::new();
                self.entries(h.arg, depth, "map", |r, key, key_at| {
                    let v = r.item(depth + 1, build)?;
                    if build {
                        let key = key.ok_or_else(|| {
                            Error::invalid("attribute map key is not text").at(key_at)
                        })?;
                        r.charge_key(key.len(), key_at)?;
                        m.insert(key.to_owned(), v.unwrap_or(Value::Null));
                    }
                    Ok(())
                })?;
                Value::Map(m)
            }
            _ => self.simple(h, at)?,
        };
        Ok(build.then_some(v))
    }

    /// Major type 7: false, true, null, and floats in their shortest exact width.
    fn simple(&self, h: Head, at: u64) -> Result<Value> {
        let not_shortest = |w: &str| {
            Error::invalid(format!(
                "CBOR float fits a shorter width than {w} (not deterministic)"
            ))
            .at(at)
        };
        Ok(match h.info {
            20 => Value::Bool(false),
            21 => Value::Bool(true),
            22 => Value::Null,
            25 => {
                let bits = h.arg as u16;
                let f = half::f16::from_bits(bits);
                if f.is_nan() && bits != 0x7e00 {
                    return Err(Error::invalid("CBOR NaN must be encoded as f9 7e00").at(at));
                }
                Value::Float(f64::from(f))
            }
            26 => {
                let f = f32::from_bits(h.arg as u32);
                if f.is_nan() {
                    return Err(Error::invalid("CBOR NaN must be encoded as f9 7e00").at(at));
                }
                if f64::from(half::f16::from_f32(f)) == f64::from(f) {
                    return Err(not_shortest("single"));
                }
                Value::Float(f64::from(f))
            }
            27 => {
                let f = f64::from_bits(h.arg);
                if f.is_nan() {
                    return Err(Error::invalid("CBOR NaN must be encoded as f9 7e00").at(at));
                }
                if f64::from(f as f32) == f {
                    return Err(not_shortest("double"));
                }
                Value::Float(f)
            }
            i => {
                return Err(Error::invalid(format!("CBOR simple value {i} is not allowed")).at(at))
            }
        })
    }
}

/// A key for an error message: the text, or the encoded bytes in hex.
fn show_key(key: Option<&str>, encoded: &[u8]) -> String {
    match key {
        Some(k) => format!("{k:?}"),
        None => encoded.iter().map(|b| format!("{b:02x}")).collect(),
    }
}

/// What kind of item a head starts, for messages.
/// "`what` must be `want`, found ...", at absolute offset `at` (out of line: errors are rare,
/// and their formatting would otherwise weigh on every read).
#[cold]
#[inline(never)]
fn wrong_kind(what: &str, want: &str, h: Head, at: u64) -> Error {
    Error::invalid(format!("{what} must be {want}, found {}", kind_name(h))).at(at)
}

/// A map key that repeats the one before it (`twice`) or sorts before it.
#[cold]
#[inline(never)]
fn misordered_key(twice: bool, key: Option<&str>, encoded: &[u8], what: &str, at: u64) -> Error {
    let key = show_key(key, encoded);
    let message = if twice {
        format!("duplicate key {key} in {what}")
    } else {
        format!("key {key} of {what} is out of order (deterministic CBOR sorts keys bytewise)")
    };
    Error::invalid(message).at(at)
}

/// "`what` is not valid UTF-8", at absolute offset `at`.
#[cold]
#[inline(never)]
fn not_utf8(what: &str, at: u64) -> Error {
    Error::invalid(format!("{what} is not valid UTF-8")).at(at)
}

fn kind_name(h: Head) -> &'static str {
    match (h.major, h.info) {
        (0, _) => "an unsigned integer",
        (1, _) => "a negative integer",
        (2, _) => "a byte string",
        (3, _) => "text",
        (4, _) => "an array",
        (5, _) => "a map",
        (7, 20 | 21) => "a boolean",
        (7, 22) => "null",
        _ => "a float",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_checked_on_both_paths() {
        assert_eq!(utf8(b""), Some(""));
        assert_eq!(utf8(b"shape"), Some("shape"));
        assert_eq!(
            utf8(b"layers.0.attention.wq.weight"),
            Some("layers.0.attention.wq.weight")
        );
        assert_eq!(
            utf8("b\u{e4}r \u{1f600}".as_bytes()),
            Some("b\u{e4}r \u{1f600}")
        );
        // A lone continuation byte, a cut sequence, an overlong encoding, a surrogate: each
        // after ASCII long enough to be checked by words.
        for bad in [
            &b"abcdefghijklmnop\x80"[..],
            b"abcdefghijklmnop\xc3",
            b"abcdefghijklmnop\xc0\xaf",
            b"abcdefghijklmnop\xed\xa0\x80",
            b"\xff",
        ] {
            assert_eq!(utf8(bad), None, "{bad:?}");
        }
    }

    proptest::proptest! {
        /// The ASCII shortcut answers as the standard library does, for any bytes (mostly
        /// ASCII, so both paths and every length around a word are taken).
        #[test]
        fn text_agrees_with_std(
            bytes in proptest::collection::vec(
                proptest::prop_oneof![9 => 0u8..0x80, 1 => proptest::num::u8::ANY],
                0..40,
            )
        ) {
            proptest::prop_assert_eq!(utf8(&bytes), std::str::from_utf8(&bytes).ok());
        }
    }

    fn value(b: &[u8]) -> Result<Value> {
        let mut d = Det::new(b, 100, MAX_DEPTH_V2, crate::DEFAULT_MAX_VALUE_BYTES);
        let v = d.value(0)?;
        d.expect_end()?;
        Ok(v)
    }

    fn err(b: &[u8]) -> String {
        value(b).unwrap_err().message().to_owned()
    }

    #[test]
    fn accepts_deterministic_items() {
        assert_eq!(value(b"\x17").unwrap(), Value::Integer(23));
        assert_eq!(value(b"\x18\x18").unwrap(), Value::Integer(24));
        assert_eq!(value(b"\x22").unwrap(), Value::Integer(-3));
        assert_eq!(
            value(b"\x1b\x00\x00\x01\x00\x00\x00\x00\x00").unwrap(),
            Value::Integer(1 << 40)
        );
        assert_eq!(value(b"\xf9\x34\x00").unwrap(), Value::Float(0.25));
        assert_eq!(
            value(b"\xfa\x3f\x00\x00\x10").unwrap(),
            Value::Float(0.5 + 2f64.powi(-20))
        );
        assert_eq!(
            value(b"\xfb\x3f\xb9\x99\x99\x99\x99\x99\x9a").unwrap(),
            Value::Float(0.1)
        );
        assert!(matches!(value(b"\xf9\x7e\x00").unwrap(), Value::Float(f) if f.is_nan()));
        // Keys sorted by encoding: shorter first, then bytewise.
        value(b"\xa2\x61b\x01\x62aa\x02").unwrap();
    }

    #[test]
    fn refuses_every_non_deterministic_form() {
        assert!(err(b"\x18\x17").contains("not the shortest"));
        assert!(err(b"\x19\x00\xff").contains("not the shortest"));
        assert!(err(b"\x1a\x00\x00\xff\xff").contains("not the shortest"));
        assert!(err(b"\x1b\x00\x00\x00\x00\xff\xff\xff\xff").contains("not the shortest"));
        assert!(err(b"\x78\x01a").contains("not the shortest"));
        assert!(err(b"\x9f\xff").contains("indefinite"));
        assert!(err(b"\x7f\xff").contains("indefinite"));
        assert!(err(b"\x1c").contains("reserved"));
        assert!(err(b"\xc1\x01").contains("tags"));
        assert!(err(b"\xf7").contains("simple value 23"));
        assert!(err(b"\xf8\x20").contains("simple value 32"));
        assert!(err(b"\xfa\x3e\x80\x00\x00").contains("shorter width than single"));
        assert!(err(b"\xfb\x3f\xd0\x00\x00\x00\x00\x00\x00").contains("shorter width than double"));
        assert!(err(b"\xf9\x7e\x01").contains("NaN"));
        assert!(err(b"\xfa\x7f\xc0\x00\x00").contains("NaN"));
        assert!(err(b"\xa2\x62aa\x01\x61b\x02").contains("out of order"));
        assert!(err(b"\xa2\x61a\x01\x61a\x02").contains("duplicate key \"a\""));
        assert!(err(b"\x62\xff\xfe").contains("UTF-8"));
        assert!(err(b"\x01\x02").contains("1 trailing bytes"));
        assert!(err(b"\x9b\x00\x00\x00\x01\x00\x00\x00\x00").contains("larger than"));
        assert!(err(b"\x7a\x7f\xff\xff\xff").contains("larger than"));
        assert!(err(b"\xa1\x01\x02").contains("not text"));
    }

    #[test]
    fn depth_32_is_allowed_and_33_is_not() {
        let nest = |n: usize| {
            let mut b = vec![0x81; n];
            b.push(0);
            b
        };
        value(&nest(32)).unwrap();
        let e = value(&nest(33)).unwrap_err();
        assert!(e.message().contains("deeper than 32"), "{e}");
        assert_eq!(e.offset(), Some(133));
    }
}
