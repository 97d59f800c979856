//! Memory hints for the large tables a reader builds.

use std::sync::atomic::{AtomicBool, Ordering};

/// The machine's physical memory in bytes, where the platform says (Linux, macOS: the
/// page count times the page size); `None` elsewhere.
///
/// ```
/// if let Some(bytes) = zt_container::internal::physical_memory() {
///     assert!(bytes > 0);
/// }
/// ```
pub fn physical_memory() -> Option<u64> {
    #[cfg(unix)]
    {
        // SAFETY: sysconf reads a system value and touches no memory of ours.
        let (pages, size) = unsafe {
            (
                libc::sysconf(libc::_SC_PHYS_PAGES),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        if pages > 0 && size > 0 {
            return (pages as u64).checked_mul(size as u64);
        }
    }
    None
}

/// The size of a memory page (4096 where the platform does not say).
#[cfg(target_os = "linux")]
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf reads a system value and touches no memory of ours.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size)
        .ok()
        .filter(|&s| s > 0)
        .unwrap_or(4096)
}

/// Asks the kernel to back `buffer`'s allocation with transparent huge pages.
///
/// Listing a file of 100,000 objects fills tens of MiB of fresh memory; with 4 KiB pages the
/// first write to each page is a page fault, and in profiles those faults were a fifth of the
/// time it takes to open such a file. With huge pages it is one fault per 2 MiB. Only a hint:
/// where transparent huge pages are off, or on other systems, nothing changes. Buffers under
/// 4 MiB are left alone.
pub fn prefer_huge_pages<T>(buffer: &mut Vec<T>) {
    #[cfg(target_os = "linux")]
    {
        const HUGE_PAGE: usize = 2 << 20;
        let start = buffer.as_ptr() as usize;
        let Some(bytes) = buffer.capacity().checked_mul(std::mem::size_of::<T>()) else {
            return;
        };
        if bytes < 2 * HUGE_PAGE {
            return;
        }
        // Only whole huge pages inside the allocation.
        let first = start.next_multiple_of(HUGE_PAGE);
        let end = (start + bytes) & !(HUGE_PAGE - 1);
        if end > first {
            // SAFETY: [first, end) lies inside `buffer`'s live allocation, which this call
            // borrows mutably. MADV_HUGEPAGE changes only how the kernel backs those pages,
            // never their contents or their validity; failure is harmless and ignored.
            unsafe {
                libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = buffer;
}

/// The unused capacity of a `Vec`, as an address range to fault in ahead of the writes that
/// will fill it ([`SpareCapacity::prefault`]).
///
/// Building the object table of a file of 100,000 objects writes tens of MiB of fresh memory,
/// and the first write to each page costs a fault and a zeroing; on a virtual machine that
/// hands freed memory back to its host, the host's own fault too. In profiles of such an open
/// that was a quarter of the time. Faulting the pages in on a second core, while the first
/// decodes into them, takes that cost off the open's path.
#[derive(Debug, Clone, Copy)]
pub struct SpareCapacity {
    start: usize,
    len: usize,
}

impl SpareCapacity {
    /// The capacity of `buffer` beyond its length.
    pub fn of<T>(buffer: &mut Vec<T>) -> Self {
        let spare = buffer.spare_capacity_mut();
        SpareCapacity {
            start: spare.as_ptr() as usize,
            len: std::mem::size_of_val(spare),
        }
    }

    /// Faults the range's pages in, front to back in 2 MiB steps, until done or until `stop`
    /// is set. Call it on another thread than the one filling the buffer, and keep the buffer
    /// alive and unmoved until it returns (the caller's `join` does that). Linux 5.14 and
    /// later; elsewhere, or where the kernel refuses, it does nothing.
    pub fn prefault(&self, stop: &AtomicBool) {
        #[cfg(target_os = "linux")]
        {
            const STEP: usize = 2 << 20;
            const PAGE: usize = 4096;
            // Whole pages inside the range only: the partial page at the front is shared
            // with bytes already in use.
            let first = self.start.next_multiple_of(PAGE);
            let end = self.start.saturating_add(self.len) & !(PAGE - 1);
            let mut at = first;
            while at < end && !stop.load(Ordering::Relaxed) {
                let step = STEP.min(end - at);
                // SAFETY: [at, at + step) lies inside the spare capacity of a live `Vec`
                // that the caller keeps alive and unmoved until this returns (documented
                // above). MADV_POPULATE_WRITE maps pages writable without changing any byte
                // the program can observe: pages already written keep their contents, new
                // ones read as zero, and this memory holds no initialized values yet. A
                // refusal (old kernel) only ends the hint.
                let rc = unsafe {
                    libc::madvise(at as *mut libc::c_void, step, libc::MADV_POPULATE_WRITE)
                };
                if rc != 0 {
                    return;
                }
                at += step;
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = stop;
    }
}

/// A vector of `n` copies of `fill`, allocated fallibly: an allocator that cannot give the
/// memory is an [`crate::ErrorKind::OutOfMemory`] error, never an abort. Large ones prefer
/// huge pages ([`prefer_huge_pages`]).
pub fn try_filled_vec<T: Clone>(n: usize, fill: T) -> crate::Result<Vec<T>> {
    let mut v: Vec<T> = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        crate::Error::out_of_memory(format!(
            "cannot allocate {} bytes",
            n.saturating_mul(std::mem::size_of::<T>())
        ))
    })?;
    prefer_huge_pages(&mut v);
    v.resize(n, fill);
    Ok(v)
}

/// An empty vector with room for `n` items, allocated fallibly: for lists whose length a file
/// declares (checked against the bytes left first, so `n` is at most a fraction of the file).
///
/// ```
/// let v: Vec<u64> = zt_container::internal::try_with_capacity(1000).unwrap();
/// assert!(v.capacity() >= 1000 && v.is_empty());
/// assert!(zt_container::internal::try_with_capacity::<u64>(usize::MAX / 4).is_err());
/// ```
pub fn try_with_capacity<T>(n: usize) -> crate::Result<Vec<T>> {
    let mut v: Vec<T> = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        crate::Error::out_of_memory(format!(
            "cannot allocate {} bytes for a list of {n}",
            n.saturating_mul(std::mem::size_of::<T>())
        ))
    })?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hinted_buffers_keep_their_contents() {
        let mut v: Vec<u64> = (0..1_000_000).collect();
        prefer_huge_pages(&mut v);
        v.push(7);
        assert_eq!(
            v.iter().take(1_000_000).sum::<u64>(),
            999_999 * 1_000_000 / 2
        );
        let mut empty: Vec<u8> = Vec::new();
        prefer_huge_pages(&mut empty);
        assert!(empty.is_empty());
    }

    #[test]
    fn prefaulting_spare_capacity_keeps_what_is_written_before_and_during_it() {
        let mut v: Vec<u64> = Vec::with_capacity(4 << 20);
        v.extend(0..1000);
        let spare = SpareCapacity::of(&mut v);
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| spare.prefault(&stop));
            v.extend(1000..(3 << 20));
        });
        stop.store(true, Ordering::Relaxed);
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as u64));
        // A stopped prefault does nothing.
        SpareCapacity::of(&mut v).prefault(&stop);
    }
}
