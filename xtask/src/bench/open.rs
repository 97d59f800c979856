//! The `open` section (100,000 small tensors) and the `header` section (a header of a million).

use super::common::*;

/// Opening a file of 100,000 small tensors and looking each up, against the safetensors crate.
pub(super) fn open(b: &mut Bench) -> Result<()> {
    let Bench { dir, table, .. } = b;
    // --- open only: 100,000 tensors of 16 f32 ---
    let many_zt = dir.join("many.zt");
    let many_v2 = dir.join("many_v2.zt");
    let many_st = dir.join("many.safetensors");
    // The same names tools/bench/many_original.py writes with the original, 1.2.3 and 2.x.
    let many_original = dir.join("many-original.zt");
    let many_original_v2 = dir.join("many-original-v2.zt");
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
        // The same as v2 (4096-byte packing: the manifest is the same shape as the default's,
        // and the file 0.4 GB instead of 6.5).
        let mut w = Writer::create_version(
            &many_v2,
            ztensor::Version::V2Compact,
            ztensor::Durability::Synced,
        )?;
        for t in &small {
            w.add(&t.name, &[16], &[0f32; 16])?;
        }
        w.finish()?;
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
    let mut ours_v2 = || open_each(&many_v2);
    let have_original = many_original.exists();
    let have_original_v2 = many_original_v2.exists();
    // A file the original wrote is there only if tools/bench/many_original.py made it.
    let open_if = |have: bool, path: &Path| if have { open_each(path) } else { Ok(()) };
    let mut original = || open_if(have_original, &many_original);
    let mut original_v2 = || open_if(have_original_v2, &many_original_v2);
    // Many runs, in turns: this row swings from run to run on this machine.
    let [t_open_st, t_open, t_open_v2, t_open_original, t_open_original_v2] = interleaved(
        11,
        &mut [
            &mut st_open,
            &mut ours,
            &mut ours_v2,
            &mut original,
            &mut original_v2,
        ],
    )?;
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
    table.add(
        "open",
        "ztensor: the same, v2 file",
        t_open_v2,
        Some((t_open_st, "safetensors")),
    );
    for (have, path, row, time) in [
        (
            have_original,
            &many_original,
            "ztensor: the same, file written by ztensor 1.2.3",
            t_open_original,
        ),
        (
            have_original_v2,
            &many_original_v2,
            "ztensor: the same, v2 file written by ztensor 2.1.2",
            t_open_original_v2,
        ),
    ] {
        if have {
            table.add("open", row, time, Some((t_open_st, "safetensors")));
        } else {
            println!(
                "  (for the row on a file the original wrote: tools/bench/many_original.py {})",
                path.display()
            );
        }
    }
    Ok(())
}

/// A safetensors header of a million tensors (one f32 each): the safetensors crate's parse
/// against ours, both from the map, and the heap each holds after parsing (issue 26: ours may
/// take at most what the crate takes). The memory bound itself is a test
/// (crates/ztensor/tests/listing_memory.rs); this row shows the time.
pub(super) fn header(b: &mut Bench) -> Result<()> {
    let Bench { dir, table, .. } = b;
    let path = dir.join("million.safetensors");
    let count = 1_000_000usize;
    if !path.exists() {
        let mut header = String::from("{");
        for i in 0..count {
            let (start, end) = (i * 4, i * 4 + 4);
            let sep = if i == 0 { "" } else { "," };
            header.push_str(&format!(
                r#"{sep}"model.layers.{}.block.{}.weight":{{"dtype":"F32","shape":[1],"data_offsets":[{start},{end}]}}"#,
                i / 1000,
                i % 1000
            ));
        }
        header.push('}');
        let mut f = BufWriter::new(File::create(&path)?);
        f.write_all(&(header.len() as u64).to_le_bytes())?;
        f.write_all(header.as_bytes())?;
        f.write_all(&vec![0u8; count * 4])?;
        f.into_inner().context("flush")?.sync_all()?;
    }
    let _ = read_in_fresh(&[&path])?;
    let mut crate_parse = || {
        let f = File::open(&path)?;
        // SAFETY: benchmark file, not modified while mapped.
        let map = unsafe { memmap2::Mmap::map(&f)? };
        let s = safetensors::SafeTensors::deserialize(&map)?;
        std::hint::black_box(s.len());
        Ok(())
    };
    let mut ours = || {
        let r = ztensor::open(&path)?;
        std::hint::black_box(r.objects().len());
        Ok(())
    };
    let [t_crate, t_ours] = interleaved(5, &mut [&mut crate_parse, &mut ours])?;
    table.add(
        "header",
        "safetensors: deserialize a header of 1M tensors",
        t_crate,
        None,
    );
    table.add(
        "header",
        "ztensor: open the same file (full validation)",
        t_ours,
        Some((t_crate, "safetensors")),
    );
    Ok(())
}
