//! The zTensor v2 half of [`Writer`](crate::Writer): blobs on 64 KiB or 4096-byte
//! boundaries, every part digested over its decoded bytes, identical blobs stored once, and
//! the manifest encoded as deterministic CBOR. Written as ztensor 2.x writes the same input:
//!
//! - blobs go out in the order objects are added, each object's parts in bytewise order of
//!   their names; the manifest is the last blob, the footer follows it at once;
//! - a raw part whose bytes equal an earlier raw blob's (same length, xxh3-64 of the first
//!   64 KiB and digest, then a byte comparison of what was written) points at that blob
//!   instead of being written again (encoded parts are never shared, as in the original);
//! - every part carries a digest, `xxh3:` (16 hex digits) unless sha256 is asked for;
//! - compression is `zt.zstd-seekable/1` (1 MiB frames with checksums).
//!
//! Adding objects in bytewise name order, uncompressed, at 64 KiB gives the canonical form
//! (spec §6.3), byte for byte what the original's default `Writer(path)` writes.

use std::collections::HashMap;

use zt_container::{BlobWriterV2, Error, Result};
use zt_formats::v2::{check_layout_v2, PartLayout, COO_V2, CSR_V2};
use zt_formats::{DType, Digest, DigestAlgorithm, ElementType, Format};
use zt_manifest::{encode_manifest_v2, Component, Manifest, ManifestV2, ObjectV2, PartV2};

use crate::sink::Sink;

/// Raw parts at least this large are hashed on rayon's pool while they are written.
const PARALLEL_HASH_MIN: usize = 1 << 20;

/// How much of a raw part its sharing key hashes.
const SHARE_KEY_PREFIX: usize = 64 << 10;

/// The alignment of the original's default (and of the canonical form): 64 KiB.
pub(crate) const ALIGN_CANONICAL: u64 = 64 << 10;
/// The alignment of compact files: v2's floor, 4096 bytes.
pub(crate) const ALIGN_COMPACT: u64 = 4096;
/// Blobs are compared in pieces of this size when checking that they are identical.
const COMPARE_CHUNK: usize = 1 << 20;

/// The most earlier blobs a raw part is compared with byte for byte: blobs with its key and
/// its digest, which for real data is one identical blob or none. The cap keeps parts whose
/// digests collide on purpose (xxh3 is not a cryptographic hash) from making the writer
/// quadratic; a part that matches none of them gets a blob of its own: the file is as
/// valid, and a little larger.
const MAX_SHARE_COMPARISONS: usize = 4;

/// The v2 blob heap being written, with the blobs written so far by content.
#[derive(Debug)]
pub(crate) struct V2Blobs<W: Sink> {
    blobs: BlobWriterV2<W>,
    /// (xxh3-64 of the first 64 KiB of a raw blob, its length) -> the digest algorithms of
    /// the blobs written with that key (a bit each, [`algorithm_bit`]).
    keys: HashMap<(u64, u64), u8>,
    /// (that key, an algorithm's bit, 64 bits of the blob's digest by it) -> the offsets of
    /// the blobs written with them. A part whose key was seen is hashed by each algorithm
    /// seen with it and compared with the blobs found here only, so parts that start alike
    /// (rows of zeros, then data) cost a lookup each, not a look at every earlier one. A
    /// match is confirmed byte for byte: a collision costs a comparison, never a wrong blob.
    by_digest: HashMap<(u64, u64, u8, u64), Vec<u64>>,
}

/// One bit per digest algorithm, for [`V2Blobs::keys`].
fn algorithm_bit(algorithm: DigestAlgorithm) -> u8 {
    match algorithm {
        DigestAlgorithm::Sha256 => 1,
        DigestAlgorithm::Crc32c => 2,
        DigestAlgorithm::Xxh3 => 4,
    }
}

/// 64 bits of a digest: all of an xxh3 or CRC-32C, the first eight bytes of a SHA-256 (a
/// whole one would double what a writer of many tiny tensors holds per object).
fn digest_bits(digest: &Digest) -> u64 {
    match *digest {
        Digest::Xxh3(v) => v,
        Digest::Crc32c(v) => u64::from(v),
        Digest::Sha256([a, b, c, d, e, f, g, h, ..]) => {
            u64::from_le_bytes([a, b, c, d, e, f, g, h])
        }
    }
}

/// The v2 layout id of a format.
pub(crate) fn layout_id(format: &Format) -> Result<String> {
    Ok(match format {
        Format::Dense => "dense".to_owned(),
        Format::SparseCsr => CSR_V2.to_owned(),
        Format::SparseCoo => COO_V2.to_owned(),
        Format::Unknown(id) => id.clone(),
        Format::QuantizedGroup => {
            return Err(Error::argument(
                "zTensor v2 has no layout for quantized_group (its zt.quant_group/1 has other \
                 parts and attributes): write v1.2, or dequantize",
            ))
        }
    })
}

