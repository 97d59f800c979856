//! Remote reads against real servers on loopback (feature `remote`): nginx for `http://`
//! (its access log counts requests and bytes), moto for `s3://` (a counting proxy in front),
//! and a fault-injecting server of our own. Requests and bytes are behaviour: each operation's
//! count is asserted, never its time.

#![cfg(feature = "remote")]

#[path = "support/servers.rs"]
mod servers;

use std::path::Path;

use servers::{http_put, CountingProxy, Fault, FaultServer, Logged, Moto, Nginx};
use ztensor::remote::object::{HEAD_LEN, TAIL_LEN};
use ztensor::{ErrorKind, OpenOptions, Version, WriteOptions, Writer};

/// A .zt v2 of `count` f32 tensors `t000`.. of `len` elements each (value = tensor * 1000 + i),
/// with digests (v2 always has them).
fn write_zt(path: &Path, count: usize, len: usize, version: Version) {
    let mut w = Writer::create_version(path, version, ztensor::Durability::Unsynced).unwrap();
    for t in 0..count {
        let v: Vec<f32> = (0..len).map(|i| (t * 1000 + i) as f32).collect();
        w.add(&format!("t{t:05}"), &[(len / 8) as u64, 8], &v)
            .unwrap();
    }
    w.finish().unwrap();
}

/// The requests logged after the first `from`.
fn since(nginx: &Nginx, from: usize) -> Vec<Logged> {
    nginx.requests().into_iter().skip(from).collect()
}

/// A folder nginx can serve (its worker reads it).
fn served_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    dir
}

#[test]
fn a_zt_over_http_costs_the_head_the_tail_then_one_request_per_tensor_or_slice() {
    let dir = served_dir();
    // 40 tensors of 64 KiB (v2 packs each on 64 KiB): about 2.6 MiB, larger than head + tail.
    write_zt(&dir.path().join("m.zt"), 40, 16384, Version::V2);
    let Some(nginx) = Nginx::start(dir.path()) else {
        return;
    };
    let url = nginx.url("m.zt");
    let local = ztensor::open(dir.path().join("m.zt")).unwrap();

    let (r, object) = OpenOptions::new().open_url_counted(&url).unwrap();
    let opened = nginx.requests();
    // The head (the kind, and the size), then the tail (footer and manifest).
    assert_eq!(opened.len(), 2, "{opened:?}");
    assert_eq!(opened[0].range, format!("bytes=0-{}", HEAD_LEN - 1));
    assert!(opened[1].range.starts_with("bytes="), "{opened:?}");
    assert_eq!(opened[1].body_bytes, TAIL_LEN);
    assert!(opened.iter().all(|l| l.status == 206));
    assert_eq!(object.stats().requests, 2);

    // One tensor: one request of exactly its bytes, digest checked.
    let t = r.object("t00007").unwrap();
    assert_eq!(
        t.read_verified::<f32>().unwrap(),
        local.read::<f32>("t00007").unwrap()
    );
    let read = since(&nginx, 2);
    assert_eq!(read.len(), 1, "{read:?}");
    assert_eq!(read[0].body_bytes, 65536);

    // Rows 256..512 of another: one request of exactly those rows.
    let rows = r
        .object("t00009")
        .unwrap()
        .slice_bytes(&[256..512, 0..8])
        .unwrap();
    let want = local
        .object("t00009")
        .unwrap()
        .slice_bytes(&[256..512, 0..8])
        .unwrap();
    assert_eq!(rows, want);
    let read = since(&nginx, 3);
    assert_eq!(read.len(), 1, "{read:?}");
    assert_eq!(read[0].body_bytes, 256 * 8 * 4);
    let c = local.objects()[9].components[0].offset;
    assert_eq!(
        read[0].range,
        format!("bytes={}-{}", c + 256 * 32, c + 512 * 32 - 1)
    );

    // Everything, digests included: the tensors between head and tail are fetched ahead as
    // one request (they lie within 16 MiB of each other), plus at most the part of one
    // before the cached tail.
    let report = r.verify();
    assert!(report.is_ok(), "{:?}", report.failures);
    let all = since(&nginx, 4);
    assert!(all.len() <= 2, "{all:?}");
    let size = std::fs::metadata(dir.path().join("m.zt")).unwrap().len();
    let moved: u64 = all.iter().map(|l| l.body_bytes).sum();
    assert!(moved <= size - TAIL_LEN - HEAD_LEN + 65536, "{all:?}");
    assert!(all.iter().all(|l| l.status == 206), "{all:?}");
    for o in &local {
        assert_eq!(
            r.object(o.name()).unwrap().bytes().unwrap(),
            o.bytes().unwrap()
        );
    }
}

