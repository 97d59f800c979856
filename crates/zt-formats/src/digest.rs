//! Digests: `sha256:<hex>` and `crc32c:<hex>` (zTensor 0.1 and 1.x, over stored bytes), and
//! `xxh3:<16 hex>` and `sha256:<64 hex>` of zTensor v2 (over decoded bytes; which bytes a
//! digest covers is the reader's business, not this module's).
//!
//! [`Digest`] as a parsed and printed value, and [`DigestAlgorithm`] as a name, are always
//! available; computing a digest ([`DigestAlgorithm::compute`]) and checking one
//! ([`Digest::verify`]) need the `digests` feature (on by default), which brings in `sha2` and
//! `crc32c`.

use std::fmt;
use std::str::FromStr;

#[cfg(feature = "digests")]
use sha2::Digest as _;
use zt_container::{Error, Result};

/// A digest algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DigestAlgorithm {
    /// SHA-256.
    Sha256,
    /// CRC-32C (Castagnoli), as iSCSI and ext4 use; not the IEEE CRC-32.
    Crc32c,
    /// XXH3-64 with seed 0 (zTensor v2).
    Xxh3,
}

impl DigestAlgorithm {
    /// Computes the digest of `bytes`.
    #[cfg(feature = "digests")]
    pub fn compute(self, bytes: &[u8]) -> Digest {
        match self {
            DigestAlgorithm::Sha256 => Digest::Sha256(sha2::Sha256::digest(bytes).into()),
            DigestAlgorithm::Crc32c => Digest::Crc32c(crc32c::crc32c(bytes)),
            DigestAlgorithm::Xxh3 => Digest::Xxh3(xxh3_64(bytes)),
        }
    }

    /// A hasher that computes this digest piece by piece (for inputs too large to hold).
    #[cfg(feature = "digests")]
    pub fn hasher(self) -> Hasher {
        Hasher(match self {
            DigestAlgorithm::Sha256 => HasherState::Sha256(sha2::Sha256::new()),
            DigestAlgorithm::Crc32c => HasherState::Crc32c(0),
            DigestAlgorithm::Xxh3 => HasherState::Xxh3(Box::new(xxhash_rust::xxh3::Xxh3::new())),
        })
    }

    /// The name used before the colon.
    pub fn name(self) -> &'static str {
        match self {
            DigestAlgorithm::Sha256 => "sha256",
            DigestAlgorithm::Crc32c => "crc32c",
            DigestAlgorithm::Xxh3 => "xxh3",
        }
    }
}

impl FromStr for DigestAlgorithm {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "sha256" => Ok(DigestAlgorithm::Sha256),
            "crc32c" => Ok(DigestAlgorithm::Crc32c),
            _ => Err(Error::argument(format!(
                "unknown digest algorithm {s:?}: expected sha256 or crc32c"
            ))),
        }
    }
}

/// Computes a digest piece by piece: [`DigestAlgorithm::hasher`], then [`Hasher::update`]
/// with each piece in order, then [`Hasher::finish`]. The result equals
/// [`DigestAlgorithm::compute`] over the pieces joined.
#[cfg(feature = "digests")]
pub struct Hasher(HasherState);

#[cfg(feature = "digests")]
enum HasherState {
    Sha256(sha2::Sha256),
    Crc32c(u32),
    Xxh3(Box<xxhash_rust::xxh3::Xxh3>),
}

#[cfg(feature = "digests")]
impl Hasher {
    /// Adds the next piece.
    pub fn update(&mut self, bytes: &[u8]) {
        match &mut self.0 {
            HasherState::Sha256(h) => h.update(bytes),
            HasherState::Crc32c(c) => *c = crc32c::crc32c_append(*c, bytes),
            HasherState::Xxh3(h) => h.update(bytes),
        }
    }

