//! zTensor v2 files (ztensor 2.x): the footer's manifest hash checked, the deterministic-CBOR
//! manifest decoded, its shards found beside the file and opened, and every part validated
//! into the shared object model.
//!
//! v2 names its pieces differently (objects have a `layout` and `parts`, parts a `blob`); they
//! become formats and components here, so everything above the listing reads v2 as it reads
//! every other version. What differs is kept on the component: which file holds its bytes
//! (`file`, for shards) and that its digest covers the decoded bytes (`digest_scope`).

use std::cell::{Cell, OnceCell};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use zt_container::{check_blob_range_v2, ContainerV2, Error, Result, Source};
use zt_formats::seekable::MAX_ZSTD_RATIO;
use zt_formats::v2::{check_layout_v2, element_v2, unregistered_element, PartLayout};
use zt_formats::{element_count, xxh3_64, Digest, ElementType, Encoding};
use zt_manifest::{visit_manifest_v2, ObjectV2Ref, PartV2Ref, ShardV2, MIN_OBJECT_ENTRY_V2};

use crate::listing::{intern_role, reserve_objects, Collected, Limits, Listing};
use crate::model::{
    ByteOrder, ComponentInfo, Components, DigestScope, FileVersion, ObjectInfo, ShardInfo,
};

/// Opens a shard file the way the root was opened (mapped or not).
pub(crate) type OpenShard<'a> = &'a dyn Fn(&Path) -> Result<Source>;

/// Lists a v2 file whose container has been parsed. `path` is where the file was opened
/// from, to find its shards; `open_shard` opens one.
pub(crate) fn list(
    container: &ContainerV2,
    path: Option<&Path>,
    limits: &Limits,
    open_shard: OpenShard<'_>,
) -> Result<Listing> {
    if container.is_data_shard() {
        // Blobs and no manifest: a file of no objects.
        return Ok(Listing::of_unique(
            FileVersion::ZTensorV2,
            Default::default(),
            Vec::new(),
        ));
    }
    let footer = *container.footer();
    let bytes = container.manifest_bytes()?;
    let hash = xxh3_64(&bytes);
    if hash != footer.manifest_hash {
        return Err(Error::checksum(format!(
            "manifest hash mismatch: the footer stores {:016x}, the manifest hashes to {hash:016x}",
            footer.manifest_hash
        ))
        .at(footer.manifest_offset));
    }
    // Objects are built as the manifest is decoded, from texts borrowed from its bytes: an
    // owned copy of the manifest first, then the listing from it, cost three times as much
    // (allocating, copying and freeing every name, dtype and digest text). The list is
    // reserved once the number of objects is known (bounded by what the bytes can hold).
    let shards: OnceCell<Vec<(ShardInfo, Source)>> = OnceCell::new();
    let mut objects: Vec<ObjectInfo> = Vec::new();
    // No blob may overlap another in the same file, nor the manifest.
    let mut collected = Collected::default();
    collected.add_manifest(0, footer.manifest_offset, footer.manifest_length);
    let declared = Cell::new(0usize);
    let refused: Cell<Option<Error>> = Cell::new(None);
    let done = AtomicBool::new(false);
    let rest = crate::pool::in_place_scope(|scope| {
        let rest = visit_manifest_v2(
            &bytes,
            footer.manifest_offset,
            limits.decode_limits(),
            |table, count| {
                let _ = shards.set(open_shards(table, path, limits, open_shard)?);
                declared.set(usize::try_from(count).unwrap_or(usize::MAX));
                Ok(())
            },
            |o| {
                if objects.capacity() == 0 {
                    // The room is what the manifest's bytes can hold, so a manifest that
                    // declares more objects than it has takes memory in proportion to its
                    // size (about 9x), not to its claim.
                    let n = declared.get().min(bytes.len() / MIN_OBJECT_ENTRY_V2);
                    // Not this object's fault: kept aside, so the visit's error does not
                    // name it.
                    if let Err(e) = reserve_objects(&mut objects, n, scope, &done)
                        .and_then(|()| collected.reserve(n))
                    {
                        let stop = Error::out_of_memory(e.message());
                        refused.set(Some(e));
                        return Err(stop);
                    }
                }
                let shards = shards.get().map_or(&[][..], Vec::as_slice);
                let built = object(container, shards, o)?;
                collected.add(&built);
                objects.push(built);
                Ok(())
            },
        );
        done.store(true, Ordering::Relaxed);
        rest
    })
    .map_err(|e| refused.take().unwrap_or(e))?;
    let shards = shards.into_inner().unwrap_or_default();
    // A shard with a manifest of its own: no blob may overlap it either.
    for (k, (s, _)) in shards.iter().enumerate() {
        if let Some((offset, length)) = s.manifest {
            let file = u32::try_from(k + 1).unwrap_or(u32::MAX);
            collected.add_manifest(file, offset, length);
        }
    }
    let mut listing = collected.finish_in_files(
        FileVersion::ZTensorV2,
        rest.attributes,
        objects,
        // Deterministic CBOR refuses a key given twice.
        |name| Error::invalid(format!("duplicate key {name:?} in objects")),
        |file| match file.checked_sub(1).and_then(|k| shards.get(k as usize)) {
            Some((s, _)) => format!(" in shard {:?}", s.name),
            None => String::new(),
        },
    )?;
    listing.shards = shards;
    listing.manifest_hash = Some(footer.manifest_hash);
    Ok(listing)
}

