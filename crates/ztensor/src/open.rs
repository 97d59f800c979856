//! Opening a file: [`OpenOptions`], and the dispatch, one arm per [`FileKind`] that
//! [`crate::sniff`] tells. This is the only module that names the readers of
//! [`crate::files`].

use std::path::Path;

use zt_container::{Container, ContainerV2, ContainerVersion, Error, ErrorKind, Result, Source};

use crate::decode::Verify;
use crate::files;
use crate::files::zt_v2::OpenShard;
use crate::listing::{Limits, Listing};
#[cfg(feature = "torch")]
use crate::model::FileVersion;
use crate::reader::Reader;
use crate::sniff::{is_zip, kind_by_name, sniff, FileKind, SNIFF_LEN};
use crate::zip::{self, Rules};

/// How to open a file.
///
/// ```
/// # fn main() -> ztensor::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("m.zt");
/// # let mut w = ztensor::Writer::create(&path)?;
/// # w.add("w", &[2], &[1.0f32, 2.0])?;
/// # w.finish()?;
/// // Positional reads instead of a map: safe against another process truncating the file.
/// let r = ztensor::OpenOptions::new().unmapped(true).open(&path)?;
/// assert_eq!(&r.read::<f32>("w")?[..], &[1.0, 2.0]);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    unmapped: bool,
    populate: bool,
    copy_on_write: bool,
    limits: Limits,
    skip_mag_checksum: bool,
    requests_in_flight: Option<usize>,
    verify: Verify,
}

/// Opens a file of any kind we read (`.zt` of every version, v2 with its shards, `.mag` of every layout,
/// `.safetensors`, GGUF v1-v3, NumPy `.npy`/`.npz`, PyTorch checkpoints zip and legacy), mapped.
///
/// ```
/// # fn main() -> ztensor::Result<()> {
/// let r = ztensor::open(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/interop/v123_all.zt"))?;
/// for object in &r {
///     println!("{} {:?} {}", object.name(), object.shape(), object.format);
/// }
/// # Ok(())
/// # }
/// ```
pub fn open(path: impl AsRef<Path>) -> Result<Reader> {
    OpenOptions::new().open(path)
}

impl OpenOptions {
    /// Defaults: memory-mapped, default limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// Read with positional reads instead of a memory map. Slower (every read copies), but a
    /// file truncated by another process gives an I/O error instead of killing the process
    /// with SIGBUS.
    pub fn unmapped(mut self, yes: bool) -> Self {
        self.unmapped = yes;
        self
    }

    /// Map every page of the file on a background thread, in file order, ahead of the reads
    /// (default: no; pages are mapped as they are first touched). For loaders that read every
    /// tensor: the page faults of first touches then happen on the second core, which makes
    /// reading a mapped file as fast as scanning memory, and a file not yet in the page cache
    /// is read ahead. Leave it off for tools that look at a few tensors of a large file. No
    /// effect with [`OpenOptions::unmapped`]. See [`Source::map_populated`].
    pub fn populate(mut self, yes: bool) -> Self {
        self.populate = yes;
        self
    }

    /// Map the file privately, copy-on-write ([`Source::map_private`]; default: no, a shared
    /// read-only map). For bindings that hand out writable arrays over the map (ztio does): a
    /// write copies one page in this process and never reaches the file. No effect with
    /// [`OpenOptions::unmapped`]; a v2 file's shards are mapped read-only either way.
    pub fn copy_on_write(mut self, yes: bool) -> Self {
        self.copy_on_write = yes;
        self
    }

    /// Whether to verify the CRC-32C of `.mag` layouts that have one (default: yes). magnetron
    /// itself never checks it; turn this off to read a damaged file.
    pub fn verify_mag_checksum(mut self, yes: bool) -> Self {
        self.skip_mag_checksum = !yes;
        self
    }

    /// Which reads check the digests and checksums the file carries (default:
    /// [`Verify::WhenCopying`]: reads that decode or copy check, zero-copy reads of the map do
    /// not). Conversions check everything unless this is [`Verify::Never`].
    pub fn verify(mut self, verify: Verify) -> Self {
        self.verify = verify;
        self
    }

