//! The `gguf` section of `cargo xtask bench`: a GGUF file laid out like a quantized model
//! (4,096 tensors, most of them Q4_0, about 1 GiB per `--scale`; 300 metadata keys and a
//! 32,000-token vocabulary) listed, read tensor by tensor and partly dequantized, by us and
//! by the `gguf` package's reader (through tools/bench/gguf_reader.py when `GGUF_PYTHON`
//! names a Python that has it), beside the machine's sequential read.
//!
//! It receives the bench's measuring helpers instead of importing the bench module, so the
//! two do not import each other.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result};

use super::common::Timing;

use crate::fixtures::{Gguf, ARRAY, F32, F32_VALUE, I32, Q4_0, STR, U32};

/// A row of the results table: name, time, and the time and name it is compared with.
pub type Row = (String, Timing, Option<(Timing, String)>);

/// The median of several runs of a closure (after a warm-up).
pub type Median<'a> = &'a dyn Fn(&mut dyn FnMut() -> Result<()>) -> Result<Timing>;

/// What the bench lends this section.
pub struct Helpers<'a> {
    /// The median of several runs of a closure (after a warm-up).
    pub median: Median<'a>,
    /// Reads every byte of a slice (the same fold for every path measured).
    pub touch: fn(&[u8]) -> u64,
    /// The machine's sequential read of a file through a buffer of this many bytes.
    pub read_sequential: fn(&Path, usize) -> Result<u64>,
    pub runs: usize,
}

const LAYERS: usize = 512;
/// Q4_0 matrices per layer; each layer also has one f32 norm vector.
const MATRICES: usize = 7;
const VOCAB: usize = 32_000;
const KEYS: usize = 300;
/// Q4_0 tensors dequantized by both readers.
const DEQUANTIZED: usize = 32;

/// Writes the file unless it exists; returns its size.
fn make(path: &Path, scale: usize) -> Result<u64> {
    if let Ok(m) = std::fs::metadata(path) {
        return Ok(m.len());
    }
    let rows = 1024 * scale as u64;
    let cols = 512u64;
    let q_len = rows * cols / 32 * 18;
    let norm_len = cols * 4;
    let mut g = Gguf::new(3);
    let arch = g.str_value("llama");
    g = g.kv(b"general.architecture", STR, &arch);
    for i in 0..KEYS - 4 {
        let key = format!("llama.bench.key_{i:03}");
        g = match i % 3 {
            0 => g.kv(key.as_bytes(), U32, &(i as u32).to_le_bytes()),
            1 => g.kv(key.as_bytes(), F32_VALUE, &(i as f32).to_le_bytes()),
            _ => {
                let v = g.str_value(&format!("value {i}"));
                g.kv(key.as_bytes(), STR, &v)
            }
        };
    }
    let array = |elem: u32, items: Vec<u8>| {
        let mut b = elem.to_le_bytes().to_vec();
        b.extend((VOCAB as u64).to_le_bytes());
        b.extend(items);
        b
    };
    let tokens: Vec<u8> = (0..VOCAB)
        .flat_map(|i| g.str_value(&format!("tok{i}")))
        .collect();
    let scores: Vec<u8> = (0..VOCAB)
        .flat_map(|i| (-(i as f32)).to_le_bytes())
        .collect();
    let types: Vec<u8> = (0..VOCAB)
        .flat_map(|i| ((i % 6) as i32).to_le_bytes())
        .collect();
    g = g
        .kv(b"tokenizer.ggml.tokens", ARRAY, &array(STR, tokens))
        .kv(b"tokenizer.ggml.scores", ARRAY, &array(F32_VALUE, scores))
        .kv(b"tokenizer.ggml.token_type", ARRAY, &array(I32, types));
    let mut sizes = Vec::new();
    let mut offset = 0u64;
    for layer in 0..LAYERS {
        for m in 0..MATRICES {
            let name = format!("blk.{layer}.w{m}.weight");
            g = g.info(&name, &[cols, rows], Q4_0, offset);
            sizes.push(q_len);
            offset += q_len.next_multiple_of(32);
        }
        g = g.info(&format!("blk.{layer}.norm.weight"), &[cols], F32, offset);
        sizes.push(norm_len);
        offset += norm_len.next_multiple_of(32);
    }
    let tmp = path.with_extension("part");
    let mut f = BufWriter::with_capacity(1 << 20, File::create(&tmp)?);
    f.write_all(&g.finish())?;
    // Q4_0 blocks of a scale of 1/64 (f16 0x2400) and varied codes.
    let mut block = [0u8; 18];
    block[..2].copy_from_slice(&0x2400u16.to_le_bytes());
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    for len in sizes {
        let mut tensor = Vec::with_capacity(len as usize);
        while (tensor.len() as u64) < len {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            for (i, b) in block[2..].iter_mut().enumerate() {
                *b = (seed >> (i % 8 * 8)) as u8;
            }
            tensor.extend_from_slice(&block);
        }
        tensor.truncate(len as usize);
        tensor.resize(len.next_multiple_of(32) as usize, 0);
        f.write_all(&tensor)?;
    }
    f.into_inner().context("flush")?.sync_all()?;
    std::fs::rename(&tmp, path)?;
    Ok(std::fs::metadata(path)?.len())
}

