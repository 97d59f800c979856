//! `--slice SPEC`: numpy-like box syntax for `zt cat`, parsed by clap before the file is open
//! and resolved against the object's shape after.
//!
//! - [`SliceSpec::parse`]: the text, `0:8,:` or `2:4,1:3` or `-1` or `::2,:` or `::-1`
//!   (one item per leading dimension, comma-separated; missing trailing items mean whole
//!   dimensions).
//! - [`SliceSpec::resolve`]: a [`Picked`] box for a given shape (one half-open range and one
//!   step per dimension), or a message saying which item does not fit which dimension.
//! - [`Picked::keep_steps`]: the picked elements of the box the library read, in the order
//!   the steps give.
//!
//! The library reads boxes. A stepped item reads the box from its lowest picked index to its
//! highest and keeps the picks in memory, walking down the box for a negative step: for the
//! steps people take (every other row, a thumbnail of a weight, a dimension reversed) the box
//! is the bytes that hold them anyway.

/// One item of a slice: `a:b` or `a:b:s` with either end optional and a step other than 0, or
/// a single index `i` (kept as a dimension of size 1, so the output's rank is the object's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Item {
    Range(Option<i64>, Option<i64>, i64),
    Index(i64),
}

/// A slice resolved against a shape: per dimension, the box the library reads and the step
/// kept within it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Picked {
    /// Per dimension, the half-open range from the lowest picked index to just past the
    /// highest.
    pub ranges: Vec<std::ops::Range<u64>>,
    /// Per dimension, the distance between picked indices (1: every one), negative when the
    /// picks run from the end of the range down to its start.
    pub steps: Vec<i64>,
}

/// A parsed `--slice` value, not yet checked against a shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceSpec {
    items: Vec<Item>,
}

impl SliceSpec {
    /// Parses `SPEC` (clap's value parser): items separated by commas, each `a:b`, `a:`, `:b`,
    /// `:` or `i`, a range optionally with a step (`a:b:s`, `::s`, `::-1`); negative
    /// positions count from the end of their dimension.
    pub fn parse(spec: &str) -> Result<SliceSpec, String> {
        let spec = spec.trim();
        if spec.is_empty() {
            return Err("an empty slice; give one item per dimension, e.g. 0:8,:".into());
        }
        let number = |s: &str, item: &str| -> Result<Option<i64>, String> {
            let s = s.trim();
            if s.is_empty() {
                return Ok(None);
            }
            s.parse::<i64>()
                .map(Some)
                .map_err(|_| format!("{s:?} in slice item {item:?} is not an integer"))
        };
        let mut items = Vec::new();
        for item in spec.split(',') {
            let parts: Vec<&str> = item.split(':').collect();
            let parsed = match parts.as_slice() {
                [i] => match number(i, item)? {
                    Some(i) => Item::Index(i),
                    None => return Err(format!("an empty item in slice {spec:?}")),
                },
                [a, b] => Item::Range(number(a, item)?, number(b, item)?, 1),
                [a, b, s] => {
                    let step = match number(s, item)? {
                        None => 1,
                        Some(0) => return Err(format!("slice item {item:?} has a step of 0")),
                        // i64::MIN has no magnitude as an i64; no dimension is that long.
                        Some(s) => s.max(-i64::MAX),
                    };
                    Item::Range(number(a, item)?, number(b, item)?, step)
                }
                _ => return Err(format!("slice item {item:?} has too many colons")),
            };
            items.push(parsed);
        }
        Ok(SliceSpec { items })
    }

