//! Real servers for the remote tests, started by the tests on loopback: nginx (Debian's
//! `nginx`) serving a folder with Range support and an access log that counts requests and
//! bytes, moto's S3 server (PyPI `moto[server]`), and a small fault-injecting HTTP server of
//! our own.
//!
//! A server that is not installed makes its tests skip (they print why), unless
//! `ZT_TEST_SERVERS=required` (set by .ci/run, which installs them): then it is a failure.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Whether CI said the servers are installed (so a missing one fails instead of skipping).
pub fn required() -> bool {
    std::env::var("ZT_TEST_SERVERS").is_ok_and(|v| v == "required")
}

/// `None` with a message when `what` is missing and not required; a panic when required.
fn missing<T>(what: &str) -> Option<T> {
    if required() {
        panic!("ZT_TEST_SERVERS=required, but {what}");
    }
    eprintln!("skipped: {what}");
    None
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

fn wait_for_port(port: u16, child: &mut Child) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// One request as nginx logged it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Logged {
    pub method: String,
    pub uri: String,
    pub range: String,
    pub status: u16,
    pub body_bytes: u64,
    /// The `Authorization` header as sent ("-" without one).
    pub authorization: String,
}

/// nginx serving `root` on a loopback port.
pub struct Nginx {
    child: Child,
    pub port: u16,
    log: PathBuf,
    _prefix: tempfile::TempDir,
}

impl Nginx {
    /// Starts nginx (`ZT_TEST_NGINX`, else `nginx` on PATH or in /usr/sbin), or `None` when it
    /// is not installed and not required.
    pub fn start(root: &Path) -> Option<Nginx> {
        Self::start_with(root, |_| String::new())
    }

    /// As [`Nginx::start`], with more of nginx's `server` block (`location`s), made from the
    /// port it listens on.
    pub fn start_with(root: &Path, more: impl Fn(u16) -> String) -> Option<Nginx> {
        let binary = std::env::var_os("ZT_TEST_NGINX")
            .map(PathBuf::from)
            .or_else(|| {
                ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx"]
                    .iter()
                    .map(PathBuf::from)
                    .find(|p| p.is_file())
            });
        let Some(binary) = binary else {
            return missing("nginx is not installed (Debian package nginx)");
        };
        let prefix = tempfile::tempdir().unwrap();
        let log = prefix.path().join("access.log");
        for _ in 0..5 {
            let port = free_port();
            let p = prefix.path().display();
            let conf = format!(
                "daemon off; master_process off; worker_processes 1;\n\
                 pid {p}/nginx.pid; error_log {p}/error.log;\n\
                 events {{ worker_connections 64; }}\n\
                 http {{\n\
                   log_format counted '$request_method $uri \"$http_range\" $status $body_bytes_sent \"$http_authorization\"';\n\
                   access_log {p}/access.log counted;\n\
                   client_body_temp_path {p}/body; proxy_temp_path {p}/proxy;\n\
                   fastcgi_temp_path {p}/fastcgi; uwsgi_temp_path {p}/uwsgi; scgi_temp_path {p}/scgi;\n\
                   server {{ listen 127.0.0.1:{port}; root {}; location / {{ }} {} }}\n\
                 }}\n",
                root.display(),
                more(port)
            );
            let conf_path = prefix.path().join("nginx.conf");
            std::fs::write(&conf_path, conf).unwrap();
            let mut child = Command::new(&binary)
                .arg("-p")
                .arg(prefix.path())
                .arg("-c")
                .arg(&conf_path)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("{} does not start: {e}", binary.display()));
            if wait_for_port(port, &mut child) {
                return Some(Nginx {
                    child,
                    port,
                    log,
                    _prefix: prefix,
                });
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let err = std::fs::read_to_string(prefix.path().join("error.log")).unwrap_or_default();
        panic!("nginx is installed but did not start: {err}");
    }

    pub fn url(&self, file: &str) -> String {
        format!("http://127.0.0.1:{}/{file}", self.port)
    }

    /// Every request logged so far. nginx writes a request's line just after its response
    /// is sent, so a client can be done before the line is there: wait until the log has not
    /// grown for 300 ms (at most 10 s) before reading it.
    pub fn requests(&self) -> Vec<Logged> {
        let len = || std::fs::metadata(&self.log).map(|m| m.len()).unwrap_or(0);
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut last = len();
        let mut still_since = Instant::now();
        while Instant::now() < deadline && still_since.elapsed() < Duration::from_millis(300) {
            std::thread::sleep(Duration::from_millis(25));
            let now = len();
            if now != last {
                last = now;
                still_since = Instant::now();
            }
        }
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines()
            .map(|l| {
                let (method, rest) = l.split_once(' ').unwrap();
                let (uri, rest) = rest.split_once(" \"").unwrap();
                let (range, rest) = rest.split_once("\" ").unwrap();
                let (status, rest) = rest.split_once(' ').unwrap();
                let (bytes, authorization) = rest.split_once(" \"").unwrap();
                Logged {
                    method: method.into(),
                    uri: uri.into(),
                    range: range.into(),
                    status: status.parse().unwrap(),
                    body_bytes: bytes.parse().unwrap(),
                    authorization: authorization.trim_end_matches('"').into(),
                }
            })
            .collect()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the fault server does to the n-th ranged GET it is asked (counting from 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Answers correctly.
    None,
    /// Answers 500.
    ServerError,
    /// Sends the headers and half the body, then closes the connection.
    DropMidBody,
    /// Answers 206 with a body half as long as asked (headers consistent with it).
    Short,
    /// Answers correctly after a pause (so that requests made at once overlap).
    Slow,
    /// Ignores the Range header: answers 200 with the whole object, as Python's
    /// `http.server` does.
    IgnoreRanges,
    /// As `IgnoreRanges`, but closes the connection after half the object.
    IgnoreRangesDropMidBody,
    /// As `IgnoreRanges`, but declares this many bytes (`Content-Length`) and sends none.
    IgnoreRangesClaiming(u64),
}

/// A tiny HTTP/1.1 server over `bytes` with Range support, one connection at a time per
/// thread, injecting `faults` by request number; every response closes its connection.
pub struct FaultServer {
    pub port: u16,
    pub gets: Arc<AtomicUsize>,
    /// The most GETs being answered at one time.
    pub peak: Arc<AtomicUsize>,
    /// The target of every request (path and query), in the order they came.
    pub targets: Arc<std::sync::Mutex<Vec<String>>>,
}

impl FaultServer {
    pub fn start(bytes: Vec<u8>, faults: impl Fn(usize) -> Fault + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let gets = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let active = Arc::new(AtomicUsize::new(0));
        let state = (Arc::new(bytes), Arc::new(faults), gets.clone());
        let (peak_seen, active_now) = (peak.clone(), active);
        let targets = Arc::new(std::sync::Mutex::new(Vec::new()));
        let targets_seen = targets.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (bytes, faults, gets) = (state.0.clone(), state.1.clone(), state.2.clone());
                let (peak, active) = (peak_seen.clone(), active_now.clone());
                let targets = targets_seen.clone();
                std::thread::spawn(move || {
                    let in_flight = InFlight {
                        active: &active,
                        peak: &peak,
                    };
                    let _ = serve(stream, &bytes, &*faults, &gets, &in_flight, &targets);
                });
            }
        });
        FaultServer {
            port,
            gets,
            peak,
            targets,
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/model.zt", self.port)
    }
}

/// Counts the requests the server holds: from the moment one has arrived until its answer
/// starts (the client cannot have an answer before then, so its next request never overlaps
/// one already answered, however late the answering thread ends).
struct InFlight<'a> {
    active: &'a AtomicUsize,
    peak: &'a AtomicUsize,
}

