//! Invalid NumPy `.npy`/`.npz` files, zip archives and PyTorch checkpoints (zip and legacy),
//! built by hand: each breaks one rule of the reader (a limit, a structure, an archive that
//! lies). The valid files are the ones numpy and torch wrote, in fixtures/interop.

use crate::fixture_set::Corpus;
use crate::zip_build::{self, central, eocd, put_u16, put_u32, Entry};

/// A `.npy` array of format `major`.0 with this header text (padded with spaces and a
/// newline to a multiple of 64, as numpy does) and data.
fn npy(major: u8, header: &str, data: &[u8]) -> Vec<u8> {
    let len_size = if major == 1 { 2 } else { 4 };
    let mut h = header.as_bytes().to_vec();
    let total = 8 + len_size + h.len() + 1;
    h.resize(h.len() + total.next_multiple_of(64) - total, b' ');
    h.push(b'\n');
    let mut b = b"\x93NUMPY".to_vec();
    b.extend([major, 0]);
    if major == 1 {
        b.extend((h.len() as u16).to_le_bytes());
    } else {
        b.extend((h.len() as u32).to_le_bytes());
    }
    b.extend(h);
    b.extend(data);
    b
}

fn f32_header(shape: &str) -> String {
    format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}")
}

/// Two f32 arrays `a` and `b` of two elements each, as an `.npz`.
fn two_arrays() -> (Vec<u8>, zip_build::Layout) {
    let a = npy(1, &f32_header("(2,)"), &[0, 0, 0x80, 0x3f, 0, 0, 0, 0x40]);
    let b = npy(
        1,
        &f32_header("(2,)"),
        &[0, 0, 0x40, 0x40, 0, 0, 0x80, 0x40],
    );
    zip_build::write(&[Entry::stored("a.npy", &a), Entry::stored("b.npy", &b)])
}

