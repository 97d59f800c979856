//! `zt` over URLs (feature `remote`, on by default for the tool): info, ls, cat (with
//! --slice), verify, diff and convert read an http:// URL served by nginx on loopback,
//! costing the requests docs/remote.md gives.

#![cfg(feature = "remote")]

#[path = "../../ztensor/tests/support/servers.rs"]
mod servers;

use std::process::{Command, Output};

mod support;
use support::{ok, p, zt};

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
    // A server that takes no PUT (nginx without WebDAV): the upload fails with one clear
    // line naming the URL, and nothing is left behind.
    let o = zt(&["convert", path.to_str().unwrap(), &nginx.url("out.zt")]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("uploading to") && err.contains("out.zt") && err.lines().count() == 1,
        "{err}"
    );
    assert!(!dir.path().join("out.zt").exists());
    // A missing object is one clear line.
    let o = zt(&["info", &nginx.url("nope.zt")]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with("zt: ") && err.contains("nope.zt") && err.lines().count() == 1,
        "{err}"
    );
}

/// `zt` with moto's credentials and endpoint in its environment.
fn zt_s3(endpoint: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zt"))
        .args(args)
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ENDPOINT", endpoint)
        .env("AWS_ALLOW_HTTP", "true")
        .output()
        .expect("zt runs")
}

#[test]
fn convert_uploads_a_file_or_a_set_to_s3_and_reads_it_back() {
    let Some(moto) = servers::Moto::start() else {
        return;
    };
    let proxy = servers::CountingProxy::start(moto.port);
    let endpoint = format!("http://127.0.0.1:{}", proxy.port);
    servers::http_put(proxy.port, "/bucket", &[]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.zt");
    let mut w = ztensor::Writer::create(&path).unwrap();
    // 24 MiB in all: larger than one part, so the .zt goes up as a multipart upload.
    for t in 0..24 {
        let v: Vec<f32> = (0..262_144).map(|i| (t * 1_000_000 + i) as f32).collect();
        w.add(&format!("t{t:02}"), &[512, 512], &v).unwrap();
    }
    w.finish().unwrap();
    let st = dir.path().join("m.safetensors");
    ok(&zt(&[
        "convert",
        path.to_str().unwrap(),
        st.to_str().unwrap(),
    ]));

    // One file: converted locally, uploaded, then read back by URL.
    ok(&zt_s3(
        &endpoint,
        &["convert", st.to_str().unwrap(), "s3://bucket/models/m.zt"],
    ));
    let back = dir.path().join("back.safetensors");
    ok(&zt_s3(
        &endpoint,
        &["convert", "s3://bucket/models/m.zt", back.to_str().unwrap()],
    ));
    assert_eq!(std::fs::read(&back).unwrap(), std::fs::read(&st).unwrap());
    let lines = proxy.lines.lock().unwrap().clone();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("POST /bucket/models/m.zt?uploads")),
        "a multipart upload: {lines:?}"
    );

    // An object already there: refused without --force, replaced with it.
    let o = zt_s3(
        &endpoint,
        &["convert", st.to_str().unwrap(), "s3://bucket/models/m.zt"],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--force"));
    ok(&zt_s3(
        &endpoint,
        &[
            "convert",
            st.to_str().unwrap(),
            "s3://bucket/models/m.zt",
            "--force",
        ],
    ));

    // A set: shards and the index beside each other, the index last.
    let before = proxy.lines.lock().unwrap().len();
    ok(&zt_s3(
        &endpoint,
        &[
            "convert",
            path.to_str().unwrap(),
            "s3://bucket/set/model.safetensors",
            "--shard-size",
            "8MiB",
        ],
    ));
    let puts: Vec<String> = proxy.lines.lock().unwrap()[before..]
        .iter()
        .filter(|l| l.starts_with("PUT ") && !l.contains("partNumber"))
        .cloned()
        .collect();
    assert!(
        puts.last()
            .is_some_and(|l| l.starts_with("PUT /bucket/set/model.safetensors.index.json")),
        "{puts:?}"
    );
    let listed = ok(&zt_s3(
        &endpoint,
        &["ls", "s3://bucket/set/model.safetensors.index.json"],
    ));
    assert_eq!(listed.lines().count(), 24);
    let merged = dir.path().join("merged.safetensors");
    ok(&zt_s3(
        &endpoint,
        &[
            "convert",
            "s3://bucket/set/model.safetensors.index.json",
            merged.to_str().unwrap(),
        ],
    ));
    assert_eq!(std::fs::read(&merged).unwrap(), std::fs::read(&st).unwrap());

    // Downloaded as a set (no --shard-size: the set's own shards), the files are the ones the
    // same conversion writes locally, byte for byte.
    let down = dir.path().join("down");
    let reference = dir.path().join("reference");
    std::fs::create_dir_all(&down).unwrap();
    std::fs::create_dir_all(&reference).unwrap();
    ok(&zt_s3(
        &endpoint,
        &[
            "convert",
            "s3://bucket/set/model.safetensors.index.json",
            down.join("model.safetensors.index.json").to_str().unwrap(),
        ],
    ));
    ok(&zt(&[
        "convert",
        path.to_str().unwrap(),
        reference.join("model.safetensors").to_str().unwrap(),
        "--shard-size",
        "8MiB",
    ]));
    let mut names: Vec<String> = std::fs::read_dir(&reference)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names.len(), 4, "{names:?}");
    for name in names {
        assert_eq!(
            std::fs::read(down.join(&name)).unwrap(),
            std::fs::read(reference.join(&name)).unwrap(),
            "{name}"
        );
    }

    // A v2 output that is mostly padding: the note names the URL, not the local temporary the
    // file went up from.
    let small = dir.path().join("small-v1.zt");
    let mut w = ztensor::Writer::create(&small).unwrap();
    for t in 0..300 {
        w.add(&format!("b{t:03}"), &[4], &[t as f32; 4]).unwrap();
    }
    w.finish().unwrap();
    let o = zt_s3(
        &endpoint,
        &[
            "convert",
            small.to_str().unwrap(),
            "s3://bucket/models/small.zt",
        ],
    );
    assert!(o.status.success(), "{o:?}");
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(
        said.contains("zt: note: s3://bucket/models/small.zt takes") && said.contains("--compact"),
        "{said}"
    );
    assert!(!said.contains("zt-upload-"), "{said}");
}