    /// The digest of everything added.
    pub fn finish(self) -> Digest {
        match self.0 {
            HasherState::Sha256(h) => Digest::Sha256(h.finalize().into()),
            HasherState::Crc32c(c) => Digest::Crc32c(c),
            HasherState::Xxh3(h) => Digest::Xxh3(h.digest()),
        }
    }
}

/// A parsed digest value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Digest {
    /// SHA-256 bytes.
    Sha256([u8; 32]),
    /// CRC-32C value.
    Crc32c(u32),
    /// XXH3-64 value.
    Xxh3(u64),
}

/// XXH3-64 with seed 0: v2 part digests and the v2 manifest hash.
#[cfg(feature = "digests")]
pub fn xxh3_64(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

impl Digest {
    /// The algorithm.
    pub fn algorithm(&self) -> DigestAlgorithm {
        match self {
            Digest::Sha256(_) => DigestAlgorithm::Sha256,
            Digest::Crc32c(_) => DigestAlgorithm::Crc32c,
            Digest::Xxh3(_) => DigestAlgorithm::Xxh3,
        }
    }

    /// Parses a zTensor v2 digest: `algo:hex` with `algo` in `[a-z0-9]+` and `hex` in
    /// `[0-9a-f]+` (uppercase is refused, as the original reader refuses it). `xxh3` needs
    /// exactly 16 digits and `sha256` 64. An algorithm this library does not compute gives
    /// `Ok(None)`: the file stays valid, and only verifying that digest is unsupported.
    pub fn parse_v2(s: &str) -> Result<Option<Self>> {
        // What every part the original writes carries, in one pass; anything else (and any
        // error) takes the general path below.
        if let Some(v) = s.strip_prefix("xxh3:").and_then(lower_hex_u64) {
            return Ok(Some(Digest::Xxh3(v)));
        }
        let bad = |why: &str| Error::invalid(format!("digest {s:?} {why}"));
        let (alg, hex) = s
            .split_once(':')
            .ok_or_else(|| bad("is not of the form algorithm:hex"))?;
        if alg.is_empty()
            || !alg
                .bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        {
            return Err(bad("has an algorithm name outside [a-z0-9]+"));
        }
        if hex.is_empty() || !hex.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(bad("is not lowercase hex digits after the colon"));
        }
        match alg {
            "xxh3" => {
                let a = parse_hex::<8>(hex).ok_or_else(|| bad("is not 16 hex digits"))?;
                Ok(Some(Digest::Xxh3(u64::from_be_bytes(a))))
            }
            "sha256" => {
                let a = parse_hex::<32>(hex).ok_or_else(|| bad("is not 64 hex digits"))?;
                Ok(Some(Digest::Sha256(a)))
            }
            _ => Ok(None),
        }
    }

    /// Parses a digest string. Accepts the spellings real files use: `sha256:` with 64 hex
    /// digits, `crc32c:0x` with 8 hex digits (upper or lower case), and `crc32c:` with 8 bare
    /// hex digits.
    pub fn parse(s: &str) -> Result<Self> {
        let (alg, hex) = s.split_once(':').ok_or_else(|| {
            Error::invalid(format!("digest {s:?} is not of the form algorithm:hex"))
        })?;
        match alg {
            "sha256" => {
                let a = parse_hex::<32>(hex).ok_or_else(|| {
                    Error::invalid(format!("sha256 digest {s:?} is not 64 hex digits"))
                })?;
                Ok(Digest::Sha256(a))
            }
            "crc32c" => {
                let h = hex
                    .strip_prefix("0x")
                    .or_else(|| hex.strip_prefix("0X"))
                    .unwrap_or(hex);
                let b = parse_hex::<4>(h).ok_or_else(|| {
                    Error::invalid(format!("crc32c digest {s:?} is not 8 hex digits"))
                })?;
                Ok(Digest::Crc32c(u32::from_be_bytes(b)))
            }
            _ => Err(Error::unsupported(format!(
                "unknown digest algorithm {alg:?}"
            ))),
        }
    }

    /// Checks `bytes` against this digest.
    #[cfg(feature = "digests")]
    pub fn verify(&self, bytes: &[u8]) -> Result<()> {
        let got = self.algorithm().compute(bytes);
        if got == *self {
            Ok(())
        } else {
            Err(Error::checksum(format!(
                "digest mismatch: stored {self}, computed {got}"
            )))
        }
    }
}

