//! Sparse, quantized, FP8 and complex objects: round trips through our writer and reader, and
//! property tests over random inputs.

use half::f16;
use proptest::prelude::*;
use ztensor::fp8::{F8E4M3Fnuz, F8E5M2};
use ztensor::{
    Complex, DType, DigestAlgorithm, ErrorKind, OpenOptions, QuantParams, ReadOptions, WriteOptions,
};

fn options() -> Vec<WriteOptions> {
    let mut v = Vec::new();
    for compression in [None, Some(3)] {
        for digest in [
            None,
            Some(DigestAlgorithm::Crc32c),
            Some(DigestAlgorithm::Sha256),
        ] {
            v.push(WriteOptions {
                compression,
                digest,
            });
        }
    }
    v
}

#[test]
fn every_format_round_trips_with_every_option() {
    for opts in options() {
        let mut w = ztensor::Writer::new_version(Vec::new(), ztensor::Version::V1_2).unwrap();
        w.set_options(opts);
        w.add_csr(
            "csr",
            [3, 4],
            &[1.0f64, 2.0, 3.0],
            &[0, 2, 3],
            &[0, 1, 1, 3],
        )
        .unwrap();
        w.add_coo(
            "coo",
            &[2, 3, 4],
            &[f16::from_f32(5.0), f16::from_f32(6.0)],
            &[0, 1, 2, 0, 3, 1],
        )
        .unwrap();
        let p = QuantParams::new(2, 3, DType::U8).unwrap();
        let packed = p.pack(&[0, 1, 2, 3, 3, 2, 1]).unwrap();
        w.add_quantized(
            "q",
            &[7],
            p,
            &packed,
            &[1.0f32, 2.0, 0.5],
            &[1.0f32, 0.0, 2.0],
        )
        .unwrap();
        w.add(
            "fp8",
            &[2],
            &[F8E5M2::from_f32(1.5), F8E5M2::from_f32(-0.25)],
        )
        .unwrap();
        w.add("fnuz", &[1], &[F8E4M3Fnuz::from_f32(2.0)]).unwrap();
        w.add(
            "c128",
            &[2, 1],
            &[
                Complex {
                    re: 1.0f64,
                    im: 2.0,
                },
                Complex {
                    re: -0.5,
                    im: 1e-300,
                },
            ],
        )
        .unwrap();
        let bytes = w.finish().unwrap();
        let r = OpenOptions::new().open_bytes(bytes.clone()).unwrap();
        assert!(r.verify().is_ok());

        // Dequantized values count against the decompression cap, as GGUF's do: 7 f32 are
        // 28 bytes.
        let capped = OpenOptions::new()
            .max_decompressed_len(27)
            .open_bytes(bytes)
            .unwrap();
        let e = capped.object("q").unwrap().read_f32().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{e}");
        assert!(
            e.to_string()
                .contains("dequantizing 7 elements takes 28 bytes"),
            "{e}"
        );

        let csr = r.object("csr").unwrap().read_csr::<f64>().unwrap();
        assert_eq!(
            (&csr.values[..], &csr.indices[..], &csr.indptr[..]),
            (&[1.0, 2.0, 3.0][..], &[0, 2, 3][..], &[0, 1, 1, 3][..])
        );
        let d = r.object("csr").unwrap().to_dense::<f64>().unwrap();
        assert_eq!(
            &d[..],
            &[1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 3.0]
        );
        let coo = r.object("coo").unwrap().read_coo::<f16>().unwrap();
        assert_eq!(&coo.coords[..], &[0, 1, 2, 0, 3, 1]);
        let d = r.object("coo").unwrap().read_f32().unwrap();
        // 5.0 at (0, 2, 3) and 6.0 at (1, 0, 1) in shape [2, 3, 4].
        assert_eq!((d[2 * 4 + 3], d[12 + 1]), (5.0, 6.0));
        assert_eq!(d.iter().sum::<f32>(), 11.0);
        // Groups of 3: codes [0,1,2 | 3,3,2 | 1], (code - zero) * scale per group.
        assert_eq!(
            r.object("q").unwrap().read_f32().unwrap(),
            [-1.0, 0.0, 1.0, 6.0, 6.0, 4.0, -0.5]
        );
        assert_eq!(r.object("fp8").unwrap().read_f32().unwrap(), [1.5, -0.25]);
        assert_eq!(r.object("fnuz").unwrap().read_f32().unwrap(), [2.0]);
        assert_eq!(
            r.read::<Complex<f64>>("c128").unwrap()[1],
            Complex {
                re: -0.5,
                im: 1e-300
            }
        );
        assert_eq!(
            r.object("c128").unwrap().read_f32().unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
        assert_eq!(
            r.read::<f64>("c128").unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
        assert_eq!(
            r.object("c128")
                .unwrap()
                .component("data")
                .unwrap()
                .read_storage::<f64>(ReadOptions::default())
                .unwrap()
                .len(),
            4
        );
    }
}

#[test]
fn writers_refuse_inconsistent_sparse_data() {
    let mut w = ztensor::Writer::new_version(Vec::new(), ztensor::Version::V1_2).unwrap();
    let e = w
        .add_csr("a", [2, 2], &[1.0f32], &[2], &[0, 1, 1])
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.message().contains("column index 2"), "{e}");
    let e = w.add_coo("b", &[2], &[1.0f32], &[0, 1]).unwrap_err();
    assert!(e.message().contains("expected ndim x nnz"), "{e}");
    let p = QuantParams::new(4, 4, DType::I32).unwrap();
    let e = w
        .add_quantized("q", &[8], p, &[0u8; 4], &[1.0f32], &[0.0f32])
        .unwrap_err();
    assert!(e.to_string().contains("groups of 4 need 2"), "{e}");
}

/// A random CSR matrix: shape, values, column indices and row pointers.
fn csr_strategy() -> impl Strategy<Value = ([u64; 2], Vec<f32>, Vec<u64>, Vec<u64>)> {
    (1u64..20, 1u64..20).prop_flat_map(|(rows, cols)| {
        proptest::collection::vec(
            proptest::collection::btree_set(0..cols, 0..=cols as usize),
            rows as usize,
        )
        .prop_flat_map(move |row_sets| {
            let indices: Vec<u64> = row_sets.iter().flatten().copied().collect();
            let mut indptr = vec![0u64];
            for s in &row_sets {
                indptr.push(indptr.last().unwrap() + s.len() as u64);
            }
            let n = indices.len();
            (
                Just([rows, cols]),
                proptest::collection::vec(-1e6f32..1e6, n),
                Just(indices),
                Just(indptr),
            )
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_csr_survives(m in csr_strategy(), zstd in any::<bool>()) {
        let (shape, values, indices, indptr) = m;
        let mut w = ztensor::Writer::new_version(Vec::new(), ztensor::Version::V1_2).unwrap();
        w.set_options(WriteOptions { compression: zstd.then_some(1), digest: Some(DigestAlgorithm::Crc32c) });
        w.add_csr("m", shape, &values, &indices, &indptr).unwrap();
        let r = OpenOptions::new().open_bytes(w.finish().unwrap()).unwrap();
        let got = r.object("m").unwrap().read_csr::<f32>().unwrap();
        prop_assert_eq!(&got.values[..], &values[..]);
        prop_assert_eq!(&got.indices[..], &indices[..]);
        prop_assert_eq!(&got.indptr[..], &indptr[..]);
        let dense = r.object("m").unwrap().to_dense::<f32>().unwrap();
        prop_assert_eq!(dense.iter().filter(|&&x| x != 0.0).count(), values.iter().filter(|&&x| x != 0.0).count());
    }

    #[test]
    fn random_coo_survives(
        shape in proptest::collection::vec(1u64..6, 1..4),
        seed in proptest::collection::vec((any::<u64>(), -100i32..100), 0..40),
    ) {
        let nnz = seed.len();
        let mut coords = vec![0u64; shape.len() * nnz];
        for (i, (s, _)) in seed.iter().enumerate() {
            let mut x = *s;
            for (d, &dim) in shape.iter().enumerate() {
                coords[d * nnz + i] = x % dim;
                x /= dim;
            }
        }
        let values: Vec<i32> = seed.iter().map(|(_, v)| *v).collect();
        let mut w = ztensor::Writer::new_version(Vec::new(), ztensor::Version::V1_2).unwrap();
        w.add_coo("t", &shape, &values, &coords).unwrap();
        let r = OpenOptions::new().open_bytes(w.finish().unwrap()).unwrap();
        let got = r.object("t").unwrap().read_coo::<i32>().unwrap();
        prop_assert_eq!(&got.values[..], &values[..]);
        prop_assert_eq!(&got.coords[..], &coords[..]);
        // The dense sum equals the sum of values (duplicates add up).
        let dense = r.object("t").unwrap().to_dense::<i32>().unwrap();
        prop_assert_eq!(dense.iter().map(|&x| i64::from(x)).sum::<i64>(), values.iter().map(|&x| i64::from(x)).sum::<i64>());
    }

    #[test]
    fn random_quantized_survives(
        bits in prop_oneof![Just(2u32), Just(4), Just(8)],
        word in prop_oneof![Just(DType::I32), Just(DType::U8)],
        group_size in 1u64..10,
        count in 0usize..100,
        seed in any::<u64>(),
    ) {
        let p = QuantParams::new(bits, group_size, word).unwrap();
        let codes: Vec<u8> = (0..count).map(|i| ((seed >> (i % 60)) as u8 ^ i as u8) & ((1u16 << bits) - 1) as u8).collect();
        let groups = p.groups(count as u64) as usize;
        let scales: Vec<f32> = (0..groups).map(|g| 0.5 + g as f32).collect();
        let zeros: Vec<f32> = (0..groups).map(|g| (g % 3) as f32).collect();
        let packed = p.pack(&codes).unwrap();
        let mut w = ztensor::Writer::new_version(Vec::new(), ztensor::Version::V1_2).unwrap();
        w.add_quantized("q", &[count as u64], p, &packed, &scales, &zeros).unwrap();
        let r = OpenOptions::new().open_bytes(w.finish().unwrap()).unwrap();
        let q = r.object("q").unwrap().read_quantized().unwrap();
        prop_assert_eq!(&q.packed[..], &packed[..]);
        let want: Vec<f32> = codes.iter().enumerate().map(|(k, &c)| {
            let g = k / group_size as usize;
            (f32::from(c) - zeros[g]) * scales[g]
        }).collect();
        prop_assert_eq!(q.dequantize().unwrap(), want);
    }
}

/// A dense object of one MX element type, its codes given as stored bytes.
fn mx_object(
    logical: ztensor::LogicalType,
    shape: &[u64],
    bytes: &[u8],
) -> ztensor::ObjectData<'static> {
    ztensor::ObjectData {
        shape: shape.to_vec(),
        format: ztensor::Format::Dense,
        attributes: Default::default(),
        components: vec![ztensor::ComponentData {
            role: "data".into(),
            element: ztensor::ElementType {
                dtype: ztensor::DType::U8,
                logical: Some(logical),
            },
            bytes: std::borrow::Cow::Owned(bytes.to_vec()),
        }],
    }
}

#[test]
fn mx_element_types_read_as_f32() {
    use ztensor::LogicalType::{F4E2M1, F6E2M3, F8E8M0};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mx.zt");
    let mut w =
        ztensor::Writer::create_version(&path, ztensor::Version::V1_2, ztensor::Durability::Synced)
            .unwrap();
    // FP4, two per byte, low nibble first: 0.5 (0x1), -6 (0xF), 1.0 (0x2) and an unused nibble.
    w.add_object("fp4", mx_object(F4E2M1, &[3], &[0xF1, 0x02]))
        .unwrap();
    // E8M0 scales: 2^(code - 127).
    w.add_object("scales", mx_object(F8E8M0, &[3], &[127, 128, 0xFF]))
        .unwrap();
    // Four FP6 codes take three bytes.
    w.add_object("fp6", mx_object(F6E2M3, &[4], &[0, 0, 0]))
        .unwrap();
    w.finish().unwrap();
    let r = ztensor::open(&path).unwrap();
    assert_eq!(
        r.object("fp4").unwrap().read_f32().unwrap(),
        [0.5, -6.0, 1.0]
    );
    let scales = r.object("scales").unwrap().read_f32().unwrap();
    assert_eq!(&scales[..2], &[1.0, 2.0]);
    assert!(scales[2].is_nan());
    assert_eq!(r.object("fp6").unwrap().read_f32().unwrap(), [0.0; 4]);
}

/// Every logical type stored on `u8` reads back as itself from both zTensor versions we
/// write: v2 writes the ones its registry lacks by our names, and our reader must know them
/// again (NF4 came back as an unknown type, its values lost to raw bytes).
#[test]
fn every_u8_logical_type_survives_both_versions() {
    use ztensor::LogicalType::*;
    let types = [
        F8E4M3Fn, F8E5M2, F8E4M3Fnuz, F8E5M2Fnuz, F8E8M0, F4E2M1, F6E2M3, F6E3M2, I4, U4, I2, U2,
        Nf4,
    ];
    let dir = tempfile::tempdir().unwrap();
    for version in [ztensor::Version::V2, ztensor::Version::V1_2] {
        let path = dir.path().join(format!("{}.zt", version.name()));
        let mut w =
            ztensor::Writer::create_version(&path, version, ztensor::Durability::Unsynced).unwrap();
        for t in &types {
            let bits = t.packed_bits().unwrap_or(8) as usize;
            let bytes: Vec<u8> = (0..(4 * bits).div_ceil(8)).map(|i| i as u8 + 1).collect();
            w.add_object(t.name(), mx_object(t.clone(), &[4], &bytes))
                .unwrap();
        }
        w.finish().unwrap();
        let r = ztensor::open(&path).unwrap();
        for t in &types {
            let o = r.object(t.name()).unwrap();
            assert_eq!(
                o.components[0].element.logical.as_ref(),
                Some(t),
                "{} in {}",
                t.name(),
                version.name()
            );
            assert_eq!(o.read_f32().unwrap().len(), 4, "{}", t.name());
        }
    }
}

/// A type we do not know is sized by its dtype in v1.2 (the spec's fallback), so bytes that
/// do not fit the shape are refused there, saying so; v2 never judges such a size.
#[test]
fn an_unknown_type_of_another_size_is_refused_by_v1_2_saying_why() {
    let future = ztensor::LogicalType::Unknown("x.future/1".into());
    let dir = tempfile::tempdir().unwrap();
    let path = |v: ztensor::Version| dir.path().join(format!("{}.zt", v.name()));
    let mut w = ztensor::Writer::create_version(
        path(ztensor::Version::V1_2),
        ztensor::Version::V1_2,
        ztensor::Durability::Unsynced,
    )
    .unwrap();
    let e = w
        .add_object("f", mx_object(future.clone(), &[999], &[0; 8]))
        .unwrap_err();
    assert!(
        e.message().ends_with(
            "8 bytes of data, but shape [999] of x.future/1 takes 999 \
             (a type unknown here, sized as its dtype u8)"
        ),
        "{e}"
    );
    let mut w = ztensor::Writer::create_version(
        path(ztensor::Version::V2),
        ztensor::Version::V2,
        ztensor::Durability::Unsynced,
    )
    .unwrap();
    w.add_object("f", mx_object(future, &[999], &[0; 8]))
        .unwrap();
    w.finish().unwrap();
}
