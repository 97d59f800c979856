//! HDF5 files (h5py, Keras `.weights.h5`, PyTables and older writers) in the facade's object
//! model: every dataset of numbers is a dense object named by its path (`/dense/kernel:0`),
//! its attributes the object's; the root group's attributes are the file's, another group's
//! are the file's under `<group path>@<name>`.
//!
//! Read: superblock versions 0-3 (after a user block too), object headers v1 and v2 with
//! their continuation blocks, groups as symbol tables (v1 B-tree, local heap) or as link
//! messages in the header, hard and soft links (a soft link to a dataset lists the dataset
//! again under the link's path), dataspaces v1 and v2, fixed-point and floating-point types
//! of either byte order (an enum of two 1-byte members, h5py's bool, as bool), data layouts
//! v1-v5 contiguous, compact and chunked. A contiguous dataset is a range of the file, served
//! from the map; a compact one a range of its object header. A chunked dataset's chunks are
//! found through its index (every kind HDF5 writes: [`index`]) and listed as one component
//! of [`zt_formats::Encoding::Hdf5Chunks`] over the span that holds them; reading unfilters
//! each chunk (deflate, shuffle, fletcher32 checked, szip, scale-offset, nbit stored as is,
//! LZF, Zstandard, LZ4, bzip2, Blosc, bitshuffle) and places it (crate::chunks). Groups keep
//! their links in symbol tables, in link messages, or in dense storage (a fractal heap, whose
//! direct blocks are read in order). An external link to a file in the same folder is
//! followed: what it names is listed under the link's path, read from that file as a shard.
//!
//! Listed and skipped, never a reason to refuse the file: datasets of strings, compounds,
//! references, variable-length and array types ("not numbers"); datasets behind a filter we do
//! not decode (ZFP, SZ, packed nbit, ...: named); external links that cannot be followed
//! (with why).
//! Chunks never written, and contiguous data never written, read as the dataset's fill value
//! (zeros unless its fill value message says otherwise), within the memory budget; HDF5's
//! exceptions for an undefined value and the fill time "never" are kept ([`Fill`]).
//!
//! Every address and size is checked against the file and against the caps below; a group
//! reached twice (hard links can make cycles) is walked once. Every lookup3 checksum the
//! newer layouts carry is checked before the structure is read ([`check_lookup3`]). Damage
//! in what places a dataset's data (layout, chunk index, addresses) makes that dataset
//! unreadable, as h5py fails on its read alone; damage anywhere else refuses the file.
//!
//! ```text
//!  superblock v0/v1: \x89HDF\r\n\x1a\n ver ... sizes K flags base freespace eof driver root-entry
//!  superblock v2/v3: \x89HDF\r\n\x1a\n ver sizeof-offsets sizeof-lengths flags base ext eof root checksum
//!  object header v1: ver 0 nmsgs(2) refcount(4) size(4) pad(4) | type(2) size(2) flags(1) 0 0 0 data ...
//!  object header v2: OHDR ver flags [times] [phase] chunk0-size | type(1) size(2) flags(1) [order(2)] data ... checksum
//! ```

use std::borrow::Cow;
use std::hash::BuildHasher;

use foldhash::fast::RandomState;
use hashbrown::HashTable;
use zt_container::internal::MemoryBudget;
use zt_container::{Error, Result, Source};
use zt_formats::{DType, ElementType};
use zt_manifest::{Attributes, Value as Attr, ValueBudget};

use crate::files::zt_v2::OpenShard;
use crate::listing::{Limits, Listing};
use crate::model::{ByteOrder, Defect, FileVersion, ObjectInfo, ShardInfo};
use std::path::Path;

mod index;

/// The signature that starts the superblock.
pub(crate) const SIGNATURE: &[u8; 8] = b"\x89HDF\r\n\x1a\n";

/// Where a superblock may start: 0, then 512, 1024, 2048, ... (after a user block).
const MAX_USER_BLOCK_SEARCH: u64 = 1 << 30;

/// How deep groups may nest.
pub(crate) const MAX_GROUP_DEPTH: usize = 64;

/// The most messages one object header may hold, over all its blocks.
const MAX_MESSAGES: usize = 1 << 16;

/// The most continuation blocks one object header may have.
const MAX_BLOCKS: usize = 4096;

/// The most objects (datasets, groups) a file may hold.
pub(crate) const MAX_OBJECTS: usize = 1 << 20;

/// The largest structure read whole (a header block, a heap, a B-tree node, an attribute).
const MAX_STRUCTURE: u64 = 64 << 20;

/// The most chunks one dataset may have.
const MAX_CHUNKS: usize = 1 << 22;

/// The nodes a B-tree walk has reached, in a keyed table. A node reached twice is a loop or a
/// subtree shared by two parents, which no HDF5 writer makes and which would make the walk
/// run (and its stack grow) without end, or once per path to the node.
struct Reached {
    nodes: HashTable<u64>,
    state: RandomState,
}

impl Reached {
    fn new() -> Self {
        Reached {
            nodes: HashTable::new(),
            state: RandomState::default(),
        }
    }

    /// Notes `node`; an error naming it, and the B-tree (`what`), when it was reached before.
    fn first_time(&mut self, node: u64, what: &str) -> Result<()> {
        let h = self.state.hash_one(node);
        if self.nodes.find(h, |&n| n == node).is_some() {
            return Err(bad_at(
                format!("{what} that reaches this node twice (a loop or a shared subtree)"),
                node,
            ));
        }
        let state = self.state.clone();
        self.nodes
            .insert_unique(h, node, move |n| state.hash_one(n));
        Ok(())
    }
}

/// The largest attribute value kept.
const MAX_ATTRIBUTE: u64 = 1 << 20;

/// Message types.
mod msg {
    pub const DATASPACE: u16 = 0x0001;
    pub const LINK_INFO: u16 = 0x0002;
    pub const DATATYPE: u16 = 0x0003;
    pub const FILL_VALUE_OLD: u16 = 0x0004;
    pub const FILL_VALUE: u16 = 0x0005;
    pub const LINK: u16 = 0x0006;
    pub const EXTERNAL_FILES: u16 = 0x0007;
    pub const LAYOUT: u16 = 0x0008;
    pub const FILTERS: u16 = 0x000b;
    pub const ATTRIBUTE: u16 = 0x000c;
    pub const CONTINUATION: u16 = 0x0010;
    pub const SYMBOL_TABLE: u16 = 0x0011;
}

/// Lists an HDF5 file. `path` is where it was opened from: its folder holds the files its
/// external links name, which `open_external` opens as the file was opened.
pub(crate) fn list(
    source: &Source,
    path: Option<&Path>,
    limits: &Limits,
    open_external: OpenShard<'_>,
) -> Result<Listing> {
    let mut walked = list_from(source, 0, limits, None)?;
    let links = std::mem::take(&mut walked.external_links);
    let shards = follow_external_links(&mut walked.objects, links, path, limits, open_external);
    let mut listing = walked.into_listing()?;
    listing.shards = shards;
    Ok(listing)
}

/// What a walk over one file found: its datasets, its attributes and the external links it
/// met, (link path, file, object path).
struct Walked {
    version: FileVersion,
    attributes: Attributes,
    objects: Vec<ObjectInfo>,
    external_links: Vec<(String, String, String)>,
}

impl Walked {
    fn into_listing(mut self) -> Result<Listing> {
        if let Some(twice) = crate::listing::sort_by_name(&mut self.objects) {
            return Err(Error::invalid(format!("two datasets are named {twice:?}")));
        }
        Ok(Listing::of_unique(
            self.version,
            self.attributes,
            self.objects,
        ))
    }
}

/// Lists a Keras 3 `.keras` archive: the HDF5 file `model.weights.h5` inside it (served
/// from the archive's map when stored; inflated into memory, under the decompression cap,
/// when deflated: the returned source is then that copy), with `config.json` and
/// `metadata.json` as the text attributes `keras.config` and `keras.metadata`.
pub(crate) fn list_keras(
    source: Source,
    entries: Vec<crate::zip::Entry>,
    limits: &Limits,
) -> Result<(Source, Listing)> {
    use crate::zip::{entry_bytes, Method};
    let entries = crate::zip::undamaged(entries)?;
    let find = |name: &str| entries.iter().find(|e| e.name == name);
    let weights = find("model.weights.h5")
        .ok_or_else(|| Error::invalid("a .keras archive without model.weights.h5"))?;
    let mut extra = Attributes::new();
    for (name, key) in [
        ("config.json", "keras.config"),
        ("metadata.json", "keras.metadata"),
    ] {
        if let Some(e) = find(name) {
            let bytes =
                entry_bytes(&source, e, MAX_ATTRIBUTE * 16).map_err(|e| e.in_object(name))?;
            extra.insert(key.into(), Attr::Text(text(&bytes)));
        }
    }
    let (source, start) = match weights.method {
        Method::Stored => (source, weights.data_offset),
        Method::Deflated => {
            let inflated = entry_bytes(&source, weights, limits.max_decompressed_len)?.into_owned();
            (Source::from_vec(inflated), 0)
        }
    };
    let mut walked = list_from(&source, start, limits, Some(FileVersion::Keras))
        .map_err(|e| e.in_object("model.weights.h5"))?;
    // An archive has no folder of its own: its external links are listed, not followed.
    for (link, file, target) in std::mem::take(&mut walked.external_links) {
        let why = "links in an archive are not followed";
        walked.objects.push(unread_link(&link, &file, &target, why));
    }
    walked.attributes.extend(extra);
    let mut listing = walked.into_listing()?;
    listing.zip_entries = entries.into_iter().map(|e| (0, e)).collect();
    Ok((source, listing))
}

fn list_from(
    source: &Source,
    start: u64,
    limits: &Limits,
    kind: Option<FileVersion>,
) -> Result<Walked> {
    let base = find_superblock(source, start)?;
    let mut file = File::open(source, base, limits)?;
    let root = file.root;
    file.group(root, "", 0)?;
    file.follow_soft_links()?;
    let File {
        version,
        attributes,
        mut objects,
        external,
        ..
    } = file;
    if let Some(twice) = crate::listing::sort_by_name(&mut objects) {
        return Err(Error::invalid(format!("two datasets are named {twice:?}")));
    }
    let version = kind.unwrap_or(FileVersion::Hdf5 {
        superblock: version,
    });
    Ok(Walked {
        version,
        attributes,
        objects,
        external_links: external,
    })
}

/// The most files a file's external links may name.
const MAX_EXTERNAL_FILES: usize = 64;