pub fn invalid_numpy(c: &mut Corpus) {
    let open = "open";
    let data8 = [0u8; 8];
    c.invalid(
        "npy_version_4.npy",
        npy(4, &f32_header("(2,)"), &data8),
        open,
        "Unsupported",
        ".npy format version 4.0 (1.0, 2.0 and 3.0 are read)",
    );
    let mut b = npy(2, &f32_header("(2,)"), &data8);
    b[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    c.invalid(
        "npy_header_4gib.npy",
        b,
        open,
        "LimitExceeded",
        ".npy header of 4294967295 bytes exceeds the cap of 65536",
    );
    let mut b = npy(1, &f32_header("(2,)"), &data8);
    b[8..10].copy_from_slice(&60000u16.to_le_bytes());
    c.invalid(
        "npy_header_past_end.npy",
        b,
        open,
        "InvalidFile",
        "a header of 60000 bytes runs past the end of the",
    );
    c.invalid(
        "npy_shape_overflow.npy",
        npy(1, &f32_header("(4294967296, 4294967296)"), &data8),
        open,
        "InvalidFile",
        "shape [4294967296, 4294967296] overflows",
    );
    c.invalid(
        "npy_data_short.npy",
        npy(1, &f32_header("(100,)"), &data8),
        open,
        "InvalidFile",
        "shape [100] of <f4 takes 400 bytes, but 8 follow the header",
    );
    c.invalid(
        "npy_trailing_bytes.npy",
        npy(1, &f32_header("(1,)"), &data8),
        open,
        "InvalidFile",
        "the array's 4 bytes of data end at 132, but the file has 136 bytes",
    );
    c.invalid(
        "npy_header_lacks_shape.npy",
        npy(1, "{'descr': '<f4', 'fortran_order': False, }", &data8),
        open,
        "InvalidFile",
        "header: it lacks one of descr, fortran_order, shape",
    );
    c.invalid(
        "npy_header_unknown_key.npy",
        npy(
            1,
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}",
            &data8,
        ),
        open,
        "InvalidFile",
        "header: unexpected key \"x\"",
    );
    c.invalid(
        "npy_header_nested_deep.npy",
        npy(
            1,
            &format!("{{'descr': {}1{}, }}", "[".repeat(40), "]".repeat(40)),
            &data8,
        ),
        open,
        "InvalidFile",
        "header: nested deeper than 16",
    );
    c.invalid(
        "npy_structured.npy",
        npy(
            1,
            "{'descr': [('a', '<i4'), ('b', '<f4')], 'fortran_order': False, 'shape': (1,), }",
            &data8,
        ),
        open,
        "Unsupported",
        "a structured .npy array (fields are not read)",
    );
    c.invalid(
        "npy_object.npy",
        npy(
            1,
            "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }",
            &data8,
        ),
        open,
        "Unsupported",
        "an object .npy array (its elements are pickles, which are never run)",
    );
    c.invalid(
        "npy_unicode_dtype.npy",
        npy(
            1,
            "{'descr': '<U2', 'fortran_order': False, 'shape': (1,), }",
            &data8,
        ),
        open,
        "Unsupported",
        ".npy dtype \"<U2\" has no zTensor equivalent",
    );
    let rank65 = format!("({})", vec!["1"; 65].join(", "));
    c.invalid(
        "npy_rank_65.npy",
        npy(1, &f32_header(&rank65), &[0; 4]),
        open,
        "LimitExceeded",
        "rank 65 exceeds the cap of 64 dimensions",
    );
    // numpy's loader refuses both: a shape that is a list, and a minor version.
    c.invalid(
        "npy_shape_list.npy",
        npy(
            1,
            "{'descr': '<f4', 'fortran_order': False, 'shape': [2], }",
            &data8,
        ),
        open,
        "InvalidFile",
        "header: shape is not a tuple",
    );
    let mut minor = npy(1, &f32_header("(2,)"), &data8);
    if let Some(v) = minor.get_mut(7) {
        *v = 1;
    }
    c.invalid(
        "npy_version_1_1.npy",
        minor,
        open,
        "Unsupported",
        ".npy format version 1.1 (1.0, 2.0 and 3.0 are read)",
    );

    // Zip archives that lie.
    let (good, l) = two_arrays();
    let cut = good[..good.len() / 2].to_vec();
    c.invalid(
        "zip_truncated.npz",
        cut,
        open,
        "InvalidFile",
        "invalid zip archive: no end of central directory record",
    );
    let mut b = good.clone();
    put_u32(&mut b, l.eocd + eocd::CD_OFFSET, 100_000);
    c.invalid(
        "zip_cd_past_its_end.npz",
        b,
        open,
        "InvalidFile",
        "runs past its end record at",
    );
    let mut b = good.clone();
    put_u16(&mut b, l.eocd + eocd::ENTRIES, 60000);
    put_u16(&mut b, l.eocd + eocd::ENTRIES_HERE, 60000);
    c.invalid(
        "zip_entry_count_lies.npz",
        b,
        open,
        "InvalidFile",
        "60000 entries cannot fit in a central directory of 102 bytes",
    );
    let mut b = good.clone();
    let a_size = (l.local[1] - l.local[0] - 30 - 5 + 10) as u32;
    put_u32(&mut b, l.central[0] + central::COMPRESSED, a_size);
    put_u32(&mut b, l.central[0] + central::UNCOMPRESSED, a_size);
    c.invalid(
        "zip_overlapping_entries.npz",
        b,
        open,
        "InvalidFile",
        "invalid zip archive: entries \"a.npy\" and \"b.npy\" overlap",
    );
    let mut b = good.clone();
    b[l.local[1] + 30] = b'c';
    c.invalid(
        "zip_local_name_lies.npz",
        b,
        open,
        "InvalidFile",
        "local header names another entry than the central directory",
    );
    let mut b = good.clone();
    let b_size = (l.central[0] - l.local[1] - 30 - 5 + 1) as u32;
    put_u32(&mut b, l.central[1] + central::COMPRESSED, b_size);
    put_u32(&mut b, l.central[1] + central::UNCOMPRESSED, b_size);
    c.invalid(
        "zip_entry_into_directory.npz",
        b,
        open,
        "InvalidFile",
        "run past the central directory at",
    );
    let mut b = good.clone();
    put_u16(&mut b, l.central[0] + central::FLAGS, 1);
    c.invalid(
        "zip_encrypted.npz",
        b,
        open,
        "Unsupported",
        "zip entry \"a.npy\" is encrypted",
    );
    let mut b = good.clone();
    put_u16(&mut b, l.central[0] + central::METHOD, 12);
    c.invalid(
        "zip_method_bzip2.npz",
        b,
        open,
        "Unsupported",
        "zip compression method 12 (only stored and deflate are read)",
    );
    let mut b = good.clone();
    put_u16(&mut b, l.eocd + eocd::DISK, 1);
    c.invalid(
        "zip_split_over_disks.npz",
        b,
        open,
        "Unsupported",
        "a zip archive split over several disks",
    );
    let mut b = good.clone();
    b[l.central[1]] = b'X';
    c.invalid(
        "zip_bad_directory_signature.npz",
        b,
        open,
        "InvalidFile",
        "bad central directory record signature",
    );
    let mut b = good.clone();
    put_u32(&mut b, l.eocd + eocd::CD_SIZE, u32::MAX);
    c.invalid(
        "zip64_without_locator.npz",
        b,
        open,
        "InvalidFile",
        "zip64 fields but no zip64 locator",
    );
    let a = npy(1, &f32_header("(2,)"), &data8);
    // An extra record that says it is longer than the extra field holding it (Python's
    // zipfile: "Corrupt extra field").
    let mut e = Entry::stored("a.npy", &a);
    e.zip64_uncompressed = Some(a.len() as u64);
    let (mut b, l) = zip_build::write(&[e]);
    put_u16(&mut b, l.central[0] + 46 + "a.npy".len() + 2, 9);
    c.invalid(
        "zip64_extra_past_its_field.npz",
        b,
        open,
        "InvalidFile",
        "entry \"a.npy\": extra record 0x0001 of 9 bytes runs past its extra field (8 left)",
    );
    let (b, _) = zip_build::write(&[Entry::stored("a.npy", &a), Entry::stored("a.npy", &a)]);
    c.invalid(
        "zip_name_twice.npz",
        b,
        open,
        "InvalidFile",
        "entry \"a.npy\" is listed twice",
    );
    let (b, _) = zip_build::write(&[
        Entry::stored("a.npy", &a),
        Entry::stored("a", &npy(1, &f32_header("(2,)"), &data8)),
    ]);
    c.invalid(
        "npz_two_entries_one_name.npz",
        b,
        open,
        "InvalidFile",
        "two entries make the array \"a\"",
    );
    // Deflated entries: one whose stream is shorter than declared (the header inflates at
    // open; the elements fail when read), one that declares 8 GiB (past the cap).
    let full = npy(1, &f32_header("(100,)"), &[0; 400]);
    let short = full[..full.len() - 392].to_vec();
    let mut e = Entry::deflated("w.npy", &short);
    e.zip64_uncompressed = Some(full.len() as u64);
    let (b, _) = zip_build::write(&[e]);
    c.invalid(
        "npz_deflate_short.npz",
        b,
        "read",
        "InvalidFile",
        "deflate stream ends before its declared size",
    );
    let header = npy(1, &f32_header("(2147483648,)"), &[]);
    let mut bomb = header.clone();
    bomb.extend([0u8; 4096]);
    let mut e = Entry::deflated("w.npy", &bomb);
    e.zip64_uncompressed = Some(header.len() as u64 + (8u64 << 30));
    let (b, _) = zip_build::write(&[e]);
    c.invalid(
        "npz_deflate_8gib.npz",
        b,
        "read",
        "LimitExceeded",
        "declared decompressed size 8589934592 exceeds the cap of 4294967296 bytes",
    );
    // Twenty arrays whose headers are 64 KiB of spaces each: 1.3 MB of headers deflated
    // into a few kilobytes.
    let padded = format!("{}{}", f32_header("(0,)"), " ".repeat(65_000));
    let entries: Vec<Entry> = (0..20)
        .map(|i| Entry::deflated(&format!("a{i}.npy"), &npy(2, &padded, &[])))
        .collect();
    let (b, _) = zip_build::write(&entries);
    c.invalid(
        "npz_headers_inflate_1mb.npz",
        b,
        open,
        "LimitExceeded",
        "the archive's deflated .npy headers inflate to more than",
    );
    let full = npy(1, &f32_header("(3,)"), &data8);
    let (b, _) = zip_build::write(&[Entry::stored("w.npy", &full)]);
    c.invalid(
        "npz_entry_data_short.npz",
        b,
        open,
        "InvalidFile",
        "shape [3] of <f4 takes 12 bytes, but 8 follow the header",
    );
}

