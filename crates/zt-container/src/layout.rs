//! Constants of the zTensor container, every version: magics, footer, alignment, caps.

/// Header and footer magic of zTensor 1.x files (v1.1, v1.2).
pub const MAGIC_V1: [u8; 8] = *b"ZTEN1000";
/// Header magic of zTensor v0.1 files (no footer magic; the file ends with the index size).
pub const MAGIC_V0_1: [u8; 8] = *b"ZTEN0001";
/// Length of the header magic.
pub const HEADER_LEN: u64 = 8;
/// Length of the v1 tail: manifest size (u64 LE) and footer magic.
pub const FOOTER_LEN_V1: u64 = 16;
/// Length of the v0.1 tail: index size (u64 LE).
pub const FOOTER_LEN_V0_1: u64 = 8;
/// Every blob starts at a multiple of this.
pub const ALIGNMENT: u64 = 64;
/// Largest manifest (or v0.1 index) a reader accepts, as the spec requires: 1 GiB.
pub const MAX_MANIFEST_LEN: u64 = 1 << 30;

/// Header and footer magic of zTensor v2 files (ztensor 2.x): `"\x89ZT2\r\n\x1a\n"`, PNG-style,
/// so that text tools and line-ending conversions show up as a bad magic.
pub const MAGIC_V2: [u8; 8] = *b"\x89ZT2\r\n\x1a\n";
/// Length of the v2 footer: manifest offset, length and hash (u64 LE each), version and
/// reserved (u32 LE each), magic.
pub const FOOTER_LEN_V2: u64 = 40;
/// The version number a v2 footer must carry.
pub const VERSION_V2: u32 = 2;
/// Every v2 blob (the manifest too) starts at a multiple of this, and at or after it.
pub const ALIGNMENT_V2: u64 = 4096;
/// The shortest v2 file: header magic and footer.
pub const MIN_FILE_LEN_V2: u64 = HEADER_LEN + FOOTER_LEN_V2;

/// Rounds `n` up to the next multiple of `align` (a power of two), or `None` on overflow.
pub fn align_up(n: u64, align: u64) -> Option<u64> {
    debug_assert!(align.is_power_of_two());
    Some(n.checked_add(align - 1)? & !(align - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn align_up_rounds_and_detects_overflow() {
        assert_eq!(align_up(0, 64), Some(0));
        assert_eq!(align_up(1, 64), Some(64));
        assert_eq!(align_up(64, 64), Some(64));
        assert_eq!(align_up(65, 64), Some(128));
        assert_eq!(align_up(u64::MAX, 64), None);
    }
}