/// Lists what each external link names (a dataset, or a group's datasets) under the link's
/// path, read from the linked file as one of the reader's shards. A link that cannot be
/// followed (a file outside the folder, missing, not HDF5, or without the object) is listed
/// as unreadable with the reason; it never refuses the file. Links inside a linked file are
/// listed, not followed.
fn follow_external_links(
    objects: &mut Vec<ObjectInfo>,
    links: Vec<(String, String, String)>,
    named_in: Option<&Path>,
    limits: &Limits,
    open_external: OpenShard<'_>,
) -> Vec<(ShardInfo, Source)> {
    let mut shards = Vec::new();
    // Each file named, opened once: its shard number and listing, or why not.
    let mut opened: Vec<(String, Result<(u32, Walked)>)> = Vec::new();
    for (link, file, target) in links {
        let index = match opened.iter().position(|(f, _)| *f == file) {
            Some(i) => i,
            None if opened.len() >= MAX_EXTERNAL_FILES => {
                objects.push(unread_link(
                    &link,
                    &file,
                    &target,
                    &format!("the file links more than {MAX_EXTERNAL_FILES} other files"),
                ));
                continue;
            }
            None => {
                let walked = open_linked(&file, named_in, limits, open_external);
                let walked = walked.map(|(info, source, walked)| {
                    shards.push((info, source));
                    (shards.len() as u32, walked)
                });
                opened.push((file.clone(), walked));
                opened.len() - 1
            }
        };
        let (shard, walked) = match &opened[index].1 {
            Ok((shard, walked)) => (*shard, walked),
            Err(e) => {
                objects.push(unread_link(&link, &file, &target, &e.to_string()));
                continue;
            }
        };
        let target = if target.starts_with('/') {
            target
        } else {
            format!("/{target}")
        };
        let prefix = format!("{}/", target.trim_end_matches('/'));
        let mut found = 0usize;
        for o in &walked.objects {
            let rest = if o.name == target {
                Some("")
            } else {
                o.name
                    .strip_prefix(&prefix[..prefix.len() - 1])
                    .filter(|r| r.starts_with('/'))
            };
            let Some(rest) = rest else { continue };
            let mut copy = o.clone();
            copy.name = format!("{link}{rest}");
            for c in &mut copy.components.0 {
                c.file = shard;
            }
            copy.attributes.insert(
                "hdf5.external_link".into(),
                Attr::Text(format!("{file}:{target}")),
            );
            objects.push(copy);
            found += 1;
        }
        if found == 0 {
            objects.push(unread_link(&link, &file, &target, "no dataset there"));
        }
    }
    shards
}

/// Opens and lists the file an external link names.
fn open_linked(
    file: &str,
    named_in: Option<&Path>,
    limits: &Limits,
    open_external: OpenShard<'_>,
) -> Result<(ShardInfo, Source, Walked)> {
    let named_in = named_in.ok_or_else(|| {
        Error::unsupported("a file opened from memory has no folder to find linked files in")
    })?;
    let path = super::path_in_folder(named_in, file, "external link file", "the file's folder")?;
    let source = open_external(&path).map_err(|e| e.in_file(&path))?;
    let walked = list_from(&source, 0, limits, None).map_err(|e| e.in_file(&path))?;
    let info = ShardInfo::data_file(file.to_owned(), path, source.len());
    Ok((info, source, walked))
}

/// An external link that was not followed, listed under its path with the reason.
fn unread_link(link: &str, file: &str, target: &str, why: &str) -> ObjectInfo {
    let mut o = ObjectInfo::raw_dense(
        link.to_owned(),
        [0u64; 0].as_slice().into(),
        ElementType::plain(DType::U8),
        (0, 0),
        ByteOrder::Little,
    );
    o.attributes.insert(
        "hdf5.external_link".into(),
        Attr::Text(format!("{file}:{target}")),
    );
    o.defect = Some(Box::new(Defect::unsupported(format!(
        "an external link to {file}:{target} not followed: {why}"
    ))));
    o
}

/// The superblock's offset: `start`, or 512, 1024, ... bytes after it when a user block
/// precedes it.
fn find_superblock(source: &Source, start: u64) -> Result<u64> {
    let mut skip = 0u64;
    while start.saturating_add(skip).saturating_add(8) <= source.len()
        && skip <= MAX_USER_BLOCK_SEARCH
    {
        if source.read_at(start + skip, 8)?.as_ref() == SIGNATURE {
            return Ok(start + skip);
        }
        skip = if skip == 0 { 512 } else { skip * 2 };
    }
    Err(Error::invalid(
        "no HDF5 superblock signature at offset 0, 512, 1024, ...",
    ))
}

/// Little-endian fields of a buffer read from `at` in the file; every read checked.
struct Cursor<'b> {
    bytes: &'b [u8],
    pos: usize,
    /// The file offset of `bytes[0]`, for errors.
    at: u64,
    offsets: usize,
    lengths: usize,
}

impl<'b> Cursor<'b> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'b [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(Error::invalid(format!(
                "{what} at byte {} needs {n} bytes, but its structure ends after {}",
                self.here(),
                self.bytes.len().saturating_sub(self.pos)
            ))
            .at(self.here()));
        };
        let out = self.bytes.get(self.pos..end).unwrap_or_default();
        self.pos = end;
        Ok(out)
    }

    fn here(&self) -> u64 {
        self.at.saturating_add(self.pos as u64)
    }

    fn skip(&mut self, n: usize, what: &str) -> Result<()> {
        self.take(n, what).map(|_| ())
    }

    fn uint(&mut self, n: usize, what: &str) -> Result<u64> {
        let b = self.take(n, what)?;
        let mut v = [0u8; 8];
        v.get_mut(..n.min(8))
            .unwrap_or_default()
            .copy_from_slice(b.get(..n.min(8)).unwrap_or_default());
        Ok(u64::from_le_bytes(v))
    }

    fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.uint(1, what)? as u8)
    }

    fn u16(&mut self, what: &str) -> Result<u16> {
        Ok(self.uint(2, what)? as u16)
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(self.uint(4, what)? as u32)
    }

    /// An address (`None` when undefined: all bits set).
    fn addr(&mut self, what: &str) -> Result<Option<u64>> {
        let n = self.offsets;
        let v = self.uint(n, what)?;
        let undefined = if n >= 8 {
            u64::MAX
        } else {
            (1u64 << (8 * n)) - 1
        };
        Ok((v != undefined).then_some(v))
    }

    fn length(&mut self, what: &str) -> Result<u64> {
        let n = self.lengths;
        self.uint(n, what)
    }

    fn rest(&self) -> &'b [u8] {
        self.bytes.get(self.pos..).unwrap_or_default()
    }
}

/// One message of an object header: its type and where its data lies in the file.
#[derive(Clone, Copy)]
struct Message {
    kind: u16,
    at: u64,
    size: u64,
}

/// A dataset's element type, or why it is not numbers.
enum Element {
    Numbers(ElementType, ByteOrder),
    Not(String),
}

/// The walk over one file.
struct File<'s> {
    source: &'s Source,
    base: u64,
    offsets: usize,
    lengths: usize,
    version: u8,
    root: u64,
    limits: &'s Limits,
    attributes: Attributes,
    objects: Vec<ObjectInfo>,
    /// Groups walked (object header addresses), in a keyed table.
    seen: HashTable<u64>,
    state: RandomState,
    /// Soft links: (link path, target path).
    soft: Vec<(String, String)>,
    /// External links: (link path, file, object path).
    external: Vec<(String, String, String)>,
    /// Objects reached, datasets and groups: bounded by [`MAX_OBJECTS`].
    reached: usize,
    /// What the listing (datasets and their chunk tables) costs so far, against
    /// [`Limits::listing_budget`].
    listing: MemoryBudget,
    /// What the attribute values kept so far take, against [`Limits::decode_limits`]' cap.
    values: ValueBudget,
}

impl<'s> File<'s> {
    fn open(source: &'s Source, base: u64, limits: &'s Limits) -> Result<Self> {
        let head = source.read_at(base, 96.min(source.len() - base))?;
        let mut c = Cursor {
            bytes: &head,
            pos: 8,
            at: base,
            offsets: 8,
            lengths: 8,
        };
        let version = c.u8("superblock version")?;
        let (offsets, lengths, root, base_field, eof, eof_at);
        match version {
            0 | 1 => {
                c.skip(4, "superblock versions")?;
                offsets = c.u8("size of offsets")? as usize;
                lengths = c.u8("size of lengths")? as usize;
                check_sizes(offsets, lengths, &c)?;
                c.offsets = offsets;
                c.lengths = lengths;
                c.skip(1 + 2 + 2 + 4, "superblock K values and flags")?;
                if version == 1 {
                    c.skip(4, "indexed storage K")?;
                }
                base_field = c.addr("base address")?;
                // libhdf5 reads this field as a superblock extension's address, which only
                // versions 2 and 3 may have: a defined one refuses the file there.
                let extension_at = c.at + c.pos as u64;
                if c.addr("free-space address")?.is_some() {
                    return Err(Error::invalid(format!(
                        "HDF5 superblock version {version} gives a free-space (superblock \
                         extension) address, which only versions 2 and 3 may have"
                    ))
                    .at(extension_at));
                }
                eof_at = c.at + c.pos as u64;
                eof = c.addr("end-of-file address")?;
                c.addr("driver information address")?;
                // The root group's symbol table entry.
                c.addr("root link name offset")?;
                root = c.addr("root object header address")?;
            }
            2 | 3 => {
                offsets = c.u8("size of offsets")? as usize;
                lengths = c.u8("size of lengths")? as usize;
                check_sizes(offsets, lengths, &c)?;
                c.offsets = offsets;
                c.lengths = lengths;
                c.skip(1, "superblock flags")?;
                base_field = c.addr("base address")?;
                c.addr("superblock extension address")?;
                eof_at = c.at + c.pos as u64;
                eof = c.addr("end-of-file address")?;
                root = c.addr("root object header address")?;
                c.skip(4, "superblock checksum")?;
                let whole = head.get(..c.pos).unwrap_or_default();
                check_lookup3(whole, "the superblock", base)?;
            }
            v => {
                return Err(Error::unsupported(format!(
                    "HDF5 superblock version {v}: versions 0 to 3 are read"
                ))
                .at(base + 8))
            }
        }
        let root = root.ok_or_else(|| Error::invalid("the superblock has no root group"))?;
        // A file shorter than its superblock says was cut short: libhdf5 refuses it (and
        // whatever of it still parses would read shifted or missing bytes). As libhdf5 does,
        // the end-of-file address moves by as much as the superblock lies away from the base
        // address it gives, in its unsigned arithmetic; an undefined address is all ones.
        let len = source.len();
        let (eof, base_field) = (eof.unwrap_or(u64::MAX), base_field.unwrap_or(u64::MAX));
        let stored_eof = eof.wrapping_sub(base_field.wrapping_sub(base));
        if u128::from(len) + u128::from(base) < u128::from(stored_eof) {
            return Err(Error::invalid(format!(
                "truncated HDF5 file: its end-of-file address {eof} (base address {base_field}, \
                 superblock at {base}) is past its {len} bytes"
            ))
            .at(eof_at));
        }
        Ok(File {
            source,
            base,
            offsets,
            lengths,
            version,
            root,
            limits,
            attributes: Attributes::new(),
            objects: Vec::new(),
            seen: HashTable::new(),
            state: RandomState::default(),
            soft: Vec::new(),
            external: Vec::new(),
            reached: 0,
            listing: MemoryBudget::new(
                limits.listing_budget(source.len()),
                "listing the file's datasets",
            ),
            values: ValueBudget::new(limits.decode_limits().max_value_bytes),
        })
    }

