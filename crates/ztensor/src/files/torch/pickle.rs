//! A pickle machine that executes nothing: it reads the opcodes a PyTorch checkpoint uses
//! (protocols 0-5, as far as state dicts go) into values, and evaluates only a fixed list of
//! harmless constructions ([`Machine::reduce`]): ordered dicts, sets, `torch.Size`, devices,
//! dtypes, storages, `_rebuild_tensor` (torch before 0.4), `_rebuild_tensor_v2`/`_v3` and
//! `_rebuild_parameter`. Any other global is kept as an opaque value naming it, never looked
//! up, never called; an opaque object whose state is a TorchScript module's or a
//! `torch.nn.Module`'s takes the tensors that state holds ([`Machine::build`]).
//!
//! Pickles of NumPy arrays (what `paddle.save` writes, and `pickle.dump` of a dict of arrays)
//! take four more constructions: `numpy.dtype` (its byte order set by BUILD), `_reconstruct`
//! and the BUILD that gives the array its shape, dtype and bytes, protocol 5's `_frombuffer`,
//! and `tuple(items)`. A machine made [`Machine::locating`] does not copy a long byte string:
//! it keeps where the bytes lie ([`Obj::Span`]), and notes where each short one lay
//! ([`Heap::location`]), so that an array's elements are read from the file itself.
//!
//! Values live in an arena ([`Heap`]) and the stack and memo hold small copyable handles
//! ([`Pv`]): fetching a memo entry shares its value instead of copying it, so a pickle that
//! references one list from another, level after level, costs one handle per reference, not
//! an exponential copy. Every cap is checked before the work it bounds: opcodes, stack depth,
//! memo entries, string and bytes lengths (against the bytes left, then a cap), and the items
//! all containers hold together.

use std::collections::HashSet;

use zt_container::{Error, Result};

/// Caps on what a pickle may make the machine do.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PickleLimits {
    /// Opcodes executed.
    pub max_opcodes: u64,
    /// Values on the stack (marks included).
    pub max_stack: usize,
    /// Memo entries.
    pub max_memo: usize,
    /// Bytes of one string or byte string.
    pub max_string: u64,
    /// Items held by all lists, tuples, dicts and sets together.
    pub max_items: u64,
    /// Objects in the heap (each 32 bytes at most, strings' bytes apart).
    pub max_objects: usize,
}

/// The longest module plus name of a global we keep (real ones are tens of bytes).
pub(crate) const MAX_GLOBAL_NAME: usize = 1024;
/// Calls evaluated inside one another (a tensor subclass rebuilt from a tensor).
const MAX_NESTED_CALLS: usize = 8;
/// Most dimensions a tensor's size or stride tuple may have, checked before it is read.
pub(crate) const MAX_TENSOR_RANK: usize = 64;

/// The limits checkpoints are read under: far above real state dicts (a 100,000-tensor
/// checkpoint runs about 3 million opcodes; pickle batches dict and list items by 1,000, so
/// its stack stays near 2,000), far below what would exhaust memory (a value costs 16 bytes
/// on the stack, an object 32 in the heap).
pub(crate) const PICKLE_LIMITS: PickleLimits = PickleLimits {
    max_opcodes: 1 << 24,
    max_stack: 1 << 15,
    max_memo: 1 << 22,
    max_string: 1 << 24,
    max_items: 1 << 24,
    max_objects: 1 << 22,
};

/// A handle to a value: scalars inline, everything else in the [`Heap`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Pv {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    /// An object in the heap.
    Obj(u32),
}

/// A storage as a persistent id names it: `('storage', type, key, location, numel)`. The
/// type and key are handles to heap objects, resolved (and their lengths checked) when the
/// value is walked: a pickle that names one storage many times costs a handle each time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct StorageRef {
    /// The storage class: a [`Obj::Global`] (`torch FloatStorage`, `UntypedStorage`) or an
    /// [`Obj::DType`].
    pub class: Pv,
    /// The record key (`data/<key>` in the archive): an [`Obj::Str`].
    pub key: Pv,
    /// Elements (bytes for `UntypedStorage`) it declares.
    pub numel: u64,
}

/// A tensor as `_rebuild_tensor_v2`/`_v3` describes it, by handles (see [`StorageRef`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct TensorRef {
    /// An [`Obj::Storage`].
    pub storage: Pv,
    /// v3's dtype argument (an [`Obj::DType`] or [`Obj::Global`]); v2 tensors take the
    /// storage class's dtype.
    pub dtype: Option<Pv>,
    pub offset: u64,
    /// Tuples of integers, checked when the tensor is listed.
    pub size: Pv,
    pub stride: Pv,
}

/// A NumPy array as `_reconstruct` then BUILD, or `_frombuffer`, describe it, by handles.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct NdArrayRef {
    /// A tuple of integers (checked when the array is listed); `Pv::None` until BUILD.
    pub shape: Pv,
    /// An [`Obj::NpDType`].
    pub dtype: Pv,
    /// Elements stored column-major (`order="F"`).
    pub fortran: bool,
    /// The elements: an [`Obj::Span`], or [`Obj::Bytes`] (located when the machine was
    /// [`Machine::locating`]); a list for an object array.
    pub data: Pv,
}

/// A `numpy.dtype(code, align, copy)`, with the byte order its BUILD gives.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NpDType {
    /// The type code as pickled (`f4`, `u2`, `c16`, `O8`, `U10`, `V4`).
    pub code: String,
    /// `<`, `>`, `|` or `=`; `|` until BUILD says otherwise.
    pub order: char,
    /// BUILD named fields: a structured dtype.
    pub fields: bool,
}

/// The module of a distributed checkpoint's records (`Metadata`, `TensorStorageMetadata`,
/// `ChunkStorageMetadata`, `MetadataIndex`...) and of its writer's (`filesystem._StorageInfo`):
/// BUILD makes these their fields (see [`Machine`]'s BUILD), which a listing reads.
pub(crate) const DCP_MODULE: &str = "torch.distributed.checkpoint.";

/// Byte strings longer than this are kept as [`Obj::Span`] by a locating machine (a dict
/// key, which Python 2 pickles as a byte string, is never this long: [`super::MAX_NAME_LEN`]).
pub(crate) const SPAN_OVER: u64 = 4096;

/// A value in the heap.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Obj {
    Str(String),
    Bytes(Vec<u8>),
    /// A byte string left in the input: where it starts in the file, and its length.
    Span {
        at: u64,
        len: u64,
    },
    /// A text string left in the input (UTF-8): where it starts, and its length in bytes.
    TextSpan {
        at: u64,
        len: u64,
    },
    /// `_codecs.encode(text, "latin1")` of a text in the input: the bytes the text's
    /// characters are, as Python 3 pickles a byte string under protocol 2. Where the text
    /// starts in the file, its length in UTF-8 bytes, and the text (an [`Obj::Str`], or a
    /// [`Obj::TextSpan`] too long to copy).
    Latin1 {
        at: u64,
        len: u64,
        text: Pv,
    },
    /// A NumPy array.
    NdArray(Box<NdArrayRef>),
    /// A NumPy dtype.
    NpDType(Box<NpDType>),
    /// An integer beyond 64 bits, kept as its decimal text.
    BigInt(String),
    Tuple(Vec<Pv>),
    List(Vec<Pv>),
    Dict(Vec<(Pv, Pv)>),
    Set(Vec<Pv>),
    /// A global, named (module, name), never looked up.
    Global(Box<(String, String)>),
    /// What a call or class we do not evaluate would have made: the callable's or class's
    /// global, or `Pv::None` when it was not a global.
    Opaque(Pv),
    /// What a call we do not evaluate made from tensor data (a storage or tensor among its
    /// arguments: `_rebuild_qtensor`, a subclass's rebuild): the callable's global, or
    /// `Pv::None`. Listed as a tensor that cannot be read, so that it is never lost unseen.
    Unread(Pv),
    Storage(StorageRef),
    Tensor(Box<TensorRef>),
    /// A `torch.dtype` global (`torch float32`): the name.
    DType(String),
}

/// How a string's characters lie in the file ([`Heap::location`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stored {
    /// One byte each: a byte string, or a Python 2 string (latin-1).
    Raw,
    /// UTF-8: a Python 3 string.
    Utf8,
}

/// Where a string's or byte string's bytes lie in the file ([`Heap::location`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Located {
    /// The offset of its first byte.
    pub at: u64,
    /// Its length in the file, in bytes.
    pub len: u64,
    /// How its characters are stored.
    pub stored: Stored,
}

/// The arena every object of one pickle lives in.
#[derive(Debug, Default)]
pub(crate) struct Heap {
    objs: Vec<Obj>,
    /// Where the bytes of short strings and byte strings lay in the file, by object index
    /// (ascending: objects are numbered as they are made); kept by a locating machine.
    located: Vec<(u32, Located)>,
    /// Bytes of the input left in place as spans.
    spanned: u64,
}

impl Heap {
    pub fn get(&self, v: Pv) -> Option<&Obj> {
        match v {
            Pv::Obj(i) => self.objs.get(i as usize),
            _ => None,
        }
    }

    /// Where the bytes of string or byte string `v` start in the file: for a span, and, when
    /// the machine was locating, for a string or byte string read from the input as it is
    /// (not one made by a call such as `_codecs.encode`).
    pub fn location(&self, v: Pv) -> Option<Located> {
        let Pv::Obj(i) = v else { return None };
        let (at, len, stored) = match self.get(v) {
            Some(Obj::Span { at, len }) => (*at, *len, Stored::Raw),
            Some(Obj::TextSpan { at, len }) => (*at, *len, Stored::Utf8),
            _ => {
                return self
                    .located
                    .binary_search_by_key(&i, |&(o, _)| o)
                    .ok()
                    .and_then(|k| self.located.get(k))
                    .map(|&(_, l)| l)
            }
        };
        Some(Located { at, len, stored })
    }

