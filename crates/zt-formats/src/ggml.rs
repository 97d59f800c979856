//! ggml's tensor types, as GGUF files name them by number: the type table (name, elements
//! per block, bytes per block, and the dense storage type where there is one), the layout id
//! a quantized GGUF tensor has in our model (`gguf.<name>/1`, as ztensor 2.x names it), and
//! dequantization to `f32` of the common block types (Q4_0-Q8_0, the K-quants Q2_K-Q6_K and
//! Q8_K, the ternary TQ1_0/TQ2_0, the one-bit Q1_0, the code-book IQ types (IQ1_S, IQ1_M,
//! IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ4_NL, IQ4_XS), MXFP4 and NVFP4). The IQ1-IQ3 code
//! books are ggml's (`iq_grids`, written by tools/interop/make_iq_grids.py), unpacked at
//! compile time.
//!
//! The table is ggml's (`ggml_type` in ggml.h and the `sizeof(block_*)` of ggml-common.h;
//! ids and names as `GGML_QUANT_SIZES` in the `gguf` package 0.19.0 lists them, whose Q8_1
//! size of 40 bytes is stale: ggml's block is 36): ids that ggml retired (4, 5, 31-33,
//! 36-38) are not in it, and an id it does not hold is for the caller to report.
//! Dequantization follows the `gguf` package's
//! `gguf.quants.dequantize` operation for operation in `f32`, so its results are bit for bit
//! the same, but for the sign of a NaN, which IEEE 754 leaves open for a product (tested
//! against values that package computed).
//!
//! ```
//! use zt_formats::ggml::{self, GgmlType};
//!
//! let q4_0 = GgmlType::by_id(2).unwrap();
//! assert_eq!((q4_0.name, q4_0.block_elems, q4_0.block_bytes), ("q4_0", 32, 18));
//! assert_eq!(q4_0.layout_id(), "gguf.q4_0/1");
//! assert_eq!(GgmlType::by_layout_id("gguf.q4_0/1"), Some(q4_0));
//!
//! // One Q8_0 block: an f16 scale of 0.5, then 32 signed bytes.
//! let mut block = vec![0x00, 0x38];
//! block.extend((0..32).map(|i| i as u8));
//! let mut out = vec![0f32; 32];
//! ggml::dequantize(8, &block, &mut out).unwrap();
//! assert_eq!(out[3], 1.5);
//! ```

use half::f16;
use zt_container::{Error, Result};

use crate::DType;

mod iq_grids;

/// One ggml tensor type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GgmlType {
    /// Its number in GGUF tensor infos.
    pub id: u32,
    /// ggml's name, lower case (`q4_0`, `iq2_xxs`, `f32`).
    pub name: &'static str,
    /// Elements one block holds (1 for dense types).
    pub block_elems: u64,
    /// Bytes one block takes.
    pub block_bytes: u64,
    /// The storage type of a dense type (`None` for block types).
    pub dense: Option<DType>,
}

const fn dense(id: u32, name: &'static str, d: DType, bytes: u64) -> GgmlType {
    GgmlType {
        id,
        name,
        block_elems: 1,
        block_bytes: bytes,
        dense: Some(d),
    }
}

const fn blocks(id: u32, name: &'static str, block_elems: u64, block_bytes: u64) -> GgmlType {
    GgmlType {
        id,
        name,
        block_elems,
        block_bytes,
        dense: None,
    }
}

/// 256 elements per super-block (ggml's `QK_K`).
const QK_K: u64 = 256;

/// Every type of ggml's current table, by id.
pub const GGML_TYPES: [GgmlType; 34] = [
    dense(0, "f32", DType::F32, 4),
    dense(1, "f16", DType::F16, 2),
    blocks(2, "q4_0", 32, 2 + 16),
    blocks(3, "q4_1", 32, 2 + 2 + 16),
    blocks(6, "q5_0", 32, 2 + 4 + 16),
    blocks(7, "q5_1", 32, 2 + 2 + 4 + 16),
    blocks(8, "q8_0", 32, 2 + 32),
    // ggml's block_q8_1 is two halves and 32 codes (36 bytes) since 2024; the gguf
    // package's table still gives the older 40 (two floats).
    blocks(9, "q8_1", 32, 2 + 2 + 32),
    blocks(10, "q2_k", QK_K, 2 + 2 + QK_K / 16 + QK_K / 4),
    blocks(11, "q3_k", QK_K, 2 + QK_K / 4 + QK_K / 8 + 12),
    blocks(12, "q4_k", QK_K, 2 + 2 + QK_K / 2 + 12),
    blocks(13, "q5_k", QK_K, 2 + 2 + QK_K / 2 + QK_K / 8 + 12),
    blocks(14, "q6_k", QK_K, 2 + QK_K / 2 + QK_K / 4 + QK_K / 16),
    blocks(15, "q8_k", QK_K, 4 + QK_K + QK_K / 8),
    blocks(16, "iq2_xxs", QK_K, 2 + QK_K / 4),
    blocks(17, "iq2_xs", QK_K, 2 + QK_K / 4 + QK_K / 32),
    blocks(18, "iq3_xxs", QK_K, 2 + QK_K / 4 + QK_K / 8),
    blocks(19, "iq1_s", QK_K, 2 + QK_K / 8 + QK_K / 16),
    blocks(20, "iq4_nl", 32, 2 + 16),
    blocks(21, "iq3_s", QK_K, 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4),
    blocks(22, "iq2_s", QK_K, 2 + QK_K / 4 + QK_K / 16),
    blocks(23, "iq4_xs", QK_K, 2 + 2 + QK_K / 2 + QK_K / 64),
    dense(24, "i8", DType::I8, 1),
    dense(25, "i16", DType::I16, 2),
    dense(26, "i32", DType::I32, 4),
    dense(27, "i64", DType::I64, 8),
    dense(28, "f64", DType::F64, 8),
    blocks(29, "iq1_m", QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32),
    dense(30, "bf16", DType::BF16, 2),
    blocks(34, "tq1_0", QK_K, 2 + 4 * 13),
    blocks(35, "tq2_0", QK_K, 2 + 64),
    blocks(39, "mxfp4", 32, 1 + 16),
    blocks(40, "nvfp4", 64, 4 + 32),
    blocks(41, "q1_0", 128, 2 + 16),
];

