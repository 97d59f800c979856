//! GGUF files built byte by byte: the versions the `gguf` package cannot write (1 and 2) as
//! valid files, and one invalid file per rule the reader enforces (crates/ztensor/src/files/
//! gguf.rs), each with the error it must give. The valid files written by the package itself
//! are in fixtures/interop/gguf.

use crate::fixture_set::{Corpus, Line};

/// Metadata value types by number.
const U8: u32 = 0;
pub(crate) const U32: u32 = 4;
pub(crate) const I32: u32 = 5;
pub(crate) const F32_VALUE: u32 = 6;
const BOOL: u32 = 7;
pub(crate) const STR: u32 = 8;
pub(crate) const ARRAY: u32 = 9;
const U64: u32 = 10;

/// ggml type ids.
pub(crate) const F32: u32 = 0;
pub(crate) const Q4_0: u32 = 2;
const Q8_0: u32 = 8;

/// A GGUF file under construction: version 1 counts in u32, later versions in u64. The
/// benchmark builds its large file's header with it too.
pub(crate) struct Gguf {
    version: u32,
    kvs: Vec<u8>,
    n_kv: u64,
    infos: Vec<u8>,
    n_tensors: u64,
    data: Vec<u8>,
    alignment: usize,
}

impl Gguf {
    pub(crate) fn new(version: u32) -> Self {
        Gguf {
            version,
            kvs: Vec::new(),
            n_kv: 0,
            infos: Vec::new(),
            n_tensors: 0,
            data: Vec::new(),
            alignment: 32,
        }
    }

    fn count(&self, out: &mut Vec<u8>, n: u64) {
        if self.version == 1 {
            out.extend((n as u32).to_le_bytes());
        } else {
            out.extend(n.to_le_bytes());
        }
    }

    fn string(&self, out: &mut Vec<u8>, s: &[u8]) {
        self.count(out, s.len() as u64);
        out.extend(s);
    }

    /// A key of `type_id` whose value is `payload`, already encoded.
    pub(crate) fn kv(mut self, key: &[u8], type_id: u32, payload: &[u8]) -> Self {
        let mut b = Vec::new();
        self.string(&mut b, key);
        b.extend(type_id.to_le_bytes());
        b.extend(payload);
        self.kvs.extend(b);
        self.n_kv += 1;
        self
    }

    pub(crate) fn str_value(&self, s: &str) -> Vec<u8> {
        let mut b = Vec::new();
        self.string(&mut b, s.as_bytes());
        b
    }

    fn u32_array(&self, values: &[u32]) -> Vec<u8> {
        let mut b = U32.to_le_bytes().to_vec();
        self.count(&mut b, values.len() as u64);
        for v in values {
            b.extend(v.to_le_bytes());
        }
        b
    }

    /// A tensor info; `dims` innermost first, as GGUF lists them.
    pub(crate) fn info(mut self, name: &str, dims: &[u64], type_id: u32, offset: u64) -> Self {
        let mut b = Vec::new();
        self.string(&mut b, name.as_bytes());
        b.extend((dims.len() as u32).to_le_bytes());
        for &d in dims {
            self.count(&mut b, d);
        }
        b.extend(type_id.to_le_bytes());
        b.extend(offset.to_le_bytes());
        self.infos.extend(b);
        self.n_tensors += 1;
        self
    }

    /// Appends `bytes` to the data section at the next aligned offset; returns it.
    fn push_data(&mut self, bytes: &[u8]) -> u64 {
        self.data
            .resize(self.data.len().next_multiple_of(self.alignment), 0);
        let at = self.data.len() as u64;
        self.data.extend(bytes);
        at
    }

    /// A tensor with its data.
    fn tensor(mut self, name: &str, dims: &[u64], type_id: u32, bytes: &[u8]) -> Self {
        let at = self.push_data(bytes);
        self.info(name, dims, type_id, at)
    }

    pub(crate) fn finish(self) -> Vec<u8> {
        let mut f = b"GGUF".to_vec();
        f.extend(self.version.to_le_bytes());
        self.count(&mut f, self.n_tensors);
        self.count(&mut f, self.n_kv);
        f.extend(&self.kvs);
        f.extend(&self.infos);
        f.resize(f.len().next_multiple_of(self.alignment), 0);
        f.extend(&self.data);
        f
    }
}