    /// One range and step per dimension of `shape`. An item that falls outside its dimension,
    /// a range that ends before it starts, or more items than dimensions is an error message
    /// (the caller's mistake); negative ends count from the end.
    pub fn resolve(&self, shape: &[u64]) -> Result<Picked, String> {
        if self.items.len() > shape.len() {
            return Err(format!(
                "the slice has {} items but the object has {} dimensions (shape {shape:?})",
                self.items.len(),
                shape.len()
            ));
        }
        let mut ranges = Vec::with_capacity(shape.len());
        let mut steps = Vec::with_capacity(shape.len());
        for (d, &n) in shape.iter().enumerate() {
            let Some(&item) = self.items.get(d) else {
                ranges.push(0..n);
                steps.push(1);
                continue;
            };
            // Negative positions count from the end, as in numpy; out of range is refused
            // rather than clamped, so a typo does not silently print less.
            let at = |i: i64| -> Option<u64> {
                if i < 0 {
                    n.checked_sub(i.unsigned_abs())
                } else {
                    Some(i as u64).filter(|&i| i <= n)
                }
            };
            let bad = || {
                format!(
                    "slice item {} does not fit dimension {d} of size {n}",
                    show(item)
                )
            };
            let (range, step) = match item {
                Item::Index(i) => {
                    let start = at(i).filter(|&s| s < n).ok_or_else(bad)?;
                    (start..start + 1, 1)
                }
                Item::Range(a, b, step) if step > 0 => {
                    let start = a.map_or(Some(0), at).ok_or_else(bad)?;
                    let end = b.map_or(Some(n), at).ok_or_else(bad)?;
                    if start > end {
                        return Err(format!(
                            "slice item {} of dimension {d} ends before it starts",
                            show(item)
                        ));
                    }
                    // The box ends just past the last picked index, so no byte after it is
                    // read. Both ends are at most `n`, so nothing here overflows.
                    let picked = (end - start).div_ceil(step.unsigned_abs());
                    let last_end = match picked {
                        0 => start,
                        _ => start + (picked - 1) * step.unsigned_abs() + 1,
                    };
                    (start..last_end, step)
                }
                Item::Range(a, b, step) => {
                    // Downwards, as numpy: from `a` (the last index when left out) while above
                    // `b` (through index 0 when left out). The start must be an index.
                    let first = match a {
                        None => n.checked_sub(1),
                        Some(i) => at(i).filter(|&i| i < n),
                    };
                    let Some(first) = first.or((n == 0 && a.is_none()).then_some(0)) else {
                        return Err(bad());
                    };
                    // `below`: one past the bottom of the run, so 0 when it runs through 0.
                    let below = match b {
                        None => 0,
                        Some(i) => at(i).ok_or_else(bad)? + 1,
                    };
                    let top = if n == 0 { 0 } else { first + 1 };
                    if below > top {
                        return Err(format!(
                            "slice item {} of dimension {d} ends before it starts",
                            show(item)
                        ));
                    }
                    // The box runs from the lowest pick to just past `first`.
                    let picked = (top - below).div_ceil(step.unsigned_abs());
                    let lowest = match picked {
                        0 => top,
                        _ => top - 1 - (picked - 1) * step.unsigned_abs(),
                    };
                    (lowest..top, step)
                }
            };
            ranges.push(range);
            steps.push(step);
        }
        Ok(Picked { ranges, steps })
    }
}

impl Picked {
    /// The output's shape: per dimension, how many indices are picked.
    pub fn shape(&self) -> Vec<u64> {
        let count =
            |(r, &s): (&std::ops::Range<u64>, &i64)| (r.end - r.start).div_ceil(s.unsigned_abs());
        self.ranges.iter().zip(&self.steps).map(count).collect()
    }

    /// Whether some dimension skips or reverses indices (the box read needs
    /// [`Picked::keep_steps`]).
    pub fn has_steps(&self) -> bool {
        self.steps.iter().any(|&s| s != 1)
    }

