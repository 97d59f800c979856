//! Legacy GGML files, the model files of llama.cpp and whisper.cpp before GGUF (2023), in the
//! facade's object model: every tensor a range of the file.
//!
//! ```text
//!  magic u32 ("lmgg" "fmgg" "tjgg" "algg" on disk)  [version u32]   (not after "ggml")
//!  header: hyperparameters (u32 words) and what the model's family puts after them
//!  tensor records to the end of the file, each:
//!    n_dims u32 | name length u32 | ggml type u32 | n_dims dims u32 (innermost first)
//!    | name | [ggjt, ggla: zeros up to a multiple of 32 bytes from the file's start] | data
//! ```
//!
//! The headers, by family (docs/decisions.md, "Legacy GGML files"):
//! - llama.cpp's models (`ggml` until April 2023, `ggmf` v1, `ggjt` v1 to v3): 7 words
//!   (`n_vocab n_embd n_mult n_head n_layer n_rot ftype`) and `n_vocab` tokens, each a
//!   length, its bytes and, after `ggml`, a score (f32);
//! - llama.cpp's LoRA adapters (`ggla` v1): 2 words, `r` and `alpha`;
//! - whisper.cpp's models (`ggml`): 11 words, the mel filters (`n_mel`, `n_fft` and
//!   `n_mel * n_fft` f32, listed as the object [`MEL_FILTERS`]), a token count and tokens
//!   (length, bytes);
//! - whisper.cpp's voice activity models (`ggml`, Silero VAD): the model type's name (a
//!   length and its bytes: `silero-16k`), 6 words, 3 per encoder layer (their count is the
//!   sixth), 4 more; no tokens;
//! - the models of ggml's examples (GPT-2, GPT-J, GPT-NeoX, StarCoder, ...; `ggml`): 5 to 12
//!   words, a token count and tokens, without or with scores; MPT's and Replit's: 6 or 8
//!   words and as many tokens as the fifth says (`n_vocab`), without or with scores.
//!
//! The `ggml` magic does not say which family wrote the file: each header is tried in that
//! order, and the first after which the tensor records tile the rest of the file exactly is
//! taken; when none does, the error is the one of the header whose records went furthest.
//! The hyperparameters become file attributes (`ggml.<name>`, or `ggml.hparams` for the
//! examples' headers), with `ggml.family` and `ggml.format`; the tokens, read again once the
//! header is known, become `ggml.vocab` (and `ggml.scores` where the file scores them), which
//! the GGUF writer makes llama.cpp's vocabulary of (`convert/gguf/llama.rs`).
//!
//! A tensor is a dense object (F32, F16, ...) or, of a block type, an object of format
//! `gguf.<type>/1` as GGUF's are ([`crate::files::gguf::typed_object`]): the blocks of
//! `ggjt` v3 are GGUF's. Older files wrote Q4_0, Q4_1 and Q8_0 blocks differently (before
//! `ggjt` v3) and every block type differently before `ggjt` v2 (ggml's examples say which
//! in `ftype / 1000`); llama.cpp stopped reading those, and so they are listed with a defect.
//!
//! Hostile input: every count and length is checked against the bytes left before it is
//! used; tokens, names and dimensions are capped ([`MAX_TOKENS`], [`MAX_TOKEN_LEN`],
//! [`MAX_NAME_LEN`], 4 dimensions); what the listing takes is charged to
//! [`Limits::listing_budget`]; the headers tried for a `ggml` file are a fixed few.

use foldhash::fast::RandomState;
use hashbrown::HashSet;
use zt_container::internal::MemoryBudget;
use zt_container::{Error, Result, Source};
use zt_formats::ggml::GgmlType;
use zt_formats::{DType, ElementType};
use zt_manifest::{Attributes, Value, ValueBudget};

use crate::files::gguf::{typed_object, GGML_SCORES_KEY, GGML_VOCAB_KEY};
use crate::files::window::{Window, WINDOW};
use crate::listing::{Limits, Listing};
use crate::model::{ByteOrder, Defect, FileVersion, ObjectInfo};

/// The object that holds a whisper.cpp model's mel filters.
pub const MEL_FILTERS: &str = "mel_filters";

/// The most tokens a header may declare.
pub const MAX_TOKENS: u64 = 1 << 24;