/// The prefix of a quantized GGUF tensor's layout id.
const LAYOUT_PREFIX: &str = "gguf.";
/// The suffix of a quantized GGUF tensor's layout id (version 1 of the layout).
const LAYOUT_SUFFIX: &str = "/1";

impl GgmlType {
    /// The type with this GGUF id.
    pub fn by_id(id: u32) -> Option<GgmlType> {
        GGML_TYPES.iter().copied().find(|t| t.id == id)
    }

    /// The type with this name (`q4_0`).
    pub fn by_name(name: &str) -> Option<GgmlType> {
        GGML_TYPES.iter().copied().find(|t| t.name == name)
    }

    /// The block type a layout id `gguf.<name>/1` names (dense types have no layout id).
    pub fn by_layout_id(id: &str) -> Option<GgmlType> {
        let name = id
            .strip_prefix(LAYOUT_PREFIX)?
            .strip_suffix(LAYOUT_SUFFIX)?;
        Self::by_name(name).filter(|t| t.dense.is_none())
    }

    /// The dense type of a storage type, if ggml has one.
    pub fn of_dtype(d: DType) -> Option<GgmlType> {
        GGML_TYPES.iter().copied().find(|t| t.dense == Some(d))
    }

    /// The layout id of a tensor of this type in our model: `gguf.<name>/1`.
    pub fn layout_id(&self) -> String {
        format!("{LAYOUT_PREFIX}{}{LAYOUT_SUFFIX}", self.name)
    }

    /// Bytes `elements` elements of this type take: whole blocks, checked. `None` when the
    /// count is not a whole number of blocks or the size overflows.
    pub fn byte_len(&self, elements: u64) -> Option<u64> {
        if elements % self.block_elems != 0 {
            return None;
        }
        (elements / self.block_elems).checked_mul(self.block_bytes)
    }

    /// Whether [`dequantize`] decodes this type.
    pub fn can_dequantize(&self) -> bool {
        dequantizer(self.id).is_some()
    }
}

/// Decodes whole blocks of one type into `out` (`block_elems` values per block).
type Dequantizer = fn(&[u8], &mut [f32]);

fn dequantizer(id: u32) -> Option<Dequantizer> {
    Some(match id {
        0 => |b, o| each(b, o, 4, |b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        1 => |b, o| each(b, o, 2, |b| half_at(b, 0)),
        30 => |b, o| each(b, o, 2, |b| f32::from_bits(u32::from(le16(b, 0)) << 16)),
        2 => q4_0,
        3 => q4_1,
        6 => q5_0,
        7 => q5_1,
        8 => q8_0,
        15 => q8_k,
        41 => q1_0,
        10 => q2_k,
        11 => q3_k,
        12 => q4_k,
        13 => q5_k,
        14 => q6_k,
        20 => iq4_nl,
        23 => iq4_xs,
        34 => tq1_0,
        35 => tq2_0,
        16 => iq2_xxs,
        17 => iq2_xs,
        18 => iq3_xxs,
        19 => iq1_s,
        21 => iq3_s,
        22 => iq2_s,
        29 => iq1_m,
        39 => mxfp4,
        40 => nvfp4,
        _ => return None,
    })
}

/// Dequantizes the blocks of type `id` in `blocks` into `out`, which must hold exactly
/// the elements they encode (`blocks.len() / block_bytes * block_elems`). Types this
/// function does not decode are `Unsupported`, naming the type.
pub fn dequantize(id: u32, blocks: &[u8], out: &mut [f32]) -> Result<()> {
    let t = GgmlType::by_id(id)
        .ok_or_else(|| Error::unsupported(format!("unknown ggml type id {id}")))?;
    let f = dequantizer(id).ok_or_else(|| {
        Error::unsupported(format!(
            "dequantizing {} blocks is not supported (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, \
             Q8_K, Q2_K-Q6_K, TQ1_0, TQ2_0, Q1_0, the IQ types, MXFP4 and NVFP4 are); read \
             its bytes",
            t.name.to_uppercase()
        ))
    })?;
    let bb = t.block_bytes as usize;
    let be = t.block_elems as usize;
    if blocks.len() % bb != 0 || blocks.len() / bb * be != out.len() {
        return Err(Error::invalid(format!(
            "{} bytes of {} blocks ({bb} bytes each) do not hold {} elements",
            blocks.len(),
            t.name,
            out.len()
        )));
    }
    for (b, o) in blocks.chunks_exact(bb).zip(out.chunks_exact_mut(be)) {
        f(b, o);
    }
    Ok(())
}

/// A dense type: one value per `width` bytes.
fn each(b: &[u8], o: &mut [f32], width: usize, f: impl Fn(&[u8]) -> f32) {
    for (x, v) in b.chunks_exact(width).zip(o.iter_mut()) {
        *v = f(x);
    }
}

fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([
        b.get(at).copied().unwrap_or(0),
        b.get(at + 1).copied().unwrap_or(0),
    ])
}