#[test]
fn a_slice_of_a_compressed_tensor_over_http_fetches_the_seek_table_and_its_frames() {
    let dir = served_dir();
    // 4096 rows of 1024 u16 (2 KiB a row), zstd: eight frames of 1 MiB decoded, 512 rows
    // each, of bytes that compress to about three quarters.
    let shape = [4096u64, 1024];
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let values: Vec<u16> = (0..4096 * 1024)
        .map(|_| {
            // xorshift64: no pattern zstd finds, 12 bits of it, so the bytes shrink only a
            // quarter and the part is far larger than the tail an open reads.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 52) as u16
        })
        .collect();
    let path = dir.path().join("z.zt");
    let mut w = Writer::create_version(&path, Version::V2, ztensor::Durability::Unsynced).unwrap();
    let opts = WriteOptions {
        compression: Some(1),
        digest: None,
    };
    w.add_with("t", &shape, &values, Default::default(), opts)
        .unwrap();
    // 2 MiB raw after it, so that the part's end is not in the file's tail that an open
    // reads (and keeps).
    w.add("u", &[1 << 19], &vec![0.5f32; 1 << 19]).unwrap();
    w.finish().unwrap();
    let Some(nginx) = Nginx::start(dir.path()) else {
        return;
    };
    let local = ztensor::open(&path).unwrap();
    let part = local.object("t").unwrap().info().components[0].clone();
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(part.offset + part.length + TAIL_LEN < size, "{part:?}");
    assert!(matches!(
        part.encoding,
        ztensor::formats::Encoding::ZstdSeekable
    ));
    let stored = local.object("t").unwrap().component("data").unwrap();
    let stored = stored.stored_bytes().unwrap();
    let frames = ztensor::formats::seekable::parse_seek_table(&stored, 8 << 20).unwrap();
    assert_eq!(frames.len(), 8);

    let r = ztensor::open_url(&nginx.url("z.zt")).unwrap();
    let opened = nginx.requests().len();
    // Rows 1030..1040 lie in frame 2: the part's last 16 KiB (the seek table), then frame
    // 2's stored bytes, where the whole part is about 7 MB.
    let rows = r
        .object("t")
        .unwrap()
        .slice_bytes(&[1030..1040, 0..1024])
        .unwrap();
    let want: &[u8] = bytemuck::cast_slice(&values[1030 * 1024..1040 * 1024]);
    assert_eq!(&rows[..], want);
    let read = since(&nginx, opened);
    assert_eq!(read.len(), 2, "{read:?}");
    assert_eq!(read[0].body_bytes, 16 << 10, "{read:?}");
    let end = part.offset + part.length;
    assert_eq!(
        read[0].range,
        format!("bytes={}-{}", end - (16 << 10), end - 1)
    );
    let f = frames[2];
    assert_eq!(
        read[1].range,
        format!(
            "bytes={}-{}",
            part.offset + f.offset,
            part.offset + f.offset + f.compressed - 1
        )
    );
    assert!(part.length > 4 * f.compressed, "{part:?}");

    // Rows 500..530 cross from frame 0 into frame 1: the table, then the two frames in one
    // request.
    let r = ztensor::open_url(&nginx.url("z.zt")).unwrap();
    let opened = nginx.requests().len();
    let rows = r
        .object("t")
        .unwrap()
        .slice_bytes(&[500..530, 0..1024])
        .unwrap();
    let want: &[u8] = bytemuck::cast_slice(&values[500 * 1024..530 * 1024]);
    assert_eq!(&rows[..], want);
    let read = since(&nginx, opened);
    assert_eq!(read.len(), 2, "{read:?}");
    assert_eq!(
        read[1].body_bytes,
        frames[0].compressed + frames[1].compressed,
        "{read:?}"
    );
}

#[test]
fn small_tensors_read_in_order_or_verified_come_in_a_few_grouped_requests() {
    let dir = served_dir();
    // 3,000 tensors of 1 KiB with SHA-256 digests, back to back (v1.2 packs on 64 bytes):
    // about 3 MiB.
    let mut w = Writer::create_version(
        dir.path().join("small.zt"),
        Version::V1_2,
        ztensor::Durability::Unsynced,
    )
    .unwrap();
    w.set_options(WriteOptions {
        compression: None,
        digest: Some(ztensor::DigestAlgorithm::Sha256),
    });
    for t in 0..3000 {
        let v: Vec<f32> = (0..256).map(|i| (t * 1000 + i) as f32).collect();
        w.add(&format!("t{t:05}"), &[32, 8], &v).unwrap();
    }
    w.finish().unwrap();
    let Some(nginx) = Nginx::start(dir.path()) else {
        return;
    };
    let local = ztensor::open(dir.path().join("small.zt")).unwrap();
    let size = std::fs::metadata(dir.path().join("small.zt"))
        .unwrap()
        .len();
    assert!(size > HEAD_LEN + TAIL_LEN + (1 << 20));

    // The plain loop, in name order: the first read alone, then the rest fetched ahead in
    // windows of grouped requests; one request per tensor would be about 2,000.
    let r = ztensor::open_url(&nginx.url("small.zt")).unwrap();
    let opened = nginx.requests().len();
    for name in local.names() {
        assert_eq!(
            r.read::<f32>(name).unwrap(),
            local.read::<f32>(name).unwrap()
        );
    }
    let read = since(&nginx, opened);
    assert!(
        read.len() <= 2,
        "{} requests: {:?}",
        read.len(),
        &read[..read.len().min(8)]
    );
    let moved: u64 = read.iter().map(|l| l.body_bytes).sum();
    assert!(moved <= size, "{moved} bytes for a {size}-byte file");

    // verify: every tensor's digest, the same grouped fetches in file order.
    let r = ztensor::open_url(&nginx.url("small.zt")).unwrap();
    let from = nginx.requests().len();
    let report = r.verify();
    assert!(report.is_ok(), "{:?}", report.failures);
    assert_eq!(report.checked, 3000);
    let verified = since(&nginx, from);
    assert!(
        verified.len() <= 2,
        "{} requests: {:?}",
        verified.len(),
        &verified[..verified.len().min(8)]
    );
}

