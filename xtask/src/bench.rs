//! `cargo xtask bench`: ours against safetensors and against the machine's own limits, side by
//! side in one run on the same files (page cache warm, medians of several runs). Results and
//! the command are in docs/benchmarks.md.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use half::bf16;
use sha2::Digest as _;
use ztensor::{DigestAlgorithm, OpenOptions, WriteOptions, Writer};

/// One tensor of the workload.
struct Tensor {
    name: String,
    shape: Vec<u64>,
    dims: Vec<usize>,
    bf16: bool,
    bytes: Vec<u8>,
}

fn xorshift(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// A model-like workload of about 1 GiB: per layer four 1024x1024 f32 attention matrices, two
/// 1024x2816 bf16 MLP matrices and two f32 norm vectors; embeddings and head in bf16.
fn workload(compressible: bool, scale: usize) -> Vec<Tensor> {
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut make = |name: String, shape: Vec<u64>, bf: bool| {
        let n: u64 = shape.iter().product();
        let mut bytes = Vec::with_capacity(n as usize * if bf { 2 } else { 4 });
        for _ in 0..n {
            let r = xorshift(&mut seed);
            // Compressible data: few distinct values, like quantization-friendly weights.
            let x = if compressible {
                ((r % 16) as f32 - 8.0) * 0.125
            } else {
                f32::from_bits(0x3c00_0000 | (r as u32 & 0x00ff_ffff))
            };
            if bf {
                bytes.extend_from_slice(&bf16::from_f32(x).to_le_bytes());
            } else {
                bytes.extend_from_slice(&x.to_le_bytes());
            }
        }
        Tensor {
            name,
            dims: shape.iter().map(|&d| d as usize).collect(),
            shape,
            bf16: bf,
            bytes,
        }
    };
    let mut v = vec![make(
        "embed.weight".into(),
        vec![32000 / scale as u64, 1024],
        true,
    )];
    for l in 0..32 / scale {
        for m in ["q", "k", "v", "o"] {
            v.push(make(
                format!("layers.{l}.attn.{m}.weight"),
                vec![1024, 1024],
                false,
            ));
        }
        v.push(make(
            format!("layers.{l}.mlp.up.weight"),
            vec![2816, 1024],
            true,
        ));
        v.push(make(
            format!("layers.{l}.mlp.down.weight"),
            vec![1024, 2816],
            true,
        ));
        v.push(make(format!("layers.{l}.norm1.weight"), vec![1024], false));
        v.push(make(format!("layers.{l}.norm2.weight"), vec![1024], false));
    }
    v.push(make(
        "head.weight".into(),
        vec![32000 / scale as u64, 1024],
        true,
    ));
    v
}

/// Reads every byte: an XOR fold of 64-bit words, the same for every path measured.
fn touch(b: &[u8]) -> u64 {
    let mut acc = 0u64;
    let mut chunks = b.chunks_exact(64);
    for c in &mut chunks {
        let w: &[u64] = bytemuck::cast_slice(c).get(..8).unwrap_or(&[]);
        let mut x = 0u64;
        for &y in w {
            x ^= y;
        }
        acc ^= x;
    }
    for &r in chunks.remainder() {
        acc ^= u64::from(r);
    }
    acc
}

/// Like [`touch`], for byte slices of any alignment (copies to align where needed).
fn touch_any(b: &[u8]) -> u64 {
    if b.as_ptr().align_offset(8) == 0 {
        touch(b)
    } else {
        let v: Vec<u64> = bytemuck::pod_collect_to_vec(b.get(..b.len() / 8 * 8).unwrap_or(&[]));
        touch(bytemuck::cast_slice(&v))
    }
}

fn median(runs: usize, mut f: impl FnMut() -> Result<()>) -> Result<Duration> {
    f()?; // warm-up: page cache, allocator, lazy statics
    let mut t = Vec::with_capacity(runs);
    for _ in 0..runs {
        // Start every run with no dirty pages left by the previous one: otherwise write rows
        // measure the kernel's writeback of earlier runs.
        let _ = Command::new("sync").status();
        let s = Instant::now();
        f()?;
        t.push(s.elapsed());
    }
    t.sort();
    Ok(t[runs / 2])
}

/// Medians of several measurements taken in turns (A B C, A B C, ...), so that drift in the
/// machine (other tenants, the page cache, CPU frequency) lands on every row alike instead of
/// on whichever row ran during it.
fn interleaved<const N: usize>(
    runs: usize,
    fs: &mut [&mut dyn FnMut() -> Result<()>; N],
) -> Result<[Duration; N]> {
    measure_in_turns(runs, None, fs)
}

/// As [`interleaved`], with a `sync` before every measurement, so that write rows do not
/// measure the kernel's writeback of earlier runs.
///
/// Each row's output file (`outputs`) is removed first, untimed. Otherwise a row that
/// truncates its old file (plain, safetensors) reuses the pages just freed, while one that
/// writes a new file and renames it over the old one (ours, for crash safety) needs fresh
/// memory; in a virtual machine whose host reclaims freed guest memory, the first touch of
/// fresh pages is slow, and that alone made our writes look up to 2x slower.
fn interleaved_synced<const N: usize>(
    runs: usize,
    outputs: [Option<&Path>; N],
    fs: &mut [&mut dyn FnMut() -> Result<()>; N],
) -> Result<[Duration; N]> {
    measure_in_turns(runs, Some(outputs), fs)
}

/// As [`interleaved`], with the page cache dropped before every measurement: every row reads
/// its file from the disk. Needs root; see [`drop_page_cache`].
fn interleaved_cold<const N: usize>(
    runs: usize,
    fs: &mut [&mut dyn FnMut() -> Result<()>; N],
) -> Result<[Duration; N]> {
    measure(runs, None, true, fs)
}

/// Writes back dirty pages and drops the clean ones from the page cache, so that the next
/// read comes from the disk. Only root may; `false` when this process may not.
fn drop_page_cache() -> bool {
    let _ = Command::new("sync").status();
    std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok()
}

/// How many bytes of `path` are in the page cache (`mincore` over a map of it).
#[cfg(target_os = "linux")]
fn resident_bytes(path: &Path) -> Result<u64> {
    let f = File::open(path)?;
    // SAFETY: a benchmark file, not modified while mapped; the map is only passed to mincore.
    let map = unsafe { memmap2::Mmap::map(&f)? };
    let page = 4096usize;
    let mut flags = vec![0u8; map.len().div_ceil(page)];
    // SAFETY: `flags` has one byte per page of the mapped range, as mincore requires.
    let rc = unsafe {
        libc::mincore(
            map.as_ptr() as *mut libc::c_void,
            map.len(),
            flags.as_mut_ptr(),
        )
    };
    anyhow::ensure!(
        rc == 0,
        "mincore failed: {}",
        std::io::Error::last_os_error()
    );
    Ok(flags.iter().filter(|&&b| b & 1 == 1).count() as u64 * page as u64)
}

fn measure_in_turns<const N: usize>(
    runs: usize,
    outputs: Option<[Option<&Path>; N]>,
    fs: &mut [&mut dyn FnMut() -> Result<()>; N],
) -> Result<[Duration; N]> {
    measure(runs, outputs, false, fs)
}

fn measure<const N: usize>(
    runs: usize,
    outputs: Option<[Option<&Path>; N]>,
    cold: bool,
    fs: &mut [&mut dyn FnMut() -> Result<()>; N],
) -> Result<[Duration; N]> {
    for f in fs.iter_mut() {
        f()?; // warm-up
    }
    let mut t = vec![Vec::with_capacity(runs); N];
    for _ in 0..runs {
        for (i, (f, times)) in fs.iter_mut().zip(t.iter_mut()).enumerate() {
            if cold {
                anyhow::ensure!(drop_page_cache(), "cannot drop the page cache");
                // This machine is a virtual machine that hands freed memory back to its host
                // 2 s after it is freed (free page reporting), and taking it back costs a
                // fault in the host. Without a wait, a row ran before or after that moment
                // by chance: rows alternated between 0.5 s and 1.4 s. After the wait every
                // row starts in the same state.
                std::thread::sleep(Duration::from_secs(3));
            }
            if let Some(outputs) = &outputs {
                if let Some(path) = outputs.get(i).copied().flatten() {
                    let _ = std::fs::remove_file(path);
                }
                let _ = Command::new("sync").status();
                // Let the machine hand the memory just freed back to its host (see the cold
                // rows): every row then writes into memory in the same state.
                std::thread::sleep(Duration::from_secs(3));
            }
            // Let work a previous row left to background threads (a populated map is
            // unmapped on its own thread after the reader is dropped) finish first, so it
            // does not land on this row.
            std::thread::sleep(Duration::from_millis(50));
            let s = Instant::now();
            f()?;
            times.push(s.elapsed());
        }
    }
    let mut out = [Duration::ZERO; N];
    for (o, mut times) in out.iter_mut().zip(t) {
        times.sort();
        *o = times[runs / 2];
        if cold {
            // The disk of a virtual machine is noisy: show the spread with the median.
            let ms: Vec<String> = times
                .iter()
                .map(|t| format!("{:.0}", t.as_secs_f64() * 1e3))
                .collect();
            println!("  (cold runs, ms: {})", ms.join(" "));
        }
    }
    Ok(out)
}

struct Table {
    rows: Vec<(String, String, Duration, Option<String>)>,
}

impl Table {
    fn add(&mut self, group: &str, name: &str, d: Duration, vs: Option<(Duration, &str)>) {
        let ratio =
            vs.map(|(base, what)| format!("{:.3}x {what}", d.as_secs_f64() / base.as_secs_f64()));
        println!(
            "  {group:<10} {name:<46} {:>9.1} ms  {}",
            d.as_secs_f64() * 1e3,
            ratio.clone().unwrap_or_default()
        );
        self.rows.push((group.into(), name.into(), d, ratio));
    }
}

fn gib_per_s(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / f64::from(1u32 << 30)
}

struct View<'a>(&'a Tensor);

