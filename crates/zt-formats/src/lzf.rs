//! LZF, the compressor of h5py's own HDF5 filter (id 32000), as liblzf decodes it.
//!
//! The stream is a series of items, each starting with a control byte `c`:
//! - `c < 32`: a literal run, the next `c + 1` bytes copied as they are;
//! - otherwise a back reference: a length of `c >> 5` (7 meaning 7 plus the next byte), and a
//!   distance of `(c & 31) << 8` plus the next byte plus one. `length + 2` bytes are copied
//!   from that far back in the output, the copy overlapping itself when the distance is
//!   shorter than the length (a run).
//!
//! Every count comes from the stream and is checked against the output and the input: a
//! hostile stream gives an error, never a write past `out` or a read before its start.
//!
//! ```
//! // "abcabcabcX": a literal run of "abc", a back reference of 6 bytes 3 back, a literal "X".
//! let stream = [2, b'a', b'b', b'c', 4 << 5, 2, 0, b'X'];
//! let mut out = [0u8; 10];
//! zt_formats::lzf::decode_into(&stream, &mut out)?;
//! assert_eq!(&out, b"abcabcabcX");
//! # Ok::<(), zt_container::Error>(())
//! ```

use zt_container::{Error, Result};

/// Decodes the LZF stream `data` into `out`, which it must fill exactly.
pub fn decode_into(data: &[u8], out: &mut [u8]) -> Result<()> {
    let mut input = data.iter().copied().enumerate();
    let mut at = 0usize;
    let size = out.len();
    let past_end = |what: &str, at: usize| {
        Error::invalid(format!(
            "lzf: {what} at byte {at} of the output goes past its {size} bytes"
        ))
    };
    while let Some((i, control)) = input.next() {
        let control = usize::from(control);
        if control < 32 {
            let n = control + 1;
            let run = data.get(i + 1..i + 1 + n).ok_or_else(|| {
                Error::invalid(format!(
                    "lzf: a literal run of {n} bytes cut short at byte {i}"
                ))
            })?;
            let end = at + n;
            out.get_mut(at..end)
                .ok_or_else(|| past_end("a literal run", at))?
                .copy_from_slice(run);
            input.nth(n - 1);
            at = end;
            continue;
        }
        let short = || Error::invalid(format!("lzf: a back reference cut short at byte {i}"));
        let mut len = control >> 5;
        if len == 7 {
            len += usize::from(input.next().ok_or_else(short)?.1);
        }
        let distance = ((control & 31) << 8) + usize::from(input.next().ok_or_else(short)?.1) + 1;
        let len = len + 2;
        let from = at.checked_sub(distance).ok_or_else(|| {
            Error::invalid(format!(
                "lzf: a back reference at byte {i} reaches {distance} bytes back from byte {at} of the output"
            ))
        })?;
        let end = at + len;
        if end > out.len() {
            return Err(past_end("a back reference", at));
        }
        copy_back_reference(out, from, at, len);
        at = end;
    }
    if at != out.len() {
        return Err(Error::invalid(format!(
            "lzf: the stream decodes to {at} bytes, not {}",
            out.len()
        )));
    }
    Ok(())
}