fn half_at(b: &[u8], at: usize) -> f32 {
    f16::from_bits(le16(b, at)).to_f32()
}

fn byte(b: &[u8], at: usize) -> u8 {
    b.get(at).copied().unwrap_or(0)
}

/// The 4-bit code of element `j` of a 32-element block whose nibbles start at `qs`: low
/// nibbles are elements 0-15, high nibbles 16-31.
fn nibble32(b: &[u8], qs: usize, j: usize) -> u8 {
    if j < 16 {
        byte(b, qs + j) & 0x0F
    } else {
        byte(b, qs + j - 16) >> 4
    }
}

fn q4_0(b: &[u8], o: &mut [f32]) {
    let d = half_at(b, 0);
    for (j, v) in o.iter_mut().enumerate().take(32) {
        let q = nibble32(b, 2, j) as i8 - 8;
        *v = d * f32::from(q);
    }
}

fn q4_1(b: &[u8], o: &mut [f32]) {
    let (d, m) = (half_at(b, 0), half_at(b, 2));
    for (j, v) in o.iter_mut().enumerate().take(32) {
        *v = d * f32::from(nibble32(b, 4, j)) + m;
    }
}

/// The 5-bit code of element `j`: its nibble, and bit `j` of the 32-bit high mask at `qh`.
fn five_bits(b: &[u8], qh: usize, qs: usize, j: usize) -> u8 {
    let high = u32::from_le_bytes([
        byte(b, qh),
        byte(b, qh + 1),
        byte(b, qh + 2),
        byte(b, qh + 3),
    ]);
    nibble32(b, qs, j) | ((((high >> j) & 1) as u8) << 4)
}

fn q5_0(b: &[u8], o: &mut [f32]) {
    let d = half_at(b, 0);
    for (j, v) in o.iter_mut().enumerate().take(32) {
        let q = five_bits(b, 2, 6, j) as i8 - 16;
        *v = d * f32::from(q);
    }
}

fn q5_1(b: &[u8], o: &mut [f32]) {
    let (d, m) = (half_at(b, 0), half_at(b, 2));
    for (j, v) in o.iter_mut().enumerate().take(32) {
        *v = d * f32::from(five_bits(b, 4, 8, j)) + m;
    }
}

fn q8_0(b: &[u8], o: &mut [f32]) {
    let d = half_at(b, 0);
    for (j, v) in o.iter_mut().enumerate().take(32) {
        *v = f32::from(byte(b, 2 + j) as i8) * d;
    }
}

/// Q8_K: an f32 scale, then 256 signed codes, each value the scale times its code (ggml's
/// `dequantize_row_q8_K`; the 16 group sums after the codes serve dot products only).
fn q8_k(b: &[u8], o: &mut [f32]) {
    let d = f32::from_bits(le32(b, 0));
    for (j, v) in o.iter_mut().enumerate().take(256) {
        *v = d * f32::from(byte(b, 4 + j) as i8);
    }
}

/// Q1_0: an f16 scale `d`, then one bit a value, the lowest bit of each byte first: `d`
/// where it is set, `-d` where not (ggml's `dequantize_row_q1_0`, a negation, not a product).
fn q1_0(b: &[u8], o: &mut [f32]) {
    let d = half_at(b, 0);
    for (j, v) in o.iter_mut().enumerate().take(128) {
        *v = if byte(b, 2 + j / 8) >> (j % 8) & 1 == 1 {
            d
        } else {
            -d
        };
    }
}

/// Element `i` of 256 packed two bits at a time: bytes in groups of 32, each byte holding
/// elements `32 * shift` apart (element `g*128 + s*32 + l` is bits `2s..2s+2` of byte
/// `g*32 + l`).
fn crumb(b: &[u8], qs: usize, i: usize) -> u8 {
    let (g, s, l) = (i / 128, (i % 128) / 32, i % 32);
    (byte(b, qs + g * 32 + l) >> (2 * s)) & 3
}

/// Element `i` of 256 packed a bit at a time over 32 bytes: bit `i / 32` of byte `i % 32`.
fn bit(b: &[u8], at: usize, i: usize) -> u8 {
    (byte(b, at + i % 32) >> (i / 32)) & 1
}

fn q2_k(b: &[u8], o: &mut [f32]) {
    // scales[16], qs[64], d, dmin
    let (d, dmin) = (half_at(b, 80), half_at(b, 82));
    for (i, v) in o.iter_mut().enumerate().take(256) {
        let sc = byte(b, i / 16);
        let dl = d * f32::from(sc & 0x0F);
        let ml = dmin * f32::from(sc >> 4);
        *v = dl * f32::from(crumb(b, 16, i)) - ml;
    }
}

