//! Old zTensor files (v0.1, v1.1): reading their special cases, and lossless upgrade to v1.2.

use std::path::{Path, PathBuf};

use ztensor::{ConvertOptions, ErrorKind, FileVersion, Format, Keep, Reader};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

const SPARSE_DENSE: [f32; 12] = [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 3.0];

#[test]
fn v01_sparse_in_every_spelling() {
    let r = ztensor::open(fixtures().join("valid/v01_sparse.zt")).unwrap();
    for name in [
        "csr_writer_spelling",
        "csr_spec_spelling",
        "csr_big_endian",
        "csr_zstd",
        "coo_writer_spelling",
        "coo_spec_spelling",
    ] {
        assert_eq!(
            r.object(name).unwrap().read_f32().unwrap(),
            SPARSE_DENSE,
            "{name}"
        );
        assert_eq!(
            &r.object(name).unwrap().to_dense::<f32>().unwrap()[..],
            &SPARSE_DENSE,
            "{name}"
        );
    }
    let csr = r
        .object("csr_big_endian")
        .unwrap()
        .read_csr::<f32>()
        .unwrap();
    assert_eq!(
        (&csr.indptr[..], &csr.indices[..], &csr.values[..]),
        (&[0, 1, 1, 3][..], &[0, 2, 3][..], &[1.0, 2.0, 3.0][..])
    );
    let coo = r
        .object("coo_writer_spelling")
        .unwrap()
        .read_coo::<f32>()
        .unwrap();
    assert_eq!(
        &coo.coords[..],
        &[0, 2, 2, 0, 2, 3],
        "records transposed to structure of arrays"
    );
    assert_eq!(
        r.object("coo_spec_spelling").unwrap().attributes["origin"].as_str(),
        Some("custom field on a sparse entry")
    );
    assert!(
        !r.object("csr_spec_spelling")
            .unwrap()
            .attributes
            .contains_key("sparse_format"),
        "consumed, not a custom field"
    );
    assert!(r.verify().is_ok());
}

#[test]
fn v11_legacy_dtypes_map_onto_the_v12_model() {
    use ztensor::fp8::{F8E4M3Fn, F8E5M2};
    use ztensor::Complex;
    let r = ztensor::open(fixtures().join("valid/v11_types.zt")).unwrap();
    assert!(matches!(r.version(), FileVersion::ZTensor(v) if v.minor == 1));
    assert_eq!(r.attributes()["framework"].as_str(), Some("PyTorch"));
    assert_eq!(
        &r.read::<Complex<f32>>("c64").unwrap()[..],
        &[Complex { re: 1.0, im: 2.0 }, Complex { re: -3.0, im: 0.5 }]
    );
    assert_eq!(r.read::<Complex<f64>>("c128").unwrap()[0].re, 1e300);
    assert_eq!(r.read::<F8E4M3Fn>("e4m3").unwrap()[0].to_f32(), 1.0);
    assert_eq!(r.read::<F8E5M2>("e5m2").unwrap()[0], F8E5M2(0x38));
    assert_eq!(
        &r.object("csr_narrow")
            .unwrap()
            .read_csr::<f32>()
            .unwrap()
            .indptr[..],
        &[0, 1, 1, 3],
        "u32 indptr widened"
    );
    assert_eq!(
        r.object("csr_narrow").unwrap().read_f32().unwrap(),
        SPARSE_DENSE
    );
    assert!(r.verify().is_ok());
}

/// Name, shape, format, components (role, type, decoded bytes), and the f32 view as bits.
type ObjectArrays = (
    String,
    Vec<u64>,
    String,
    Vec<(String, String, Vec<u8>)>,
    Option<Vec<u32>>,
);

/// Every array of every object, as a reader sees it: per component decoded bytes (with the
/// element type), plus the f32 view of sparse and quantized objects.
fn arrays(r: &Reader) -> Vec<ObjectArrays> {
    r.objects()
        .iter()
        .filter(|o| o.defect.is_none())
        .map(|o| {
            let o = r.object(&o.name).unwrap();
            let comps = if o.legacy_packing.is_some() {
                Vec::new()
            } else {
                o.components()
                    .map(|c| {
                        (
                            c.role.to_string(),
                            c.element.name().to_owned(),
                            c.bytes().unwrap().into_owned(),
                        )
                    })
                    .collect()
            };
            let f32s = matches!(
                o.format,
                Format::SparseCsr | Format::SparseCoo | Format::QuantizedGroup
            )
            .then(|| o.read_f32().unwrap().iter().map(|x| x.to_bits()).collect());
            (
                o.name.clone(),
                o.shape.to_vec(),
                o.format.name().to_owned(),
                comps,
                f32s,
            )
        })
        .collect()
}