/// The longest token read (llama.cpp's converter to GGUF stops at 4096).
pub const MAX_TOKEN_LEN: u64 = 1 << 16;

/// The longest tensor name read (llama.cpp's converter to GGUF stops at 4096).
pub const MAX_NAME_LEN: u64 = 1 << 12;

/// The longest model type name of a voice activity model read.
const MAX_TYPE_NAME: u64 = 256;

/// The most encoder layers of a voice activity model read.
const MAX_VAD_LAYERS: u32 = 64;

/// The most dimensions of a tensor (ggml's `GGML_MAX_DIMS`).
const MAX_DIMS: u32 = 4;

/// How much is read at a tensor record of an unmapped file: the record (at most 4 KiB of
/// name, 28 bytes of the rest, 31 of padding) and the small tensors after it.
const RECORD_AHEAD: u64 = 16 << 10;

/// Where `ggjt` and `ggla` files align each tensor's data.
const ALIGNMENT: u64 = 32;

/// The magics, as little-endian u32s.
const GGML: u32 = 0x6767_6d6c;
const GGMF: u32 = 0x6767_6d66;
const GGJT: u32 = 0x6767_6a74;
const GGLA: u32 = 0x6767_6c61;

/// The names of llama.cpp's hyperparameters, in the header's order.
const LLAMA_WORDS: [&str; 7] = [
    "n_vocab", "n_embd", "n_mult", "n_head", "n_layer", "n_rot", "ftype",
];

/// The names of whisper.cpp's hyperparameters, in the header's order.
const WHISPER_WORDS: [&str; 11] = [
    "n_vocab",
    "n_audio_ctx",
    "n_audio_state",
    "n_audio_head",
    "n_audio_layer",
    "n_text_ctx",
    "n_text_state",
    "n_text_head",
    "n_text_layer",
    "n_mels",
    "ftype",
];

/// ggml's examples fold the version of their block layouts into `ftype` this way
/// (`GGML_QNT_VERSION_FACTOR`).
const QNT_VERSION_FACTOR: u32 = 1000;

fn bad(what: impl std::fmt::Display) -> Error {
    Error::invalid(format!("invalid GGML file: {what}"))
}

/// A header's family: how its hyperparameters and tokens are laid out.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Family {
    /// llama.cpp: 7 words, `n_vocab` tokens, scored unless `scored` is false.
    Llama { scored: bool },
    /// llama.cpp's LoRA adapter: `r`, `alpha`.
    Lora,
    /// whisper.cpp: 11 words, the mel filters, counted tokens.
    Whisper,
    /// whisper.cpp's voice activity model: a type name, words as its layers need.
    WhisperVad,
    /// ggml's examples: `words` words, tokens scored or not, after their count when
    /// `counted`, else as many as the fifth word says (MPT's and Replit's `n_vocab`).
    Example {
        words: usize,
        scored: bool,
        counted: bool,
    },
}

impl Family {
    fn name(self) -> &'static str {
        match self {
            Family::Llama { .. } => "llama",
            Family::Lora => "llama-lora",
            Family::Whisper => "whisper",
            Family::WhisperVad => "whisper-vad",
            Family::Example { .. } => "ggml-example",
        }
    }
}

/// Which block layouts of the file are not today's.
#[derive(Clone, Copy, PartialEq)]
enum Blocks {
    /// Every block type as GGUF has it (`ggjt` v3, quantization version 2).
    Current,
    /// Q4_0, Q4_1 and Q8_0 in their layouts before `ggjt` v3.
    Ggjt2,
    /// Every block type in its layout before `ggjt` v2.
    Ggjt1,
}

impl Blocks {
    /// Why a tensor of type `t` cannot be read, if it cannot.
    fn defect(self, t: &GgmlType) -> Option<String> {
        let old = match self {
            Blocks::Current => false,
            Blocks::Ggjt2 => matches!(t.name, "q4_0" | "q4_1" | "q8_0"),
            Blocks::Ggjt1 => t.dense.is_none(),
        };
        old.then(|| {
            format!(
                "{} blocks in the layout of a file before ggjt v{}, which llama.cpp no longer \
                 reads (requantize the model from its f16 or f32 file)",
                t.name.to_uppercase(),
                if self == Blocks::Ggjt2 { 3 } else { 2 },
            )
        })
    }

