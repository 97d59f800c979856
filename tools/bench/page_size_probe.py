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

    python tools/bench/page_size_probe.py FILE [ROUNDS] [WAYS] [--contend OTHER]

WAYS: a comma-separated subset of willneed, faults, huge, sendfile, lanes2, lanes4 (all by
default). `lanesN`: N threads, each with a descriptor and a map of its own (so a read-ahead
state of its own), each faulting one Nth of the file in front to back. `--contend OTHER`: a
second process reads the file OTHER (dropped from the page cache too) front to back in 4 MiB
`read`s during each fill, as another loader would; it is stopped when the fill ends.

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


def fill_in_lanes(path, lanes):
    """Reads `path` into the page cache in `lanes` streams at once, each its own descriptor
    and map, each one contiguous `1/lanes` of the file front to back (4 MiB faults)."""
    import threading

    size = os.path.getsize(path)
    page = mmap.PAGESIZE
    share = -(-size // lanes)
    share += -share % page

    def lane(i):
        f, m, a = mapped(path)
        at, end = i * share, min(size, (i + 1) * share)
        while at < end:
            step = min(4 << 20, end - at)
            libc.madvise(a.ctypes.data + at, step, MADV_POPULATE_READ)
            at += step
        del a
        m.close()
        f.close()

    threads = [threading.Thread(target=lane, args=(i,)) for i in range(lanes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def fill(path, how):
    """Reads `path` into the page cache the way `how` names."""
    if how.startswith("lanes"):
        fill_in_lanes(path, int(how[len("lanes"):]))
        return
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
    import argparse

    cli = argparse.ArgumentParser(description="How the way a file was read sets its map's cost.")
    cli.add_argument("file")
    cli.add_argument("rounds", nargs="?", type=int, default=3)
    cli.add_argument(
        "ways", nargs="?", default="willneed,faults,huge,sendfile,lanes2,lanes4",
        help="comma-separated ways of filling the page cache",
    )
    cli.add_argument("--contend", metavar="OTHER", help="a file another process reads meanwhile")
    args = cli.parse_args()
    path, rounds, ways, contend = args.file, args.rounds, args.ways.split(","), args.contend
    rows = {w: [] for w in ways}
    for _ in range(rounds):
        random.shuffle(ways)
        for how in ways:
            drop(path)
            other = None
            if contend is not None:
                drop(contend)
            time.sleep(0.3)
            if contend is not None:
                other = subprocess.Popen(["dd", f"if={contend}", "of=/dev/null", "bs=4M"],
                                         stderr=subprocess.DEVNULL)
            t = time.perf_counter()
            fill(path, how)
            filled = (time.perf_counter() - t) * 1e3
            if other is not None:
                other.kill()
                other.wait()
            # The first scans after a fill are slowed by the fresh memory; the third is kept.
            for _ in range(3):
                out = subprocess.run(
                    [sys.executable, __file__, "--scan", path],
                    capture_output=True, text=True, check=True,
                ).stdout.split()
            first, second, pmd = float(out[0]), float(out[1]), int(out[2])
            rows[how].append((filled, first, second, pmd))
    beside = f", {contend} read beside each fill" if contend else ""
    print(f"{path}: {os.path.getsize(path) / 2**30:.2f} GiB, medians of {rounds}{beside}")
    for how, runs in rows.items():
        med = lambda i: sorted(r[i] for r in runs)[len(runs) // 2]
        fills = sorted(r[0] for r in runs)
        print(
            f"  filled by {how:9s} fill {med(0):6.0f} ms ({fills[0]:.0f}-{fills[-1]:.0f})"
            f"   warm map: first scan "
            f"{med(1):6.1f} ms, second {med(2):6.1f} ms ({med(1) / med(2):.2f}x), "
            f"{med(3) / 1024:.0f} MiB mapped in 2 MiB entries"
        )


if __name__ == "__main__":
    main()
