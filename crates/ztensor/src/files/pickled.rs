//! Pickles of NumPy arrays in the facade's object model: Paddle's `.pdparams` and `.pdopt`
//! (`paddle.save` pickles a state dict whose tensors it has turned into NumPy arrays), and
//! `pickle.dump` of a dict of arrays, as JAX and Haiku code and older tools keep weights.
//!
//! The file is run by torch's pickle machine ([`crate::files::torch`]), which executes
//! nothing: it knows `numpy.dtype`, `_reconstruct` and the BUILD that fills an array, protocol
//! 5's `_frombuffer`, and `tuple(...)`; every other global stays an opaque name. Its value is
//! walked as a checkpoint's is: dicts flatten to dotted names, arrays become objects, every
//! other leaf a file attribute.
//!
//! - An array's elements lie inside the pickle (a byte string's payload), so the object is a
//!   raw range of the file: read from the map with no copy. The machine runs over the map
//!   itself and does not copy long byte strings; an unmapped or remote file is read whole
//!   first, up to [`MAX_UNMAPPED_PICKLE`].
//! - The bytes must be exactly the shape times the dtype's size, as numpy's `__setstate__`
//!   requires; column-major arrays get an [`Arrangement`], big-endian ones their byte order.
//! - Arrays that hold no numbers we read (object, text, structured, datetime) are listed and
//!   skipped. An array whose bytes Python 3 pickled as latin-1 text (protocol 2:
//!   `_codecs.encode`) is a component of [`Encoding::Latin1Text`], decoded (a copy) when read.
//! - Paddle 2 pickled a tensor as `(name, array)`: the array is listed under its key, the
//!   name in its attribute `paddle.name`.
//! - A pickle that names torch storages but is not a checkpoint holds no tensor data: each
//!   such tensor is listed with a defect.
//! - What the listing takes is charged to [`Limits::listing_budget`] first: a memo fetch
//!   names an array again in two bytes.
//! - Only the first pickle is read, as `pickle.load` reads it; bytes after its `STOP` are not.

use zt_container::internal::MemoryBudget;
use zt_container::{Error, Result, Source};
use zt_formats::Encoding;
use zt_manifest::{Shape, Value};

use crate::files::npy::element_of_text;
use crate::files::torch::pickle::{
    Heap, Located, Machine, NdArrayRef, Obj, Pv, Stored, PICKLE_LIMITS,
};
use crate::files::torch::{unread_object, walk, MAX_PICKLE_LEN};
use crate::listing::{Limits, Listing};
use crate::model::{Arrangement, Defect, FileVersion, ObjectInfo};

/// The largest pickle read whole when it cannot be mapped (over HTTP, from an object store):
/// its arrays lie between its opcodes, so all of it is read to list them.
pub(crate) const MAX_UNMAPPED_PICKLE: u64 = MAX_PICKLE_LEN;

fn bad(what: impl std::fmt::Display) -> Error {
    Error::invalid(format!("invalid pickle of NumPy arrays: {what}"))
}

/// Lists a pickle of NumPy arrays.
pub(crate) fn list(source: &Source, limits: &Limits) -> Result<Listing> {
    let whole = crate::files::whole_file(source, MAX_UNMAPPED_PICKLE, "a pickle")?;
    let bytes: &[u8] = &whole;
    let protocol = match bytes {
        [0x80, p, ..] => *p,
        _ => 0,
    };
    let mut heap = Heap::default();
    let (root, end) = Machine::new(&mut heap, PICKLE_LIMITS, 0)
        .locating()
        .run(bytes)?;
    // The walk's caps are tied to the bytes the machine interpreted, not to the arrays' bytes
    // it left in place: a large file of arrays allows no more names than its opcodes make.
    let interpreted = (end as u64).saturating_sub(heap.spanned());
    let walked = walk(&heap, root, interpreted, true)?;
    // A memo fetch names an array again in two bytes: what the listing takes is charged
    // to the listing budget before it is made.
    let mut budget = MemoryBudget::new(
        limits.listing_budget(source.len()),
        "listing the pickle's arrays",
    );
    let names = walked.arrays.iter().map(|(n, ..)| n.as_str());
    let other = walked
        .tensor_names()
        .chain(walked.unread.iter().map(|(n, _)| n.as_str()));
    for name in names.chain(other) {
        budget.charge(Limits::listing_cost(name))?;
    }
    let mut objects = zt_container::internal::try_with_capacity(walked.arrays.len())?;
    for (name, array, paddle_name) in &walked.arrays {
        let mut o = array_object(&heap, name, array, limits).map_err(|e| e.in_object(name))?;
        if let Some(inner) = paddle_name {
            o.attributes
                .insert("paddle.name".into(), Value::Text(inner.clone()));
        }
        objects.push(o);
    }
    for name in walked.tensor_names() {
        objects.push(ObjectInfo::defective(
            name.to_owned(),
            Defect::unsupported(
                "a torch tensor whose storage this pickle does not hold (it is not a \
                 torch.save checkpoint)",
            ),
        ));
    }
    for (name, call) in &walked.unread {
        objects.push(unread_object(name.clone(), call));
    }
    let mut names: Vec<&str> = objects.iter().map(|o| o.name.as_str()).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(bad(format!("two arrays flatten to the name {:?}", w[0])));
    }
    Ok(Listing::of_unique(
        FileVersion::Pickle { protocol },
        walked.attributes,
        objects,
    ))
}