    /// `n` bytes at address `addr` (relative to the base), checked against the file.
    fn read(&self, addr: u64, n: u64, what: &str) -> Result<Cow<'s, [u8]>> {
        let at = self.base.checked_add(addr);
        let fits = at
            .and_then(|a| a.checked_add(n))
            .is_some_and(|e| e <= self.source.len());
        let Some(at) = at.filter(|_| fits) else {
            return Err(Error::invalid(format!(
                "{what} at address {addr}, {n} bytes, lies past the end of the file ({} bytes)",
                self.source.len()
            )));
        };
        if n > MAX_STRUCTURE {
            return Err(Error::limit(format!(
                "{what} of {n} bytes exceeds the cap of {MAX_STRUCTURE}"
            ))
            .at(at));
        }
        self.source.read_at(at, n)
    }

    /// The `n` bytes at `addr` and the lookup3 checksum that follows them, checked: a
    /// structure of HDF5's newer layouts. The checksum is left at the end of what is returned.
    fn read_checked(&self, addr: u64, n: u64, what: &str) -> Result<Cow<'s, [u8]>> {
        let bytes = self.read(addr, n.saturating_add(4), what)?;
        check_lookup3(&bytes, what, addr)?;
        Ok(bytes)
    }

    /// Up to `n` bytes at `addr` (fewer at the end of the file).
    fn read_upto(&self, addr: u64, n: u64, what: &str) -> Result<Cow<'s, [u8]>> {
        let left = self
            .source
            .len()
            .saturating_sub(self.base.saturating_add(addr));
        self.read(addr, n.min(left), what)
    }

    fn cursor<'b>(&self, bytes: &'b [u8], addr: u64) -> Cursor<'b> {
        Cursor {
            bytes,
            pos: 0,
            at: self.base.saturating_add(addr),
            offsets: self.offsets,
            lengths: self.lengths,
        }
    }

    /// Counts one more dataset listed as `path` against the memory budget a file of this
    /// size may spend on its listing: a dataset can be written in a few hundred bytes (a
    /// soft link to one in a few dozen), and listing it costs about a kilobyte.
    fn charge_listing(&mut self, path: &str) -> Result<()> {
        let datasets = self.objects.len() + 1;
        self.listing.charge_for(Limits::listing_cost(path), || {
            let plural = if datasets == 1 { "" } else { "s" };
            format!("listing the file's {datasets} dataset{plural}")
        })
    }

    fn reach(&mut self) -> Result<()> {
        self.reached += 1;
        if self.reached > MAX_OBJECTS {
            return Err(Error::limit(format!(
                "the file holds more than {MAX_OBJECTS} objects"
            )));
        }
        Ok(())
    }

    /// The messages of the object header at `addr`, continuation blocks followed.
    fn messages(&self, addr: u64) -> Result<Vec<Message>> {
        let head = self.read_upto(addr, 16, "object header")?;
        let mut out = Vec::new();
        let mut blocks: Vec<HeaderBlock<'s>> = Vec::new();
        let v2 = head.starts_with(b"OHDR");
        if v2 {
            let mut c = self.cursor(&head, addr);
            c.skip(4, "OHDR")?;
            let version = c.u8("object header version")?;
            if version != 2 {
                return Err(bad_at(
                    format!("object header version {version} after OHDR"),
                    addr,
                ));
            }
            let flags = c.u8("object header flags")?;
            let mut skip = 0;
            if flags & 0x20 != 0 {
                skip += 16;
            }
            if flags & 0x10 != 0 {
                skip += 4;
            }
            let prefix = 6 + skip;
            let width = 1usize << (flags & 3);
            let sized = self.read(addr + prefix as u64, width as u64, "chunk size")?;
            let size = self.cursor(&sized, addr).uint(width, "chunk size")?;
            let start = addr + prefix as u64 + width as u64;
            let whole = (start - addr)
                .checked_add(size)
                .and_then(|n| n.checked_add(4));
            let whole = whole.ok_or_else(|| bad_at("an object header of impossible size", addr))?;
            let header = self.read(addr, whole, "object header")?;
            check_lookup3(&header, "object header", addr)?;
            blocks.push(HeaderBlock {
                start,
                size,
                v2: true,
                read: Some((header, (start - addr) as usize)),
            });
            self.parse_blocks(&mut blocks, flags & 0x04 != 0, &mut out)?;
        } else {
            let mut c = self.cursor(&head, addr);
            let version = c.u8("object header version")?;
            if version != 1 {
                return Err(bad_at(format!("object header version {version}"), addr));
            }
            c.skip(1, "reserved")?;
            let counted = c.u16("message count")?;
            c.u32("reference count")?;
            let size = c.u32("header size")?;
            // HDF5's own checks of a version 1 prefix (found comparing with h5py on edited
            // files): no messages and yet a chunk, or more messages than the prefix counts.
            if counted == 0 && size > 0 {
                return Err(bad_at(
                    format!("object header of no messages with a chunk of {size} bytes"),
                    addr,
                ));
            }
            blocks.push(HeaderBlock {
                start: addr + 16,
                size: u64::from(size),
                v2: false,
                read: None,
            });
            let found = self.parse_blocks(&mut blocks, false, &mut out)?;
            if found > usize::from(counted) {
                return Err(bad_at(
                    format!("object header holds {found} messages, more than the {counted} its prefix counts"),
                    addr,
                ));
            }
        }
        Ok(out)
    }

    /// Parses the blocks on the queue (and the continuation blocks they name) into messages;
    /// returns how many messages it read, continuation messages included.
    fn parse_blocks(
        &self,
        blocks: &mut Vec<HeaderBlock<'s>>,
        ordered: bool,
        out: &mut Vec<Message>,
    ) -> Result<usize> {
        let mut done = 0;
        let mut found = 0usize;
        while let Some(block) = blocks.pop() {
            let HeaderBlock {
                start, size, v2, ..
            } = block;
            done += 1;
            if done > MAX_BLOCKS {
                return Err(Error::limit(format!(
                    "an object header of more than {MAX_BLOCKS} continuation blocks"
                )));
            }
            // A block read whole for its checksum is parsed from those bytes.
            let unread;
            let bytes: &[u8] = match &block.read {
                Some((read, from)) => {
                    let to = from.saturating_add(usize::try_from(size).unwrap_or(usize::MAX));
                    read.get(*from..to).unwrap_or_default()
                }
                None => {
                    unread = self.read(start, size, "object header block")?;
                    &unread
                }
            };
            let mut c = self.cursor(bytes, start);
            let head_len = if v2 { 4 + usize::from(ordered) * 2 } else { 8 };
            while c.rest().len() >= head_len {
                let (kind, len) = if v2 {
                    let kind = u16::from(c.u8("message type")?);
                    let len = c.u16("message size")?;
                    c.skip(1 + usize::from(ordered) * 2, "message flags")?;
                    (kind, len)
                } else {
                    let kind = c.u16("message type")?;
                    let len = c.u16("message size")?;
                    c.skip(4, "message flags")?;
                    // Version 1 headers align every message to 8 bytes; HDF5 refuses one
                    // that is not.
                    if len % 8 != 0 {
                        return Err(bad_at(
                            format!("object header message of {len} bytes, not a multiple of 8"),
                            start + c.pos as u64 - 8,
                        ));
                    }
                    (kind, len)
                };
                let at = start + c.pos as u64;
                c.skip(usize::from(len), "message data")?;
                found += 1;
                if kind == msg::CONTINUATION {
                    let data = bytes
                        .get(c.pos - usize::from(len)..c.pos)
                        .unwrap_or_default();
                    let mut m = self.cursor(data, at);
                    let addr = m
                        .addr("continuation address")?
                        .ok_or_else(|| bad_at("continuation to an undefined address", at))?;
                    let length = m.length("continuation length")?;
                    if v2 {
                        // OCHK, messages, checksum.
                        let block = self.read(addr, length, "continuation block")?;
                        if !block.starts_with(b"OCHK") {
                            return Err(bad_at("continuation block without OCHK", addr));
                        }
                        check_lookup3(&block, "continuation block", addr)?;
                        blocks.push(HeaderBlock {
                            start: addr.saturating_add(4),
                            size: length.saturating_sub(8),
                            v2: true,
                            read: Some((block, 4)),
                        });
                    } else {
                        blocks.push(HeaderBlock {
                            start: addr,
                            size: length,
                            v2: false,
                            read: None,
                        });
                    }
                } else {
                    if out.len() >= MAX_MESSAGES {
                        return Err(Error::limit(format!(
                            "an object header of more than {MAX_MESSAGES} messages"
                        )));
                    }
                    out.push(Message {
                        kind,
                        at,
                        size: u64::from(len),
                    });
                }
            }
        }
        Ok(found)
    }

    fn data(&self, m: &Message) -> Result<Cow<'s, [u8]>> {
        self.read(m.at, m.size, "message")
    }

    /// Walks the group whose object header is at `addr`, named `path` ("" for the root).
    fn group(&mut self, addr: u64, path: &str, depth: usize) -> Result<()> {
        if depth > MAX_GROUP_DEPTH {
            return Err(Error::limit(format!(
                "groups nest deeper than {MAX_GROUP_DEPTH} levels (at {path})"
            )));
        }
        let h = self.state.hash_one(addr);
        if self.seen.find(h, |&a| a == addr).is_some() {
            return Ok(());
        }
        let state = self.state.clone();
        self.seen.insert_unique(h, addr, move |a| state.hash_one(a));
        let messages = self.messages(addr)?;
        // libhdf5 tells a group by these messages and fails on an object without them
        // ("unable to determine object type"); read as a group, it would list nothing.
        let is_group = messages
            .iter()
            .any(|m| matches!(m.kind, msg::SYMBOL_TABLE | msg::LINK | msg::LINK_INFO));
        if !is_group {
            let group = if path.is_empty() { "/" } else { path };
            return Err(Error::invalid(format!(
                "the object header at address {addr} holds no group, dataset or datatype \
                 message: HDF5 cannot tell what it is"
            ))
            .in_object(group));
        }
        let mut links: Vec<(String, Link)> = Vec::new();
        for m in &messages {
            match m.kind {
                msg::SYMBOL_TABLE => {
                    let data = self.data(m)?;
                    let mut c = self.cursor(&data, m.at);
                    let btree = c.addr("symbol table B-tree")?;
                    let heap = c.addr("symbol table heap")?;
                    if let (Some(btree), Some(heap)) = (btree, heap) {
                        self.symbol_table(btree, heap, &mut links)?;
                    }
                }
                msg::LINK => links.push(self.link(m)?),
                msg::LINK_INFO => {
                    let data = self.data(m)?;
                    let mut c = self.cursor(&data, m.at);
                    c.skip(1, "link info version")?;
                    let flags = c.u8("link info flags")?;
                    if flags & 1 != 0 {
                        c.skip(8, "max creation index")?;
                    }
                    if let Some(heap) = c.addr("fractal heap address")? {
                        self.dense_links(heap, &mut links)?;
                        if let Some(names) = c.addr("name index address")? {
                            let group = if path.is_empty() { "/" } else { path };
                            self.check_name_index(names)
                                .map_err(|e| e.in_object(group))?;
                        }
                    }
                }
                msg::ATTRIBUTE => {
                    if let Some((name, value)) = self.attribute(m)? {
                        let key = if path.is_empty() {
                            name
                        } else {
                            format!("{path}@{name}")
                        };
                        self.attributes.insert(key, value);
                    }
                }
                _ => {}
            }
        }
        for (name, link) in links {
            let child = format!("{path}/{name}");
            match link {
                Link::Hard(addr) => {
                    self.reach()?;
                    self.object(addr, &child, depth + 1)?;
                }
                Link::Soft(target) => self.soft.push((child, target)),
                Link::External(Some((file, target))) => {
                    self.reach()?;
                    self.external.push((child, file, target));
                }
                Link::External(None) => {}
            }
        }
        Ok(())
    }

    /// The object at `addr`: a group (walked) or a dataset (listed).
    fn object(&mut self, addr: u64, path: &str, depth: usize) -> Result<()> {
        let shown = if path.is_empty() { "/" } else { path };
        let messages = self.messages(addr).map_err(|e| e.in_object(shown))?;
        let is_dataset = messages.iter().any(|m| m.kind == msg::LAYOUT);
        if is_dataset {
            self.charge_listing(path)?;
            let o = self
                .dataset(&messages, path)
                .map_err(|e| e.in_object(path))?;
            self.objects
                .try_reserve(1)
                .map_err(|_| Error::out_of_memory("the list of datasets"))?;
            self.objects.push(o);
        } else if !messages.iter().any(|m| m.kind == msg::DATATYPE) {
            // A group, or an object of no type (refused there). A named datatype is no data.
            self.group(addr, path, depth)?;
        }
        Ok(())
    }

    /// A group's symbol table: the v1 B-tree's leaves (symbol table nodes) in key order.
    fn symbol_table(
        &mut self,
        btree: u64,
        heap: u64,
        links: &mut Vec<(String, Link)>,
    ) -> Result<()> {
        let heap = self.local_heap(heap)?;
        let mut stack = vec![btree];
        let mut reached = Reached::new();
        reached.first_time(btree, "a group B-tree")?;
        let mut nodes = 0usize;
        while let Some(node) = stack.pop() {
            nodes += 1;
            if nodes > MAX_OBJECTS {
                return Err(Error::limit("a group's B-tree of too many nodes"));
            }
            let (level, used, body_at) = self.btree_node(node, 0, "group")?;
            let entry = self.lengths as u64 + self.offsets as u64;
            let body = self.read(
                body_at,
                used * entry + self.lengths as u64,
                "B-tree entries",
            )?;
            let mut b = self.cursor(&body, body_at);
            let mut children = Vec::new();
            // Each key is a name's offset in the heap: libhdf5 looks names up by them, and
            // fails on one past the heap ("unable to offset into local heap data block").
            let heap_size = heap.bytes.len() as u64;
            for i in 0..=used {
                let key_at = b.here();
                let key = b.length("B-tree key")?;
                if key >= heap_size {
                    return Err(bad_at(
                        format!(
                            "a group B-tree key of heap offset {key}, past the heap's \
                             {heap_size} bytes"
                        ),
                        key_at,
                    ));
                }
                if i == used {
                    break;
                }
                if let Some(child) = b.addr("B-tree child")? {
                    reached.first_time(child, "a group B-tree")?;
                    children.push(child);
                }
            }
            if level == 0 {
                // Leaves: symbol table nodes, in key order.
                for child in children {
                    self.symbol_node(child, &heap, links)?;
                }
            } else {
                // Depth first, in key order.
                stack.extend(children.into_iter().rev());
            }
        }
        Ok(())
    }

    /// The header of the version 1 B-tree node at `node`, which must be of `kind` (0: a
    /// group's, 1: a dataset's chunks): its level, its entries used, and where its keys and
    /// children start (after the siblings' addresses).
    fn btree_node(&self, node: u64, kind: u8, what: &str) -> Result<(u8, u64, u64)> {
        let head_len = 8 + 2 * self.offsets as u64;
        let head = self.read(node, head_len, "B-tree node")?;
        let mut c = self.cursor(&head, node);
        if c.take(4, "B-tree signature")? != b"TREE" {
            return Err(bad_at(
                format!("{what} B-tree node without its TREE signature"),
                node,
            ));
        }
        let found = c.u8("B-tree node type")?;
        let level = c.u8("B-tree level")?;
        let used = u64::from(c.u16("B-tree entries used")?);
        if found != kind {
            return Err(bad_at(format!("{what} B-tree node of type {found}"), node));
        }
        // The read above found the header inside the file: no overflow.
        Ok((level, used, node + head_len))
    }

    /// One symbol table node (SNOD): its entries as links.
    fn symbol_node(
        &mut self,
        addr: u64,
        heap: &Heap,
        links: &mut Vec<(String, Link)>,
    ) -> Result<()> {
        let head = self.read(addr, 8, "symbol table node")?;
        let mut c = self.cursor(&head, addr);
        if c.take(4, "SNOD")? != b"SNOD" {
            return Err(bad_at("symbol table node without its SNOD signature", addr));
        }
        c.skip(2, "SNOD version")?;
        let count = u64::from(c.u16("SNOD symbols")?);
        let entry = 2 * self.offsets as u64 + 24;
        let body = self.read(addr + 8, count * entry, "symbol table entries")?;
        let mut b = self.cursor(&body, addr + 8);
        for _ in 0..count {
            let name_at = b.uint(self.offsets, "link name offset")?;
            let header = b.addr("object header address")?;
            let cache = b.u32("cache type")?;
            // 0: nothing cached, 1: a group's B-tree and heap, 2: a soft link. HDF5 refuses
            // any other.
            if cache > 2 {
                return Err(bad_at(
                    format!("symbol table entry of cache type {cache} (0, 1 or 2)"),
                    b.here(),
                ));
            }
            b.skip(4, "reserved")?;
            let scratch = b.take(16, "scratch pad")?;
            let name = heap.string(name_at)?;
            if links.len() >= MAX_OBJECTS {
                return Err(Error::limit("a group of too many links"));
            }
            let link = if cache == 2 {
                let offset = u64::from(u32::from_le_bytes(
                    scratch
                        .get(..4)
                        .and_then(|s| s.try_into().ok())
                        .unwrap_or([0; 4]),
                ));
                Link::Soft(heap.string(offset)?)
            } else {
                match header {
                    Some(h) => Link::Hard(h),
                    None => continue,
                }
            };
            links.push((name, link));
        }
        Ok(())
    }

    fn local_heap(&self, addr: u64) -> Result<Heap> {
        let head = self.read(
            addr,
            8 + 2 * self.lengths as u64 + self.offsets as u64,
            "local heap",
        )?;
        let mut c = self.cursor(&head, addr);
        if c.take(4, "HEAP")? != b"HEAP" {
            return Err(bad_at("local heap without its HEAP signature", addr));
        }
        c.skip(4, "heap version")?;
        let size = c.length("heap data size")?;
        let free_list = c.length("heap free list")?;
        let data = c
            .addr("heap data address")?
            .ok_or_else(|| bad_at("local heap with no data", addr))?;
        let bytes = self.read(data, size, "local heap data")?.into_owned();
        self.check_free_list(&bytes, free_list, data)?;
        Ok(Heap { bytes })
    }

    /// A local heap's free list, walked as libhdf5 walks it when it loads the heap (and
    /// refuses the group for: "bad heap free list"): each block inside the data, with a next
    /// offset that is not 0, until the offset 1 that ends the list. A list that loops is
    /// refused too (libhdf5 would walk it forever).
    fn check_free_list(&self, heap: &[u8], mut free: u64, data: u64) -> Result<()> {
        const END: u64 = 1;
        let len = self.lengths;
        let size = heap.len() as u64;
        let mut blocks = 0u64;
        while free != END {
            let block = usize::try_from(free)
                .ok()
                .and_then(|at| heap.get(at..at.checked_add(2 * len)?));
            let Some(block) = block else {
                return Err(bad_at(
                    format!(
                        "a local heap free block at offset {free} lies outside the heap's \
                         {size} bytes of data (a bad free list)"
                    ),
                    data,
                ));
            };
            let mut c = self.cursor(block, data + free);
            let next = c.length("free block's next offset")?;
            let block_size = c.length("free block size")?;
            if next == 0 || free.checked_add(block_size).is_none_or(|end| end > size) {
                return Err(bad_at(
                    format!(
                        "a local heap free block at offset {free} of {block_size} bytes, next \
                         at {next}: not inside the heap's {size} bytes of data (a bad free list)"
                    ),
                    data + free,
                ));
            }
            blocks += 1;
            if blocks > size {
                return Err(bad_at("a local heap's free list loops", data));
            }
            free = next;
        }
        Ok(())
    }

    /// A link message.
    fn link(&self, m: &Message) -> Result<(String, Link)> {
        let data = self.data(m)?;
        let mut c = self.cursor(&data, m.at);
        self.link_in(&mut c, m.at)
    }

    /// A link message's fields at the cursor (in an object header or a fractal heap).
    fn link_in(&self, c: &mut Cursor<'_>, at: u64) -> Result<(String, Link)> {
        let version = c.u8("link version")?;
        if version != 1 {
            return Err(bad_at(format!("link message version {version}"), at));
        }
        let flags = c.u8("link flags")?;
        let kind = if flags & 0x08 != 0 {
            c.u8("link type")?
        } else {
            0
        };
        if flags & 0x04 != 0 {
            c.skip(8, "creation order")?;
        }
        if flags & 0x10 != 0 {
            c.skip(1, "charset")?;
        }
        let len = c.uint(1 << (flags & 3), "link name length")? as usize;
        let name = text(c.take(len, "link name")?);
        let link = match kind {
            0 => Link::Hard(
                c.addr("link address")?
                    .ok_or_else(|| bad_at("hard link to an undefined address", at))?,
            ),
            1 => {
                let n = usize::from(c.u16("soft link length")?);
                Link::Soft(text(c.take(n, "soft link")?))
            }
            64 => {
                // A length, then flags, the file's name and the object's path, each ending
                // in NUL.
                let n = usize::from(c.u16("link value length")?);
                let value = c.take(n, "external link")?;
                let mut parts = value.get(1..).unwrap_or_default().split(|&b| b == 0);
                let file = parts.next().map(text).unwrap_or_default();
                let target = parts.next().map(text).unwrap_or_default();
                Link::External(Some((file, target)))
            }
            _ => {
                // User-defined links: a length, then their value.
                let n = usize::from(c.u16("link value length")?);
                c.skip(n, "link value")?;
                Link::External(None)
            }
        };
        Ok((name, link))
    }

    /// The links of a group in dense storage: link messages stored as the managed objects of
    /// a fractal heap. Every direct block of the heap is found from its root (a direct block,
    /// or an indirect block of direct blocks and further indirect blocks), and its objects are
    /// read in order from the block's start, as many as the heap says it manages.
    fn dense_links(&mut self, heap: u64, links: &mut Vec<(String, Link)>) -> Result<()> {
        let head = self.read_upto(heap, 256, "fractal heap header")?;
        let mut c = self.cursor(&head, heap);
        if c.take(4, "FRHP")? != b"FRHP" {
            return Err(bad_at("fractal heap without its FRHP signature", heap));
        }
        c.skip(1, "heap version")?;
        c.u16("heap ID length")?;
        let filters = c.u16("I/O filters length")?;
        let flags = c.u8("heap flags")?;
        c.u32("max managed object size")?;
        c.length("next huge object ID")?;
        c.addr("huge object B-tree")?;
        c.length("free space")?;
        c.addr("free space manager")?;
        c.length("managed space")?;
        c.length("allocated managed space")?;
        c.length("direct block allocation iterator")?;
        let objects = c.length("managed objects")?;
        c.length("huge objects size")?;
        c.length("huge objects")?;
        c.length("tiny objects size")?;
        c.length("tiny objects")?;
        let width = u64::from(c.u16("table width")?);
        let start = c.length("starting block size")?;
        let max_direct = c.length("max direct block size")?;
        let max_heap_bits = u32::from(c.u16("max heap size")?);
        c.u16("starting rows")?;
        let root = c.addr("root block")?;
        let rows = u64::from(c.u16("root rows")?);
        if filters != 0 {
            return Err(Error::unsupported("links in a filtered fractal heap").at(self.base + heap));
        }
        c.skip(4, "fractal heap checksum")?;
        check_lookup3(
            head.get(..c.pos).unwrap_or_default(),
            "fractal heap header",
            heap,
        )?;
        let checksummed = flags & 2 != 0;
        let Some(root) = root else { return Ok(()) };
        if width == 0
            || width > 65536
            || !start.is_power_of_two()
            || !max_direct.is_power_of_two()
            || max_direct < start
            || max_heap_bits > 64
        {
            return Err(bad_at(
                "a fractal heap with an impossible doubling table",
                heap,
            ));
        }
        let offset_bytes = max_heap_bits.div_ceil(8) as usize;
        // Direct blocks: (address, size), in heap order.
        let mut blocks = Vec::new();
        let direct_rows = u64::from(max_direct.ilog2() - start.ilog2()) + 2;
        let size_of_row = |r: u64| {
            if r < 2 {
                start
            } else {
                start.saturating_mul(1 << (r - 1).min(62))
            }
        };
        let mut pending = vec![(root, rows)];
        let mut seen = 0usize;
        while let Some((block, rows)) = pending.pop() {
            seen += 1;
            if seen > MAX_BLOCKS {
                return Err(Error::limit("a fractal heap of too many indirect blocks"));
            }
            if rows == 0 {
                blocks.push((block, start));
                continue;
            }
            let entries = rows.saturating_mul(width);
            let head_len = 5 + self.offsets as u64 + offset_bytes as u64;
            let body = self.read(
                block,
                head_len + entries * self.offsets as u64 + 4,
                "fractal heap indirect block",
            )?;
            check_lookup3(&body, "fractal heap indirect block", block)?;
            let mut b = self.cursor(&body, block);
            if b.take(4, "FHIB")? != b"FHIB" {
                return Err(bad_at("indirect block without its FHIB signature", block));
            }
            b.skip(1 + self.offsets + offset_bytes, "indirect block header")?;
            let mut children = Vec::new();
            for r in 0..rows {
                for _ in 0..width {
                    let child = b.addr("child block")?;
                    if let Some(child) = child {
                        let size = size_of_row(r);
                        if r < direct_rows {
                            children.push((child, size, 0));
                        } else {
                            // A child indirect block of this size has this many rows.
                            let child_rows =
                                u64::from(size.ilog2().saturating_sub((start * width).ilog2())) + 1;
                            children.push((child, size, child_rows));
                        }
                    }
                }
            }
            for (child, size, child_rows) in children.into_iter().rev() {
                if child_rows == 0 {
                    blocks.push((child, size));
                } else {
                    pending.push((child, child_rows));
                }
            }
        }
        let root_direct_size = if rows == 0 { start } else { 0 };
        let _ = root_direct_size;
        let mut left = objects;
        for (block, size) in blocks {
            if left == 0 {
                break;
            }
            let bytes = self.read_upto(block, size, "fractal heap direct block")?;
            let mut c = self.cursor(&bytes, block);
            if c.take(4, "FHDB")? != b"FHDB" {
                return Err(bad_at("direct block without its FHDB signature", block));
            }
            c.skip(1 + self.offsets + offset_bytes, "direct block header")?;
            if checksummed {
                // The checksum covers the whole block with its own field read as zeros.
                let field = c.pos;
                let stored = c.u32("direct block checksum")?;
                let computed = zt_formats::lookup3::lookup3_with_hole(&bytes, field);
                if stored != computed {
                    return Err(checksum_mismatch(
                        "fractal heap direct block",
                        block,
                        stored,
                        computed,
                        bytes.len(),
                    ));
                }
            }
            while left > 0 && c.rest().first().is_some_and(|&v| v == 1) {
                let at = c.here().saturating_sub(self.base);
                let (name, link) = self.link_in(&mut c, at)?;
                if links.len() >= MAX_OBJECTS {
                    return Err(Error::limit("a group of too many links"));
                }
                links.push((name, link));
                left -= 1;
            }
        }
        // Dense storage lists links in no set order: name order, as h5py shows them.
        links.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(())
    }

    /// Lists a soft link to a dataset again under the link's path (links to groups and to
    /// nothing are left out). A target may be a link listed before it, as the list was
    /// searched in order; each is found in a table of the names listed so far (a per-process
    /// keyed hash): searching the list for every link made a file of many links quadratic.
    fn follow_soft_links(&mut self) -> Result<()> {
        let soft = std::mem::take(&mut self.soft);
        if soft.is_empty() {
            return Ok(());
        }
        let state = RandomState::default();
        let mut by_name: HashTable<usize> = HashTable::new();
        for i in 0..self.objects.len() {
            index_first(&mut by_name, &state, &self.objects, i);
        }
        for (path, target) in soft {
            let target = if target.starts_with('/') {
                target
            } else {
                let parent = path.rsplit_once('/').map_or("", |(p, _)| p);
                format!("{parent}/{target}")
            };
            let found = by_name
                .find(state.hash_one(target.as_str()), |&i| {
                    self.objects.get(i).is_some_and(|o| o.name == target)
                })
                .and_then(|&i| self.objects.get(i));
            if let Some(o) = found {
                let mut copy = o.clone();
                copy.name = path;
                copy.attributes
                    .insert("hdf5.soft_link".into(), Attr::Text(target));
                self.reach()?;
                self.charge_listing(&copy.name)?;
                self.objects
                    .try_reserve(1)
                    .map_err(|_| Error::out_of_memory("the list of datasets"))?;
                self.objects.push(copy);
                index_first(&mut by_name, &state, &self.objects, self.objects.len() - 1);
            }
        }
        Ok(())
    }

    /// A dataset: its dataspace, type and layout.
    fn dataset(&mut self, messages: &[Message], path: &str) -> Result<ObjectInfo> {
        let find = |kind| messages.iter().find(|m| m.kind == kind).copied();
        let space =
            find(msg::DATASPACE).ok_or_else(|| Error::invalid("dataset has no dataspace"))?;
        let (dims, max_dims) = self.dataspace(&self.data(&space)?, space.at)?;
        let ty = find(msg::DATATYPE).ok_or_else(|| Error::invalid("dataset has no datatype"))?;
        // A damaged datatype fails this dataset's open in libhdf5, not the file's.
        let element = self.datatype(&self.data(&ty)?, ty.at);
        let layout = find(msg::LAYOUT).ok_or_else(|| Error::invalid("dataset has no layout"))?;
        let mut attributes = Attributes::new();
        for m in messages.iter().filter(|m| m.kind == msg::ATTRIBUTE) {
            if let Some((k, v)) = self.attribute(m)? {
                attributes.insert(k, v);
            }
        }
        let listed = |element: ElementType, order, range| {
            let mut o = ObjectInfo::raw_dense(
                path.to_owned(),
                dims.as_slice().into(),
                element,
                range,
                order,
            );
            o.attributes = attributes.clone();
            o
        };
        let with_defect = |defect: Defect| {
            let mut o = listed(ElementType::plain(DType::U8), ByteOrder::Little, (0, 0));
            o.shape = dims.as_slice().into();
            o.defect = Some(Box::new(defect));
            o
        };
        let (element, order) = match element {
            Ok(Element::Numbers(e, o)) => (e, o),
            Ok(Element::Not(what)) => return Ok(with_defect(Defect::not_numbers(what))),
            Err(e) if e.kind() == zt_container::ErrorKind::InvalidFile => {
                return Ok(with_defect(Defect::from_error(&e)))
            }
            Err(e) => return Err(e),
        };
        let count = dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
        let bytes = count.and_then(|c| c.checked_mul(element.dtype.size() as u64));
        let Some(bytes) = bytes else {
            return Err(Error::invalid(format!("shape {dims:?} overflows")));
        };
        if bytes == 0 {
            // No elements: nothing to read, whatever the layout says.
            return Ok(listed(element, order, (0, 0)));
        }
        // From here the element type is known: a dataset that cannot be read is listed with
        // it (`zt info` shows an unreadable i64 dataset as i64, as h5py shows it).
        let known = element.clone();
        let with_defect = |defect: Defect| {
            let mut o = listed(known.clone(), order, (0, 0));
            o.defect = Some(Box::new(defect));
            o
        };
        // Damage in what places the data (the layout, the chunk index, the addresses) makes
        // this dataset unreadable, not the file: HDF5 reads these only when the dataset is
        // read, so h5py lists it and fails on its read alone.
        let placed = (|| -> Result<ObjectInfo> {
            // libhdf5 decodes the fill value when it opens the dataset, used or not, and
            // fails on a damaged one ("ran off end of input buffer while decoding").
            self.fill_value(find(msg::FILL_VALUE), find(msg::FILL_VALUE_OLD))?;
            let data = self.data(&layout)?;
            match self.layout(&data, layout.at)? {
                Layout::Contiguous(None) => {
                    if find(msg::EXTERNAL_FILES).is_some() {
                        return Ok(with_defect(Defect::unsupported(
                            "its data lies in external files (HDF5's external storage), \
                             which are not read",
                        )));
                    }
                    // Never written: HDF5 reads the fill value, as for a chunk never written.
                    let fill = self.fill_value(find(msg::FILL_VALUE), find(msg::FILL_VALUE_OLD))?;
                    if fill.refuses_unallocated() {
                        return Ok(with_defect(Defect::unsupported(NO_DATA_NO_FILL)));
                    }
                    // With the fill time "never" HDF5 leaves the caller's buffer as it was;
                    // h5py's is zeros.
                    let value = fill.value.filter(|_| !fill.never).unwrap_or_default();
                    let size = element.dtype.size() as u64;
                    if !value.is_empty() && value.len() as u64 != size {
                        return Err(Error::invalid(format!(
                            "a fill value of {} bytes for elements of {size}",
                            value.len()
                        )));
                    }
                    // Stored nowhere: what it makes a read allocate is bounded as for
                    // chunks never written.
                    let budget = self.limits.read_budget(0);
                    if bytes > budget {
                        return Ok(with_defect(Defect {
                            kind: zt_container::ErrorKind::LimitExceeded,
                            message: format!(
                                "{bytes} bytes never written (filled) exceed the memory \
                                 budget of {budget} bytes (raise it: Limits::memory_budget, \
                                 zt --max-memory)"
                            ),
                            skip: false,
                        }));
                    }
                    // One chunk, the whole dataset, never written.
                    let table = zt_formats::ChunkTable {
                        dims: dims.to_vec(),
                        chunk: dims.to_vec(),
                        element_size: size,
                        filters: Vec::new(),
                        filter_params: Vec::new(),
                        chunks: Vec::new(),
                        fill: value,
                    };
                    let mut o = listed(element, order, (0, 0));
                    if let Some(c) = o.components.0.first_mut() {
                        c.encoding = zt_formats::Encoding::Hdf5Chunks(Box::new(table));
                        c.decoded_len = Some(bytes);
                        c.uncompressed_length = Some(bytes);
                    }
                    Ok(o)
                }
                Layout::Contiguous(Some((addr, size))) | Layout::Compact(addr, size) => {
                    if size < bytes {
                        return Ok(with_defect(Defect::invalid(format!(
                            "{size} bytes of data for {bytes} bytes of elements"
                        ))));
                    }
                    let at = self.base.checked_add(addr);
                    let fits = at
                        .and_then(|a| a.checked_add(bytes))
                        .is_some_and(|e| e <= self.source.len());
                    match at.filter(|_| fits) {
                        Some(at) => Ok(listed(element, order, (at, bytes))),
                        None => Err(Error::invalid(format!(
                            "data at address {addr}, {bytes} bytes, lies past the end of the file"
                        ))),
                    }
                }
                Layout::Chunked(layout_dims, index) => {
                    let filters = match find(msg::FILTERS) {
                        Some(f) => self.filters(&self.data(&f)?, f.at)?,
                        None => Vec::new(),
                    };
                    if let Some((id, name, _)) = filters
                        .iter()
                        .find(|(id, ..)| !crate::chunks::decodable(*id))
                    {
                        return Ok(with_defect(Defect::unsupported(format!(
                        "unsupported HDF5 filter {name} (id {id}): its chunks cannot be decoded"
                    ))));
                    }
                    let pipeline = filters.into_iter().map(|(id, _, p)| (id, p)).collect();
                    let size = element.dtype.size() as u64;
                    let (mut table, first) =
                        self.chunk_table(&dims, &max_dims, size, &layout_dims, &index, pipeline)?;
                    let end = table
                        .chunks
                        .iter()
                        .map(|c| c.at.saturating_add(c.size))
                        .max()
                        .unwrap_or(0);
                    let at = self.base.checked_add(first);
                    let fits = at
                        .and_then(|a| a.checked_add(end))
                        .is_some_and(|e| e <= self.source.len());
                    let Some(at) = at.filter(|_| fits) else {
                        return Err(Error::invalid(format!(
                            "chunks at address {first}, {end} bytes, lie past the end of the file"
                        )));
                    };
                    // Chunks never written are stored nowhere: like a broadcast, what
                    // they make a read allocate is bounded by the memory budget.
                    let chunk_bytes = table.chunk.iter().fold(size, |a, &n| a.saturating_mul(n));
                    let written = chunk_bytes.saturating_mul(table.chunks.len() as u64);
                    let budget = self.limits.read_budget(end);
                    if bytes.saturating_sub(written) > budget {
                        return Ok(with_defect(Defect {
                            kind: zt_container::ErrorKind::LimitExceeded,
                            message: format!(
                            "{bytes} bytes of which {} never written (filled) exceed the memory \
                             budget of {budget} bytes (raise it: Limits::memory_budget, zt \
                             --max-memory)",
                            bytes.saturating_sub(written)
                        ),
                            skip: false,
                        }));
                    }
                    // Chunks never written hold the fill value, as HDF5 reads them.
                    let fill = self.fill_value(find(msg::FILL_VALUE), find(msg::FILL_VALUE_OLD))?;
                    if fill.refuses_unallocated() && index.address().is_none() {
                        return Ok(with_defect(Defect::unsupported(NO_DATA_NO_FILL)));
                    }
                    // With the fill time "never" HDF5 leaves unwritten chunks' elements as
                    // the caller's buffer had them; h5py's is zeros.
                    if let Some(fill) = fill.value.filter(|_| !fill.never) {
                        if fill.len() as u64 != size {
                            return Err(Error::invalid(format!(
                                "a fill value of {} bytes for elements of {size}",
                                fill.len()
                            )));
                        }
                        table.fill = fill;
                    }
                    let mut o = listed(element, order, (at, end));
                    if let Some(c) = o.components.0.first_mut() {
                        c.encoding = zt_formats::Encoding::Hdf5Chunks(Box::new(table));
                        c.decoded_len = Some(bytes);
                        c.uncompressed_length = Some(bytes);
                    }
                    Ok(o)
                }
                Layout::Other(what) => Ok(with_defect(Defect::unsupported(what))),
            }
        })();
        match placed {
            Err(e) if e.kind() == zt_container::ErrorKind::InvalidFile => {
                Ok(with_defect(Defect::from_error(&e)))
            }
            placed => placed,
        }
    }

    /// A dataset's fill value, as HDF5 reads storage never written: the fill value message
    /// (versions 1-3) is read first, the old one (type 4) when it is absent, and zeros (HDF5's
    /// default) when there is neither.
    fn fill_value(&self, new: Option<Message>, old: Option<Message>) -> Result<Fill> {
        let (value, never) = if let Some(m) = new {
            let data = self.data(&m)?;
            let mut c = self.cursor(&data, m.at);
            let version = c.u8("fill value version")?;
            match version {
                1 | 2 => {
                    c.skip(1, "fill value allocation time")?;
                    let never = c.u8("fill value time")? == FILL_TIME_NEVER;
                    let defined = c.u8("fill value defined")? != 0;
                    // Version 1 always stores a size; version 2 only when defined.
                    let value = if defined || version == 1 {
                        fill_bytes(&mut c)?
                    } else {
                        None
                    };
                    (value, never)
                }
                3 => {
                    let flags = c.u8("fill value flags")?;
                    let never = (flags >> 2) & 3 == FILL_TIME_NEVER;
                    let value = if flags & 0x10 != 0 {
                        None
                    } else if flags & 0x20 != 0 {
                        fill_bytes(&mut c)?
                    } else {
                        Some(Vec::new())
                    };
                    (value, never)
                }
                v => return Err(bad_at(format!("fill value message version {v}"), m.at)),
            }
        } else if let Some(m) = old {
            let data = self.data(&m)?;
            let mut c = self.cursor(&data, m.at);
            (fill_bytes(&mut c)?, false)
        } else {
            (Some(Vec::new()), false)
        };
        Ok(Fill {
            undefined: value.is_none(),
            value: value.filter(|v| v.iter().any(|&b| b != 0)),
            never,
        })
    }

    /// A dataspace's dimensions and maximum dimensions (`u64::MAX`: unlimited; the
    /// dimensions themselves when the message gives none).
    fn dataspace(&self, data: &[u8], at: u64) -> Result<(Vec<u64>, Vec<u64>)> {
        let mut c = self.cursor(data, at);
        let version = c.u8("dataspace version")?;
        let rank = usize::from(c.u8("dataspace rank")?);
        let flags = c.u8("dataspace flags")?;
        match version {
            1 => c.skip(5, "reserved")?,
            2 => {
                let kind = c.u8("dataspace type")?;
                if kind == 2 {
                    // The null dataspace: no elements.
                    return Ok((vec![0], vec![0]));
                }
            }
            v => return Err(bad_at(format!("dataspace version {v}"), at)),
        }
        let cap = self.limits.decode.max_rank;
        if rank > cap {
            return Err(Error::rank_over_cap(Some(rank as u64), cap).at(at));
        }
        let dims: Vec<u64> = (0..rank)
            .map(|_| c.length("dimension"))
            .collect::<Result<_>>()?;
        let max_dims = if flags & 1 != 0 {
            // All bits set: unlimited, whatever the size of lengths.
            let unlimited = u64::MAX >> (64 - 8 * self.lengths as u32);
            (0..rank)
                .map(|_| {
                    let m = c.length("maximum dimension")?;
                    Ok(if m == unlimited { u64::MAX } else { m })
                })
                .collect::<Result<_>>()?
        } else {
            dims.clone()
        };
        Ok((dims, max_dims))
    }

    fn datatype(&self, data: &[u8], at: u64) -> Result<Element> {
        let mut c = self.cursor(data, at);
        let class_version = c.u8("datatype class")?;
        let bits = c.take(3, "datatype bit field")?;
        let size = c.u32("datatype size")?;
        let b0 = bits.first().copied().unwrap_or(0);
        let order = if b0 & 1 != 0 {
            ByteOrder::Big
        } else {
            ByteOrder::Little
        };
        let class = class_version & 0x0f;
        if matches!(class, 0 | 1 | 4) {
            // Integers, floats and bitfields give the bits they use: libhdf5 refuses bits
            // past the element ("integer offset+precision out of bounds") and converts the
            // others when it reads; only full-width elements are read here as they are.
            let offset = c.u16("bit offset")?;
            let precision = c.u16("bit precision")?;
            let element_bits = 8 * u64::from(size);
            if u64::from(offset) + u64::from(precision) > element_bits {
                return Err(bad_at(
                    format!(
                        "a number type of {precision} bits at bit {offset} in elements of \
                         {size} bytes"
                    ),
                    at,
                ));
            }
            if offset != 0 || u64::from(precision) != element_bits {
                return Ok(Element::Not(format!(
                    "HDF5 numbers of {precision} bits at bit {offset} in {size} bytes"
                )));
            }
        }
        let numbers = |d: DType| Element::Numbers(ElementType::plain(d), order);
        Ok(match (class, size) {
            (0, 1) if b0 & 8 != 0 => numbers(DType::I8),
            (0, 1) => numbers(DType::U8),
            (0, 2) if b0 & 8 != 0 => numbers(DType::I16),
            (0, 2) => numbers(DType::U16),
            (0, 4) if b0 & 8 != 0 => numbers(DType::I32),
            (0, 4) => numbers(DType::U32),
            (0, 8) if b0 & 8 != 0 => numbers(DType::I64),
            (0, 8) => numbers(DType::U64),
            (1, 2) => {
                // f16 (5-bit exponent) or bfloat16 (8-bit): the exponent's size says.
                c.skip(1, "exponent location")?;
                let exponent = c.u8("exponent size")?;
                numbers(if exponent == 8 {
                    DType::BF16
                } else {
                    DType::F16
                })
            }
            (1, 4) => numbers(DType::F32),
            (1, 8) => numbers(DType::F64),
            // Bitfields (PyTables' booleans): unsigned integers of their size.
            (4, 1) => numbers(DType::U8),
            (4, 2) => numbers(DType::U16),
            (4, 4) => numbers(DType::U32),
            (4, 8) => numbers(DType::U64),
            (8, _) => {
                // An enum: its values are its base type's. h5py's bool is an enum of two
                // 1-byte members (FALSE = 0, TRUE = 1).
                let members = u16::from_le_bytes([b0, bits.get(1).copied().unwrap_or(0)]);
                if size == 1 && members == 2 {
                    Element::Numbers(ElementType::plain(DType::Bool), ByteOrder::Little)
                } else {
                    let base = c.rest();
                    match base.first().map(|b| b & 0x0f) {
                        Some(0) => self.datatype(base, at)?,
                        _ => Element::Not("an HDF5 enum of a non-integer base".into()),
                    }
                }
            }
            (0 | 1, n) => Element::Not(format!("HDF5 numbers of {n} bytes")),
            (class, _) => Element::Not(format!("HDF5 {} data (not numbers)", class_name(class))),
        })
    }

    fn layout(&self, data: &[u8], at: u64) -> Result<Layout> {
        let mut c = self.cursor(data, at);
        let version = c.u8("layout version")?;
        match version {
            1 | 2 => {
                let rank = usize::from(c.u8("layout rank")?);
                let class = c.u8("layout class")?;
                c.skip(5, "reserved")?;
                let addr = if class != 0 {
                    c.addr("layout address")?
                } else {
                    None
                };
                let dims: Vec<u64> = (0..rank)
                    .map(|_| c.u32("layout dimension").map(u64::from))
                    .collect::<Result<_>>()?;
                match class {
                    0 => {
                        let size = u64::from(c.u32("compact size")?);
                        Ok(Layout::Compact(at + c.pos as u64, size))
                    }
                    1 => {
                        // The size is the product of the dimensions (of the elements).
                        Ok(Layout::Contiguous(addr.map(|a| (a, u64::MAX))))
                    }
                    2 => Ok(Layout::Chunked(dims, ChunkIndex::BTree(addr))),
                    k => Ok(Layout::Other(format!("layout class {k}"))),
                }
            }
            // Version 5 (HDF5 2.0, libver "latest") keeps version 4's classes.
            3..=5 => {
                let class = c.u8("layout class")?;
                match class {
                    0 => {
                        let size = u64::from(c.u16("compact size")?);
                        Ok(Layout::Compact(at + c.pos as u64, size))
                    }
                    1 => {
                        let addr = c.addr("contiguous address")?;
                        let size = c.length("contiguous size")?;
                        Ok(Layout::Contiguous(addr.map(|a| (a, size))))
                    }
                    2 if version == 3 => {
                        let rank = usize::from(c.u8("chunk rank")?);
                        let addr = c.addr("chunk B-tree address")?;
                        let dims = (0..rank)
                            .map(|_| c.u32("chunk dimension").map(u64::from))
                            .collect::<Result<_>>()?;
                        Ok(Layout::Chunked(dims, ChunkIndex::BTree(addr)))
                    }
                    2 => self.chunked_v4(&mut c),
                    3 => Ok(Layout::Other(
                        "a virtual dataset (data in other files)".into(),
                    )),
                    k => Ok(Layout::Other(format!("layout class {k}"))),
                }
            }
            v => Ok(Layout::Other(format!("layout message version {v}"))),
        }
    }

    /// A version 4 (or 5) chunked layout: its dimensions and chunk index.
    fn chunked_v4(&self, c: &mut Cursor<'_>) -> Result<Layout> {
        let flags = c.u8("chunk flags")?;
        let rank = usize::from(c.u8("chunk rank")?);
        let width = usize::from(c.u8("chunk dimension size")?);
        if !(1..=8).contains(&width) {
            return Err(bad_at(
                format!("chunk dimensions of {width} bytes"),
                c.here(),
            ));
        }
        let dims = (0..rank)
            .map(|_| c.uint(width, "chunk dimension"))
            .collect::<Result<Vec<u64>>>()?;
        let index = match c.u8("chunk index type")? {
            1 => {
                let filtered = if flags & 2 != 0 {
                    Some((c.length("filtered chunk size")?, c.u32("filter mask")?))
                } else {
                    None
                };
                ChunkIndex::Single(c.addr("chunk address")?, filtered)
            }
            2 => ChunkIndex::Implicit(c.addr("chunk address")?),
            3 => {
                c.skip(1, "page bits")?;
                ChunkIndex::FixedArray(c.addr("fixed array address")?)
            }
            4 => {
                // Maximum bits, index entries, minimum pointers and entries, page bits: the
                // array's header repeats them.
                c.skip(5, "extensible array parameters")?;
                ChunkIndex::ExtensibleArray(c.addr("extensible array address")?)
            }
            5 => {
                c.skip(6, "v2 B-tree parameters")?;
                ChunkIndex::BTree2(c.addr("v2 B-tree address")?)
            }
            k => return Ok(Layout::Other(format!("chunk index type {k}"))),
        };
        Ok(Layout::Chunked(dims, index))
    }

    /// The filters of a pipeline message: (id, name, parameters).
    fn filters(&self, data: &[u8], at: u64) -> Result<Vec<(u16, String, Vec<u32>)>> {
        let mut c = self.cursor(data, at);
        let version = c.u8("filter pipeline version")?;
        let count = c.u8("filter count")?;
        if version == 1 {
            c.skip(6, "reserved")?;
        }
        let mut names = Vec::new();
        for _ in 0..count {
            let id = c.u16("filter id")?;
            let name_len = if version == 1 || id >= 256 {
                usize::from(c.u16("filter name length")?)
            } else {
                0
            };
            c.skip(2, "filter flags")?;
            let values = usize::from(c.u16("filter values")?);
            let mut padded = name_len;
            if version == 1 {
                padded = name_len.div_ceil(8) * 8;
            }
            c.skip(padded, "filter name")?;
            let params = (0..values)
                .map(|_| c.u32("filter value"))
                .collect::<Result<Vec<u32>>>()?;
            if version == 1 && values % 2 == 1 {
                c.skip(4, "padding")?;
            }
            names.push((
                id,
                crate::chunks::filter_name(id)
                    .map_or_else(|| format!("filter {id}"), str::to_owned),
                params,
            ));
        }
        Ok(names)
    }

    /// An attribute message: its name and value (numbers, or fixed-length text); `None`
    /// for values we do not keep (variable-length data, compounds, ...).
    fn attribute(&mut self, m: &Message) -> Result<Option<(String, Attr)>> {
        let kept = self.attribute_value(m)?;
        if let Some((name, value)) = &kept {
            // An attribute message of up to a MiB can hold a million one-byte numbers, each
            // a 32-byte value, and an object header can hold many such messages.
            let (nodes, text) = match value {
                Attr::Array(items) => {
                    let text = items.iter().map(|v| v.as_str().map_or(0, str::len)).sum();
                    (items.len() as u64 + 1, text)
                }
                v => (1, v.as_str().map_or(0, str::len)),
            };
            self.values
                .key(name.len())
                .and_then(|()| self.values.nodes(nodes))
                .and_then(|()| self.values.payload(text))
                .map_err(|e| e.at(m.at))?;
        }
        Ok(kept)
    }

    /// The name and value of [`File::attribute`], uncharged.
    fn attribute_value(&self, m: &Message) -> Result<Option<(String, Attr)>> {
        if m.size > MAX_ATTRIBUTE {
            return Ok(None);
        }
        let data = self.data(m)?;
        let mut c = self.cursor(&data, m.at);
        let version = c.u8("attribute version")?;
        c.skip(1, "attribute flags")?;
        let name_len = usize::from(c.u16("attribute name size")?);
        let type_len = usize::from(c.u16("attribute datatype size")?);
        let space_len = usize::from(c.u16("attribute dataspace size")?);
        if version == 3 {
            c.skip(1, "name encoding")?;
        }
        let pad = |n: usize| if version == 1 { n.div_ceil(8) * 8 } else { n };
        let name_bytes = c.take(pad(name_len), "attribute name")?;
        let name = text(name_bytes.get(..name_len).unwrap_or_default())
            .trim_end_matches('\0')
            .to_owned();
        let ty = c.take(pad(type_len), "attribute datatype")?.to_vec();
        let space = c.take(pad(space_len), "attribute dataspace")?.to_vec();
        let (dims, _) = self.dataspace(&space, m.at)?;
        let count = dims
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))
            .unwrap_or(u64::MAX);
        let value_bytes = c.rest();
        let class = ty.first().copied().unwrap_or(0) & 0x0f;
        let size = u64::from(u32::from_le_bytes(
            ty.get(4..8)
                .and_then(|s| s.try_into().ok())
                .unwrap_or([0; 4]),
        ));
        let needed = count.saturating_mul(size);
        if needed > value_bytes.len() as u64 {
            return Ok(None);
        }
        let scalar = dims.is_empty();
        if class == 3 {
            // Fixed-length strings, padded with NULs or spaces.
            let items: Vec<Attr> = value_bytes
                .chunks(size.max(1) as usize)
                .take(count as usize)
                .map(|s| Attr::Text(text(s).trim_end_matches(['\0', ' ']).to_owned()))
                .collect();
            return Ok(Some((name, one_or_many(items, scalar))));
        }
        if class == 9 && ty.get(1).is_some_and(|b| b & 0x0f == 1) {
            // Variable-length strings: each a (length, global heap collection, index).
            let width = 8 + self.offsets;
            let mut items = Vec::new();
            for chunk in value_bytes.chunks(width).take(count as usize) {
                let mut e = self.cursor(chunk, m.at);
                let len = u64::from(e.u32("string length")?);
                let heap = e.addr("global heap")?;
                let index = e.u32("global heap index")?;
                let value = match heap {
                    Some(heap) if len <= MAX_ATTRIBUTE => self.global_object(heap, index)?,
                    _ => Vec::new(),
                };
                let value = value.get(..len as usize).unwrap_or(&value);
                items.push(Attr::Text(text(value)));
            }
            return Ok(Some((name, one_or_many(items, scalar))));
        }
        let element = match self.datatype(&ty, m.at)? {
            Element::Numbers(e, order) => (e, order),
            Element::Not(_) => return Ok(None),
        };
        let width = element.0.dtype.size();
        let items: Vec<Attr> = value_bytes
            .chunks(width.max(1))
            .take(count as usize)
            .map(|b| number(b, element.0.dtype, element.1))
            .collect();
        Ok(Some((name, one_or_many(items, scalar))))
    }
}

