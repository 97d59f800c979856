//! The `remote` section of `cargo xtask bench`: the benchmark's model in moto's S3 server on
//! loopback, read through `ztensor::open_url` whole and as one eighth of every tensor (rows
//! `0..n/8` of dimension 0: one rank of eight in tensor parallelism), against downloading the
//! file whole with one GET (object_store, signed like the others). Requests and bytes beside
//! the time (from the object's own counters; the download is one request of the whole file).
//!
//! Needs moto's server: `ZT_TEST_MOTO` (a Python with `moto[server]`, as .ci/run makes in
//! target/moto-venv) or a `python3` that imports it; without it the section says so and
//! is skipped.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::common::Timing;

/// moto's server, killed on drop.
struct Moto(Child);

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One raw HTTP/1.1 request on a fresh connection; returns the status line and body length
/// (moto creates a bucket for a plain PUT).
fn http(port: u16, method: &str, path: &str, body: &[u8]) -> Result<(String, u64)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    // A server that stops answering ends the section with an error, not a hang.
    s.set_read_timeout(Some(Duration::from_secs(300)))?;
    s.set_write_timeout(Some(Duration::from_secs(300)))?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {}\r\nx-amz-acl: public-read\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    s.write_all(body)?;
    let mut answer = Vec::new();
    s.read_to_end(&mut answer)?;
    let head_end = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .context("no end of headers")?;
    let status = String::from_utf8_lossy(&answer[..head_end])
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();
    Ok((status, (answer.len() - head_end - 4) as u64))
}

/// Runs the section over `model` (a .zt), `runs` times each.
pub fn run(model: &Path, runs: usize) -> Result<()> {
    println!(
        "\n== remote: {} in moto's S3 server on loopback",
        model.display()
    );
    let python = std::env::var_os("ZT_TEST_MOTO")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("python3"));
    let ok = Command::new(&python)
        .args(["-c", "import moto.server"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        println!(
            "  skipped: {} cannot import moto.server (pip install 'moto[server]')",
            python.display()
        );
        return Ok(());
    }
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let _moto = Moto(
        Command::new(&python)
            .args([
                "-m",
                "moto.server",
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            bail!("moto's server did not start");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let (status, _) = http(port, "PUT", "/bench", &[])?;
    anyhow::ensure!(status.contains(" 200"), "create bucket: {status}");
    for (k, v) in [
        ("AWS_ACCESS_KEY_ID", "bench".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", "bench".to_owned()),
        ("AWS_REGION", "us-east-1".to_owned()),
        ("AWS_ENDPOINT", format!("http://127.0.0.1:{port}")),
        ("AWS_ALLOW_HTTP", "true".to_owned()),
    ] {
        // The bench is single-threaded here; the variables name only the local server.
        std::env::set_var(k, v);
    }
    let url = "s3://bench/model.zt";
    // Upload in 16 MiB parts (one plain 1 GiB PUT stalls moto), through object_store.
    let (store, path) = ztensor::remote::store::connect(&url::Url::parse(url)?)?;
    let rt = ztensor::remote::store::runtime()?;
    let size = std::fs::metadata(model)?.len();
    rt.block_on(async {
        let mut file = std::fs::File::open(model)?;
        let mut upload = object_store::WriteMultipart::new_with_chunk_size(
            store.put_multipart(&path).await?,
            16 << 20,
        );
        let mut buf = vec![0u8; 16 << 20];
        loop {
            let n = file.read(&mut buf)?;
            if n == 0 {
                break;
            }
            upload.wait_for_capacity(2).await?;
            upload.write(&buf[..n]);
        }
        upload.finish().await?;
        anyhow::Ok(())
    })?;
    println!("  (uploaded {size} bytes in 16 MiB parts)");

    // Downloading the whole file: one signed GET of everything.
    let mut t_get = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let n = rt
            .block_on(async { store.get(&path).await?.bytes().await })?
            .len() as u64;
        t_get.push(t.elapsed());
        anyhow::ensure!(n == size, "download: {n} bytes of {size}");
    }

    // Every tensor, whole, and one eighth of every tensor; in file order on this thread, and
    // on rayon's threads: `Reader::parallel_objects_whole` for whole tensors (batches fetched
    // ahead), `Reader::parallel_objects` for the slices (a request each, bounded in flight).
    let read = |o: ztensor::ObjectView<'_>, eighth: bool| -> ztensor::Result<u64> {
        let n = o.shape.first().copied().unwrap_or(0);
        if !eighth {
            return Ok(o.bytes()?.len() as u64);
        }
        if n < 8 {
            return Ok(0);
        }
        let mut ranges: Vec<std::ops::Range<u64>> = o.shape.iter().map(|&d| 0..d).collect();
        ranges[0] = 0..n / 8;
        Ok(o.slice_bytes(&ranges)?.len() as u64)
    };
    let mut rows = Vec::new();
    for (eighth, parallel) in [(false, false), (false, true), (true, false), (true, true)] {
        let mut times = Vec::new();
        let mut cost = (0, 0);
        for _ in 0..runs {
            let t = Instant::now();
            let (r, object) = ztensor::OpenOptions::new().open_url_counted(url)?;
            let got: u64 = if parallel && !eighth {
                r.parallel_objects_whole(|o| read(o, eighth))
                    .into_iter()
                    .sum::<ztensor::Result<u64>>()?
            } else if parallel {
                r.parallel_objects(|o| read(o, eighth))
                    .into_iter()
                    .sum::<ztensor::Result<u64>>()?
            } else {
                r.iter()
                    .map(|o| read(o, eighth))
                    .sum::<ztensor::Result<u64>>()?
            };
            times.push(t.elapsed());
            let s = object.stats();
            cost = (s.requests, s.bytes);
            anyhow::ensure!(got > 0, "read nothing");
        }
        println!("  (measured eighth={eighth} parallel={parallel})");
        rows.push((eighth, parallel, Timing::of(times), cost));
    }
    let get = Timing::of(t_get);
    let mib = |b: u64| b as f64 / f64::from(1u32 << 20);
    println!(
        "  {:<44} {:>9} {:>15} {:>9} {:>11}",
        "operation", "median", "fastest-slowest", "requests", "MiB moved"
    );
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let spread = |t: Timing| format!("{:.0}-{:.0}", ms(t.fastest), ms(t.slowest));
    println!(
        "  {:<44} {:>7.0}ms {:>15} {:>9} {:>11.1}",
        "download the file whole (one GET)",
        ms(get.median),
        spread(get),
        1,
        mib(size)
    );
    for (eighth, parallel, t, (requests, b)) in rows {
        let what = match (eighth, parallel) {
            (false, false) => "open_url + every tensor whole",
            (false, true) => "  the same, parallel_objects_whole",
            (true, false) => "open_url + rows 0..n/8 of every tensor",
            (true, true) => "  the same, parallel_objects",
        };
        println!(
            "  {what:<44} {:>7.0}ms {:>15} {requests:>9} {:>11.1}",
            ms(t.median),
            spread(t),
            mib(b)
        );
    }
    Ok(())
}
