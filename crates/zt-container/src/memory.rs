//! Memory for the large tables a reader builds: hints, fallible allocation, a budget.

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

/// Bytes that what a reader builds from a file (a listing, attribute values) may still take
/// in memory: each piece is charged as it is made, and the first charge past the cap is a
/// [`crate::ErrorKind::LimitExceeded`] error.
///
/// A byte of a file can become tens of bytes in memory (a one-byte CBOR integer is a
/// 32-byte value; a seven-byte JSON entry a 150-byte record), so a reader that only checks
/// declared counts against the bytes left still lets a file of a few hundred MB ask for tens
/// of GB, which the system grants lazily and then kills the process for.
///
/// ```
/// use zt_container::internal::MemoryBudget;
///
/// let mut budget = MemoryBudget::new(100, "the attribute values");
/// budget.charge(60).unwrap();
/// let e = budget.charge(60).unwrap_err();
/// assert_eq!(e.kind(), zt_container::ErrorKind::LimitExceeded);
/// assert!(e.to_string().contains("the attribute values would take more than"));
/// assert_eq!(budget.used(), 120);
/// ```
#[derive(Debug, Clone)]
pub struct MemoryBudget {
    cap: u64,
    used: u64,
    what: &'static str,
    raise: &'static str,
}

impl MemoryBudget {
    /// A budget of `cap` bytes for `what` (named in the error: "the attribute values"), which
    /// the facade's `Limits::memory_budget` (`zt --max-memory`) raises.
    pub fn new(cap: u64, what: &'static str) -> Self {
        MemoryBudget::raised_by(
            cap,
            what,
            "Limits::memory_budget, zt --max-memory, ztio.open(max_memory=...)",
        )
    }

    /// [`MemoryBudget::new`] whose error names `raise` as what raises the cap.
    pub fn raised_by(cap: u64, what: &'static str, raise: &'static str) -> Self {
        MemoryBudget {
            cap,
            used: 0,
            what,
            raise,
        }
    }

    /// Counts `bytes` more; an error once the total passes the cap (the total keeps counting,
    /// so a caller that goes on gets the same error again).
    pub fn charge(&mut self, bytes: u64) -> crate::Result<()> {
        let what = self.what;
        self.charge_for(bytes, || what.to_owned())
    }

    /// [`MemoryBudget::charge`] whose error names `what` (made only for the error) instead
    /// of the budget's own words: "listing the model's 160000 tensors".
    pub fn charge_for(&mut self, bytes: u64, what: impl FnOnce() -> String) -> crate::Result<()> {
        self.used = self.used.saturating_add(bytes);
        if self.used > self.cap {
            return Err(crate::Error::limit(format!(
                "{} would take more than the memory budget of {} bytes (raise it: {})",
                what(),
                self.cap,
                self.raise
            )));
        }
        Ok(())
    }

    /// What has been charged so far.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// The cap.
    pub fn cap(&self) -> u64 {
        self.cap
    }
}

/// A vector of `n` copies of `fill`, allocated fallibly: an allocator that cannot give the
/// memory is an [`crate::ErrorKind::OutOfMemory`] error, never an abort. Large ones prefer
/// huge pages ([`prefer_huge_pages`]).
pub fn try_filled_vec<T: Clone>(n: usize, fill: T) -> crate::Result<Vec<T>> {
    let mut v: Vec<T> = Vec::new();
    v.try_reserve_exact(n).map_err(|_| out_of_memory::<T>(n))?;
    prefer_huge_pages(&mut v);
    v.resize(n, fill);
    Ok(v)
}

