//! The `read` (page cache warm) and `cold` (page cache dropped) sections.

use super::common::*;

/// Reading every tensor with the page cache warm, against a scan of the same bytes in memory
/// and against a scan of each file's own cached pages.
pub(super) fn read(b: &mut Bench) -> Result<()> {
    let (runs, total) = (b.runs, b.total);
    let Bench {
        zt,
        zt2,
        st,
        table,
        tensors,
        dir,
        ..
    } = b;
    let (module, random) = (module_order(tensors), random_order(tensors));
    ensure_v2(tensors, zt2)?;
    // A copy of the v1.2 file for the load after our own (see below), made again when the
    // file is newer than the copy.
    let hinted = dir.join("model_hinted.zt");
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if modified(&hinted) < modified(zt) {
        std::fs::copy(&zt, &hinted)?;
    }
    // --- read every tensor, page cache warm ---
    // As a user's files are: read in from the disk once (not left by our own writer a
    // moment ago, whose pages the kernel holds in larger pieces that fault in faster).
    let dropped = read_in_fresh(&[zt, zt2, st])?;
    // And as a user's second load finds a file the first one read: read in by our own cold
    // load, whose hints (`MADV_WILLNEED`) cache it in 4 KiB pages, which a map then takes a
    // page table entry each for (docs/benchmarks.md, "The v2 warm rows, found"). Where the
    // cache cannot be dropped the copy may be cached in any way, and the row says so.
    std::hint::black_box(read_zt_in(&hinted, OpenOptions::new(), &module)?);
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
    let ranges = tensor_ranges(zt)?;
    let scan = || scan_tensors(&whole, &ranges);
    // Each file's own limit: a scan of its tensors in the page cache, through a map whose
    // every page was mapped before the timing (`MAP_POPULATE`), in name order, and in module
    // and random order for the rows that read in those orders. On this VM the same bytes
    // scanned apart by up to 10% from file to file, and by order, in ways that changed from
    // run to run (mostly how long ago each file was last touched: see `interleaved_touched`),
    // so a row is compared with its own file's pages scanned in its own order, and these
    // scans with the buffer above.
    let [cached_zt, cached_st, cached_v2, cached_hinted] =
        [zt.as_path(), st.as_path(), zt2.as_path(), hinted.as_path()]
            .map(|p| CachedScan::new(p, &module, &random));
    let (cached_zt, cached_st, cached_v2, cached_hinted) =
        (cached_zt?, cached_st?, cached_v2?, cached_hinted?);
    let scan_zt = || cached_zt.scan(Order::Name);
    let scan_st = || cached_st.scan(Order::Name);
    let scan_v2 = || cached_v2.scan(Order::Name);
    let mut scan_hinted = || cached_hinted.scan(Order::Module);
    let mut scan_zt_module = || cached_zt.scan(Order::Module);
    let mut scan_zt_random = || cached_zt.scan(Order::Random);
    let mut scan_st_module = || cached_st.scan(Order::Module);
    let mut scan_v2_module = || cached_v2.scan(Order::Module);
    let mut scan_v2_random = || cached_v2.scan(Order::Random);
    // What touches a row's file before it (see `interleaved_touched`): the scans above,
    // which borrow only, so each is `Copy` and one serves every row of its file.
    let (touch_buffer, touch_zt, touch_st, touch_v2) = (scan, scan_zt, scan_st, scan_v2);
    let touch_hinted = || cached_hinted.scan(Order::Name);
    let mut mapped = consumed(|| read_zt(zt, OpenOptions::new()));
    let mut populated = consumed(|| read_zt(zt, OpenOptions::new().populate(true)));
    let mut walked = consumed(|| read_zt_walk(zt, OpenOptions::new()));
    let mut st_mapped = consumed(|| read_safetensors_mapped(st));
    let mut kernel = consumed(|| read_sequential(zt, 1 << 20));
    let mut fresh = consumed(|| read_zt(zt, OpenOptions::new().unmapped(true)));
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
    let mut chunked = consumed(|| read_zt_chunked(zt));
    let mut in_module = consumed(|| read_zt_in(zt, OpenOptions::new(), &module));
    let mut in_random = consumed(|| read_zt_in(zt, OpenOptions::new(), &random));
    let mut st_module = consumed(|| read_zt_in(st, OpenOptions::new(), &module));
    let mut v2_module = consumed(|| read_zt_in(zt2, OpenOptions::new(), &module));
    let mut v2_random = consumed(|| read_zt_in(zt2, OpenOptions::new(), &random));
    let mut told_module = consumed(|| read_zt_in_told(zt, OpenOptions::new(), &module, true));
    let mut after_ours = consumed(|| read_zt_in(&hinted, OpenOptions::new(), &module));
    let times = interleaved_touched(
        runs,
        // Each row's own file (or buffer) touched just before it, untimed.
        &mut [
            &mut { touch_buffer },
            &mut { touch_zt },
            &mut { touch_st },
            &mut { touch_v2 },
            &mut { touch_hinted },
            &mut { touch_zt },
            &mut { touch_zt },
            &mut { touch_st },
            &mut { touch_v2 },
            &mut { touch_v2 },
            &mut { touch_zt },     // mapped
            &mut { touch_zt },     // walked
            &mut { touch_zt },     // populated
            &mut { touch_st },     // safetensors' reader
            &mut { touch_zt },     // kernel copy
            &mut { touch_zt },     // fresh
            &mut { touch_zt },     // into
            &mut { touch_zt },     // chunked
            &mut { touch_zt },     // module
            &mut { touch_zt },     // random
            &mut { touch_st },     // .safetensors module
            &mut { touch_v2 },     // v2 module
            &mut { touch_v2 },     // v2 random
            &mut { touch_zt },     // told
            &mut { touch_hinted }, // after ours
        ],
        &mut [
            &mut { scan },
            &mut { scan_zt },
            &mut { scan_st },
            &mut { scan_v2 },
            &mut scan_hinted,
            &mut scan_zt_module,
            &mut scan_zt_random,
            &mut scan_st_module,
            &mut scan_v2_module,
            &mut scan_v2_random,
            &mut mapped,
            &mut walked,
            &mut populated,
            &mut st_mapped,
            &mut kernel,
            &mut fresh,
            &mut into,
            &mut chunked,
            &mut in_module,
            &mut in_random,
            &mut st_module,
            &mut v2_module,
            &mut v2_random,
            &mut told_module,
            &mut after_ours,
        ],
    )?;
    drop(whole);
    // Unmapped before the cold section, which waits for no bench file to be mapped.
    drop((cached_zt, cached_st, cached_v2, cached_hinted));
    report_warm(table, total, dropped, times);
    Ok(())
}