    /// For a file opened by URL (feature `remote`): at most `n` requests for it in flight at
    /// once, however many threads read it (default 8; at least 1). The requests made ahead
    /// of reads that follow an order, and the groups of a scattered read, share the bound.
    pub fn requests_in_flight(mut self, n: usize) -> Self {
        self.requests_in_flight = Some(n.max(1));
        self
    }

    /// The bound on requests in flight per remote file (see
    /// [`OpenOptions::requests_in_flight`]).
    #[cfg(feature = "remote")]
    pub(crate) fn requests_in_flight_or_default(&self) -> usize {
        self.requests_in_flight.unwrap_or(8)
    }

    /// The limits these options open with.
    #[cfg(feature = "sharded")]
    pub(crate) fn limits_ref(&self) -> &Limits {
        &self.limits
    }

    /// Replaces all limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// What one read may allocate for a copy larger than what the file stores for it (see
    /// [`Limits::memory_budget`]; default: twice the stored bytes plus 64 MiB).
    pub fn memory_budget(mut self, bytes: u64) -> Self {
        self.limits.memory_budget = Some(bytes);
        self
    }

    /// Caps one component's decompressed size.
    pub fn max_decompressed_len(mut self, bytes: u64) -> Self {
        self.limits.max_decompressed_len = bytes;
        self
    }

    /// Opens `path`.
    pub fn open(&self, path: impl AsRef<Path>) -> Result<Reader> {
        let path = path.as_ref();
        let source = if self.unmapped {
            Source::unmapped(path)?
        } else {
            let map = if self.copy_on_write {
                Source::map_private(path)?
            } else {
                Source::map(path)?
            };
            if self.populate {
                Source::populated(map)?
            } else {
                map
            }
        };
        self.open_at(source, Some(path), None)
            .map_err(|e| e.in_file(path))
    }

    /// Opens bytes already in memory.
    pub fn open_bytes(&self, bytes: Vec<u8>) -> Result<Reader> {
        self.open_source(Source::from_vec(bytes))
    }

    /// Opens any [`Source`]: tells the kind from the first bytes and validates the whole file.
    pub fn open_source(&self, source: Source) -> Result<Reader> {
        self.open_at(source, None, None)
    }

    /// Opens a source that came from `path`, if it came from a file (where v2 shards are
    /// looked for).
    ///
    /// `open_shard` opens a v2 file's shard from its path (by default, as
    /// [`OpenOptions::open`] opens the file itself): a file opened by URL opens its shards by
    /// URL.
    pub(crate) fn open_at(
        &self,
        source: Source,
        path: Option<&Path>,
        open_shard: Option<OpenShard<'_>>,
    ) -> Result<Reader> {
        let (source, listing) = self.list(source, path, open_shard)?;
        // One rank cap for every kind (numpy 2's and the v2 spec's 64), whether or not the
        // kind's own parser has one.
        let cap = self.limits.decode.max_rank;
        if let Some(o) = listing.objects.iter().find(|o| o.shape.len() > cap) {
            return Err(Error::rank_over_cap(Some(o.shape.len() as u64), cap).in_object(&o.name));
        }
        Ok(Reader::new(source, listing, self.limits, self.verify))
    }

    /// Opens a shard of a v2 file the way the file itself is opened.
    fn open_shard(&self, path: &Path) -> Result<Source> {
        if self.unmapped {
            Source::unmapped(path)
        } else {
            Source::map(path)
        }
    }

    /// Tells the kind ([`sniff`]) and lists the file with the one reader of that kind.
    ///
    /// While it reads the header, footer and manifest of a mapped file, the map reads exactly
    /// the pages touched (the manifest itself in one request): with the kernel's read-around
    /// (8 MiB on some disks) the first touch of each end of a large file would bring in
    /// megabytes that a tool looking at one tensor never reads.
    fn list(
        &self,
        source: Source,
        path: Option<&Path>,
        open_shard: Option<OpenShard<'_>>,
    ) -> Result<(Source, Listing)> {
        // Not while a populating thread reads the whole file in: it relies on read-around.
        let sparse = !self.populate;
        source.expect_sparse_reads(sparse);
        let listed = self.list_sparsely(source, path, open_shard);
        if let Ok((source, _)) = &listed {
            source.expect_sparse_reads(false);
        }
        listed
    }