/// Where a shard of the root file at `root` lives: `<dir>/<root stem>-<name>.zt`, the
/// positional convention the original resolves by default. The name has passed
/// `check_shard_name` (no separator, no `..`, no leading dot), so the result is a file
/// beside the root and nowhere else.
pub(crate) fn shard_path(root: &Path, name: &str) -> Result<PathBuf> {
    zt_manifest::check_shard_name(name)?;
    let stem = root
        .file_stem()
        .ok_or_else(|| Error::argument("the root file's path has no file name"))?;
    let mut file = stem.to_os_string();
    file.push("-");
    file.push(name);
    file.push(".zt");
    Ok(root.with_file_name(file))
}

/// Resolves and opens every shard of the table, as the original does at open: each must
/// exist, have the size the table gives, and be a valid v2 container (with its own manifest
/// hash checked when it has a manifest). Whole-file digests are checked on verify.
fn open_shards(
    table: &[ShardV2],
    root: Option<&Path>,
    limits: &Limits,
    open_shard: OpenShard<'_>,
) -> Result<Vec<(ShardInfo, Source)>> {
    let mut out = Vec::with_capacity(table.len());
    for s in table {
        out.push(open_one(s, root, limits, open_shard)?);
    }
    Ok(out)
}

fn open_one(
    s: &ShardV2,
    root: Option<&Path>,
    limits: &Limits,
    open_shard: OpenShard<'_>,
) -> Result<(ShardInfo, Source)> {
    let named = |e: Error| {
        Error::new(e.kind(), format!("shard {:?}: {}", s.name, e.message()))
            .at(e.offset().unwrap_or(s.at))
    };
    let digest = Digest::parse_v2(&s.digest).map_err(named)?;
    if s.size < zt_container::layout::MIN_FILE_LEN_V2 {
        return Err(named(Error::invalid(format!(
            "size {} is smaller than any v2 file",
            s.size
        ))));
    }
    let root = root.ok_or_else(|| {
        named(Error::unsupported(
            "a sharded v2 file opened from memory: its shards cannot be found without its path",
        ))
    })?;
    let path = shard_path(root, &s.name).map_err(named)?;
    let source = open_shard(&path).map_err(|e| e.in_file(&path))?;
    if source.len() != s.size {
        return Err(Error::invalid(format!(
            "shard {:?} is {} bytes, but the shard table says {}",
            s.name,
            source.len(),
            s.size
        ))
        .in_file(&path));
    }
    let c = ContainerV2::parse(source, limits.max_manifest_len).map_err(|e| e.in_file(&path))?;
    let manifest =
        (!c.is_data_shard()).then(|| (c.footer().manifest_offset, c.footer().manifest_length));
    if !c.is_data_shard() {
        let f = *c.footer();
        let bytes = c.manifest_bytes().map_err(|e| e.in_file(&path))?;
        if xxh3_64(&bytes) != f.manifest_hash {
            return Err(Error::checksum("shard manifest hash mismatch")
                .at(f.manifest_offset)
                .in_file(&path));
        }
    }
    let info = ShardInfo {
        name: s.name.clone(),
        path,
        size: s.size,
        digest,
        digest_text: s.digest.clone(),
        data_shard: c.is_data_shard(),
        manifest,
    };
    Ok((info, c.into_source()))
}

