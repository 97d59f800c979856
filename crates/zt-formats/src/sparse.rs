//! Sparse CSR and COO: the rules that need the index data, and conversion to dense.

use zt_container::{Error, Result};

use crate::element::Complex;
use crate::fp8::{F8E4M3Fn, F8E4M3Fnuz, F8E5M2Fnuz, F8E5M2};

/// Checks CSR index data for a `rows x cols` matrix with `nnz` values: `indptr` has rows + 1
/// entries, starts at 0, never decreases and ends at nnz; there are nnz indices, each < cols.
pub fn check_csr(rows: u64, cols: u64, indptr: &[u64], indices: &[u64], nnz: usize) -> Result<()> {
    let want = rows
        .checked_add(1)
        .ok_or_else(|| Error::invalid("row count overflows"))?;
    if indptr.len() as u64 != want {
        return Err(Error::invalid(format!(
            "indptr has {} entries, expected rows + 1 = {want}",
            indptr.len()
        ))
        .in_component("indptr"));
    }
    if indptr.first().copied().unwrap_or(0) != 0 {
        return Err(Error::invalid("indptr does not start at 0").in_component("indptr"));
    }
    if let Some(i) = indptr.windows(2).position(|w| w.first() > w.get(1)) {
        return Err(
            Error::invalid(format!("indptr decreases after row {i}")).in_component("indptr")
        );
    }
    let last = indptr.last().copied().unwrap_or(0);
    if last != nnz as u64 {
        return Err(
            Error::invalid(format!("indptr ends at {last}, but there are {nnz} values"))
                .in_component("indptr"),
        );
    }
    if indices.len() != nnz {
        return Err(
            Error::invalid(format!("{} indices for {nnz} values", indices.len()))
                .in_component("indices"),
        );
    }
    if let Some(i) = indices.iter().position(|&c| c >= cols) {
        let c = indices.get(i).copied().unwrap_or(0);
        return Err(Error::invalid(format!(
            "column index {c} at position {i} is not below the {cols} columns"
        ))
        .in_component("indices"));
    }
    Ok(())
}

/// zTensor v2's data rule beside [`check_csr`] (which must pass first): column indices
/// strictly increase within each row. v1 allows any order within a row, as scipy does.
///
/// ```
/// use zt_formats::{check_csr, check_csr_sorted};
/// let (indptr, indices) = ([0u64, 2, 3], [1u64, 0, 2]);
/// check_csr(2, 3, &indptr, &indices, 3).unwrap();
/// assert!(check_csr_sorted(&indptr, &indices).is_err());
/// assert!(check_csr_sorted(&indptr, &[0, 1, 2]).is_ok());
/// ```
pub fn check_csr_sorted(indptr: &[u64], indices: &[u64]) -> Result<()> {
    for (row, w) in indptr.windows(2).enumerate() {
        let (start, end) = (w.first().copied(), w.get(1).copied());
        let run = start
            .zip(end)
            .and_then(|(a, b)| indices.get(usize::try_from(a).ok()?..usize::try_from(b).ok()?))
            .ok_or_else(|| {
                Error::invalid("indptr points outside the indices").in_component("indptr")
            })?;
        if let Some(i) = run.windows(2).position(|p| p.first() >= p.get(1)) {
            let at = start.unwrap_or(0).saturating_add(i as u64 + 1);
            return Err(Error::invalid(format!(
                "layout data rule: column indices do not strictly increase within row {row} \
                 (index {at})"
            ))
            .in_component("indices"));
        }
    }
    Ok(())
}

/// Checks COO coordinates (structure of arrays: all first coordinates, then all second, ...)
/// for `nnz` values: `ndim x nnz` entries, each inside the shape.
pub fn check_coo(shape: &[u64], coords: &[u64], nnz: usize) -> Result<()> {
    let want = shape
        .len()
        .checked_mul(nnz)
        .ok_or_else(|| Error::invalid("coordinate count overflows"))?;
    if coords.len() != want {
        return Err(Error::invalid(format!(
            "coords has {} entries, expected ndim x nnz = {} x {nnz}",
            coords.len(),
            shape.len()
        ))
        .in_component("coords"));
    }
    for (d, (&dim, axis)) in shape.iter().zip(coords.chunks(nnz.max(1))).enumerate() {
        if let Some(i) = axis.iter().position(|&c| c >= dim) {
            let c = axis.get(i).copied().unwrap_or(0);
            return Err(Error::invalid(format!(
                "coordinate {c} of value {i} on axis {d} is not below {dim}"
            ))
            .in_component("coords"));
        }
    }
    Ok(())
}

/// Values that a dense conversion can add up (duplicates in COO, and in CSR rows, are summed,
/// as scipy does).
pub trait Accumulate: Copy {
    /// The additive identity.
    fn zero() -> Self;
    /// `self += other`.
    fn accumulate(&mut self, other: Self);
}

macro_rules! acc_num {
    ($($t:ty),*) => {$(
        impl Accumulate for $t {
            fn zero() -> Self { 0 as $t }
            fn accumulate(&mut self, other: Self) { *self += other; }
        }
    )*};
}
acc_num!(f32, f64);