    /// Bytes of the input a locating machine left in place ([`Obj::Span`],
    /// [`Obj::TextSpan`]): what remains of a pickle's length is what was interpreted.
    #[cfg_attr(not(feature = "pickle"), allow(dead_code))]
    pub fn spanned(&self) -> u64 {
        self.spanned
    }

    /// Every storage a persistent id named.
    pub fn storages(&self) -> impl Iterator<Item = &StorageRef> {
        self.objs.iter().filter_map(|o| match o {
            Obj::Storage(s) => Some(s),
            _ => None,
        })
    }

    /// What kind of value `v` is, for errors: "a tuple", "an integer".
    pub fn kind(&self, v: Pv) -> &'static str {
        match v {
            Pv::None => "None",
            Pv::Bool(_) => "a bool",
            Pv::Int(_) => "an integer",
            Pv::Float(_) => "a float",
            Pv::Obj(_) => match self.get(v) {
                Some(Obj::Str(_)) => "a string",
                Some(Obj::Bytes(_) | Obj::Span { .. } | Obj::Latin1 { .. }) => "a byte string",
                Some(Obj::TextSpan { .. }) => "a string",
                Some(Obj::NdArray(_)) => "a NumPy array",
                Some(Obj::NpDType(_)) => "a NumPy dtype",
                Some(Obj::BigInt(_)) => "an integer",
                Some(Obj::Tuple(_)) => "a tuple",
                Some(Obj::List(_)) => "a list",
                Some(Obj::Dict(_)) => "a dict",
                Some(Obj::Set(_)) => "a set",
                Some(Obj::Global(_)) => "a global",
                Some(Obj::Opaque(_)) => "an object",
                Some(Obj::Unread(_)) => "an object made from tensor data",
                Some(Obj::Storage(_)) => "a storage",
                Some(Obj::Tensor(_)) => "a tensor",
                Some(Obj::DType(_)) => "a dtype",
                None => "nothing",
            },
        }
    }

    /// The text of a string object.
    pub fn text(&self, v: Pv) -> Option<&str> {
        match self.get(v) {
            Some(Obj::Str(s)) => Some(s),
            _ => None,
        }
    }

    /// A tuple's length and its first `N` items (`Pv::None` past its end); `None` when `v`
    /// is not a tuple. The handful of items a known construction reads, nothing copied.
    fn tuple_head<const N: usize>(&self, v: Pv) -> Option<(usize, [Pv; N])> {
        match self.get(v) {
            Some(Obj::Tuple(t)) => {
                let mut head = [Pv::None; N];
                for (slot, item) in head.iter_mut().zip(t) {
                    *slot = *item;
                }
                Some((t.len(), head))
            }
            _ => None,
        }
    }

    /// How many objects the heap holds.
    fn len(&self) -> usize {
        self.objs.len()
    }

    fn put(&mut self, o: Obj) -> Pv {
        self.objs.push(o);
        Pv::Obj(self.objs.len() as u32 - 1)
    }

    fn get_mut(&mut self, v: Pv) -> Option<&mut Obj> {
        match v {
            Pv::Obj(i) => self.objs.get_mut(i as usize),
            _ => None,
        }
    }
}

/// A stack entry: a value, or a mark.
#[derive(Debug, Clone, Copy)]
enum Slot {
    Mark,
    Val(Pv),
}

/// The unpickler's stack and memo.
#[derive(Default)]
struct Frame {
    stack: Vec<Slot>,
    memo: std::collections::BTreeMap<u32, Pv>,
}

impl Frame {
    fn pop(&mut self) -> std::result::Result<Pv, Stop> {
        match self.stack.pop() {
            Some(Slot::Val(v)) => Ok(v),
            Some(Slot::Mark) => Err(Stop::Bad("a mark where a value was expected".into())),
            None => Err(Stop::Bad("stack underflow".into())),
        }
    }

    /// The values above the topmost mark, which is removed with them.
    fn pop_mark(&mut self) -> std::result::Result<Vec<Pv>, Stop> {
        let m = self
            .stack
            .iter()
            .rposition(|s| matches!(s, Slot::Mark))
            .ok_or_else(|| Stop::Bad("no mark on the stack".into()))?;
        Ok(self
            .stack
            .drain(m..)
            .skip(1)
            .filter_map(|s| match s {
                Slot::Val(v) => Some(v),
                Slot::Mark => None,
            })
            .collect())
    }

    fn top(&self) -> std::result::Result<Pv, Stop> {
        match self.stack.last() {
            Some(Slot::Val(v)) => Ok(*v),
            _ => Err(Stop::Bad("no value on the stack".into())),
        }
    }

    fn memo_put(&mut self, i: u64, v: Pv, cap: usize) -> std::result::Result<(), Stop> {
        let i = u32::try_from(i).map_err(|_| Stop::Bad("memo index exceeds 32 bits".into()))?;
        if self.memo.len() >= cap && !self.memo.contains_key(&i) {
            return Err(Stop::Limit(format!("memo holds more than {cap} values")));
        }
        self.memo.insert(i, v);
        Ok(())
    }

    fn memo_get(&self, i: u64) -> std::result::Result<Pv, Stop> {
        u32::try_from(i)
            .ok()
            .and_then(|i| self.memo.get(&i).copied())
            .ok_or_else(|| Stop::Bad(format!("memo entry {i} was never stored")))
    }
}

/// Text from a pickle's bytes, which must be UTF-8.
fn str_of(b: &[u8]) -> std::result::Result<String, Stop> {
    String::from_utf8(b.to_vec()).map_err(|_| Stop::Bad("a string is not UTF-8".into()))
}

/// Runs pickles; each [`Machine::run`] reads one, from its `PROTO` to its `STOP`.
pub(crate) struct Machine<'h> {
    pub heap: &'h mut Heap,
    limits: PickleLimits,
    items: u64,
    /// Calls being evaluated inside one another (`_rebuild_from_type_v2`).
    nested: usize,
    /// Offset of the pickle in the file, for errors and [`Heap::location`].
    base: u64,
    /// Long byte strings become spans, short ones are located ([`Machine::locating`]).
    locating: bool,
}

fn bad(what: impl std::fmt::Display) -> Error {
    Error::invalid(format!("invalid pickle: {what}"))
}

struct Input<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Input<'a> {
    fn take(&mut self, n: u64) -> std::result::Result<&'a [u8], String> {
        let left = (self.data.len() - self.at.min(self.data.len())) as u64;
        if n > left {
            return Err(format!("{n} bytes asked for, {left} left"));
        }
        let n = n as usize;
        let s = self.data.get(self.at..self.at + n).ok_or("cut short")?;
        self.at += n;
        Ok(s)
    }
    fn u8(&mut self) -> std::result::Result<u8, String> {
        Ok(self.take(1)?.first().copied().unwrap_or(0))
    }
    fn le(&mut self, n: u64) -> std::result::Result<u64, String> {
        Ok(self
            .take(n)?
            .iter()
            .rev()
            .fold(0u64, |a, &b| (a << 8) | u64::from(b)))
    }
    fn line(&mut self) -> std::result::Result<&'a [u8], String> {
        let rest = self.data.get(self.at..).unwrap_or_default();
        let n = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or("a text argument has no end of line")?;
        let s = rest.get(..n).unwrap_or_default();
        self.at += n + 1;
        Ok(s)
    }
}

impl<'h> Machine<'h> {
    pub fn new(heap: &'h mut Heap, limits: PickleLimits, base: u64) -> Self {
        Machine {
            heap,
            limits,
            items: 0,
            nested: 0,
            base,
            locating: false,
        }
    }

    /// A machine that leaves long byte strings in the input as [`Obj::Span`]s (they are not
    /// copied, and the string cap does not apply to them: the input bounds them) and notes
    /// where every short string or byte string lay. For pickles that hold array data inline.
    #[cfg_attr(not(feature = "pickle"), allow(dead_code))]
    pub fn locating(mut self) -> Self {
        self.locating = true;
        self
    }