/// Prints the warm rows of [`read`], each against its limit: `times` in the order they were
/// measured in.
fn report_warm(table: &mut Table, total: u64, dropped: bool, times: [Timing; 25]) {
    let [t_scan, t_scan_zt, t_scan_st, t_scan_v2, t_scan_hinted, t_scan_zt_module, t_scan_zt_random, t_scan_st_module, t_scan_v2_module, t_scan_v2_random, t_mapped, t_walked, t_populated, t_st_read, t_kernel, t_unmapped, t_into, t_chunked, t_module, t_random, t_st_module, t_v2_module, t_v2_random, t_told_module, t_after_ours] =
        times;
    let (own_zt, own_st, own_v2) = (
        Some((t_scan_zt, "its pages")),
        Some((t_scan_st, "its pages")),
        Some((t_scan_v2, "its pages")),
    );
    let same_order = |t| Some((t, "its pages, same order"));
    for (row, time, baseline) in [
        ("in-memory scan of the same bytes (limit)", t_scan, None),
        (
            "v1.2: scan of its cached pages (its limit)",
            t_scan_zt,
            Some((t_scan, "scan")),
        ),
        (
            ".safetensors: scan of its cached pages (its limit)",
            t_scan_st,
            Some((t_scan, "scan")),
        ),
        (
            "v2: scan of its cached pages (its limit)",
            t_scan_v2,
            Some((t_scan, "scan")),
        ),
        (
            "v1.2 read in by our cold load: scan of its cached pages, module order",
            t_scan_hinted,
            Some((t_scan, "scan")),
        ),
        (
            "v1.2: scan of its cached pages, module order",
            t_scan_zt_module,
            own_zt,
        ),
        (
            "v1.2: scan of its cached pages, random order",
            t_scan_zt_random,
            own_zt,
        ),
        (
            ".safetensors: scan of its cached pages, module order",
            t_scan_st_module,
            own_st,
        ),
        (
            "v2: scan of its cached pages, module order",
            t_scan_v2_module,
            own_v2,
        ),
        (
            "v2: scan of its cached pages, random order",
            t_scan_v2_random,
            own_v2,
        ),
        ("ztensor default: open, read each by name", t_mapped, own_zt),
        (
            "ztensor default: open, for o in &reader (file order)",
            t_walked,
            own_zt,
        ),
        (
            "ztensor default: open, read in module order",
            t_module,
            same_order(t_scan_zt_module),
        ),
        (
            "ztensor default: open, read in a random order",
            t_random,
            same_order(t_scan_zt_random),
        ),
        (
            "module order, told expect_to_read_all",
            t_told_module,
            same_order(t_scan_zt_module),
        ),
        (
            "ztensor default on .safetensors, module order",
            t_st_module,
            same_order(t_scan_st_module),
        ),
        (
            "ztensor default on .zt v2, module order",
            t_v2_module,
            same_order(t_scan_v2_module),
        ),
        (
            "ztensor default on .zt v2, random order",
            t_v2_random,
            same_order(t_scan_v2_random),
        ),
        (
            if dropped {
                "module order, the file read in by our own cold load"
            } else {
                "module order, a copy of the file, cached as it was"
            },
            t_after_ours,
            same_order(t_scan_hinted),
        ),
        (
            "ztensor mapped, populate(true): faults on core 2",
            t_populated,
            own_zt,
        ),
        ("safetensors over memmap2", t_st_read, own_st),
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
        gib_per_s(total, t_scan.median),
        gib_per_s(total, t_mapped.median)
    );
}