    /// ggml's examples' quantization version, from their `ftype`.
    fn of_ftype(ftype: u32) -> Blocks {
        match ftype / QNT_VERSION_FACTOR {
            0 => Blocks::Ggjt1,
            1 => Blocks::Ggjt2,
            _ => Blocks::Current,
        }
    }
}

/// The file's header, as one family reads it.
struct Header {
    family: Family,
    words: Vec<u32>,
    /// The mel filters' `(n_mel, n_fft, offset, length)`.
    mel: Option<(u64, u64, u64, u64)>,
    tokens: u64,
    /// Where the tokens start and end, and whether each has a score after it.
    vocab_at: u64,
    vocab_end: u64,
    scored: bool,
    /// The voice activity model's type name.
    model_type: Option<String>,
}

/// The file read front to back, with the reads its header is made of.
struct Cursor<'s>(Window<'s>);

impl<'s> std::ops::Deref for Cursor<'s> {
    type Target = Window<'s>;
    fn deref(&self) -> &Window<'s> {
        &self.0
    }
}

impl std::ops::DerefMut for Cursor<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl<'s> Cursor<'s> {
    fn new(source: &'s Source, pos: u64) -> Self {
        Cursor(Window::new(source, pos, "GGML file"))
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        let b = self.take(4, what)?;
        let word = b.first_chunk::<4>().copied().unwrap_or_default();
        Ok(u32::from_le_bytes(word))
    }

    fn words(&mut self, n: usize) -> Result<Vec<u32>> {
        (0..n).map(|_| self.u32("the hyperparameters")).collect()
    }

    /// Passes over `n` tokens (length, bytes, and a score when `scored`).
    fn tokens(&mut self, n: u64, scored: bool) -> Result<()> {
        if n > MAX_TOKENS {
            return Err(bad(format!("{n} tokens (at most {MAX_TOKENS} are read)")).at(self.pos));
        }
        for i in 0..n {
            let at = self.pos;
            let len = u64::from(self.u32("a token's length")?);
            if len > MAX_TOKEN_LEN {
                return Err(bad(format!(
                    "token {i} at byte {at} is {len} bytes long (at most {MAX_TOKEN_LEN})"
                ))
                .at(at));
            }
            self.skip(len + if scored { 4 } else { 0 }, "a token")?;
        }
        Ok(())
    }
}

/// What one try at the file came to: its header and tensors, or an error and how far its
/// records got.
type Attempt = std::result::Result<(Header, Vec<ObjectInfo>), (Error, u64)>;