impl InFlight<'_> {
    /// A request arrived; the returned guard ends it when dropped.
    fn arrived(&self) -> impl Drop + '_ {
        let now = self.active.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        Answered(self.active)
    }
}

struct Answered<'a>(&'a AtomicUsize);

impl Drop for Answered<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn serve(
    stream: TcpStream,
    bytes: &[u8],
    faults: &(dyn Fn(usize) -> Fault + Send + Sync),
    gets: &AtomicUsize,
    in_flight: &InFlight<'_>,
    targets: &std::sync::Mutex<Vec<String>>,
) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut out = stream;
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let method = line.split(' ').next().unwrap_or("").to_owned();
    let target = line.split(' ').nth(1).unwrap_or("").to_owned();
    targets
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(target);
    let mut range = None;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("range") {
                range = Some(v.trim().to_owned());
            }
        }
    }
    let held = in_flight.arrived();
    let size = bytes.len() as u64;
    let (start, end) = match range.as_deref().and_then(|r| r.strip_prefix("bytes=")) {
        Some(r) => {
            let (a, b) = r.split_once('-').unwrap_or((r, ""));
            let a: u64 = a.parse().unwrap_or(0);
            let b: u64 = b.parse().map(|b: u64| b + 1).unwrap_or(size).min(size);
            (a, b)
        }
        None => (0, size),
    };
    let common =
        "Last-Modified: Mon, 02 Jan 2006 15:04:05 GMT\r\nETag: \"1\"\r\nConnection: close\r\n";
    if method == "HEAD" {
        drop(held);
        write!(
            out,
            "HTTP/1.1 200 OK\r\nContent-Length: {size}\r\n{common}\r\n"
        )?;
        return out.flush();
    }
    let n = gets.fetch_add(1, Ordering::SeqCst);
    let fault = faults(n);
    let (range, start, end) = match fault {
        Fault::IgnoreRanges | Fault::IgnoreRangesDropMidBody | Fault::IgnoreRangesClaiming(_) => {
            (None, 0, size)
        }
        _ => (range, start, end),
    };
    let body = bytes.get(start as usize..end as usize).unwrap_or_default();
    let status = if range.is_some() {
        "206 Partial Content"
    } else {
        "200 OK"
    };
    if matches!(fault, Fault::Slow) {
        std::thread::sleep(Duration::from_millis(150));
    }
    drop(held);
    match fault {
        Fault::ServerError => {
            write!(
                out,
                "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n{common}\r\n"
            )?;
        }
        Fault::DropMidBody => {
            write!(
                out,
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nContent-Range: bytes {start}-{}/{size}\r\n{common}\r\n",
                body.len(),
                end.saturating_sub(1)
            )?;
            out.write_all(&body[..body.len() / 2])?;
            out.flush()?;
            let _ = out.shutdown(std::net::Shutdown::Both);
            return Ok(());
        }
        Fault::Short => {
            let short = &body[..body.len() / 2];
            let last = start + short.len() as u64;
            write!(
                out,
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nContent-Range: bytes {start}-{}/{size}\r\n{common}\r\n",
                short.len(),
                last.saturating_sub(1)
            )?;
            out.write_all(short)?;
        }
        Fault::IgnoreRangesClaiming(claimed) => {
            write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Length: {claimed}\r\n{common}\r\n"
            )?;
            out.flush()?;
            let _ = out.shutdown(std::net::Shutdown::Both);
            return Ok(());
        }
        Fault::IgnoreRanges | Fault::IgnoreRangesDropMidBody => {
            write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n{common}\r\n",
                body.len()
            )?;
            if fault == Fault::IgnoreRanges {
                out.write_all(body)?;
            } else {
                out.write_all(&body[..body.len() / 2])?;
                out.flush()?;
                let _ = out.shutdown(std::net::Shutdown::Both);
                return Ok(());
            }
        }
        Fault::None | Fault::Slow => {
            write!(
                out,
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nContent-Range: bytes {start}-{}/{size}\r\n{common}\r\n",
                body.len(),
                end.saturating_sub(1)
            )?;
            out.write_all(body)?;
        }
    }
    out.flush()
}