    /// Reads a string's or byte string's length (`len_bytes` wide) and then either its bytes
    /// (`Ok(Ok(bytes, at))`) or, for a locating machine and a long one, skips them
    /// (`Ok(Err(span))`).
    fn payload<'a>(
        &mut self,
        input: &mut Input<'a>,
        len_bytes: u64,
    ) -> std::result::Result<std::result::Result<(Vec<u8>, u64), Obj>, Stop> {
        if !self.locating {
            let at = self.base + input.at as u64 + len_bytes;
            return Ok(Ok((self.sized(input, len_bytes)?, at)));
        }
        let n = input.le(len_bytes).map_err(Stop::Bad)?;
        let at = self.base + input.at as u64;
        if n > SPAN_OVER {
            input.take(n).map_err(Stop::Bad)?;
            self.heap.spanned = self.heap.spanned.saturating_add(n);
            return Ok(Err(Obj::Span { at, len: n }));
        }
        Ok(Ok((input.take(n).map_err(Stop::Bad)?.to_vec(), at)))
    }

    /// Puts a string or byte string read from `at` in the file, noting where (and how its
    /// characters are stored) when locating.
    fn put_located(&mut self, o: Obj, at: u64, len: usize, stored: Stored) -> Pv {
        let v = self.heap.put(o);
        if let (true, Pv::Obj(i)) = (self.locating, v) {
            let len = len as u64;
            self.heap.located.push((i, Located { at, len, stored }));
        }
        v
    }

    /// Counts `n` more container items against the cap.
    fn grow(&mut self, n: u64) -> std::result::Result<(), String> {
        self.items = self.items.saturating_add(n);
        if self.items > self.limits.max_items {
            return Err(format!(
                "containers hold more than {} items",
                self.limits.max_items
            ));
        }
        Ok(())
    }

    /// Runs the pickle at the start of `data` to its `STOP`; returns its value and the bytes
    /// it took.
    pub fn run(&mut self, data: &[u8]) -> Result<(Pv, usize)> {
        let mut input = Input { data, at: 0 };
        let mut frame = Frame::default();
        let mut count = 0u64;
        loop {
            let op_at = input.at;
            let result = self.step(&mut input, &mut frame);
            match result {
                Ok(Some(v)) => return Ok((v, input.at)),
                Ok(None) => {}
                Err(Stop::Limit(what)) => {
                    return Err(Error::limit(format!("pickle: {what}")).at(self.base + op_at as u64))
                }
                Err(Stop::Bad(what)) => return Err(bad(what).at(self.base + op_at as u64)),
                Err(Stop::Rank(rank)) => {
                    let e = Error::rank_over_cap(Some(rank as u64), MAX_TENSOR_RANK);
                    return Err(e.at(self.base + op_at as u64));
                }
                Err(Stop::Unsupported(what)) => {
                    return Err(
                        Error::unsupported(format!("pickle: {what}")).at(self.base + op_at as u64)
                    )
                }
            }
            count += 1;
            if count > self.limits.max_opcodes {
                return Err(Error::limit(format!(
                    "pickle runs more than {} opcodes",
                    self.limits.max_opcodes
                ))
                .at(self.base + op_at as u64));
            }
            if self.heap.len() > self.limits.max_objects {
                return Err(Error::limit(format!(
                    "pickle builds more than {} objects",
                    self.limits.max_objects
                ))
                .at(self.base + op_at as u64));
            }
            if frame.stack.len() > self.limits.max_stack {
                return Err(Error::limit(format!(
                    "pickle stack holds more than {} values",
                    self.limits.max_stack
                ))
                .at(self.base + op_at as u64));
            }
        }
    }

    /// One opcode, dispatched to the helper of its group; `Some(value)` at `STOP`.
    fn step(
        &mut self,
        input: &mut Input<'_>,
        f: &mut Frame,
    ) -> std::result::Result<Option<Pv>, Stop> {
        let op = input
            .u8()
            .map_err(|_| Stop::Bad("ends without STOP".into()))?;
        match op {
            0x80 | 0x95 | b'.' | b'(' | b'0' | b'1' | b'2' => return self.control(op, input, f),
            b'N' | 0x88 | 0x89 | b'J' | b'K' | b'M' | 0x8a | 0x8b | b'I' | b'L' | b'G' | b'F' => {
                self.number(op, input, f)?
            }
            b'X' | 0x8c | 0x8d | b'V' | b'T' | b'U' | b'B' | b'C' | 0x8e | 0x96 => {
                self.text(op, input, f)?
            }
            b'}'
            | b']'
            | b')'
            | 0x8f
            | b't'
            | b'l'
            | 0x91
            | 0x85..=0x87
            | b'd'
            | b'a'
            | b'e'
            | 0x90
            | b's'
            | b'u' => self.container(op, input, f)?,
            b'c' | 0x93 | b'R' | 0x81 | 0x92 | b'b' | b'Q' | b'P' | b'i' | b'o' => {
                self.object(op, input, f)?
            }
            b'p' | b'q' | b'r' | 0x94 | b'g' | b'h' | b'j' => self.memo(op, input, f)?,
            other => {
                return Err(Stop::Unsupported(format!(
                    "opcode {other:#04x} is not used by torch.save"
                )))
            }
        }
        Ok(None)
    }

    /// A string or bytes whose length is the next `len_bytes` bytes, within the string cap.
    fn sized(&self, input: &mut Input<'_>, len_bytes: u64) -> std::result::Result<Vec<u8>, Stop> {
        let n = input.le(len_bytes).map_err(Stop::Bad)?;
        let max_string = self.limits.max_string;
        if n > max_string {
            return Err(Stop::Limit(format!(
                "a string of {n} bytes exceeds the cap of {max_string}"
            )));
        }
        Ok(input.take(n).map_err(Stop::Bad)?.to_vec())
    }

    /// Protocol, frames, STOP, marks and stack shuffles: `Some(value)` at `STOP`.
    fn control(
        &mut self,
        op: u8,
        input: &mut Input<'_>,
        f: &mut Frame,
    ) -> std::result::Result<Option<Pv>, Stop> {
        let e = |s: String| Stop::Bad(s);
        match op {
            0x80 => {
                let p = input.u8().map_err(e)?;
                if p > 5 {
                    return Err(Stop::Unsupported(format!("protocol {p}")));
                }
            }
            // FRAME: the unpickler reads the whole frame ahead, so one that runs past the end
            // of the pickle is refused there ("pickle data was truncated").
            0x95 => {
                let len = input.le(8).map_err(e)?;
                let left = (input.data.len() - input.at.min(input.data.len())) as u64;
                if len > left {
                    return Err(Stop::Bad(format!(
                        "a FRAME of {len} bytes runs past the end of the pickle ({left} left)"
                    )));
                }
            }
            b'.' => return f.pop().map(Some),
            b'(' => f.stack.push(Slot::Mark),
            b'0' => {
                f.stack
                    .pop()
                    .ok_or_else(|| Stop::Bad("stack underflow".into()))?;
            }
            b'1' => {
                f.pop_mark()?;
            }
            b'2' => {
                let v = f.top()?;
                f.stack.push(Slot::Val(v));
            }
            _ => {
                return Err(Stop::Bad(format!(
                    "opcode {op:#04x} is not one of control's"
                )))
            }
        }
        Ok(None)
    }

    /// None, booleans, integers of every width and floats.
    fn number(
        &mut self,
        op: u8,
        input: &mut Input<'_>,
        f: &mut Frame,
    ) -> std::result::Result<(), Stop> {
        let e = |s: String| Stop::Bad(s);
        match op {
            b'N' => f.stack.push(Slot::Val(Pv::None)),
            0x88 => f.stack.push(Slot::Val(Pv::Bool(true))),
            0x89 => f.stack.push(Slot::Val(Pv::Bool(false))),
            b'J' => {
                let v = input.le(4).map_err(e)? as u32 as i32;
                f.stack.push(Slot::Val(Pv::Int(i64::from(v))));
            }
            b'K' => f
                .stack
                .push(Slot::Val(Pv::Int(i64::from(input.u8().map_err(e)?)))),
            b'M' => f
                .stack
                .push(Slot::Val(Pv::Int(input.le(2).map_err(e)? as i64))),
            0x8a | 0x8b => {
                let n = if op == 0x8a {
                    input.u8().map_err(e)? as u64
                } else {
                    input.le(4).map_err(e)?
                };
                if n > self.limits.max_string {
                    return Err(Stop::Limit(format!("an integer of {n} bytes")));
                }
                let b = input.take(n).map_err(e)?;
                let v = long_le(b);
                let pv = match v {
                    Some(v) => Pv::Int(v),
                    None => self.heap.put(Obj::BigInt(format!("<{n}-byte integer>"))),
                };
                f.stack.push(Slot::Val(pv));
            }
            b'I' | b'L' => {
                let line = input.line().map_err(e)?;
                let text = std::str::from_utf8(line)
                    .unwrap_or("")
                    .trim_end_matches('L');
                let pv = match text {
                    "01" if op == b'I' => Pv::Bool(true),
                    "00" if op == b'I' => Pv::Bool(false),
                    t => match t.parse::<i64>() {
                        Ok(v) => Pv::Int(v),
                        Err(_) => {
                            if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit() || b == b'-') {
                                return Err(Stop::Bad(format!("bad integer {t:?}")));
                            }
                            self.heap.put(Obj::BigInt(t.to_owned()))
                        }
                    },
                };
                f.stack.push(Slot::Val(pv));
            }
            b'G' => {
                let b = input.take(8).map_err(e)?;
                let v = f64::from_be_bytes(b.try_into().unwrap_or([0; 8]));
                f.stack.push(Slot::Val(Pv::Float(v)));
            }
            b'F' => {
                let line = input.line().map_err(e)?;
                let v = std::str::from_utf8(line)
                    .ok()
                    .and_then(|t| t.trim().parse::<f64>().ok())
                    .ok_or_else(|| Stop::Bad("bad float".into()))?;
                f.stack.push(Slot::Val(Pv::Float(v)));
            }
            _ => {
                return Err(Stop::Bad(format!(
                    "opcode {op:#04x} is not one of number's"
                )))
            }
        }
        Ok(())
    }

    /// Strings and bytes (Python 2 strings read as latin-1, as torch loads them).
    fn text(
        &mut self,
        op: u8,
        input: &mut Input<'_>,
        f: &mut Frame,
    ) -> std::result::Result<(), Stop> {
        let e = |s: String| Stop::Bad(s);
        match op {
            b'X' | 0x8c | 0x8d => {
                let len_bytes = match op {
                    b'X' => 4,
                    0x8c => 1,
                    _ => 8,
                };
                let v = match self.payload(input, len_bytes)? {
                    Ok((b, at)) => {
                        let len = b.len();
                        self.put_located(Obj::Str(str_of(&b)?), at, len, Stored::Utf8)
                    }
                    Err(Obj::Span { at, len }) => self.heap.put(Obj::TextSpan { at, len }),
                    Err(other) => self.heap.put(other),
                };
                f.stack.push(Slot::Val(v));
            }
            b'V' => {
                let line = input.line().map_err(e)?;
                let s = str_of(line)?;
                let v = self.heap.put(Obj::Str(s));
                f.stack.push(Slot::Val(v));
            }
            b'T' | b'U' => {
                // Python 2 strings: bytes, read as latin-1 text as torch loads them (one
                // character per byte, so a located one's bytes are its text's).
                let v = match self.payload(input, if op == b'T' { 4 } else { 1 })? {
                    Ok((b, at)) => {
                        let text = b.iter().map(|&c| c as char).collect();
                        self.put_located(Obj::Str(text), at, b.len(), Stored::Raw)
                    }
                    Err(span) => self.heap.put(span),
                };
                f.stack.push(Slot::Val(v));
            }
            b'B' | b'C' | 0x8e | 0x96 => {
                let len_bytes = match op {
                    b'B' => 4,
                    b'C' => 1,
                    _ => 8,
                };
                let v = match self.payload(input, len_bytes)? {
                    Ok((b, at)) => {
                        let len = b.len();
                        self.put_located(Obj::Bytes(b), at, len, Stored::Raw)
                    }
                    Err(span) => self.heap.put(span),
                };
                f.stack.push(Slot::Val(v));
            }
            _ => return Err(Stop::Bad(format!("opcode {op:#04x} is not one of text's"))),
        }
        Ok(())
    }

    /// Empty containers, containers built from marks and the stack, and appends to them.
    fn container(
        &mut self,
        op: u8,
        _input: &mut Input<'_>,
        f: &mut Frame,
    ) -> std::result::Result<(), Stop> {
        match op {
            b'}' => {
                let v = self.heap.put(Obj::Dict(Vec::new()));
                f.stack.push(Slot::Val(v));
            }
            b']' => {
                let v = self.heap.put(Obj::List(Vec::new()));
                f.stack.push(Slot::Val(v));
            }
            b')' => {
                let v = self.heap.put(Obj::Tuple(Vec::new()));
                f.stack.push(Slot::Val(v));
            }
            0x8f => {
                let v = self.heap.put(Obj::Set(Vec::new()));
                f.stack.push(Slot::Val(v));
            }
            b't' | b'l' | 0x91 => {
                let items = f.pop_mark()?;
                self.grow(items.len() as u64).map_err(Stop::Limit)?;
                let o = match op {
                    b't' => Obj::Tuple(items),
                    b'l' => Obj::List(items),
                    _ => Obj::Set(items),
                };
                let v = self.heap.put(o);
                f.stack.push(Slot::Val(v));
            }
            0x85..=0x87 => {
                let n = usize::from(op - 0x84);
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(f.pop()?);
                }
                items.reverse();
                self.grow(n as u64).map_err(Stop::Limit)?;
                let v = self.heap.put(Obj::Tuple(items));
                f.stack.push(Slot::Val(v));
            }
            b'd' => {
                let items = f.pop_mark()?;
                let pairs = pairs(items)?;
                self.grow(pairs.len() as u64).map_err(Stop::Limit)?;
                let v = self.heap.put(Obj::Dict(pairs));
                f.stack.push(Slot::Val(v));
            }
            b'a' | b'e' | 0x90 => {
                let items = if op == b'a' {
                    vec![f.pop()?]
                } else {
                    f.pop_mark()?
                };
                self.grow(items.len() as u64).map_err(Stop::Limit)?;
                let target = f.top()?;
                match self.heap.get_mut(target) {
                    Some(Obj::List(l) | Obj::Set(l)) => l.extend(items),
                    // Appending to an object we do not model (a list subclass, a deque): its
                    // contents are what was appended, so that no tensor among them is lost.
                    Some(obj @ Obj::Opaque(_)) => *obj = Obj::List(items),
                    Some(Obj::Unread(_)) => {}
                    _ => return Err(Stop::Bad("APPEND to something that is not a list".into())),
                }
            }
            b's' | b'u' => {
                let items = if op == b's' {
                    let v = f.pop()?;
                    let k = f.pop()?;
                    vec![k, v]
                } else {
                    f.pop_mark()?
                };
                let pairs = pairs(items)?;
                self.grow(pairs.len() as u64).map_err(Stop::Limit)?;
                let target = f.top()?;
                match self.heap.get_mut(target) {
                    Some(Obj::Dict(d)) => d.extend(pairs),
                    // Items set into an object we do not model (a dict subclass: a config
                    // dict, an ordered dict under another name): its contents are those items.
                    Some(obj @ Obj::Opaque(_)) => *obj = Obj::Dict(pairs),
                    Some(Obj::Unread(_)) => {}
                    _ => return Err(Stop::Bad("SETITEM on something that is not a dict".into())),
                }
            }
            _ => {
                return Err(Stop::Bad(format!(
                    "opcode {op:#04x} is not one of container's"
                )))
            }
        }
        Ok(())
    }

    /// Globals, calls (REDUCE, NEWOBJ, BUILD), persistent ids and protocol 0/1 instances.
    fn object(
        &mut self,
        op: u8,
        input: &mut Input<'_>,
        f: &mut Frame,
    ) -> std::result::Result<(), Stop> {
        let e = |s: String| Stop::Bad(s);
        match op {
            b'c' => {
                let module = str_of(input.line().map_err(e)?)?;
                let name = str_of(input.line().map_err(e)?)?;
                let v = self.global(module, name)?;
                f.stack.push(Slot::Val(v));
            }
            0x93 => {
                let name = f.pop()?;
                let module = f.pop()?;
                let (Some(m), Some(n)) = (self.heap.text(module), self.heap.text(name)) else {
                    return Err(Stop::Bad(
                        "STACK_GLOBAL of something that is not a string".into(),
                    ));
                };
                if m.len() + n.len() > MAX_GLOBAL_NAME {
                    return Err(global_too_long());
                }
                let (m, n) = (m.to_owned(), n.to_owned());
                let v = self.global(m, n)?;
                f.stack.push(Slot::Val(v));
            }
            b'R' => {
                let args = f.pop()?;
                let callable = f.pop()?;
                let v = self.reduce(callable, args)?;
                f.stack.push(Slot::Val(v));
            }
            0x81 | 0x92 => {
                if op == 0x92 {
                    f.pop()?; // kwargs
                }
                f.pop()?; // args
                let cls = f.pop()?;
                let v = self.opaque_of(cls);
                f.stack.push(Slot::Val(v));
            }
            b'b' => {
                let state = f.pop()?;
                let target = f.top()?;
                self.build(target, state)?;
            }
            b'Q' => {
                let pid = f.pop()?;
                let v = self.persistent(pid)?;
                f.stack.push(Slot::Val(v));
            }
            b'P' => {
                return Err(Stop::Unsupported(
                    "text persistent ids (PERSID) are not used by torch.save".into(),
                ))
            }
            b'i' | b'o' => {
                // Protocol 0/1 class instantiation: opaque.
                if op == b'i' {
                    let module = str_of(input.line().map_err(e)?)?;
                    let name = str_of(input.line().map_err(e)?)?;
                    f.pop_mark()?;
                    let cls = self.global(module, name)?;
                    let v = self.heap.put(Obj::Opaque(cls));
                    f.stack.push(Slot::Val(v));
                } else {
                    let mut items = f.pop_mark()?;
                    if items.is_empty() {
                        return Err(Stop::Bad("OBJ without a class".into()));
                    }
                    let cls = items.remove(0);
                    let v = self.opaque_of(cls);
                    f.stack.push(Slot::Val(v));
                }
            }

            _ => {
                return Err(Stop::Bad(format!(
                    "opcode {op:#04x} is not one of object's"
                )))
            }
        }
        Ok(())
    }

    /// Storing to and fetching from the memo.
    fn memo(
        &mut self,
        op: u8,
        input: &mut Input<'_>,
        f: &mut Frame,
    ) -> std::result::Result<(), Stop> {
        let e = |s: String| Stop::Bad(s);
        match op {
            b'p' => {
                let i = text_index(input.line().map_err(e)?)?;
                let v = f.top()?;
                f.memo_put(i, v, self.limits.max_memo)?;
            }
            b'q' => {
                let i = u64::from(input.u8().map_err(e)?);
                let v = f.top()?;
                f.memo_put(i, v, self.limits.max_memo)?;
            }
            b'r' => {
                let i = input.le(4).map_err(e)?;
                let v = f.top()?;
                f.memo_put(i, v, self.limits.max_memo)?;
            }
            0x94 => {
                let i = f.memo.len() as u64;
                let v = f.top()?;
                f.memo_put(i, v, self.limits.max_memo)?;
            }
            b'g' => {
                let i = text_index(input.line().map_err(e)?)?;
                f.stack.push(Slot::Val(f.memo_get(i)?));
            }
            b'h' => {
                let i = u64::from(input.u8().map_err(e)?);
                f.stack.push(Slot::Val(f.memo_get(i)?));
            }
            b'j' => {
                let i = input.le(4).map_err(e)?;
                f.stack.push(Slot::Val(f.memo_get(i)?));
            }
            _ => return Err(Stop::Bad(format!("opcode {op:#04x} is not one of memo's"))),
        }
        Ok(())
    }

    fn global(&mut self, module: String, name: String) -> std::result::Result<Pv, Stop> {
        if module.len() + name.len() > MAX_GLOBAL_NAME {
            return Err(global_too_long());
        }
        if module == "torch" && super::dtypes::dtype_element(&name).is_some() {
            return Ok(self.heap.put(Obj::DType(name)));
        }
        Ok(self.heap.put(Obj::Global(Box::new((module, name)))))
    }

    /// The (key, value) pairs of a list or tuple of 2-item lists or tuples, as `dict(items)`
    /// takes them.
    fn pairs_of(&self, items: Pv) -> std::result::Result<Vec<(Pv, Pv)>, Stop> {
        let items = match self.heap.get(items) {
            Some(Obj::List(v) | Obj::Tuple(v)) => v,
            _ => {
                return Err(Stop::Bad(
                    "OrderedDict of something that is not a list".into(),
                ))
            }
        };
        items
            .iter()
            .map(|&item| match self.heap.get(item) {
                Some(Obj::List(kv) | Obj::Tuple(kv)) if kv.len() == 2 => Ok((
                    kv.first().copied().unwrap_or(Pv::None),
                    kv.get(1).copied().unwrap_or(Pv::None),
                )),
                _ => Err(Stop::Bad(
                    "an OrderedDict item that is not a (key, value) pair".into(),
                )),
            })
            .collect()
    }

    /// BUILD: sets an object's state. Two kinds of object take a value from it; any other
    /// opaque object stays opaque (nothing is set, nothing is called), and the state of the
    /// objects we model (a parameter's, an ordered dict's) is never needed.
    /// - A TorchScript module (an object of a `__torch__.*` class, as `torch.jit.save`
    ///   pickles one) takes its state dict as its value, so that its parameters, buffers and
    ///   submodules are walked as a dict's.
    /// - A `torch.nn.Module` pickled whole (`torch.save(model)`): its state is its
    ///   `__dict__`, and it takes what `model.state_dict()` would give, a dict of its
    ///   parameters, its persistent buffers and its submodules ([`Machine::module_state`]).
    fn build(&mut self, target: Pv, state: Pv) -> std::result::Result<(), Stop> {
        match self.heap.get(target) {
            Some(Obj::NdArray(_)) => return self.build_array(target, state),
            Some(Obj::NpDType(_)) => return self.build_dtype(target, state),
            _ => {}
        }
        let (scripted, distributed) = match self.heap.get(target) {
            Some(Obj::Opaque(cls)) => match self.heap.get(*cls) {
                Some(Obj::Global(g)) => (
                    g.0 == "__torch__" || g.0.starts_with("__torch__."),
                    g.0.starts_with(DCP_MODULE),
                ),
                _ => (false, false),
            },
            _ => return Ok(()),
        };
        if distributed {
            return self.build_record(target, state);
        }
        let pairs = match self.heap.get(state) {
            Some(Obj::Dict(pairs)) if scripted => pairs.clone(),
            Some(Obj::Dict(pairs)) => {
                let (own, looked_at) = self.module_state(pairs);
                // Every entry looked at counts against the items cap, so that BUILD after
                // BUILD over one shared state cannot make the work quadratic.
                self.grow(looked_at).map_err(Stop::Limit)?;
                match own {
                    Some(own) => own,
                    None => return Ok(()),
                }
            }
            _ => return Ok(()),
        };
        self.grow(pairs.len() as u64).map_err(Stop::Limit)?;
        if let Some(obj) = self.heap.get_mut(target) {
            *obj = Obj::Dict(pairs);
        }
        Ok(())
    }

    /// BUILD of a distributed checkpoint's record (a dataclass of [`DCP_MODULE`]): the object
    /// becomes its state, a dict of its fields (`(None, fields)` for a dataclass with slots),
    /// or the tuple `TensorProperties` keeps. Any other state leaves it opaque.
    fn build_record(&mut self, target: Pv, state: Pv) -> std::result::Result<(), Stop> {
        let state = match self.heap.get(state) {
            Some(Obj::Tuple(t)) if t.len() == 2 && t.first() == Some(&Pv::None) => {
                t.get(1).copied().unwrap_or(Pv::None)
            }
            _ => state,
        };
        let copied = match self.heap.get(state) {
            Some(Obj::Dict(pairs)) => pairs.len(),
            Some(Obj::Tuple(items)) => items.len(),
            _ => return Ok(()),
        };
        // Counted as the items copied, as a TorchScript module's state is, and before they
        // are: BUILD after BUILD over one shared state cannot make the work quadratic.
        self.grow(copied as u64).map_err(Stop::Limit)?;
        let record = match self.heap.get(state) {
            Some(Obj::Dict(pairs)) => Obj::Dict(pairs.clone()),
            Some(Obj::Tuple(items)) => Obj::Tuple(items.clone()),
            _ => return Ok(()),
        };
        if let Some(obj) = self.heap.get_mut(target) {
            *obj = record;
        }
        Ok(())
    }

    /// BUILD of an array from `_reconstruct`: `ndarray.__setstate__`'s state, `(version,
    /// shape, dtype, is_fortran, data)` (numpy also reads it without the version).
    fn build_array(&mut self, target: Pv, state: Pv) -> std::result::Result<(), Stop> {
        let Some((count, items)) = self.heap.tuple_head::<5>(state) else {
            return Err(Stop::Bad(format!(
                "a NumPy array's state is {}, not a tuple",
                self.heap.kind(state)
            )));
        };
        let [shape, dtype, fortran, data] = match count {
            5 => [items[1], items[2], items[3], items[4]],
            4 => [items[0], items[1], items[2], items[3]],
            n => {
                return Err(Stop::Bad(format!(
                    "a NumPy array's state has {n} items, not (version, shape, dtype, \
                     is_fortran, data)"
                )))
            }
        };
        match self.heap.get(shape) {
            Some(Obj::Tuple(t)) if t.len() > MAX_TENSOR_RANK => return Err(Stop::Rank(t.len())),
            Some(Obj::Tuple(_)) => {}
            _ => return Err(Stop::Bad("a NumPy array's shape is not a tuple".into())),
        }
        if !matches!(self.heap.get(dtype), Some(Obj::NpDType(_))) {
            return Err(Stop::Bad(format!(
                "a NumPy array's dtype is {}, not a numpy.dtype",
                self.heap.kind(dtype)
            )));
        }
        let fortran = match fortran {
            Pv::Bool(b) => b,
            Pv::Int(n) => n != 0,
            _ => return Err(Stop::Bad("a NumPy array's is_fortran is not a bool".into())),
        };
        if let Some(Obj::NdArray(a)) = self.heap.get_mut(target) {
            **a = NdArrayRef {
                shape,
                dtype,
                fortran,
                data,
            };
        }
        Ok(())
    }

    /// A NumPy scalar of a boolean, integer or float dtype as the number it holds; `None`
    /// for any other dtype, or bytes that are not its size (then it stays opaque).
    fn np_scalar(&self, dtype: Pv, data: Pv) -> Option<Pv> {
        let Some(Obj::NpDType(d)) = self.heap.get(dtype) else {
            return None;
        };
        // At most 8 bytes, looked at before anything is copied (a shared long byte string
        // named by many calls must not be copied by each).
        let bytes: Vec<u8> = match self.heap.get(data)? {
            Obj::Bytes(b) if b.len() <= 8 => b.clone(),
            // Protocol 2 from Python 3: the bytes as latin-1 text (two bytes a character at
            // most).
            Obj::Latin1 { text, len, .. } if *len <= 16 => self
                .heap
                .text(*text)?
                .chars()
                .map(|c| u8::try_from(c).ok())
                .collect::<Option<_>>()?,
            _ => return None,
        };
        let mut word = [0u8; 8];
        let n = bytes.len();
        let kind = d.code.chars().next()?;
        let size: usize = d.code.get(1..)?.parse().ok()?;
        if n != size || n > 8 || d.fields {
            return None;
        }
        // As a little-endian word: big-endian bytes reversed.
        if d.order == '>' {
            word.iter_mut()
                .zip(bytes.iter().rev())
                .for_each(|(w, b)| *w = *b);
        } else {
            word.iter_mut().zip(&bytes).for_each(|(w, b)| *w = *b);
        }
        let bits = u64::from_le_bytes(word);
        Some(match (kind, n) {
            ('b', 1) => Pv::Bool(bits != 0),
            ('i', 1 | 2 | 4 | 8) => {
                let shift = 64 - 8 * n as u32;
                Pv::Int(((bits << shift) as i64) >> shift)
            }
            ('u', 1 | 2 | 4) => Pv::Int(bits as i64),
            ('u', 8) => Pv::Int(i64::try_from(bits).ok()?),
            ('f', 2) => Pv::Float(f64::from(half::f16::from_bits(bits as u16))),
            ('f', 4) => Pv::Float(f64::from(f32::from_bits(bits as u32))),
            ('f', 8) => Pv::Float(f64::from_bits(bits)),
            _ => return None,
        })
    }

    /// BUILD of a `numpy.dtype`: `(version, byteorder, subarray, names, fields, elsize,
    /// alignment, flags)`; only the byte order and whether there are fields matter here.
    fn build_dtype(&mut self, target: Pv, state: Pv) -> std::result::Result<(), Stop> {
        let Some((count, items)) = self.heap.tuple_head::<4>(state) else {
            return Err(Stop::Bad("a numpy.dtype's state is not a tuple".into()));
        };
        let order = match self.heap.text(items[1]) {
            Some("<") => '<',
            Some(">") => '>',
            Some("|") => '|',
            Some("=") => '=',
            _ if count < 2 => '|',
            _ => {
                return Err(Stop::Bad(
                    "a numpy.dtype's byte order is not one of <, >, | or =".into(),
                ))
            }
        };
        let fields = count > 3 && items[3] != Pv::None;
        if let Some(Obj::NpDType(d)) = self.heap.get_mut(target) {
            d.order = order;
            d.fields = fields;
        }
        Ok(())
    }

    /// What `state_dict()` takes from a module whose `__dict__` is `state`, one level: the
    /// parameters that are tensors (not `None`), the buffers that are tensors and not named
    /// in `_non_persistent_buffers_set`, then the submodules that are not `None` (each built
    /// already, so a dict of its own). `None` when `state` is not a module's: it needs
    /// `_parameters`, `_buffers` and `_modules`, each a dict. Also how many entries it
    /// looked at.
    fn module_state(&self, state: &[(Pv, Pv)]) -> (Option<Vec<(Pv, Pv)>>, u64) {
        let mut looked_at = state.len() as u64;
        let field = |name: &str| {
            state
                .iter()
                .find(|&&(k, _)| self.heap.text(k) == Some(name))
                .map(|&(_, v)| v)
        };
        let dict = |name: &str| match self.heap.get(field(name)?) {
            Some(Obj::Dict(pairs)) => Some(pairs),
            _ => None,
        };
        let (Some(params), Some(buffers), Some(modules)) =
            (dict("_parameters"), dict("_buffers"), dict("_modules"))
        else {
            return (None, looked_at);
        };
        looked_at += (params.len() + buffers.len() + modules.len()) as u64;
        // A set of names (std's hasher is keyed: the file cannot choose colliding names).
        let transient: HashSet<&str> =
            match field("_non_persistent_buffers_set").map(|v| self.heap.get(v)) {
                Some(Some(Obj::Set(names) | Obj::List(names) | Obj::Tuple(names))) => {
                    looked_at += names.len() as u64;
                    names.iter().filter_map(|&n| self.heap.text(n)).collect()
                }
                _ => HashSet::new(),
            };
        let is_tensor = |v: Pv| matches!(self.heap.get(v), Some(Obj::Tensor(_) | Obj::Unread(_)));
        let persistent = |k: Pv| self.heap.text(k).is_none_or(|k| !transient.contains(k));
        let own = params
            .iter()
            .filter(|&&(_, v)| is_tensor(v))
            .chain(
                buffers
                    .iter()
                    .filter(|&&(k, v)| is_tensor(v) && persistent(k)),
            )
            .chain(modules.iter().filter(|&&(_, v)| v != Pv::None))
            .copied()
            .collect();
        (Some(own), looked_at)
    }

    /// The value an object of class `cls` stands for, never built: opaque.
    fn opaque_of(&mut self, cls: Pv) -> Pv {
        let cls = match self.heap.get(cls) {
            Some(Obj::Global(_)) => cls,
            _ => Pv::None,
        };
        self.heap.put(Obj::Opaque(cls))
    }

    /// `callable(*args)`, for the callables a state dict uses; anything else is opaque.
    /// Nothing is copied from the arguments beyond the few handles a known callable reads.
    fn reduce(&mut self, callable: Pv, args: Pv) -> std::result::Result<Pv, Stop> {
        let known = match self.heap.get(callable) {
            Some(Obj::Global(g)) => Known::of(&g.0, &g.1),
            // What an unknown call returned may be callable: its call is unknown too.
            Some(Obj::Opaque(_) | Obj::Unread(_)) => return Ok(self.opaque_call(callable, args)),
            // A pickler calls a class or a function; Python's unpickler and torch's
            // weights-only one both refuse to call a tuple, a number or a tensor.
            _ => {
                return Err(Stop::Bad(format!(
                    "REDUCE calls {}, which is not callable",
                    self.heap.kind(callable)
                )))
            }
        };
        let Some((count, first)) = self.heap.tuple_head::<8>(args) else {
            return Err(Stop::Bad("a call with no argument tuple".into()));
        };
        let arg = |i: usize| first.get(i).copied().unwrap_or(Pv::None);
        match known {
            // `OrderedDict()`, or as Python 2 pickled one (its `__reduce__` passed the items):
            // `OrderedDict([[key, value], ...])`, which legacy checkpoints hold.
            Known::OrderedDict => match count {
                0 => Ok(self.heap.put(Obj::Dict(Vec::new()))),
                1 => {
                    let pairs = self.pairs_of(arg(0))?;
                    Ok(self.heap.put(Obj::Dict(pairs)))
                }
                n => Err(Stop::Bad(format!("OrderedDict called with {n} arguments"))),
            },
            // A size is its tuple.
            Known::Size => match self.heap.get(arg(0)) {
                Some(Obj::Tuple(_)) => Ok(arg(0)),
                _ => Err(Stop::Bad(
                    "torch.Size of something that is not a tuple".into(),
                )),
            },
            Known::RebuildTensor { v3 } => self.rebuild_tensor(&first, v3),
            Known::Parameter => match self.heap.get(arg(0)) {
                Some(Obj::Tensor(_)) => Ok(arg(0)),
                _ => Ok(self.opaque_call(callable, args)),
            },
            // (func, new_type, args, state): the tensor is func(*args). Chains of these
            // are as deep as their bytes allow: only a few levels are followed.
            Known::FromType => {
                if self.nested >= MAX_NESTED_CALLS {
                    return Err(Stop::Limit(format!(
                        "_rebuild_from_type_v2 nested more than {MAX_NESTED_CALLS} deep"
                    )));
                }
                self.nested += 1;
                let v = self.reduce(arg(0), arg(2));
                self.nested -= 1;
                v
            }
            // `set(items)`, as protocols 0-3 pickle a set (a module's
            // `_non_persistent_buffers_set`, a checkpoint's tags).
            Known::Set => match count {
                0 => Ok(self.heap.put(Obj::Set(Vec::new()))),
                1 => match self.heap.get(arg(0)) {
                    Some(Obj::List(items) | Obj::Tuple(items) | Obj::Set(items)) => {
                        let items = items.clone();
                        self.grow(items.len() as u64).map_err(Stop::Limit)?;
                        Ok(self.heap.put(Obj::Set(items)))
                    }
                    _ => Ok(self.opaque_of(callable)),
                },
                _ => Ok(self.opaque_of(callable)),
            },
            Known::CodecsEncode => {
                let latin1 = matches!(self.heap.text(arg(1)), Some("latin1" | "latin-1"));
                // A locating machine leaves the text where it is: an array's bytes, which
                // are decoded when read.
                let text_at = match self.heap.location(arg(0)) {
                    Some(Located {
                        at,
                        len,
                        stored: Stored::Utf8,
                    }) => Some((at, len)),
                    _ => None,
                };
                if let (true, Some((at, len))) = (latin1, text_at) {
                    return Ok(self.heap.put(Obj::Latin1 {
                        at,
                        len,
                        text: arg(0),
                    }));
                }
                match self.heap.text(arg(0)) {
                    Some(s) if latin1 => {
                        let b: Option<Vec<u8>> = s.chars().map(|c| u8::try_from(c).ok()).collect();
                        match b {
                            Some(b) => Ok(self.heap.put(Obj::Bytes(b))),
                            None => {
                                Err(Stop::Bad("latin-1 text with a character above 255".into()))
                            }
                        }
                    }
                    _ => Ok(self.opaque_of(callable)),
                }
            }
            // `_reconstruct(ndarray, (0,), b"b")`: an empty array that BUILD then fills.
            // Only for `numpy.ndarray` itself (a subclass, such as a masked array, carries
            // more state than its data: it stays opaque).
            Known::NpReconstruct => {
                let plain = matches!(
                    self.heap.get(arg(0)),
                    Some(Obj::Global(g)) if g.0 == "numpy" && g.1 == "ndarray"
                );
                if !plain {
                    return Ok(self.opaque_of(callable));
                }
                Ok(self.heap.put(Obj::NdArray(Box::new(NdArrayRef {
                    shape: Pv::None,
                    dtype: Pv::None,
                    fortran: false,
                    data: Pv::None,
                }))))
            }
            // `dtype(code, align, copy)`.
            Known::NpDType => match self.heap.text(arg(0)) {
                Some(code) if code.len() <= 64 => {
                    let code = code.to_owned();
                    Ok(self.heap.put(Obj::NpDType(Box::new(NpDType {
                        code,
                        order: '|',
                        fields: false,
                    }))))
                }
                _ => Err(Stop::Bad(
                    "numpy.dtype of something that is not a short type code".into(),
                )),
            },
            // Protocol 5: `_frombuffer(buffer, dtype, shape, order)`.
            Known::NpFromBuffer => {
                let (data, dtype, shape, order) = (arg(0), arg(1), arg(2), arg(3));
                if count != 4 {
                    return Err(Stop::Bad(format!(
                        "_frombuffer called with {count} arguments"
                    )));
                }
                let fortran = match self.heap.text(order) {
                    Some("C") => false,
                    Some("F") => true,
                    _ => return Err(Stop::Bad("_frombuffer's order is not C or F".into())),
                };
                let array = self.heap.put(Obj::NdArray(Box::new(NdArrayRef {
                    shape: Pv::None,
                    dtype: Pv::None,
                    fortran: false,
                    data: Pv::None,
                })));
                let state = self
                    .heap
                    .put(Obj::Tuple(vec![shape, dtype, Pv::Bool(fortran), data]));
                self.build_array(array, state)?;
                Ok(array)
            }
            // `scalar(dtype, bytes)`: a NumPy scalar (`np.float32(1.5)`), as the number it is.
            Known::NpScalar => Ok(self
                .np_scalar(arg(0), arg(1))
                .unwrap_or_else(|| self.opaque_of(callable))),
            // `tuple(items)`, as Paddle 2 pickled a tensor: `tuple(((name, array),))`.
            Known::Tuple => match count {
                0 => Ok(self.heap.put(Obj::Tuple(Vec::new()))),
                1 => match self.heap.get(arg(0)) {
                    Some(Obj::List(items) | Obj::Tuple(items)) => {
                        let items = items.clone();
                        self.grow(items.len() as u64).map_err(Stop::Limit)?;
                        Ok(self.heap.put(Obj::Tuple(items)))
                    }
                    _ => Ok(self.opaque_of(callable)),
                },
                _ => Ok(self.opaque_of(callable)),
            },
            Known::Other => Ok(self.opaque_call(callable, args)),
        }
    }

    /// What `callable(*args)` stands for when we do not evaluate it: [`Obj::Unread`] when
    /// one of its first 8 arguments is tensor data (a storage, a tensor, or another such
    /// call), else opaque. torch's rebuild functions take their data among the first few;
    /// looking no further keeps a call over a shared huge tuple from costing its length.
    fn opaque_call(&mut self, callable: Pv, args: Pv) -> Pv {
        let from_data = self.heap.tuple_head::<8>(args).is_some_and(|(_, first)| {
            first.iter().any(|&a| {
                matches!(
                    self.heap.get(a),
                    Some(Obj::Storage(_) | Obj::Tensor(_) | Obj::Unread(_))
                )
            })
        });
        if !from_data {
            return self.opaque_of(callable);
        }
        let cls = match self.heap.get(callable) {
            Some(Obj::Global(_)) => callable,
            Some(Obj::Opaque(cls) | Obj::Unread(cls)) => *cls,
            _ => Pv::None,
        };
        self.heap.put(Obj::Unread(cls))
    }

    fn rebuild_tensor(&mut self, args: &[Pv; 8], v3: bool) -> std::result::Result<Pv, Stop> {
        let arg = |i: usize| args.get(i).copied().unwrap_or(Pv::None);
        if !matches!(self.heap.get(arg(0)), Some(Obj::Storage(_))) {
            return Err(Stop::Bad("a tensor whose storage is not a storage".into()));
        }
        let offset = match arg(1) {
            Pv::Int(n) if n >= 0 => n as u64,
            _ => {
                return Err(Stop::Bad(
                    "a tensor's storage offset is not a non-negative integer".into(),
                ))
            }
        };
        for (v, what) in [(arg(2), "size"), (arg(3), "stride")] {
            match self.heap.get(v) {
                Some(Obj::Tuple(t)) if t.len() > MAX_TENSOR_RANK => {
                    return Err(Stop::Rank(t.len()))
                }
                Some(Obj::Tuple(_)) => {}
                _ => return Err(Stop::Bad(format!("a tensor's {what} is not a tuple"))),
            }
        }
        let dtype = if v3 {
            match self.heap.get(arg(6)) {
                Some(Obj::DType(_) | Obj::Global(_)) => Some(arg(6)),
                _ => return Err(Stop::Bad("_rebuild_tensor_v3 without a dtype".into())),
            }
        } else {
            None
        };
        Ok(self.heap.put(Obj::Tensor(Box::new(TensorRef {
            storage: arg(0),
            dtype,
            offset,
            size: arg(2),
            stride: arg(3),
        }))))
    }

    /// `persistent_load(('storage', type, key, location, numel))`.
    fn persistent(&mut self, pid: Pv) -> std::result::Result<Pv, Stop> {
        let Some((count, items)) = self.heap.tuple_head::<6>(pid) else {
            return Err(Stop::Bad("a persistent id that is not a tuple".into()));
        };
        if self.heap.text(items[0]) != Some("storage") || count < 5 {
            return Err(Stop::Unsupported(
                "a persistent id other than ('storage', type, key, location, size)".into(),
            ));
        }
        if !matches!(
            self.heap.get(items[1]),
            Some(Obj::Global(_) | Obj::DType(_))
        ) {
            return Err(Stop::Bad("a storage type that is not a class".into()));
        }
        if self.heap.text(items[2]).is_none() {
            return Err(Stop::Bad("a storage key that is not a string".into()));
        }
        // Legacy checkpoints add view metadata, which only pre-0.4 storage views had.
        if count > 5 && items[5] != Pv::None {
            return Err(Stop::Unsupported("a legacy storage view (pre-0.4)".into()));
        }
        let numel = match items[4] {
            Pv::Int(n) if n >= 0 => n as u64,
            _ => {
                return Err(Stop::Bad(
                    "a storage size that is not a non-negative integer".into(),
                ))
            }
        };
        Ok(self.heap.put(Obj::Storage(StorageRef {
            class: items[1],
            key: items[2],
            numel,
        })))
    }
}

