//! The protobuf wire format, read in place (ONNX models, Paddle's programs and tensor
//! headers): a message is a [`Span`] of the file, and
//! [`Fields`] walks its fields one by one, handing back each field's number and value, with a
//! length-delimited value as the span of the file it occupies (never its bytes). Nothing is
//! decoded that the caller does not ask for, so a tensor's data is never read to list it.
//!
//! A message is read from the source whole when that costs nothing (a mapped file: a slice of
//! the map) or little (at most [`WHOLE_MESSAGE`] bytes); a larger message of an unmapped file
//! is walked with a short read per field. Every length is checked against the end of the
//! message that holds it; a varint is at most ten bytes; groups (wire types 3 and 4, which no
//! ONNX or Paddle writer emits) are refused.
//!
//! [`check`] walks a whole message by a schema ([`Message`] tables, see `schema.rs`) as
//! protobuf's parser does before it hands a message over: every nested message, every
//! packed run. The listing then reads fields as protobuf does: one of the wrong wire type is
//! an unknown field, a single field given twice keeps the last value, a message given twice
//! is the two merged.
//!
//! ```text
//!  field = varint(number << 3 | wire type) value
//!  wire type 0: varint   1: 8 bytes   2: varint length, then that many bytes   5: 4 bytes
//! ```

use std::borrow::Cow;

use zt_container::{Error, Result, Source};

pub(crate) use crate::files::varint;
use crate::files::MAX_VARINT;

/// A message of at most this many bytes is read whole from an unmapped file.
const WHOLE_MESSAGE: u64 = 64 << 10;

/// A field's key and the longest value header after it: two varints.
const FIELD_HEAD: u64 = 2 * MAX_VARINT as u64;

/// A range of the file, `start..end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub start: u64,
    pub end: u64,
}

impl Span {
    /// Its length in bytes.
    pub fn len(self) -> u64 {
        self.end - self.start
    }
}

/// One field's value.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Value {
    /// Wire type 0: the value, and where its bytes lie.
    Varint(u64, Span),
    /// Wire type 1: eight little-endian bytes.
    Fixed64(Span),
    /// Wire type 2: the bytes (a string, a message, a packed run).
    Bytes(Span),
    /// Wire type 5: four little-endian bytes.
    Fixed32(Span),
}

/// One field of a message.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Field {
    /// The field number.
    pub number: u64,
    pub value: Value,
    /// Where its key starts, for errors.
    pub at: u64,
}

impl Field {
    /// Where the field ends.
    pub fn end(&self) -> u64 {
        match self.value {
            Value::Varint(_, s) | Value::Fixed64(s) | Value::Bytes(s) | Value::Fixed32(s) => s.end,
        }
    }
}

/// The fields of one message, in file order.
pub(crate) struct Fields<'s> {
    source: &'s Source,
    /// The message's bytes when held whole, starting at `base`.
    whole: Option<Cow<'s, [u8]>>,
    base: u64,
    pos: u64,
    end: u64,
    failed: bool,
}

impl<'s> Fields<'s> {
    /// The fields of the message that occupies `span` of `source`.
    pub fn of(source: &'s Source, span: Span) -> Result<Self> {
        let mapped = matches!(source, Source::Mapped(_) | Source::Owned(_));
        let whole = if mapped || span.len() <= WHOLE_MESSAGE {
            Some(source.read_at(span.start, span.len())?)
        } else {
            None
        };
        Ok(Fields {
            source,
            whole,
            base: span.start,
            pos: span.start,
            end: span.end,
            failed: false,
        })
    }

