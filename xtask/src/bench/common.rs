//! What the sections share: the workload, the timing helpers (medians, runs in turns, cold
//! runs), the table of results, and [`Bench`], the state one run of the sections passes along.

pub(super) use std::fs::File;
pub(super) use std::io::{BufWriter, Read, Write};
pub(super) use std::path::{Path, PathBuf};
pub(super) use std::process::Command;
pub(super) use std::time::{Duration, Instant};

pub(super) use anyhow::{Context, Result};
pub(super) use half::bf16;
pub(super) use sha2::Digest as _;
pub(super) use ztensor::{DigestAlgorithm, OpenOptions, WriteOptions, Writer};

/// One tensor of the workload.
pub(super) struct Tensor {
    pub(super) name: String,
    pub(super) shape: Vec<u64>,
    pub(super) dims: Vec<usize>,
    pub(super) bf16: bool,
    pub(super) bytes: Vec<u8>,
}

pub(super) fn xorshift(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// A model-like workload of about 1 GiB: per layer four 1024x1024 f32 attention matrices, two
/// 1024x2816 bf16 MLP matrices and two f32 norm vectors; embeddings and head in bf16.
pub(super) fn workload(compressible: bool, scale: usize) -> Vec<Tensor> {
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
pub(super) fn touch(b: &[u8]) -> u64 {
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
pub(super) fn touch_any(b: &[u8]) -> u64 {
    if b.as_ptr().align_offset(8) == 0 {
        touch(b)
    } else {
        let v: Vec<u64> = bytemuck::pod_collect_to_vec(b.get(..b.len() / 8 * 8).unwrap_or(&[]));
        touch(bytemuck::cast_slice(&v))
    }
}

pub(super) fn median(runs: usize, mut f: impl FnMut() -> Result<()>) -> Result<Timing> {
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
    Ok(Timing::of(t))
}

/// One row's runs: the median, which the ratios compare, and the fastest and slowest run,
/// which say how far to trust it (issue 30 asks for the spread beside every row).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Timing {
    pub(super) median: Duration,
    pub(super) fastest: Duration,
    pub(super) slowest: Duration,
}

impl Timing {
    /// The timing of `runs` (at least one).
    pub(super) fn of(mut runs: Vec<Duration>) -> Timing {
        runs.sort();
        let at = |i: usize| runs.get(i).copied().unwrap_or_default();
        Timing {
            median: at(runs.len() / 2),
            fastest: at(0),
            slowest: at(runs.len().saturating_sub(1)),
        }
    }

    /// The one of two rows with the larger median (a bound set by the slower of two steps).
    pub(super) fn slower(self, other: Timing) -> Timing {
        if other.median > self.median {
            other
        } else {
            self
        }
    }
}

/// A single measurement, or a median whose runs are not at hand (one the Python side took):
/// no spread to show.
impl From<Duration> for Timing {
    fn from(d: Duration) -> Timing {
        Timing {
            median: d,
            fastest: d,
            slowest: d,
        }
    }
}

/// Medians of several measurements taken in turns (A B C, A B C, ...), so that drift in the
/// machine (other tenants, the page cache, CPU frequency) lands on every row alike instead of
/// on whichever row ran during it.
pub(super) fn interleaved<const N: usize>(
    runs: usize,
    fs: &mut [&mut dyn FnMut() -> Result<()>; N],
) -> Result<[Timing; N]> {
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
pub(super) fn interleaved_synced<const N: usize>(
    runs: usize,
    outputs: [Option<&Path>; N],
    fs: &mut [&mut dyn FnMut() -> Result<()>; N],
) -> Result<[Timing; N]> {
    measure_in_turns(runs, Some(outputs), fs)
}

/// As [`interleaved`], with the page cache dropped before every measurement: every row reads
/// its file from the disk. Needs root; see [`drop_page_cache`].
pub(super) fn interleaved_cold<const N: usize>(
    runs: usize,
    fs: &mut [&mut dyn FnMut() -> Result<()>; N],
) -> Result<[Timing; N]> {
    measure(runs, None, true, None, fs)
}

/// Writes back dirty pages and drops the clean ones from the page cache, so that the next
/// read comes from the disk. Only root may; `false` when this process may not.
///
/// Waits first until this process maps no bench file: pages a live map holds survive the
/// drop, and a reader's map can outlive the reader for a moment (a populated map is unmapped
/// on its own thread once dropped), so a row dropped right after one of ours could start
/// with the file partly cached.
pub(super) fn drop_page_cache() -> bool {
    wait_until_no_bench_file_is_mapped(Duration::from_secs(10));
    let _ = Command::new("sync").status();
    std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok()
}

/// Drops the page cache once, then reads each of `files` in from the disk with plain reads, as
/// a user's files are (copied or downloaded, then read): cached whole, in the kernel's large
/// folios. Does nothing where the cache cannot be dropped, and says whether it could.
///
/// Once, not per file: dropping it before each file left only the last one read in, and the
/// others were read in by whichever timed row came first. That made the warm rows of a file
/// read in through a map's `MADV_WILLNEED` (cached in 4 KiB pages, which a map then faults
/// in a page table entry each) 1.3-2.5x slower than those of the same bytes read in by
/// `read` (2 MiB folios, one entry each).
pub(super) fn read_in_fresh(files: &[&Path]) -> Result<bool> {
    if !drop_page_cache() {
        return Ok(false);
    }
    for f in files {
        std::hint::black_box(read_sequential(f, 4 << 20)?);
    }
    Ok(true)
}

/// Waits at most `timeout` until no line of `/proc/self/maps` names a file under
/// `target/bench-data`; says so when one is still mapped then.
fn wait_until_no_bench_file_is_mapped(timeout: Duration) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench-data");
    let Ok(dir) = dir.canonicalize() else {
        return;
    };
    let dir = dir.to_string_lossy().into_owned();
    let deadline = Instant::now() + timeout;
    loop {
        let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
            return; // no /proc: nothing to wait for that we could see
        };
        if !maps.lines().any(|line| line.contains(&dir)) {
            return;
        }
        if Instant::now() > deadline {
            println!("  (a bench file is still mapped: the next cold row may be warm in part)");
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// How many bytes of `path` are in the page cache (`mincore` over a map of it).
#[cfg(target_os = "linux")]
pub(super) fn resident_bytes(path: &Path) -> Result<u64> {
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

pub(super) fn measure_in_turns<const N: usize>(
    runs: usize,
    outputs: Option<[Option<&Path>; N]>,
    fs: &mut [&mut dyn FnMut() -> Result<()>; N],
) -> Result<[Timing; N]> {
    measure(runs, outputs, false, None, fs)
}

/// As [`interleaved`], each row preceded, untimed, by its `touch` (a scan of the pages of the
/// file it reads), so that every row finds its file's pages as recently touched as every
/// other row finds its own.
///
/// On this VM, cached pages left untouched for a while are slower to touch again: a scan of
/// a mapped, populated 1 GiB file took 65-71 ms right after the previous scan, 87-121 ms
/// after a 1 s pause and 140-207 ms after 4 s (docs/benchmarks.md, "Warm rows and how
/// recently their pages were touched"). In a round of rows in turns, a row whose file the
/// rows before it had not touched for a second paid that, whatever it was.
pub(super) fn interleaved_touched<const N: usize>(
    runs: usize,
    touch: &mut [&mut dyn FnMut() -> Result<()>; N],
    fs: &mut [&mut dyn FnMut() -> Result<()>; N],
) -> Result<[Timing; N]> {
    measure(runs, None, false, Some(touch), fs)
}

pub(super) fn measure<const N: usize>(
    runs: usize,
    outputs: Option<[Option<&Path>; N]>,
    cold: bool,
    mut touch: Option<&mut [&mut dyn FnMut() -> Result<()>; N]>,
    fs: &mut [&mut dyn FnMut() -> Result<()>; N],
) -> Result<[Timing; N]> {
    for f in fs.iter_mut() {
        f()?; // warm-up
    }
    let mut t = vec![Vec::with_capacity(runs); N];
    for run in 0..runs {
        // Each round starts at the next row: a row's place in the round told on its time
        // (cold, the first row after the drop ran up to 2x slower than the same row later
        // in a round), and a fixed order put that on the same row every time.
        for k in 0..N {
            let i = (k + run) % N;
            let (Some(f), Some(times)) = (fs.get_mut(i), t.get_mut(i)) else {
                continue;
            };
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
            if let Some(touch) = touch.as_mut().and_then(|t| t.get_mut(i)) {
                touch()?;
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
    let mut out = [Timing::from(Duration::ZERO); N];
    for (o, times) in out.iter_mut().zip(t) {
        if cold {
            // The disk of a virtual machine is noisy: every run, beside the row's spread.
            let ms: Vec<String> = times
                .iter()
                .map(|t| format!("{:.0}", t.as_secs_f64() * 1e3))
                .collect();
            println!("  (cold runs, ms: {})", ms.join(" "));
        }
        *o = Timing::of(times);
    }
    Ok(out)
}

pub(super) struct Table {
    pub(super) rows: Vec<(String, String, Timing, Option<String>)>,
}

impl Table {
    /// Prints and keeps one row: its median, the ratio of that median to `vs`'s, and the
    /// fastest and slowest run.
    pub(super) fn add(
        &mut self,
        group: &str,
        name: &str,
        t: impl Into<Timing>,
        vs: Option<(Timing, &str)>,
    ) {
        let t: Timing = t.into();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let ratio = vs.map(|(base, what)| {
            format!(
                "{:.3}x {what}",
                t.median.as_secs_f64() / base.median.as_secs_f64()
            )
        });
        let spread = if t.fastest == t.slowest {
            String::new()
        } else {
            format!("({:.1}-{:.1})", ms(t.fastest), ms(t.slowest))
        };
        println!(
            "  {group:<10} {name:<46} {:>9.1} ms {spread:<17} {}",
            ms(t.median),
            ratio.clone().unwrap_or_default()
        );
        self.rows.push((group.into(), name.into(), t, ratio));
    }
}

pub(super) fn gib_per_s(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / f64::from(1u32 << 30)
}

pub(super) struct View<'a>(pub(super) &'a Tensor);

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

pub(super) fn write_zt(tensors: &[Tensor], path: &Path, opts: WriteOptions) -> Result<()> {
    write_zt_with(tensors, path, opts, ztensor::Durability::Synced)
}

pub(super) fn write_zt_with(
    tensors: &[Tensor],
    path: &Path,
    opts: WriteOptions,
    durability: ztensor::Durability,
) -> Result<()> {
    // The benchmark's rows measure v1.2 (docs/benchmarks.md).
    write_zt_version(tensors, path, opts, durability, ztensor::Version::V1_2)
}

/// The workload as zTensor v2, our default output, once (the read rows in v2 beside v1.2).
pub(super) fn ensure_v2(tensors: &[Tensor], path: &Path) -> Result<()> {
    if !path.exists() {
        write_zt_version(
            tensors,
            path,
            WriteOptions::default(),
            ztensor::Durability::Synced,
            ztensor::Version::V2,
        )?;
    }
    Ok(())
}

pub(super) fn write_zt_version(
    tensors: &[Tensor],
    path: &Path,
    opts: WriteOptions,
    durability: ztensor::Durability,
    version: ztensor::Version,
) -> Result<()> {
    let mut w = Writer::create_version(path, version, durability)?;
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

pub(super) fn read_zt(path: &Path, options: OpenOptions) -> Result<u64> {
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

/// As [`read_zt`], reading the objects in `order` (names), as a loader asks for them.
pub(super) fn read_zt_in(path: &Path, options: OpenOptions, order: &[String]) -> Result<u64> {
    read_zt_in_told(path, options, order, false)
}

/// [`read_zt_in`], the reader told first, when `whole`, that every object will be read
/// ([`ztensor::Reader::expect_to_read_all`], as a framework's `load_file` does).
pub(super) fn read_zt_in_told(
    path: &Path,
    options: OpenOptions,
    order: &[String],
    whole: bool,
) -> Result<u64> {
    let r = options.open(path)?;
    if whole {
        r.expect_to_read_all();
    }
    let mut acc = 0;
    for name in order {
        let o = r.object(name)?;
        acc ^= if o.element_type().map(|t| t.name()) == Some("bf16") {
            touch(bytemuck::cast_slice(&o.read::<bf16>()?))
        } else {
            touch(bytemuck::cast_slice(&o.read::<f32>()?))
        };
    }
    Ok(acc)
}

/// The workload's names in a model's module order, as `load_state_dict` asks for them: the
/// embeddings, then per layer (by number, not by name) its first norm, q, k, v, o, second
/// norm, MLP up and down, then the head.
pub(super) fn module_order(tensors: &[Tensor]) -> Vec<String> {
    let rank = |name: &str| -> (u64, u64, u64) {
        if name.starts_with("embed") {
            return (0, 0, 0);
        }
        if name.starts_with("head") {
            return (2, 0, 0);
        }
        let mut parts = name.split('.');
        let layer = parts.nth(1).and_then(|l| l.parse().ok()).unwrap_or(0);
        let within = [
            "norm1", "attn.q.", "attn.k.", "attn.v.", "attn.o.", "norm2", "mlp.up", "mlp.down",
        ]
        .iter()
        .position(|p| name.contains(p))
        .unwrap_or(9) as u64;
        (1, layer, within)
    };
    let mut names: Vec<String> = tensors.iter().map(|t| t.name.clone()).collect();
    names.sort_by_key(|n| rank(n));
    names
}

/// The workload's names in a fixed random order (a seeded shuffle).
pub(super) fn random_order(tensors: &[Tensor]) -> Vec<String> {
    let mut names: Vec<String> = tensors.iter().map(|t| t.name.clone()).collect();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for i in (1..names.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        names.swap(i, (state % (i as u64 + 1)) as usize);
    }
    names
}

/// As [`read_zt`], walking the file in file order (`for o in &reader`).
pub(super) fn read_zt_walk(path: &Path, options: OpenOptions) -> Result<u64> {
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
pub(super) fn consumed(read: impl Fn() -> Result<u64>) -> impl FnMut() -> Result<()> {
    move || {
        read().map(|x| {
            std::hint::black_box(x);
        })
    }
}

/// Reads a file front to back with plain `read` calls into one reused buffer of `piece`
/// bytes, touching every byte: the machine's own limit for loading a file.
pub(super) fn read_sequential(path: &Path, piece: usize) -> Result<u64> {
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
pub(super) fn read_safetensors_mapped(path: &Path) -> Result<u64> {
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
pub(super) fn read_zt_chunked(path: &Path) -> Result<u64> {
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

/// What the sections share: the workload, the files made from it, the table of results, and
/// the timings later rows compare with.
pub(super) struct Bench {
    pub(super) scale: usize,
    pub(super) runs: usize,
    pub(super) dir: PathBuf,
    pub(super) tensors: Vec<Tensor>,
    /// The workload's bytes.
    pub(super) total: u64,
    /// The workload as `.zt` (v1.2), `.safetensors`, and `.zt` with sha256 digests; and as
    /// `.zt` v2 for the order rows.
    pub(super) zt: PathBuf,
    pub(super) zt2: PathBuf,
    pub(super) st: PathBuf,
    pub(super) zt_sha: PathBuf,
    pub(super) table: Table,
    /// A plain write of the workload (from `write`) and sha256 over it in memory (from
    /// `verify`), for the `zt` rows.
    pub(super) t_plain: Option<Timing>,
    pub(super) t_sha_raw: Option<Timing>,
}
