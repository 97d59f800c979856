//! TensorFlow Lite's sparse tensors ([`Encoding::SparseLevels`](crate::Encoding)): the
//! stored values of a tensor whose dimensions are each kept dense or compressed (CSR), in a
//! traversal order, optionally cut into blocks, and [`densify_into`], which puts every value
//! in its place of the dense row-major array.
//!
//! ```text
//!  level l (traversal_order[l] names its dimension: < rank an original one, >= rank a block's)
//!    Dense(n)          every index 0..n, the child's position = position * n + index
//!    Csr{segs, idx}    indices idx[segs[p]..segs[p + 1]] for parent position p, the child's
//!                      position their place in idx
//!  a leaf (after the last level) takes the next stored value
//! ```
//!
//! A blocked dimension's index is its block's index times the block's size plus the index
//! within the block (the block's size is the dense size of its level). Every position,
//! index and segment is checked as it is used: an index past its dimension, a segment past
//! the indices, more leaves than values or fewer are `InvalidFile` errors.

use zt_container::{Error, Result};

/// The most levels a sparse tensor may have (twice the rank cap: every dimension blocked).
pub const MAX_SPARSE_LEVELS: usize = 128;

/// One level of a [`SparseLevels`] table.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Level {
    /// Every index from 0 to the size.
    Dense(u64),
    /// Compressed: for parent position `p`, the indices `indices[segments[p]..segments[p+1]]`.
    Csr {
        /// One more than the parent level's positions, non-decreasing.
        segments: Vec<u32>,
        /// The indices present, segment after segment.
        indices: Vec<u32>,
    },
}

/// How a sparse tensor's stored values map onto its dense array.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SparseLevels {
    /// The dense array's dimensions.
    pub dims: Vec<u64>,
    /// Bytes per element.
    pub element_size: u64,
    /// The dimension each level walks: `0..rank` original ones, `rank..` blocks.
    pub traversal_order: Vec<u64>,
    /// For block `k`, the original dimension it cuts.
    pub block_map: Vec<u64>,
    /// One per entry of `traversal_order`.
    pub levels: Vec<Level>,
}

impl SparseLevels {
    /// Checks the table's shape, as a reader does when it lists the tensor: as many levels
    /// as dimensions and blocks (at most [`MAX_SPARSE_LEVELS`]), a traversal order that walks
    /// the original dimensions first and every level once, blocks of existing dimensions
    /// whose levels are dense. What only the values can tell (indices, segments, the count)
    /// is checked by [`densify_into`].
    pub fn check(&self) -> Result<()> {
        self.block_sizes().map(drop)
    }

    /// The size of each block (its level's dense size), once the table's shape is checked.
    fn block_sizes(&self) -> Result<Vec<u64>> {
        let rank = self.dims.len();
        let levels = self.levels.len();
        if levels > MAX_SPARSE_LEVELS {
            return Err(Error::limit(format!(
                "sparse tensor of {levels} levels, over the cap of {MAX_SPARSE_LEVELS}"
            )));
        }
        if self.traversal_order.len() != levels || levels != rank + self.block_map.len() {
            return Err(bad(format!(
                "{levels} levels for {rank} dimensions, {} blocks and a traversal order of {}",
                self.block_map.len(),
                self.traversal_order.len()
            )));
        }
        // The first `rank` levels walk the original dimensions, the rest the blocks, each once.
        let mut seen = vec![false; levels];
        for (i, &d) in self.traversal_order.iter().enumerate() {
            let fits = (d as usize) < levels && ((i < rank) == ((d as usize) < rank));
            if !fits || std::mem::replace(&mut seen[d as usize], true) {
                return Err(bad(format!("traversal order {:?}", self.traversal_order)));
            }
        }
        if self.block_map.iter().any(|&d| d as usize >= rank) {
            return Err(bad(format!("block map {:?}", self.block_map)));
        }
        (0..self.block_map.len())
            .map(|k| match self.levels.get(rank + k) {
                Some(Level::Dense(n)) => Ok(*n),
                _ => Err(bad(format!("block {k}'s level is not dense"))),
            })
            .collect()
    }
}

fn bad(what: impl std::fmt::Display) -> Error {
    Error::invalid(format!("sparse tensor: {what}"))
}

/// Where the walk is: the table, the values, the output, and the index so far.
struct Walk<'a> {
    t: &'a SparseLevels,
    block_size: Vec<u64>,
    src: &'a [u8],
    dst: &'a mut [u8],
    size: usize,
    next_value: usize,
    indices: Vec<u64>,
    original: Vec<u64>,
}