    /// The dispatch: one arm per kind. A kind whose feature is off has no arm and gets
    /// [`FileKind::unread`]'s error, which names the feature.
    fn list_sparsely(
        &self,
        source: Source,
        path: Option<&Path>,
        open_shard: Option<OpenShard<'_>>,
    ) -> Result<(Source, Listing)> {
        // Said first: every reader's own error for no bytes (a header past the end, a magic
        // missing) names a detail of its format, when the cause is usually a download or
        // copy that never wrote anything.
        if source.is_empty() {
            return Err(Error::invalid(
                "the file is empty (0 bytes): no kind of tensor file ztensor reads is empty \
                 (a download or copy cut short?)",
            ));
        }
        let mut head = vec![0u8; source.len().min(SNIFF_LEN) as usize];
        source.read_into(0, &mut head)?;
        // A zip archive's kind is in its entries' names; its readers take the entries (read
        // even when no zip kind is built: the error names the kind).
        #[cfg_attr(
            not(any(feature = "numpy", feature = "torch", feature = "hdf5")),
            allow(unused_variables)
        )]
        let (zip_entries, sniffed) = if is_zip(&head) {
            if path.is_some_and(is_dcp_data_file) {
                return Err(Error::unsupported(DCP_DATA_FILE));
            }
            zip_entries(&source, &head)?
        } else {
            (Vec::new(), sniff(&head, source.len(), &[]))
        };
        // A Paddle 1 program has no magic to tell it by, and a protobuf's first bytes may pass
        // another rule: its name, which Paddle fixes, decides first.
        #[cfg(feature = "paddle")]
        let sniffed = match path {
            Some(p) if files::paddle::is_per_variable_program(p) => Some(FileKind::PaddleParams),
            _ => sniffed,
        };
        let kind = sniffed.or_else(|| path.and_then(kind_by_name));
        let limits = &self.limits;
        // Files that name other files (v2 shards, HDF5 external links, ONNX external data,
        // Paddle programs, OpenVINO weights, TensorFlow shards) open them as the caller says,
        // or beside this one.
        let local = |p: &Path| self.open_shard(p);
        // Whether a file another one names is there: on the disk, or (by URL) whether the
        // caller's opener finds it (one request, asked only on the way to an error).
        let by_caller = open_shard.is_some();
        let open_shard = open_shard.unwrap_or(&local);
        let is_there = |p: &Path| {
            if by_caller {
                open_shard(p).is_ok()
            } else {
                p.is_file()
            }
        };
        let listing = match kind {
            Some(FileKind::Mag) => {
                // .mag tables are read piecemeal: read-around serves them better.
                source.expect_sparse_reads(false);
                files::mag::list(&source, !self.skip_mag_checksum, limits)?
            }
            Some(FileKind::ZTensorV2) => {
                let container = ContainerV2::parse(source, limits.max_manifest_len)?;
                let listing = files::zt_v2::list(&container, path, limits, open_shard)?;
                return Ok((container.into_source(), listing));
            }
            #[cfg(feature = "numpy")]
            Some(FileKind::Npy) => files::npy::list_npy(&source, limits)?,
            #[cfg(feature = "numpy")]
            Some(FileKind::Npz) => files::npy::list_npz(&source, zip_entries, limits)?,
            #[cfg(feature = "torch")]
            Some(FileKind::PyTorch) => {
                files::torch::list(&source, zip_entries, limits, FileVersion::PyTorch)?
            }
            #[cfg(feature = "torch")]
            Some(FileKind::TorchScript) => {
                files::torch::list(&source, zip_entries, limits, FileVersion::TorchScript)?
            }
            #[cfg(feature = "torch")]
            Some(FileKind::PyTorchLegacy) => files::torch::list_legacy(&source, limits)?,
            #[cfg(feature = "torch-dcp")]
            Some(FileKind::TorchDcp) => files::torch_dcp::list(&source, path, limits, open_shard)?,
            #[cfg(feature = "gguf")]
            Some(FileKind::Gguf) => files::gguf::list(&source, limits)?,
            #[cfg(feature = "hdf5")]
            Some(FileKind::Hdf5) => files::hdf5::list(&source, path, limits, open_shard)?,
            #[cfg(feature = "hdf5")]
            Some(FileKind::Keras) => return files::hdf5::list_keras(source, zip_entries, limits),
            #[cfg(feature = "onnx")]
            Some(FileKind::Onnx) => files::onnx::list(&source, path, limits, open_shard)?,
            #[cfg(feature = "flax")]
            Some(FileKind::Flax) => files::flax::list(&source, limits)?,
            #[cfg(feature = "pickle")]
            Some(FileKind::Pickle) => files::pickled::list(&source, limits)?,
            #[cfg(feature = "paddle")]
            Some(FileKind::PaddleParams) => files::paddle::list(&source, path, limits, open_shard)?,
            #[cfg(feature = "tflite")]
            Some(FileKind::TfLite) => files::tflite::list(&source, limits)?,
            #[cfg(feature = "caffe")]
            Some(FileKind::Caffe) => files::caffe::list(&source, limits)?,
            #[cfg(feature = "ggml")]
            Some(FileKind::Ggml) => files::ggml::list(&source, limits)?,
            #[cfg(feature = "openvino")]
            Some(FileKind::OpenVino) => files::openvino::list(&source, path, limits, open_shard)?,
            #[cfg(feature = "tensorflow")]
            Some(FileKind::TfCheckpoint) => {
                files::tf_checkpoint::list(&source, path, limits, open_shard)?
            }
            #[cfg(feature = "safetensors")]
            Some(FileKind::Safetensors) => {
                files::safetensors::list(&source, limits.decode.max_rank)?
            }
            // Anything else is read as zTensor 0.1 or 1.x, whose magic error then says what
            // the file starts with; when neither its bytes nor its name said so, the error
            // says first that no kind matched.
            Some(FileKind::ZTensor) | None => {
                let container = Container::parse_with_limit(source, limits.max_manifest_len)
                    .map_err(|e| match kind {
                        // The data file of a model whose other file names and places its
                        // bytes: the user opened the wrong one of the two.
                        None if e.kind() == ErrorKind::InvalidFile => {
                            if let Some(hint) = path.and_then(|p| companion_hint(p, &is_there)) {
                                return Error::unsupported(hint);
                            }
                            let unknown = Error::invalid(format!(
                                "not a kind of file ztensor reads: its first bytes match none \
                                 (zTensor, safetensors, GGUF, GGML, NumPy, PyTorch, ONNX, \
                                 HDF5, Flax, TensorFlow, TFLite, pickle, Paddle, Caffe, \
                                 OpenVINO, .mag); \
                                 as zTensor: {}",
                                e.message()
                            ));
                            match e.offset() {
                                Some(at) => unknown.at(at),
                                None => unknown,
                            }
                        }
                        _ => e,
                    })?;
                let listing = match container.version() {
                    ContainerVersion::V1 => files::zt_v1::list(&container, limits),
                    ContainerVersion::V1_0 => files::zt_v1_0::list(&container, limits),
                    ContainerVersion::V0_1 => {
                        container.source().expect_sparse_reads(false);
                        files::zt_v0_1::list(&container, limits)
                    }
                }?;
                return Ok((container.into_source(), listing));
            }
            Some(other) => return Err(other.unread()),
        };
        Ok((source, listing))
    }
}

