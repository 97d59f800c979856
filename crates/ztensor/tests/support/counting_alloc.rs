//! A global allocator that counts live heap bytes and their peak, for the tests that bound
//! memory. Each such test binary declares it as its `#[global_allocator]` and runs one test,
//! so nothing else allocates concurrently.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// The counting allocator.
pub struct Counting;

/// Live heap bytes.
pub static LIVE: AtomicUsize = AtomicUsize::new(0);
/// The most live heap bytes since the last reset.
pub static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: defers to the system allocator and only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            let now = LIVE.fetch_add(l.size(), Relaxed) + l.size();
            PEAK.fetch_max(now, Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        LIVE.fetch_sub(l.size(), Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            if new > l.size() {
                let now = LIVE.fetch_add(new - l.size(), Relaxed) + new - l.size();
                PEAK.fetch_max(now, Relaxed);
            } else {
                LIVE.fetch_sub(l.size() - new, Relaxed);
            }
        }
        q
    }
}

/// Runs `f` and returns the peak of live heap bytes it added, and its result. (Not every
/// binary that counts uses it.)
#[allow(dead_code)]
pub fn peak<R>(f: impl FnOnce() -> R) -> (usize, R) {
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    let r = f();
    (PEAK.load(Relaxed).saturating_sub(base), r)
}