fn q3_k(b: &[u8], o: &mut [f32]) {
    // hmask[32], qs[64], scales[12], d
    let d = half_at(b, 108);
    let scale = |k: usize| {
        let low = (byte(b, 96 + k % 8) >> (4 * (k / 8))) & 0x0F;
        let high = (byte(b, 96 + 8 + k % 4) >> (2 * (k / 4))) & 0x03;
        f32::from((low | (high << 4)) as i8 - 32)
    };
    for (i, v) in o.iter_mut().enumerate().take(256) {
        let dl = d * scale(i / 16);
        // The high bit subtracts 4 when it is clear.
        let q = crumb(b, 32, i) as i8 - (((bit(b, 0, i) ^ 1) << 2) as i8);
        *v = dl * f32::from(q);
    }
}

/// The 6-bit scale and minimum of sub-block `k` (of 8) of a Q4_K/Q5_K super-block, from the
/// 12 bytes at `at`.
fn scale_min_k4(b: &[u8], at: usize, k: usize) -> (u8, u8) {
    let d = |j| byte(b, at + j);
    let m = |j| byte(b, at + 4 + j);
    let md = |j| byte(b, at + 8 + j);
    if k < 4 {
        (d(k) & 0x3F, m(k) & 0x3F)
    } else {
        let j = k - 4;
        (
            (md(j) & 0x0F) | ((d(j) >> 2) & 0x30),
            (md(j) >> 4) | ((m(j) >> 2) & 0x30),
        )
    }
}

/// Element `i` of 256 packed four bits at a time: bytes in groups of 32, element
/// `g*64 + s*32 + l` is nibble `s` of byte `g*32 + l`.
fn nibble256(b: &[u8], qs: usize, i: usize) -> u8 {
    let (g, s, l) = (i / 64, (i % 64) / 32, i % 32);
    (byte(b, qs + g * 32 + l) >> (4 * s)) & 0x0F
}

fn q4_k(b: &[u8], o: &mut [f32]) {
    // d, dmin, scales[12], qs[128]
    let (d, dmin) = (half_at(b, 0), half_at(b, 2));
    for (i, v) in o.iter_mut().enumerate().take(256) {
        let (sc, m) = scale_min_k4(b, 4, i / 32);
        let dl = d * f32::from(sc);
        let ml = dmin * f32::from(m);
        *v = dl * f32::from(nibble256(b, 16, i)) - ml;
    }
}

fn q5_k(b: &[u8], o: &mut [f32]) {
    // d, dmin, scales[12], qh[32], qs[128]
    let (d, dmin) = (half_at(b, 0), half_at(b, 2));
    for (i, v) in o.iter_mut().enumerate().take(256) {
        let (sc, m) = scale_min_k4(b, 4, i / 32);
        let dl = d * f32::from(sc);
        let ml = dmin * f32::from(m);
        let q = nibble256(b, 48, i) | (bit(b, 16, i) << 4);
        *v = dl * f32::from(q) - ml;
    }
}

fn q6_k(b: &[u8], o: &mut [f32]) {
    // ql[128], qh[64], scales[16] (i8), d
    let d = half_at(b, 208);
    for (i, v) in o.iter_mut().enumerate().take(256) {
        let dl = d * f32::from(byte(b, 192 + i / 16) as i8);
        // Low four bits: element g*128 + s*64 + l is nibble s of byte g*64 + l.
        let (g, r) = (i / 128, i % 128);
        let low = (byte(b, g * 64 + r % 64) >> (4 * (r / 64))) & 0x0F;
        let high = crumb(b, 128, i);
        let q = (low | (high << 4)) as i8 - 32;
        *v = dl * f32::from(q);
    }
}

/// The non-linear 4-bit code book of IQ4_NL and IQ4_XS (ggml's `kvalues_iq4nl`).
const IQ4_VALUES: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// FP4 (E2M1) values doubled, as MXFP4 blocks index them (ggml's `kvalues_mxfp4`).
const E2M1_DOUBLED: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

fn iq4_nl(b: &[u8], o: &mut [f32]) {
    let d = half_at(b, 0);
    for (j, v) in o.iter_mut().enumerate().take(32) {
        let q = IQ4_VALUES[usize::from(nibble32(b, 2, j))];
        *v = d * f32::from(q);
    }
}

/// 256 elements in 8 sub-blocks of 32, each with a 6-bit scale (low 4 bits in a nibble of
/// `scales_l`, high 2 in `scales_h`) around 32, and IQ4_NL codes.
fn iq4_xs(b: &[u8], o: &mut [f32]) {
    let d = half_at(b, 0);
    let scales_h = le16(b, 2);
    for (sub, out) in o.chunks_exact_mut(32).enumerate().take(8) {
        let low = (byte(b, 4 + sub / 2) >> (4 * (sub % 2))) & 0x0F;
        let high = ((scales_h >> (2 * sub)) & 0x03) as u8;
        let scale = (low | (high << 4)) as i8 - 32;
        let dl = d * f32::from(scale);
        for (j, v) in out.iter_mut().enumerate() {
            let q = IQ4_VALUES[usize::from(nibble32(b, 8 + 16 * sub, j))];
            *v = dl * f32::from(q);
        }
    }
}