pub fn rows(dir: &Path, scale: usize, h: &Helpers<'_>) -> Result<Vec<Row>> {
    let path = dir.join(format!("model-{scale}.gguf"));
    let size = make(&path, scale)?;
    println!(
        "  gguf file: {} tensors, {KEYS} keys, a {VOCAB}-token vocabulary, {:.2} GiB",
        LAYERS * (MATRICES + 1),
        size as f64 / f64::from(1u32 << 30)
    );
    let mut rows: Vec<Row> = Vec::new();
    let names: Vec<String> = ztensor::open(&path)?.names().map(str::to_owned).collect();
    let t_open = (h.median)(&mut || {
        let r = ztensor::open(&path)?;
        for n in &names {
            std::hint::black_box(r.object(n)?);
        }
        Ok(())
    })?;
    let t_seq = (h.median)(&mut || {
        std::hint::black_box((h.read_sequential)(&path, 1 << 20)?);
        Ok(())
    })?;
    let t_read = (h.median)(&mut || {
        let r = ztensor::open(&path)?;
        let mut acc = 0u64;
        for o in &r {
            acc ^= (h.touch)(&o.bytes()?);
        }
        std::hint::black_box(acc);
        Ok(())
    })?;
    let t_deq = (h.median)(&mut || {
        let r = ztensor::open(&path)?;
        for o in r
            .iter()
            .filter(|o| o.ggml_type().is_some())
            .take(DEQUANTIZED)
        {
            std::hint::black_box(o.read::<f32>()?);
        }
        Ok(())
    })?;

    let python = std::env::var("GGUF_PYTHON").ok();
    let theirs = match &python {
        Some(py) => {
            let script =
                Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/bench/gguf_reader.py");
            let out = Command::new(py)
                .arg(script)
                .arg(&path)
                .arg(h.runs.to_string())
                .arg(DEQUANTIZED.to_string())
                .output()?;
            anyhow::ensure!(
                out.status.success(),
                "gguf_reader.py: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let j: serde_json::Value = serde_json::from_slice(&out.stdout)?;
            let secs = |k: &str| {
                j[k].as_f64()
                    .map(|s| Timing::from(Duration::from_secs_f64(s)))
            };
            Some((secs("open"), secs("read"), secs("dequantize")))
        }
        None => None,
    };
    let vs = |d: Option<Timing>, what: &str| d.map(|d| (d, what.to_owned()));
    let (p_open, p_read, p_deq) = theirs.unwrap_or((None, None, None));
    if let Some(t) = p_open {
        rows.push(("gguf package: GGUFReader(path) (Python)".into(), t, None));
    }
    rows.push((
        "ztensor: open (full validation), look up each".into(),
        t_open,
        vs(p_open, "gguf package"),
    ));
    rows.push(("sequential read, 1 MiB buffer (limit)".into(), t_seq, None));
    if let Some(t) = p_read {
        rows.push((
            "gguf package: every tensor's data, XOR-folded".into(),
            t,
            Some((t_seq, "sequential".into())),
        ));
    }
    rows.push((
        "ztensor: open, every tensor's bytes (mapped)".into(),
        t_read,
        Some((t_seq, "sequential".into())),
    ));
    if let Some(t) = p_deq {
        rows.push((
            format!("gguf package: dequantize {DEQUANTIZED} Q4_0 tensors"),
            t,
            None,
        ));
    }
    rows.push((
        format!("ztensor: read::<f32> of {DEQUANTIZED} Q4_0 tensors"),
        t_deq,
        vs(p_deq, "gguf package"),
    ));
    if python.is_none() {
        println!("  (for the gguf package's rows: GGUF_PYTHON=<python with gguf and numpy>)");
    }
    Ok(rows)
}