/// Copies the `len` bytes that start at `from` in `out` to `at`, as an LZ77 back reference
/// does (LZF's, and BloscLZ's): when the reference is nearer than its length, the copy
/// repeats the pattern between `from` and `at`. A run of one byte is a fill; a longer
/// pattern is copied once, then from its start in copies that double, each clear of what
/// it writes (200 bytes 4 back are 6 copies, not 50).
///
/// Does nothing unless `from < at` and `at + len` lies inside `out` (the decoders check
/// both first, and report them).
///
/// ```
/// let mut out = *b"ab......";
/// zt_formats::lzf::copy_back_reference(&mut out, 0, 2, 6);
/// assert_eq!(&out, b"abababab");
/// ```
pub fn copy_back_reference(out: &mut [u8], from: usize, at: usize, len: usize) {
    let inside = at.checked_add(len).is_some_and(|end| end <= out.len());
    if from >= at || !inside {
        return;
    }
    let distance = at - from;
    if distance == 1 {
        let byte = out[from];
        out[at..at + len].fill(byte);
        return;
    }
    let mut done = len.min(distance);
    out.copy_within(from..from + done, at);
    // `done` stays a whole number of periods until the last copy, so the pattern restarts
    // at `from`; the source ends before `at + done`, where the copy writes.
    while done < len {
        let n = (len - done).min(done);
        out.copy_within(from..from + n, at + done);
        done += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(data: &[u8], n: usize) -> Result<Vec<u8>> {
        let mut out = vec![0u8; n];
        decode_into(data, &mut out).map(|()| out)
    }

    #[test]
    fn literals_references_and_runs() {
        // A long reference (length byte): 7 + 3 + 2 = 12 bytes of a one-byte pattern.
        let run = [0, b'z', 7 << 5, 3, 0];
        assert_eq!(decode(&run, 13).unwrap(), vec![b'z'; 13]);
        // The farthest distance, 8192 bytes back.
        let mut far = Vec::new();
        let mut want = Vec::new();
        for k in 0..256 {
            far.push(31);
            far.extend((0..32).map(|j| (k * 32 + j) as u8 ^ 0x5a));
        }
        want.extend(far.chunks(33).flat_map(|c| c[1..].to_vec()));
        far.extend([(1 << 5) | 31, 255]);
        want.extend_from_within(..3);
        assert_eq!(decode(&far, 8195).unwrap(), want);
        assert_eq!(decode(&[], 0).unwrap(), Vec::<u8>::new());
    }

    #[test]
    fn a_back_reference_repeats_its_pattern() {
        for distance in 1..12 {
            for len in 0..40 {
                let mut out: Vec<u8> = (0..distance as u8)
                    .chain(std::iter::repeat_n(0, len))
                    .collect();
                copy_back_reference(&mut out, 0, distance, len);
                let want: Vec<u8> = (0..distance + len).map(|i| (i % distance) as u8).collect();
                assert_eq!(out, want, "{distance} {len}");
            }
        }
        // Outside the slice, or not backwards: nothing is written.
        let mut out = [1, 2, 0, 0];
        copy_back_reference(&mut out, 0, 2, 3);
        copy_back_reference(&mut out, 2, 2, 1);
        assert_eq!(out, [1, 2, 0, 0]);
    }

    #[test]
    fn any_bytes_give_a_result_not_a_panic() {
        // Random streams, a third of them led by literal runs so that references find
        // output behind them, into outputs of every size up to twice the stream.
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut decoded = 0;
        for round in 0..3000 {
            let len = (next() % 64) as usize;
            let mut data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if round % 3 == 0 {
                data.splice(0..0, std::iter::once(31).chain((0..32).map(|k| k as u8)));
            }
            let mut out = vec![0u8; (next() % (2 * data.len() as u64 + 1)) as usize];
            decoded += usize::from(decode_into(&data, &mut out).is_ok());
        }
        // Some streams decode whole (37 of these), so both ends of the decoder ran.
        assert!(decoded > 10, "{decoded} of 3000 decoded");
    }

    #[test]
    fn damaged_streams_are_refused() {
        let message = |data: &[u8], n: usize| decode(data, n).unwrap_err().to_string();
        let e = message(&[4, b'a'], 5);
        assert!(
            e.contains("a literal run of 5 bytes cut short at byte 0"),
            "{e}"
        );
        let e = message(&[2, 1, 2, 3], 2);
        assert!(
            e.contains("a literal run at byte 0 of the output goes past its 2 bytes"),
            "{e}"
        );
        let e = message(&[0, 1, 1 << 5, 1], 4);
        assert!(e.contains("reaches 2 bytes back from byte 1"), "{e}");
        let e = message(&[0, 1, 7 << 5], 4);
        assert!(e.contains("a back reference cut short at byte 2"), "{e}");
        let e = message(&[0, 1, 1 << 5], 4);
        assert!(e.contains("a back reference cut short at byte 2"), "{e}");
        let e = message(&[0, 1, 1 << 5, 0], 3);
        assert!(
            e.contains("a back reference at byte 1 of the output goes past"),
            "{e}"
        );
        let e = message(&[1, 1, 2], 3);
        assert!(e.contains("decodes to 2 bytes, not 3"), "{e}");
    }
}