/// f32 [[1, 2, 3], [4, 5, 6]].
fn six_f32() -> Vec<u8> {
    (1..=6).flat_map(|i| (i as f32).to_le_bytes()).collect()
}

/// One Q8_0 block: scale 0.5 (f16 0x3800), codes 0..32.
fn q8_block() -> Vec<u8> {
    let mut b = vec![0x00, 0x38];
    b.extend(0u8..32);
    b
}

/// A valid file of `version`: metadata of a string and a u32 array, an f32 [2, 3] and a
/// Q8_0 [1, 32] tensor.
fn sample(version: u32) -> Gguf {
    let g = Gguf::new(version);
    let name = g.str_value("sample");
    let arr = g.u32_array(&[7, 8]);
    g.kv(b"general.name", STR, &name)
        .kv(b"t.arr", ARRAY, &arr)
        .tensor("w", &[3, 2], F32, &six_f32())
        .tensor("q", &[32, 1], Q8_0, &q8_block())
}

pub fn valid(c: &mut Corpus) {
    for (version, file) in [(1, "gguf_v1.gguf"), (2, "gguf_v2.gguf")] {
        let lines: Vec<Line> = vec![
            (
                "q".into(),
                "data".into(),
                "u8".into(),
                vec![1, 32],
                q8_block(),
            ),
            (
                "w".into(),
                "data".into(),
                "f32".into(),
                vec![2, 3],
                six_f32(),
            ),
        ];
        c.add_valid_raw_lines(file, sample(version).finish(), &lines);
    }
}