impl File<'_> {
    /// Object `index` of the global heap collection at `addr` (variable-length data).
    fn global_object(&self, addr: u64, index: u32) -> Result<Vec<u8>> {
        let head = self.read(addr, 8 + self.lengths as u64, "global heap")?;
        let mut c = self.cursor(&head, addr);
        if c.take(4, "GCOL")? != b"GCOL" {
            return Err(bad_at(
                "global heap collection without its GCOL signature",
                addr,
            ));
        }
        c.skip(4, "global heap version")?;
        let size = c.length("global heap size")?;
        let bytes = self.read(addr, size, "global heap collection")?;
        let mut c = self.cursor(&bytes, addr);
        c.skip(8 + self.lengths, "global heap header")?;
        while c.rest().len() >= 8 + self.lengths {
            let i = c.u16("heap object index")?;
            c.skip(6, "reference count")?;
            let len = c.length("heap object size")?;
            if i == 0 {
                break;
            }
            let n = usize::try_from(len).unwrap_or(usize::MAX);
            let data = c.take(n, "heap object")?;
            if u32::from(i) == index {
                return Ok(data.to_vec());
            }
            c.skip(n.div_ceil(8) * 8 - n, "heap object padding")?;
        }
        Err(bad_at(
            format!("global heap object {index} not found"),
            addr,
        ))
    }
}