#[test]
fn a_block_of_columns_is_one_request_when_its_rows_lie_close() {
    let dir = served_dir();
    write_zt(&dir.path().join("m.zt"), 40, 16384, Version::V2);
    let Some(nginx) = Nginx::start(dir.path()) else {
        return;
    };
    let local = ztensor::open(dir.path().join("m.zt")).unwrap();
    let r = ztensor::open_url(&nginx.url("m.zt")).unwrap();
    let opened = nginx.requests().len();
    // Columns 2..4 of all 2,048 rows of 8 f32: 2,048 runs of 8 bytes, 24 bytes apart.
    let block = r
        .object("t00009")
        .unwrap()
        .slice_bytes(&[0..2048, 2..4])
        .unwrap();
    let want = local
        .object("t00009")
        .unwrap()
        .slice_bytes(&[0..2048, 2..4])
        .unwrap();
    assert_eq!(block, want);
    let read = since(&nginx, opened);
    assert_eq!(read.len(), 1, "{read:?}");
    let c = local.objects()[9].components[0].offset;
    assert_eq!(
        read[0].range,
        format!("bytes={}-{}", c + 8, c + 2047 * 32 + 16 - 1)
    );
}

#[test]
fn requests_in_flight_stay_within_the_bound() {
    // One tensor of 8 rows of 1.2 MB: a block of columns is 8 runs too far apart to group.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wide.zt");
    let mut w =
        Writer::create_version(&path, Version::V1_2, ztensor::Durability::Unsynced).unwrap();
    let v: Vec<f32> = (0..8 * 300_000).map(|i| i as f32).collect();
    w.add("wide", &[8, 300_000], &v).unwrap();
    w.finish().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let local = ztensor::open(&path).unwrap();
    let want = local
        .object("wide")
        .unwrap()
        .slice_bytes(&[0..8, 0..4])
        .unwrap()
        .into_owned();
    for bound in [1usize, 3] {
        // Every answer pauses, so requests made at once overlap at the server.
        let server = FaultServer::start(bytes.clone(), |_| Fault::Slow);
        let r = OpenOptions::new()
            .requests_in_flight(bound)
            .open_url(&server.url())
            .unwrap();
        let opened = server.gets.load(std::sync::atomic::Ordering::SeqCst);
        server.peak.store(0, std::sync::atomic::Ordering::SeqCst);
        let got = r
            .object("wide")
            .unwrap()
            .slice_bytes(&[0..8, 0..4])
            .unwrap();
        assert_eq!(&got[..], &want[..]);
        let gets = server.gets.load(std::sync::atomic::Ordering::SeqCst) - opened;
        // Row 0 lies in the cached head; the other 7 are a request each.
        assert_eq!(gets, 7, "bound {bound}");
        let peak = server.peak.load(std::sync::atomic::Ordering::SeqCst);
        assert!(peak <= bound, "{peak} in flight with a bound of {bound}");
        if bound > 1 {
            assert!(peak >= 2, "the 7 requests were made one at a time");
        }
    }
}

#[test]
fn a_manifest_larger_than_the_tail_costs_one_more_request_for_the_rest_only() {
    let dir = served_dir();
    // v1.2 packs on 64 bytes: 12,000 tiny tensors make a manifest well over the 1 MiB tail.
    write_zt(&dir.path().join("big.zt"), 20_000, 8, Version::V1_2);
    let Some(nginx) = Nginx::start(dir.path()) else {
        return;
    };
    let r = ztensor::open_url(&nginx.url("big.zt")).unwrap();
    assert_eq!(r.len(), 20_000);
    let opened = nginx.requests();
    assert_eq!(
        opened.len(),
        3,
        "head, tail, the rest of the manifest: {opened:?}"
    );
    let size = std::fs::metadata(dir.path().join("big.zt")).unwrap().len();
    assert!(size > HEAD_LEN + TAIL_LEN);
    // Every byte was asked for once at most.
    let total: u64 = opened.iter().map(|l| l.body_bytes).sum();
    assert!(total <= size, "{total} bytes for a {size}-byte file");
    let want: Vec<f32> = (0..8).map(|i| (19_999_000 + i) as f32).collect();
    assert_eq!(&r.read::<f32>("t19999").unwrap()[..], &want[..]);
}