/// Checks an object against v2's layout rules (the caller's error, not a file's).
pub(crate) fn check_object(
    format: &Format,
    shape: &[u64],
    parts: &[(&str, &ElementType, u64)],
) -> Result<()> {
    let id = layout_id(format)?;
    let layout: Vec<PartLayout<'_>> = parts
        .iter()
        .map(|(name, element, decoded_len)| PartLayout {
            name,
            element,
            decoded_len: *decoded_len,
        })
        .collect();
    for (name, _, _) in parts {
        zt_manifest::check_name(name, "part").map_err(|e| Error::argument(e.message()))?;
    }
    check_layout_v2(&id, shape, &layout)
        .map(|_| ())
        .map_err(|e| {
            let e = Error::argument(e.to_string().replacen("invalid file: ", "", 1));
            // v1.2 holds any sparse object v1.x holds (u16 indices, say), so a user converting
            // one learns both ways on.
            match format {
                Format::SparseCsr | Format::SparseCoo => {
                    e.with_advice("write v1.2 to keep it as it is, or densify it")
                }
                _ => e,
            }
        })
}

/// A v2 part's dtype and type fields: `bool` is `u8` with `type: "bool"`.
fn dtype_fields(element: &ElementType) -> (String, Option<String>) {
    if element.dtype == DType::Bool {
        return ("u8".to_owned(), Some("bool".to_owned()));
    }
    (
        element.dtype.name().to_owned(),
        element.type_field().map(str::to_owned),
    )
}

impl<W: Sink> V2Blobs<W> {
    /// Writes the header magic; blobs go at multiples of `alignment`.
    pub(crate) fn new(sink: W, alignment: u64) -> Result<Self> {
        let blobs = BlobWriterV2::with_padding(sink, alignment, W::pad_with_zeros)
            .map_err(|e| Error::io(e, "cannot write the header"))?;
        Ok(V2Blobs {
            blobs,
            keys: HashMap::new(),
            by_digest: HashMap::new(),
        })
    }

    /// Writes (or shares) one part and returns it as a component: `offset`, `length`,
    /// `encoding` and `uncompressed_length` (v2's `decoded_length`), and the digest of the
    /// decoded bytes.
    pub(crate) fn write_part(
        &mut self,
        element: &ElementType,
        decoded: &[u8],
        compression: Option<i32>,
        digest: Option<DigestAlgorithm>,
    ) -> Result<Component> {
        let algorithm = match digest {
            None | Some(DigestAlgorithm::Xxh3) => DigestAlgorithm::Xxh3,
            Some(DigestAlgorithm::Sha256) => DigestAlgorithm::Sha256,
            Some(a) => {
                return Err(Error::argument(format!(
                    "zTensor v2 digests are xxh3 or sha256, not {}",
                    a.name()
                )))
            }
        };
        let encoded;
        let (stored, encoding, decoded_length) = match compression {
            None => (decoded, None, None),
            Some(level) => {
                encoded = crate::codec::zstd_seekable_encode(decoded, level)?;
                (
                    encoded.as_slice(),
                    Some("zt.zstd-seekable/1".to_owned()),
                    Some(decoded.len() as u64),
                )
            }
        };
        let (offset, digest) = if encoding.is_none() {
            self.put_raw(decoded, algorithm)?
        } else {
            // The original shares raw blobs only: an encoded part always gets its own blob.
            let digest = algorithm.compute(decoded);
            let offset = self
                .blobs
                .append_blob(stored)
                .map_err(|e| Error::io(e, "cannot write a blob"))?;
            (offset, digest)
        };
        let (dtype, logical_type) = dtype_fields(element);
        Ok(Component {
            dtype,
            logical_type,
            offset,
            length: stored.len() as u64,
            uncompressed_length: decoded_length,
            encoding,
            digest: Some(digest.to_string()),
        })
    }