/// Where an array's data lies in the file: offset, stored length, and whether it is
/// latin-1 text (decoded when read) rather than the bytes themselves. `None` for data that
/// is not in the file as it is (made by a call, an object array's list).
fn data_of(heap: &Heap, data: Pv) -> Option<(u64, u64, bool)> {
    let Located { at, len, stored } = match heap.get(data)? {
        Obj::Latin1 { at, len, .. } => return Some((*at, *len, true)),
        Obj::Span { .. } | Obj::TextSpan { .. } | Obj::Bytes(_) | Obj::Str(_) => {
            heap.location(data)?
        }
        _ => return None,
    };
    // A byte string or a Python 2 string is its bytes; numpy reads a Python 3 string as
    // latin-1 text.
    Some((at, len, stored == Stored::Utf8))
}

/// One array as an object over the bytes its pickle holds.
fn array_object(heap: &Heap, name: &str, a: &NdArrayRef, limits: &Limits) -> Result<ObjectInfo> {
    let Some(Obj::NpDType(dtype)) = heap.get(a.dtype) else {
        return Err(bad(
            "an array that _reconstruct made was never given its state (BUILD)",
        ));
    };
    let shape: Vec<u64> = match heap.get(a.shape) {
        Some(Obj::Tuple(items)) => items
            .iter()
            .map(|d| match d {
                Pv::Int(n) if *n >= 0 => Ok(*n as u64),
                _ => Err(bad("an array's shape holds a negative or non-integer")),
            })
            .collect::<Result<_>>()?,
        _ => return Err(bad("an array's shape is not a tuple")),
    };
    if shape.len() > limits.decode.max_rank {
        return Err(Error::rank_over_cap(
            Some(shape.len() as u64),
            limits.decode.max_rank,
        ));
    }
    let dims: Shape = shape.iter().copied().collect();
    let code = dtype.code.as_str();
    let not_numbers = match code.chars().next() {
        _ if dtype.fields => Some("a structured array (its fields are not read)".to_owned()),
        Some('O') => Some("an object array (its elements are pickled Python objects)".into()),
        Some('U' | 'S' | 'a') => Some(format!("a text array (dtype {code:?})")),
        Some('V') => Some(format!("a void array (dtype {code:?})")),
        Some('M' | 'm') => Some(format!("a datetime array (dtype {code:?})")),
        _ => None,
    };
    if let Some(what) = not_numbers {
        let mut o = ObjectInfo::defective(name.to_owned(), Defect::not_numbers(what));
        o.shape = dims;
        return Ok(o);
    }
    let text = format!("{}{code}", dtype.order);
    let (element, byte_order) = element_of_text(&text).map_err(|_| {
        Error::unsupported(format!("NumPy dtype {code:?} has no zTensor equivalent"))
    })?;
    let count = shape
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d))
        .ok_or_else(|| bad(format!("shape {shape:?} overflows")))?;
    let nbytes = count
        .checked_mul(element.logical_size())
        .ok_or_else(|| bad(format!("shape {shape:?} overflows")))?;
    // An array with no elements reads nothing (Python 3 pickles its empty bytes under
    // protocol 2 as a call to `bytes()`).
    if nbytes == 0 {
        return Ok(ObjectInfo::raw_dense(
            name.to_owned(),
            dims,
            element,
            (0, 0),
            byte_order,
        ));
    }
    let Some((at, len, text)) = data_of(heap, a.data) else {
        let mut o = ObjectInfo::defective(
            name.to_owned(),
            Defect::unsupported(format!(
                "its data is {}, not bytes the file holds",
                heap.kind(a.data)
            )),
        );
        o.shape = dims;
        return Ok(o);
    };
    // Latin-1 text holds each byte in one or two: its decoded length is checked when read.
    let fits = if text {
        len >= nbytes && len / 2 <= nbytes
    } else {
        len == nbytes
    };
    if !fits {
        return Err(bad(format!(
            "the array's {len} bytes{} cannot be its shape {shape:?} of {code} ({nbytes} \
             bytes), which numpy requires",
            if text { " of latin-1 text" } else { "" }
        ))
        .at(at));
    }
    let mut o = ObjectInfo::raw_dense(name.to_owned(), dims, element, (at, len), byte_order);
    if text {
        if let Some(c) = o.components.0.first_mut() {
            c.encoding = Encoding::Latin1Text;
            c.decoded_len = Some(nbytes);
            c.uncompressed_length = Some(nbytes);
        }
    }
    if a.fortran && shape.len() > 1 {
        // Column-major: the first index varies fastest.
        let mut strides = Vec::with_capacity(shape.len());
        let mut step = 1u64;
        for &d in &shape {
            strides.push(step);
            step = step.saturating_mul(d);
        }
        if let Some(c) = o.components.0.first_mut() {
            c.arrangement = Some(Box::new(Arrangement {
                skip: 0,
                span: nbytes,
                dims: shape,
                strides,
                described: false,
            }));
        }
    }
    Ok(o)
}