/// A pickle under construction (protocol 2 opcodes, as torch.save writes them).
struct Pickle(Vec<u8>);

impl Pickle {
    fn new() -> Self {
        Pickle(vec![0x80, 2])
    }
    fn op(&mut self, b: &[u8]) -> &mut Self {
        self.0.extend(b);
        self
    }
    fn text(&mut self, s: &str) -> &mut Self {
        self.0.push(b'X');
        self.0.extend((s.len() as u32).to_le_bytes());
        self.0.extend(s.as_bytes());
        self
    }
    fn int(&mut self, v: i64) -> &mut Self {
        match i32::try_from(v) {
            Ok(v) => {
                self.0.push(b'J');
                self.0.extend(v.to_le_bytes());
            }
            Err(_) => {
                self.0.extend([0x8a, 8]);
                self.0.extend(v.to_le_bytes());
            }
        }
        self
    }
    fn ints(&mut self, v: &[i64]) -> &mut Self {
        self.op(b"(");
        for &x in v {
            self.int(x);
        }
        self.op(b"t")
    }
    fn global(&mut self, module: &str, name: &str) -> &mut Self {
        self.0.push(b'c');
        self.0.extend(format!("{module}\n{name}\n").as_bytes());
        self
    }
    fn done(&mut self) -> Vec<u8> {
        self.0.push(b'.');
        std::mem::take(&mut self.0)
    }
}

