//! The thread pool parallel work runs on, in this process: rayon's global pool, or in a
//! process forked from one that had started it, a pool of the fork's own.
//!
//! A fork copies the global pool's state but none of its threads: work handed to it waits
//! forever. Python's `multiprocessing` and PyTorch's `DataLoader` fork workers by default on
//! Linux, after the parent has opened and read files, so a worker's first parallel read (a
//! safetensors open, a verify, a zstd decode) hung. Every parallel section of this crate
//! goes through [`in_place_scope`] or [`install`], which notice the fork by the process id.

use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

/// The process whose parallel work uses rayon's global pool: the first to run any.
static GLOBAL_POOL_OWNER: AtomicU32 = AtomicU32::new(0);

/// A fork's own pool, with the process it was made in.
struct ForkPool {
    pid: u32,
    pool: rayon::ThreadPool,
}

/// The pool of the latest fork that needed one (leaked: a pool is made once per process).
static FORK_POOL: AtomicPtr<ForkPool> = AtomicPtr::new(std::ptr::null_mut());

/// `None` when rayon's global pool serves this process, else the pool that does.
fn fork_pool() -> Option<&'static rayon::ThreadPool> {
    let pid = std::process::id();
    match GLOBAL_POOL_OWNER.compare_exchange(0, pid, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => return None,
        Err(owner) if owner == pid => return None,
        Err(_) => {}
    }
    let current = FORK_POOL.load(Ordering::Acquire);
    // SAFETY: a non-null pointer here came from `Box::leak` below and is never freed.
    if let Some(fork) = unsafe { current.as_ref() } {
        if fork.pid == pid {
            return Some(&fork.pool);
        }
    }
    // A pool of the default size that cannot be built (no threads to be had) is tried again
    // with one thread; if even that fails, the global pool is the only one left.
    let pool = rayon::ThreadPoolBuilder::new()
        .build()
        .or_else(|_| rayon::ThreadPoolBuilder::new().num_threads(1).build())
        .ok()?;
    let made: &'static ForkPool = Box::leak(Box::new(ForkPool { pid, pool }));
    let fresh = made as *const ForkPool as *mut ForkPool;
    // Another thread of this fork may have made one meanwhile: either serves.
    let _ = FORK_POOL.compare_exchange(current, fresh, Ordering::AcqRel, Ordering::Acquire);
    Some(&made.pool)
}

/// [`rayon::in_place_scope`] on this process's pool: `op` runs on the calling thread, what it
/// spawns on the pool.
pub(crate) fn in_place_scope<'scope, R>(op: impl FnOnce(&rayon::Scope<'scope>) -> R) -> R {
    match fork_pool() {
        None => rayon::in_place_scope(op),
        Some(pool) => pool.in_place_scope(op),
    }
}

/// The number of threads of this process's pool (asked through here, not of rayon directly:
/// asking rayon starts its global pool, which must be known as this process's).
pub(crate) fn threads() -> usize {
    match fork_pool() {
        None => rayon::current_num_threads(),
        Some(pool) => pool.current_num_threads(),
    }
}

/// Runs `op`, whose parallel iterators then use this process's pool.
pub(crate) fn install<R: Send>(op: impl FnOnce() -> R + Send) -> R {
    match fork_pool() {
        None => op(),
        Some(pool) => pool.install(op),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child forked after the parent ran parallel work gets a pool of its own, and work
    /// on it finishes (on the global pool it would wait forever).
    #[cfg(unix)]
    #[test]
    fn a_fork_runs_parallel_work_on_a_pool_of_its_own() {
        use rayon::prelude::*;
        let sum: u64 = install(|| (0..1000u64).into_par_iter().sum());
        assert_eq!(sum, 499_500);
        assert!(fork_pool().is_none(), "the parent uses the global pool");
        // SAFETY: the child only runs parallel work and leaves with `_exit`; the parent waits.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            // SAFETY: alarm only sets a timer: a hang ends in SIGALRM, not a stuck test run.
            unsafe { libc::alarm(20) };
            let forked = fork_pool().is_some();
            let sum: u64 = install(|| (0..1000u64).into_par_iter().sum());
            let spawned = AtomicU32::new(0);
            in_place_scope(|s| s.spawn(|_| spawned.store(7, Ordering::Relaxed)));
            let ok = forked && sum == 499_500 && spawned.load(Ordering::Relaxed) == 7;
            // SAFETY: leaves the child at once, running nothing of the parent's.
            unsafe { libc::_exit(if ok { 0 } else { 3 }) };
        }
        let mut status = 0;
        // SAFETY: waits for the child just forked; `status` is ours to write.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "the child failed or hung (status {status:#x})"
        );
    }
}
