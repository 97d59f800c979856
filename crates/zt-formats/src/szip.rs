//! szip as HDF5 stores it: the adaptive entropy coding of CCSDS 121.0-B (Rice coding with
//! zero-block and second-extension options, an optional unit-delay predictor), in the
//! byte layout of libaec's szip compatibility layer, which is what HDF5's szip filter calls.
//!
//! A chunk the filter wrote is its decoded size (4 bytes, little-endian), then the coded
//! stream. The filter's four parameters are the szip options mask (bit 16: samples are
//! big-endian; bit 32: the nearest-neighbour predictor), pixels per block (even, at most 32),
//! bits per pixel and pixels per scanline.
//!
//! The stream is blocks of `block` samples grouped into reference sample intervals (RSIs) of
//! `ceil(scanline / block)` blocks. Each block starts with an option id of 3, 4 or 5 bits
//! (samples of at most 8, 16 or 32 bits); with the predictor, the first block of an RSI
//! carries a reference sample. Ids: 0 is a low-entropy block (one more bit: a run of zero
//! blocks, or the second extension, pairs coded as one number); the highest id is a block
//! stored raw; the others split each sample into a unary high part and `id - 1` low bits (all
//! unary parts first, then all low bits). The predictor is undone per RSI.
//!
//! Deviations from the plain coder that the compatibility layer adds, and this reproduces:
//! 32- and 64-bit pixels are coded as bytes, the whole output's bytes grouped by their
//! position in the pixel (byte planes); a scanline that is not a whole number of blocks is
//! padded to one, and the padding removed here.
//!
//! Every count comes from the stream and is bounded by the output: a hostile stream can make
//! this return an error, never write past `out` or loop longer than its input allows.

use zt_container::{Error, Result};

/// The options mask's bit for big-endian samples.
const MSB: u32 = 16;
/// The options mask's bit for the nearest-neighbour predictor.
const NN: u32 = 32;
/// Zero-block runs of this code mean "to the end of the segment (64 blocks) or the RSI".
const ROS: u32 = 5;
/// The highest second-extension code: sums of a pair up to 12.
const SE_MAX: u32 = 90;
/// The most pixels a block may have (szip's limit).
const MAX_BLOCK: u32 = 32;
/// The most blocks a scanline may have (szip's limit).
const MAX_BLOCKS_PER_LINE: u32 = 128;