impl fmt::Display for Digest {
    /// The spelling writers use: `sha256:` lowercase hex, `crc32c:0x` uppercase hex, `xxh3:`
    /// 16 lowercase hex digits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Digest::Sha256(b) => {
                f.write_str("sha256:")?;
                for x in b {
                    write!(f, "{x:02x}")?;
                }
                Ok(())
            }
            Digest::Crc32c(v) => write!(f, "crc32c:0x{v:08X}"),
            Digest::Xxh3(v) => write!(f, "xxh3:{v:016x}"),
        }
    }
}

/// Exactly 16 lowercase hex digits as the number they spell, checked and read in one pass.
///
/// Without a branch per digit: a digest's digits are random, so a branch on digit or letter
/// was mispredicted about half the time (61 ns a digest, against 19 ns this way; one per part
/// of every v2 object at open).
fn lower_hex_u64(hex: &str) -> Option<u64> {
    let digits: &[u8; 16] = hex.as_bytes().try_into().ok()?;
    let mut value = 0u64;
    let mut valid = true;
    for &c in digits {
        let decimal = c.wrapping_sub(b'0');
        let letter = c.wrapping_sub(b'a');
        valid &= (decimal < 10) | (letter < 6);
        let digit = if decimal < 10 {
            decimal
        } else {
            letter.wrapping_add(10)
        };
        value = value << 4 | u64::from(digit & 0xf);
    }
    valid.then_some(value)
}