/// `zt` with a Hugging Face endpoint and token in its environment (and no token file).
fn zt_hub(endpoint: &str, token: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zt"))
        .args(args)
        .env("HF_ENDPOINT", endpoint)
        .env("HF_TOKEN", token)
        .env("HF_HOME", "/nonexistent")
        .output()
        .expect("zt runs")
}

#[test]
fn hub_urls_read_the_resolve_url_under_hf_endpoint_with_the_token_to_it_only() {
    let dir = tempfile::tempdir().unwrap();
    // The Hub's layout: /owner/name/resolve/revision/path.
    let repo = dir.path().join("org/tiny/resolve/main");
    // The Hub takes refs%2Fpr%2F2 as one segment; nginx decodes it into three folders.
    let pr = dir.path().join("org/tiny/resolve/refs/pr/2");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::create_dir_all(&pr).unwrap();
    std::fs::create_dir_all(dir.path().join("blobs")).unwrap();
    // nginx's worker may run as another user: every folder on the way must be open to it.
    #[cfg(unix)]
    for d in [
        "",
        "org",
        "org/tiny",
        "org/tiny/resolve",
        "org/tiny/resolve/main",
        "org/tiny/resolve/refs",
        "org/tiny/resolve/refs/pr",
        "org/tiny/resolve/refs/pr/2",
        "blobs",
    ] {
        let d = dir.path().join(d);
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path = repo.join("m.zt");
    let mut w = ztensor::Writer::create(&path).unwrap();
    for t in 0..4 {
        w.add(&format!("t{t}"), &[64], &vec![t as f32; 64]).unwrap();
    }
    w.finish().unwrap();
    std::fs::copy(&path, pr.join("m.zt")).unwrap();
    let set = repo.join("set.safetensors");
    ok(&zt(&["convert", p(&path), p(&set), "--shard-size", "600"]));
    ok(&zt(&[
        "convert",
        p(&path),
        p(&repo.join("model.safetensors")),
    ]));
    // As the Hub answers for a large file: a redirect to its content store, another host.
    std::fs::copy(&path, dir.path().join("blobs/big.zt")).unwrap();
    let redirect = |port: u16| {
        format!(
            "location = /org/tiny/resolve/main/big.zt {{ \
             return 302 http://localhost:{port}/blobs/big.zt; }}"
        )
    };
    let Some(nginx) = servers::Nginx::start_with(dir.path(), redirect) else {
        return;
    };
    let hub = format!("http://127.0.0.1:{}", nginx.port);
    let o = zt_hub(&hub, "hf_secret", &["ls", "hf://org/tiny/m.zt"]);
    assert_eq!(ok(&o), "t0\nt1\nt2\nt3\n");
    let asked = nginx.requests();
    assert!(!asked.is_empty());
    for l in &asked {
        assert_eq!(l.uri, "/org/tiny/resolve/main/m.zt", "{l:?}");
        assert_eq!(l.authorization, "Bearer hf_secret", "{l:?}");
    }
    // A pull request's revision; a set, its shards beside its index.
    let o = zt_hub(&hub, "t", &["cat", "hf://org/tiny@refs/pr/2/m.zt", "t3"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert_eq!(o.stdout, [3.0f32; 64].map(f32::to_le_bytes).concat());
    let o = zt_hub(
        &hub,
        "t",
        &["ls", "hf://org/tiny/set.safetensors.index.json"],
    );
    assert_eq!(ok(&o), "t0\nt1\nt2\nt3\n");
    let o = zt_hub(
        &hub,
        "t",
        &["verify", "hf://org/tiny/set.safetensors.index.json"],
    );
    assert!(ok(&o).contains("OK"));
    // A redirect is followed, ranges and all, and the token is not sent on to the other host.
    let before = nginx.requests().len();
    let o = zt_hub(&hub, "hf_secret", &["cat", "hf://org/tiny/big.zt", "t2"]);
    assert_eq!(o.stdout, [2.0f32; 64].map(f32::to_le_bytes).concat());
    let asked = &nginx.requests()[before..];
    let (hub_side, store_side): (Vec<_>, Vec<_>) =
        asked.iter().partition(|l| l.uri.starts_with("/org/"));
    assert!(!store_side.is_empty(), "{asked:?}");
    assert!(hub_side
        .iter()
        .all(|l| l.status == 302 && l.authorization == "Bearer hf_secret"));
    assert!(store_side
        .iter()
        .all(|l| l.uri == "/blobs/big.zt" && l.authorization == "-"));
    // The token goes to the endpoint's origin only: not to the same server on another port.
    let before = nginx.requests().len();
    let elsewhere = "http://127.0.0.1:9";
    ok(&zt_hub(
        elsewhere,
        "hf_secret",
        &["ls", &nginx.url("org/tiny/resolve/main/m.zt")],
    ));
    let plain = &nginx.requests()[before..];
    assert!(
        !plain.is_empty() && plain.iter().all(|l| l.authorization == "-"),
        "{plain:?}"
    );
    // A repository named without a file: its model file, found by asking for the usual
    // names in turn (an index before a single file); none of them is NotFound, saying so.
    let before = nginx.requests().len();
    let o = zt_hub(&hub, "t", &["ls", "hf://org/tiny"]);
    assert_eq!(ok(&o), "t0\nt1\nt2\nt3\n");
    let asked = &nginx.requests()[before..];
    assert_eq!(
        asked[0].uri,
        "/org/tiny/resolve/main/model.safetensors.index.json"
    );
    assert_eq!((asked[0].method.as_str(), asked[0].status), ("HEAD", 404));
    assert_eq!(asked[1].uri, "/org/tiny/resolve/main/model.safetensors");
    let o = zt_hub(&hub, "t", &["ls", "hf://org/tiny@refs/pr/2/"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let said = support::stderr(&o);
    let none = "hf://org/tiny@refs/pr/2 holds none of model.safetensors.index.json, ";
    assert!(said.contains(none), "{said}");
    // Malformed or written to: an error saying why.
    let o = zt_hub(&hub, "t", &["ls", "hf://org"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let said = support::stderr(&o);
    assert!(
        said.contains("invalid argument: the repository is not owner/name"),
        "{said}"
    );
    let o = zt_hub(&hub, "t", &["convert", p(&path), "hf://org/tiny/out.zt"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(support::stderr(&o).contains("hf:// URLs are read, not written"));
}