/// Decodes one chunk of HDF5's szip filter into `out` (exactly the chunk's bytes), with the
/// filter's parameters `[mask, pixels per block, bits per pixel, pixels per scanline]`.
///
/// ```
/// // A block of eight 8-bit samples stored raw (id 7 of 3 bits, then 8 x 8 bits, padded).
/// let mut stream = vec![8, 0, 0, 0]; // the decoded size
/// let mut bits = String::from("111");
/// for v in [1u8, 2, 3, 4, 5, 6, 7, 8] {
///     bits.push_str(&format!("{v:08b}"));
/// }
/// while bits.len() % 8 != 0 {
///     bits.push('0');
/// }
/// for byte in bits.as_bytes().chunks(8) {
///     stream.push(u8::from_str_radix(std::str::from_utf8(byte).unwrap(), 2).unwrap());
/// }
/// let mut out = [0u8; 8];
/// zt_formats::szip::decode_hdf5(&stream, &[0, 8, 8, 8], &mut out).unwrap();
/// assert_eq!(out, [1, 2, 3, 4, 5, 6, 7, 8]);
/// ```
pub fn decode_hdf5(stored: &[u8], params: &[u32], out: &mut [u8]) -> Result<()> {
    let bad = |m: String| Error::invalid(format!("szip: {m}"));
    let &[mask, block, pixel_bits, scanline] = params else {
        return Err(bad(format!("{} filter parameters, not 4", params.len())));
    };
    let (size, stream) = stored
        .split_first_chunk::<4>()
        .ok_or_else(|| bad("a chunk shorter than its size".into()))?;
    let declared = u32::from_le_bytes(*size) as usize;
    if declared != out.len() {
        return Err(bad(format!(
            "the chunk declares {declared} bytes, the dataset's chunk is {}",
            out.len()
        )));
    }
    if block == 0 || block % 2 == 1 || block > MAX_BLOCK {
        return Err(bad(format!("{block} pixels per block")));
    }
    if scanline == 0 || scanline.div_ceil(block) > MAX_BLOCKS_PER_LINE {
        return Err(bad(format!("{scanline} pixels per scanline")));
    }
    if !(1..=32).contains(&pixel_bits) && pixel_bits != 64 {
        return Err(bad(format!("{pixel_bits} bits per pixel")));
    }
    // 32- and 64-bit pixels are coded as byte planes of 8-bit samples.
    let planes = pixel_bits == 32 || pixel_bits == 64;
    let bits = if planes { 8 } else { pixel_bits };
    let sample_bytes: usize = match bits {
        17.. => 4,
        9..=16 => 2,
        _ => 1,
    };
    let rsi = scanline.div_ceil(block) as usize;
    let block = block as usize;
    let scanline = scanline as usize;
    // Scanlines padded to whole blocks: the coded samples of the padded lines.
    let padded_line = rsi * block;
    let samples_out = out.len() / sample_bytes;
    let lines = samples_out.div_ceil(scanline);
    let coded = if padded_line != scanline {
        lines * padded_line
    } else {
        samples_out
    };
    let coder = Coder {
        bits,
        block,
        rsi,
        predictor: mask & NN != 0,
    };
    let samples = coder.decode(stream, coded)?;
    // Padding removed, then the samples written in their byte order.
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(out.len())
        .map_err(|_| Error::out_of_memory("an szip chunk"))?;
    let msb = mask & MSB != 0;
    for (i, &s) in samples.iter().enumerate() {
        if padded_line != scanline && i % padded_line >= scanline {
            continue;
        }
        if bytes.len() >= out.len() {
            break;
        }
        let be = s.to_be_bytes();
        let le = s.to_le_bytes();
        let (from, take) = if msb {
            (&be[4 - sample_bytes..], sample_bytes)
        } else {
            (&le[..sample_bytes], sample_bytes)
        };
        bytes.extend_from_slice(&from[..take]);
    }
    if bytes.len() != out.len() {
        return Err(bad(format!(
            "the stream ends after {} of {} bytes",
            bytes.len(),
            out.len()
        )));
    }
    if planes {
        // Byte j of pixel i was coded at j * (n / width) + i.
        let width = (pixel_bits / 8) as usize;
        let n = out.len() / width;
        for (i, pixel) in out.chunks_exact_mut(width).enumerate() {
            for (j, b) in pixel.iter_mut().enumerate() {
                *b = bytes[j * n + i];
            }
        }
    } else {
        out.copy_from_slice(&bytes);
    }
    Ok(())
}

/// The adaptive entropy decoder's settings.
struct Coder {
    /// Bits per sample (1 to 32).
    bits: u32,
    /// Samples per block (even, 2 to 32).
    block: usize,
    /// Blocks per reference sample interval.
    rsi: usize,
    /// Whether samples were mapped by the unit-delay predictor.
    predictor: bool,
}