/// When `path`, whose bytes match no kind, is the data file of a model whose other file
/// lists its tensors (a TensorFlow checkpoint's `PREFIX.data-00000-of-00001`, the `.bin` of
/// an OpenVINO `.xml`, an ONNX model's external data `model.onnx.data`): what to open
/// instead. TensorFlow's data files are told by name alone (the name is TensorFlow's own
/// pattern); the others only when the model file is there beside them (`is_there`: on the
/// disk, or at the URL beside this one).
fn companion_hint(path: &Path, is_there: &dyn Fn(&Path) -> bool) -> Option<String> {
    let name = path.file_name()?.to_str()?;
    if let Some(prefix) = tf_data_prefix(name) {
        return Some(format!(
            "a data file of the TensorFlow checkpoint {prefix:?} (raw tensor bytes, which only \
             the checkpoint's index names and places): open {prefix}.index, or the prefix"
        ));
    }
    let beside = |other: &str| {
        let p = path.with_file_name(other);
        is_there(&p).then(|| p.display().to_string())
    };
    let lower = name.to_ascii_lowercase();
    if let Some(stem) = lower.strip_suffix(".bin").map(|s| &name[..s.len()]) {
        if let Some(model) = beside(&format!("{stem}.xml")) {
            return Some(format!(
                "the weights of the OpenVINO model {model} (raw bytes, which only the model \
                 names and places): open the .xml"
            ));
        }
    }
    // Where the checkpoint compressed its chunks (zstd), the data file is no zip at all.
    if lower.ends_with(".distcp") && beside(".metadata").is_some() {
        return Some(DCP_DATA_FILE.to_owned());
    }
    let onnx = [".onnx.data", ".onnx_data", ".onnx.bin"]
        .iter()
        .find_map(|tail| lower.strip_suffix(tail).map(|s| &name[..s.len()]));
    if let Some(model) = onnx.and_then(|stem| beside(&format!("{stem}.onnx"))) {
        return Some(format!(
            "the external data of the ONNX model {model} (raw bytes, which only the model \
             names and places): open the .onnx"
        ));
    }
    None
}

