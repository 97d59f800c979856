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

fn measure_in_turns<const N: usize>(
    runs: usize,
    outputs: Option<[Option<&Path>; N]>,
    fs: &mut [&mut dyn FnMut() -> Result<()>; N],
) -> Result<[Duration; N]> {
    for f in fs.iter_mut() {
        f()?; // warm-up
    }
    let mut t = vec![Vec::with_capacity(runs); N];
    for _ in 0..runs {
        for (i, (f, times)) in fs.iter_mut().zip(t.iter_mut()).enumerate() {
            if let Some(outputs) = &outputs {
                if let Some(path) = outputs.get(i).copied().flatten() {
                    let _ = std::fs::remove_file(path);
                }
                let _ = Command::new("sync").status();
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
    let mut w = Writer::create_with(path, durability)?;
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
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench-data");
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
        // --- read every tensor ---
        let whole = std::fs::read(&zt)?;
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
        let mut mapped = || {
            read_zt(&zt, OpenOptions::new()).map(|x| {
                std::hint::black_box(x);
            })
        };
        let mut populated = || {
            read_zt(&zt, OpenOptions::new().populate(true)).map(|x| {
                std::hint::black_box(x);
            })
        };
        let mut st_mapped = || {
            let f = File::open(&st)?;
            // SAFETY: benchmark file, not modified while mapped.
            let map = unsafe { memmap2::Mmap::map(&f)? };
            let s = safetensors::SafeTensors::deserialize(&map)?;
            let mut acc = 0;
            for (_, v) in s.iter() {
                acc ^= touch_any(v.data());
            }
            std::hint::black_box(acc);
            Ok(())
        };
        let mut kernel = || {
            let mut f = File::open(&zt)?;
            let mut buf = vec![0u8; 1 << 20];
            let mut acc = 0;
            loop {
                let n = f.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                acc ^= touch_any(&buf[..n]);
            }
            std::hint::black_box(acc);
            Ok(())
        };
        let mut fresh = || {
            read_zt(&zt, OpenOptions::new().unmapped(true)).map(|x| {
                std::hint::black_box(x);
            })
        };
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
        let mut chunked = || {
            let r = OpenOptions::new().unmapped(true).open(&zt)?;
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
            std::hint::black_box(acc);
            Ok(())
        };
        let [t_scan, t_mapped, t_populated, t_st_read, t_kernel, t_unmapped, t_into, t_chunked] =
            interleaved(
                runs,
                &mut [
                    &mut scan,
                    &mut mapped,
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
                "ztensor mapped (open, typed views, touch all)",
                t_mapped,
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

    if want("open") {
        // --- open only: 100,000 small tensors ---
        let many_zt = dir.join("many.zt");
        let many_st = dir.join("many.safetensors");
        let names: Vec<String> = (0..100_000)
            .map(|i| format!("model.layers.{}.block.{}.weight", i / 100, i % 100))
            .collect();
        {
            let mut w = Writer::create(&many_zt)?;
            let mut views = Vec::new();
            let small: Vec<Tensor> = names
                .iter()
                .map(|n| Tensor {
                    name: n.clone(),
                    shape: vec![2, 2],
                    dims: vec![2, 2],
                    bf16: false,
                    bytes: vec![0; 16],
                })
                .collect();
            for t in &small {
                w.add(&t.name, &[2, 2], &[0f32; 4])?;
                views.push((t.name.as_str(), View(t)));
            }
            w.finish()?;
            safetensors::serialize_to_file(views, None, &many_st)?;
        }
        let t_open_st = median(runs, || {
            let f = File::open(&many_st)?;
            // SAFETY: benchmark file, not modified while mapped.
            let map = unsafe { memmap2::Mmap::map(&f)? };
            let s = safetensors::SafeTensors::deserialize(&map)?;
            for n in &names {
                std::hint::black_box(s.tensor(n)?);
            }
            Ok(())
        })?;
        table.add(
            "open",
            "safetensors: parse header, look up each once",
            t_open_st,
            None,
        );
        let t_open = median(runs, || {
            let r = ztensor::open(&many_zt)?;
            for n in &names {
                std::hint::black_box(r.object(n)?);
            }
            Ok(())
        })?;
        table.add(
            "open",
            "ztensor: open (full validation), look up each",
            t_open,
            Some((t_open_st, "safetensors")),
        );
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
        let t_z1 = median(runs, || {
            for (s, n) in &stored {
                std::hint::black_box(ztensor::formats::zstd_decompress_exact(s, *n, u64::MAX)?);
            }
            Ok(())
        })?;
        table.add(
            "zstd",
            "decompress in memory, one core (baseline)",
            t_z1,
            None,
        );
        let t_z2 = median(runs, || {
            let res = zr.parallel_objects(|o| o.bytes().map(|b| touch_any(&b)));
            for r in res {
                std::hint::black_box(r?);
            }
            Ok(())
        })?;
        table.add(
            "zstd",
            "ztensor read every tensor, two cores",
            t_z2,
            Some((t_z1, "one-core decompress")),
        );
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
        let rs = ztensor::open(&zt_sha)?;
        let rc = ztensor::open(&crc)?;
        for (label, r) in [("sha256", &rs), ("crc32c", &rc)] {
            let one = median(runs, || {
                anyhow::ensure!(r.verify_with_threads(1).is_ok());
                Ok(())
            })?;
            table.add("verify", &format!("{label}: ztensor, one core"), one, None);
            let two = median(runs, || {
                anyhow::ensure!(r.verify_with_threads(2).is_ok());
                Ok(())
            })?;
            table.add(
                "verify",
                &format!("{label}: ztensor, two cores"),
                two,
                Some((one, "one core")),
            );
        }
        let sha_raw = median(runs, || {
            for o in &rs {
                std::hint::black_box(sha2::Sha256::digest(o.component("data")?.stored_bytes()?));
            }
            Ok(())
        })?;
        table.add(
            "verify",
            "sha256: the sha2 crate alone, one core",
            sha_raw,
            None,
        );
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

    Ok(())
}