/// The callables [`Machine::reduce`] evaluates.
enum Known {
    OrderedDict,
    Size,
    RebuildTensor { v3: bool },
    Parameter,
    FromType,
    Set,
    CodecsEncode,
    NpReconstruct,
    NpDType,
    NpFromBuffer,
    NpScalar,
    Tuple,
    Other,
}

impl Known {
    fn of(module: &str, name: &str) -> Self {
        match (module, name) {
            ("collections", "OrderedDict") => Known::OrderedDict,
            ("torch", "Size") => Known::Size,
            // `_rebuild_tensor(storage, offset, size, stride)`, as torch before 0.4 pickled a
            // tensor: v2's first four arguments.
            ("torch._utils", "_rebuild_tensor" | "_rebuild_tensor_v2") => {
                Known::RebuildTensor { v3: false }
            }
            ("torch._utils", "_rebuild_tensor_v3") => Known::RebuildTensor { v3: true },
            ("torch._utils", "_rebuild_parameter" | "_rebuild_parameter_with_state") => {
                Known::Parameter
            }
            ("torch._tensor", "_rebuild_from_type_v2") => Known::FromType,
            ("_codecs", "encode") => Known::CodecsEncode,
            ("builtins" | "__builtin__", "set") => Known::Set,
            ("builtins" | "__builtin__", "tuple") => Known::Tuple,
            ("numpy.core.multiarray" | "numpy._core.multiarray", "_reconstruct") => {
                Known::NpReconstruct
            }
            ("numpy", "dtype") => Known::NpDType,
            ("numpy.core.multiarray" | "numpy._core.multiarray", "scalar") => Known::NpScalar,
            ("numpy.core.numeric" | "numpy._core.numeric", "_frombuffer") => Known::NpFromBuffer,
            _ => Known::Other,
        }
    }
}