/// Validates one object and builds it.
fn object(
    container: &ContainerV2,
    shards: &[(ShardInfo, Source)],
    o: &mut ObjectV2Ref<'_>,
) -> Result<ObjectInfo> {
    let mut components = Components::default();
    for p in &o.parts {
        let c = part(container, shards, p).map_err(|e| e.in_component(p.name))?;
        components.0.push(c);
    }
    let format = {
        let layout: smallvec::SmallVec<[PartLayout<'_>; 4]> = o
            .parts
            .iter()
            .zip(components.iter())
            .map(|(p, c)| PartLayout {
                name: p.name,
                element: &c.element,
                decoded_len: c.decoded_len.unwrap_or(0),
            })
            .collect();
        check_layout_v2(o.layout, &o.shape, &layout).map_err(|e| e.at(o.at))?
    };
    // A type of ours v2 does not register (FP6, sub-byte integers), as our writers write it.
    if let (zt_formats::Format::Dense, [data]) = (&format, &mut components.0[..]) {
        let (count, len) = (element_count(&o.shape)?, data.decoded_len.unwrap_or(0));
        if let Some(known) = unregistered_element(&data.element, count, len) {
            data.element = known;
        }
    }
    components.0.sort_unstable_by(|a, b| a.role.cmp(&b.role));
    Ok(ObjectInfo::listed(
        o.name.to_owned(),
        std::mem::take(&mut o.shape),
        format,
        std::mem::take(&mut o.attributes),
        components,
    ))
}

/// Validates one part: its type, its blob in the file that holds it, its encoding's sizes
/// and its digest's spelling.
fn part(
    container: &ContainerV2,
    shards: &[(ShardInfo, Source)],
    p: &PartV2Ref<'_>,
) -> Result<ComponentInfo> {
    let element: ElementType = element_v2(p.dtype, p.logical_type).map_err(|e| e.at(p.at))?;
    let file = match p.shard {
        None => {
            container.check_blob(p.offset, p.length)?;
            0
        }
        Some(name) => {
            // Found in the table at decode; opened in table order, so the positions agree.
            let i = p
                .shard_position
                .ok_or_else(|| Error::invalid(format!("unknown shard {name:?}")).at(p.at))?;
            let (info, _) = shards
                .get(i)
                .ok_or_else(|| Error::invalid(format!("unknown shard {name:?}")).at(p.at))?;
            let data_end = info
                .size
                .saturating_sub(zt_container::layout::FOOTER_LEN_V2);
            check_blob_range_v2(p.offset, p.length, data_end).map_err(|e| {
                Error::new(e.kind(), format!("in shard {name:?}: {}", e.message())).at(p.offset)
            })?;
            u32::try_from(i + 1).map_err(|_| Error::limit("too many shards"))?
        }
    };
    // Only the registered encoding is decoded; any other id (even "zstd") stays unknown.
    let encoding = match p.encoding {
        None => Encoding::Raw,
        Some("zt.zstd-seekable/1") => Encoding::ZstdSeekable,
        Some(other) => Encoding::Unknown(other.to_owned()),
    };
    let decoded_len = match encoding {
        Encoding::Raw => p.length,
        _ => p.decoded_length.unwrap_or(0),
    };
    if encoding == Encoding::ZstdSeekable && decoded_len > p.length.saturating_mul(MAX_ZSTD_RATIO) {
        return Err(Error::invalid(format!(
            "declares {decoded_len} decoded bytes, but {} bytes of zstd can produce at most {}",
            p.length,
            p.length.saturating_mul(MAX_ZSTD_RATIO)
        ))
        .at(p.offset));
    }
    let (digest, foreign_digest) = match p.digest {
        None => (None, None),
        Some(text) => match Digest::parse_v2(text).map_err(|e| e.at(p.at))? {
            Some(d) => (Some(d), None),
            None => (None, Some(text.into())),
        },
    };
    Ok(ComponentInfo {
        role: intern_role(p.name),
        element,
        offset: p.offset,
        length: p.length,
        encoding,
        uncompressed_length: p.decoded_length,
        decoded_len: Some(decoded_len),
        digest,
        byte_order: ByteOrder::Little,
        file,
        digest_scope: DigestScope::Decoded,
        foreign_digest,
        arrangement: None,
    })
}
