//! "Did you mean": the listed name nearest to one a caller asked for and the file lacks.
//!
//! Runs only on the error path of a lookup, over every name of a listing that a file controls,
//! so its cost is linear in the names and bounded per name whatever the names are:
//!
//! - [`nearest_name`] ranks the near misses people make with tensor names: the same name in
//!   another case; the name under a prefix one naming scheme has and another lacks
//!   (`model.layers.0.mlp.up.weight` against `layers.0.mlp.up.weight`), either way round; a
//!   typo of one or two characters.
//! - [`within`] is the typo test: a Levenshtein distance computed only in a band of width
//!   `2k + 1` around the diagonal, so a pair costs `O(len * k)` and never `O(len²)`.
//!   `strsim`'s distances fill the whole table, which a file of 100,000 names of 1 KiB each
//!   would make cost seconds on one missing name.

/// The longest name (in chars) we look for near misses of; a longer one gets no suggestion.
const LONGEST_WANTED: usize = 1024;

/// The name of `names` closest to `wanted`, if any is close enough to be worth suggesting
/// ("did you mean ...?"): the same name in another case, the name under or without a
/// prefix ending in `.`, `/` or `:`, or one with up to two typos (one for names of 4 to 7
/// characters, none for shorter ones). Ties go to the first in `names`' order. Lookups of
/// [`Reader`](crate::Reader) and [`ShardedSet`](crate::ShardedSet) put it in their
/// not-found errors.
///
/// ```
/// let names = ["model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"];
/// assert_eq!(ztensor::nearest_name("norm.weight", names), Some("model.norm.weight"));
/// assert_eq!(ztensor::nearest_name("lm_haed.weight", names), Some("lm_head.weight"));
/// assert_eq!(ztensor::nearest_name("bias", names), None);
/// ```
pub fn nearest_name<'a>(wanted: &str, names: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let wanted_chars: Vec<char> = wanted.chars().take(LONGEST_WANTED + 1).collect();
    if wanted_chars.len() > LONGEST_WANTED || wanted_chars.len() < 2 {
        return None;
    }
    // Typos allowed grow with the name: none would be noise on "w", two on "lm_head.weight".
    let typos = match wanted_chars.len() {
        0..=3 => 0,
        4..=7 => 1,
        _ => 2,
    };
    let mut row = vec![0; wanted_chars.len() + 1];
    let mut best: Option<(usize, &str)> = None;
    for name in names {
        let rank = if name.eq_ignore_ascii_case(wanted) {
            0
        } else if under_prefix(name, wanted) || under_prefix(wanted, name) {
            // Shorter prefixes first: "model.x" before "model.decoder.x".
            1 + name.len().abs_diff(wanted.len()).min(1 << 20)
        } else if typos > 0 {
            match within(&wanted_chars, name, typos, &mut row) {
                Some(d) => (1 << 21) + d,
                None => continue,
            }
        } else {
            continue;
        };
        if best.is_none_or(|(r, _)| rank < r) {
            best = Some((rank, name));
        }
    }
    best.map(|(_, name)| name)
}

/// Whether `longer` is `shorter` under a prefix ending in a separator (`.`, `/` or `:`).
fn under_prefix(longer: &str, shorter: &str) -> bool {
    !shorter.is_empty()
        && longer
            .strip_suffix(shorter)
            .is_some_and(|prefix| prefix.ends_with(['.', '/', ':']))
}

/// The edit distance between `wanted` and `candidate` if it is at most `k`, computed in the
/// band `|i - j| <= k` only. `row` is scratch space of `wanted.len() + 1` cells.
fn within(wanted: &[char], candidate: &str, k: usize, row: &mut [usize]) -> Option<usize> {
    let m = wanted.len();
    let far = k + 1;
    // Row 0: the distance from the empty candidate prefix to each prefix of `wanted`. Cells
    // past the band stay `far` until the band reaches them, which is what they mean there.
    for (j, cell) in row.iter_mut().enumerate() {
        *cell = j.min(far);
    }
    let mut n = 0;
    for c in candidate.chars() {
        n += 1;
        if n > m + k {
            return None;
        }
        let lo = n.saturating_sub(k);
        let hi = (n + k).min(m);
        // (n-1, lo-1) when lo > 0: inside the band of row n-1, as a diagonal must be.
        let mut diag = row.get(lo.saturating_sub(1)).copied().unwrap_or(far);
        let mut left = far; // (n, lo-1) lies outside this row's band
        let mut row_min = far;
        let mut first = lo;
        if lo == 0 {
            // Column 0: deleting all n characters.
            diag = row.first().copied().unwrap_or(far);
            left = n.min(far);
            if let Some(cell) = row.first_mut() {
                *cell = left;
            }
            row_min = left;
            first = 1;
        }
        for j in first..=hi {
            let (Some(&w), Some(&up)) = (wanted.get(j - 1), row.get(j)) else {
                return None;
            };
            let value = (diag + usize::from(w != c))
                .min(up + 1)
                .min(left + 1)
                .min(far);
            if let Some(cell) = row.get_mut(j) {
                *cell = value;
            }
            diag = up;
            left = value;
            row_min = row_min.min(value);
        }
        if row_min >= far {
            return None;
        }
    }
    // Row n reaches column m only when the lengths differ by at most k.
    if n + k < m {
        return None;
    }
    row.get(m).copied().filter(|&d| d < far)
}

