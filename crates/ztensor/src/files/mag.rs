//! `.mag` files in the facade's object model: each tensor a dense object with one raw `data`
//! component at its absolute range; the metadata as file attributes.

use zt_container::{Result, Source};
use zt_mag::{parse, ParseOptions};

use crate::listing::{Limits, Listing};
use crate::model::{ByteOrder, FileVersion, ObjectInfo};

/// Lists a `.mag` file of any layout.
pub(crate) fn list(source: &Source, verify_checksum: bool, limits: &Limits) -> Result<Listing> {
    let options = ParseOptions {
        verify_checksum,
        max_value_bytes: limits.decode_limits().max_value_bytes,
        max_listing_bytes: Some(limits.listing_budget(source.len())),
    };
    let file = parse(source, options)?;
    let byte_order = if file.big_endian {
        ByteOrder::Big
    } else {
        ByteOrder::Little
    };
    let objects: Vec<ObjectInfo> = file
        .tensors
        .into_iter()
        .map(|t| {
            let range = (t.offset, t.length);
            ObjectInfo::raw_dense(t.name, t.shape.into(), t.element, range, byte_order)
        })
        .collect();
    // Duplicate names were refused while parsing.
    Ok(Listing::of_unique(
        FileVersion::Mag(file.layout),
        file.metadata,
        objects,
    ))
}