/// `PREFIX` of a TensorFlow checkpoint's data file name, `PREFIX.data-00000-of-00001`.
fn tf_data_prefix(name: &str) -> Option<&str> {
    let (prefix, shard) = name.rsplit_once(".data-")?;
    let (index, count) = shard.split_once("-of-")?;
    let digits = |s: &str| s.len() == 5 && s.bytes().all(|b| b.is_ascii_digit());
    (!prefix.is_empty() && digits(index) && digits(count)).then_some(prefix)
}

/// What a data file of a distributed checkpoint, opened by itself, is told.
const DCP_DATA_FILE: &str = "a data file of a PyTorch distributed checkpoint (torch.save \
     archives or compressed chunks one after another, which only the checkpoint's .metadata \
     names and places): open the checkpoint's folder or its .metadata";

/// Whether `path` names a data file of a distributed checkpoint (`__0_0.distcp`): its archives
/// lie one after another and mean nothing without the `.metadata` beside it.
fn is_dcp_data_file(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("distcp"))
}

/// A zip archive's entries and its kind, read by the rules of the reader its kind's own tools
/// use ([`zip::Rules`]): miniz's for checkpoints, Python's `zipfile` for `.npz` and Keras
/// archives. The names tell the kind, so the archive is read by miniz's rules first and read
/// again by zipfile's only when those find something else: a directory moved from where its
/// end record says, or a record needing a newer zip (rare: damaged or odd archives).
fn zip_entries(source: &Source, head: &[u8]) -> Result<(Vec<zip::Entry>, Option<FileKind>)> {
    let kind_of = |entries: &[zip::Entry]| {
        let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
        sniff(head, source.len(), &names)
    };
    let python = |kind| matches!(kind, Some(FileKind::Npz | FileKind::Keras));
    let by_miniz = zip::entries_by(source, Rules::Miniz).map(|a| {
        let kind = kind_of(&a.entries);
        (a, kind)
    });
    if let Ok((archive, kind)) = &by_miniz {
        if archive.zipfile_agrees || !python(*kind) {
            return by_miniz.map(|(a, kind)| (a.entries, kind));
        }
    }
    // Either miniz's rules refused the archive, or they read what zipfile does not: the
    // archive is zipfile's if its entries, as zipfile finds them, make it an `.npz` or Keras
    // archive. Otherwise miniz's answer stands.
    match zip::entries_by(source, Rules::Zipfile) {
        Ok(archive) => {
            let kind = kind_of(&archive.entries);
            if python(kind) {
                return Ok((archive.entries, kind));
            }
        }
        Err(e) if by_miniz.is_ok() => return Err(e),
        Err(_) => {}
    }
    by_miniz.map(|(a, kind)| (a.entries, kind))
}