    /// From `boxed`, the row-major elements of the box [`Picked::ranges`] (each
    /// `element_size` bytes), the elements at the picked indices, row-major in the order of
    /// the steps (a negative step from the box's end down). `None` when
    /// `boxed` is not as long as the box (the library's answer disagrees with the shape).
    pub fn keep_steps(&self, boxed: &[u8], element_size: usize) -> Option<Vec<u8>> {
        let box_shape: Vec<usize> = self
            .ranges
            .iter()
            .map(|r| usize::try_from(r.end - r.start).ok())
            .collect::<Option<_>>()?;
        let expected = box_shape
            .iter()
            .try_fold(element_size, |n, &d| n.checked_mul(d))?;
        if boxed.len() != expected {
            return None;
        }
        let steps: Vec<isize> = self
            .steps
            .iter()
            .map(|&s| isize::try_from(s).ok())
            .collect::<Option<_>>()?;
        let out_len = self.shape().iter().try_fold(element_size, |n, &d| {
            n.checked_mul(usize::try_from(d).ok()?)
        })?;
        let mut out = Vec::with_capacity(out_len);
        // Bytes per step of each dimension in the box, innermost last. Saturating: a box with
        // a dimension of 0 passed the length check whatever its other dimensions are, and
        // then no stride is used.
        let mut strides = vec![element_size; box_shape.len()];
        for d in (0..box_shape.len().saturating_sub(1)).rev() {
            strides[d] = strides[d + 1].saturating_mul(box_shape[d + 1]);
        }
        keep_dimension(boxed, &box_shape, &steps, &strides, element_size, &mut out);
        (out.len() == out_len).then_some(out)
    }
}

/// Appends the picked elements of one box dimension (the first of `box_shape`) to `out`,
/// recursing into the inner ones; the innermost dimension of step 1 is one copy.
fn keep_dimension(
    boxed: &[u8],
    box_shape: &[usize],
    steps: &[isize],
    strides: &[usize],
    element_size: usize,
    out: &mut Vec<u8>,
) {
    let (Some(&n), Some(&step), Some(&stride)) =
        (box_shape.first(), steps.first(), strides.first())
    else {
        // Rank 0: the one element.
        out.extend_from_slice(boxed.get(..element_size).unwrap_or(&[]));
        return;
    };
    if box_shape.len() == 1 && step == 1 {
        out.extend_from_slice(boxed.get(..n * element_size).unwrap_or(&[]));
        return;
    }
    // A negative step starts at the box's last index: the box was cut so that it is a pick,
    // as is its first.
    let picks: Box<dyn Iterator<Item = usize>> = if step > 0 {
        Box::new((0..n).step_by(step.unsigned_abs()))
    } else {
        Box::new((0..n).rev().step_by(step.unsigned_abs()))
    };
    for i in picks {
        let Some(inner) = boxed.get(i * stride..) else {
            return;
        };
        if box_shape.len() == 1 {
            out.extend_from_slice(inner.get(..element_size).unwrap_or(&[]));
        } else {
            keep_dimension(
                inner,
                &box_shape[1..],
                &steps[1..],
                &strides[1..],
                element_size,
                out,
            );
        }
    }
}

/// An item as the user wrote it (for messages).
fn show(item: Item) -> String {
    let end = |e: Option<i64>| e.map_or(String::new(), |e| e.to_string());
    match item {
        Item::Index(i) => i.to_string(),
        Item::Range(a, b, 1) => format!("{}:{}", end(a), end(b)),
        Item::Range(a, b, s) => format!("{}:{}:{s}", end(a), end(b)),
    }
}

#[cfg(test)]
mod tests {
    use super::{show, Item, SliceSpec};

    fn ranges(spec: &str, shape: &[u64]) -> Result<Vec<std::ops::Range<u64>>, String> {
        Ok(SliceSpec::parse(spec)?.resolve(shape)?.ranges)
    }

    #[test]
    fn items_resolve_against_the_shape() {
        assert_eq!(ranges("0:8,:", &[10, 4]).unwrap(), vec![0..8, 0..4]);
        assert_eq!(ranges("2:4,1:3", &[10, 4]).unwrap(), vec![2..4, 1..3]);
        assert_eq!(ranges("3", &[10, 4]).unwrap(), vec![3..4, 0..4]);
        assert_eq!(ranges("-2:,:-1", &[10, 4]).unwrap(), vec![8..10, 0..3]);
        assert_eq!(ranges(" 1 : , 2", &[10, 4]).unwrap(), vec![1..10, 2..3]);
        assert_eq!(ranges("5:5", &[10]).unwrap(), vec![5..5]);
        assert_eq!(ranges("-1", &[10]).unwrap(), vec![9..10]);
    }

