//! Files we recognise by their first bytes but do not read get an `Unsupported` error that
//! says what they are, instead of the zTensor container's "bad header magic".

use ztensor::{ErrorKind, OpenOptions};

fn open_err(bytes: &[u8]) -> ztensor::Error {
    match OpenOptions::new().open_bytes(bytes.to_vec()) {
        Ok(_) => panic!("{bytes:?} opened"),
        Err(e) => e,
    }
}

fn unsupported(bytes: &[u8], message: &str) {
    let e = open_err(bytes);
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert_eq!(e.message(), message);
}

/// A zip local file header naming its first entry `name`.
fn zip(name: &str) -> Vec<u8> {
    let mut b = b"PK\x03\x04".to_vec();
    b.extend([0u8; 22]);
    b.extend((name.len() as u16).to_le_bytes());
    b.extend([0u8; 2]);
    b.extend(name.as_bytes());
    b.extend(b"payload");
    b
}

#[test]
fn gguf_is_read_now() {
    // Recognised by its magic before the safetensors test, and read as GGUF: 123 tensors
    // make byte 8 a '{', as a safetensors header would have it, and cannot fit.
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(123u64.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    let e = open_err(&b);
    assert_eq!(e.kind(), ErrorKind::InvalidFile, "{e}");
    assert!(e.message().contains("123 tensors"), "{e}");
    let e = open_err(b"GGUF");
    assert!(e.message().contains("invalid GGUF file: version"), "{e}");
    let mut empty = b"GGUF".to_vec();
    empty.extend(3u32.to_le_bytes());
    empty.extend([0u8; 16]);
    let r = OpenOptions::new().open_bytes(empty).unwrap();
    assert_eq!(r.len(), 0);
}

#[test]
fn ztensor_v2_is_read_now() {
    // Recognised by its magic and read as v2: this one has no footer, and is told so.
    let mut b = b"\x89ZT2\r\n\x1a\n".to_vec();
    b.resize(4096 + 48, 0);
    let e = open_err(&b);
    assert_eq!(e.kind(), ErrorKind::InvalidFile, "{e}");
    assert!(e.message().contains("bad v2 footer magic"), "{e}");
}

#[test]
fn zips() {
    // Checkpoints and .npz archives are read now (PyTorch's told by its first entry, any
    // other zip read as a .npz): these are headers alone, with no central directory.
    for b in [
        zip("archive/data.pkl"),
        zip("model/.data/version"),
        zip("weights.npy"),
        zip("readme.txt"),
        b"PK\x03\x04\x14\x00".to_vec(),
    ] {
        let e = open_err(&b);
        assert_eq!(e.kind(), ErrorKind::InvalidFile, "{e}");
        assert!(
            e.message().contains("no end of central directory record"),
            "{e}"
        );
    }
}

#[test]
fn npy_is_read_now() {
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    let header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n";
    b.extend((header.len() as u16).to_le_bytes());
    b.extend(header);
    b.extend([0u8; 8]);
    let r = OpenOptions::new().open_bytes(b).unwrap();
    assert_eq!(&r.read::<f32>("array").unwrap()[..], &[0.0, 0.0]);
}

#[test]
fn sharded_index() {
    let index = "a sharded checkpoint index (model.safetensors.index.json): open it as a \
                 set (ShardedSet::open in Rust, ztio.open in Python; every zt command takes \
                 one), not as one file";
    let json = br#"{
  "metadata": {"total_size": 16},
  "weight_map": {"a": "model-00001-of-00002.safetensors"}
}"#;
    unsupported(json, index);
    let mut padded = b" \n\t".to_vec();
    padded.extend(json);
    unsupported(&padded, index);
    // Other JSON is not an index: the zTensor error stays.
    let e = open_err(br#"{"metadata": {"total_size": 16}}"#);
    assert!(e.message().contains("magic"), "{e}");
}

#[test]
fn legacy_pickle() {
    // The legacy torch.save magic pickle at any protocol, then junk: read as a legacy
    // checkpoint, which the junk breaks.
    for p in 2u8..=5 {
        let mut b = vec![0x80, p];
        if p >= 4 {
            b.push(0x95);
            b.extend(13u64.to_le_bytes());
        }
        b.extend([
            0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19,
        ]);
        b.extend([b'.'; 20]);
        let e = open_err(&b);
        assert_eq!(e.kind(), ErrorKind::InvalidFile, "{e}");
        assert!(
            e.message().contains("invalid pickle: stack underflow"),
            "{e}"
        );
    }
    // Any other pickle is read for the NumPy arrays it holds, and never run: a call to
    // `os.system` is an opaque leaf.
    let r = OpenOptions::new()
        .open_bytes(b"\x80\x02K\x01.".to_vec())
        .unwrap();
    assert_eq!(r.version(), &ztensor::FileVersion::Pickle { protocol: 2 });
    assert!(r.is_empty());
    assert_eq!(
        r.attributes().get("value"),
        Some(&ztensor::Value::Integer(1))
    );
    let call = b"\x80\x02cos\nsystem\nX\x04\x00\x00\x00exit\x85R.".to_vec();
    let r = OpenOptions::new().open_bytes(call).unwrap();
    let opaque = format!("{:?}", r.attributes().get("value").unwrap());
    assert!(opaque.contains("os.system"), "{opaque}");
}

/// A safetensors file whose header size starts with the bytes of a pickle opcode is still
/// read as safetensors.
#[test]
fn safetensors_that_starts_like_a_pickle() {
    let mut header = br#"{"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}"#.to_vec();
    header.resize(0x280, b' ');
    let mut b = (header.len() as u64).to_le_bytes().to_vec();
    assert_eq!(b[..2], [0x80, 0x02]);
    b.extend(header);
    b.push(7);
    let r = OpenOptions::new().open_bytes(b).unwrap();
    assert_eq!(&r.read::<u8>("t").unwrap()[..], &[7]);
}

#[test]
fn everything_else_keeps_the_magic_error() {
    for bytes in [&b"hello world, not a tensor file"[..], b"", b"\x80"] {
        let e = open_err(bytes);
        assert_ne!(e.kind(), ErrorKind::Unsupported, "{e}");
    }
    let e = open_err(b"hello world, not a tensor file at all, really");
    assert!(e.message().contains("ZTEN1000"), "{e}");
}

/// A file whose first bytes match no kind's signature is read as its name says, when the name
/// says one kind: a damaged ONNX model or safetensors header gets that reader's error (what
/// and where), not the zTensor container's magic error. Other files are told that no kind
/// matched.
#[test]
fn a_file_no_signature_matches_is_read_as_its_name_says() {
    let dir = tempfile::tempdir().unwrap();
    let open = |name: &str, bytes: &[u8]| {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        match ztensor::open(&path) {
            Ok(_) => panic!("{name} opened"),
            Err(e) => e.to_string(),
        }
    };
    // A safetensors header whose first byte is not '{'.
    let mut st = 4u64.to_le_bytes().to_vec();
    st.extend(b"[1] ");
    let e = open("m.safetensors", &st);
    assert!(e.contains("header") && !e.contains("ZTEN"), "{e}");
    // An ONNX model whose first key has wire type 7, which protobuf does not have.
    let onnx = [0x0f, 0x07, 0x3a, 0x00];
    let e = open("m.onnx", &onnx);
    assert!(e.contains("wire type 7") && !e.contains("ZTEN"), "{e}");
    // The same bytes under a name that says nothing.
    for name in ["m.bin", "m"] {
        let e = open(name, &onnx);
        assert!(e.contains("not a kind of file ztensor reads"), "{e}");
        assert!(e.contains("shorter than"), "{e}");
    }
    let e = open("m.dat", b"0123456789abcdef0123456789abcdef0123456789");
    assert!(e.contains("not a kind of file ztensor reads"), "{e}");
    assert!(e.contains("bad header magic"), "{e}");
    // A name that says zTensor keeps the container's own error.
    let e = open("m.zt", b"0123456789abcdef0123456789abcdef0123456789");
    assert!(
        e.contains("bad header magic") && !e.contains("not a kind"),
        "{e}"
    );
}

/// An empty file is called empty whatever its name says, instead of getting the error of the
/// reader its name picks (a header past the end of the file, a magic missing).
#[test]
fn an_empty_file_is_called_empty_under_any_name() {
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "m.safetensors",
        "m.zt",
        "m.gguf",
        "m.npy",
        "m.onnx",
        "m.bin",
        "m",
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, b"").unwrap();
        let Err(e) = ztensor::open(&path) else {
            panic!("an empty {name} opened")
        };
        assert_eq!(e.kind(), ErrorKind::InvalidFile, "{name}: {e}");
        assert!(
            e.message().starts_with("the file is empty (0 bytes)"),
            "{name}: {e}"
        );
    }
    // From memory too.
    let e = open_err(b"");
    assert!(
        e.message().starts_with("the file is empty (0 bytes)"),
        "{e}"
    );
}

