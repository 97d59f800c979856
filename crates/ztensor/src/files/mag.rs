//! `.mag` files in the facade's object model: each tensor a dense object with one raw `data`
//! component at its absolute range; the metadata as file attributes.

use zt_container::{Result, Source};
use zt_formats::{Encoding, Format};
use zt_mag::{parse, ParseOptions};

use crate::listing::Listing;
use crate::model::{ByteOrder, ComponentInfo, Components, DigestScope, FileVersion, ObjectInfo};

/// Lists a `.mag` file of any layout.
pub(crate) fn list(source: &Source, verify_checksum: bool) -> Result<Listing> {
    let file = parse(source, ParseOptions { verify_checksum })?;
    let byte_order = if file.big_endian {
        ByteOrder::Big
    } else {
        ByteOrder::Little
    };
    let objects: Vec<ObjectInfo> = file
        .tensors
        .into_iter()
        .map(|t| ObjectInfo {
            components: Components::one(ComponentInfo {
                role: "data".into(),
                element: t.element,
                offset: t.offset,
                length: t.length,
                encoding: Encoding::Raw,
                uncompressed_length: None,
                decoded_len: Some(t.length),
                digest: None,
                byte_order,
                file: 0,
                digest_scope: DigestScope::Stored,
                foreign_digest: None,
            }),
            name: t.name,
            shape: t.shape.into(),
            format: Format::Dense,
            attributes: Default::default(),
            range_digests: Vec::new(),
            legacy_packing: None,
            defect: None,
        })
        .collect();
    // Duplicate names were refused while parsing.
    Ok(Listing::of_unique(
        FileVersion::Mag(file.layout),
        file.metadata,
        objects,
    ))
}