/// Lists a legacy GGML file.
pub(crate) fn list(source: &Source, limits: &Limits) -> Result<Listing> {
    let mut cur = Cursor::new(source, 0);
    let magic = cur.u32("the magic")?;
    let (name, version) = match magic {
        GGML => (*b"ggml", 0),
        GGMF => (*b"ggmf", cur.u32("the version")?),
        GGJT => (*b"ggjt", cur.u32("the version")?),
        GGLA => (*b"ggla", cur.u32("the version")?),
        _ => return Err(bad(format!("magic {magic:#010x} is no GGML magic")).at(0)),
    };
    let supported = match magic {
        GGML => true,
        GGJT => (1..=3).contains(&version),
        _ => version == 1,
    };
    if !supported {
        return Err(Error::unsupported(format!(
            "GGML file of magic {} version {version} (llama.cpp wrote ggmf v1, ggjt v1 to v3 \
             and ggla v1)",
            String::from_utf8_lossy(&name)
        ))
        .at(4));
    }
    let tensors_after = cur.pos;
    let aligned = matches!(magic, GGJT | GGLA);
    let families: Vec<Family> = match magic {
        GGML => [
            Family::Llama { scored: false },
            Family::Llama { scored: true },
        ]
        .into_iter()
        .chain([Family::Whisper, Family::WhisperVad])
        .chain([false, true].into_iter().flat_map(|scored| {
            let counted = (5..=12).map(move |words| Family::Example {
                words,
                scored,
                counted: true,
            });
            let uncounted = [6, 8].map(|words| Family::Example {
                words,
                scored,
                counted: false,
            });
            counted.chain(uncounted)
        }))
        .collect(),
        GGLA => vec![Family::Lora],
        _ => vec![Family::Llama { scored: true }],
    };
    let mut furthest: Option<(Error, u64)> = None;
    // One window for every try: each header is read again from what the last one read.
    for family in families {
        let blocks = |h: &Header| match (magic, version) {
            (GGJT, 3) | (GGLA, _) => Blocks::Current,
            (GGJT, 2) => Blocks::Ggjt2,
            // Its last word is a layer's width, not a file type; it writes no blocks.
            (GGML, _) if family == Family::WhisperVad => Blocks::Current,
            (GGML, _) if !matches!(family, Family::Llama { .. }) => {
                Blocks::of_ftype(h.words.last().copied().unwrap_or(0))
            }
            _ => Blocks::Ggjt1,
        };
        cur.pos = tensors_after;
        cur.read_ahead(WINDOW);
        let attempt: Attempt = (|| {
            let header = header(&mut cur, family).map_err(|e| (e, 0))?;
            let objects = tensors(&mut cur, aligned, blocks(&header), &header, limits)?;
            Ok((header, objects))
        })();
        match attempt {
            Ok((header, objects)) => {
                let version = FileVersion::Ggml {
                    magic: name,
                    version,
                };
                let vocabulary = vocabulary(&mut cur, &header, limits)?;
                let attributes = attributes(&header, &version, vocabulary);
                return Ok(Listing::of_unique(version, attributes, objects));
            }
            // Only a header that does not fit is a reason to try the next: a failed read,
            // or a limit reached, is the file's answer.
            Err((e, _)) if e.kind() != zt_container::ErrorKind::InvalidFile => return Err(e),
            Err((e, reached)) => {
                if furthest.as_ref().is_none_or(|(_, r)| reached > *r) {
                    furthest = Some((e, reached));
                }
            }
        }
    }
    Err(furthest.map_or_else(|| bad("no header fits"), |(e, _)| e))
}

/// Reads the header of `family` and passes over its tokens.
fn header(cur: &mut Cursor<'_>, family: Family) -> Result<Header> {
    let mut h = Header {
        family,
        words: Vec::new(),
        mel: None,
        tokens: 0,
        vocab_at: 0,
        vocab_end: 0,
        scored: false,
        model_type: None,
    };
    match family {
        Family::Llama { scored } => {
            h.words = cur.words(LLAMA_WORDS.len())?;
            // An unversioned file's header may be another family's: its `ftype` must be
            // one llama.cpp had (the examples' token count would fall there).
            let ftype = h.words.last().copied().unwrap_or(0);
            if !scored && !matches!(ftype, 0..=4 | 7..=18) {
                return Err(bad(format!("ftype {ftype} is no llama.cpp file type")).at(4));
            }
            h.tokens = h.words.first().copied().map_or(0, u64::from);
            (h.vocab_at, h.scored) = (cur.pos, scored);
            cur.tokens(h.tokens, scored)?;
            h.vocab_end = cur.pos;
        }
        Family::Lora => h.words = cur.words(2)?,
        Family::Whisper => {
            h.words = cur.words(WHISPER_WORDS.len())?;
            let n_mel = u64::from(cur.u32("the mel filters' count")?);
            let n_fft = u64::from(cur.u32("the mel filters' length")?);
            let bytes = n_mel
                .checked_mul(n_fft)
                .and_then(|n| n.checked_mul(4))
                .ok_or_else(|| bad(format!("{n_mel} x {n_fft} mel filters")).at(cur.pos))?;
            let at = cur.skip(bytes, "the mel filters")?;
            h.mel = Some((n_mel, n_fft, at, bytes));
            h.tokens = u64::from(cur.u32("the token count")?);
            h.vocab_at = cur.pos;
            cur.tokens(h.tokens, false)?;
            h.vocab_end = cur.pos;
        }
        Family::WhisperVad => {
            let len = u64::from(cur.u32("the model type's length")?);
            if len > MAX_TYPE_NAME {
                return Err(bad(format!("a model type name of {len} bytes")).at(4));
            }
            let name = cur.take(len, "the model type")?.to_vec();
            let name =
                String::from_utf8(name).map_err(|_| bad("the model type is not UTF-8").at(8))?;
            h.model_type = Some(name);
            h.words = cur.words(6)?;
            let layers = h.words.last().copied().unwrap_or(0);
            if layers > MAX_VAD_LAYERS {
                return Err(bad(format!("{layers} encoder layers")).at(cur.pos));
            }
            h.words.extend(cur.words(3 * layers as usize + 4)?);
        }
        Family::Example {
            words,
            scored,
            counted,
        } => {
            h.words = cur.words(words)?;
            h.tokens = match counted {
                true => u64::from(cur.u32("the token count")?),
                false => h.words.get(4).copied().map_or(0, u64::from),
            };
            (h.vocab_at, h.scored) = (cur.pos, scored);
            cur.tokens(h.tokens, scored)?;
            h.vocab_end = cur.pos;
        }
    }
    Ok(h)
}