impl safetensors::View for View<'_> {
    fn dtype(&self) -> safetensors::Dtype {
        if self.0.bf16 {
            safetensors::Dtype::BF16
        } else {
            safetensors::Dtype::F32
        }
    }
    fn shape(&self) -> &[usize] {
        &self.0.dims
    }
    fn data(&self) -> std::borrow::Cow<'_, [u8]> {
        std::borrow::Cow::Borrowed(&self.0.bytes)
    }
    fn data_len(&self) -> usize {
        self.0.bytes.len()
    }
}

fn write_zt(tensors: &[Tensor], path: &Path, opts: WriteOptions) -> Result<()> {
    write_zt_with(tensors, path, opts, ztensor::Durability::Synced)
}

fn write_zt_with(
    tensors: &[Tensor],
    path: &Path,
    opts: WriteOptions,
    durability: ztensor::Durability,
) -> Result<()> {
    // The benchmark's rows measure v1.2 (docs/benchmarks.md).
    let mut w = Writer::create_version(path, ztensor::Version::V1_2, durability)?;
    w.set_options(opts);
    for t in tensors {
        let obj = ztensor::ObjectData {
            shape: t.shape.clone(),
            format: ztensor::Format::Dense,
            attributes: Default::default(),
            components: vec![ztensor::ComponentData {
                role: "data".into(),
                element: ztensor::ElementType::plain(if t.bf16 {
                    ztensor::DType::BF16
                } else {
                    ztensor::DType::F32
                }),
                bytes: std::borrow::Cow::Borrowed(&t.bytes),
            }],
        };
        w.add_object(&t.name, obj)?;
    }
    w.finish()?;
    Ok(())
}