/// `message`, with "; did you mean ...?" when `names` has a near miss for `wanted`.
pub(crate) fn with_suggestion<'a>(
    message: String,
    wanted: &str,
    names: impl IntoIterator<Item = &'a str>,
) -> String {
    match nearest_name(wanted, names) {
        Some(name) => format!("{message}; did you mean {name:?}?"),
        None => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn distance(a: &str, b: &str, k: usize) -> Option<usize> {
        let wanted: Vec<char> = a.chars().collect();
        let mut row = vec![0; wanted.len() + 1];
        within(&wanted, b, k, &mut row)
    }

    /// The textbook distance over the whole table, to check the band against.
    fn full(a: &str, b: &str) -> usize {
        let a: Vec<char> = a.chars().collect();
        let b: Vec<char> = b.chars().collect();
        let mut prev: Vec<usize> = (0..=a.len()).collect();
        for (i, cb) in b.iter().enumerate() {
            let mut cur = vec![i + 1; a.len() + 1];
            for (j, ca) in a.iter().enumerate() {
                cur[j + 1] = (prev[j] + usize::from(ca != cb))
                    .min(prev[j + 1] + 1)
                    .min(cur[j] + 1);
            }
            prev = cur;
        }
        prev[a.len()]
    }

    #[test]
    fn the_band_agrees_with_the_whole_table_up_to_k() {
        let words = [
            "", "a", "ab", "ba", "abc", "acb", "bca", "abcd", "abdc", "xbcd", "abcde", "aabcd",
            "weight", "wieght", "weights", "eight", "w8", "émoji", "emoji", "ëmojï",
        ];
        for a in words {
            for b in words {
                let d = full(a, b);
                for k in 1..=3 {
                    let expected = (d <= k).then_some(d);
                    assert_eq!(distance(a, b, k), expected, "{a:?} {b:?} k={k}");
                }
            }
        }
    }

    #[test]
    fn near_misses_rank_case_then_prefix_then_typos() {
        let names = [
            "lm_head.weight",
            "model.embed_tokens.weight",
            "model.decoder.layers.0.mlp.up.weight",
            "model.layers.0.mlp.up.weight",
            "model.layers.0.mlp.up_proj.weight",
        ];
        let near = |w| nearest_name(w, names);
        assert_eq!(near("LM_HEAD.weight"), Some("lm_head.weight"));
        assert_eq!(
            near("layers.0.mlp.up.weight"),
            Some("model.layers.0.mlp.up.weight")
        );
        assert_eq!(near("transformer.lm_head.weight"), Some("lm_head.weight"));
        assert_eq!(
            near("model.embed_token.weight"),
            Some("model.embed_tokens.weight")
        );
        assert_eq!(near("lm_haed.weight"), Some("lm_head.weight"));
        assert_eq!(near("model.norm.weight"), None);
        assert_eq!(near("x"), None);
        assert_eq!(
            nearest_name("f33", ["f16", "f32"]),
            None,
            "3 chars allow no typo"
        );
        assert_eq!(
            nearest_name("bias", ["bias2", "bia"]),
            Some("bias2"),
            "first of equals"
        );
    }

    #[test]
    fn a_long_name_costs_its_band_not_its_square() {
        let long = "x".repeat(LONGEST_WANTED);
        let names = vec![long.as_str(); 1000];
        let mut wanted = long.clone();
        wanted.replace_range(0..1, "y");
        assert_eq!(
            nearest_name(&wanted, names.iter().copied()),
            Some(long.as_str())
        );
        assert_eq!(
            nearest_name(&format!("{long}z"), [long.as_str()]),
            None,
            "too long"
        );
    }
}