pub fn invalid(c: &mut Corpus) {
    let v3 = || Gguf::new(3);
    let good_tensor = |g: Gguf| g.tensor("w", &[3, 2], F32, &six_f32());

    c.invalid(
        "gguf_truncated_header.gguf",
        b"GGUF\x03\x00\x00\x00\x01\x00".to_vec(),
        "open",
        "InvalidFile",
        "tensor count at byte 8 needs 8 bytes, but the file ends after 2",
    );
    let mut v4 = v3().finish();
    v4[4] = 4;
    c.invalid(
        "gguf_version_4.gguf",
        v4,
        "open",
        "Unsupported",
        "GGUF version 4: versions 1 to 3 are read",
    );
    let mut counts = good_tensor(v3()).finish();
    counts[8..16].copy_from_slice(&(1u64 << 40).to_le_bytes());
    c.invalid(
        "gguf_tensor_count_huge.gguf",
        counts,
        "open",
        "InvalidFile",
        "1099511627776 tensors and 0 metadata entries cannot fit",
    );
    let mut key = v3().kv(b"k", U8, &[1]).finish();
    key[24..32].copy_from_slice(&(1u64 << 40).to_le_bytes());
    c.invalid(
        "gguf_key_length_huge.gguf",
        key,
        "open",
        "InvalidFile",
        "metadata key at byte 24 declares 1099511627776 bytes, but only",
    );
    let mut arr = U32.to_le_bytes().to_vec();
    arr.extend((1u64 << 40).to_le_bytes());
    c.invalid(
        "gguf_array_length_huge.gguf",
        v3().kv(b"k", ARRAY, &arr).finish(),
        "open",
        "InvalidFile",
        "array at byte 37 declares 1099511627776 elements of u32",
    );
    c.invalid(
        "gguf_unknown_value_type.gguf",
        v3().kv(b"k", 13, &[0; 8]).finish(),
        "open",
        "InvalidFile",
        "unknown metadata value type 13 at byte 33",
    );
    let mut nested = Vec::new();
    for _ in 0..17 {
        nested.extend(ARRAY.to_le_bytes());
        nested.extend(1u64.to_le_bytes());
    }
    nested.extend(U8.to_le_bytes());
    nested.extend(1u64.to_le_bytes());
    nested.push(1);
    c.invalid(
        "gguf_arrays_nested_17_deep.gguf",
        v3().kv(b"k", ARRAY, &nested).finish(),
        "open",
        "LimitExceeded",
        "metadata arrays nested more than 16 deep",
    );
    c.invalid(
        "gguf_bool_2.gguf",
        v3().kv(b"k", BOOL, &[2]).finish(),
        "open",
        "InvalidFile",
        "bool value at byte 37 is 2, not 0 or 1",
    );
    c.invalid(
        "gguf_duplicate_key.gguf",
        v3().kv(b"k", U8, &[1]).kv(b"k", U8, &[2]).finish(),
        "open",
        "InvalidFile",
        "metadata key \"k\" is given twice (at byte 38)",
    );
    c.invalid(
        "gguf_key_not_utf8.gguf",
        v3().kv(b"k\xff", U8, &[1]).finish(),
        "open",
        "InvalidFile",
        "metadata key at byte 24 is not valid UTF-8",
    );
    c.invalid(
        "gguf_alignment_48.gguf",
        good_tensor(v3().kv(b"general.alignment", U32, &48u32.to_le_bytes())).finish(),
        "open",
        "InvalidFile",
        "general.alignment at byte 24 is u32 48, not a u32 power of two",
    );
    c.invalid(
        "gguf_alignment_u64.gguf",
        v3().kv(b"general.alignment", U64, &64u64.to_le_bytes())
            .finish(),
        "open",
        "InvalidFile",
        "general.alignment at byte 24 is u64 64, not a u32 power of two",
    );
    let dims65 = vec![1u64; 65];
    c.invalid(
        "gguf_rank_65.gguf",
        v3().info("w", &dims65, F32, 0).finish(),
        "open",
        "LimitExceeded",
        "rank 65 exceeds the cap of 64 dimensions",
    );
    c.invalid(
        "gguf_dims_overflow.gguf",
        v3().info("w", &[1 << 32, 1 << 31], F32, 0).finish(),
        "open",
        "InvalidFile",
        "the dimensions [2147483648, 4294967296] at byte 37 multiply past 2^63",
    );
    c.invalid(
        "gguf_offset_unaligned.gguf",
        v3().info("w", &[1], F32, 4).finish(),
        "open",
        "InvalidFile",
        "tensor info at byte 24: offset 4 is not a multiple of the alignment 32",
    );
    c.invalid(
        "gguf_data_past_end.gguf",
        v3().info("w", &[3, 2], F32, 0).finish(),
        "open",
        "InvalidFile",
        "tensor data of 24 bytes at byte 96 runs past the end of the 96-byte file",
    );
    c.invalid(
        "gguf_offset_past_data.gguf",
        good_tensor(v3()).info("far", &[1], F32, 1 << 20).finish(),
        "open",
        "InvalidFile",
        "offset 1048576 lies past the end of the data section (24 bytes from byte 128)",
    );
    c.invalid(
        "gguf_overlap.gguf",
        good_tensor(v3()).info("x", &[2], F32, 0).finish(),
        "open",
        "InvalidFile",
        "the data of tensors \"x\" and \"w\" overlap at byte 128",
    );
    c.invalid(
        "gguf_duplicate_tensor.gguf",
        good_tensor(good_tensor(v3())).finish(),
        "open",
        "InvalidFile",
        "tensor \"w\" is named twice",
    );
    c.invalid(
        "gguf_q4_0_row_of_16.gguf",
        v3().tensor("q", &[16, 2], Q4_0, &[0; 18]).finish(),
        "open",
        "InvalidFile",
        "Q4_0 blocks hold 32 elements each, but the innermost dimension is 16",
    );
    let mut cut = sample(3).finish();
    cut.truncate(130);
    c.invalid(
        "gguf_truncated_tensor_info.gguf",
        cut,
        "open",
        "InvalidFile",
        "tensor type at byte 128 needs 4 bytes, but the file ends after 2",
    );
    c.invalid(
        "gguf_unknown_type_id.gguf",
        good_tensor(v3())
            .tensor("future", &[4], 99, &[0; 16])
            .finish(),
        "read",
        "Unsupported",
        "ggml type id 99 is not in the type table this library knows",
    );
}