fn legacy_inputs() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = [
        "valid/v01_dtypes.zt",
        "valid/v01_big_endian.zt",
        "valid/v01_zstd.zt",
        "valid/v01_sparse.zt",
        "valid/v11_types.zt",
    ]
    .iter()
    .chain(
        [
            "interop/v014.zt",
            "interop/v014_empty.zt",
            "interop/v111.zt",
            "interop/v111_rust.zt",
            "interop/v100_pypi-1.0.1.zt",
            "interop/v100_dtypes.zt",
            "interop/v100_coo.zt",
        ]
        .iter(),
    )
    .map(|p| fixtures().join(p))
    .collect();
    v.push(fixtures().join("interop/v014_rust.zt"));
    v
}

#[test]
fn upgrade_is_lossless_for_every_legacy_file() {
    let dir = tempfile::tempdir().unwrap();
    for input in legacy_inputs() {
        let out = dir.path().join(input.file_name().unwrap());
        let skip = input.ends_with("v014_rust.zt");
        let report = ztensor::upgrade(
            &input,
            &out,
            ConvertOptions {
                skip_unreadable: skip,
                version: ztensor::Version::V1_2,
                ..Default::default()
            },
        )
        .unwrap();
        let old = ztensor::open(&input).unwrap();
        let new = ztensor::open(&out).unwrap();
        assert!(
            matches!(new.version(), FileVersion::ZTensor(v) if v.minor == 2),
            "{input:?}"
        );
        assert_eq!(new.attributes(), old.attributes(), "{input:?}");
        for o in new.objects() {
            let before = old.object(&o.name).unwrap();
            assert_eq!(o.attributes, before.attributes, "{input:?}/{}", o.name);
            assert!(o.legacy_packing.is_none() && o.defect.is_none());
        }
        let mut old_arrays = arrays(&old);
        let new_arrays = arrays(&new);
        // Legacy sparse entries: compare through the f32 view (the blob became components).
        for (a, b) in old_arrays.iter_mut().zip(&new_arrays) {
            if a.3.is_empty() {
                a.3 = b.3.clone();
            }
        }
        assert_eq!(old_arrays, new_arrays, "{input:?}");
        assert!(new.verify().is_ok());
        if skip {
            assert_eq!(report.skipped.len(), 1);
            assert_eq!(report.skipped[0].0, "csr_try");
        }
    }
}

#[test]
fn upgrade_refuses_to_drop_an_unreadable_object_unless_asked() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.zt");
    let e = ztensor::upgrade(
        fixtures().join("interop/v014_rust.zt"),
        &out,
        ConvertOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.object(), Some("csr_try"));
    assert_eq!(e.kind(), ErrorKind::InvalidFile);
    assert_eq!(
        e.path(),
        Some(fixtures().join("interop/v014_rust.zt").as_path())
    );
    assert!(!out.exists(), "no partial output");
    // Written as shards, the damage is still the input's: no shard is named.
    let options = ztensor::convert::ShardOptions {
        max_shard_size: 64,
        convert: ConvertOptions::default(),
        densify: false,
    };
    let r = ztensor::open(fixtures().join("interop/v014_rust.zt")).unwrap();
    let e = ztensor::convert::write_sharded(&r, dir.path().join("s.zt"), options).unwrap_err();
    assert_eq!((e.object(), e.path()), (Some("csr_try"), None), "{e}");
}

#[test]
fn upgrade_keeps_or_changes_compression_and_digests_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixtures().join("valid/v01_zstd.zt");
    let out = dir.path().join("a.zt");
    let v1_2 = ConvertOptions {
        version: ztensor::Version::V1_2,
        ..Default::default()
    };
    ztensor::upgrade(&input, &out, v1_2).unwrap();
    let r = ztensor::open(&out).unwrap();
    let c = r.object("zstd_f32").unwrap().component("data").unwrap();
    assert_eq!(c.encoding, ztensor::Encoding::Zstd, "compression kept");
    assert_eq!(c.uncompressed_length, Some(400));
    assert_eq!(
        c.digest.unwrap().algorithm(),
        ztensor::DigestAlgorithm::Crc32c,
        "digest kept, recomputed"
    );
    let opts = ConvertOptions {
        compression: Keep::Never,
        digest: Keep::Always(ztensor::DigestAlgorithm::Sha256),
        ..v1_2
    };
    ztensor::upgrade(&input, &out, opts).unwrap();
    let r = ztensor::open(&out).unwrap();
    let c = r.object("zstd_f32").unwrap().component("data").unwrap();
    assert_eq!(
        (c.encoding.clone(), c.digest.unwrap().algorithm()),
        (ztensor::Encoding::Raw, ztensor::DigestAlgorithm::Sha256)
    );
    assert!(r.verify().is_ok());
}
