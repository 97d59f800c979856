//! The v1 manifest (v1.1 and v1.2): types, decoding and deterministic encoding.

use std::borrow::Cow;
use std::collections::BTreeMap;

use zt_container::{Error, Result};

use crate::cbor::Reader;
use crate::encode::{self, Enc};
use crate::value::{Attributes, Value};
use crate::{DecodeLimits, Shape};

/// The version string our writer puts in every manifest.
pub const WRITE_VERSION: &str = "1.2.0";

/// The root of a v1 manifest.
///
/// Field values are kept as the file spells them (`dtype: "f32"`, `format: "dense"`): this layer
/// is the syntax; `zt-formats` gives them meaning, and an unknown spelling survives a round trip.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Manifest {
    /// The spec version, e.g. `"1.2.0"`.
    pub version: String,
    /// File-level attributes.
    pub attributes: Attributes,
    /// Objects by name, sorted bytewise.
    pub objects: BTreeMap<String, Object>,
}

/// One object: a shape, a format and named components.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Object {
    /// Logical dimensions, outermost first.
    pub shape: Vec<u64>,
    /// Layout: `dense`, `sparse_csr`, `sparse_coo`, `quantized_group`, or another name.
    pub format: String,
    /// Object attributes.
    pub attributes: Attributes,
    /// Components by role (`data`, `values`, `scales`, ...), sorted bytewise.
    pub components: Components,
}

/// An object's components by role, sorted bytewise: a map kept as a sorted vector with no
/// spare room, since an object has one to a few components (a `BTreeMap` allocates room for
/// eleven in its first node: about 1.7 KB an object, which a writer of a million tiny
/// tensors holds until the manifest is written).
///
/// ```
/// use zt_manifest::{Component, Components};
/// let mut c = Components::new();
/// c.insert("values".into(), Component { dtype: "f32".into(), ..Default::default() });
/// c.insert("indices".into(), Component { dtype: "u64".into(), ..Default::default() });
/// assert_eq!(c.keys().collect::<Vec<_>>(), ["indices", "values"]);
/// assert_eq!(c.get("values").map(|v| v.dtype.as_str()), Some("f32"));
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Components(Vec<(String, Component)>);

impl Components {
    /// No components.
    pub fn new() -> Self {
        Self(Vec::new())
    }

    /// Adds `component` as `role`, returning the one it replaces. Each insert moves the
    /// components after it: to build many, collect them ([`FromIterator`] sorts once).
    pub fn insert(&mut self, role: String, component: Component) -> Option<Component> {
        match self.0.binary_search_by(|(r, _)| r.as_str().cmp(&role)) {
            Ok(i) => self
                .0
                .get_mut(i)
                .map(|(_, old)| std::mem::replace(old, component)),
            Err(i) => {
                // Room for this one only while there are few (a vector's first growth
                // makes room for four); doubling beyond, so many inserts stay linear in
                // their copies.
                if self.0.len() < 8 {
                    self.0.reserve_exact(1);
                }
                self.0.insert(i, (role, component));
                None
            }
        }
    }

    /// The component of `role`.
    pub fn get(&self, role: &str) -> Option<&Component> {
        let i = self.position(role)?;
        self.0.get(i).map(|(_, c)| c)
    }

    /// The component of `role`, to change.
    pub fn get_mut(&mut self, role: &str) -> Option<&mut Component> {
        let i = self.position(role)?;
        self.0.get_mut(i).map(|(_, c)| c)
    }

    /// Takes out the component of `role`.
    pub fn remove(&mut self, role: &str) -> Option<Component> {
        let i = self.position(role)?;
        Some(self.0.remove(i).1)
    }

    /// Whether there is a component of `role`.
    pub fn contains_key(&self, role: &str) -> bool {
        self.position(role).is_some()
    }

    fn position(&self, role: &str) -> Option<usize> {
        self.0.binary_search_by(|(r, _)| r.as_str().cmp(role)).ok()
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Roles and components in role order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&String, &Component)> + Clone {
        self.0.iter().map(|(r, c)| (r, c))
    }

    /// Roles and components in role order, to change.
    pub fn iter_mut(&mut self) -> impl ExactSizeIterator<Item = (&String, &mut Component)> {
        self.0.iter_mut().map(|(r, c)| (&*r, c))
    }