impl Walk<'_> {
    fn level(&mut self, l: usize, parent: u64) -> Result<()> {
        let Some(level) = self.t.levels.get(l) else {
            return self.leaf();
        };
        match level {
            Level::Dense(n) => {
                for i in 0..*n {
                    self.indices[l] = i;
                    let child = parent
                        .checked_mul(*n)
                        .and_then(|p| p.checked_add(i))
                        .ok_or_else(|| bad("a position overflows"))?;
                    self.level(l + 1, child)?;
                }
            }
            Level::Csr { segments, indices } => {
                let at = |p: u64| {
                    usize::try_from(p)
                        .ok()
                        .and_then(|p| segments.get(p))
                        .map(|&s| s as usize)
                        .ok_or_else(|| bad(format!("level {l} has no segment for position {p}")))
                };
                let (from, to) = (at(parent)?, at(parent + 1)?);
                if from > to || to > indices.len() {
                    return Err(bad(format!(
                        "level {l}: segment {from}..{to} of {} indices",
                        indices.len()
                    )));
                }
                for (k, &index) in indices.iter().enumerate().take(to).skip(from) {
                    self.indices[l] = u64::from(index);
                    self.level(l + 1, k as u64)?;
                }
            }
        }
        Ok(())
    }

    fn leaf(&mut self) -> Result<()> {
        let rank = self.t.dims.len();
        for (i, &d) in self.t.traversal_order.iter().enumerate() {
            let index = self.indices[i];
            let d = d as usize;
            if d < rank {
                self.original[d] = index;
            } else {
                let block = d - rank;
                let cut = self.t.block_map[block] as usize;
                self.original[cut] = self.original[cut]
                    .checked_mul(self.block_size[block])
                    .and_then(|x| x.checked_add(index))
                    .ok_or_else(|| bad("an index overflows"))?;
            }
        }
        let mut flat = 0u64;
        for (d, (&index, &n)) in self.original.iter().zip(&self.t.dims).enumerate() {
            if index >= n {
                return Err(bad(format!("index {index} of dimension {d} (of {n})")));
            }
            flat = flat * n + index;
        }
        let value = self
            .src
            .get(self.next_value * self.size..(self.next_value + 1) * self.size)
            .ok_or_else(|| {
                bad(format!(
                    "more positions than its {} values",
                    self.next_value
                ))
            })?;
        let at = flat as usize * self.size;
        if let Some(place) = self.dst.get_mut(at..at + self.size) {
            place.copy_from_slice(value);
        }
        self.next_value += 1;
        Ok(())
    }
}