    /// Up to `n` bytes of the message from `at` (fewer at its end).
    fn peek(&self, at: u64, n: u64) -> Result<Cow<'s, [u8]>> {
        let n = n.min(self.end.saturating_sub(at));
        match &self.whole {
            Some(Cow::Borrowed(b)) => {
                let from = usize::try_from(at - self.base).unwrap_or(usize::MAX);
                let to = from.saturating_add(n as usize);
                Ok(Cow::Borrowed(b.get(from..to).unwrap_or_default()))
            }
            Some(Cow::Owned(v)) => {
                let from = usize::try_from(at - self.base).unwrap_or(usize::MAX);
                let to = from.saturating_add(n as usize);
                Ok(Cow::Owned(v.get(from..to).unwrap_or_default().to_vec()))
            }
            None => self.source.read_at(at, n),
        }
    }

    fn field(&mut self) -> Result<Field> {
        let at = self.pos;
        let head = self.peek(at, FIELD_HEAD)?;
        let (key, used) = varint(&head).ok_or_else(|| bad_varint(at))?;
        let number = key >> 3;
        if number == 0 {
            return Err(Error::invalid("protobuf field number 0").at(at));
        }
        // A key is a 32-bit varint: protobuf refuses field numbers from 2^29.
        if key > u64::from(u32::MAX) {
            return Err(Error::invalid(format!(
                "protobuf field number {number} is over protobuf's largest, 2^29 - 1"
            ))
            .at(at));
        }
        let after_key = at + used as u64;
        let rest = head.get(used..).unwrap_or_default();
        let fixed = |n: u64| {
            let end = after_key.checked_add(n).filter(|&e| e <= self.end);
            end.map(|end| Span {
                start: after_key,
                end,
            })
            .ok_or_else(|| {
                Error::invalid(format!(
                    "protobuf field {number}: its {n}-byte value runs past the end of its message"
                ))
                .at(at)
            })
        };
        let value = match key & 7 {
            0 => {
                let (v, n) = varint(rest).ok_or_else(|| bad_varint(after_key))?;
                Value::Varint(v, fixed(n as u64)?)
            }
            1 => Value::Fixed64(fixed(8)?),
            5 => Value::Fixed32(fixed(4)?),
            2 => {
                let (len, n) = varint(rest).ok_or_else(|| bad_varint(after_key))?;
                let start = after_key + n as u64;
                let end = start.checked_add(len).filter(|&e| e <= self.end);
                let Some(end) = end else {
                    return Err(Error::invalid(format!(
                        "protobuf field {number}: its length {len} runs past the end of its \
                         message at byte {}",
                        self.end
                    ))
                    .at(at));
                };
                Value::Bytes(Span { start, end })
            }
            other => {
                return Err(Error::invalid(format!(
                    "protobuf field {number} has wire type {other} (groups and unknown types \
                     are in no message ONNX or Paddle writes)"
                ))
                .at(at))
            }
        };
        let field = Field { number, value, at };
        self.pos = field.end();
        Ok(field)
    }
}

impl Iterator for Fields<'_> {
    type Item = Result<Field>;

    fn next(&mut self) -> Option<Result<Field>> {
        if self.failed || self.pos >= self.end {
            return None;
        }
        let field = self.field();
        self.failed = field.is_err();
        Some(field)
    }
}

fn bad_varint(at: u64) -> Error {
    Error::invalid("malformed protobuf varint (cut short or longer than 10 bytes)").at(at)
}

/// How a scalar field is encoded.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Scalar {
    /// Wire type 0 (int32, int64, uint64, bool, enum).
    Varint,
    /// Wire type 5 (float).
    Fixed32,
    /// Wire type 1 (double).
    Fixed64,
}

/// What a field of a [`Message`] holds, for [`check`].
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    /// One scalar (any wire type but length-delimited; nothing in it to check).
    Single,
    /// A repeated scalar: one field per value, or packed into one length-delimited run.
    Repeated(Scalar),
    /// A string or bytes, never looked into (proto2 does not check that a string is UTF-8).
    Text,
    /// A message, looked into.
    Message(&'static Message),
}

/// The fields of one message type, by number.
#[derive(Debug)]
pub(crate) struct Message {
    pub name: &'static str,
    pub fields: &'static [(u64, &'static str, Kind)],
}

/// How deep messages may nest: protobuf's default recursion limit.
pub(crate) const MAX_NESTING: usize = 100;