    /// Roles in order.
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &String> + Clone {
        self.0.iter().map(|(r, _)| r)
    }

    /// Components in role order.
    pub fn values(&self) -> impl ExactSizeIterator<Item = &Component> + Clone {
        self.0.iter().map(|(_, c)| c)
    }

    /// The components in role order, owned.
    pub fn into_values(self) -> impl ExactSizeIterator<Item = Component> {
        self.0.into_iter().map(|(_, c)| c)
    }

    /// Takes out every component.
    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// Components in role order, to change.
    pub fn values_mut(&mut self) -> impl ExactSizeIterator<Item = &mut Component> {
        self.0.iter_mut().map(|(_, c)| c)
    }
}

impl FromIterator<(String, Component)> for Components {
    /// As a `BTreeMap` collects: sorted by role, the last of a repeated role kept. A sort, not
    /// one insert after another: a decoded object's components are the file's to choose.
    fn from_iter<I: IntoIterator<Item = (String, Component)>>(items: I) -> Self {
        let mut all: Vec<(String, Component)> = items.into_iter().collect();
        // Stable: of a repeated role, the later stays later.
        all.sort_by(|a, b| a.0.cmp(&b.0));
        // In place: `later` goes, after handing its component to the one kept before it.
        all.dedup_by(|later, kept| {
            let repeated = later.0 == kept.0;
            if repeated {
                std::mem::swap(later, kept);
            }
            repeated
        });
        // No spare room (the point of this type); free when the items came in an exact
        // allocation.
        all.shrink_to_fit();
        Self(all)
    }
}

impl<const N: usize> From<[(String, Component); N]> for Components {
    fn from(items: [(String, Component); N]) -> Self {
        items.into_iter().collect()
    }
}

impl IntoIterator for Components {
    type Item = (String, Component);
    type IntoIter = std::vec::IntoIter<(String, Component)>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a Components {
    type Item = (&'a String, &'a Component);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (String, Component)>,
        fn(&'a (String, Component)) -> (&'a String, &'a Component),
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(r, c)| (r, c))
    }
}

/// One component: where a blob is and how to read its bytes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Component {
    /// Storage type name (`f32`, `u8`, ...).
    pub dtype: String,
    /// Logical type name (`f8_e4m3fn`, `complex64`, ...), when present.
    pub logical_type: Option<String>,
    /// Absolute offset of the blob.
    pub offset: u64,
    /// Bytes on disk (compressed size for zstd).
    pub length: u64,
    /// Size before compression, when present.
    pub uncompressed_length: Option<u64>,
    /// `raw`, `zstd`, or another name; `None` means the default, `raw`.
    pub encoding: Option<String>,
    /// `algorithm:hex` digest of the stored bytes, when present.
    pub digest: Option<String>,
}

impl Component {
    /// The encoding name, with the default applied.
    pub fn encoding_name(&self) -> &str {
        self.encoding.as_deref().unwrap_or("raw")
    }
}

/// The parsed version string: major, minor, patch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SpecVersion {
    /// Major version; this library reads 1.
    pub major: u64,
    /// Minor version: 1 for v1.1, 2 for v1.2.
    pub minor: u64,
    /// Patch version.
    pub patch: u64,
}

impl SpecVersion {
    /// Parses `"1.2.0"` (missing parts count as 0: `"1.2"` is 1.2.0).
    pub fn parse(s: &str) -> Option<Self> {
        let mut parts = s.split('.');
        let mut next = |required: bool| -> Option<u64> {
            match parts.next() {
                Some(p) => p.parse().ok(),
                None if required => None,
                None => Some(0),
            }
        };
        let v = SpecVersion {
            major: next(true)?,
            minor: next(false)?,
            patch: next(false)?,
        };
        parts.next().is_none().then_some(v)
    }
}

impl std::fmt::Display for SpecVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl Manifest {
    /// The parsed version. [`Manifest::decode`] has already checked it.
    pub fn spec_version(&self) -> Option<SpecVersion> {
        SpecVersion::parse(&self.version)
    }

