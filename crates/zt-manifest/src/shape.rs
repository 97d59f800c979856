//! [`Shape`]: a tensor's dimensions, stored inline up to rank four so that listing a file of
//! many tensors costs no allocation per shape.

use std::fmt;
use std::ops::Deref;

use smallvec::SmallVec;

/// A tensor shape, row-major. Reads as a `&[u64]` (through `Deref`); up to four dimensions are
/// stored inline, so the common shapes cost no allocation.
///
/// ```
/// use zt_manifest::Shape;
/// let s = Shape::from(vec![2, 3]);
/// assert_eq!(&s[..], &[2, 3]);
/// assert_eq!(s.iter().product::<u64>(), 6);
/// assert_eq!(format!("{s:?}"), "[2, 3]");
/// ```
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Shape(SmallVec<[u64; 4]>);

impl Shape {
    /// A shape of rank 0 (a scalar).
    pub fn new() -> Self {
        Shape(SmallVec::new())
    }

    /// Appends a dimension.
    pub fn push(&mut self, dim: u64) {
        self.0.push(dim);
    }

    /// Removes every dimension, keeping the storage.
    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// The dimensions.
    pub fn as_slice(&self) -> &[u64] {
        &self.0
    }

    /// The dimensions as a vector.
    pub fn into_vec(self) -> Vec<u64> {
        self.0.into_vec()
    }
}

impl Deref for Shape {
    type Target = [u64];

    fn deref(&self) -> &[u64] {
        &self.0
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.iter()).finish()
    }
}

impl From<Vec<u64>> for Shape {
    fn from(dims: Vec<u64>) -> Self {
        Shape(SmallVec::from_vec(dims))
    }
}

impl From<&[u64]> for Shape {
    fn from(dims: &[u64]) -> Self {
        Shape(SmallVec::from_slice(dims))
    }
}

impl FromIterator<u64> for Shape {
    fn from_iter<I: IntoIterator<Item = u64>>(iter: I) -> Self {
        Shape(iter.into_iter().collect())
    }
}

impl PartialEq<[u64]> for Shape {
    fn eq(&self, other: &[u64]) -> bool {
        self.as_slice() == other
    }
}

impl<'a> IntoIterator for &'a Shape {
    type Item = &'a u64;
    type IntoIter = std::slice::Iter<'a, u64>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}