/// Ternary codes packed five to a byte (four in the last 4 bytes) as base-3 fractions of
/// 256: code `k` of a byte is `((byte * 3^k mod 256) * 3) >> 8`, minus 1. Elements 0-159
/// come from bytes 0-31 (five codes each, code-major), 160-239 from bytes 32-47, 240-255 from
/// the 4 bytes at 48; then an f16 scale.
fn tq1_0(b: &[u8], o: &mut [f32]) {
    let d = half_at(b, 52);
    let code = |x: u8, k: u32| -> f32 {
        let shifted = x.wrapping_mul(3u8.wrapping_pow(k));
        f32::from(((u16::from(shifted) * 3) >> 8) as i8 - 1)
    };
    let mut at = 0;
    for (start, count, powers) in [(0usize, 32usize, 5u32), (32, 16, 5), (48, 4, 4)] {
        for k in 0..powers {
            for i in 0..count {
                if let Some(v) = o.get_mut(at) {
                    *v = d * code(byte(b, start + i), k);
                }
                at += 1;
            }
        }
    }
}

/// Ternary codes two bits each (as the K-quants pack them), minus 1, then an f16 scale.
fn tq2_0(b: &[u8], o: &mut [f32]) {
    let d = half_at(b, 64);
    for (i, v) in o.iter_mut().enumerate().take(256) {
        *v = d * f32::from(crumb(b, 0, i) as i8 - 1);
    }
}

/// An E8M0 scale byte (as half of 2^(e - 127), ggml's `ggml_e8m0_to_fp32_half`), then 32
/// FP4 codes, low nibbles first.
fn mxfp4(b: &[u8], o: &mut [f32]) {
    let e = u32::from(byte(b, 0));
    let bits = if e < 2 {
        0x0020_0000u32 << e
    } else {
        (e - 1) << 23
    };
    let d = f32::from_bits(bits);
    for (j, v) in o.iter_mut().enumerate().take(32) {
        let q = E2M1_DOUBLED[usize::from(nibble32(b, 1, j))];
        *v = d * f32::from(q);
    }
}

/// Four UE4M3 scale bytes, one per 16 elements, then each 16's FP4 codes in 8 bytes: the
/// low nibbles its first eight elements, the high nibbles the next eight.
fn nvfp4(b: &[u8], o: &mut [f32]) {
    for (s, sub) in o.chunks_exact_mut(16).enumerate().take(4) {
        let d = ue4m3_half(byte(b, s));
        for (j, v) in sub.iter_mut().enumerate() {
            let q = byte(b, 4 + 8 * s + j % 8);
            let code = if j < 8 { q & 0x0F } else { q >> 4 };
            *v = d * f32::from(E2M1_DOUBLED[usize::from(code)]);
        }
    }
}

/// An unsigned E4M3 scale (exponent bias 7, subnormal below exponent 1; the top bit is not
/// read), halved for the doubled code book; 0 and 0x7F (E4M3's NaN) scale to 0, as ggml's
/// `ggml_ue4m3_to_fp32` and the `gguf` package decode them. Every step is exact in f32.
fn ue4m3_half(x: u8) -> f32 {
    if x == 0 || x == 0x7F {
        return 0.0;
    }
    let exp = i32::from((x >> 3) & 0x0F);
    let man = f32::from(x & 0x07);
    let raw = if exp == 0 {
        man * 2f32.powi(-9)
    } else {
        (1.0 + man / 8.0) * 2f32.powi(exp - 7)
    };
    raw * 0.5
}

/// A code book of `E` entries of `W` values, each value `bits` bits of `hex` (hexadecimal
/// text, lowest bits first) indexing its type's levels; unpacked at compile time, where a
/// table of the wrong size or an index past `levels` fails the build.
const fn unpack_grid<const E: usize, const W: usize>(
    hex: &str,
    bits: usize,
    levels: u8,
) -> [[u8; W]; E] {
    const fn digit(c: u8) -> u8 {
        match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            _ => panic!("a code book is lowercase hexadecimal text"),
        }
    }
    let text = hex.as_bytes();
    assert!(
        text.len() * 4 == E * W * bits,
        "a code book of the wrong size"
    );
    let mut grid = [[0u8; W]; E];
    let mut i = 0;
    while i < E * W {
        let bit = i * bits;
        let packed = (digit(text[2 * (bit / 8)]) << 4) | digit(text[2 * (bit / 8) + 1]);
        let index = (packed >> (bit % 8)) & ((1 << bits) - 1) as u8;
        assert!(index < levels, "a code book index past its levels");
        grid[i / W][i % W] = index;
        i += 1;
    }
    grid
}

static IQ2XXS_GRID: [[u8; 8]; 256] = unpack_grid(iq_grids::IQ2XXS, 2, 3);
static IQ2XS_GRID: [[u8; 8]; 512] = unpack_grid(iq_grids::IQ2XS, 2, 3);
static IQ2S_GRID: [[u8; 8]; 1024] = unpack_grid(iq_grids::IQ2S, 2, 3);
static IQ3XXS_GRID: [[u8; 4]; 256] = unpack_grid(iq_grids::IQ3XXS, 4, 8);
static IQ3S_GRID: [[u8; 4]; 512] = unpack_grid(iq_grids::IQ3S, 4, 8);
static IQ1S_GRID: [[u8; 8]; 2048] = unpack_grid(iq_grids::IQ1S, 2, 3);

