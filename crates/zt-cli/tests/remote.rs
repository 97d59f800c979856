//! `zt` over URLs (feature `remote`, on by default for the tool): info, ls, cat (with
//! --slice), verify, diff and convert read an http:// URL served by nginx on loopback,
//! costing the requests docs/remote.md gives.

#![cfg(feature = "remote")]

#[path = "../../ztensor/tests/support/servers.rs"]
mod servers;

use std::process::{Command, Output};

fn zt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zt"))
        .args(args)
        .output()
        .expect("zt runs")
}

fn ok(o: &Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn reading_commands_take_a_url() {
    let dir = tempfile::tempdir().unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path = dir.path().join("m.zt");
    let mut w = ztensor::Writer::create(&path).unwrap();
    for t in 0..30 {
        let v: Vec<f32> = (0..16384).map(|i| (t * 100_000 + i) as f32).collect();
        w.add(&format!("t{t:02}"), &[128, 128], &v).unwrap();
    }
    w.finish().unwrap();
    let Some(nginx) = servers::Nginx::start(dir.path()) else {
        return;
    };
    let url = nginx.url("m.zt");
    assert!(ok(&zt(&["info", &url])).contains("30 objects"));
    assert_eq!(ok(&zt(&["ls", &url])).lines().count(), 30);
    let before = nginx.requests().len();
    let o = zt(&["cat", &url, "t03", "--slice", "8:16"]);
    let local = ztensor::open(&path).unwrap();
    let want = local
        .object("t03")
        .unwrap()
        .slice_bytes(&[8..16, 0..128])
        .unwrap();
    assert_eq!(o.stdout, &want[..]);
    // A new process: head, tail, then the rows (t03 lies before the cached tail).
    let cat = &nginx.requests()[before..];
    assert_eq!(cat.len(), 3, "{cat:?}");
    assert_eq!(cat[2].body_bytes, 8 * 128 * 4);
    assert!(ok(&zt(&["verify", &url])).contains(": OK"));
    let copy = dir.path().join("copy.zt");
    ok(&zt(&["convert", &url, copy.to_str().unwrap()]));
    ok(&zt(&[
        "diff",
        path.to_str().unwrap(),
        copy.to_str().unwrap(),
    ]));
    // A sharded set by URL: the index, then only the shards a command needs.
    let st = dir.path().join("set.safetensors");
    ok(&zt(&[
        "convert",
        path.to_str().unwrap(),
        st.to_str().unwrap(),
        "--shard-size",
        "300000",
    ]));
    let index = nginx.url("set.safetensors.index.json");
    assert_eq!(ok(&zt(&["ls", &index])).lines().count(), 30);
    let before = nginx.requests().len();
    let o = zt(&["cat", &index, "t03"]);
    assert_eq!(o.stdout, &local.object("t03").unwrap().bytes().unwrap()[..]);
    let cat = &nginx.requests()[before..];
    // The index (one request, it is small), then the one shard holding t03.
    assert!(
        cat.iter().all(|l| l.uri == "/set.safetensors.index.json"
            || l.uri == "/set-00001-of-00008.safetensors"),
        "{cat:?}"
    );
    assert!(
        ok(&zt(&["verify", &index]))
            .lines()
            .filter(|l| l.contains(": OK"))
            .count()
            == 8
    );
    let merged = dir.path().join("merged.zt");
    ok(&zt(&["merge", &index, "-o", merged.to_str().unwrap()]));
    ok(&zt(&[
        "diff",
        path.to_str().unwrap(),
        merged.to_str().unwrap(),
    ]));
    // Nowhere to write: a URL as output is refused before anything is read.
    let o = zt(&["convert", path.to_str().unwrap(), &nginx.url("out.zt")]);
    assert_eq!(o.status.code(), Some(2));
    // A missing object is one clear line.
    let o = zt(&["info", &nginx.url("nope.zt")]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with("zt: ") && err.contains("nope.zt") && err.lines().count() == 1,
        "{err}"
    );
}
