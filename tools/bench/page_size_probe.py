"""How the way a file came into the page cache sets what mapping it costs later.

A file's pages stay in the page cache in the size they were read in: `MADV_WILLNEED` (and
`posix_fadvise(WILLNEED)`) reads into small pages, a page fault's own read-ahead into large
folios, and a fault on a map advised `MADV_HUGEPAGE` into 2 MiB pages. A later map of the
warm file then costs a fault per 64 KiB of small pages, or one entry per 2 MiB huge page.

`sendfile` to `/dev/null` reads through the page cache as `read` does (large folios), without
a copy. For each way of filling the cache (the page cache dropped for the file first, with
`posix_fadvise(DONTNEED)`), this prints how long the fill took, how much of a fresh map of
the warm file the kernel mapped with 2 MiB entries (`FilePmdMapped`), and the first and
second scan of that fresh map, in a process of its own. Linux 5.14+ only (MADV_POPULATE_READ).

    python tools/bench/page_size_probe.py FILE [ROUNDS] [WAYS]

WAYS: a comma-separated subset of willneed, faults, huge, sendfile (all by default).

Measurements for docs/benchmarks.md ("What a warm map costs", "Reading ahead into large
folios"; those were made with one call per hint, of which Linux read 8 MiB: "Hints the kernel
cut short"); never a test.
"""

import ctypes
import mmap
import os
import random
import subprocess
import sys
import time

import numpy as np

MADV_WILLNEED, MADV_HUGEPAGE, MADV_POPULATE_READ = 3, 14, 22
STEP = 32 << 20
# Linux reads at most its read-ahead window of each WILLNEED call; the library sends hints in
# pieces of this size so that all of each is read (zt-container's `HINT_PIECE`).
HINT_PIECE = 128 << 10

libc = ctypes.CDLL(None, use_errno=True)
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


def mapped(path):
    f = open(path, "rb")
    m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    a = np.frombuffer(m, dtype=np.uint8)
    return f, m, a


def will_need(addr, size):
    """`MADV_WILLNEED` of `size` bytes at `addr`, in pieces as the library sends it."""
    for at in range(0, size, HINT_PIECE):
        libc.madvise(addr + at, min(HINT_PIECE, size - at), MADV_WILLNEED)


def fill(path, how):
    """Reads `path` into the page cache the way `how` names."""
    f, m, a = mapped(path)
    addr, size = a.ctypes.data, a.size
    if how == "huge":
        libc.madvise(addr, size, MADV_HUGEPAGE)
    if how == "willneed":
        will_need(addr, min(STEP, size))
    sink = os.open(os.devnull, os.O_WRONLY) if how == "sendfile" else None
    for at in range(0, size, STEP):
        step = min(STEP, size - at)
        if how == "willneed" and at + STEP < size:
            will_need(addr + at + STEP, min(STEP, size - at - STEP))
        if sink is not None:
            done = 0
            while done < step:
                sent = os.sendfile(sink, f.fileno(), at + done, step - done)
                if sent == 0:
                    break
                done += sent
        if libc.madvise(addr + at, step, MADV_POPULATE_READ) != 0:
            sys.exit(f"MADV_POPULATE_READ refused: errno {ctypes.get_errno()}")
    if sink is not None:
        os.close(sink)
    del a
    m.close()
    f.close()


def scan_fresh_map(path):
    """In this process: maps `path` and scans it twice; prints ms, ms, FilePmdMapped kB."""
    f, m, a = mapped(path)
    words = a[: a.size // 8 * 8].view(np.uint64)
    t0 = time.perf_counter()
    np.bitwise_xor.reduce(words)
    t1 = time.perf_counter()
    np.bitwise_xor.reduce(words)
    t2 = time.perf_counter()
    pmd = 0
    with open("/proc/self/smaps_rollup") as rollup:
        for line in rollup:
            if line.startswith("FilePmdMapped:"):
                pmd = int(line.split()[1])
    print((t1 - t0) * 1e3, (t2 - t1) * 1e3, pmd)


def drop(path):
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)


def main():
    if sys.argv[1] == "--scan":
        scan_fresh_map(sys.argv[2])
        return
    path = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    ways = sys.argv[3].split(",") if len(sys.argv) > 3 else ["willneed", "faults", "huge", "sendfile"]
    rows = {w: [] for w in ways}
    for _ in range(rounds):
        random.shuffle(ways)
        for how in ways:
            drop(path)
            time.sleep(0.3)
            t = time.perf_counter()
            fill(path, how)
            filled = (time.perf_counter() - t) * 1e3
            # The first scans after a fill are slowed by the fresh memory; the third is kept.
            for _ in range(3):
                out = subprocess.run(
                    [sys.executable, __file__, "--scan", path],
                    capture_output=True, text=True, check=True,
                ).stdout.split()
            first, second, pmd = float(out[0]), float(out[1]), int(out[2])
            rows[how].append((filled, first, second, pmd))
    print(f"{path}: {os.path.getsize(path) / 2**30:.2f} GiB, medians of {rounds}")
    for how, runs in rows.items():
        med = lambda i: sorted(r[i] for r in runs)[len(runs) // 2]
        print(
            f"  filled by {how:9s} fill {med(0):6.0f} ms   warm map: first scan "
            f"{med(1):6.1f} ms, second {med(2):6.1f} ms ({med(1) / med(2):.2f}x), "
            f"{med(3) / 1024:.0f} MiB mapped in 2 MiB entries"
        )


if __name__ == "__main__":
    main()