/// The tensor records from the cursor to the end of the file, as objects; an error carries
/// the byte the records reached.
fn tensors(
    cur: &mut Cursor<'_>,
    aligned: bool,
    blocks: Blocks,
    header: &Header,
    limits: &Limits,
) -> std::result::Result<Vec<ObjectInfo>, (Error, u64)> {
    let source_len = cur.len;
    // A record and the next lie a tensor apart: read the records, not the tensors.
    cur.read_ahead(RECORD_AHEAD);
    let mut budget = MemoryBudget::new(limits.listing_budget(source_len), "listing the GGML file");
    let mut objects = Vec::new();
    let mut taken: HashSet<String, RandomState> = HashSet::default();
    if let Some((n_mel, n_fft, at, length)) = header.mel {
        let shape = vec![n_mel, n_fft];
        let element = ElementType::plain(DType::F32);
        let o = ObjectInfo::raw_dense(
            MEL_FILTERS.to_owned(),
            shape.into(),
            element,
            (at, length),
            ByteOrder::Little,
        );
        budget
            .charge(Limits::listing_cost(MEL_FILTERS))
            .map_err(|e| (e, at))?;
        taken.insert(MEL_FILTERS.to_owned());
        objects.push(o);
    }
    while cur.remaining() > 0 {
        let at = cur.pos;
        let o = record(cur, aligned, blocks, limits).map_err(|e| (e, at))?;
        let charge = Limits::listing_cost(&o.name);
        budget.charge(charge).map_err(|e| (e, at))?;
        if !taken.insert(o.name.clone()) {
            let e = bad(format!("tensor {:?} at byte {at} is named twice", o.name));
            return Err((e.in_object(&o.name).at(at), at));
        }
        objects
            .try_reserve(1)
            .map_err(|_| (Error::out_of_memory("listing the GGML file"), at))?;
        objects.push(o);
    }
    Ok(objects)
}

/// One tensor record.
fn record(
    cur: &mut Cursor<'_>,
    aligned: bool,
    blocks: Blocks,
    limits: &Limits,
) -> Result<ObjectInfo> {
    let at = cur.pos;
    let n_dims = cur.u32("a tensor record")?;
    let name_len = u64::from(cur.u32("a tensor record")?);
    let type_id = cur.u32("a tensor record")?;
    if n_dims > MAX_DIMS {
        return Err(bad(format!(
            "the tensor record at byte {at} has {n_dims} dimensions (ggml's have at most \
             {MAX_DIMS})"
        ))
        .at(at));
    }
    if n_dims as usize > limits.decode.max_rank {
        return Err(Error::rank_over_cap(None, limits.decode.max_rank).at(at));
    }
    if name_len > MAX_NAME_LEN {
        return Err(bad(format!(
            "the tensor record at byte {at} has a name of {name_len} bytes (at most \
             {MAX_NAME_LEN})"
        ))
        .at(at));
    }
    let Some(t) = GgmlType::by_id(type_id) else {
        return Err(bad(format!(
            "the tensor record at byte {at} has ggml type {type_id}, which is not in the \
             type table this library knows (its size is unknown, and so where the next \
             tensor starts)"
        ))
        .at(at));
    };
    let mut shape = Vec::with_capacity(n_dims as usize);
    for _ in 0..n_dims {
        shape.push(u64::from(cur.u32("a tensor's dimensions")?));
    }
    shape.reverse();
    let name = cur.take(name_len, "a tensor's name")?;
    let name = String::from_utf8(name.to_vec()).map_err(|_| {
        bad(format!(
            "the name of the tensor record at byte {at} is not UTF-8"
        ))
        .at(at)
    })?;
    let fail = |e: Error| e.in_object(&name);
    if aligned {
        let pad = cur.pos.wrapping_neg() % ALIGNMENT;
        cur.skip(pad, "a tensor's padding").map_err(fail)?;
    }
    let count = shape
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d))
        .ok_or_else(|| fail(bad(format!("the shape {shape:?} overflows")).at(at)))?;
    let innermost = shape.last().copied().unwrap_or(1);
    if innermost % t.block_elems != 0 {
        return Err(fail(
            bad(format!(
                "{} blocks hold {} elements each, but the innermost dimension is {innermost}",
                t.name.to_uppercase(),
                t.block_elems
            ))
            .at(at),
        ));
    }
    let length = t
        .byte_len(count)
        .ok_or_else(|| fail(bad(format!("the size of shape {shape:?} overflows")).at(at)))?;
    let start = cur.skip(length, "a tensor's data").map_err(fail)?;
    let mut o = typed_object(name, shape, &t, (start, length), ByteOrder::Little);
    if let Some(why) = blocks.defect(&t) {
        o.defect = Some(Box::new(Defect::unsupported(why)));
    }
    Ok(o)
}