/// A group's link.
enum Link {
    Hard(u64),
    Soft(String),
    /// An external link's file and object path (`None`: a user-defined link).
    External(Option<(String, String)>),
}

/// A dataset's layout.
enum Layout {
    /// Address and size (`u64::MAX` for the old messages, which give none); `None`: no
    /// data written.
    Contiguous(Option<(u64, u64)>),
    /// Where the data lies in the header (an address) and its size.
    Compact(u64, u64),
    /// The layout's dimensions (the chunk's, then the element's size) and the chunk index.
    Chunked(Vec<u64>, ChunkIndex),
    Other(String),
}

/// Where a chunked dataset's chunks are listed.
#[derive(Clone, Copy)]
enum ChunkIndex {
    /// A version 1 B-tree (layouts 1-3).
    BTree(Option<u64>),
    /// One chunk, with its filtered size and mask when filtered.
    Single(Option<u64>, Option<(u64, u32)>),
    /// Chunks back to back from an address, unfiltered.
    Implicit(Option<u64>),
    /// A fixed array of chunk addresses.
    FixedArray(Option<u64>),
    /// An extensible array of chunk addresses.
    ExtensibleArray(Option<u64>),
    /// A version 2 B-tree of chunk records.
    BTree2(Option<u64>),
}

impl ChunkIndex {
    /// Where the index lies; `None` when no chunk was ever written (HDF5 allocates it then).
    fn address(&self) -> Option<u64> {
        match *self {
            ChunkIndex::BTree(a)
            | ChunkIndex::Single(a, _)
            | ChunkIndex::Implicit(a)
            | ChunkIndex::FixedArray(a)
            | ChunkIndex::ExtensibleArray(a)
            | ChunkIndex::BTree2(a) => a,
        }
    }
}