/// `N` bytes from exactly `2N` hex digits (either case), or `None`. No allocation: a v2
/// manifest has a digest for every part, and this runs once each at open.
fn parse_hex<const N: usize>(s: &str) -> Option<[u8; N]> {
    let digits = s.as_bytes();
    if digits.len() != 2 * N {
        return None;
    }
    let nibble = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = [0u8; N];
    for (byte, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
        let (hi, lo) = match pair {
            [hi, lo] => (nibble(*hi)?, nibble(*lo)?),
            _ => return None,
        };
        *byte = hi << 4 | lo;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sixteen_lowercase_hex_digits_and_nothing_else() {
        for hex in [
            "0000000000000000",
            "ffffffffffffffff",
            "0123456789abcdef",
            "fedcba9876543210",
        ] {
            assert_eq!(
                lower_hex_u64(hex),
                u64::from_str_radix(hex, 16).ok(),
                "{hex}"
            );
        }
        // Each character just outside the two ranges, uppercase, and wrong lengths.
        for bad in [
            "/123456789abcdef",
            ":123456789abcdef",
            "`123456789abcdef",
            "g123456789abcdef",
            "0123456789abcdeF",
            "0123456789ABCDEF",
            "0123456789abcde",
            "0123456789abcdef0",
            "",
        ] {
            assert_eq!(lower_hex_u64(bad), None, "{bad}");
        }
    }

    proptest::proptest! {
        /// Agrees with the standard library on any 16 characters of a hex-heavy alphabet.
        #[test]
        fn hex_digits_agree_with_std(hex in "[0-9a-fA-G:/`]{16}") {
            let want = hex
                .bytes()
                .all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
                .then(|| u64::from_str_radix(&hex, 16).ok())
                .flatten();
            proptest::prop_assert_eq!(lower_hex_u64(&hex), want);
        }
    }

    #[test]
    #[cfg(feature = "digests")]
    fn crc32c_is_castagnoli() {
        assert_eq!(
            DigestAlgorithm::Crc32c.compute(b"123456789"),
            Digest::Crc32c(0xE306_9283)
        );
        assert_eq!(Digest::Crc32c(0xE306_9283).to_string(), "crc32c:0xE3069283");
    }

    #[test]
    fn both_spellings_parse() {
        for s in ["crc32c:0xE3069283", "crc32c:0xe3069283", "crc32c:e3069283"] {
            assert_eq!(
                Digest::parse(s).unwrap(),
                Digest::Crc32c(0xE306_9283),
                "{s}"
            );
        }
        let text = "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        let sha = Digest::parse(text).unwrap();
        assert_eq!(sha.algorithm(), DigestAlgorithm::Sha256);
        assert_eq!(sha.to_string(), text);
        assert_eq!(
            Digest::parse(&text.to_uppercase().replace("SHA256", "sha256")).unwrap(),
            sha
        );
        assert_eq!(
            "crc32c".parse::<DigestAlgorithm>().unwrap(),
            DigestAlgorithm::Crc32c
        );
    }

    #[test]
    #[cfg(feature = "digests")]
    fn sha256_computes_and_verifies() {
        let sha = DigestAlgorithm::Sha256.compute(b"abc");
        assert_eq!(
            sha.to_string(),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        sha.verify(b"abc").unwrap();
        let e = Digest::Crc32c(1).verify(b"x").unwrap_err();
        assert_eq!(e.kind(), zt_container::ErrorKind::ChecksumMismatch);
    }

    #[test]
    #[cfg(feature = "digests")]
    fn hashing_in_pieces_equals_hashing_at_once() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        for alg in [
            DigestAlgorithm::Sha256,
            DigestAlgorithm::Crc32c,
            DigestAlgorithm::Xxh3,
        ] {
            let mut h = alg.hasher();
            for piece in data.chunks(4099) {
                h.update(piece);
            }
            assert_eq!(h.finish(), alg.compute(&data), "{}", alg.name());
        }
    }

    #[test]
    #[cfg(feature = "digests")]
    fn xxh3_digests_parse_print_and_compute() {
        // Sample 03 of the original (ztensor 2.1.2): the digest of 1000 f32 zeros.
        let d = Digest::parse_v2("xxh3:4ecda0ef8e2cafb9").unwrap().unwrap();
        assert_eq!(d.to_string(), "xxh3:4ecda0ef8e2cafb9");
        // 4000 zero bytes: sample 03's decoded part.
        assert_eq!(DigestAlgorithm::Xxh3.compute(&[0u8; 4000]), d);
        assert_eq!(Digest::parse_v2("blake3:00ff").unwrap(), None);
        // The one-pass path reads digits most significant first.
        for (text, value) in [
            ("xxh3:0000000000000001", 1),
            ("xxh3:ffffffffffffffff", u64::MAX),
            ("xxh3:0123456789abcdef", 0x0123_4567_89ab_cdef),
        ] {
            assert_eq!(Digest::parse_v2(text).unwrap(), Some(Digest::Xxh3(value)));
        }
        for bad in [
            "xxh3:4ECDA0EF8E2CAFB9",
            "xxh3:4ecda0ef8e2cafb",
            "xxh3:4ecda0ef8e2cafb9a",
            "xxh3:4ecda0ef8e2cafbg",
            "xxh3:4ecda0ef8e2cafb-",
            "xxh3:",
            ":00",
            "XXH3:00",
            "x-y:00",
            "sha256:abc",
            "nocolon",
        ] {
            assert!(Digest::parse_v2(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn malformed_digests_are_errors() {
        for s in [
            "crc32c",
            "crc32c:0x123",
            "crc32c:0xGGGGGGGG",
            "sha256:abc",
            "sha256:",
            "crc32c:+1234567",
        ] {
            assert!(Digest::parse(s).is_err(), "{s}");
        }
        assert_eq!(
            Digest::parse("md5:00").unwrap_err().kind(),
            zt_container::ErrorKind::Unsupported
        );
    }
}