fn global_too_long() -> Stop {
    Stop::Limit(format!(
        "a global's module and name exceed {MAX_GLOBAL_NAME} bytes"
    ))
}

/// Why a step stopped the machine.
enum Stop {
    Bad(String),
    /// A tensor's size or stride longer than the rank cap.
    Rank(usize),
    Limit(String),
    Unsupported(String),
}

fn pairs(items: Vec<Pv>) -> std::result::Result<Vec<(Pv, Pv)>, Stop> {
    if items.len() % 2 != 0 {
        return Err(Stop::Bad("an odd number of items for a dict".into()));
    }
    let mut out = Vec::with_capacity(items.len() / 2);
    let mut it = items.into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        out.push((k, v));
    }
    Ok(out)
}

fn text_index(line: &[u8]) -> std::result::Result<u64, Stop> {
    std::str::from_utf8(line)
        .ok()
        .and_then(|t| t.parse::<u64>().ok())
        .ok_or_else(|| Stop::Bad("bad memo index".into()))
}

/// A little-endian two's complement integer (LONG1/LONG4), if it fits in 64 bits.
fn long_le(b: &[u8]) -> Option<i64> {
    if b.is_empty() {
        return Some(0);
    }
    if b.len() > 8 {
        // Longer encodings may still hold a small value with sign-extension bytes.
        let (low, high) = b.split_at(8);
        let v = i64::from_le_bytes(low.try_into().ok()?);
        let fill = if v < 0 { 0xFF } else { 0 };
        return high.iter().all(|&x| x == fill).then_some(v);
    }
    let neg = b.last().is_some_and(|&x| x & 0x80 != 0);
    let mut buf = [if neg { 0xFF } else { 0 }; 8];
    buf.get_mut(..b.len())?.copy_from_slice(b);
    Some(i64::from_le_bytes(buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(p: &[u8]) -> Result<(Heap, Pv)> {
        let mut heap = Heap::default();
        let v = Machine::new(&mut heap, PICKLE_LIMITS, 0).run(p)?.0;
        Ok((heap, v))
    }

    #[test]
    fn a_locating_machine_leaves_long_byte_strings_where_they_lie() {
        // (b"ab", <5000 bytes>, "cd", _codecs.encode("\u{e9}", "latin1")) at protocol 3.
        let mut p = b"\x80\x03(C\x02abB\x88\x13\x00\x00".to_vec();
        p.extend([7u8; 5000]);
        p.extend(b"X\x02\x00\x00\x00cdc_codecs\nencode\nX\x02\x00\x00\x00\xc3\xa9");
        p.extend(b"X\x06\x00\x00\x00latin1\x86Rt.");
        let mut heap = Heap::default();
        let v = Machine::new(&mut heap, PICKLE_LIMITS, 100)
            .locating()
            .run(&p)
            .unwrap()
            .0;
        let Some(Obj::Tuple(items)) = heap.get(v) else {
            panic!("{:?}", heap.get(v))
        };
        let items = items.clone();
        // Offsets are the file's: the pickle starts at byte 100.
        let located = |at, len, stored| Some(Located { at, len, stored });
        assert_eq!(heap.location(items[0]), located(105, 2, Stored::Raw));
        assert_eq!(heap.get(items[1]), Some(&Obj::Span { at: 112, len: 5000 }));
        assert_eq!(heap.location(items[2]), located(5117, 2, Stored::Utf8));
        assert!(matches!(
            heap.get(items[3]),
            Some(&Obj::Latin1 {
                at: 5140,
                len: 2,
                ..
            })
        ));
        // A machine that does not locate copies, notes nothing and decodes latin-1 text.
        let (heap, v) = run(&p).unwrap();
        let Some(Obj::Tuple(items)) = heap.get(v) else {
            panic!()
        };
        assert_eq!(heap.location(items[0]), None);
        assert!(matches!(heap.get(items[1]), Some(Obj::Bytes(b)) if b.len() == 5000));
        assert_eq!(heap.get(items[3]), Some(&Obj::Bytes(vec![0xe9])));
    }

    /// One state dict of 10,000 entries, set by BUILD on one fresh object after another:
    /// each BUILD looks at the whole state to tell a module's, so the entries looked at are
    /// charged to the items cap, which stops the pickle (near 1,700 BUILDs) where the work
    /// would have grown as objects times entries.
    #[test]
    fn builds_over_one_shared_state_are_charged_to_the_items_cap() {
        // A class we do not know, and a distributed checkpoint's record (made its fields).
        for class in [
            &b"__main__\nThing"[..],
            b"torch.distributed.checkpoint.metadata\nThing",
        ] {
            let mut p = b"\x80\x02}q\x00(".to_vec();
            for i in 0..10_000u32 {
                p.push(b'J');
                p.extend(i.to_le_bytes());
                p.push(b'N');
            }
            p.push(b'u');
            for _ in 0..20_000 {
                // NEWOBJ of the class, then BUILD with the memoized state.
                p.push(b'c');
                p.extend(class);
                p.extend(b"\n)\x81h\x00b0");
            }
            p.push(b'.');
            let e = run(&p).unwrap_err();
            assert_eq!(e.kind(), zt_container::ErrorKind::LimitExceeded, "{e}");
            assert!(e.to_string().contains("items"), "{e}");
        }
    }

    #[test]
    fn a_distributed_checkpoints_records_become_their_fields() {
        let class = b"ctorch.distributed.checkpoint.metadata\nRecord\n)\x81";
        // BUILD with a dict, with (None, dict) as a dataclass with slots pickles, with a tuple.
        let states: [&[u8]; 3] = [
            b"}X\x01\x00\x00\x00aK\x01s",
            b"N}X\x01\x00\x00\x00aK\x01s\x86",
            b"K\x01K\x02\x86",
        ];
        for (state, want_dict) in states.into_iter().zip([true, true, false]) {
            let mut p = b"\x80\x02".to_vec();
            p.extend(class);
            p.extend(state);
            p.extend(b"b.");
            let (heap, v) = run(&p).unwrap();
            match heap.get(v) {
                Some(Obj::Dict(d)) if want_dict => {
                    assert_eq!(heap.text(d[0].0), Some("a"));
                    assert_eq!(d[0].1, Pv::Int(1));
                }
                Some(Obj::Tuple(t)) if !want_dict => assert_eq!(t, &[Pv::Int(1), Pv::Int(2)]),
                other => panic!("{other:?}"),
            }
        }
        // Another module's class stays opaque.
        let (heap, v) = run(b"\x80\x02c__main__\nRecord\n)\x81K\x01K\x02\x86b.").unwrap();
        assert!(matches!(heap.get(v), Some(Obj::Opaque(_))));
    }

    #[test]
    fn integers_strings_and_containers() {
        // {'a': [1, -2, 3.5], 'b': (True, None)} at protocol 2.
        let p = b"\x80\x02}q\x00(X\x01\x00\x00\x00aq\x01]q\x02(K\x01J\xfe\xff\xff\xffG@\x0c\x00\x00\x00\x00\x00\x00eX\x01\x00\x00\x00bq\x03\x88N\x86q\x04u.";
        let (heap, v) = run(p).unwrap();
        let Some(Obj::Dict(d)) = heap.get(v) else {
            panic!()
        };
        assert_eq!(d.len(), 2);
        let Some(Obj::List(l)) = heap.get(d[0].1) else {
            panic!()
        };
        assert_eq!(l, &[Pv::Int(1), Pv::Int(-2), Pv::Float(3.5)]);
    }

    #[test]
    fn an_ordered_dict_built_from_its_items_as_python_2_pickled_it() {
        // OrderedDict([['a', 1], ['b', 2]]): the items passed to the class, as legacy
        // checkpoints saved under Python 2 hold them (torch.load(weights_only=True) reads it).
        let p = b"\x80\x02ccollections\nOrderedDict\n](](X\x01\x00\x00\x00aK\x01e](X\x01\x00\x00\x00bK\x02ee\x85R.";
        let (heap, v) = run(p).unwrap();
        let Some(Obj::Dict(d)) = heap.get(v) else {
            panic!("{:?}", heap.get(v))
        };
        assert_eq!(d.len(), 2);
        assert_eq!(heap.text(d[0].0), Some("a"));
        assert_eq!((d[0].1, d[1].1), (Pv::Int(1), Pv::Int(2)));
        // Not pairs: an error, not a guess.
        let p = b"\x80\x02ccollections\nOrderedDict\n](K\x01e\x85R.";
        let e = run(p).unwrap_err();
        assert!(e.message().contains("not a (key, value) pair"), "{e}");
    }

    #[test]
    fn long_integers() {
        assert_eq!(long_le(&[0xff]), Some(-1));
        assert_eq!(long_le(&[0x00, 0x01]), Some(256));
        assert_eq!(long_le(&[0; 9]), Some(0));
        assert_eq!(long_le(&[1, 0, 0, 0, 0, 0, 0, 0, 1]), None);
    }

    #[test]
    fn a_torchscript_module_takes_its_state_and_other_objects_stay_opaque() {
        // __torch__.M() with state {"w": 1} (as torch.jit.save pickles a module), then the
        // same for a class outside __torch__.
        for (module, scripted) in [(&b"__torch__"[..], true), (&b"argparse"[..], false)] {
            let mut p = b"\x80\x02c".to_vec();
            p.extend(module);
            p.extend(b"\nM\n)\x81}X\x01\x00\x00\x00wK\x01sb.");
            let (heap, v) = run(&p).unwrap();
            match heap.get(v) {
                Some(Obj::Dict(pairs)) => {
                    assert!(scripted);
                    assert_eq!(pairs.len(), 1);
                }
                Some(Obj::Opaque(_)) => assert!(!scripted),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn unknown_globals_are_never_called() {
        // os.system('echo') becomes an opaque value naming os.system.
        let p = b"\x80\x02cos\nsystem\nX\x04\x00\x00\x00echo\x85R.";
        let (heap, v) = run(p).unwrap();
        let Some(Obj::Opaque(g)) = heap.get(v) else {
            panic!()
        };
        assert_eq!(
            heap.get(*g),
            Some(&Obj::Global(Box::new(("os".into(), "system".into()))))
        );
    }

    #[test]
    fn shared_references_do_not_copy() {
        // l0 = [1]; l(n+1) = [l(n), l(n)], 40 levels: 2^40 leaves if copied.
        let mut p = b"\x80\x02]q\x00K\x01a".to_vec();
        for i in 0..40u8 {
            p.extend([b'h', i, b'h', i, 0x86, b'q', i + 1]);
        }
        p.push(b'.');
        let (heap, _) = run(&p).unwrap();
        assert!(heap.objs.len() < 100);
    }

    #[test]
    fn limits_and_malformed_input() {
        assert!(run(b"\x80\x02").is_err(), "no STOP");
        assert!(run(b"\x80\x02h\x05.").is_err(), "memo entry never stored");
        assert!(
            run(b"\x80\x02X\xff\xff\xff\xff.").is_err(),
            "string longer than the input"
        );
        assert!(run(b"\x80\x02t.").is_err(), "no mark");
        assert!(run(b"\x80\x09N.").is_err(), "protocol");
        let mut big = b"\x80\x02(".to_vec();
        big.extend(std::iter::repeat_n(b'N', (1 << 15) + 1));
        let e = run(&big).err().unwrap();
        assert_eq!(e.kind(), zt_container::ErrorKind::LimitExceeded, "{e}");
    }
}

#[cfg(test)]
mod limit_tests {
    //! Each cap with small limits (the corpus has the stack and string caps at their real
    //! values; the others need files of megabytes to reach them).
    use super::*;

    fn run_with(limits: PickleLimits, p: &[u8]) -> Error {
        let mut heap = Heap::default();
        Machine::new(&mut heap, limits, 0).run(p).err().unwrap()
    }

    const SMALL: PickleLimits = PickleLimits {
        max_opcodes: 100,
        max_stack: 50,
        max_memo: 10,
        max_string: 16,
        max_items: 20,
        max_objects: 1000,
    };

    #[test]
    fn each_cap_stops_the_machine_with_its_own_message() {
        let mut p = b"\x80\x02".to_vec();
        p.extend(b"N0".repeat(60));
        let e = run_with(SMALL, &p);
        assert!(e.message().contains("more than 100 opcodes"), "{e}");

        let mut p = b"\x80\x02N".to_vec();
        for i in 0..11u8 {
            p.extend([b'q', i]);
        }
        let e = run_with(SMALL, &p);
        assert!(e.message().contains("memo holds more than 10"), "{e}");

        let e = run_with(SMALL, b"\x80\x02X\x11\x00\x00\x00");
        assert!(
            e.message()
                .contains("a string of 17 bytes exceeds the cap of 16"),
            "{e}"
        );

        let mut p = b"\x80\x02](".to_vec();
        p.extend(b"N".repeat(21));
        p.push(b'e');
        let e = run_with(SMALL, &p);
        assert!(
            e.message().contains("containers hold more than 20 items"),
            "{e}"
        );

        let mut p = b"\x80\x02".to_vec();
        p.extend(b"]0".repeat(40));
        let e = run_with(
            PickleLimits {
                max_objects: 30,
                ..SMALL
            },
            &p,
        );
        assert!(e.message().contains("builds more than 30 objects"), "{e}");

        let mut p = b"\x80\x02".to_vec();
        p.extend(b"N".repeat(51));
        let e = run_with(SMALL, &p);
        assert!(e.message().contains("stack holds more than 50"), "{e}");
        assert_eq!(e.kind(), zt_container::ErrorKind::LimitExceeded);
    }
}