impl Coder {
    /// Decodes `count` samples (fewer when the stream ends, which the caller reports).
    fn decode(&self, stream: &[u8], count: usize) -> Result<Vec<u32>> {
        let bad = |m: &str, at: u64| Error::invalid(format!("szip: {m}")).at(at);
        let id_bits = match self.bits {
            17.. => 5,
            9..=16 => 4,
            _ => 3,
        };
        let raw_id = (1u32 << id_bits) - 1;
        let mut r = Bits::new(stream);
        let mut out: Vec<u32> = Vec::new();
        out.try_reserve_exact(count)
            .map_err(|_| Error::out_of_memory("szip samples"))?;
        let interval = self.rsi * self.block;
        while out.len() < count && !r.at_end() {
            // One reference sample interval.
            let start = out.len();
            let mut blocks = 0usize;
            while blocks < self.rsi && out.len() < count {
                let used = out.len() - start;
                let reference = self.predictor && used == 0;
                let id = r
                    .take(id_bits)
                    .ok_or_else(|| bad("ends inside a block's id", r.byte()))?;
                let push = |v: u32, out: &mut Vec<u32>| {
                    if out.len() < count {
                        out.push(v);
                    }
                };
                if id == 0 {
                    let second = r
                        .take(1)
                        .ok_or_else(|| bad("ends inside a block", r.byte()))?;
                    if reference {
                        let v = r
                            .take(self.bits)
                            .ok_or_else(|| bad("ends inside a reference", r.byte()))?;
                        push(v, &mut out);
                    }
                    if second == 1 {
                        let mut i = usize::from(reference);
                        while i < self.block {
                            let m = r
                                .unary()
                                .ok_or_else(|| bad("ends inside a block", r.byte()))?;
                            if m > SE_MAX {
                                return Err(bad(
                                    "a second-extension code past the table",
                                    r.byte(),
                                ));
                            }
                            let (sum, first) = second_extension(m);
                            let d1 = m - first;
                            if i % 2 == 0 {
                                push(sum - d1, &mut out);
                                i += 1;
                            }
                            push(d1, &mut out);
                            i += 1;
                        }
                        blocks += 1;
                    } else {
                        let code = r
                            .unary()
                            .ok_or_else(|| bad("ends inside a zero run", r.byte()))?;
                        let mut run = code as usize + 1;
                        let b = used / self.block;
                        if run == ROS as usize {
                            run = (self.rsi - b).min(64 - b % 64);
                        } else if run > ROS as usize {
                            run -= 1;
                        }
                        if b + run > self.rsi {
                            return Err(bad("a run of zero blocks past the interval", r.byte()));
                        }
                        let zeros = run * self.block - usize::from(reference);
                        for _ in 0..zeros {
                            push(0, &mut out);
                        }
                        blocks += run;
                    }
                } else if id == raw_id {
                    for _ in 0..self.block {
                        let v = r
                            .take(self.bits)
                            .ok_or_else(|| bad("ends inside a raw block", r.byte()))?;
                        push(v, &mut out);
                    }
                    blocks += 1;
                } else {
                    let k = id - 1;
                    if reference {
                        let v = r
                            .take(self.bits)
                            .ok_or_else(|| bad("ends inside a reference", r.byte()))?;
                        push(v, &mut out);
                    }
                    let n = self.block - usize::from(reference);
                    let mut high = [0u32; MAX_BLOCK as usize];
                    for h in high.iter_mut().take(n) {
                        let q = r
                            .unary()
                            .ok_or_else(|| bad("ends inside a block", r.byte()))?;
                        *h = q
                            .checked_shl(k)
                            .filter(|_| q <= (u32::MAX >> k.min(31)))
                            .ok_or_else(|| bad("a sample past 32 bits", r.byte()))?;
                    }
                    for &h in high.iter().take(n) {
                        let low = if k > 0 {
                            r.take(k)
                                .ok_or_else(|| bad("ends inside a block", r.byte()))?
                        } else {
                            0
                        };
                        push(h | low, &mut out);
                    }
                    blocks += 1;
                }
            }
            if self.predictor {
                let end = out.len();
                self.unpredict(&mut out[start..end.min(start + interval)]);
            }
        }
        Ok(out)
    }

    /// Undoes the unit-delay predictor's mapping over one interval (unsigned samples): the
    /// first is the reference, each next one a mapped difference from the one before.
    fn unpredict(&self, samples: &mut [u32]) {
        let Some((&first, rest)) = samples.split_first_mut().map(|(f, r)| (&*f, r)) else {
            return;
        };
        let xmax: u32 = if self.bits == 32 {
            u32::MAX
        } else {
            (1u32 << self.bits) - 1
        };
        let med = xmax / 2 + 1;
        let mut x = first;
        for d in rest.iter_mut() {
            let delta = *d;
            let half = (delta >> 1) + (delta & 1);
            // The room on the side of x nearer its end of the range.
            let near_top = x & med != 0;
            let room = if near_top { xmax ^ x } else { x };
            x = if half <= room {
                if delta & 1 == 1 {
                    x.wrapping_sub(half)
                } else {
                    x.wrapping_add(delta >> 1)
                }
            } else if near_top {
                xmax ^ delta
            } else {
                delta
            };
            *d = x;
        }
    }
}