/// A local heap's data segment: names, NUL-terminated.
struct Heap {
    bytes: Vec<u8>,
}

impl Heap {
    fn string(&self, offset: u64) -> Result<String> {
        let from = usize::try_from(offset).unwrap_or(usize::MAX);
        // Inside the segment, as HDF5 requires (an offset at its end is refused too).
        let rest = self
            .bytes
            .get(from..)
            .filter(|r| !r.is_empty())
            .ok_or_else(|| {
                Error::invalid(format!(
                    "a name at offset {offset} of a local heap of {} bytes",
                    self.bytes.len()
                ))
            })?;
        let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        Ok(text(rest.get(..end).unwrap_or_default()))
    }
}

fn check_sizes(offsets: usize, lengths: usize, c: &Cursor<'_>) -> Result<()> {
    for (what, n) in [("size of offsets", offsets), ("size of lengths", lengths)] {
        if !matches!(n, 2 | 4 | 8) {
            return Err(Error::invalid(format!("{what} {n}: 2, 4 or 8 are read")).at(c.here()));
        }
    }
    Ok(())
}

fn bad_at(message: impl Into<String>, at: u64) -> Error {
    Error::invalid(message.into()).at(at)
}

/// A fill value's bytes after its size. HDF5 decodes the size as signed: 0 means its default
/// (zeros, `Some` of nothing) and a negative size (-1 from older writers, PyTables' among
/// them) a value left undefined (`None`). A message that ends before the size reads as the
/// default, as it always has here.
fn fill_bytes(c: &mut Cursor<'_>) -> Result<Option<Vec<u8>>> {
    if c.rest().is_empty() {
        return Ok(Some(Vec::new()));
    }
    let size = c.u32("fill value size")? as i32;
    match usize::try_from(size) {
        Ok(size) => Ok(Some(c.take(size, "fill value")?.to_vec())),
        Err(_) => Ok(None),
    }
}

