//! Bob Jenkins' lookup3 hash (`hashlittle`, initial value 0), the checksum HDF5 puts at the
//! end of every metadata structure of its newer layouts: superblocks v2 and v3, object
//! headers v2 and their continuation blocks, fractal heaps, v2 B-trees and the array chunk
//! indexes. Written here (about 60 lines) because no kept crate offers it: see
//! docs/decisions.md. The HDF5 reader checks them; `xtask gen-fixtures` writes them.
//!
//! ```text
//!  a = b = c = 0xdeadbeef + len
//!  every 12-byte block but the last: a += le32, b += le32, c += le32; mix(a, b, c)
//!  the last 1..=12 bytes, zero-padded: a, b, c += le32 words; final(a, b, c) -> c
//!  no bytes at all: c, unmixed
//! ```

/// The lookup3 hash of `bytes` (HDF5's `H5_checksum_lookup3(bytes, len, 0)`).
///
/// ```
/// use zt_formats::lookup3::lookup3;
///
/// assert_eq!(lookup3(b"Four score and seven years ago"), 0x1777_0551);
/// ```
pub fn lookup3(bytes: &[u8]) -> u32 {
    let mut state = State::new(bytes.len());
    if bytes.is_empty() {
        return state.c;
    }
    // The last block is whatever remains after every full block but one: 1 to 12 bytes.
    let (body, tail) = bytes.split_at((bytes.len() - 1) / 12 * 12);
    for block in body.chunks_exact(12) {
        state.mix(block);
    }
    state.finish(tail)
}

/// The lookup3 hash of `bytes` with the 4 bytes at `hole` read as zeros, without a copy:
/// how a fractal heap's direct block is summed, its checksum field inside the block.
///
/// ```
/// use zt_formats::lookup3::{lookup3, lookup3_with_hole};
///
/// assert_eq!(lookup3_with_hole(b"abcdWXYZefgh", 4), lookup3(b"abcd\0\0\0\0efgh"));
/// ```
pub fn lookup3_with_hole(bytes: &[u8], hole: usize) -> u32 {
    let mut state = State::new(bytes.len());
    if bytes.is_empty() {
        return state.c;
    }
    let byte = |i: usize| {
        if (hole..hole.saturating_add(4)).contains(&i) {
            0
        } else {
            bytes[i]
        }
    };
    let last = (bytes.len() - 1) / 12 * 12;
    let mut block = [0u8; 12];
    for start in (0..last).step_by(12) {
        for (i, b) in block.iter_mut().enumerate() {
            *b = byte(start + i);
        }
        state.mix(&block);
    }
    let tail: Vec<u8> = (last..bytes.len()).map(byte).collect();
    state.finish(&tail)
}

struct State {
    a: u32,
    b: u32,
    c: u32,
}

impl State {
    fn new(len: usize) -> Self {
        let start = 0xdead_beef_u32.wrapping_add(len as u32);
        State {
            a: start,
            b: start,
            c: start,
        }
    }

    fn add(&mut self, block: &[u8]) {
        let mut padded = [0u8; 12];
        padded[..block.len()].copy_from_slice(block);
        let word =
            |i: usize| u32::from_le_bytes([padded[i], padded[i + 1], padded[i + 2], padded[i + 3]]);
        self.a = self.a.wrapping_add(word(0));
        self.b = self.b.wrapping_add(word(4));
        self.c = self.c.wrapping_add(word(8));
    }

    /// One full block: lookup3's `mix`.
    fn mix(&mut self, block: &[u8]) {
        self.add(block);
        let State { a, b, c } = self;
        *a = a.wrapping_sub(*c) ^ c.rotate_left(4);
        *c = c.wrapping_add(*b);
        *b = b.wrapping_sub(*a) ^ a.rotate_left(6);
        *a = a.wrapping_add(*c);
        *c = c.wrapping_sub(*b) ^ b.rotate_left(8);
        *b = b.wrapping_add(*a);
        *a = a.wrapping_sub(*c) ^ c.rotate_left(16);
        *c = c.wrapping_add(*b);
        *b = b.wrapping_sub(*a) ^ a.rotate_left(19);
        *a = a.wrapping_add(*c);
        *c = c.wrapping_sub(*b) ^ b.rotate_left(4);
        *b = b.wrapping_add(*a);
    }

    /// The last 1 to 12 bytes: lookup3's `final`.
    fn finish(mut self, tail: &[u8]) -> u32 {
        self.add(tail);
        let State {
            mut a,
            mut b,
            mut c,
        } = self;
        c = (c ^ b).wrapping_sub(b.rotate_left(14));
        a = (a ^ c).wrapping_sub(c.rotate_left(11));
        b = (b ^ a).wrapping_sub(a.rotate_left(25));
        c = (c ^ b).wrapping_sub(b.rotate_left(16));
        a = (a ^ c).wrapping_sub(c.rotate_left(4));
        b = (b ^ a).wrapping_sub(a.rotate_left(14));
        (c ^ b).wrapping_sub(b.rotate_left(24))
    }
}

#[cfg(test)]
mod tests {
    use super::{lookup3, lookup3_with_hole};

    #[test]
    fn matches_the_values_lookup3_c_prints() {
        // lookup3.c's driver5: hashlittle("", 0, 0) and the 30-byte sentence with initval 0.
        assert_eq!(lookup3(b""), 0xdead_beef);
        assert_eq!(lookup3(b"Four score and seven years ago"), 0x1777_0551);
    }

    #[test]
    fn a_hole_hashes_as_zeros_in_place() {
        for len in [0usize, 1, 11, 12, 13, 24, 25, 100] {
            let bytes: Vec<u8> = (0..len as u8).map(|i| i.wrapping_mul(37) | 1).collect();
            for hole in [0, 3, 10, 12, len.saturating_sub(4), len] {
                let mut zeroed = bytes.clone();
                for b in zeroed.iter_mut().skip(hole).take(4) {
                    *b = 0;
                }
                assert_eq!(
                    lookup3_with_hole(&bytes, hole),
                    lookup3(&zeroed),
                    "{len} {hole}"
                );
            }
        }
    }
}