/// Puts each stored value of `src` (`table.element_size` bytes each) in its place of `dst`,
/// the dense row-major array of `table.dims`, and zeroes the rest.
///
/// ```
/// use zt_formats::{densify_into, Level, SparseLevels};
/// // A 2x3 matrix, rows dense, columns compressed: row 0 holds column 2, row 1 columns 0, 1.
/// let table = SparseLevels {
///     dims: vec![2, 3],
///     element_size: 1,
///     traversal_order: vec![0, 1],
///     block_map: vec![],
///     levels: vec![
///         Level::Dense(2),
///         Level::Csr { segments: vec![0, 1, 3], indices: vec![2, 0, 1] },
///     ],
/// };
/// let mut dense = [9u8; 6];
/// densify_into(&table, &[7, 8, 9], &mut dense).unwrap();
/// assert_eq!(dense, [0, 0, 7, 8, 9, 0]);
/// assert!(densify_into(&table, &[7, 8], &mut dense).is_err());
/// ```
pub fn densify_into(table: &SparseLevels, src: &[u8], dst: &mut [u8]) -> Result<()> {
    let block_size = table.block_sizes()?;
    let (rank, levels) = (table.dims.len(), table.levels.len());
    let size = usize::try_from(table.element_size)
        .ok()
        .filter(|&s| s > 0)
        .ok_or_else(|| bad("element size"))?;
    let want = table
        .dims
        .iter()
        .try_fold(table.element_size, |n, &d| n.checked_mul(d));
    if want != Some(dst.len() as u64) || src.len() % size != 0 {
        return Err(bad(format!(
            "{} bytes of values, {} of output, for dims {:?}",
            src.len(),
            dst.len(),
            table.dims
        )));
    }
    dst.fill(0);
    let values = src.len() / size;
    // No leaf lies below a dense level of size 0: nothing to place, and no loop to run over
    // the levels above it.
    if table.levels.contains(&Level::Dense(0)) {
        return match values {
            0 => Ok(()),
            _ => Err(bad(format!("a level of size 0 and {values} values"))),
        };
    }
    let mut walk = Walk {
        t: table,
        block_size,
        src,
        dst,
        size,
        next_value: 0,
        indices: vec![0; levels],
        original: vec![0; rank],
    };
    walk.level(0, 0)?;
    if walk.next_value != values {
        return Err(bad(format!(
            "{} positions for its {values} values",
            walk.next_value
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 2x4 array whose columns are cut into blocks of 2: row 0 holds column block 1 (values
    /// a, b), row 1 column block 0 (c, d).
    fn blocked() -> SparseLevels {
        SparseLevels {
            dims: vec![2, 4],
            element_size: 1,
            traversal_order: vec![0, 1, 2],
            block_map: vec![1],
            levels: vec![
                Level::Dense(2),
                Level::Csr {
                    segments: vec![0, 1, 2],
                    indices: vec![1, 0],
                },
                Level::Dense(2),
            ],
        }
    }

    #[test]
    fn blocks_place_their_values_inside_their_block() {
        let mut dense = [0xffu8; 8];
        densify_into(&blocked(), b"abcd", &mut dense).unwrap();
        assert_eq!(&dense, b"\0\0abcd\0\0");
    }

    #[test]
    fn a_traversal_in_another_order_transposes_the_walk() {
        // Columns first: the values are given column by column.
        let t = SparseLevels {
            dims: vec![2, 2],
            element_size: 1,
            traversal_order: vec![1, 0],
            block_map: vec![],
            levels: vec![Level::Dense(2), Level::Dense(2)],
        };
        let mut dense = [0u8; 4];
        densify_into(&t, &[1, 2, 3, 4], &mut dense).unwrap();
        assert_eq!(dense, [1, 3, 2, 4]);
    }

    #[test]
    fn every_inconsistency_is_an_error() {
        let mut dense = [0u8; 8];
        let err = |t: &SparseLevels, src: &[u8], dense: &mut [u8]| {
            densify_into(t, src, dense).unwrap_err().to_string()
        };
        // Too few and too many values.
        assert!(err(&blocked(), b"abc", &mut dense).contains("more positions"));
        assert!(err(&blocked(), b"abcde", &mut dense).contains("4 positions for its 5"));
        // An index past its dimension (block 2 of a dimension of two blocks).
        let mut t = blocked();
        t.levels[1] = Level::Csr {
            segments: vec![0, 1, 2],
            indices: vec![2, 0],
        };
        assert!(err(&t, b"abcd", &mut dense).contains("index 4 of dimension 1"));
        // A segment past the indices, and one running backwards.
        for segments in [vec![0, 1, 3], vec![0, 2, 1]] {
            t.levels[1] = Level::Csr {
                segments,
                indices: vec![1, 0],
            };
            assert!(err(&t, b"abcd", &mut dense).contains("segment"), "{t:?}");
        }
        // Segments that end before the parent's positions do.
        t.levels[1] = Level::Csr {
            segments: vec![0, 1],
            indices: vec![1, 0],
        };
        assert!(err(&t, b"ab", &mut dense).contains("no segment for position 2"));
        // A traversal order that names a dimension twice, or a block among the first.
        for order in [vec![0, 0, 2], vec![2, 1, 0], vec![0, 1, 3]] {
            let mut t = blocked();
            t.traversal_order = order;
            assert!(err(&t, b"abcd", &mut dense).contains("traversal order"));
            // A reader's check at open, before any value is read, says the same.
            assert!(t
                .check()
                .unwrap_err()
                .to_string()
                .contains("traversal order"));
        }
        // A block whose level is not dense, a block of a dimension that is not there.
        let mut t = blocked();
        t.levels.swap(1, 2);
        assert!(err(&t, b"abcd", &mut dense).contains("not dense"));
        let mut t = blocked();
        t.block_map = vec![2];
        assert!(err(&t, b"abcd", &mut dense).contains("block map"));
        // An output that is not the dims' size.
        assert!(err(&blocked(), b"abcd", &mut [0u8; 7]).contains("7 of output"));
    }

    #[test]
    fn a_level_of_size_zero_places_nothing_and_spins_not() {
        let t = SparseLevels {
            dims: vec![0, 3],
            element_size: 4,
            traversal_order: vec![0, 1],
            block_map: vec![],
            levels: vec![Level::Dense(u64::MAX), Level::Dense(0)],
        };
        densify_into(&t, &[], &mut []).unwrap();
        assert!(densify_into(&t, &[0; 4], &mut []).is_err());
    }
}
