//! Casting floating-point tensors while converting (`ObjectView::cast_floats`, `zt convert
//! --dtype`): every writer gives the cast type and the values rounded to nearest even, the
//! other types pass as they are, sizes are planned cast, and bytes that fail their digest
//! are never cast.

use std::path::{Path, PathBuf};

use half::{bf16, f16};
use ztensor::convert::{self, ConvertOptions, ShardOptions};
use ztensor::{DType, ErrorKind, Limits, ObjectView, OpenOptions, Reader, Version, Writer};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/interop")
        .join(name)
}

/// Every object of `r`, cast to `to`.
fn cast_views(r: &Reader, to: DType) -> Vec<ObjectView<'_>> {
    r.iter().map(|o| o.cast_floats(to).unwrap()).collect()
}

/// The fixture's values of `name` as f32, whatever float type it holds.
fn as_f32(r: &Reader, name: &str) -> Vec<f32> {
    r.object(name).unwrap().read_f32().unwrap()
}

#[test]
fn a_v1_2_copy_casts_dense_and_sparse_floats_and_keeps_every_other_type() {
    let src = ztensor::open(fixture("v123_all.zt")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("f16.zt");
    let mut w = Writer::create_version(&out, Version::V1_2, Default::default()).unwrap();
    let options = ConvertOptions {
        version: Version::V1_2,
        ..Default::default()
    };
    for o in cast_views(&src, DType::F16) {
        convert::copy_object(o, &mut w, options).unwrap();
    }
    w.finish().unwrap();

    let got = ztensor::open(&out).unwrap();
    // Digests are recomputed over the cast bytes: the whole file checks.
    let report = got.verify();
    assert!(report.is_ok() && report.checked >= 3, "{report:?}");
    for name in [
        "bf16_t",
        "crc_f32",
        "dense_f32",
        "sha_f32",
        "zstd_f32",
        "scalar_f64",
    ] {
        let o = got.object(name).unwrap();
        assert_eq!(o.element_type().unwrap().dtype, DType::F16, "{name}");
        let want: Vec<f16> = as_f32(&src, name)
            .iter()
            .map(|&v| f16::from_f32(v))
            .collect();
        assert_eq!(&o.read::<f16>().unwrap()[..], &want[..], "{name}");
    }
    for name in ["csr", "coo"] {
        let o = got.object(name).unwrap();
        assert_eq!(o.component("values").unwrap().element.dtype, DType::F16);
        let want: Vec<f32> = as_f32(&src, name)
            .iter()
            .map(|&v| f16::from_f32(v).to_f32())
            .collect();
        assert_eq!(o.read_f32().unwrap(), want, "{name}");
    }
    // Not floats, or floats of another kind: as they were, to the byte.
    for name in ["bool_t", "complex", "fp8", "qg", "zstd_sha_i64"] {
        let (before, after) = (src.object(name).unwrap(), got.object(name).unwrap());
        assert_eq!(before.components.len(), after.components.len(), "{name}");
        for (b, a) in before.components().zip(after.components()) {
            assert_eq!(b.element, a.element, "{name}");
            assert_eq!(b.bytes().unwrap(), a.bytes().unwrap(), "{name}");
        }
    }
}

#[test]
fn every_writer_writes_the_cast_type_and_values() {
    let dir = tempfile::tempdir().unwrap();
    let src_path = dir.path().join("src.zt");
    let weights: Vec<f32> = (0..1000).map(|i| (i as f32 * 0.37).sin() * 1e3).collect();
    // v1.2, whose stored bytes a v1.2 copy can keep as they are (see the end).
    let durability = ztensor::Durability::Unsynced;
    let mut w = Writer::create_version(&src_path, Version::V1_2, durability).unwrap();
    w.add("w", &[10, 100], &weights).unwrap();
    w.add("step", &[1], &[42i64]).unwrap();
    w.add("blk.0.attn_norm.weight", &[2, 2], &[0.1f32, 0.2, 0.3, 0.4])
        .unwrap();
    w.add("bias", &[2], &[0.1f32, 0.2]).unwrap();
    w.finish().unwrap();
    let src = ztensor::open(&src_path).unwrap();
    let views = cast_views(&src, DType::BF16);
    let want: Vec<bf16> = weights.iter().map(|&v| bf16::from_f32(v)).collect();
    let check = |path: &Path| {
        let r = ztensor::open(path).unwrap();
        let o = r.object("w").unwrap();
        assert_eq!(
            o.element_type().unwrap().dtype,
            DType::BF16,
            "{}",
            path.display()
        );
        assert_eq!(
            &o.read::<bf16>().unwrap()[..],
            &want[..],
            "{}",
            path.display()
        );
        assert_eq!(&r.read::<i64>("step").unwrap()[..], &[42]);
    };

    let st = dir.path().join("m.safetensors");
    convert::write_safetensors_views(&views, None, &st, false, durability).unwrap();
    check(&st);
    // 2000 + 8 + 4 bytes of bf16 and 8 of i64 after the header: the header planned the cast
    // sizes.
    let header = u64::from_le_bytes(std::fs::read(&st).unwrap()[..8].try_into().unwrap());
    assert_eq!(std::fs::metadata(&st).unwrap().len(), 8 + header + 2012 + 8);

    let gguf = dir.path().join("m.gguf");
    let attributes = ztensor::Attributes::new();
    convert::write_gguf_views(&views, &attributes, &gguf, false, durability).unwrap();
    check(&gguf);
    // Norms and 1-D tensors stay f32 in GGUF, as llama.cpp's converter keeps them; they are
    // cast in every other kind.
    let r = ztensor::open(&gguf).unwrap();
    for name in ["blk.0.attn_norm.weight", "bias"] {
        assert_eq!(
            r.object(name).unwrap().element_type().unwrap().dtype,
            DType::F32
        );
        assert_eq!(r.read::<f32>(name).unwrap(), src.read::<f32>(name).unwrap());
    }
    let r = ztensor::open(&st).unwrap();
    assert_eq!(
        r.object("bias").unwrap().element_type().unwrap().dtype,
        DType::BF16
    );

    let mag = dir.path().join("m.mag");
    let options = ztensor::MagOptions {
        version: ztensor::mag::WriteVersion::V300,
        densify: false,
        durability,
    };
    convert::write_mag_views(&views, &attributes, &mag, options).unwrap();
    check(&mag);

    let v2 = dir.path().join("m.zt");
    let mut w = Writer::create(&v2).unwrap();
    for o in &views {
        convert::copy_object(*o, &mut w, ConvertOptions::default()).unwrap();
    }
    w.finish().unwrap();
    check(&v2);

    // A v1.2 copy of stored bytes cannot keep them: the cast bytes are written instead.
    let v12 = dir.path().join("m12.zt");
    let mut w = Writer::create_version(&v12, Version::V1_2, durability).unwrap();
    for o in &views {
        let as_stored = convert::copy_stored(*o, &mut w).unwrap();
        assert_eq!(as_stored, o.name() == "step", "{}", o.name());
    }
    w.finish().unwrap();
    check(&v12);
}

#[test]
fn shards_are_planned_by_the_cast_size() {
    let dir = tempfile::tempdir().unwrap();
    let src_path = dir.path().join("src.zt");
    let mut w = Writer::create(&src_path).unwrap();
    for name in ["a", "b", "c", "d"] {
        w.add(name, &[256], &[1.5f32; 256]).unwrap();
    }
    w.finish().unwrap();
    let src = ztensor::open(&src_path).unwrap();
    // 1 KiB of f32 each, 512 B of f16: shards of 1 KiB hold two cast tensors, one uncast.
    let options = ShardOptions {
        max_shard_size: 1024,
        convert: ConvertOptions {
            durability: ztensor::Durability::Unsynced,
            ..Default::default()
        },
        densify: false,
    };
    let shards = |views: &[ObjectView<'_>], root: &str| {
        let root = dir.path().join(root);
        convert::write_sharded_views(views, root, options, &Default::default())
            .unwrap()
            .len()
    };
    assert_eq!(shards(&cast_views(&src, DType::F16), "h.zt"), 2);
    assert_eq!(shards(&src.iter().collect::<Vec<_>>(), "s.zt"), 4);
    let r = ztensor::open(dir.path().join("h.zt")).unwrap();
    assert_eq!(&r.read::<f16>("d").unwrap()[..], &[f16::from_f32(1.5); 256]);
}

#[test]
fn bytes_that_fail_their_digest_are_never_cast() {
    let path = fixture("v123_all.zt");
    let src = ztensor::open(&path).unwrap();
    let at = src.object("sha_f32").unwrap().components[0].offset as usize;
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[at + 1] ^= 0x40;
    let damaged = OpenOptions::new().open_bytes(bytes).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.safetensors");
    let view = damaged
        .object("sha_f32")
        .unwrap()
        .cast_floats(DType::BF16)
        .unwrap();
    let durability = ztensor::Durability::Unsynced;
    let e = convert::write_safetensors_views(&[view], None, &out, false, durability).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ChecksumMismatch, "{e}");
    assert!(!out.exists());
    let mut w = Writer::create(dir.path().join("m.zt")).unwrap();
    let e = convert::copy_object(view, &mut w, ConvertOptions::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ChecksumMismatch, "{e}");
}

#[test]
fn an_upcast_past_the_decode_cap_is_refused_naming_the_object() {
    let dir = tempfile::tempdir().unwrap();
    let src_path = dir.path().join("src.zt");
    let mut w = Writer::create(&src_path).unwrap();
    w.add("w", &[1024], &[bf16::from_f32(0.5); 1024]).unwrap();
    w.finish().unwrap();
    // 2 KiB stored, 8 KiB as f64: a cap of 4 KiB lets the read through, not the cast.
    let limits = Limits {
        max_decompressed_len: 4096,
        ..Default::default()
    };
    let src = OpenOptions::new().limits(limits).open(&src_path).unwrap();
    let view = src.object("w").unwrap().cast_floats(DType::F64).unwrap();
    let e = view.dense_form().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{e}");
    assert_eq!(e.object(), Some("w"));
    assert!(e.to_string().contains("cap of 4096"), "{e}");
}

#[test]
fn only_float_types_are_cast_targets() {
    let src = ztensor::open(fixture("v123_all.zt")).unwrap();
    let e = src
        .object("dense_f32")
        .unwrap()
        .cast_floats(DType::I8)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("f64, f32, f16 or bf16"), "{e}");
}