/// The values the code books' indices stand for, per type.
const IQ2_LEVELS: [f32; 3] = [8.0, 25.0, 43.0];
const IQ3XXS_LEVELS: [f32; 8] = [4.0, 12.0, 20.0, 28.0, 36.0, 44.0, 52.0, 62.0];
const IQ3S_LEVELS: [f32; 8] = [1.0, 3.0, 5.0, 7.0, 9.0, 11.0, 13.0, 15.0];
const IQ1_LEVELS: [f32; 3] = [-1.0, 0.0, 1.0];

/// Entry `index` of a code book (every index a block can form is in range; a miss would
/// read as zeros, never panic).
fn entry<const W: usize>(grid: &[[u8; W]], index: usize) -> [u8; W] {
    grid.get(index).copied().unwrap_or([0; W])
}

/// The value a code-book index stands for (indices were checked against the levels when
/// the book was unpacked).
fn level(levels: &[f32], index: u8) -> f32 {
    levels.get(usize::from(index)).copied().unwrap_or(0.0)
}

/// ggml's `ksigns_iq2xs`: seven sign bits, and an eighth that makes their count even.
fn even_signs(seven: u32) -> u8 {
    let seven = (seven & 0x7F) as u8;
    seven | (((seven.count_ones() & 1) as u8) << 7)
}

/// `+1.0` or `-1.0` as bit `j` of `signs` is clear or set.
fn sign(signs: u8, j: usize) -> f32 {
    if (signs >> j) & 1 == 0 {
        1.0
    } else {
        -1.0
    }
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from(le16(b, at)) | (u32::from(le16(b, at + 2)) << 16)
}

/// Eight IQ2 values: code-book entry `grid`'s levels times `db`, negated where `signs` says.
fn iq2_values(out: &mut [f32], db: f32, grid: [u8; 8], signs: u8) {
    for (j, v) in out.iter_mut().enumerate().take(8) {
        *v = db * level(&IQ2_LEVELS, grid[j]) * sign(signs, j);
    }
}

/// The scale of group `i` (8 values) of an IQ2_XS or IQ2_S block: d times one of 16 4-bit
/// scales (two to a byte from `scales`, one per 16 values), as ggml spreads it.
fn iq2_scale(b: &[u8], d: f32, scales: usize, i: usize) -> f32 {
    let scale = (byte(b, scales + i / 4) >> (4 * ((i / 2) % 2))) & 0x0F;
    d * (0.5 + f32::from(scale)) * 0.25
}

/// IQ2_XXS: d, then per 32 elements two words: four code-book indices (one byte each, 8
/// values each), and four 7-bit sign groups under a 4-bit scale.
fn iq2_xxs(b: &[u8], o: &mut [f32]) {
    let d = half_at(b, 0);
    for (ib, out) in o.chunks_exact_mut(32).enumerate().take(8) {
        let aux = le32(b, 2 + 8 * ib + 4);
        let db = d * (0.5 + (aux >> 28) as f32) * 0.25;
        for (l, out) in out.chunks_exact_mut(8).enumerate() {
            let grid = entry(&IQ2XXS_GRID, usize::from(byte(b, 2 + 8 * ib + l)));
            iq2_values(out, db, grid, even_signs(aux >> (7 * l)));
        }
    }
}

/// IQ2_XS: d, 32 16-bit codes (a 9-bit index and 7 sign bits each, 8 values), then 16
/// 4-bit scales, one per 16 values.
fn iq2_xs(b: &[u8], o: &mut [f32]) {
    let d = half_at(b, 0);
    for (i, out) in o.chunks_exact_mut(8).enumerate().take(32) {
        let code = u32::from(le16(b, 2 + 2 * i));
        let grid = entry(&IQ2XS_GRID, (code & 511) as usize);
        iq2_values(out, iq2_scale(b, d, 66, i), grid, even_signs(code >> 9));
    }
}

/// IQ2_S: d, 32 low index bytes, 32 sign bytes, 2 high index bits per group in 8 bytes,
/// and 16 4-bit scales, one per 16 values.
fn iq2_s(b: &[u8], o: &mut [f32]) {
    let d = half_at(b, 0);
    for (i, out) in o.chunks_exact_mut(8).enumerate().take(32) {
        let high = (byte(b, 66 + i / 4) >> (2 * (i % 4))) & 0x03;
        let index = usize::from(byte(b, 2 + i)) | (usize::from(high) << 8);
        let grid = entry(&IQ2S_GRID, index);
        iq2_values(out, iq2_scale(b, d, 74, i), grid, byte(b, 34 + i));
    }
}

/// IQ3_XXS: d, 64 index bytes (4 values each), then per 32 elements a word of four 7-bit
/// sign groups under a 4-bit scale.
fn iq3_xxs(b: &[u8], o: &mut [f32]) {
    let d = half_at(b, 0);
    for (ib, out) in o.chunks_exact_mut(32).enumerate().take(8) {
        let aux = le32(b, 66 + 4 * ib);
        let db = d * (0.5 + (aux >> 28) as f32) * 0.5;
        for (l, out) in out.chunks_exact_mut(8).enumerate() {
            let signs = even_signs(aux >> (7 * l));
            for (h, out) in out.chunks_exact_mut(4).enumerate() {
                let index = byte(b, 2 + 8 * ib + 2 * l + h);
                let grid = entry(&IQ3XXS_GRID, usize::from(index));
                for (k, v) in out.iter_mut().enumerate() {
                    *v = db * level(&IQ3XXS_LEVELS, grid[k]) * sign(signs, 4 * h + k);
                }
            }
        }
    }
}