#[cfg(test)]
mod tests {
    //! Opening a file whose names all collide under a fixed, unkeyed hash: the names must
    //! spread over the name index like ordinary names. The reader's former index (FNV-1a over
    //! words, a fixed mix, linear probing) put every such name in one bucket, so each insert
    //! and lookup walked all the earlier ones: 200,000 crafted names took 17.5 s to open. The tests count how many names
    //! share a bucket instead of timing the open: a test never asserts a time.

    use super::OpenOptions;
    use crate::Writer;

    const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const FNV_PRIME: u64 = 0x0100_0000_01b3;

    /// The attacker's model: the reader's former name hash, fixed and public.
    fn fixed_hash(s: &str) -> u64 {
        let mut h = FNV_OFFSET;
        let mut words = s.as_bytes().chunks_exact(8);
        for w in &mut words {
            h = (h ^ u64::from_le_bytes(w.try_into().unwrap())).wrapping_mul(FNV_PRIME);
        }
        for &b in words.remainder() {
            h = (h ^ u64::from(b)).wrapping_mul(FNV_PRIME);
        }
        h ^= h >> 29;
        h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h ^ (h >> 32)
    }

    /// `n` distinct 16-byte ASCII names with one and the same fixed hash. The second word of
    /// each name cancels what the first put into the state, so every name reaches the same
    /// state before the last multiplication; a first word is kept when that second word
    /// happens to be ASCII (about one in 270).
    fn colliding_names(n: usize) -> Vec<String> {
        const TARGET: u64 = 0x2a2a_2a2a_2a2a_2a2a;
        let mut names = Vec::with_capacity(n);
        let mut counter = 0u64;
        while names.len() < n {
            // Eight characters from 48 bits of a scrambled counter: every byte of the first
            // word varies, and distinct counters (below 2^48) give distinct words.
            let bits = counter.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            counter += 1;
            let first: [u8; 8] = std::array::from_fn(|i| 0x30 + ((bits >> (6 * i)) & 63) as u8);
            let w1 = u64::from_le_bytes(first);
            let second = ((FNV_OFFSET ^ w1).wrapping_mul(FNV_PRIME) ^ TARGET).to_le_bytes();
            if second.iter().all(|&b| (1..0x80).contains(&b)) {
                names.push(String::from_utf8([first, second].concat()).unwrap());
            }
        }
        names
    }

    /// Opens a file of one empty tensor per name (through the whole open path) and returns
    /// the most names any one bucket of its index holds: the length of the longest probe.
    fn fullest_bucket(names: &[String]) -> usize {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("names.zt");
        let mut w = Writer::create(&path).unwrap();
        for name in names {
            w.add::<f32>(name, &[0], &[]).unwrap();
        }
        w.finish().unwrap();
        let r = OpenOptions::new().open(&path).unwrap();
        let (objects, index) = r.listing_parts();
        let buckets = (objects.len() * 8 / 7 + 1).next_power_of_two();
        let mut load = vec![0usize; buckets];
        for o in objects {
            assert_eq!(
                index.find(objects, &o.name).map(|i| &objects[i].name),
                Some(&o.name)
            );
            load[index.hash(&o.name) as usize & (buckets - 1)] += 1;
        }
        load.into_iter().max().unwrap_or(0)
    }

    #[test]
    fn names_that_collide_under_a_fixed_hash_spread_like_ordinary_names() {
        let n = 20_000;
        let evil = colliding_names(n);
        assert!(
            evil.iter().all(|s| fixed_hash(s) == fixed_hash(&evil[0])),
            "the names really collide under the fixed hash"
        );
        let plain: Vec<String> = (0..n).map(|i| format!("blk.{i}.attn.weight")).collect();
        let (evil_load, plain_load) = (fullest_bucket(&evil), fullest_bucket(&plain));
        // Under the fixed hash all 20,000 share one bucket. Under a keyed hash the fullest of
        // about 32,000 buckets holds a handful, for crafted and ordinary names alike.
        assert!(
            evil_load <= 2 * plain_load + 8,
            "crafted names: {evil_load} in one bucket; ordinary names: {plain_load}"
        );
    }
}