macro_rules! acc_int {
    ($($t:ty),*) => {$(
        impl Accumulate for $t {
            fn zero() -> Self { 0 }
            // Wrapping, like NumPy's fixed-width integers: a hostile file cannot make us panic.
            fn accumulate(&mut self, other: Self) { *self = self.wrapping_add(other); }
        }
    )*};
}
acc_int!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! acc_via_f32 {
    ($($t:ty => $to:expr, $from:expr);* $(;)?) => {$(
        impl Accumulate for $t {
            fn zero() -> Self { $from(0.0) }
            fn accumulate(&mut self, other: Self) { *self = $from($to(*self) + $to(other)); }
        }
    )*};
}
acc_via_f32!(
    half::f16 => half::f16::to_f32, half::f16::from_f32;
    half::bf16 => half::bf16::to_f32, half::bf16::from_f32;
    F8E4M3Fn => F8E4M3Fn::to_f32, F8E4M3Fn::from_f32;
    F8E5M2 => F8E5M2::to_f32, F8E5M2::from_f32;
    F8E4M3Fnuz => F8E4M3Fnuz::to_f32, F8E4M3Fnuz::from_f32;
    F8E5M2Fnuz => F8E5M2Fnuz::to_f32, F8E5M2Fnuz::from_f32;
);

impl<T: Accumulate> Accumulate for Complex<T> {
    fn zero() -> Self {
        Complex {
            re: T::zero(),
            im: T::zero(),
        }
    }
    fn accumulate(&mut self, other: Self) {
        self.re.accumulate(other.re);
        self.im.accumulate(other.im);
    }
}

/// A zeroed dense buffer of `count` elements, refused when larger than `max_bytes`.
fn dense_buffer<V: Accumulate>(count: u64, max_bytes: u64) -> Result<Vec<V>> {
    let bytes = count
        .checked_mul(std::mem::size_of::<V>() as u64)
        .filter(|&b| b <= max_bytes)
        .ok_or_else(|| {
            Error::limit(format!(
                "a dense copy of {count} elements exceeds the cap of {max_bytes} bytes"
            ))
        })?;
    let n =
        usize::try_from(count).map_err(|_| Error::limit(format!("{bytes} bytes exceeds usize")))?;
    Ok(vec![V::zero(); n])
}

/// Expands checked CSR data to a row-major dense matrix, summing duplicates.
pub fn csr_to_dense<V: Accumulate>(
    rows: u64,
    cols: u64,
    indptr: &[u64],
    indices: &[u64],
    values: &[V],
    max_bytes: u64,
) -> Result<Vec<V>> {
    check_csr(rows, cols, indptr, indices, values.len())?;
    let count = rows
        .checked_mul(cols)
        .ok_or_else(|| Error::limit("dense size overflows"))?;
    let mut out = dense_buffer::<V>(count, max_bytes)?;
    for (r, w) in indptr.windows(2).enumerate() {
        let (a, b) = match w {
            [a, b] => (*a as usize, *b as usize),
            _ => continue,
        };
        for (c, v) in indices
            .get(a..b)
            .unwrap_or(&[])
            .iter()
            .zip(values.get(a..b).unwrap_or(&[]))
        {
            // r < rows and c < cols after check_csr, so the index is below count.
            if let Some(slot) = out.get_mut(r * cols as usize + *c as usize) {
                slot.accumulate(*v);
            }
        }
    }
    Ok(out)
}

/// Expands checked COO data to a row-major dense tensor, summing duplicates.
pub fn coo_to_dense<V: Accumulate>(
    shape: &[u64],
    coords: &[u64],
    values: &[V],
    max_bytes: u64,
) -> Result<Vec<V>> {
    check_coo(shape, coords, values.len())?;
    let count = crate::element_count(shape)?;
    let mut out = dense_buffer::<V>(count, max_bytes)?;
    let nnz = values.len();
    for (i, v) in values.iter().enumerate() {
        let mut flat = 0usize;
        for (d, &dim) in shape.iter().enumerate() {
            let c = coords.get(d * nnz + i).copied().unwrap_or(0);
            flat = flat * dim as usize + c as usize;
        }
        if let Some(slot) = out.get_mut(flat) {
            slot.accumulate(*v);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csr_rules() {
        assert!(check_csr(3, 4, &[0, 1, 1, 3], &[0, 2, 3], 3).is_ok());
        let msg = |r: Result<()>| r.unwrap_err().message().to_owned();
        assert!(msg(check_csr(3, 4, &[0, 1, 3], &[0, 2, 3], 3)).contains("expected rows + 1 = 4"));
        assert!(msg(check_csr(3, 4, &[1, 1, 1, 3], &[0, 2, 3], 3)).contains("does not start at 0"));
        assert!(
            msg(check_csr(3, 4, &[0, 2, 1, 3], &[0, 2, 3], 3)).contains("decreases after row 1")
        );
        assert!(msg(check_csr(3, 4, &[0, 1, 1, 2], &[0, 2, 3], 3))
            .contains("ends at 2, but there are 3 values"));
        assert!(msg(check_csr(3, 4, &[0, 1, 1, 3], &[0, 4, 3], 3))
            .contains("column index 4 at position 1"));
    }

    #[test]
    fn coo_sums_duplicates_like_scipy() {
        let d = coo_to_dense(
            &[2, 2],
            &[0, 0, 1, /* cols */ 1, 1, 0],
            &[1.0f32, 2.0, 5.0],
            1 << 20,
        )
        .unwrap();
        assert_eq!(d, [0.0, 3.0, 5.0, 0.0]);
        assert!(check_coo(&[2, 2], &[0, 2, 1, 1], 2)
            .unwrap_err()
            .message()
            .contains("coordinate 2 of value 1 on axis 0"));
        assert!(
            coo_to_dense(&[1 << 20, 1 << 20], &[], &[] as &[f32], 1 << 30)
                .unwrap_err()
                .kind()
                == zt_container::ErrorKind::LimitExceeded
        );
    }
}