/// A Flax checkpoint of `count` f32 arrays `a00`.. of `len` elements each (value = array *
/// 1000 + i), msgpack as flax writes it: `{name: ext 1 [[len], "float32", bytes]}`.
#[cfg(feature = "flax")]
fn flax_bytes(count: usize, len: usize) -> Vec<u8> {
    let mut out = vec![0xde];
    out.extend((count as u16).to_be_bytes());
    for a in 0..count {
        out.extend([0xa3, b'a', b'0' + (a / 10) as u8, b'0' + (a % 10) as u8]);
        let data: Vec<u8> = (0..len)
            .flat_map(|i| ((a * 1000 + i) as f32).to_le_bytes())
            .collect();
        let mut payload = vec![0x93, 0x91, 0xce];
        payload.extend((len as u32).to_be_bytes());
        payload.extend([0xa7]);
        payload.extend(b"float32");
        payload.push(0xc6);
        payload.extend((data.len() as u32).to_be_bytes());
        payload.extend(data);
        out.push(0xc9);
        out.extend((payload.len() as u32).to_be_bytes());
        out.push(1);
        out.extend(payload);
    }
    out
}

#[cfg(feature = "flax")]
#[test]
fn a_flax_checkpoint_over_http_costs_a_request_per_array_header_not_per_field() {
    let dir = served_dir();
    // 30 arrays of 256 KiB: the headers lie far apart, each past the last one's window.
    std::fs::write(dir.path().join("flax_model.msgpack"), flax_bytes(30, 65536)).unwrap();
    let Some(nginx) = Nginx::start(dir.path()) else {
        return;
    };
    let r = ztensor::open_url(&nginx.url("flax_model.msgpack")).unwrap();
    assert_eq!(r.len(), 30);
    // Each array's header (its extension, shape, type and data headers, ten fields) is read
    // in one window: about one request per array, not ten.
    let opened = nginx.requests();
    assert!(opened.len() <= 32, "{} requests: {opened:?}", opened.len());
    let values = r.read::<f32>("a29").unwrap();
    assert_eq!(values[..3], [29000.0, 29001.0, 29002.0]);
}

#[test]
fn a_safetensors_header_costs_one_request_or_two_when_large() {
    let dir = served_dir();
    for (file, count) in [("small.safetensors", 10usize), ("large.safetensors", 3000)] {
        let zt = dir.path().join(format!("{file}.zt"));
        write_zt(&zt, count, 8, Version::V1_2);
        ztensor::write_safetensors(&ztensor::open(&zt).unwrap(), dir.path().join(file), false)
            .unwrap();
    }
    let Some(nginx) = Nginx::start(dir.path()) else {
        return;
    };
    let small = ztensor::open_url(&nginx.url("small.safetensors")).unwrap();
    assert_eq!(small.len(), 10);
    assert_eq!(
        nginx.requests().len(),
        1,
        "the whole small file is the head"
    );
    let large = ztensor::open_url(&nginx.url("large.safetensors")).unwrap();
    assert_eq!(large.len(), 3000);
    let opened = since(&nginx, 1);
    assert!(opened.len() <= 2, "{opened:?}");
    let local = ztensor::open(dir.path().join("large.safetensors")).unwrap();
    assert_eq!(
        large.read::<f32>("t02999").unwrap(),
        local.read::<f32>("t02999").unwrap()
    );
}

#[test]
fn missing_objects_and_bad_urls_are_clear_errors_without_credentials() {
    let dir = served_dir();
    let Some(nginx) = Nginx::start(dir.path()) else {
        return;
    };
    let e = ztensor::open_url(&nginx.url("nope.zt")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    assert!(e.to_string().contains("nope.zt"), "{e}");
    let secret = format!(
        "http://user:hunter2@127.0.0.1:{}/nope.zt?X-Amz-Signature=s3cr3t",
        nginx.port
    );
    let e = ztensor::open_url(&secret).unwrap_err().to_string();
    assert!(!e.contains("hunter2") && !e.contains("s3cr3t"), "{e}");
    let e = ztensor::open_url("ftp://example/x.zt").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
}

/// A v2 file of 40 tensors of 64 KiB (larger than the cached head and tail), and its bytes.
fn fault_file() -> (tempfile::TempDir, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.zt");
    let mut w = Writer::create(&path).unwrap();
    w.set_options(WriteOptions {
        compression: None,
        digest: Some(ztensor::DigestAlgorithm::Sha256),
    });
    for t in 0..40 {
        let v: Vec<f32> = (0..16384).map(|i| (t * 100_000 + i) as f32).collect();
        w.add(&format!("t{t}"), &[16384], &v).unwrap();
    }
    w.finish().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    (dir, bytes)
}

#[test]
fn faults_are_retried_or_reported_never_a_wrong_tensor() {
    let (dir, bytes) = fault_file();
    let local = ztensor::open(dir.path().join("m.zt")).unwrap();
    // Requests 0 and 1 open the file (head, tail); request 2 is the first tensor's.
    for fault in [Fault::ServerError, Fault::DropMidBody, Fault::Short] {
        let once = FaultServer::start(
            bytes.clone(),
            move |n| if n == 2 { fault } else { Fault::None },
        );
        let r = ztensor::open_url(&once.url()).unwrap();
        // t00 is the first tensor asked for: request 2.
        for o in &local {
            assert_eq!(
                r.object(o.name()).unwrap().read_verified::<f32>().unwrap(),
                o.read::<f32>().unwrap(),
                "{fault:?}, once"
            );
        }
        // Always at fault: an error naming the URL, never wrong values.
        let always = FaultServer::start(
            bytes.clone(),
            move |n| if n >= 2 { fault } else { Fault::None },
        );
        let r = ztensor::open_url(&always.url()).unwrap();
        let e = r.object("t0").unwrap().read::<f32>().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Io, "{fault:?}: {e}");
        assert!(e.to_string().contains("127.0.0.1"), "{e}");
    }
}