fn read_zt(path: &Path, options: OpenOptions) -> Result<u64> {
    let r = options.open(path)?;
    let mut acc = 0;
    for o in r.objects() {
        acc ^= if o.element_type().map(|t| t.name()) == Some("bf16") {
            touch(bytemuck::cast_slice(&r.read::<bf16>(&o.name)?))
        } else {
            touch(bytemuck::cast_slice(&r.read::<f32>(&o.name)?))
        };
    }
    Ok(acc)
}

/// As [`read_zt`], walking the file in file order (`for o in &reader`).
fn read_zt_walk(path: &Path, options: OpenOptions) -> Result<u64> {
    let r = options.open(path)?;
    let mut acc = 0;
    for o in &r {
        acc ^= if o.element_type().map(|t| t.name()) == Some("bf16") {
            touch(bytemuck::cast_slice(&o.read::<bf16>()?))
        } else {
            touch(bytemuck::cast_slice(&o.read::<f32>()?))
        };
    }
    Ok(acc)
}

/// A measured call whose result is kept from the optimizer, as the timing loops take it.
fn consumed(read: impl Fn() -> Result<u64>) -> impl FnMut() -> Result<()> {
    move || {
        read().map(|x| {
            std::hint::black_box(x);
        })
    }
}

/// Reads a file front to back with plain `read` calls into one reused buffer of `piece`
/// bytes, touching every byte: the machine's own limit for loading a file.
fn read_sequential(path: &Path, piece: usize) -> Result<u64> {
    let mut f = File::open(path)?;
    let mut buf = vec![0u8; piece];
    let mut acc = 0;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        acc ^= touch_any(&buf[..n]);
    }
    Ok(acc)
}

/// safetensors' own reader over a memmap2 map, touching every tensor in its order.
fn read_safetensors_mapped(path: &Path) -> Result<u64> {
    let f = File::open(path)?;
    // SAFETY: benchmark file, not modified while mapped.
    let map = unsafe { memmap2::Mmap::map(&f)? };
    let s = safetensors::SafeTensors::deserialize(&map)?;
    let mut acc = 0;
    for (_, v) in s.iter() {
        acc ^= touch_any(v.data());
    }
    Ok(acc)
}

/// Reads every tensor without a map, through `read_chunked`'s 1 MiB pieces.
fn read_zt_chunked(path: &Path) -> Result<u64> {
    let r = OpenOptions::new().unmapped(true).open(path)?;
    let (mut f, mut b) = (Vec::<f32>::new(), Vec::<bf16>::new());
    let mut acc = 0;
    for o in &r {
        if o.element_type().map(|t| t.name()) == Some("bf16") {
            o.read_chunked(&mut b, |p| {
                acc ^= touch(bytemuck::cast_slice(p));
                Ok(())
            })?;
        } else {
            o.read_chunked(&mut f, |p| {
                acc ^= touch(bytemuck::cast_slice(p));
                Ok(())
            })?;
        }
    }
    Ok(acc)
}