/// Reading every tensor from the disk (page cache dropped before each run); `zt cat` of one tensor.
pub(super) fn cold(b: &mut Bench) -> Result<()> {
    let Bench {
        tensors,
        zt,
        zt2,
        st,
        table,
        ..
    } = b;
    let (module, random) = (module_order(tensors), random_order(tensors));
    ensure_v2(tensors, zt2)?;
    // --- load every tensor from the disk: page cache dropped before every call ---
    if !drop_page_cache() {
        println!(
            "  cold rows skipped: only root may drop the page cache (/proc/sys/vm/drop_caches)"
        );
    } else {
        let cold_runs = 5;
        let mut sequential = consumed(|| read_sequential(zt, 4 << 20));
        let mut by_name = consumed(|| read_zt(zt, OpenOptions::new()));
        let mut walked = consumed(|| read_zt_walk(zt, OpenOptions::new()));
        let mut populated = consumed(|| read_zt(zt, OpenOptions::new().populate(true)));
        let mut chunked = consumed(|| read_zt_chunked(zt));
        let mut st_mapped = consumed(|| read_safetensors_mapped(st));
        let mut in_module = consumed(|| read_zt_in(zt, OpenOptions::new(), &module));
        let mut in_random = consumed(|| read_zt_in(zt, OpenOptions::new(), &random));
        let mut st_module = consumed(|| read_zt_in(st, OpenOptions::new(), &module));
        let mut v2_module = consumed(|| read_zt_in(zt2, OpenOptions::new(), &module));
        let mut v2_random = consumed(|| read_zt_in(zt2, OpenOptions::new(), &random));
        let mut told_module = consumed(|| read_zt_in_told(zt, OpenOptions::new(), &module, true));
        let [t_seq, t_name, t_walk, t_pop, t_chunk, t_st, t_module, t_random, t_st_module, t_v2_module, t_v2_random, t_told_module] =
            interleaved_cold(
                cold_runs,
                &mut [
                    &mut sequential,
                    &mut by_name,
                    &mut walked,
                    &mut populated,
                    &mut chunked,
                    &mut st_mapped,
                    &mut in_module,
                    &mut in_random,
                    &mut st_module,
                    &mut v2_module,
                    &mut v2_random,
                    &mut told_module,
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
            (
                "ztensor default: module order",
                t_module,
                Some((t_seq, "sequential")),
            ),
            (
                "ztensor default: random order",
                t_random,
                Some((t_seq, "sequential")),
            ),
            (
                "module order, told expect_to_read_all",
                t_told_module,
                Some((t_seq, "sequential")),
            ),
            (
                "ztensor default on .safetensors, module order",
                t_st_module,
                Some((t_seq, "sequential")),
            ),
            (
                "ztensor default on .zt v2, module order",
                t_v2_module,
                Some((t_seq, "sequential")),
            ),
            (
                "ztensor default on .zt v2, random order",
                t_v2_random,
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
                resident_bytes(zt)? as f64 / 1048576.0,
                std::fs::metadata(&zt)?.len() as f64 / 1048576.0,
                t.as_secs_f64() * 1e3
            );
        } else {
            println!(
                "  (build target/release/zt for the zt cat row: cargo build --release -p zt-cli)"
            );
        }
        // A slice reads its bytes, not the disk's read-ahead around them.
        #[cfg(target_os = "linux")]
        {
            let big = tensors
                .iter()
                .max_by_key(|t| t.bytes.len())
                .map(|t| t.name.clone())
                .unwrap_or_default();
            for (label, ranges) in [
                ("8 rows", std::iter::once(0..8u64).collect::<Vec<_>>()),
                ("a 16x100 box", [100..116u64, 200..300].to_vec()),
            ] {
                anyhow::ensure!(drop_page_cache(), "cannot drop the page cache");
                let r = ztensor::open(&zt)?;
                let o = r.object(&big)?;
                let mut full = ranges.clone();
                full.extend(o.shape.iter().skip(ranges.len()).map(|&d| 0..d));
                let got = o.slice_bytes(&full)?.len();
                println!(
                    "  cold       a slice of {label} ({:.1} KiB) of {big} read {:.2} MiB of the file",
                    got as f64 / 1024.0,
                    resident_bytes(zt)? as f64 / 1048576.0
                );
            }
        }
    }
    Ok(())
}

/// The order a [`CachedScan`] touches a file's tensors in.
#[derive(Clone, Copy)]
enum Order {
    /// As [`ztensor::Reader::objects`] lists them.
    Name,
    Module,
    Random,
}

/// A file's tensors as the page cache holds them, every page mapped before any timing: the
/// limit of a mapped read of that file in each order, with no fault and no reader in the way.
struct CachedScan {
    map: memmap2::Mmap,
    by_name: Vec<(u64, u64)>,
    by_module: Vec<(u64, u64)>,
    by_random: Vec<(u64, u64)>,
}

impl CachedScan {
    /// `module` and `random`: the names in those orders.
    fn new(path: &Path, module: &[String], random: &[String]) -> Result<Self> {
        let file = File::open(path)?;
        // SAFETY: a benchmark file, not modified while mapped.
        let map = unsafe { memmap2::MmapOptions::new().populate().map(&file)? };
        Ok(CachedScan {
            map,
            by_name: tensor_ranges(path)?,
            by_module: tensor_ranges_in(path, module)?,
            by_random: tensor_ranges_in(path, random)?,
        })
    }

    fn scan(&self, order: Order) -> Result<()> {
        let ranges = match order {
            Order::Name => &self.by_name,
            Order::Module => &self.by_module,
            Order::Random => &self.by_random,
        };
        scan_tensors(&self.map, ranges)
    }
}

/// Where each tensor of the file at `path` lies: `(offset, length)` of its data.
fn tensor_ranges(path: &Path) -> Result<Vec<(u64, u64)>> {
    Ok(ztensor::open(path)?
        .objects()
        .iter()
        .map(|o| (o.components[0].offset, o.components[0].length))
        .collect())
}

/// [`tensor_ranges`], the tensors named in `order`, in that order.
fn tensor_ranges_in(path: &Path, order: &[String]) -> Result<Vec<(u64, u64)>> {
    let reader = ztensor::open(path)?;
    order
        .iter()
        .map(|name| {
            let c = reader.object(name)?.info().components.first().cloned();
            let c = c.with_context(|| format!("{name} has no data"))?;
            Ok((c.offset, c.length))
        })
        .collect()
}

/// Touches every byte of each of `ranges` in `bytes` (a file's bytes, in memory or mapped).
fn scan_tensors(bytes: &[u8], ranges: &[(u64, u64)]) -> Result<()> {
    let mut acc = 0;
    for &(offset, len) in ranges {
        let end = offset.checked_add(len).context("a tensor past 2^64")?;
        let tensor = usize::try_from(offset)
            .ok()
            .zip(usize::try_from(end).ok())
            .and_then(|(a, b)| bytes.get(a..b))
            .context("a tensor past the file's end")?;
        acc ^= touch_any(tensor);
    }
    std::hint::black_box(acc);
    Ok(())
}