/// A vector of `n` zeros, allocated fallibly and zeroed by the allocator: for a buffer the
/// caller is about to overwrite (a decode, a positional read). [`try_filled_vec`] writes
/// every byte of the buffer once before the caller does; here fresh memory from the system
/// (every large allocation) comes zeroed by the kernel on its first touch, so the buffer's
/// bytes are written once, by the caller, and only reused memory is cleared. Large ones
/// prefer huge pages ([`prefer_huge_pages`]).
///
/// ```
/// let v: Vec<u32> = zt_container::internal::try_zeroed_vec(1 << 20).unwrap();
/// assert!(v.len() == 1 << 20 && v.iter().all(|&x| x == 0));
/// assert!(zt_container::internal::try_zeroed_vec::<u64>(usize::MAX / 4).is_err());
/// ```
pub fn try_zeroed_vec<T: bytemuck::Zeroable + Clone>(n: usize) -> crate::Result<Vec<T>> {
    let layout = std::alloc::Layout::array::<T>(n);
    let layout = match layout {
        // Zero bytes to allocate (a zero-sized type, or none of them): nothing to zero.
        Ok(layout) if layout.size() == 0 => return try_filled_vec(n, T::zeroed()),
        Ok(layout) => layout,
        Err(_) => return Err(out_of_memory::<T>(n)),
    };
    // SAFETY: `layout` has a non-zero size (checked above).
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<T>();
    if ptr.is_null() {
        return Err(out_of_memory::<T>(n));
    }
    // SAFETY: `ptr` comes from the global allocator with the layout of `[T; n]` (the
    // alignment of `T`, `n * size_of::<T>()` bytes), which is the allocation a `Vec` of
    // capacity `n` owns; its `n` elements are all-zero bytes, which `Zeroable` says is a
    // valid `T`.
    let mut v = unsafe { Vec::from_raw_parts(ptr, n, n) };
    prefer_huge_pages(&mut v);
    Ok(v)
}