/// The data file of a model whose other file lists its tensors is named as such, with the
/// file to open instead; the same bytes elsewhere, or with no model beside them, keep the
/// no-kind error.
#[test]
fn a_model_data_file_names_the_file_to_open() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = [
        0x2bu8, 0xf6, 0x8c, 0x3f, 0xdd, 0x46, 0xad, 0x3e, 1, 2, 3, 4, 5, 6, 7, 8,
    ];
    let err = |name: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let Err(e) = ztensor::open(&path) else {
            panic!("{name} opened")
        };
        e
    };
    let e = err("ckpt-12.data-00000-of-00001");
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(
        e.message()
            .starts_with("a data file of the TensorFlow checkpoint \"ckpt-12\""),
        "{e}"
    );
    assert!(
        e.message().ends_with("open ckpt-12.index, or the prefix"),
        "{e}"
    );

    // A .bin is OpenVINO's only with its .xml beside it.
    let e = err("model.bin");
    assert_eq!(e.kind(), ErrorKind::InvalidFile, "{e}");
    assert!(
        e.message().starts_with("not a kind of file ztensor reads"),
        "{e}"
    );
    std::fs::write(dir.path().join("model.xml"), b"<net/>").unwrap();
    let e = err("model.bin");
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    let xml = dir.path().join("model.xml").display().to_string();
    assert!(
        e.message()
            .starts_with(&format!("the weights of the OpenVINO model {xml} ")),
        "{e}"
    );

    // ONNX external data, under the names exporters give it.
    for tail in [".onnx.data", ".onnx_data"] {
        let e = err(&format!("net{tail}"));
        assert_eq!(e.kind(), ErrorKind::InvalidFile, "{tail}: {e}");
    }
    std::fs::write(dir.path().join("net.onnx"), b"").unwrap();
    let onnx = dir.path().join("net.onnx").display().to_string();
    for tail in [".onnx.data", ".onnx_data"] {
        let e = err(&format!("net{tail}"));
        assert_eq!(e.kind(), ErrorKind::Unsupported, "{tail}: {e}");
        assert!(
            e.message()
                .starts_with(&format!("the external data of the ONNX model {onnx} ")),
            "{tail}: {e}"
        );
    }

    // Names that only look alike keep the no-kind error.
    for name in [
        "x.data-0-of-1",
        ".data-00000-of-00001",
        "x.data-00000-of-0000a",
    ] {
        let e = err(name);
        assert_eq!(e.kind(), ErrorKind::InvalidFile, "{name}: {e}");
    }
}