/// A tensor as `_rebuild_tensor_v2` rebuilds it from a storage of `class`.
struct Tensor<'a> {
    class: &'a str,
    key: &'a str,
    numel: i64,
    offset: i64,
    size: &'a [i64],
    stride: &'a [i64],
}

impl Pickle {
    fn tensor(&mut self, t: &Tensor<'_>) -> &mut Self {
        self.global("torch._utils", "_rebuild_tensor_v2")
            .op(b"((")
            .text("storage")
            .global("torch", t.class)
            .text(t.key)
            .text("cpu")
            .int(t.numel)
            .op(b"tQ")
            .int(t.offset)
            .ints(t.size)
            .ints(t.stride)
            .op(b"\x89}tR")
    }
}

/// `{name: tensor, ...}` as a whole pickle.
fn state_dict(tensors: &[(&str, Tensor<'_>)]) -> Vec<u8> {
    let mut p = Pickle::new();
    p.op(b"}(");
    for (name, t) in tensors {
        p.text(name).tensor(t);
    }
    p.op(b"u").done()
}

fn f32_tensor<'a>(key: &'a str, numel: i64, size: &'a [i64], stride: &'a [i64]) -> Tensor<'a> {
    Tensor {
        class: "FloatStorage",
        key,
        numel,
        offset: 0,
        size,
        stride,
    }
}

/// A checkpoint archive: `archive/data.pkl` first, then the records given.
fn checkpoint(pickle: &[u8], records: &[(&str, &[u8])]) -> Vec<u8> {
    let mut entries = vec![Entry::stored("archive/data.pkl", pickle)];
    for (name, data) in records {
        entries.push(Entry::stored(&format!("archive/{name}"), data));
    }
    zip_build::write(&entries).0
}

const LITTLE: (&str, &[u8]) = ("byteorder", b"little");
const FOUR_F32: &[u8] = &[0; 16];