fn out_of_memory<T>(n: usize) -> crate::Error {
    crate::Error::out_of_memory(format!(
        "cannot allocate {} bytes",
        n.saturating_mul(std::mem::size_of::<T>())
    ))
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

/// Reorders `items` so that position `k` holds what was at `order[k]`, moving each element
/// once; `order` is used up. Returns `false`, and changes nothing, when `order` is not a
/// permutation of `0..items.len()`.
///
/// A listing sorts its objects by name after decoding them in the file's order. Objects are
/// a few hundred bytes, and sorting them directly moves each many times; sorting their
/// positions and then swapping along the permutation's cycles moves each twice through a
/// temporary. Here each is copied once into its place, with one temporary per cycle: half
/// the memory traffic of the swaps, which was a sixth of opening a file of 100,000 objects.
///
/// A cycle visits the items in random order, and each step's source is known only from the
/// step before, so the copies wait on memory one after another; the item a few steps ahead
/// on the cycle is prefetched (on x86-64), which halved the time of the moves of 100,000
/// objects of 376 bytes (15 ms to 7, about what copying their 38 MB costs).
///
/// ```
/// let mut names = vec!["b", "c", "a"];
/// let mut order = vec![2, 0, 1];
/// assert!(zt_container::internal::permute_in_place(&mut names, &mut order));
/// assert_eq!(names, ["a", "b", "c"]);
/// let mut order = vec![0, 0, 1];
/// assert!(!zt_container::internal::permute_in_place(&mut names, &mut order));
/// assert_eq!(names, ["a", "b", "c"]);
/// ```
pub fn permute_in_place<T>(items: &mut [T], order: &mut [u32]) -> bool {
    let n = items.len();
    if order.len() != n || u32::try_from(n).is_err() {
        return false;
    }
    // Every position must come up exactly once: the moves below rely on it.
    let mut seen = vec![false; n];
    for &from in order.iter() {
        match seen.get_mut(from as usize) {
            Some(s) if !*s => *s = true,
            _ => return false,
        }
    }
    drop(seen);
    let base = items.as_mut_ptr();
    let order = order.as_mut_ptr();
    for start in 0..n {
        // SAFETY: `order` is a permutation of `0..n` (checked above), and an entry set
        // below points at its own position, so every index read from it (`ahead`'s
        // included) is in bounds of both slices, which this function borrows mutably. A
        // cycle starting at `start` is followed only while its entries still point elsewhere;
        // each visited entry is set to point at itself, so no element is moved twice. The element
        // at `start` is read into `held` (a bitwise copy; its slot is a hole until the cycle
        // closes), each following element is copied into the hole its predecessor left, and
        // the cycle ends when it leads back to `start`, where `held` fills the last hole.
        // Nothing in the loop can panic or return early, so no hole outlives it and no value
        // is dropped twice or lost.
        unsafe {
            let first = *order.add(start) as usize;
            if first == start {
                continue;
            }
            let held = std::ptr::read(base.add(start));
            let mut at = start;
            let mut from = first;
            // `ahead` runs PREFETCH_STEPS steps ahead on the cycle. Past its end it reaches
            // `start`, whose entry already points at itself, and stays there.
            let mut ahead = first;
            for _ in 0..PREFETCH_STEPS {
                ahead = *order.add(ahead) as usize;
            }
            loop {
                *order.add(at) = at as u32;
                if from == start {
                    std::ptr::write(base.add(at), held);
                    break;
                }
                ahead = *order.add(ahead) as usize;
                prefetch(base.add(ahead));
                std::ptr::copy_nonoverlapping(base.add(from), base.add(at), 1);
                at = from;
                from = *order.add(at) as usize;
            }
        }
    }
    true
}

/// How many steps ahead on a cycle [`permute_in_place`] prefetches: two to four did as well
/// as sixteen in the measurement above; none took twice as long.
const PREFETCH_STEPS: usize = 3;

/// Asks the CPU to bring every cache line of the item at `item` into cache. A hint only: it
/// neither reads nor faults, whatever the address.
#[inline(always)]
fn prefetch<T>(item: *const T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let first = item.cast::<i8>();
        for line in (0..std::mem::size_of::<T>()).step_by(64) {
            // SAFETY: a prefetch is a hint that never faults, for any address (SSE, which
            // `_mm_prefetch` needs, is part of every x86-64 CPU); `wrapping_add` computes the
            // address without claiming it is in bounds.
            unsafe { _mm_prefetch(first.wrapping_add(line), _MM_HINT_T0) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = item;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_vectors_are_zero_in_reused_memory_too() {
        // Small and mid-sized buffers come from memory the allocator hands out again: freed
        // full of ones, they must still come back zero. Large ones are fresh pages.
        for bytes in [24usize, 4096, 200_000, 8 << 20] {
            for _ in 0..3 {
                drop(std::hint::black_box(vec![0xffu8; bytes]));
                let v: Vec<u64> = try_zeroed_vec(bytes / 8).unwrap();
                assert_eq!(v.len(), bytes / 8);
                assert!(v.iter().all(|&x| x == 0), "{bytes} bytes");
            }
        }
        assert!(try_zeroed_vec::<()>(5).unwrap().len() == 5);
        assert!(try_zeroed_vec::<u8>(0).unwrap().is_empty());
        let e = try_zeroed_vec::<u64>(usize::MAX / 4).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::OutOfMemory);
    }

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

    /// Every permutation of up to 6 elements, and random ones of up to 5,000, give what
    /// gathering by `order` gives; owned values are neither dropped twice nor lost.
    #[test]
    fn permuting_in_place_matches_gathering() {
        fn check(order: &[u32]) {
            let items: Vec<String> = (0..order.len()).map(|i| format!("item {i}")).collect();
            let want: Vec<String> = order.iter().map(|&i| items[i as usize].clone()).collect();
            let mut got = items;
            let mut scratch = order.to_vec();
            assert!(permute_in_place(&mut got, &mut scratch), "{order:?}");
            assert_eq!(got, want, "{order:?}");
        }
        fn all(prefix: &mut Vec<u32>, n: u32) {
            if prefix.len() == n as usize {
                return check(prefix);
            }
            for i in 0..n {
                if !prefix.contains(&i) {
                    prefix.push(i);
                    all(prefix, n);
                    prefix.pop();
                }
            }
        }
        for n in 0..=6 {
            all(&mut Vec::new(), n);
        }
        // A small linear congruential shuffle: reproducible, no dependency.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for n in [7u32, 100, 1000, 5000] {
            let mut order: Vec<u32> = (0..n).collect();
            for i in (1..order.len()).rev() {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                order.swap(i, (state >> 33) as usize % (i + 1));
            }
            check(&order);
        }
    }

    #[test]
    fn an_order_that_is_not_a_permutation_changes_nothing() {
        let items = vec!["a".to_owned(), "b".to_owned(), "c".to_owned()];
        for order in [
            &[0u32, 1][..],
            &[0, 1, 2, 3],
            &[0, 0, 1],
            &[2, 1, 3],
            &[1, 2, 2],
        ] {
            let mut got = items.clone();
            let mut scratch = order.to_vec();
            assert!(!permute_in_place(&mut got, &mut scratch), "{order:?}");
            assert_eq!(got, items);
        }
    }
}