/// A v2 file of `count` tensors of `len` f32 (`write_zt`) in a fresh folder: the folder, the
/// file's bytes (for a fault server to serve) and the file opened locally (the values a
/// remote read must give).
fn served_zt(count: usize, len: usize) -> (tempfile::TempDir, Vec<u8>, ztensor::Reader) {
    let dir = tempfile::tempdir().unwrap();
    write_zt(&dir.path().join("m.zt"), count, len, Version::V2);
    let bytes = std::fs::read(dir.path().join("m.zt")).unwrap();
    let local = ztensor::open(dir.path().join("m.zt")).unwrap();
    (dir, bytes, local)
}

/// A server that ignores ranges (Python's `http.server`) answers the first ranged request
/// with the whole object: that answer is kept, in an unnamed temporary file, and every read is
/// served from it with no request more. A download cut short is an error naming the URL.
#[test]
fn a_server_that_ignores_ranges_is_read_whole_once() {
    let (_dir, bytes, local) = served_zt(8, 4096);
    let server = FaultServer::start(bytes.clone(), |_| Fault::IgnoreRanges);
    let (r, object) = OpenOptions::new().open_url_counted(&server.url()).unwrap();
    assert!(object.is_downloaded());
    for o in &local {
        assert_eq!(
            r.object(o.name()).unwrap().read_verified::<f32>().unwrap(),
            o.read::<f32>().unwrap()
        );
    }
    // The refused ranged request, then the whole object; nothing after.
    assert_eq!(server.gets.load(std::sync::atomic::Ordering::SeqCst), 2);
    let stats = object.stats();
    assert_eq!((stats.requests, stats.bytes), (1, bytes.len() as u64));

    let cut = FaultServer::start(bytes.clone(), |n| {
        if n == 0 {
            Fault::IgnoreRanges
        } else {
            Fault::IgnoreRangesDropMidBody
        }
    });
    let e = ztensor::open_url(&cut.url()).unwrap_err();
    assert!(e.to_string().contains("127.0.0.1"), "{e}");
    // A server that serves ranges is never read whole.
    let ranged = FaultServer::start(bytes, |_| Fault::None);
    let (_, object) = OpenOptions::new().open_url_counted(&ranged.url()).unwrap();
    assert!(!object.is_downloaded());
}

/// A server that ignores ranges and claims more bytes than the temporary folder has room
/// for is refused at once, naming the room there and TMPDIR, before a byte is written: not
/// after the disk has filled.
#[test]
fn a_download_larger_than_the_room_for_it_is_refused_before_it_starts() {
    let (_dir, bytes, _) = served_zt(2, 64);
    // 16 EiB less one: more than any file system here holds.
    let server = FaultServer::start(bytes, |_| Fault::IgnoreRangesClaiming(u64::MAX >> 1));
    let e = ztensor::open_url(&server.url()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    // The system's own code under it, which Python callers get as `OSError.errno`.
    let io = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<std::io::Error>());
    assert_eq!(
        io.and_then(std::io::Error::raw_os_error),
        Some(libc::ENOSPC),
        "{e}"
    );
    let text = e.to_string();
    assert!(
        text.contains("127.0.0.1") && text.contains("bytes free"),
        "{e}"
    );
    assert!(text.contains("TMPDIR"), "{e}");
}

/// A presigned URL's query (its signature) goes with every request for its object: the
/// head, the tail and each tensor's range.
#[test]
fn a_presigned_urls_query_goes_with_every_request() {
    // 8 tensors of 256 KiB: more than the cached head and tail hold.
    let (_dir, bytes, local) = served_zt(8, 65536);
    let query = "X-Amz-Signature=s%2Fig&X-Amz-Expires=60";
    let server = FaultServer::start(bytes, |_| Fault::None);
    let r = ztensor::open_url(&format!("{}?{query}", server.url())).unwrap();
    for o in &local {
        assert_eq!(
            r.object(o.name()).unwrap().read::<f32>().unwrap(),
            o.read::<f32>().unwrap()
        );
    }
    let targets = server.targets.lock().unwrap().clone();
    assert!(targets.len() > 2, "{targets:?}");
    for t in &targets {
        assert_eq!(t, &format!("/model.zt?{query}"));
    }
}