    /// Decodes a v1 manifest. `base` is the manifest's absolute offset in the file, used in
    /// error positions.
    ///
    /// Unknown fields are skipped (within the depth limit); duplicate keys, trailing bytes, a
    /// missing `version` or `objects` and a major version other than 1 are errors.
    pub fn decode(bytes: &[u8], base: u64, limits: DecodeLimits) -> Result<Manifest> {
        let mut objects = BTreeMap::new();
        let head = decode_objects(
            bytes,
            base,
            limits,
            |_| {},
            |o, at, _| {
                let name = o.name.clone().into_owned();
                if objects.contains_key(&name) {
                    return Err(Error::invalid(format!("duplicate key {name:?} in objects")).at(at));
                }
                objects.insert(name, o.to_object());
                Ok(())
            },
        )?;
        Ok(Manifest {
            version: head.version,
            attributes: head.attributes,
            objects,
        })
    }

    /// Encodes the manifest deterministically, in the layout real v1.2 writers use: keys in the
    /// order `version, attributes, objects` / `shape, format, attributes, components` /
    /// `dtype, type, offset, length, uncompressed_length, encoding, digest`, name-keyed maps
    /// sorted bytewise, optional fields omitted, numbers in their shortest form.
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Enc::new(Vec::with_capacity(64 + 160 * self.objects.len()));
        let has_attrs = !self.attributes.is_empty();
        encode::ok(e.map(2 + u64::from(has_attrs)));
        encode::text(&mut e, "version");
        encode::text(&mut e, &self.version);
        if has_attrs {
            encode::text(&mut e, "attributes");
            encode::value_map(&mut e, &self.attributes);
        }
        encode::text(&mut e, "objects");
        encode::ok(e.map(self.objects.len() as u64));
        for (name, o) in &self.objects {
            encode::text(&mut e, name);
            encode_object(&mut e, o);
        }
        e.into_writer()
    }
}

fn encode_object(e: &mut Enc, o: &Object) {
    let has_attrs = !o.attributes.is_empty();
    encode::ok(e.map(3 + u64::from(has_attrs)));
    encode::text(e, "shape");
    encode::ok(e.array(o.shape.len() as u64));
    for &d in &o.shape {
        encode::uint(e, d);
    }
    encode::text(e, "format");
    encode::text(e, &o.format);
    if has_attrs {
        encode::text(e, "attributes");
        encode::value_map(e, &o.attributes);
    }
    encode::text(e, "components");
    encode::ok(e.map(o.components.len() as u64));
    for (role, c) in &o.components {
        encode::text(e, role);
        let n = 3
            + u64::from(c.logical_type.is_some())
            + u64::from(c.uncompressed_length.is_some())
            + u64::from(c.encoding.is_some())
            + u64::from(c.digest.is_some());
        encode::ok(e.map(n));
        encode::text(e, "dtype");
        encode::text(e, &c.dtype);
        if let Some(t) = &c.logical_type {
            encode::text(e, "type");
            encode::text(e, t);
        }
        encode::text(e, "offset");
        encode::uint(e, c.offset);
        encode::text(e, "length");
        encode::uint(e, c.length);
        if let Some(u) = c.uncompressed_length {
            encode::text(e, "uncompressed_length");
            encode::uint(e, u);
        }
        if let Some(x) = &c.encoding {
            encode::text(e, "encoding");
            encode::text(e, x);
        }
        if let Some(d) = &c.digest {
            encode::text(e, "digest");
            encode::text(e, d);
        }
    }
}

pub(crate) fn attributes_map(r: &mut Reader<'_>, depth: usize, what: &str) -> Result<Attributes> {
    let mut m = Attributes::new();
    r.map_entries(what, |r, k, at| {
        r.charge_key(k.len(), at)?;
        m.insert(k.into_owned(), r.value(depth + 1)?);
        Ok(())
    })?;
    Ok(m)
}

pub(crate) fn shape(r: &mut Reader<'_>) -> Result<Shape> {
    let mut dims = Shape::new();
    let max_rank = r.limits().max_rank;
    r.array_items("shape", |r| {
        if dims.len() >= max_rank {
            return Err(Error::rank_over_cap(None, max_rank).at(r.offset()));
        }
        dims.push(r.uint("a dimension")?);
        Ok(())
    })?;
    Ok(dims)
}