    #[test]
    fn mistakes_say_which_item_and_dimension() {
        assert!(ranges("0:11", &[10])
            .unwrap_err()
            .contains("dimension 0 of size 10"));
        assert!(ranges("10", &[10]).unwrap_err().contains("does not fit"));
        assert!(ranges("-11:", &[10]).unwrap_err().contains("does not fit"));
        assert!(ranges("4:2", &[10]).unwrap_err().contains("ends before"));
        assert!(ranges(":,:", &[10]).unwrap_err().contains("2 items"));
        assert!(SliceSpec::parse("0:4:0").unwrap_err().contains("step of 0"));
        assert!(ranges("2:5:-1", &[10]).unwrap_err().contains("ends before"));
        assert!(ranges("10::-1", &[10])
            .unwrap_err()
            .contains("does not fit"));
        assert!(SliceSpec::parse("0:4:2:1")
            .unwrap_err()
            .contains("too many colons"));
        assert!(ranges("0:11:2", &[10])
            .unwrap_err()
            .contains("0:11:2 does not fit dimension 0"));
        assert!(SliceSpec::parse("a:4")
            .unwrap_err()
            .contains("not an integer"));
        assert!(SliceSpec::parse("1,,2").unwrap_err().contains("empty item"));
        assert!(SliceSpec::parse("").unwrap_err().contains("empty slice"));
        assert!(SliceSpec::parse("99999999999999999999").is_err());
    }

    #[test]
    fn steps_box_from_first_to_last_pick() {
        let picked = |spec: &str, shape: &[u64]| SliceSpec::parse(spec).unwrap().resolve(shape);
        let p = picked("::2", &[10, 3]).unwrap();
        assert_eq!(
            (p.ranges.clone(), p.steps.clone()),
            (vec![0..9, 0..3], vec![2, 1])
        );
        assert_eq!(p.shape(), vec![5, 3]);
        // 1, 4, 7: the box stops after 7, so index 8 and 9 are not read.
        let p = picked("1:9:3", &[10]).unwrap();
        assert_eq!((p.ranges[0].clone(), p.shape()), (1..8, vec![3]));
        let p = picked("5:5:3,::", &[10, 2]).unwrap();
        assert_eq!(
            (p.ranges.clone(), p.shape()),
            (vec![5..5, 0..2], vec![0, 2])
        );
        // A step past the end picks the first index alone.
        let p = picked("2::100", &[10]).unwrap();
        assert_eq!((p.ranges[0].clone(), p.shape()), (2..3, vec![1]));
        assert!(!picked("0:4:1", &[10]).unwrap().has_steps());
    }

    /// numpy's picks for `a:b:s` over a dimension of `n` (its `slice.indices`, clamping
    /// included), counted out one index at a time.
    fn numpy_picks(n: i64, a: Option<i64>, b: Option<i64>, s: i64) -> Vec<u64> {
        let clamp = |i: i64, low: i64, high: i64| {
            let i = if i < 0 { i + n } else { i };
            i.clamp(low, high)
        };
        let mut picks = Vec::new();
        if s > 0 {
            let (mut i, stop) = (
                a.map_or(0, |a| clamp(a, 0, n)),
                b.map_or(n, |b| clamp(b, 0, n)),
            );
            while i < stop {
                picks.push(i as u64);
                i += s;
            }
        } else {
            let start = a.map_or(n - 1, |a| clamp(a, -1, n - 1));
            let (mut i, stop) = (start, b.map_or(-1, |b| clamp(b, -1, n - 1)));
            while i > stop {
                picks.push(i as u64);
                i += s;
            }
        }
        picks
    }