/// A set's index from a server that ignores ranges is refused by its size before any of it is
/// read whole: an index is capped, and a server's word for the size is enough to refuse it.
#[test]
fn an_index_too_large_from_a_server_that_ignores_ranges_is_refused_unread() {
    let huge = vec![b' '; (ztensor::ShardIndex::MAX_LEN + 1) as usize];
    let server = FaultServer::start(huge, |_| Fault::IgnoreRanges);
    let url = format!(
        "http://127.0.0.1:{}/model.safetensors.index.json",
        server.port
    );
    let e = ztensor::ShardedSet::open_url(&url, OpenOptions::new()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{e}");
    assert!(e.to_string().contains("ignores ranges"), "{e}");
}

#[test]
fn an_s3_object_in_moto_reads_with_the_same_request_counts() {
    let Some(moto) = Moto::start() else { return };
    let proxy = CountingProxy::start(moto.port);
    let endpoint = format!("http://127.0.0.1:{}", proxy.port);
    // Credentials for moto, through the usual variables (set for this process only).
    for (k, v) in [
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ENDPOINT", endpoint.as_str()),
        ("AWS_ALLOW_HTTP", "true"),
    ] {
        // SAFETY: set before any thread of this test reads the environment; the variables
        // name only this test's fake endpoint.
        unsafe { std::env::set_var(k, v) };
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.zt");
    write_zt(&path, 40, 16384, Version::V2);
    // The bucket and the object, with a plain HTTP client: PUTs through the proxy.
    http_put(proxy.port, "/bucket", &[]);
    http_put(proxy.port, "/bucket/m.zt", &std::fs::read(&path).unwrap());
    let before = proxy.requests.load(std::sync::atomic::Ordering::SeqCst);
    let r = ztensor::open_url("s3://bucket/m.zt").unwrap();
    let opened = proxy.requests.load(std::sync::atomic::Ordering::SeqCst) - before;
    assert_eq!(opened, 2, "{:?}", proxy.lines.lock().unwrap());
    let local = ztensor::open(&path).unwrap();
    assert_eq!(
        r.read::<f32>("t00003").unwrap(),
        local.read::<f32>("t00003").unwrap()
    );
    let read = proxy.requests.load(std::sync::atomic::Ordering::SeqCst) - before - opened;
    assert_eq!(read, 1);
    assert!(r.verify().is_ok());
}

#[test]
fn a_v2_file_with_its_own_shards_opens_them_by_url_beside_it() {
    let dir = served_dir();
    let src = dir.path().join("src.zt");
    // 48 tensors of 64 KiB in shards of 20, 20 and 8: the first two larger than the head and
    // tail a remote file caches.
    write_zt(&src, 48, 16384, Version::V2);
    let root = dir.path().join("model.zt");
    let shards = ztensor::convert::write_sharded(
        &ztensor::open(&src).unwrap(),
        &root,
        ztensor::convert::ShardOptions {
            max_shard_size: 20 * 65536,
            convert: ztensor::ConvertOptions::default(),
            densify: false,
        },
    )
    .unwrap();
    assert_eq!(shards.len(), 3);
    let Some(nginx) = Nginx::start(dir.path()) else {
        return;
    };
    let local = ztensor::open(&root).unwrap();
    let r = ztensor::open_url(&nginx.url("model.zt")).unwrap();
    let opened = nginx.requests();
    // Each file, the root and its three shards: its head, and its tail when the head does
    // not hold the whole file.
    for file in [
        "model.zt",
        "model-00001-of-00003.zt",
        "model-00003-of-00003.zt",
    ] {
        assert!(
            opened.iter().any(|l| l.uri == format!("/{file}")),
            "{file}: {opened:?}"
        );
    }
    assert!(opened.len() <= 8, "{opened:?}");
    let report = r.verify();
    assert!(report.is_ok(), "{:?}", report.failures);
    assert_eq!(report.checked, local.verify().checked);
    // For each of the two large shards, what lies between its head and tail is read once
    // for the shard's whole-file digest and once, grouped, for its objects' digests (not
    // once per tensor).
    let verified: Vec<Logged> = nginx.requests().into_iter().skip(opened.len()).collect();
    assert_eq!(verified.len(), 4, "{verified:?}");
    assert!(
        verified
            .iter()
            .all(|l| l.uri == "/model-00001-of-00003.zt" || l.uri == "/model-00002-of-00003.zt"),
        "{verified:?}"
    );
    for o in &local {
        assert_eq!(
            r.object(o.name()).unwrap().bytes().unwrap(),
            o.bytes().unwrap()
        );
    }
    // A missing shard: the root does not open, and the error names the shard.
    std::fs::remove_file(&shards[1]).unwrap();
    let e = ztensor::open_url(&nginx.url("model.zt")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    assert!(e.to_string().contains("model-00002-of-00003.zt"), "{e}");
}

/// `remote` (read by URL) has `local`'s objects, by name, with their attributes and bytes.
fn assert_same_objects(local: &ztensor::Reader, remote: &ztensor::Reader, file: &str) {
    assert!(remote.names().eq(local.names()), "{file}");
    for name in local.names() {
        let (here, there) = (local.object(name).unwrap(), remote.object(name).unwrap());
        assert_eq!(there.attributes, here.attributes, "{file} {name}");
        assert_eq!(
            there.bytes().unwrap(),
            here.bytes().unwrap(),
            "{file} {name}"
        );
    }
}

#[test]
fn paddle_parameters_over_http_are_named_by_the_program_beside_them() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/interop/paddle");
    let dir = served_dir();
    // Paddle 3's PIR program beside one file; a ProgramDesc and the `.info` pickle beside
    // the other.
    for (from, to) in [
        ("pir/model.pdiparams", "pir.pdiparams"),
        ("pir/model.json", "pir.json"),
        ("legacy/model.pdiparams", "legacy.pdiparams"),
        ("legacy/model.pdmodel", "legacy.pdmodel"),
        ("legacy/model.pdiparams.info", "legacy.pdiparams.info"),
    ] {
        std::fs::copy(fixtures.join(from), dir.path().join(to)).unwrap();
    }
    let Some(nginx) = Nginx::start(dir.path()) else {
        return;
    };
    for (file, program) in [("pir", "pir.json"), ("legacy", "legacy.pdmodel")] {
        let local = ztensor::open(dir.path().join(format!("{file}.pdiparams"))).unwrap();
        let remote = ztensor::open_url(&nginx.url(&format!("{file}.pdiparams"))).unwrap();
        assert_eq!(
            remote.attributes().get("paddle.names"),
            Some(&ztensor::Value::Text(format!("from {program}"))),
            "{file}"
        );
        assert_same_objects(&local, &remote, file);
    }
    // The PIR file's folder holds no `.pdmodel`: looked for, not found, not an error.
    let asked: Vec<String> = nginx.requests().into_iter().map(|l| l.uri).collect();
    assert!(
        asked.iter().any(|u| u == "/legacy.pdiparams.info"),
        "{asked:?}"
    );
}

#[test]
fn files_named_by_a_file_over_http_are_found_at_their_path_below_it() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/interop");
    let dir = served_dir();
    // Paddle 1's program beside one file per variable; an ONNX model whose external data
    // lies in a folder below it (`weights/int64.bin`) as well as beside it.
    let copy = |from: &Path, to: &Path| {
        std::fs::create_dir_all(to).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        for e in std::fs::read_dir(from).unwrap() {
            let p = e.unwrap().path();
            if p.is_file() {
                std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
            }
        }
    };
    copy(
        &fixtures.join("paddle/paddle1"),
        &dir.path().join("paddle1"),
    );
    copy(&fixtures.join("onnx"), &dir.path().join("onnx"));
    copy(
        &fixtures.join("onnx/weights"),
        &dir.path().join("onnx/weights"),
    );
    let Some(nginx) = Nginx::start(dir.path()) else {
        return;
    };
    for file in ["paddle1/__model__", "onnx/external.onnx"] {
        let local = ztensor::open(dir.path().join(file)).unwrap();
        let remote = ztensor::open_url(&nginx.url(file)).unwrap();
        assert_same_objects(&local, &remote, file);
    }
    let asked: Vec<String> = nginx.requests().into_iter().map(|l| l.uri).collect();
    assert!(
        asked.iter().any(|u| u == "/onnx/weights/int64.bin"),
        "{asked:?}"
    );
    assert!(asked.iter().any(|u| u == "/paddle1/fc_0.w_0"), "{asked:?}");
}

#[test]
fn a_side_file_over_http_names_the_model_file_beside_it() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/interop");
    let dir = served_dir();
    let folder = dir.path().join("m");
    std::fs::create_dir(&folder).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    for (from, to) in [
        ("openvino/model.bin", "model.bin"),
        ("openvino/model.xml", "model.xml"),
        ("onnx/external.onnx.data", "external.onnx.data"),
        ("onnx/external.onnx", "external.onnx"),
        // Alone: no model file beside them.
        ("openvino/fp16.bin", "lone.bin"),
        ("onnx/external.onnx.data", "lone.onnx.data"),
    ] {
        std::fs::copy(fixtures.join(from), folder.join(to)).unwrap();
    }
    let Some(nginx) = Nginx::start(dir.path()) else {
        return;
    };
    for (file, model, says) in [
        (
            "m/model.bin",
            "m/model.xml",
            "the weights of the OpenVINO model",
        ),
        (
            "m/external.onnx.data",
            "m/external.onnx",
            "the external data of the ONNX model",
        ),
    ] {
        let e = ztensor::open_url(&nginx.url(file)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported, "{file}: {e}");
        let starts = format!("{says} {} ", nginx.url(model));
        assert!(e.message().starts_with(&starts), "{file}: {e}");
        // The same words as for the file on the disk, with the model's URL for its path.
        let local = ztensor::open(dir.path().join(file)).unwrap_err();
        let local_model = dir.path().join(model).display().to_string();
        assert_eq!(
            e.message().replace(&nginx.url(model), &local_model),
            local.message(),
            "{file}"
        );
    }
    for file in ["m/lone.bin", "m/lone.onnx.data"] {
        let e = ztensor::open_url(&nginx.url(file)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidFile, "{file}: {e}");
        assert!(
            e.message().starts_with("not a kind of file ztensor reads"),
            "{file}: {e}"
        );
    }
}