/// Decodes one object into `o`, reusing its buffers: no allocation per object once the
/// component list has grown to the largest count, and nothing large is moved.
fn object<'b>(r: &mut Reader<'b>, o: &mut ObjectRef<'b>) -> Result<()> {
    let start = r.offset();
    let (mut has_shape, mut has_format, mut has_components) = (false, false, false);
    o.shape.clear();
    o.attributes.clear();
    o.components.clear();
    r.map_entries("an object", |r, key, _| {
        match &*key {
            "shape" => {
                o.shape = shape(r)?;
                has_shape = true;
            }
            "format" => {
                o.format = r.text("format")?;
                has_format = true;
            }
            "attributes" => o.attributes = attributes_map(r, 3, "object attributes")?,
            "components" => {
                has_components = true;
                let components = &mut o.components;
                r.map_entries("components", |r, role, at| {
                    if role.is_empty() {
                        return Err(Error::invalid("component role is empty").at(at));
                    }
                    let c = component(r, role.clone()).map_err(|e| e.in_component(&role))?;
                    components.push(c);
                    Ok(())
                })?;
            }
            _ => r.skip(3)?,
        }
        Ok(())
    })?;
    let missing = |f: &str| Err(Error::invalid(format!("object has no {f:?}")).at(start));
    match (has_shape, has_format, has_components) {
        (false, _, _) => missing("shape"),
        (_, false, _) => missing("format"),
        (_, _, false) => missing("components"),
        _ => Ok(()),
    }
}

fn component<'b>(r: &mut Reader<'b>, role: Cow<'b, str>) -> Result<ComponentRef<'b>> {
    let start = r.offset();
    let (mut dtype, mut logical_type, mut offset, mut length) = (None, None, None, None);
    let (mut uncompressed_length, mut encoding, mut digest) = (None, None, None);
    r.map_entries("a component", |r, key, _| {
        match &*key {
            "dtype" => dtype = Some(r.text("dtype")?),
            "type" => logical_type = Some(r.text("type")?),
            "offset" => offset = Some(r.uint("offset")?),
            "length" => length = Some(r.uint("length")?),
            "uncompressed_length" => uncompressed_length = Some(r.uint("uncompressed_length")?),
            "encoding" => encoding = Some(r.text("encoding")?),
            "digest" => digest = Some(r.text("digest")?),
            _ => r.skip(5)?,
        }
        Ok(())
    })?;
    let missing = |f: &str| Error::invalid(format!("component has no {f:?}")).at(start);
    Ok(ComponentRef {
        dtype: dtype.ok_or_else(|| missing("dtype"))?,
        offset: offset.ok_or_else(|| missing("offset"))?,
        length: length.ok_or_else(|| missing("length"))?,
        logical_type,
        uncompressed_length,
        encoding,
        digest,
        role,
    })
}

/// One object as decoded, borrowing its text from the manifest bytes: what a reader builds its
/// own model from without allocating a string per field.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ObjectRef<'b> {
    /// Name.
    pub name: Cow<'b, str>,
    /// Shape (up to four dimensions inline).
    pub shape: Shape,
    /// Format name.
    pub format: Cow<'b, str>,
    /// Attributes.
    pub attributes: Attributes,
    /// Components in file order.
    pub components: Vec<ComponentRef<'b>>,
}

/// One component as decoded, borrowing its text from the manifest bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct ComponentRef<'b> {
    /// Role.
    pub role: Cow<'b, str>,
    /// Storage type name.
    pub dtype: Cow<'b, str>,
    /// Logical type name.
    pub logical_type: Option<Cow<'b, str>>,
    /// Absolute offset.
    pub offset: u64,
    /// Stored length.
    pub length: u64,
    /// Declared uncompressed length.
    pub uncompressed_length: Option<u64>,
    /// Encoding name.
    pub encoding: Option<Cow<'b, str>>,
    /// Digest text.
    pub digest: Option<Cow<'b, str>>,
}

impl ObjectRef<'_> {
    /// The owned [`Object`].
    pub fn to_object(&self) -> Object {
        let owned = |t: &Option<Cow<'_, str>>| t.as_deref().map(str::to_owned);
        Object {
            shape: self.shape.to_vec(),
            format: self.format.clone().into_owned(),
            attributes: self.attributes.clone(),
            components: self
                .components
                .iter()
                .map(|c| {
                    (
                        c.role.clone().into_owned(),
                        Component {
                            dtype: c.dtype.clone().into_owned(),
                            logical_type: owned(&c.logical_type),
                            offset: c.offset,
                            length: c.length,
                            uncompressed_length: c.uncompressed_length,
                            encoding: owned(&c.encoding),
                            digest: owned(&c.digest),
                        },
                    )
                })
                .collect(),
        }
    }
}