/// Checks the wire format of the `message` at `span` and of every message in it, as
/// protobuf's parser does before it hands a message over: keys, varints and lengths, field
/// numbers, packed runs (whole varints, whole floats), nesting. A field whose wire type is
/// not its declared one is an unknown field to protobuf, and is skipped here too.
///
/// Each byte is looked at once per message that holds it as a key or length, and packed
/// varint runs are read in 64 KiB pieces: the cost is a walk over the model's structure.
pub(crate) fn check(source: &Source, span: Span, message: &'static Message) -> Result<()> {
    check_in(source, span, message, &mut vec![message.name])
}

fn check_in(
    source: &Source,
    span: Span,
    message: &'static Message,
    path: &mut Vec<&'static str>,
) -> Result<()> {
    if path.len() > MAX_NESTING {
        return Err(within(
            Error::limit(format!(
                "messages nest deeper than {MAX_NESTING} levels (protobuf's limit: onnx.load \
                 refuses the model too)"
            ))
            .at(span.start),
            path,
        ));
    }
    for field in Fields::of(source, span)? {
        let field = field.map_err(|e| within(e, path))?;
        let Some(&(_, name, kind)) = message.fields.iter().find(|f| f.0 == field.number) else {
            continue;
        };
        match (kind, field.value) {
            (Kind::Message(inner), Value::Bytes(s)) => {
                path.push(name);
                check_in(source, s, inner, path)?;
                path.pop();
            }
            (Kind::Repeated(scalar), Value::Bytes(s)) => {
                check_packed(source, s, scalar).map_err(|e| {
                    path.push(name);
                    let e = within(e, path);
                    path.pop();
                    e
                })?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// `e` with where it happened: `in ModelProto.graph.node.attribute`, the middle left out
/// of a deep path.
fn within(e: Error, path: &[&str]) -> Error {
    let place = match path {
        [a, b, .., x, y, z] if path.len() > 6 => {
            format!("{a}.{b}. ... .{x}.{y}.{z} ({} levels)", path.len())
        }
        _ => path.join("."),
    };
    let moved = Error::new(e.kind(), format!("{}, in {place}", e.message()));
    match e.offset() {
        Some(at) => moved.at(at),
        None => moved,
    }
}

/// A packed run of scalars: whole floats or doubles, or varints each at most ten bytes with
/// the last one complete.
fn check_packed(source: &Source, span: Span, scalar: Scalar) -> Result<()> {
    let width = match scalar {
        Scalar::Fixed32 => 4,
        Scalar::Fixed64 => 8,
        Scalar::Varint => {
            // Continuation bytes in a row so far: a tenth one makes a varint too long.
            let mut continued = 0usize;
            let mut at = span.start;
            while at < span.end {
                let piece = source.read_at(at, (span.end - at).min(WHOLE_MESSAGE))?;
                for (i, &b) in piece.iter().enumerate() {
                    if b & 0x80 == 0 {
                        continued = 0;
                    } else {
                        continued += 1;
                        if continued >= MAX_VARINT {
                            return Err(bad_varint(at + i as u64));
                        }
                    }
                }
                at += piece.len().max(1) as u64;
            }
            if continued > 0 {
                return Err(bad_varint(span.end - continued as u64));
            }
            return Ok(());
        }
    };
    if span.len() % width != 0 {
        return Err(Error::invalid(format!(
            "a packed run of {} bytes is not whole {width}-byte values",
            span.len()
        ))
        .at(span.start));
    }
    Ok(())
}

/// The text of a string field, read whole after checking its length against `cap`. Bytes
/// that are not UTF-8 become U+FFFD: ONNX declares its strings in proto2, where protobuf does
/// not check them, so `onnx.load` reads such a model.
pub(crate) fn text(source: &Source, span: Span, cap: u64, what: &str) -> Result<String> {
    if span.len() > cap {
        return Err(Error::limit(format!(
            "{what} is {} bytes, over the cap of {cap}",
            span.len()
        ))
        .at(span.start));
    }
    let bytes = source.read_at(span.start, span.len())?;
    Ok(match bytes {
        Cow::Borrowed(b) => String::from_utf8_lossy(b).into_owned(),
        Cow::Owned(v) => String::from_utf8(v)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
    })
}

/// Calls `each` with every varint of the packed run `span`, at most `max` of them: a run
/// longer than `max` varints can be is refused before it is read (with `what` naming it).
#[cfg(any(feature = "paddle", feature = "caffe"))]
pub(crate) fn each_varint(
    source: &Source,
    span: Span,
    max: usize,
    what: &str,
    mut each: impl FnMut(u64) -> Result<()>,
) -> Result<()> {
    if span.len() > (max as u64).saturating_mul(MAX_VARINT as u64) {
        return Err(Error::limit(format!(
            "{what}: a run of {} bytes, more than {max} values can take",
            span.len()
        ))
        .at(span.start));
    }
    let bytes = source.read_at(span.start, span.len())?;
    let mut rest: &[u8] = &bytes;
    while !rest.is_empty() {
        let (v, n) = varint(rest).ok_or_else(|| bad_varint(span.start))?;
        each(v)?;
        rest = rest.get(n..).unwrap_or_default();
    }
    Ok(())
}

/// How many varints a packed run holds (the bytes without the continuation bit), reading it
/// whole: only for runs whose length has been capped.
pub(crate) fn count_varints(source: &Source, span: Span) -> Result<u64> {
    let bytes = source.read_at(span.start, span.len())?;
    if bytes.last().is_some_and(|b| b & 0x80 != 0) {
        return Err(bad_varint(span.end - 1));
    }
    Ok(bytes.iter().filter(|&&b| b & 0x80 == 0).count() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(bytes: &[u8]) -> Vec<Result<Field>> {
        let source = Source::from_vec(bytes.to_vec());
        let span = Span {
            start: 0,
            end: bytes.len() as u64,
        };
        Fields::of(&source, span).unwrap().collect()
    }

    #[test]
    fn reads_each_wire_type() {
        // 1: varint 150; 2: "hi"; 3: fixed32; 4: fixed64
        let msg = [
            0x08, 0x96, 0x01, 0x12, 2, b'h', b'i', 0x1d, 1, 2, 3, 4, 0x21, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        let got: Vec<Field> = fields(&msg).into_iter().map(|f| f.unwrap()).collect();
        assert_eq!(got.len(), 4);
        assert!(matches!(
            got[0].value,
            Value::Varint(150, Span { start: 1, end: 3 })
        ));
        assert!(matches!(
            got[1].value,
            Value::Bytes(Span { start: 5, end: 7 })
        ));
        assert!(matches!(
            got[2].value,
            Value::Fixed32(Span { start: 8, end: 12 })
        ));
        assert!(matches!(
            got[3].value,
            Value::Fixed64(Span { start: 13, end: 21 })
        ));
    }

    #[test]
    fn refuses_lengths_past_the_message_and_bad_varints() {
        let e = fields(&[0x12, 5, b'a']).pop().unwrap().unwrap_err();
        assert!(e.to_string().contains("runs past the end"), "{e}");
        let e = fields(&[0x08; 1]).pop().unwrap().unwrap_err();
        assert!(e.to_string().contains("malformed protobuf varint"), "{e}");
        let e = fields(&[0x0b]).pop().unwrap().unwrap_err();
        assert!(e.to_string().contains("wire type 3"), "{e}");
        let long = [
            0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        ];
        assert!(fields(&long).pop().unwrap().is_err());
        // The walk stops at the first error.
        assert_eq!(fields(&[0x12, 5, b'a', 0x08, 1]).len(), 1);
    }

    #[test]
    fn counts_packed_varints() {
        let source = Source::from_vec(vec![0x01, 0xac, 0x02, 0x7f]);
        let span = Span { start: 0, end: 4 };
        assert_eq!(count_varints(&source, span).unwrap(), 3);
        let cut = Source::from_vec(vec![0x01, 0xac]);
        assert!(count_varints(&cut, Span { start: 0, end: 2 }).is_err());
    }
}