/// A ggjt v3 file (llama.cpp's layout) of `count` f32 tensors `w0`.. of `len` elements.
fn ggjt_bytes(count: usize, len: u32) -> Vec<u8> {
    let mut f = b"tjgg".to_vec();
    for w in [3u32, 1, 8, 256, 1, 1, 8, 0] {
        f.extend(w.to_le_bytes());
    }
    f.extend(1u32.to_le_bytes());
    f.push(b'a');
    f.extend(0f32.to_le_bytes());
    for t in 0..count {
        let name = format!("w{t}");
        for w in [1, name.len() as u32, 0, len] {
            f.extend(w.to_le_bytes());
        }
        f.extend(name.as_bytes());
        f.resize(f.len().next_multiple_of(32), 0);
        f.extend((0..len).flat_map(|i| (i as f32 + t as f32).to_le_bytes()));
    }
    f
}

#[test]
fn a_ggml_file_over_http_reads_its_tensor_records_not_its_tensors() {
    let dir = served_dir();
    // Sixteen tensors of 1 MiB: each record lies a megabyte past the one before.
    std::fs::write(dir.path().join("model.bin"), ggjt_bytes(16, 1 << 18)).unwrap();
    let Some(nginx) = Nginx::start(dir.path()) else {
        return;
    };
    let r = ztensor::open_url(&nginx.url("model.bin")).unwrap();
    assert_eq!(r.len(), 16);
    let fetched: u64 = nginx.requests().iter().map(|l| l.body_bytes).sum();
    // The header's window (1 MiB), the tail the remote reader caches (1 MiB) and 16 KiB
    // around each record: not the 16 MiB of tensors (which each record's window read whole
    // when it was a megabyte).
    assert!(
        fetched < 3 << 20,
        "{fetched} bytes for the listing: {:?}",
        nginx.requests()
    );
    let local = ztensor::open(dir.path().join("model.bin")).unwrap();
    assert_eq!(
        r.read::<f32>("w5").unwrap(),
        local.read::<f32>("w5").unwrap()
    );
}