/// The tokens of the header the file was read by (as text, or as bytes where they are not
/// UTF-8) and their scores (none when unscored), read again from where the header found
/// them.
fn vocabulary(cur: &mut Cursor<'_>, h: &Header, limits: &Limits) -> Result<Vocabulary> {
    let mut budget = ValueBudget::new(limits.decode_limits().max_value_bytes);
    let per_token = if h.scored { 2 } else { 1 };
    // Every value's node is charged before any is kept: the count is the file's.
    budget.nodes(h.tokens.saturating_mul(per_token))?;
    let n = usize::try_from(h.tokens).map_err(|_| Error::out_of_memory("the GGML tokens"))?;
    let mut tokens = Vec::new();
    let mut scores = Vec::new();
    tokens
        .try_reserve_exact(n)
        .and_then(|()| scores.try_reserve_exact(if h.scored { n } else { 0 }))
        .map_err(|_| Error::out_of_memory("the GGML tokens"))?;
    cur.pos = h.vocab_at;
    // The tokens, and no more: after them lie the tensors.
    cur.read_ahead(h.vocab_end.saturating_sub(h.vocab_at).clamp(1, WINDOW));
    for _ in 0..h.tokens {
        let len = u64::from(cur.u32("a token's length")?);
        // The header's pass checked every length against MAX_TOKEN_LEN.
        let bytes = cur.take(len.min(MAX_TOKEN_LEN), "a token")?.to_vec();
        budget.payload(bytes.len())?;
        tokens.push(match String::from_utf8(bytes) {
            Ok(text) => Value::Text(text),
            Err(e) => Value::Bytes(e.into_bytes()),
        });
        if h.scored {
            let score = cur.take(4, "a token's score")?;
            let score = score.first_chunk::<4>().copied().unwrap_or_default();
            scores.push(Value::Float(f32::from_le_bytes(score).into()));
        }
    }
    Ok(Vocabulary { tokens, scores })
}

/// A header's tokens, and their scores when it has them.
struct Vocabulary {
    tokens: Vec<Value>,
    scores: Vec<Value>,
}

