//! Caps that hold for every kind of file, whatever its own parser allows.

/// A `.safetensors` file of one f32 tensor of `rank` dimensions of 1.
fn safetensors_of_rank(rank: usize) -> Vec<u8> {
    let shape = vec!["1"; rank].join(",");
    let header = format!(r#"{{"t":{{"dtype":"F32","shape":[{shape}],"data_offsets":[0,4]}}}}"#);
    let mut b = (header.len() as u64).to_le_bytes().to_vec();
    b.extend(header.as_bytes());
    b.extend([0u8; 4]);
    b
}

#[test]
fn a_rank_over_64_is_refused_for_every_kind() {
    let open = |b: Vec<u8>| ztensor::OpenOptions::new().open_bytes(b);
    assert!(open(safetensors_of_rank(64)).is_ok());
    for rank in [65, 100_000] {
        let e = open(safetensors_of_rank(rank)).unwrap_err();
        assert_eq!(e.kind(), ztensor::ErrorKind::LimitExceeded, "{e}");
        assert_eq!(
            e.message(),
            format!("rank {rank} exceeds the cap of 64 dimensions")
        );
        assert_eq!(e.object(), Some("t"));
    }
}