pub fn run(args: &[&str]) -> Result<()> {
    if cfg!(debug_assertions) {
        // Benchmarks of a debug build mean nothing: run ourselves again, optimized.
        let status = Command::new("cargo")
            .args([
                "run",
                "--quiet",
                "--release",
                "--package",
                "xtask",
                "--",
                "bench",
            ])
            .args(args)
            .status()?;
        std::process::exit(status.code().unwrap_or(1));
    }
    let scale: usize = args
        .windows(2)
        .find(|w| w[0] == "--scale")
        .and_then(|w| w[1].parse().ok())
        .unwrap_or(1);
    let runs = 5;
    // `--only read,open`: just those sections (files they need are made once, untimed).
    let only: Option<Vec<&str>> = args
        .windows(2)
        .find(|w| w[0] == "--only")
        .map(|w| w[1].split(',').collect());
    let want = |section: &str| only.as_ref().is_none_or(|o| o.contains(&section));
    // One folder per scale: files made at one scale are never read as another's.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/bench-data")
        .join(format!("scale-{scale}"));
    std::fs::create_dir_all(&dir)?;
    let mut table = Table { rows: Vec::new() };
    let tensors = workload(false, scale);
    let total: u64 = tensors.iter().map(|t| t.bytes.len() as u64).sum();
    println!(
        "workload: {} tensors, {:.2} GiB, {} cores",
        tensors.len(),
        total as f64 / f64::from(1u32 << 30),
        ztensor::formats::available_threads()
    );

    let zt = dir.join("model.zt");
    let st = dir.join("model.safetensors");
    let zt_sha = dir.join("model_sha256.zt");
    let (mut t_plain, mut t_sha_raw) = (None, None);
    if want("write") {
        // --- write ---
        let plain = dir.join("model.raw");
        let sha = WriteOptions {
            compression: None,
            digest: Some(DigestAlgorithm::Sha256),
        };
        let mut plain_all = || {
            let mut f = BufWriter::with_capacity(1 << 20, File::create(&plain)?);
            for t in &tensors {
                f.write_all(&t.bytes)?;
            }
            f.into_inner().context("flush")?.sync_all()?;
            Ok(())
        };
        // Into the page cache only: what a user who asks for no durability waits for.
        let plain_nosync = dir.join("model-nosync.raw");
        let zt_nosync = dir.join("model-nosync.zt");
        let mut plain_cached = || {
            let mut f = BufWriter::with_capacity(1 << 20, File::create(&plain_nosync)?);
            for t in &tensors {
                f.write_all(&t.bytes)?;
            }
            f.flush()?;
            Ok(())
        };
        let mut ours_unsynced = || {
            let unsynced = ztensor::Durability::Unsynced;
            write_zt_with(&tensors, &zt_nosync, WriteOptions::default(), unsynced)
        };
        let mut ours = || write_zt(&tensors, &zt, WriteOptions::default());
        let mut st_write = || {
            let views: Vec<(&str, View<'_>)> =
                tensors.iter().map(|t| (t.name.as_str(), View(t))).collect();
            safetensors::serialize_to_file(views, None, &st)?;
            File::open(&st)?.sync_all()?;
            Ok(())
        };
        let mut hash_only = || {
            for t in &tensors {
                std::hint::black_box(sha2::Sha256::digest(&t.bytes));
            }
            Ok(())
        };
        let mut ours_sha = || write_zt(&tensors, &zt_sha, sha);
        // Into memory (tmpfs), where the disk cannot blur whether hashing overlaps writing.
        let shm = Path::new("/dev/shm");
        let in_memory = shm
            .is_dir()
            .then(|| shm.join(format!("zt-bench-{}.zt", std::process::id())));
        let mut ours_mem = || match &in_memory {
            Some(p) => write_zt(&tensors, p, WriteOptions::default()),
            None => Ok(()),
        };
        let mut ours_sha_mem = || match &in_memory {
            Some(p) => write_zt(&tensors, p, sha),
            None => Ok(()),
        };
        let outputs = [
            Some(plain.as_path()),
            Some(zt.as_path()),
            Some(st.as_path()),
            None,
            Some(zt_sha.as_path()),
            in_memory.as_deref(),
            in_memory.as_deref(),
            Some(plain_nosync.as_path()),
            Some(zt_nosync.as_path()),
        ];
        let [plain_write, t_ours, t_st, t_hash, t_ours_sha, t_mem, t_sha_mem, t_plain_cached, t_unsynced] =
            interleaved_synced(
                runs,
                outputs,
                &mut [
                    &mut plain_all,
                    &mut ours,
                    &mut st_write,
                    &mut hash_only,
                    &mut ours_sha,
                    &mut ours_mem,
                    &mut ours_sha_mem,
                    &mut plain_cached,
                    &mut ours_unsynced,
                ],
            )?;
        let _ = std::fs::remove_file(&plain_nosync);
        let _ = std::fs::remove_file(&zt_nosync);
        if let Some(p) = &in_memory {
            let _ = std::fs::remove_file(p);
        }
        for (row, time, baseline) in [
            ("plain write_all + fsync (limit)", plain_write, None),
            (
                "ztensor Writer (temp file, fsync, rename)",
                t_ours,
                Some((plain_write, "plain")),
            ),
            (
                "safetensors serialize_to_file + fsync",
                t_st,
                Some((plain_write, "plain")),
            ),
            ("plain write_all, no fsync (limit)", t_plain_cached, None),
            (
                "ztensor Writer, Durability::Unsynced (temp file, rename)",
                t_unsynced,
                Some((t_plain_cached, "plain, no fsync")),
            ),
            ("sha256 of every tensor, one core (no I/O)", t_hash, None),
            (
                "ztensor Writer with sha256 digests",
                t_ours_sha,
                Some((plain_write.max(t_hash), "max(plain, sha256)")),
            ),
        ] {
            table.add("write", row, time, baseline);
        }
        if in_memory.is_some() {
            table.add("write", "ztensor Writer into tmpfs (no disk)", t_mem, None);
            table.add(
                "write",
                "ztensor Writer into tmpfs, sha256 digests",
                t_sha_mem,
                Some((t_mem.max(t_hash), "max(tmpfs write, sha256)")),
            );
        }
        t_plain = Some(plain_write);
    } else {
        // Later sections read these files: make them once, untimed.
        if !zt.exists() {
            write_zt(&tensors, &zt, WriteOptions::default())?;
        }
        if !st.exists() {
            let views: Vec<(&str, View<'_>)> =
                tensors.iter().map(|t| (t.name.as_str(), View(t))).collect();
            safetensors::serialize_to_file(views, None, &st)?;
        }
        if !zt_sha.exists() {
            let sha = WriteOptions {
                compression: None,
                digest: Some(DigestAlgorithm::Sha256),
            };
            write_zt(&tensors, &zt_sha, sha)?;
        }
    }

    if want("read") {
        // --- read every tensor, page cache warm ---
        // As a user's files are: read in from the disk once (not left by our own writer a
        // moment ago, whose pages the kernel holds in larger pieces that fault in faster).
        for f in [&zt, &st] {
            if drop_page_cache() {
                std::hint::black_box(read_sequential(f, 4 << 20)?);
            }
        }
        // The limit: the file's bytes in memory, in huge pages where the kernel gives them
        // (a 1 GiB buffer of 4 KiB pages scanned slower than the page cache's large folios,
        // which made the "limit" slower than the mapped reads it bounds).
        let whole = {
            let mut f = File::open(&zt)?;
            let len = f.metadata()?.len() as usize;
            let mut v: Vec<u8> = Vec::with_capacity(len);
            ztensor::container::internal::prefer_huge_pages(&mut v);
            f.read_to_end(&mut v)?;
            v
        };
        let ranges: Vec<(u64, u64)> = {
            let r = ztensor::open(&zt)?;
            r.objects()
                .iter()
                .map(|o| (o.components[0].offset, o.components[0].length))
                .collect()
        };
        let mut scan = || {
            let mut acc = 0;
            for &(o, l) in &ranges {
                acc ^= touch(&whole[o as usize..(o + l) as usize]);
            }
            std::hint::black_box(acc);
            Ok(())
        };
        let mut mapped = consumed(|| read_zt(&zt, OpenOptions::new()));
        let mut populated = consumed(|| read_zt(&zt, OpenOptions::new().populate(true)));
        let mut walked = consumed(|| read_zt_walk(&zt, OpenOptions::new()));
        let mut st_mapped = consumed(|| read_safetensors_mapped(&st));
        let mut kernel = consumed(|| read_sequential(&zt, 1 << 20));
        let mut fresh = consumed(|| read_zt(&zt, OpenOptions::new().unmapped(true)));
        let mut into = || {
            let r = OpenOptions::new().unmapped(true).open(&zt)?;
            let (mut f, mut b) = (Vec::<f32>::new(), Vec::<bf16>::new());
            let mut acc = 0;
            for o in &r {
                acc ^= if o.element_type().map(|t| t.name()) == Some("bf16") {
                    o.read_into(&mut b)?;
                    touch(bytemuck::cast_slice(&b))
                } else {
                    o.read_into(&mut f)?;
                    touch(bytemuck::cast_slice(&f))
                };
            }
            std::hint::black_box(acc);
            Ok(())
        };
        let mut chunked = consumed(|| read_zt_chunked(&zt));
        let [t_scan, t_mapped, t_walked, t_populated, t_st_read, t_kernel, t_unmapped, t_into, t_chunked] =
            interleaved(
                runs,
                &mut [
                    &mut scan,
                    &mut mapped,
                    &mut walked,
                    &mut populated,
                    &mut st_mapped,
                    &mut kernel,
                    &mut fresh,
                    &mut into,
                    &mut chunked,
                ],
            )?;
        drop(whole);
        for (row, time, baseline) in [
            ("in-memory scan of the same bytes (limit)", t_scan, None),
            (
                "ztensor default: open, read each by name",
                t_mapped,
                Some((t_scan, "scan")),
            ),
            (
                "ztensor default: open, for o in &reader (file order)",
                t_walked,
                Some((t_scan, "scan")),
            ),
            (
                "ztensor mapped, populate(true): faults on core 2",
                t_populated,
                Some((t_scan, "scan")),
            ),
            (
                "safetensors over memmap2",
                t_st_read,
                Some((t_scan, "scan")),
            ),
            (
                "1 MiB reads into one reused buffer (kernel copy)",
                t_kernel,
                Some((t_scan, "scan")),
            ),
            (
                "ztensor without a map, a fresh buffer per tensor",
                t_unmapped,
                Some((t_kernel, "kernel copy")),
            ),
            (
                "ztensor without a map, read_into a reused buffer",
                t_into,
                Some((t_kernel, "kernel copy")),
            ),
            (
                "ztensor without a map, read_chunked (1 MiB pieces)",
                t_chunked,
                Some((t_kernel, "kernel copy")),
            ),
        ] {
            table.add("read", row, time, baseline);
        }
        println!(
            "  read rates: scan {:.1} GiB/s, mapped {:.1} GiB/s",
            gib_per_s(total, t_scan),
            gib_per_s(total, t_mapped)
        );
    }

    if want("cold") {
        // --- load every tensor from the disk: page cache dropped before every call ---
        if !drop_page_cache() {
            println!(
                "  cold rows skipped: only root may drop the page cache (/proc/sys/vm/drop_caches)"
            );
        } else {
            let cold_runs = 5;
            let mut sequential = consumed(|| read_sequential(&zt, 4 << 20));
            let mut by_name = consumed(|| read_zt(&zt, OpenOptions::new()));
            let mut walked = consumed(|| read_zt_walk(&zt, OpenOptions::new()));
            let mut populated = consumed(|| read_zt(&zt, OpenOptions::new().populate(true)));
            let mut chunked = consumed(|| read_zt_chunked(&zt));
            let mut st_mapped = consumed(|| read_safetensors_mapped(&st));
            let [t_seq, t_name, t_walk, t_pop, t_chunk, t_st] = interleaved_cold(
                cold_runs,
                &mut [
                    &mut sequential,
                    &mut by_name,
                    &mut walked,
                    &mut populated,
                    &mut chunked,
                    &mut st_mapped,
                ],
            )?;
            for (row, time, baseline) in [
                ("sequential read, 4 MiB pieces (limit)", t_seq, None),
                (
                    "ztensor default: open, read each by name",
                    t_name,
                    Some((t_seq, "sequential")),
                ),
                (
                    "ztensor default: for o in &reader",
                    t_walk,
                    Some((t_seq, "sequential")),
                ),
                ("ztensor populate(true)", t_pop, Some((t_seq, "sequential"))),
                (
                    "ztensor without a map, read_chunked",
                    t_chunk,
                    Some((t_seq, "sequential")),
                ),
                (
                    "safetensors over memmap2",
                    t_st,
                    Some((t_seq, "sequential")),
                ),
            ] {
                table.add("cold", row, time, baseline);
            }
            // A tool that looks at one tensor of a large file reads that tensor only.
            let zt_bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/release/zt");
            let one = &tensors[tensors.len() / 2];
            if zt_bin.exists() {
                anyhow::ensure!(drop_page_cache(), "cannot drop the page cache");
                let s = Instant::now();
                let out = Command::new(&zt_bin)
                    .arg("cat")
                    .arg(&zt)
                    .arg(&one.name)
                    .stdout(std::process::Stdio::null())
                    .status()?;
                let t = s.elapsed();
                anyhow::ensure!(out.success(), "zt cat failed");
                #[cfg(target_os = "linux")]
                println!(
                    "  cold       zt cat of one {:.1} MiB tensor read {:.1} MiB of the {:.0} MiB file in {:.1} ms",
                    one.bytes.len() as f64 / 1048576.0,
                    resident_bytes(&zt)? as f64 / 1048576.0,
                    std::fs::metadata(&zt)?.len() as f64 / 1048576.0,
                    t.as_secs_f64() * 1e3
                );
            } else {
                println!("  (build target/release/zt for the zt cat row: cargo build --release -p zt-cli)");
            }
        }
    }

    if want("open") {
        // --- open only: 100,000 tensors of 16 f32 ---
        let many_zt = dir.join("many.zt");
        let many_st = dir.join("many.safetensors");
        // The same names and values tools/bench/many_original.py writes with the original.
        let many_original = dir.join("many-original.zt");
        let names: Vec<String> = (0..100_000)
            .map(|i| format!("blk.{}.expert.{}.w{}", i / 500, i / 5 % 100, i % 5))
            .collect();
        {
            let mut w = Writer::create_version(
                &many_zt,
                ztensor::Version::V1_2,
                ztensor::Durability::Synced,
            )?;
            let mut views = Vec::new();
            let small: Vec<Tensor> = names
                .iter()
                .map(|n| Tensor {
                    name: n.clone(),
                    shape: vec![16],
                    dims: vec![16],
                    bf16: false,
                    bytes: vec![0; 64],
                })
                .collect();
            for t in &small {
                w.add(&t.name, &[16], &[0f32; 16])?;
                views.push((t.name.as_str(), View(t)));
            }
            w.finish()?;
            safetensors::serialize_to_file(views, None, &many_st)?;
        }
        let mut st_open = || {
            let f = File::open(&many_st)?;
            // SAFETY: benchmark file, not modified while mapped.
            let map = unsafe { memmap2::Mmap::map(&f)? };
            let s = safetensors::SafeTensors::deserialize(&map)?;
            for n in &names {
                std::hint::black_box(s.tensor(n)?);
            }
            Ok(())
        };
        let open_each = |path: &Path| -> Result<()> {
            let r = ztensor::open(path)?;
            for n in &names {
                std::hint::black_box(r.object(n)?);
            }
            Ok(())
        };
        let mut ours = || open_each(&many_zt);
        let have_original = many_original.exists();
        let mut original = || {
            if have_original {
                open_each(&many_original)
            } else {
                Ok(())
            }
        };
        // Many runs, in turns: this row swings from run to run on this machine.
        let [t_open_st, t_open, t_open_original] =
            interleaved(11, &mut [&mut st_open, &mut ours, &mut original])?;
        table.add(
            "open",
            "safetensors: parse header, look up each once",
            t_open_st,
            None,
        );
        table.add(
            "open",
            "ztensor: open (full validation), look up each",
            t_open,
            Some((t_open_st, "safetensors")),
        );
        if have_original {
            table.add(
                "open",
                "ztensor: the same, file written by ztensor 1.2.3",
                t_open_original,
                Some((t_open_st, "safetensors")),
            );
        } else {
            println!(
                "  (for the row on a file the original wrote: tools/bench/many_original.py {})",
                many_original.display()
            );
        }
    }

    if want("gguf") {
        // --- GGUF: a quantized model's layout, listed and read; the gguf package beside ---
        let median_of = |f: &mut dyn FnMut() -> Result<()>| median(runs, f);
        let helpers = crate::bench_gguf::Helpers {
            median: &median_of,
            touch,
            read_sequential,
            runs,
        };
        for (name, t, vs) in crate::bench_gguf::rows(&dir, scale, &helpers)? {
            table.add("gguf", &name, t, vs.as_ref().map(|(d, w)| (*d, w.as_str())));
        }
    }

    if want("zstd") {
        // --- zstd, level 3 ---
        let ztensors = workload(true, scale.max(4));
        let zbytes: u64 = ztensors.iter().map(|t| t.bytes.len() as u64).sum();
        for threads in [1usize, 2] {
            let d = median(3, || {
                for t in &ztensors {
                    std::hint::black_box(ztensor::formats::zstd_compress_with_threads(
                        &t.bytes, 3, threads,
                    )?);
                }
                Ok(())
            })?;
            table.add(
                "zstd",
                &format!(
                    "compress {:.0} MiB, {threads} zstd worker(s)",
                    zbytes as f64 / 1048576.0
                ),
                d,
                None,
            );
        }
        let zzt = dir.join("model_zstd.zt");
        let t_zw = median(3, || {
            write_zt(
                &ztensors,
                &zzt,
                WriteOptions {
                    compression: Some(3),
                    digest: None,
                },
            )
        })?;
        table.add(
            "zstd",
            "ztensor Writer, zstd level 3 (both cores)",
            t_zw,
            None,
        );
        let zr = ztensor::open(&zzt)?;
        // The stored frames in memory, each with its declared size (objects are sorted by name).
        let stored: Vec<(Vec<u8>, u64)> = zr
            .iter()
            .map(|o| {
                Ok((
                    o.component("data")?.stored_bytes()?.into_owned(),
                    o.components[0].decoded_len.unwrap_or(0),
                ))
            })
            .collect::<ztensor::Result<_>>()?;
        drop(zr);
        // As a user's file is: read in from the disk, then opened afresh by every run.
        if drop_page_cache() {
            std::hint::black_box(read_sequential(&zzt, 4 << 20)?);
        }
        let mut one = || {
            for (s, n) in &stored {
                std::hint::black_box(ztensor::formats::zstd_decompress_exact(s, *n, u64::MAX)?);
            }
            Ok(())
        };
        let mut two = || {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build()?;
            pool.install(|| {
                use rayon::prelude::*;
                stored.par_iter().with_max_len(1).try_for_each(|(s, n)| {
                    std::hint::black_box(ztensor::formats::zstd_decompress_exact(s, *n, u64::MAX)?);
                    Ok::<_, ztensor::Error>(())
                })
            })?;
            Ok(())
        };
        let mut ours = || {
            let zr = ztensor::open(&zzt)?;
            let res = zr.parallel_objects(|o| o.bytes().map(|b| touch_any(&b)));
            for r in res {
                std::hint::black_box(r?);
            }
            Ok(())
        };
        let [t_z1, t_z1x2, t_z2] = interleaved(runs, &mut [&mut one, &mut two, &mut ours])?;
        let baseline = Some((t_z1, "one-core decompress"));
        for (row, time, vs) in [
            ("decompress in memory, one core (baseline)", t_z1, None),
            (
                "decompress in memory, two threads (machine)",
                t_z1x2,
                baseline,
            ),
            (
                "ztensor open + read every tensor, two cores",
                t_z2,
                baseline,
            ),
        ] {
            table.add("zstd", row, time, vs);
        }
    }

    if want("verify") {
        // --- verify ---
        let crc = dir.join("model_crc32c.zt");
        write_zt(
            &tensors,
            &crc,
            WriteOptions {
                compression: None,
                digest: Some(DigestAlgorithm::Crc32c),
            },
        )?;
        // As a user's files are: read in from the disk, then opened afresh by every run (a
        // reader kept open would find its pages already mapped from the previous run).
        for f in [&zt_sha, &crc] {
            if drop_page_cache() {
                std::hint::black_box(read_sequential(f, 4 << 20)?);
            }
        }
        // The limit: the same stored bytes, in memory, hashed by the sha2 crate alone.
        let in_ram: Vec<Vec<u8>> = {
            let r = ztensor::open(&zt_sha)?;
            r.iter()
                .map(|o| Ok(o.component("data")?.stored_bytes()?.into_owned()))
                .collect::<ztensor::Result<_>>()?
        };
        let mut hash_one = || {
            for b in &in_ram {
                std::hint::black_box(sha2::Sha256::digest(b));
            }
            Ok(())
        };
        let mut hash_two = || {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build()?;
            pool.install(|| {
                use rayon::prelude::*;
                in_ram.par_iter().with_max_len(1).for_each(|b| {
                    std::hint::black_box(sha2::Sha256::digest(b));
                });
            });
            Ok(())
        };
        let verify = |path: &Path, threads: usize| -> Result<()> {
            anyhow::ensure!(ztensor::open(path)?.verify_with_threads(threads).is_ok());
            Ok(())
        };
        let mut sha_one = || verify(&zt_sha, 1);
        let mut sha_two = || verify(&zt_sha, 2);
        let mut crc_one = || verify(&crc, 1);
        let mut crc_two = || verify(&crc, 2);
        // In turns: these rows are compared with each other, and the machine drifts.
        let [sha_raw, sha_raw2, t_sha1, t_sha2, t_crc1, t_crc2] = interleaved(
            runs,
            &mut [
                &mut hash_one,
                &mut hash_two,
                &mut sha_one,
                &mut sha_two,
                &mut crc_one,
                &mut crc_two,
            ],
        )?;
        let in_ram_one = Some((sha_raw, "one core in RAM"));
        for (row, time, baseline) in [
            ("sha256 in RAM, one core (limit)", sha_raw, None),
            ("sha256 in RAM, two threads (machine)", sha_raw2, in_ram_one),
            (
                "sha256: ztensor open + verify, one core",
                t_sha1,
                in_ram_one,
            ),
            (
                "sha256: ztensor open + verify, two cores",
                t_sha2,
                in_ram_one,
            ),
            ("crc32c: ztensor open + verify, one core", t_crc1, None),
            (
                "crc32c: ztensor open + verify, two cores",
                t_crc2,
                Some((t_crc1, "one core")),
            ),
        ] {
            table.add("verify", row, time, baseline);
        }
        drop(in_ram);
        t_sha_raw = Some(sha_raw);
    }

    if want("zt") {
        // --- the zt binary, whole processes ---
        let zt_bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/release/zt");
        if zt_bin.exists() {
            let out = dir.join("converted.zt");
            let t_v = median(3, || {
                anyhow::ensure!(Command::new(&zt_bin)
                    .args(["verify"])
                    .arg(&zt_sha)
                    .output()?
                    .status
                    .success());
                Ok(())
            })?;
            table.add(
                "zt",
                "zt verify (sha256, 1 GiB)",
                t_v,
                t_sha_raw.map(|t| (t, "sha2 one core")),
            );
            let t_c = median(3, || {
                anyhow::ensure!(Command::new(&zt_bin)
                    .args(["convert"])
                    .arg(&st)
                    .arg(&out)
                    .arg("--force")
                    .output()?
                    .status
                    .success());
                Ok(())
            })?;
            table.add(
                "zt",
                "zt convert safetensors -> zt",
                t_c,
                t_plain.map(|t| (t, "plain write")),
            );
        } else {
            println!("  (build target/release/zt for the whole-process rows: cargo build --release -p zt-cli)");
        }
    }

    if want("remote") {
        // Each remote run costs hundreds of requests to a slow server: medians of 3.
        crate::bench_remote::run(&zt, runs.min(3))?;
    }

    if want("python") {
        // ztio against safetensors from Python: its own virtual environment and script.
        println!("\n== python: ztio (release build) against safetensors, same workload");
        let status = Command::new("bash")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/bench/python.sh"))
            .args(["--scale", &scale.to_string()])
            .status()
            .context("running tools/bench/python.sh")?;
        anyhow::ensure!(status.success(), "tools/bench/python.sh failed");
    }
    Ok(())
}