/// The header's hyperparameters and tokens as file attributes.
fn attributes(h: &Header, version: &FileVersion, vocabulary: Vocabulary) -> Attributes {
    let mut a = Attributes::new();
    a.insert("ggml.family".into(), Value::Text(h.family.name().into()));
    a.insert("ggml.format".into(), Value::Text(version.number()));
    let named: &[&str] = match h.family {
        Family::Llama { .. } => &LLAMA_WORDS,
        Family::Whisper => &WHISPER_WORDS,
        Family::Lora => &["r", "alpha"],
        Family::Example { .. } | Family::WhisperVad => &[],
    };
    if named.is_empty() {
        let words = h.words.iter().map(|&w| Value::Integer(w.into())).collect();
        a.insert("ggml.hparams".into(), Value::Array(words));
    }
    for (key, &w) in named.iter().zip(&h.words) {
        a.insert(format!("ggml.{key}"), Value::Integer(w.into()));
    }
    if let Some(t) = &h.model_type {
        a.insert("ggml.model_type".into(), Value::Text(t.clone()));
    }
    if !matches!(h.family, Family::Lora | Family::WhisperVad) {
        a.insert("ggml.tokens".into(), Value::Integer(h.tokens.into()));
        a.insert(GGML_VOCAB_KEY.into(), Value::Array(vocabulary.tokens));
    }
    if h.scored {
        a.insert(GGML_SCORES_KEY.into(), Value::Array(vocabulary.scores));
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file: `head` (magic, version, words and tokens as given), then one record per
    /// `(name, type id, dims innermost first, data length)`, aligned when `aligned`.
    fn file(head: &[u8], records: &[(&str, u32, &[u32], usize)], aligned: bool) -> Vec<u8> {
        let mut f = head.to_vec();
        for (name, type_id, dims, len) in records {
            f.extend((dims.len() as u32).to_le_bytes());
            f.extend((name.len() as u32).to_le_bytes());
            f.extend(type_id.to_le_bytes());
            for d in *dims {
                f.extend(d.to_le_bytes());
            }
            f.extend(name.as_bytes());
            while aligned && f.len() % 32 != 0 {
                f.push(0);
            }
            f.extend((0..*len).map(|i| i as u8));
        }
        f
    }

    fn words(magic: &[u8], version: Option<u32>, words: &[u32]) -> Vec<u8> {
        let mut f = magic.to_vec();
        f.extend(version.iter().chain(words).flat_map(|w| w.to_le_bytes()));
        f
    }

    /// `n` tokens `"ab"`, with a score when `scored`, after a count when `counted`.
    fn tokens(f: &mut Vec<u8>, n: u32, scored: bool, counted: bool) {
        if counted {
            f.extend(n.to_le_bytes());
        }
        for _ in 0..n {
            f.extend(2u32.to_le_bytes());
            f.extend(b"ab");
            if scored {
                f.extend(1.5f32.to_le_bytes());
            }
        }
    }

    fn listed(bytes: Vec<u8>) -> Result<Listing> {
        list(&Source::from_vec(bytes), &Limits::default())
    }

    fn family(l: &Listing) -> &str {
        match l.attributes.get("ggml.family") {
            Some(Value::Text(t)) => t,
            _ => "",
        }
    }

    #[test]
    fn llama_files_before_ggjt_have_no_padding_and_ggml_ones_no_scores() {
        let records: &[(&str, u32, &[u32], usize)] = &[("a", 0, &[3], 12), ("b", 1, &[2, 2], 8)];
        let mut ggml = words(b"lmgg", None, &[3, 8, 256, 1, 1, 8, 1]);
        tokens(&mut ggml, 3, false, false);
        let l = listed(file(&ggml, records, false)).unwrap();
        assert_eq!(family(&l), "llama");
        assert_eq!(l.version.number(), "ggml");
        assert_eq!(&l.objects[1].shape[..], &[2, 2]);
        let mut ggmf = words(b"fmgg", Some(1), &[3, 8, 256, 1, 1, 8, 1]);
        tokens(&mut ggmf, 3, true, false);
        let l = listed(file(&ggmf, records, false)).unwrap();
        assert_eq!(l.version.number(), "ggmf v1");
        assert_eq!(l.objects.len(), 2);
    }

    #[test]
    fn the_examples_headers_are_found_by_their_tensors_tiling_the_file() {
        // GPT-2's header: six words, a token count, unscored tokens.
        // Its first seven words read as llama.cpp's header too, the token count as `ftype`.
        let mut gpt2 = words(b"lmgg", None, &[50, 16, 8, 2, 1, 2002]);
        tokens(&mut gpt2, 50, false, true);
        let records: &[(&str, u32, &[u32], usize)] = &[
            ("model/wte", 0, &[8, 50], 1600),
            ("model/h0/attn/c_attn/w", 8, &[32, 2], 68),
        ];
        let l = listed(file(&gpt2, records, false)).unwrap();
        assert_eq!(family(&l), "ggml-example");
        assert_eq!(
            l.attributes.get("ggml.hparams"),
            Some(&Value::Array(
                [50, 16, 8, 2, 1, 2002].map(Value::Integer).to_vec()
            ))
        );
        // Quantization version 2 (ftype 2002): today's Q8_0 blocks.
        let q8 = l
            .objects
            .iter()
            .find(|o| o.name.ends_with("c_attn/w"))
            .unwrap();
        assert!(q8.defect.is_none());
        // Version 1 (ftype 1002): Q8_0 blocks of before ggjt v3.
        let mut old = words(b"lmgg", None, &[50, 16, 8, 2, 1, 1002]);
        tokens(&mut old, 50, false, true);
        let l = listed(file(&old, records, false)).unwrap();
        let q8 = l
            .objects
            .iter()
            .find(|o| o.name.ends_with("c_attn/w"))
            .unwrap();
        let why = q8.defect.as_ref().unwrap().to_string();
        assert!(
            why.contains("Q8_0 blocks in the layout of a file before ggjt v3"),
            "{why}"
        );
    }

    #[test]
    fn mpt_and_replit_headers_count_their_tokens_in_the_fifth_word() {
        // Replit's: six words, n_vocab (the fifth) scored tokens and no count before them.
        let mut replit = words(b"lmgg", None, &[8, 64, 2, 1, 40, 1]);
        tokens(&mut replit, 40, true, false);
        let records: &[(&str, u32, &[u32], usize)] =
            &[("transformer.wte.weight", 1, &[8, 40], 640)];
        let l = listed(file(&replit, records, false)).unwrap();
        assert_eq!(family(&l), "ggml-example");
        assert_eq!(l.attributes.get("ggml.tokens"), Some(&Value::Integer(40)));
    }

    #[test]
    fn blocks_of_layouts_llama_cpp_dropped_are_listed_with_a_defect() {
        let records: &[(&str, u32, &[u32], usize)] = &[
            ("q4", 2, &[32], 18),
            ("q5", 7, &[32], 24),
            ("f", 0, &[1], 4),
        ];
        let defects = |version: u32| {
            let mut head = words(b"tjgg", Some(version), &[1, 8, 256, 1, 1, 8, 2]);
            tokens(&mut head, 1, true, false);
            let l = listed(file(&head, records, true)).unwrap();
            l.objects
                .iter()
                .filter(|o| o.defect.is_some())
                .map(|o| o.name.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(defects(1), ["q4", "q5"]);
        assert_eq!(defects(2), ["q4"]);
        assert!(defects(3).is_empty());
    }

    #[test]
    fn a_voice_activity_model_is_a_type_name_and_its_layers_words() {
        // As whisper.cpp's convert-silero-vad-to-ggml.py writes it, with two layers.
        let mut head = b"lmgg".to_vec();
        head.extend(10u32.to_le_bytes());
        head.extend(b"silero-16k");
        let words = [
            5, 1, 2, 512, 64, 2, 129, 128, 3, 128, 64, 3, 128, 128, 128, 1,
        ];
        head.extend(words.iter().flat_map(|w: &u32| w.to_le_bytes()));
        let records: &[(&str, u32, &[u32], usize)] = &[
            (
                "_model.encoder.0.reparam_conv.weight",
                1,
                &[3, 129, 128],
                3 * 129 * 128 * 2,
            ),
            ("_model.decoder.rnn.bias_ih", 0, &[512], 2048),
        ];
        let l = listed(file(&head, records, false)).unwrap();
        assert_eq!(family(&l), "whisper-vad");
        assert_eq!(
            l.attributes.get("ggml.model_type"),
            Some(&Value::Text("silero-16k".into()))
        );
        assert_eq!(&l.objects[1].shape[..], &[128, 129, 3]);
    }

    #[test]
    fn a_lora_adapter_is_r_alpha_and_aligned_tensors() {
        let head = words(b"algg", Some(1), &[4, 8]);
        let l = listed(file(&head, &[("x.loraA", 0, &[4, 2], 32)], true)).unwrap();
        assert_eq!(family(&l), "llama-lora");
        assert_eq!(l.attributes.get("ggml.alpha"), Some(&Value::Integer(8)));
        assert!(!l.attributes.contains_key("ggml.tokens"));
        // Unaligned, the record's data would start early: the tiling fails.
        assert!(listed(file(&head, &[("x.loraA", 0, &[4, 2], 32)], false)).is_err());
    }
}