#[test]
fn a_split_gguf_model_over_http_opens_from_any_of_its_files() {
    let dir = served_dir();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/interop/gguf/split");
    for n in 1..=3 {
        let name = format!("llama-q4_0-{n:05}-of-00003.gguf");
        std::fs::copy(fixtures.join(&name), dir.path().join(&name)).unwrap();
    }
    let Some(nginx) = Nginx::start(dir.path()) else {
        return;
    };
    let url = nginx.url("llama-q4_0-00002-of-00003.gguf");
    let set = ztensor::ShardedSet::open_url(&url, OpenOptions::new()).unwrap();
    let local = ztensor::ShardedSet::open(fixtures.join("llama-q4_0-00001-of-00003.gguf")).unwrap();
    assert!(set.is_gguf_split());
    assert_eq!(set.metadata(), local.metadata());
    assert!(set.names().eq(local.names()));
    let name = "blk.0.ffn_down.weight";
    assert_eq!(
        set.object(name).unwrap().bytes().unwrap(),
        local.object(name).unwrap().bytes().unwrap()
    );
    // A split the server does not have is named.
    std::fs::remove_file(dir.path().join("llama-q4_0-00003-of-00003.gguf")).unwrap();
    let e = ztensor::ShardedSet::open_url(&url, OpenOptions::new()).unwrap_err();
    assert!(e.to_string().contains("00003-of-00003.gguf"), "{e}");
}

#[test]
fn a_set_over_http_finds_shards_below_its_index_by_their_names_as_spelled() {
    let dir = served_dir();
    std::fs::create_dir(dir.path().join("part")).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let open = std::fs::Permissions::from_mode(0o755);
        std::fs::set_permissions(dir.path().join("part"), open).unwrap();
    }
    // A space and a percent sign are plain characters of a file name: each reaches the server
    // encoded, so the file asked for is the file the index names.
    let shards = [("part/a b.zt", "x"), ("q%41.zt", "y")];
    for (file, name) in shards {
        let mut w = Writer::create(dir.path().join(file)).unwrap();
        w.add(name, &[2], &[1.0f32, 2.0]).unwrap();
        w.finish().unwrap();
    }
    let index = r#"{"weight_map": {"x": "part/a b.zt", "y": "q%41.zt"}}"#;
    std::fs::write(dir.path().join("m.zt.index.json"), index).unwrap();
    let Some(nginx) = Nginx::start(dir.path()) else {
        return;
    };
    let set =
        ztensor::ShardedSet::open_url(&nginx.url("m.zt.index.json"), OpenOptions::new()).unwrap();
    for (_, name) in shards {
        let o = set.object(name).unwrap();
        assert_eq!(&o.read::<f32>().unwrap()[..], &[1.0, 2.0]);
    }
    // nginx logs the path it decoded: the names as the index spells them.
    let uris: Vec<String> = nginx.requests().into_iter().map(|l| l.uri).collect();
    assert!(uris.iter().any(|u| u == "/part/a b.zt"), "{uris:?}");
    assert!(uris.iter().any(|u| u == "/q%41.zt"), "{uris:?}");
}