/// The root of a manifest without its objects (see [`decode_objects`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ManifestHead {
    /// Version string (checked: major version 1).
    pub version: String,
    /// File attributes.
    pub attributes: Attributes,
}

/// No object of a v1 manifest takes fewer bytes: a one-byte name, and a map with the required
/// keys (`shape`, `format`, `components`) and their values.
const MIN_OBJECT_BYTES: usize = 16;

/// Decodes a v1 manifest, handing each object to `on_object` as it is decoded (with the
/// absolute offset of its name, and the version if the root gave it before the objects, as
/// every real writer does) instead of building a map: the fast path for readers with a
/// model of their own. Object names are not checked for duplicates here; the caller does that
/// (for instance after sorting). Every other rule of [`Manifest::decode`] applies.
///
/// `on_count` is called once, before the first object, with how many objects the manifest
/// declares, bounded by what its remaining bytes can hold (each object takes more than 16):
/// a size to reserve, never a promise.
pub fn decode_objects<'b>(
    bytes: &'b [u8],
    base: u64,
    limits: DecodeLimits,
    on_count: impl FnOnce(usize),
    mut on_object: impl FnMut(&ObjectRef<'b>, u64, Option<SpecVersion>) -> Result<()>,
) -> Result<ManifestHead> {
    let mut on_count = Some(on_count);
    let mut r = Reader::new(bytes, base, limits);
    let mut version = None;
    let mut parsed_version = None;
    let mut attributes = Attributes::new();
    let mut seen_objects = false;
    let root_at = r.offset();
    r.map_entries("the manifest root", |r, key, at| {
        match &*key {
            "version" => {
                let v = r.text("version")?.into_owned();
                match SpecVersion::parse(&v) {
                    Some(sv) if sv.major == 1 => parsed_version = Some(sv),
                    Some(sv) => {
                        return Err(Error::unsupported(format!(
                            "manifest version {v:?} has major version {}; this reader reads 1.x",
                            sv.major
                        ))
                        .at(at))
                    }
                    None => {
                        return Err(Error::invalid(format!(
                            "version {v:?} is not of the form MAJOR.MINOR.PATCH"
                        ))
                        .at(at))
                    }
                }
                version = Some(v);
            }
            "attributes" => attributes = attributes_map(r, 1, "file attributes")?,
            "objects" => {
                seen_objects = true;
                let mut o = ObjectRef::default();
                let left = bytes
                    .len()
                    .saturating_sub(r.offset().saturating_sub(base) as usize);
                let declared = |n: Option<u64>| {
                    if let Some(report) = on_count.take() {
                        let most = (left / MIN_OBJECT_BYTES) as u64;
                        report(n.unwrap_or(0).min(most) as usize);
                    }
                };
                r.map_entries_unchecked_sized("objects", declared, |r, name, at| {
                    if name.is_empty() {
                        return Err(Error::invalid("object name is empty").at(at));
                    }
                    object(r, &mut o).map_err(|e| e.in_object(&name))?;
                    o.name = name;
                    on_object(&o, at, parsed_version)
                })?;
            }
            _ => r.skip(1)?,
        }
        Ok(())
    })?;
    r.expect_end("manifest root")?;
    let version =
        version.ok_or_else(|| Error::invalid("manifest has no \"version\"").at(root_at))?;
    if !seen_objects {
        return Err(Error::invalid("manifest has no \"objects\"").at(root_at));
    }
    Ok(ManifestHead {
        version,
        attributes,
    })
}

/// Decodes a standalone attribute value (for callers holding raw CBOR).
pub fn decode_value(bytes: &[u8], limits: DecodeLimits) -> Result<Value> {
    decode_value_at(bytes, 0, limits)
}

/// As [`decode_value`], for bytes that start at absolute offset `base` in a file (used in error
/// positions): a whole manifest that is read as a value tree (v1.0).
pub fn decode_value_at(bytes: &[u8], base: u64, limits: DecodeLimits) -> Result<Value> {
    let mut r = Reader::new(bytes, base, limits);
    let v = r.value(0)?;
    r.expect_end("value")?;
    Ok(v)
}

/// Encodes one attribute value.
pub fn encode_value(v: &Value) -> Vec<u8> {
    let mut e = Enc::new(Vec::new());
    encode::value(&mut e, v);
    e.into_writer()
}