/// A fill value message's fill time "never": HDF5 writes no fill value into storage it
/// allocates, and a read of storage never allocated leaves the caller's buffer as it was.
const FILL_TIME_NEVER: u8 = 1;

/// A dataset's fill value ([`File::fill_value`]).
struct Fill {
    /// One element of it, when it is not all zeros (`None`: zeros, or undefined).
    value: Option<Vec<u8>>,
    /// No value is defined (HDF5's "undefined", not its default of zeros).
    undefined: bool,
    /// The fill time is "never" ([`FILL_TIME_NEVER`]).
    never: bool,
}

impl Fill {
    /// Whether HDF5 refuses to read a dataset none of whose storage was ever allocated (no
    /// data address, no chunk index): no value is defined and the fill time is not "never".
    fn refuses_unallocated(&self) -> bool {
        self.undefined && !self.never
    }
}

/// The defect of a dataset [`Fill::refuses_unallocated`] refuses, with HDF5's words.
const NO_DATA_NO_FILL: &str = "no data written and no fill value defined: HDF5 refuses to read \
                               it (\"dataset doesn't exist, no data can be read\")";

/// Checks a structure whose last 4 bytes are the lookup3 checksum of the bytes before them,
/// as HDF5 does before it trusts one: a mismatch means the file was damaged after it was
/// A block of object header messages waiting to be parsed: where its messages start, how
/// many bytes they take, whether it is a version 2 header's, and its bytes when they were
/// already read whole for a checksum (with where `start` lies in them).
struct HeaderBlock<'s> {
    start: u64,
    size: u64,
    v2: bool,
    read: Option<(Cow<'s, [u8]>, usize)>,
}