    /// Writes (or shares) a raw part and computes its digest: the offset of a blob holding
    /// exactly `bytes`, an earlier identical one or a new one.
    ///
    /// Earlier blobs are found by their length, the xxh3-64 of their first 64 KiB and their
    /// digest; those (at most [`MAX_SHARE_COMPARISONS`]) are compared byte for byte. A part with no candidate (nearly every part of a
    /// model) is written on this thread while its digest is hashed on rayon's pool, so the
    /// digest v2 requires costs no time when writing is the slower of the two.
    fn put_raw(&mut self, bytes: &[u8], algorithm: DigestAlgorithm) -> Result<(u64, Digest)> {
        let prefix = bytes.get(..SHARE_KEY_PREFIX).unwrap_or(bytes);
        let key = (zt_formats::xxh3_64(prefix), bytes.len() as u64);
        // Blobs of this length whose first 64 KiB match are only candidates: parts that
        // differ after their first 64 KiB (rows of zeros, then data) share keys in numbers.
        // The part's digest, computed first here, finds the ones that can hold its bytes.
        let mut digest_first = None;
        if let Some(&seen) = self.keys.get(&key) {
            let digest = algorithm.compute(bytes);
            let mut same_digest: Vec<u64> = Vec::new();
            for other in [
                DigestAlgorithm::Xxh3,
                DigestAlgorithm::Sha256,
                DigestAlgorithm::Crc32c,
            ] {
                let bit = algorithm_bit(other);
                if seen & bit == 0 {
                    continue;
                }
                // Blobs whose digests are of another algorithm: that algorithm's of the part.
                let theirs = if other == algorithm {
                    digest
                } else {
                    other.compute(bytes)
                };
                if let Some(offsets) =
                    self.by_digest
                        .get(&(key.0, key.1, bit, digest_bits(&theirs)))
                {
                    let room = MAX_SHARE_COMPARISONS.saturating_sub(same_digest.len());
                    same_digest.extend(offsets.iter().take(room));
                }
            }
            for offset in same_digest {
                if self.same_bytes(offset, bytes)? {
                    return Ok((offset, digest));
                }
            }
            digest_first = Some(digest);
        }
        let append = |blobs: &mut BlobWriterV2<W>| {
            blobs
                .append_blob(bytes)
                .map_err(|e| Error::io(e, "cannot write a blob"))
        };
        let (offset, digest) = if let Some(digest) = digest_first {
            (append(&mut self.blobs)?, digest)
        } else if bytes.len() >= PARALLEL_HASH_MIN && zt_formats::available_threads() > 1 {
            let mut digest = None;
            let offset = crate::pool::in_place_scope(|s| {
                s.spawn(|_| digest = Some(algorithm.compute(bytes)));
                append(&mut self.blobs)
            })?;
            let digest = digest.unwrap_or_else(|| algorithm.compute(bytes));
            (offset, digest)
        } else {
            let digest = algorithm.compute(bytes);
            (append(&mut self.blobs)?, digest)
        };
        if bytes.len() >= COMPARE_CHUNK {
            self.blobs.sink_mut().blob_written();
        }
        let bit = algorithm_bit(algorithm);
        *self.keys.entry(key).or_default() |= bit;
        // Nearly every digest has one blob: room for one, not the four a first push makes.
        self.by_digest
            .entry((key.0, key.1, bit, digest_bits(&digest)))
            .or_insert_with(|| Vec::with_capacity(1))
            .push(offset);
        Ok((offset, digest))
    }

    /// Whether the blob at `offset` holds `bytes` (false when the sink cannot read back).
    fn same_bytes(&mut self, offset: u64, bytes: &[u8]) -> Result<bool> {
        let mut buf = vec![0u8; bytes.len().min(COMPARE_CHUNK)];
        let mut at = offset;
        for piece in bytes.chunks(COMPARE_CHUNK) {
            let b = buf.get_mut(..piece.len()).unwrap_or_default();
            if !self.blobs.sink_mut().read_back(at, b)? || b != piece {
                return Ok(false);
            }
            at = at
                .checked_add(piece.len() as u64)
                .ok_or_else(|| Error::invalid("file offset overflows 64 bits"))?;
        }
        Ok(true)
    }

    /// Encodes the manifest (objects as the v1 model holds them, with v2 layout ids as
    /// their format), writes it and the footer, and returns the sink.
    pub(crate) fn finish(self, manifest: Manifest) -> Result<W> {
        // A name v2's readers refuse (empty, NUL, too long) is the caller's to fix: said as
        // such here, not as the invalid file the manifest's own check would call it.
        let named = |key: &str| {
            zt_manifest::check_name(key, "attribute").map_err(|e| Error::argument(e.message()))
        };
        for key in manifest.attributes.keys() {
            named(key)?;
        }
        for (name, o) in &manifest.objects {
            for key in o.attributes.keys() {
                named(key).map_err(|e| e.in_object(name))?;
            }
        }
        let mut m = ManifestV2 {
            attributes: manifest.attributes,
            ..Default::default()
        };
        // The objects move over one by one (each map node freed as it empties): room for
        // all of them at once, not twice that from doubling.
        m.objects.reserve_exact(manifest.objects.len());
        for (name, o) in manifest.objects {
            m.objects.push(ObjectV2 {
                name,
                shape: o.shape.into(),
                layout: o.format,
                parts: o
                    .components
                    .into_iter()
                    .map(|(name, c)| PartV2 {
                        name,
                        dtype: c.dtype,
                        logical_type: c.logical_type,
                        offset: c.offset,
                        length: c.length,
                        encoding: c.encoding,
                        decoded_length: c.uncompressed_length,
                        digest: c.digest,
                        ..Default::default()
                    })
                    .collect(),
                attributes: o.attributes,
                at: 0,
            });
        }
        let bytes = encode_manifest_v2(&m)?;
        let hash = zt_formats::xxh3_64(&bytes);
        self.blobs
            .finish(&bytes, hash)
            .map_err(|e| Error::io(e, "cannot write the manifest"))
    }
}
