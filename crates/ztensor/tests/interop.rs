//! Files written by the original zTensor implementation (shared/interop/zt, copied to
//! fixtures/interop) read back the values their writers stored.

use half::bf16;
use ztensor::{ErrorKind, FileVersion, Format, OpenOptions, Reader};

fn fixture(name: &str) -> String {
    format!(
        "{}/../../fixtures/interop/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// Every sample, opened both mapped and unmapped.
fn open_both(name: &str) -> [Reader; 2] {
    [
        ztensor::open(fixture(name)).unwrap(),
        OpenOptions::new()
            .unmapped(true)
            .open(fixture(name))
            .unwrap(),
    ]
}

fn arange12() -> Vec<f32> {
    (0..12).map(|i| i as f32).collect()
}

fn every_seventh() -> Vec<f32> {
    (0..1000)
        .map(|i| if i % 7 == 0 { 1.5 } else { 0.0 })
        .collect()
}

#[test]
fn v123_all_dense_objects() {
    for r in open_both("v123_all.zt") {
        assert!(matches!(r.version(), FileVersion::ZTensor(v) if v.minor == 2));
        assert_eq!(r.objects().len(), 13);
        for name in ["dense_f32", "crc_f32", "sha_f32"] {
            assert_eq!(
                &r.object(name).unwrap().read_verified::<f32>().unwrap()[..],
                &arange12()[..],
                "{name}"
            );
        }
        assert_eq!(r.object("dense_f32").unwrap().shape[..], [3, 4]);
        assert_eq!(
            &r.read::<f32>("zstd_f32").unwrap()[..],
            &every_seventh()[..]
        );
        assert_eq!(
            &r.object("zstd_sha_i64")
                .unwrap()
                .read_verified::<i64>()
                .unwrap()[..],
            &[0, 1, 2, 3, 4, 5, 6, 7]
        );
        assert_eq!(&r.read::<f64>("scalar_f64").unwrap()[..], &[3.5]);
        assert_eq!(
            &r.read::<bf16>("bf16_t").unwrap()[..],
            &[
                bf16::from_f32(1.0),
                bf16::from_f32(-2.0),
                bf16::from_f32(0.5)
            ]
        );
        assert_eq!(
            &r.object("bool_t").unwrap().read_bool().unwrap()[..],
            &[true, false, true]
        );
        assert_eq!(r.object("csr").unwrap().format, Format::SparseCsr);
        assert_eq!(r.object("qg").unwrap().format, Format::QuantizedGroup);
        assert!(r.verify().is_ok());
        assert_eq!(r.verify().checked, 3);
        // A typed read of the wrong type, or a dense read of a sparse object, is the caller's error.
        assert_eq!(
            r.read::<f64>("dense_f32").unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
        assert_eq!(
            r.read::<f32>("csr").unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
        // A name the file does not have is its own kind.
        assert_eq!(
            r.read::<f32>("nope").unwrap_err().kind(),
            ErrorKind::NotFound
        );
    }
}

/// An object whose own entry is damaged is listed as unreadable, with why, and the others
/// read: the original (ztensor 1.2.3) opens such a file and fails on that object alone.
#[test]
fn a_damaged_object_entry_leaves_the_others_readable() {
    let mut bytes = std::fs::read(fixture("v123_all.zt")).unwrap();
    // `crc_f32`'s digest, "crc32c:0x" and 8 hex digits: one digit made not hex.
    let at = bytes.windows(9).position(|w| w == b"crc32c:0x").unwrap();
    bytes[at + 9] = b'g';
    let r = OpenOptions::new().open_bytes(bytes).unwrap();
    assert_eq!(r.objects().len(), 13);
    let e = r.read::<f32>("crc_f32").err().unwrap();
    assert_eq!(e.kind(), ErrorKind::InvalidFile);
    assert!(
        e.to_string().contains("crc_f32") && e.message().contains("digest"),
        "{e}"
    );
    for name in ["dense_f32", "sha_f32"] {
        assert_eq!(&r.read::<f32>(name).unwrap()[..], &arange12()[..], "{name}");
    }
    let report = r.verify();
    assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
    assert!(report.failures[0].to_string().contains("crc_f32"));
}

/// An unreadable entry is listed as what the file declares (its format, no components, so no
/// type), and every way of reading it gives why, not a complaint about its format or a
/// missing component.
#[test]
fn an_unreadable_entry_is_listed_as_declared_and_says_why() {
    let mut bytes = std::fs::read(fixture("v123_all.zt")).unwrap();
    // `csr`'s part "indptr" renamed: the CSR object lacks one of its parts.
    let at = bytes.windows(6).position(|w| w == b"indptr").unwrap();
    bytes[at + 5] = b's';
    let r = OpenOptions::new().open_bytes(bytes).unwrap();
    let o = r.object("csr").unwrap();
    assert_eq!(o.format, ztensor::Format::SparseCsr);
    assert!(o.components.is_empty() && o.element_type().is_none());
    let why = o
        .readable()
        .map(|_| ())
        .expect_err("csr is unreadable")
        .to_string();
    assert!(why.contains("csr"), "{why}");
    for e in [
        o.read_f32().map(|_| ()).err(),
        o.dense_form().map(|_| ()).err(),
        o.read_sparse().map(|_| ()).err(),
        o.component("values").map(|_| ()).err(),
    ] {
        assert_eq!(e.map(|e| e.to_string()).as_deref(), Some(why.as_str()));
    }
    assert!(r.object("coo").unwrap().readable().is_ok());
    assert_eq!(&r.read::<f32>("dense_f32").unwrap()[..], &arange12()[..]);
    // Writers of dense-only formats refuse it for its defect, densify or not: "use densify"
    // would send the user after an option that cannot help.
    use ztensor::convert::{write_gguf_views, write_mag_views, write_safetensors_views};
    let dir = tempfile::tempdir().unwrap();
    let csr = [o];
    let (attrs, unsynced) = (r.attributes(), ztensor::Durability::Unsynced);
    for densify in [false, true] {
        let out = dir.path().join("out");
        let mag = ztensor::MagOptions {
            version: ztensor::mag::WriteVersion::V1,
            densify,
            durability: unsynced,
        };
        for e in [
            write_safetensors_views(&csr, Some(attrs), &out, densify, unsynced).err(),
            write_gguf_views(&csr, attrs, &out, densify, unsynced).err(),
            write_mag_views(&csr, attrs, &out, mag).err(),
        ] {
            let e = e.map(|e| e.to_string()).unwrap_or_default();
            assert!(e.contains(&why), "{e} (densify {densify})");
        }
        assert!(!out.exists());
    }
}

/// The same for v0.1: the original (0.1.4) opens a file with one damaged entry and fails on
/// that entry alone.
#[test]
fn a_damaged_v0_1_entry_leaves_the_others_readable() {
    let mut bytes = std::fs::read(fixture("v014.zt")).unwrap();
    // `i64`'s dtype, "int64", made a name no version has.
    let at = bytes.windows(5).position(|w| w == b"int64").unwrap();
    bytes[at + 2] = b'x';
    let r = OpenOptions::new().open_bytes(bytes).unwrap();
    let e = r.read::<i64>("i64").err().unwrap();
    assert!(e.to_string().contains("unknown dtype \"inx64\""), "{e}");
    assert_eq!(&r.read::<f32>("dense_f32").unwrap()[..], &arange12()[..]);
    assert_eq!(&r.read::<f32>("scalar").unwrap()[..], &[2.5]);
    let report = r.verify();
    assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
}

#[test]
fn v123_rust_and_savefile() {
    for r in open_both("v123_rust.zt") {
        assert_eq!(r.attributes()["framework"].as_str(), Some("PyTorch"));
        assert_eq!(r.attributes()["n"].as_i64(), Some(3));
        assert_eq!(r.object("scalar").unwrap().shape[..], [0u64; 0]);
        assert_eq!(&r.read::<f32>("scalar").unwrap()[..], &[2.5]);
        assert_eq!(
            &r.object("w").unwrap().read_verified::<f32>().unwrap()[..],
            &[1.0, 2.0, 3.0, 4.0]
        );
        assert_eq!(&r.read::<u8>("appended").unwrap()[..], &[7, 8, 9]);
    }
    for r in open_both("v123_savefile.zt") {
        assert_eq!(&r.read::<f32>("a").unwrap()[..], &arange12()[..]);
        assert_eq!(&r.read::<f32>("b").unwrap()[..], &every_seventh()[..]);
    }
}

#[test]
fn v111_dense_objects() {
    for r in open_both("v111.zt") {
        assert!(matches!(r.version(), FileVersion::ZTensor(v) if v.minor == 1));
        assert_eq!(&r.read::<f32>("dense_f32").unwrap()[..], &arange12()[..]);
        assert_eq!(
            &r.read::<f32>("zstd_f32").unwrap()[..],
            &every_seventh()[..],
            "v1.1 zstd: size from the shape"
        );
        assert_eq!(
            &r.read::<i64>("zstd9_i64").unwrap()[..],
            &[0, 1, 2, 3, 4, 5, 6, 7]
        );
        assert_eq!(&r.read::<f32>("scalar").unwrap()[..], &[2.5]);
        assert_eq!(r.read::<bf16>("bf16").unwrap().len(), 3);
    }
    for r in open_both("v111_rust.zt") {
        assert_eq!(r.attributes()["license"].as_str(), Some("Apache-2.0"));
        assert_eq!(
            &r.object("crc_f32").unwrap().read_verified::<f32>().unwrap()[..],
            &arange12()[..]
        );
        assert_eq!(
            &r.object("sha_zstd_f32")
                .unwrap()
                .read_verified::<f32>()
                .unwrap()[..],
            &arange12()[..]
        );
        assert_eq!(&r.read::<f32>("scalar").unwrap()[..], &[2.5]);
        assert!(r.verify().is_ok());
        assert_eq!(r.verify().checked, 5);
    }
}

/// zTensor v1.0 as PyPI ztensor 1.0.0/1.0.1 wrote it (tools/interop/make_v100.py). The values are
/// what that script decodes from the files, independently of the 1.0.x reader (which returns
/// freed memory), and what its writer was given.
#[test]
fn v100_samples() {
    let v1_0 =
        |r: &Reader| matches!(r.version(), FileVersion::ZTensor(v) if v.major == 1 && v.minor == 0);
    for r in open_both("v100_pypi-1.0.1.zt") {
        assert!(v1_0(&r));
        assert_eq!(r.version().to_string(), "zTensor 1.0.0");
        assert_eq!(r.objects().len(), 4);
        assert!(r.attributes().is_empty(), "the generator is no attribute");
        let dense = r.object("dense").unwrap();
        assert_eq!(dense.shape[..], [2, 3]);
        assert_eq!(
            &r.read::<f32>("dense").unwrap()[..],
            &[0., 1., 2., 3., 4., 5.]
        );
        assert_eq!(&r.read::<f32>("zeros").unwrap()[..], &[0.0; 8]);
        assert_eq!(
            &r.object("mask").unwrap().read_bool().unwrap()[..],
            &[true, false, true]
        );
        let csr = r.object("csr").unwrap();
        assert_eq!(csr.format, Format::SparseCsr);
        assert_eq!(csr.shape[..], [2, 3]);
        let part = |role: &str| csr.component(role).unwrap().bytes().unwrap().into_owned();
        assert_eq!(part("values"), bytes_of(&[1f32, 2., 3.]));
        assert_eq!(part("indices"), bytes_of(&[0u64, 2, 1]));
        assert_eq!(part("indptr"), bytes_of(&[0u64, 2, 3]));
        assert!(r.verify().is_ok());
    }
    for r in open_both("v100_dtypes.zt") {
        assert!(v1_0(&r));
        assert_eq!(r.objects().len(), 13);
        assert_eq!(&r.read::<f64>("f64").unwrap()[..], &[1.5, -2.25]);
        assert_eq!(
            &r.read::<half::f16>("f16").unwrap()[..],
            &[0.5, -1.0, 2.0].map(half::f16::from_f32)
        );
        assert_eq!(
            &r.read::<bf16>("bf16").unwrap()[..],
            &[1.0, -2.0, 0.5].map(bf16::from_f32)
        );
        assert_eq!(&r.read::<i64>("i64").unwrap()[..], &[-1, 1 << 40]);
        assert_eq!(r.object("i32").unwrap().shape[..], [2, 2]);
        assert_eq!(&r.read::<i32>("i32").unwrap()[..], &[-3, 4, 5, -6]);
        assert_eq!(&r.read::<i16>("i16").unwrap()[..], &[-7, 8]);
        assert_eq!(&r.read::<i8>("i8").unwrap()[..], &[-9, 10, 11]);
        assert_eq!(&r.read::<u64>("u64").unwrap()[..], &[(1 << 63) + 1]);
        assert_eq!(&r.read::<u32>("u32").unwrap()[..], &[4_000_000_000]);
        assert_eq!(&r.read::<u16>("u16").unwrap()[..], &[65535, 1]);
        assert_eq!(&r.read::<u8>("u8").unwrap()[..], &[0, 255, 7]);
        let thirds: Vec<i32> = (0..100).map(|i| i % 3).collect();
        assert_eq!(
            &r.read::<i32>("zstd_i32").unwrap()[..],
            &thirds[..],
            "zstd without an uncompressed size: the size comes from the shape"
        );
        let alternating: Vec<bool> = (0..40).map(|i| i % 2 == 0).collect();
        assert_eq!(
            &r.object("zstd_bool").unwrap().read_bool().unwrap()[..],
            &alternating[..]
        );
        assert!(r.verify().is_ok());
    }
    for r in open_both("v100_coo.zt") {
        assert!(v1_0(&r));
        let coo = r.object("coo").unwrap();
        assert_eq!(coo.format, Format::SparseCoo);
        assert_eq!(coo.shape[..], [3, 4]);
        let coords = coo
            .component("coords")
            .unwrap()
            .bytes()
            .unwrap()
            .into_owned();
        assert_eq!(
            coords,
            bytes_of(&[0u64, 1, 2, 3, 0, 1]),
            "(ndim, nnz), row-major"
        );
        let values = coo
            .component("values")
            .unwrap()
            .bytes()
            .unwrap()
            .into_owned();
        assert_eq!(values, bytes_of(&[7i32, 8, 9]));
        let csr = r.object("csr_f64").unwrap();
        assert_eq!(csr.format, Format::SparseCsr);
        let values = csr
            .component("values")
            .unwrap()
            .bytes()
            .unwrap()
            .into_owned();
        assert_eq!(values, bytes_of(&[0.5f64, 1.5]));
        // The 1.0 writer gave a 0-d array the shape [1].
        assert_eq!(r.object("scalar").unwrap().shape[..], [1]);
        assert_eq!(&r.read::<f32>("scalar").unwrap()[..], &[2.5]);
        assert_eq!(r.object("empty").unwrap().shape[..], [0, 3]);
        assert!(r.read::<f32>("empty").unwrap().is_empty());
        assert!(r.verify().is_ok());
    }
}

/// Little-endian bytes of plain numbers.
fn bytes_of<T: Copy + ToLeBytes>(v: &[T]) -> Vec<u8> {
    v.iter().flat_map(|x| x.le()).collect()
}

trait ToLeBytes {
    fn le(self) -> Vec<u8>;
}

macro_rules! to_le_bytes {
    ($($t:ty),*) => {$(impl ToLeBytes for $t {
        fn le(self) -> Vec<u8> {
            self.to_le_bytes().to_vec()
        }
    })*};
}
to_le_bytes!(f32, f64, i32, u64);

#[test]
fn v014_samples() {
    for r in open_both("v014.zt") {
        assert_eq!(r.version(), &FileVersion::ZTensorV0_1);
        assert_eq!(&r.read::<f32>("dense_f32").unwrap()[..], &arange12()[..]);
        assert_eq!(&r.read::<i64>("i64").unwrap()[..], &[0, 1, 2, 3, 4]);
        assert_eq!(r.read::<bf16>("bf16").unwrap()[1], bf16::from_f32(-2.0));
        assert_eq!(
            &r.object("bool").unwrap().read_bool().unwrap()[..],
            &[true, false]
        );
        assert_eq!(&r.read::<f32>("scalar").unwrap()[..], &[2.5]);
    }
    for r in open_both("v014_empty.zt") {
        assert_eq!(r.objects().len(), 0);
    }
    for r in open_both("v014_rust.zt") {
        // Big-endian data comes back as its values, byte-swapped, never zero-copy.
        let be = r.object("be_f32").unwrap().read_verified::<f32>().unwrap();
        assert_eq!(&be[..], &arange12()[..]);
        assert!(matches!(be, std::borrow::Cow::Owned(_)));
        assert_eq!(
            &r.object("zstd_crc_f32")
                .unwrap()
                .read_verified::<f32>()
                .unwrap()[..],
            &every_seventh()[..]
        );
        assert_eq!(&r.read::<i32>("scalar_i32").unwrap()[..], &[7]);
        let s = r.object("scalar_i32").unwrap();
        assert_eq!(
            s.attributes["my_key"].as_str(),
            Some("hello"),
            "custom fields become attributes"
        );
        assert_eq!(s.attributes["sparse_format"].as_str(), Some("csr"));
        // csr_try is too small for any reading: listed, and only its decode fails.
        let csr = r.object("csr_try").unwrap();
        assert!(
            csr.defect
                .as_ref()
                .unwrap()
                .message
                .contains("too small for the indptr"),
            "{:?}",
            csr.defect
        );
        let e = r
            .object("csr_try")
            .unwrap()
            .component(ztensor::LEGACY_BLOB_ROLE)
            .unwrap()
            .bytes()
            .unwrap_err();
        assert_eq!(
            e.kind(),
            ErrorKind::InvalidFile,
            "sizes that fit no reading are a bad file"
        );
        assert!(
            e.message()
                .contains("16 bytes is too small for the indptr of 2 rows"),
            "{e}"
        );
        assert_eq!(e.object(), Some("csr_try"));
        assert!(r.object("csr_try").unwrap().read_f32().is_err());
        // Its bytes are as written, but no reading of them exists: verify names it.
        let report = r.verify();
        assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
        assert_eq!(report.failures[0].object(), Some("csr_try"));
    }
}

#[test]
fn v123_all_every_format_and_logical_type() {
    use ztensor::fp8::F8E4M3Fn;
    use ztensor::Complex;
    for r in open_both("v123_all.zt") {
        let csr = r.object("csr").unwrap().read_csr::<f32>().unwrap();
        assert_eq!(csr.shape, [3, 4]);
        let dense = r.object("csr").unwrap().to_dense::<f32>().unwrap();
        let mut want = [0.0f32; 12];
        want[0] = 1.0;
        want[2 * 4 + 2] = 2.0;
        want[2 * 4 + 3] = 3.0;
        assert_eq!(&dense[..], &want[..]);
        assert_eq!(r.object("csr").unwrap().read_f32().unwrap(), want);

        let coo = r.object("coo").unwrap().to_dense::<f32>().unwrap();
        let mut want = [0.0f32; 12];
        want[1] = 5.0;
        want[2 * 4 + 3] = 6.0;
        assert_eq!(&coo[..], &want[..]);

        let fp8: Vec<f32> = r
            .read::<F8E4M3Fn>("fp8")
            .unwrap()
            .iter()
            .map(|x| x.to_f32())
            .collect();
        assert_eq!(fp8, [1.0, 2.0, -1.0, 0.0]);
        assert_eq!(
            r.object("fp8").unwrap().read_f32().unwrap(),
            [1.0, 2.0, -1.0, 0.0]
        );
        assert_eq!(
            r.object("fp8").unwrap().attributes["note"].as_str(),
            Some("fp8 e4m3fn")
        );

        let c = r.read::<Complex<f32>>("complex").unwrap();
        assert_eq!(
            &c[..],
            &[Complex { re: 1.0, im: 2.0 }, Complex { re: 3.0, im: 4.0 }]
        );
        assert_eq!(
            r.object("bf16_t").unwrap().read_f32().unwrap(),
            [1.0, -2.0, 0.5]
        );

        let q = r.object("qg").unwrap().read_quantized().unwrap();
        assert_eq!(
            (q.params.bits, q.params.group_size, q.params.packing()),
            (4, 16, "8_per_i32".into())
        );
        let mut want = vec![0.0, -0.5, -1.0, -1.5, -2.0, -2.5, -3.0, -3.5];
        want.extend([-4.0; 8]);
        assert_eq!(q.dequantize().unwrap(), want);
        assert_eq!(r.object("qg").unwrap().read_f32().unwrap(), want);
    }
}

#[test]
fn v111_sparse_objects_with_zstd_and_no_declared_length() {
    for r in open_both("v111.zt") {
        let d = r.object("csr").unwrap().to_dense::<f32>().unwrap();
        assert_eq!(d.iter().filter(|&&x| x != 0.0).count(), 3);
        let d = r.object("coo").unwrap().to_dense::<f32>().unwrap();
        assert_eq!(d.iter().filter(|&&x| x != 0.0).count(), 2);
    }
    for r in open_both("v111_rust.zt") {
        // Every component zstd-compressed, none with uncompressed_length.
        let csr = r.object("csr").unwrap().read_csr::<f32>().unwrap();
        assert_eq!(csr.shape, [3, 4]);
        assert_eq!(csr.indptr.len(), 4);
    }
}