/// IQ3_S: d, 64 low index bytes, their high bits in 8 bytes, 32 sign bytes, and 8 4-bit
/// scales (odd multipliers 1-31 of d), one per 32 values.
fn iq3_s(b: &[u8], o: &mut [f32]) {
    let d = half_at(b, 0);
    for (g, out) in o.chunks_exact_mut(8).enumerate().take(32) {
        let scale = (byte(b, 106 + g / 8) >> (4 * ((g / 4) % 2))) & 0x0F;
        let db = d * f32::from(1 + 2 * scale);
        let signs = byte(b, 74 + g);
        for (h, out) in out.chunks_exact_mut(4).enumerate() {
            let i = 2 * g + h;
            let high = (byte(b, 66 + i / 8) >> (i % 8)) & 1;
            let index = usize::from(byte(b, 2 + i)) | (usize::from(high) << 8);
            let grid = entry(&IQ3S_GRID, index);
            for (k, v) in out.iter_mut().enumerate() {
                *v = db * level(&IQ3S_LEVELS, grid[k]) * sign(signs, 4 * h + k);
            }
        }
    }
}

/// ggml's `IQ1S_DELTA`: the shift of IQ1 values off the ternary levels.
const IQ1_DELTA: f32 = 0.125;

/// IQ1_S: d, 32 low index bytes, then per 32 elements 16 bits: four 3-bit high index
/// parts, a 3-bit scale and the delta's sign.
fn iq1_s(b: &[u8], o: &mut [f32]) {
    let d = half_at(b, 0);
    for (ib, out) in o.chunks_exact_mut(32).enumerate().take(8) {
        let qh = le16(b, 34 + 2 * ib);
        let dl = d * f32::from(2 * ((qh >> 12) & 7) + 1);
        let delta = if qh & 0x8000 == 0 {
            IQ1_DELTA
        } else {
            -IQ1_DELTA
        };
        for (l, out) in out.chunks_exact_mut(8).enumerate() {
            let high = usize::from((qh >> (3 * l)) & 7);
            let index = usize::from(byte(b, 2 + 4 * ib + l)) | (high << 8);
            let grid = entry(&IQ1S_GRID, index);
            for (j, v) in out.iter_mut().enumerate() {
                *v = dl * (level(&IQ1_LEVELS, grid[j]) + delta);
            }
        }
    }
}