    /// Every item over small dimensions, steps of both signs: where `resolve` takes the item,
    /// its box and [`Picked::keep_steps`] give numpy's picks; where it refuses, some position
    /// is outside the dimension or the range runs against its step (numpy would clamp or
    /// give nothing).
    #[test]
    fn items_pick_what_numpy_picks() {
        let mut taken = 0;
        for n in 0..=5i64 {
            let ends: Vec<Option<i64>> = std::iter::once(None)
                .chain((-n - 1..=n).map(Some))
                .collect();
            for &a in &ends {
                for &b in &ends {
                    for s in (-4..=4).filter(|&s| s != 0) {
                        let item = Item::Range(a, b, s);
                        let spec = SliceSpec { items: vec![item] };
                        let want = numpy_picks(n, a, b, s);
                        let Ok(p) = spec.resolve(&[n as u64]) else {
                            continue;
                        };
                        taken += 1;
                        let r = p.ranges[0].clone();
                        let boxed: Vec<u8> = (r.start..r.end).map(|i| i as u8).collect();
                        let got = p.keep_steps(&boxed, 1).unwrap();
                        let got: Vec<u64> = got.into_iter().map(u64::from).collect();
                        assert_eq!(got, want, "{} over {n}", show(item));
                        assert_eq!(p.shape(), vec![want.len() as u64]);
                        // The box is no wider than the picks need.
                        if let (Some(lo), Some(hi)) = (want.iter().min(), want.iter().max()) {
                            assert_eq!(r, *lo..*hi + 1, "{} over {n}", show(item));
                        }
                    }
                }
            }
        }
        assert!(taken > 1000, "only {taken} items resolved");
        // What people write resolves.
        for spec in ["::-1", "::-2", "-1::-1", "3:0:-1", "::-1,::2", ":-1:-1"] {
            assert!(
                SliceSpec::parse(spec).unwrap().resolve(&[5, 4]).is_ok(),
                "{spec}"
            );
        }
    }

    /// `keep_steps` against the picks counted out one index at a time, on steps of both signs
    /// in every dimension of a small 3-d box, with 2-byte elements.
    #[test]
    fn keep_steps_picks_what_numpy_would() {
        let shape = [5u64, 4, 3];
        let items = [
            "1::1", "1::2", "::-1", "2:0:-2", "-1::-3", "2:0:-1", "::6", "::-6", "2:2:-1",
        ];
        let item_of = |text: &str| SliceSpec::parse(text).unwrap().items[0];
        for t0 in items {
            for t1 in items {
                for t2 in items {
                    let spec = format!("{t0},{t1},{t2}");
                    let Ok(p) = SliceSpec::parse(&spec).unwrap().resolve(&shape) else {
                        panic!("{spec} does not resolve over {shape:?}");
                    };
                    let dims: Vec<u64> = p.ranges.iter().map(|r| r.end - r.start).collect();
                    // Each element holds its flat index in the whole array, so a wrong pick
                    // shows as a wrong number.
                    let mut boxed = Vec::new();
                    for i in p.ranges[0].clone() {
                        for j in p.ranges[1].clone() {
                            for k in p.ranges[2].clone() {
                                let flat = (i * 12 + j * 3 + k) as u16;
                                boxed.extend_from_slice(&flat.to_le_bytes());
                            }
                        }
                    }
                    assert_eq!(boxed.len() as u64, dims.iter().product::<u64>() * 2);
                    let picks = |t: &str, n: i64| match item_of(t) {
                        Item::Range(a, b, s) => numpy_picks(n, a, b, s),
                        Item::Index(_) => unreachable!("ranges only"),
                    };
                    let mut expected = Vec::new();
                    for i in picks(t0, 5) {
                        for j in picks(t1, 4) {
                            for k in picks(t2, 3) {
                                let flat = (i * 12 + j * 3 + k) as u16;
                                expected.extend_from_slice(&flat.to_le_bytes());
                            }
                        }
                    }
                    assert_eq!(p.keep_steps(&boxed, 2).unwrap(), expected, "{spec}");
                }
            }
        }
        let p = SliceSpec::parse("::2").unwrap().resolve(&[4]).unwrap();
        assert_eq!(p.keep_steps(&[0; 5], 1), None, "a box of the wrong length");
        // Nothing picked from a box of no elements, however large its other dimensions.
        let huge = 1u64 << 62;
        let p = SliceSpec::parse("::2,::3")
            .unwrap()
            .resolve(&[0, huge, huge])
            .unwrap();
        assert_eq!(p.keep_steps(&[], 8), Some(Vec::new()));
    }
}