pub fn invalid_torch(c: &mut Corpus) {
    let open = "open";
    let one = state_dict(&[("w", f32_tensor("0", 4, &[4], &[1]))]);
    let b = zip_build::write(&[
        Entry::stored("archive/byteorder", b"little"),
        Entry::stored("archive/version", b"3"),
    ])
    .0;
    c.invalid(
        "pt_no_data_pkl.pt",
        b,
        open,
        "InvalidFile",
        "invalid PyTorch checkpoint: no <archive>/data.pkl record",
    );
    c.invalid(
        "pt_bad_byteorder.pt",
        checkpoint(&one, &[("byteorder", b"middle"), ("data/0", FOUR_F32)]),
        open,
        "InvalidFile",
        "byteorder record says \"middle\"",
    );
    c.invalid(
        "pt_missing_storage.pt",
        checkpoint(&one, &[LITTLE]),
        open,
        "InvalidFile",
        "storage \"0\" has no data/0 record",
    );
    let lies = state_dict(&[("w", f32_tensor("0", 100, &[4], &[1]))]);
    c.invalid(
        "pt_storage_size_lies.pt",
        checkpoint(&lies, &[LITTLE, ("data/0", FOUR_F32)]),
        open,
        "InvalidFile",
        "storage \"0\" declares 400 bytes, but its record holds 16",
    );
    let past = state_dict(&[("w", f32_tensor("0", 4, &[10], &[1]))]);
    c.invalid(
        "pt_tensor_past_storage.pt",
        checkpoint(&past, &[LITTLE, ("data/0", FOUR_F32)]),
        open,
        "InvalidFile",
        "elements reach byte 40 of storage \"0\", which holds 16",
    );
    let offset_past = state_dict(&[(
        "w",
        Tensor {
            offset: 3,
            ..f32_tensor("0", 4, &[2], &[1])
        },
    )]);
    c.invalid(
        "pt_offset_past_storage.pt",
        checkpoint(&offset_past, &[LITTLE, ("data/0", FOUR_F32)]),
        open,
        "InvalidFile",
        "elements reach byte 20 of storage \"0\", which holds 16",
    );
    let huge = 1i64 << 40;
    let overflow = state_dict(&[("w", f32_tensor("0", 4, &[huge, huge], &[huge, 1]))]);
    c.invalid(
        "pt_shape_overflow.pt",
        checkpoint(&overflow, &[LITTLE, ("data/0", FOUR_F32)]),
        open,
        "InvalidFile",
        "shape [1099511627776, 1099511627776] overflows",
    );
    let stride = state_dict(&[("w", f32_tensor("0", 4, &[2], &[1 << 62]))]);
    c.invalid(
        "pt_stride_overflow.pt",
        checkpoint(&stride, &[LITTLE, ("data/0", FOUR_F32)]),
        open,
        "InvalidFile",
        "strides [4611686018427387904] overflow",
    );
    let rank = state_dict(&[("w", f32_tensor("0", 4, &[2, 2], &[1]))]);
    c.invalid(
        "pt_stride_rank.pt",
        checkpoint(&rank, &[LITTLE, ("data/0", FOUR_F32)]),
        open,
        "InvalidFile",
        "size [2, 2] and stride [1] differ in rank",
    );
    // {"a.b": t, "a": {"b": t}}: two tensors, one name.
    let mut p = Pickle::new();
    p.op(b"}(")
        .text("a.b")
        .tensor(&f32_tensor("0", 4, &[4], &[1]));
    p.text("a")
        .op(b"}")
        .text("b")
        .tensor(&f32_tensor("0", 4, &[4], &[1]));
    let dup = p.op(b"su").done();
    c.invalid(
        "pt_names_collide.pt",
        checkpoint(&dup, &[LITTLE, ("data/0", FOUR_F32)]),
        open,
        "InvalidFile",
        "two tensors flatten to the name \"a.b\"",
    );
    // Two storages whose records overlap in the archive.
    let two = state_dict(&[
        ("a", f32_tensor("0", 4, &[4], &[1])),
        ("b", f32_tensor("1", 4, &[4], &[1])),
    ]);
    let (mut b, l) = zip_build::write(&[
        Entry::stored("archive/data.pkl", &two),
        Entry::stored("archive/data/0", FOUR_F32),
        Entry::stored("archive/data/1", FOUR_F32),
    ]);
    put_u32(&mut b, l.central[1] + central::COMPRESSED, 40);
    put_u32(&mut b, l.central[1] + central::UNCOMPRESSED, 40);
    c.invalid(
        "pt_storages_overlap.pt",
        b,
        open,
        "InvalidFile",
        "entries \"archive/data/0\" and \"archive/data/1\" overlap",
    );
    // A dtype torch has and zTensor has not: the tensor is listed, reading it fails.
    let mut p = Pickle::new();
    p.op(b"}(").text("half_complex");
    p.global("torch._utils", "_rebuild_tensor_v3")
        .op(b"((")
        .text("storage")
        .global("torch.storage", "UntypedStorage")
        .text("0")
        .text("cpu")
        .int(16)
        .op(b"tQ")
        .int(0)
        .ints(&[4])
        .ints(&[1])
        .op(b"\x89}")
        .global("torch", "complex32")
        .op(b"tR");
    let v3 = p.op(b"u").done();
    c.invalid(
        "pt_dtype_complex32.pt",
        checkpoint(&v3, &[LITTLE, ("data/0", FOUR_F32)]),
        "read",
        "Unsupported",
        "torch dtype torch.complex32 has no zTensor equivalent",
    );

    // The pickle machine's structure rules and caps.
    let pickles: Vec<(&str, Vec<u8>, &str, &str)> = vec![
        (
            "pt_pickle_unknown_opcode.pt",
            Pickle::new().op(b"\xff").done(),
            "Unsupported",
            "pickle: opcode 0xff is not used by torch.save",
        ),
        (
            "pt_pickle_no_stop.pt",
            Pickle::new().op(b"}").0.clone(),
            "InvalidFile",
            "invalid pickle: ends without STOP",
        ),
        (
            "pt_pickle_string_cap.pt",
            {
                let mut p = Pickle::new();
                p.op(b"\x8d").op(&(1u64 << 40).to_le_bytes());
                p.done()
            },
            "LimitExceeded",
            "pickle: a string of 1099511627776 bytes exceeds the cap of 16777216",
        ),
        (
            "pt_pickle_frame_past_end.pt",
            {
                let mut p = Pickle::new();
                p.op(b"\x95").op(&(1u64 << 63).to_le_bytes());
                p.done()
            },
            "InvalidFile",
            "invalid pickle: a FRAME of 9223372036854775808 bytes runs past the end of the pickle",
        ),
        (
            "pt_pickle_string_past_end.pt",
            Pickle::new().op(b"X\xe8\x03\x00\x00abc").done(),
            "InvalidFile",
            "invalid pickle: 1000 bytes asked for, 4 left",
        ),
        (
            "pt_pickle_stack_cap.pt",
            {
                let mut p = Pickle::new();
                p.op(&vec![b'N'; (1 << 15) + 1]);
                p.done()
            },
            "LimitExceeded",
            "pickle stack holds more than 32768 values",
        ),
        (
            "pt_pickle_memo_never_stored.pt",
            Pickle::new().op(b"h\x07").done(),
            "InvalidFile",
            "invalid pickle: memo entry 7 was never stored",
        ),
        (
            "pt_pickle_not_a_storage_id.pt",
            Pickle::new().text("module").op(b"\x85Q").done(),
            "Unsupported",
            "pickle: a persistent id other than ('storage', type, key, location, size)",
        ),
        (
            // l0 = [[1]]; l(n+1) = [l(n), l(n)], 40 levels: 2^40 lists if flattened.
            "pt_pickle_shared_lists_2_pow_40.pt",
            {
                let mut p = Pickle::new();
                p.op(b"]q\x00]K\x01aa");
                for i in 0..40u8 {
                    p.op(&[b'h', i, b'h', i, 0x86, b'q', i + 1]);
                }
                p.done()
            },
            "LimitExceeded",
            "the checkpoint's value has more than 4678 parts",
        ),
        (
            "pt_pickle_global_too_long.pt",
            {
                let mut p = Pickle::new();
                p.global(&"m".repeat(2000), "f");
                p.done()
            },
            "LimitExceeded",
            "pickle: a global's module and name exceed 1024 bytes",
        ),
        (
            "pt_pickle_size_rank_65.pt",
            {
                let mut p = Pickle::new();
                p.op(b"}(")
                    .text("w")
                    .tensor(&f32_tensor("0", 4, &[1; 65], &[1; 65]));
                p.op(b"u").done()
            },
            "LimitExceeded",
            "rank 65 exceeds the cap of 64 dimensions",
        ),
        (
            "pt_pickle_key_5000_bytes.pt",
            Pickle::new()
                .op(b"}")
                .text(&"k".repeat(5000))
                .op(b"Ns")
                .done(),
            "LimitExceeded",
            "a key of 5000 bytes exceeds the name cap of 4096",
        ),
        (
            // One 16 KiB string in a list 200 times: 3.2 MB of attribute text from 17 KB.
            "pt_pickle_string_200_times.pt",
            {
                let mut p = Pickle::new();
                p.op(b"}")
                    .text("v")
                    .text(&"s".repeat(16 << 10))
                    .op(b"q\x000](");
                for _ in 0..200 {
                    p.op(b"h\x00");
                }
                p.op(b"es").done()
            },
            "LimitExceeded",
            "the checkpoint's names and values take more than",
        ),
        (
            // _rebuild_from_type_v2(_rebuild_from_type_v2(...)), ten deep.
            "pt_pickle_calls_nested_10.pt",
            {
                let mut p = Pickle::new();
                p.global("torch._tensor", "_rebuild_from_type_v2")
                    .op(b"q\x00)");
                for _ in 0..10 {
                    // The tuple on the stack becomes the third argument of the next.
                    p.op(b"q\x01(h\x00Nh\x01Nt");
                }
                p.op(b"q\x02h\x00h\x02R").done()
            },
            "LimitExceeded",
            "pickle: _rebuild_from_type_v2 nested more than 8 deep",
        ),
        (
            "pt_pickle_dict_holds_itself.pt",
            Pickle::new().op(b"}q\x00").text("a").op(b"h\x00s").done(),
            "LimitExceeded",
            "the checkpoint's value is nested deeper than 64",
        ),
    ];
    for (name, pickle, kind, message) in pickles {
        c.invalid(name, checkpoint(&pickle, &[LITTLE]), open, kind, message);
    }

    // Legacy checkpoints: five pickles and raw storages.
    let legacy = |version: i64, storage_len: usize| {
        let mut b = Pickle::new()
            .op(b"\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19")
            .done();
        b.extend(Pickle::new().int(version).done());
        b.extend(
            Pickle::new()
                .op(b"}")
                .text("little_endian")
                .op(b"\x88s")
                .done(),
        );
        let mut value = Pickle::new();
        value.op(b"}(").text("w");
        value
            .global("torch._utils", "_rebuild_tensor_v2")
            .op(b"((")
            .text("storage")
            .global("torch", "FloatStorage")
            .text("k")
            .text("cpu")
            .int(4)
            .op(b"NtQ")
            .int(0)
            .ints(&[4])
            .ints(&[1])
            .op(b"\x89}tR");
        b.extend(value.op(b"u").done());
        b.extend(Pickle::new().op(b"(").text("k").op(b"l").done());
        b.extend(4u64.to_le_bytes());
        b.extend(vec![0u8; storage_len]);
        b
    };
    c.invalid(
        "pt_legacy_storage_cut.pt",
        legacy(1001, 8),
        open,
        "InvalidFile",
        "storage \"k\" of 4 elements runs past the end of the file",
    );
    c.invalid(
        "pt_legacy_protocol_1000.pt",
        legacy(1000, 16),
        open,
        "Unsupported",
        "legacy checkpoint protocol 1000 (1001 is read)",
    );
}
