//! `--slice SPEC`: numpy-like box syntax for `zt cat`, parsed by clap before the file is open
//! and resolved against the object's shape after.
//!
//! - [`SliceSpec::parse`]: the text, `0:8,:` or `2:4,1:3` or `-1` (one item per leading
//!   dimension, comma-separated; missing trailing items mean whole dimensions).
//! - [`SliceSpec::resolve`]: one half-open range per dimension of a given shape, or a message
//!   saying which item does not fit which dimension.
//!
//! Steps are not accepted: a box is what the library reads without reading the rest.

/// One item of a slice: `a:b` with either end optional, or a single index `i` (kept as a
/// dimension of size 1, so the output's rank is the object's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Item {
    Range(Option<i64>, Option<i64>),
    Index(i64),
}

/// A parsed `--slice` value, not yet checked against a shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceSpec {
    items: Vec<Item>,
}

impl SliceSpec {
    /// Parses `SPEC` (clap's value parser): items separated by commas, each `a:b`, `a:`, `:b`,
    /// `:` or `i`; negative numbers count from the end of their dimension.
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
                [a, b] => Item::Range(number(a, item)?, number(b, item)?),
                _ => {
                    return Err(format!(
                        "slice item {item:?} has a step or too many colons: only a:b boxes \
                         are read"
                    ))
                }
            };
            items.push(parsed);
        }
        Ok(SliceSpec { items })
    }

    /// One range per dimension of `shape`. An item that falls outside its dimension, an
    /// empty-reversed range, or more items than dimensions is an error message (the caller's
    /// mistake); negative ends count from the end.
    pub fn resolve(&self, shape: &[u64]) -> Result<Vec<std::ops::Range<u64>>, String> {
        if self.items.len() > shape.len() {
            return Err(format!(
                "the slice has {} items but the object has {} dimensions (shape {shape:?})",
                self.items.len(),
                shape.len()
            ));
        }
        let mut ranges = Vec::with_capacity(shape.len());
        for (d, &n) in shape.iter().enumerate() {
            let Some(&item) = self.items.get(d) else {
                ranges.push(0..n);
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
            let range = match item {
                Item::Index(i) => {
                    let start = at(i).filter(|&s| s < n).ok_or_else(bad)?;
                    start..start + 1
                }
                Item::Range(a, b) => {
                    let start = a.map_or(Some(0), at).ok_or_else(bad)?;
                    let end = b.map_or(Some(n), at).ok_or_else(bad)?;
                    if start > end {
                        return Err(format!(
                            "slice item {} of dimension {d} ends before it starts",
                            show(item)
                        ));
                    }
                    start..end
                }
            };
            ranges.push(range);
        }
        Ok(ranges)
    }
}

/// An item as the user wrote it (for messages).
fn show(item: Item) -> String {
    let end = |e: Option<i64>| e.map_or(String::new(), |e| e.to_string());
    match item {
        Item::Index(i) => i.to_string(),
        Item::Range(a, b) => format!("{}:{}", end(a), end(b)),
    }
}

#[cfg(test)]
mod tests {
    use super::SliceSpec;

    fn ranges(spec: &str, shape: &[u64]) -> Result<Vec<std::ops::Range<u64>>, String> {
        SliceSpec::parse(spec)?.resolve(shape)
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
        assert!(SliceSpec::parse("0:4:2").unwrap_err().contains("step"));
        assert!(SliceSpec::parse("a:4")
            .unwrap_err()
            .contains("not an integer"));
        assert!(SliceSpec::parse("1,,2").unwrap_err().contains("empty item"));
        assert!(SliceSpec::parse("").unwrap_err().contains("empty slice"));
        assert!(SliceSpec::parse("99999999999999999999").is_err());
    }
}