/// IQ1_M: 32 low index bytes, per 8 values a nibble (3 high index bits and the delta's
/// sign), then four 16-bit words of 3-bit scales (one per 16 values) whose top nibbles
/// together are d, an f16.
fn iq1_m(b: &[u8], o: &mut [f32]) {
    let sc = [le16(b, 48), le16(b, 50), le16(b, 52), le16(b, 54)];
    let d_bits =
        (sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) | ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000);
    let d = f16::from_bits(d_bits).to_f32();
    for (g, out) in o.chunks_exact_mut(8).enumerate().take(32) {
        let k = g / 2;
        let scale = (sc[k / 4] >> (3 * (k % 4))) & 7;
        let dl = d * f32::from(2 * scale + 1);
        let nibble = (byte(b, 32 + g / 2) >> (4 * (g % 2))) & 0x0F;
        let delta = if nibble & 0x08 == 0 {
            IQ1_DELTA
        } else {
            -IQ1_DELTA
        };
        let index = usize::from(byte(b, g)) | (usize::from(nibble & 7) << 8);
        let grid = entry(&IQ1S_GRID, index);
        for (j, v) in out.iter_mut().enumerate() {
            *v = dl * (level(&IQ1_LEVELS, grid[j]) + delta);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_has_unique_ids_and_names_and_whole_blocks() {
        for (i, a) in GGML_TYPES.iter().enumerate() {
            for b in &GGML_TYPES[i + 1..] {
                assert_ne!(a.id, b.id);
                assert_ne!(a.name, b.name);
            }
            assert_eq!(a.dense.is_some(), a.block_elems == 1, "{}", a.name);
            if let Some(d) = a.dense {
                assert_eq!(d.size() as u64, a.block_bytes, "{}", a.name);
            }
        }
        // Spot checks against ggml's sizeof(block_*).
        let size = |n| GgmlType::by_name(n).unwrap().block_bytes;
        assert_eq!(
            [
                size("q2_k"),
                size("q3_k"),
                size("q4_k"),
                size("q5_k"),
                size("q6_k")
            ],
            [84, 110, 144, 176, 210]
        );
        assert_eq!(
            [size("q8_k"), size("iq2_xxs"), size("mxfp4")],
            [292, 66, 17]
        );
    }

    #[test]
    fn byte_len_is_whole_blocks_and_checked() {
        let q4 = GgmlType::by_name("q4_0").unwrap();
        assert_eq!(q4.byte_len(64), Some(36));
        assert_eq!(q4.byte_len(33), None);
        let q8k = GgmlType::by_name("q8_k").unwrap();
        assert_eq!(q8k.byte_len(u64::MAX / 256 * 256), None);
    }

    #[test]
    fn q4_0_centres_codes_on_8() {
        let mut b = vec![0x00, 0x3C]; // d = 1.0
        b.extend([0x10u8; 16]); // low nibble 0, high nibble 1
        let mut o = [0f32; 32];
        dequantize(2, &b, &mut o).unwrap();
        assert_eq!(o[0], -8.0);
        assert_eq!(o[16], -7.0);
    }

    #[test]
    fn mxfp4_scales_are_powers_of_two_down_to_subnormals() {
        // e = 128: a scale of 2^1, halved for the doubled code book; code 2 is FP4 1.0.
        let mut b = vec![128u8];
        b.extend([0x02u8, 0x0F].iter().chain([0u8; 14].iter()));
        let mut o = [0f32; 32];
        dequantize(39, &b, &mut o).unwrap();
        assert_eq!((o[0], o[1], o[16], o[17]), (2.0, -12.0, 0.0, 0.0));
        // e = 0 and 1: subnormal scales 2^-128 and 2^-127, as ggml gives them.
        for (e, scale) in [(0u8, 0x0020_0000u32), (1, 0x0040_0000)] {
            b[0] = e;
            dequantize(39, &b, &mut o).unwrap();
            assert_eq!(o[0], 2.0 * f32::from_bits(scale));
        }
    }

    #[test]
    fn nvfp4_scales_each_sixteen_elements_by_an_unsigned_e4m3() {
        // Scales: 0x38 is 1.0 (exponent 7), 0x01 the least subnormal (2^-9), 0x7F (NaN) and
        // 0xFF (top bit not read: 1.875 x 2^8) as ggml reads them; halved for the doubled
        // code book. Codes: 0x2A holds 0xA (-2, FP4 -1.0) low and 0x2 (2, FP4 1.0) high.
        let mut b = vec![0x38, 0x01, 0x7F, 0xFF];
        b.extend([0x2Au8; 32]);
        let mut o = [0f32; 64];
        dequantize(40, &b, &mut o).unwrap();
        let firsts = [o[0], o[8], o[16], o[24], o[32], o[40], o[48], o[56]];
        let least = 2f32.powi(-10);
        assert_eq!(
            firsts,
            [
                -1.0,
                1.0,
                -2.0 * least,
                2.0 * least,
                -0.0,
                0.0,
                -480.0,
                480.0
            ]
        );
        assert_eq!(ue4m3_half(0), 0.0);
        assert_eq!(ue4m3_half(0x7E), 224.0); // E4M3's largest, 448, halved
    }

    #[test]
    fn iq_code_books_and_signs_are_ggmls() {
        // ggml-common.h: ksigns_iq2xs begins 0, 129, 130, 3; iq2xxs_grid[1] is
        // 0x080808080808082b (value 0 is 0x2b); iq1s_grid[0] is 0xffffffffffffffff (all -1).
        assert_eq!([0, 1, 2, 3].map(even_signs), [0x00, 0x81, 0x82, 0x03]);
        let values = |grid: [u8; 8]| grid.map(|i| level(&IQ2_LEVELS, i));
        assert_eq!(values(IQ2XXS_GRID[0]), [8.0; 8]);
        assert_eq!(
            values(IQ2XXS_GRID[1]),
            [43.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0]
        );
        assert_eq!(IQ1S_GRID[0].map(|i| level(&IQ1_LEVELS, i)), [-1.0; 8]);
        // An IQ2_XXS block: d = 1.0, the first group's scale 0 (db = 0.125), entry 1, the
        // first sign group 1 (element 0 negative, so element 7 too).
        let mut b = vec![0x00, 0x3C, 1, 0, 0, 0, 1, 0, 0, 0];
        b.resize(66, 0);
        let mut o = [0f32; 256];
        dequantize(16, &b, &mut o).unwrap();
        assert_eq!(&o[..8], &[-5.375, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, -1.0]);
    }

    #[test]
    fn ternary_codes_are_minus_one_zero_one() {
        // TQ2_0: bytes 0b10_01_00 hold codes 0, 1, 2 for elements 0, 32, 64; d = 1.0.
        let mut b = vec![0b0010_0100u8; 64];
        b.extend([0x00, 0x3C]);
        let mut o = [0f32; 256];
        dequantize(35, &b, &mut o).unwrap();
        assert_eq!((o[0], o[32], o[64], o[96]), (-1.0, 0.0, 1.0, -1.0));
    }

    #[test]
    fn sizes_that_do_not_fit_are_errors_not_panics() {
        let mut o = [0f32; 32];
        assert!(dequantize(2, &[0; 17], &mut o).is_err());
        assert!(dequantize(2, &[0; 36], &mut o).is_err());
        // Q8_1 (an intermediate of ggml's dot products, which ggml never dequantizes) is not
        // decoded.
        assert!(dequantize(9, &[0; 36], &mut [0f32; 32]).is_err());
        // An IQ1_M block cut short, or one block too many for the output.
        assert!(dequantize(29, &[0; 55], &mut [0f32; 256]).is_err());
        assert!(dequantize(29, &[0; 112], &mut [0f32; 256]).is_err());
        assert!(dequantize(99, &[], &mut []).is_err());
    }
}