/// written, and nothing read from the structure can be believed.
pub(super) fn check_lookup3(structure: &[u8], what: &str, at: u64) -> Result<()> {
    let Some(split) = structure.len().checked_sub(4) else {
        return Err(bad_at(format!("{what} too short to hold its checksum"), at));
    };
    let (body, stored) = structure.split_at(split);
    let stored = u32::from_le_bytes([stored[0], stored[1], stored[2], stored[3]]);
    let computed = zt_formats::lookup3::lookup3(body);
    if stored != computed {
        return Err(checksum_mismatch(what, at, stored, computed, body.len()));
    }
    Ok(())
}

fn checksum_mismatch(what: &str, at: u64, stored: u32, computed: u32, len: usize) -> Error {
    bad_at(
        format!(
            "{what}: its checksum 0x{stored:08x} does not match its {len} bytes (0x{computed:08x}); \
             the file is damaged"
        ),
        at,
    )
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn class_name(class: u8) -> &'static str {
    match class {
        2 => "time",
        3 => "string",
        4 => "bitfield",
        5 => "opaque",
        6 => "compound",
        7 => "reference",
        8 => "enum",
        9 => "variable-length",
        10 => "array",
        _ => "unknown-class",
    }
}

fn number(bytes: &[u8], dtype: DType, order: ByteOrder) -> Attr {
    let mut b = [0u8; 8];
    let n = bytes.len().min(8);
    b.get_mut(..n)
        .unwrap_or_default()
        .copy_from_slice(bytes.get(..n).unwrap_or_default());
    if order == ByteOrder::Big {
        b.get_mut(..n).unwrap_or_default().reverse();
    }
    let u = u64::from_le_bytes(b);
    match dtype {
        DType::F64 => Attr::Float(f64::from_bits(u)),
        DType::F32 => Attr::Float(f64::from(f32::from_bits(u as u32))),
        DType::F16 => Attr::Float(f64::from(half::f16::from_bits(u as u16))),
        DType::BF16 => Attr::Float(f64::from(half::bf16::from_bits(u as u16))),
        DType::I8 => Attr::Integer(i128::from(u as u8 as i8)),
        DType::I16 => Attr::Integer(i128::from(u as u16 as i16)),
        DType::I32 => Attr::Integer(i128::from(u as u32 as i32)),
        DType::I64 => Attr::Integer(i128::from(u as i64)),
        DType::Bool => Attr::Bool(u != 0),
        _ => Attr::Integer(i128::from(u)),
    }
}

fn one_or_many(mut items: Vec<Attr>, scalar: bool) -> Attr {
    if scalar && items.len() == 1 {
        items.pop().unwrap_or(Attr::Null)
    } else {
        Attr::Array(items)
    }
}

/// Adds object `i` of `objects` to `table` (by name), unless a name the same is there: the
/// first object of a name is the one a lookup finds, as a search of the list in order did.
fn index_first(
    table: &mut HashTable<usize>,
    state: &RandomState,
    objects: &[ObjectInfo],
    i: usize,
) {
    let name_at = |j: usize| objects.get(j).map_or("", |o| o.name.as_str());
    let name = name_at(i);
    let hash = state.hash_one(name);
    if table.find(hash, |&j| name_at(j) == name).is_none() {
        table.insert_unique(hash, i, |&j| state.hash_one(name_at(j)));
    }
}

#[cfg(test)]
mod tests {
    use super::Heap;

    #[test]
    fn a_heap_name_must_start_inside_the_heap() {
        let heap = Heap {
            bytes: b"\0ab\0cd".to_vec(),
        };
        assert_eq!(heap.string(1).unwrap(), "ab");
        // Running to the heap's end without a NUL is read as HDF5 reads it.
        assert_eq!(heap.string(4).unwrap(), "cd");
        // At the end of the data, or past it: HDF5's "unable to offset into local heap".
        for offset in [6, 7, u64::MAX] {
            let e = heap.string(offset).unwrap_err();
            assert!(e.to_string().contains("of a local heap of 6 bytes"), "{e}");
        }
    }
}