/// The second extension's code `m`: the pair's sum and the code of the first pair with it.
fn second_extension(m: u32) -> (u32, u32) {
    // Codes are numbered by sum: sum s takes codes s(s+1)/2 ..= s(s+1)/2 + s.
    let mut sum = 0;
    while (sum + 1) * (sum + 2) / 2 <= m {
        sum += 1;
    }
    (sum, sum * (sum + 1) / 2)
}

/// A reader of bits, most significant first.
struct Bits<'a> {
    bytes: &'a [u8],
    /// The next bit, counted from the start.
    at: usize,
}

impl<'a> Bits<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Bits { bytes, at: 0 }
    }

    fn at_end(&self) -> bool {
        self.at >= self.bytes.len() * 8
    }

    fn byte(&self) -> u64 {
        (self.at / 8) as u64
    }

    fn bit(&mut self) -> Option<u32> {
        let byte = *self.bytes.get(self.at / 8)?;
        let b = (byte >> (7 - self.at % 8)) & 1;
        self.at += 1;
        Some(u32::from(b))
    }

    /// `n` bits (at most 32) as a number.
    fn take(&mut self, n: u32) -> Option<u32> {
        if self.at + n as usize > self.bytes.len() * 8 {
            return None;
        }
        let mut v = 0u64;
        for _ in 0..n {
            v = (v << 1) | u64::from(self.bit()?);
        }
        Some(v as u32)
    }

    /// A unary number: zeros before a one.
    fn unary(&mut self) -> Option<u32> {
        let mut n = 0u32;
        loop {
            // Whole zero bytes at once.
            if self.at % 8 == 0 && self.bytes.get(self.at / 8) == Some(&0) {
                n = n.checked_add(8)?;
                self.at += 8;
                continue;
            }
            if self.bit()? == 1 {
                return Some(n);
            }
            n = n.checked_add(1)?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_extension_table() {
        assert_eq!(second_extension(0), (0, 0));
        assert_eq!(second_extension(1), (1, 1));
        assert_eq!(second_extension(2), (1, 1));
        assert_eq!(second_extension(3), (2, 3));
        assert_eq!(second_extension(90), (12, 78));
    }

    #[test]
    fn random_streams_never_panic() {
        // xorshift: deterministic noise, every parameter set HDF5 could declare.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..3000 {
            let n = (next() % 300) as usize;
            let mut stream: Vec<u8> = (0..n).map(|_| next() as u8).collect();
            let out_len = (next() % 256) as usize;
            if stream.len() >= 4 && next() % 2 == 0 {
                stream[..4].copy_from_slice(&(out_len as u32).to_le_bytes());
            }
            let bits = [1, 7, 8, 12, 16, 20, 24, 31, 32, 64][(next() % 10) as usize];
            let block = [2, 8, 16, 32][(next() % 4) as usize];
            let params = [(next() % 64) as u32, block, bits, 1 + (next() % 100) as u32];
            let mut out = vec![0u8; out_len];
            let _ = decode_hdf5(&stream, &params, &mut out);
        }
    }

    #[test]
    fn truncated_and_hostile_streams_are_errors() {
        let mut out = [0u8; 8];
        for stream in [
            &[8u8, 0, 0, 0][..],
            &[8, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            &[1, 0, 0],
        ] {
            assert!(decode_hdf5(stream, &[0, 8, 8, 8], &mut out).is_err());
        }
        assert!(decode_hdf5(&[8, 0, 0, 0, 0xff], &[0, 7, 8, 8], &mut out).is_err());
        assert!(decode_hdf5(&[8, 0, 0, 0, 0xff], &[0, 8, 8], &mut out).is_err());
    }
}