/// moto's S3 server (`ZT_TEST_MOTO`: its Python, e.g. target/moto-venv/bin/python; else a
/// `python3` that can import moto), on a loopback port.
pub struct Moto {
    child: Child,
    pub port: u16,
}

impl Moto {
    pub fn start() -> Option<Moto> {
        let python = std::env::var_os("ZT_TEST_MOTO")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("python3"));
        let has_moto = Command::new(&python)
            .args(["-c", "import moto.server"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !has_moto {
            return missing(&format!(
                "{} cannot import moto.server (PyPI moto[server])",
                python.display()
            ));
        }
        for _ in 0..5 {
            let port = free_port();
            let mut child = Command::new(&python)
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
                .spawn()
                .unwrap();
            if wait_for_port(port, &mut child) {
                return Some(Moto { child, port });
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("moto is installed but its server did not start");
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A counting proxy in front of a server: forwards each connection's bytes both ways and
/// counts requests (request lines seen) and response bytes.
pub struct CountingProxy {
    pub port: u16,
    pub requests: Arc<AtomicUsize>,
    pub response_bytes: Arc<AtomicUsize>,
    pub lines: Arc<Mutex<Vec<String>>>,
}

impl CountingProxy {
    pub fn start(upstream: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(AtomicUsize::new(0));
        let response_bytes = Arc::new(AtomicUsize::new(0));
        let lines = Arc::new(Mutex::new(Vec::new()));
        let (r, b, l) = (requests.clone(), response_bytes.clone(), lines.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                    continue;
                };
                let (r, b, l) = (r.clone(), b.clone(), l.clone());
                let (mut c_read, mut s_write) =
                    (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || {
                    // Client to server: count request lines (methods at a line start).
                    let mut buf = vec![0u8; 64 << 10];
                    while let Ok(n) = c_read.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        let chunk = &buf[..n];
                        for line in chunk.split(|&c| c == b'\n') {
                            let text = String::from_utf8_lossy(line);
                            if ["GET ", "PUT ", "HEAD ", "POST ", "DELETE "]
                                .iter()
                                .any(|m| text.starts_with(m))
                            {
                                r.fetch_add(1, Ordering::SeqCst);
                                l.lock().unwrap().push(text.trim_end().to_owned());
                            }
                        }
                        if s_write.write_all(chunk).is_err() {
                            break;
                        }
                    }
                    let _ = s_write.shutdown(std::net::Shutdown::Write);
                });
                let (mut s_read, mut c_write) = (server, client);
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; 64 << 10];
                    while let Ok(n) = s_read.read(&mut buf) {
                        if n == 0 || c_write.write_all(&buf[..n]).is_err() {
                            break;
                        }
                        b.fetch_add(n, Ordering::SeqCst);
                    }
                    let _ = c_write.shutdown(std::net::Shutdown::Write);
                });
            }
        });
        CountingProxy {
            port,
            requests,
            response_bytes,
            lines,
        }
    }
}

/// One PUT with a body, over a fresh connection; panics unless it succeeds.
pub fn http_put(port: u16, path: &str, body: &[u8]) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "PUT {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    s.write_all(body).unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}
