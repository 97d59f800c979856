"""ztio against safetensors from Python, on the same ~1 GiB model-like workload as the Rust
rows of `cargo xtask bench` (per layer four 1024x1024 f32 matrices, two 1024x2816 bf16 MLP
matrices and two f32 norm vectors; embeddings and head in bf16).

- load: open the file, get every tensor as a numpy array, touch every byte (a sum over the
  bytes, the same work for both); page cache warm, and cold (dropped before every run,
  when running as root).
- slices: ``get_slice(name)[1:3, 0:2]`` of each of 20,000 small tensors, the cost of a
  slice call itself (warm).
- save: save_file of the same dict of arrays, to the page cache (neither waits for the disk;
  ztio's default, sync=True, is shown beside it). Before each save, fresh memory of the
  workload's size and half again is touched and freed (``fresh_memory``), so that the save's
  page cache gets pages the machine has backed: on a VM that hands free memory back to its
  host (virtio-balloon free page reporting), a page the host took back costs a fault in the
  host on its first touch, and which save got such pages decided its time (1 GiB of fresh
  memory filled in 175 ms just after a free, 2.1-2.5 s after five idle seconds).
- sets: the workload as a set of five shards (``model.safetensors.index.json``), loaded whole
  into numpy and touched: ztio's ``load_file`` of the index (shards read several at once) against
  safetensors' ``load_file`` of each shard in turn (what a loader does with an index), and
  against ztio's ``load_file`` of each shard in turn; warm and cold, with the limit (reading
  the shards' bytes with large sequential reads, one after another).
- frameworks: for every framework that imports here (numpy, torch, flax/JAX, TensorFlow,
  Paddle, MLX), ``load_file`` and ``safe_open`` + ``get_tensor`` of ztio's module against
  safetensors' same module, warm and cold, ``load_file`` of the set's index against
  safetensors' ``load_file`` of each shard, and ``save_file`` with and without sync. Loaded
  tensors are touched where the framework maps the file (numpy, torch); the others copy
  into their own memory as they load, which touches every byte already.

Medians of `--runs` runs (five by default, cold ones too), the libraries measured in turns; each row shows its fastest and slowest run. Run by tools/bench/python.sh.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import ml_dtypes
import numpy as np

import safetensors
import safetensors.numpy as st_numpy
import ztio
import ztio.numpy


def fresh_memory(nbytes: int) -> None:
    """Touches and frees new memory of ``nbytes`` and half again, so that the writes of the
    row timed next land in pages the machine has backed (see the module's "save")."""
    scratch = np.ones(nbytes * 3 // 2 // 8 + 1)
    del scratch


def workload(scale: int) -> dict:
    rng = np.random.default_rng(0x2545F491)

    def mat(shape, bf16):
        x = rng.standard_normal(shape, dtype=np.float32) * 0.02
        return x.astype(ml_dtypes.bfloat16) if bf16 else x

    t = {"embed.weight": mat((32000 // scale, 1024), True)}
    for layer in range(32 // scale):
        for m in "qkvo":
            t[f"layers.{layer}.attn.{m}.weight"] = mat((1024, 1024), False)
        t[f"layers.{layer}.mlp.up.weight"] = mat((2816, 1024), True)
        t[f"layers.{layer}.mlp.down.weight"] = mat((1024, 2816), True)
        t[f"layers.{layer}.norm1.weight"] = mat((1024,), False)
        t[f"layers.{layer}.norm2.weight"] = mat((1024,), False)
    t["head.weight"] = mat((32000 // scale, 1024), True)
    return t


def touch(a: np.ndarray) -> int:
    return int(a.reshape(-1).view(np.uint8).sum(dtype=np.uint64))


def load_all(safe_open, path: str) -> int:
    """Every tensor through ``safe_open`` + ``get_tensor``, every byte touched."""
    total = 0
    with safe_open(path, framework="numpy") as f:
        for k in f.keys():
            total += touch(f.get_tensor(k))
    return total


def load_ztio(path: str) -> int:
    return load_all(ztio.safe_open, path)


def load_safetensors(path: str) -> int:
    return load_all(safetensors.safe_open, path)


def read_through(paths) -> None:
    """The limit of a whole load: the files' bytes read front to back, one file after another,
    in 16 MiB reads into one buffer (no allocation per read, no work on the bytes)."""
    buf = bytearray(16 << 20)
    for path in paths:
        with open(path, "rb", buffering=0) as f:
            while f.readinto(buf):
                pass


#: The folder of the bench's files (``--dir``, made absolute), as /proc/self/maps names it.
DATA_DIR = ""


def unmapped_settled(timeout: float = 10.0) -> None:
    """Waits (at most ``timeout`` seconds) until this process maps no file under
    :data:`DATA_DIR` any more. Pages a live map holds survive ``drop_caches``: JAX frees the
    arrays of a run a moment after they die, and until then the map under them kept the file
    cached, so the next "cold" run found it warm (no major fault, where a cold load of the
    workload takes about 200)."""
    import gc

    gc.collect()
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open("/proc/self/maps") as maps:
                if not DATA_DIR or not any(DATA_DIR in line for line in maps):
                    return
        except OSError:
            return  # no /proc: nothing we could wait for
        if time.monotonic() > deadline:
            print(f"  (a file under {DATA_DIR} is still mapped: this cold run may be warm in part)")
            return
        time.sleep(0.05)


def drop_cache() -> bool:
    unmapped_settled()
    subprocess.run(["sync"], check=False)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3")
        return True
    except OSError:
        return False


def timed(fn, *args) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


class Median(float):
    """A median in seconds that keeps the runs it was taken over, for the spread a row shows."""

    runs: list


def median_of(times: list) -> Median:
    m = Median(statistics.median(times))
    m.runs = sorted(times)
    return m


def in_turns(runs: int, fns: dict, cold: bool = False) -> dict:
    times = {k: [] for k in fns}
    names = list(fns)
    for run in range(runs):
        # Each round starts at the next row: a row's place in a round told on its time, and
        # a fixed order put that on the same row every time.
        turn = run % max(len(names), 1)
        for name in names[turn:] + names[:turn]:
            fn = fns[name]
            if cold:
                drop_cache()
                time.sleep(2)  # this VM hands freed pages back to its host for ~2 s
            times[name].append(fn())
    return {k: median_of(v) for k, v in times.items()}


def warm_then_cold(args, fns: dict, report) -> None:
    """Runs ``fns`` in turns warm, then cold (page cache dropped before each run),
    handing each set of medians to ``report("warm" | "cold", medians)``. Cold rows are skipped
    where the cache cannot be dropped."""
    for cold in (False, True):
        if cold and not drop_cache():
            print("  (cold rows skipped: dropping the page cache needs root)")
            return
        report("cold" if cold else "warm", in_turns(args.runs, fns, cold=cold))


def report_rows(prefix: str, lines: list, nbytes: int):
    """A ``report`` for :func:`warm_then_cold`: each ``(label, key, base key)`` of ``lines``
    printed as a row, its time against the base key's."""
    def report(how: str, r: dict) -> None:
        for label, key, base in lines:
            row(f"{prefix} {how}: {label}", r[key], r[base], nbytes)
    return report


def row(label: str, seconds: float, base: float, nbytes: int) -> None:
    runs = getattr(seconds, "runs", None)
    spread = f"  [{runs[0] * 1000:.0f}-{runs[-1] * 1000:.0f} ms over {len(runs)}]" if runs else ""
    print(f"  {label:<44} {seconds * 1000:9.1f} ms  {nbytes / seconds / 2**30:6.2f} GiB/s  {seconds / base:5.3f}x{spread}")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--scale", type=int, default=1, help="divide the workload by this")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--dir", default="target/bench-data")
    p.add_argument("--frameworks", default="numpy,torch,flax,tensorflow,paddle,mlx",
                   help="the frameworks' rows to run (those that import); empty for none")
    p.add_argument("--only-frameworks", action="store_true", help="skip the numpy-core rows")
    p.add_argument("--only-sets", action="store_true", help="run the sharded-set rows only")
    # Internal: one framework's rows in a process of their own, on the files the parent wrote.
    p.add_argument("--framework-child", type=int, metavar="NBYTES", help=argparse.SUPPRESS)
    args = p.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    global DATA_DIR
    DATA_DIR = os.path.realpath(args.dir) + os.sep
    if args.framework_child:
        zt = os.path.join(args.dir, "py-model.zt")
        st = os.path.join(args.dir, "py-model.safetensors")
        frameworks(args, st, zt, args.framework_child)
        return
    tensors = workload(args.scale)
    nbytes = sum(a.nbytes for a in tensors.values())
    print(f"python workload: {len(tensors)} tensors, {nbytes / 2**30:.2f} GiB; ztio {ztio.__version__}, "
          f"safetensors {safetensors.__version__}, numpy {np.__version__}")
    zt = os.path.join(args.dir, "py-model.zt")
    st = os.path.join(args.dir, "py-model.safetensors")
    ztio.save_file(tensors, zt, sync=False)
    st_numpy.save_file(tensors, st)
    assert load_ztio(zt) == load_safetensors(st)
    if args.only_sets:
        sets(args, st, nbytes)
        return
    if not args.only_frameworks:
        core(args, tensors, st, zt, nbytes)
        sets(args, st, nbytes)
    frameworks(args, st, zt, nbytes)


def set_files(args, st: str, nbytes: int):
    """``(index, shards)`` of the workload as a set of five shards (written on first use;
    like safetensors' files, its tensors lie wherever the header's length puts them, few on
    64 bytes)."""
    folder = os.path.join(args.dir, "py-set")
    index = os.path.join(folder, "model.safetensors.index.json")
    if not os.path.exists(index):
        os.makedirs(folder, exist_ok=True)
        ztio.convert(st, index, shard_size=nbytes // 4 + 1, progress=False)
    return index, [os.path.join(folder, p) for p in sorted(os.listdir(folder)) if p.endswith(".safetensors")]


def sets(args, st: str, nbytes: int) -> None:
    index, shards = set_files(args, st, nbytes)

    def whole(load):
        return lambda: timed(lambda: sum(touch(a) for a in load().values()))

    def each_shard(load_file):
        def load():
            out = {}
            for s in shards:
                out.update(load_file(s))
            return out
        return load

    fns = {
        "st": whole(each_shard(st_numpy.load_file)),
        "zt_index": whole(lambda: ztio.numpy.load_file(index)),
        "zt_shards": whole(each_shard(ztio.numpy.load_file)),
        "limit": lambda: timed(read_through, shards),
    }
    print(f"\na {len(shards)}-shard set, every tensor loaded into numpy and touched")

    warm_then_cold(args, fns, report_rows("set", [
        ("limit (read the shards in turn)", "limit", "st"),
        ("safetensors load_file per shard", "st", "st"),
        ("ztio load_file per shard", "zt_shards", "st"),
        ("ztio load_file of the index", "zt_index", "st"),
    ], nbytes))
    torch_sets(args, index, shards, nbytes)


def torch_sets(args, index: str, shards: list, nbytes: int) -> None:
    """The set loaded into a torch model as ``load_state_dict`` does (each tensor copied into a
    preallocated parameter), by safetensors, ztio, the Run:ai Model Streamer and
    fastsafetensors. The two streamers are installed here from PyPI, by the bench only; torch
    never is (its wheel is gigabytes): ZT_BENCH_PYENV names a venv that has it."""
    try:
        import torch
    except ImportError:
        print("  (torch rows skipped: no torch here; ZT_BENCH_PYENV names a venv with it)")
        return
    import importlib.util

    needs = {"runai_model_streamer": "runai-model-streamer", "fastsafetensors": "fastsafetensors"}
    missing = [pkg for module, pkg in needs.items() if importlib.util.find_spec(module) is None]
    if missing:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", *missing], check=True)
    import safetensors.torch
    import ztio.torch
    from fastsafetensors import SafeTensorsFileLoader, SingleGroup
    from runai_model_streamer import SafetensorsStreamer

    params = {k: torch.empty_like(v) for k, v in ztio.torch.load_file(index).items()}

    def into_model(pairs) -> None:
        for k, t in pairs:
            params[k].copy_(t)

    def st() -> None:
        for s in shards:
            into_model(safetensors.torch.load_file(s).items())

    def zt() -> None:
        into_model(ztio.torch.load_file(index).items())

    def runai() -> None:
        with SafetensorsStreamer() as streamer:
            streamer.stream_files(shards)
            into_model(streamer.get_tensors())

    def fst() -> None:
        loader = SafeTensorsFileLoader(SingleGroup(), "cpu", nogds=True)
        try:
            loader.add_filenames({0: shards})
            buffers = loader.copy_files_to_device()
            try:
                into_model((k, buffers.get_tensor(k)) for k in params)
            finally:
                buffers.close()
        finally:
            loader.close()

    fns = {"limit": lambda: timed(read_through, shards), "st": lambda: timed(st), "zt": lambda: timed(zt),
           "runai": lambda: timed(runai), "fst": lambda: timed(fst)}
    print(f"the same set into a torch {torch.__version__} model, each tensor copied into its parameter")

    warm_then_cold(args, fns, report_rows("torch", [
        ("limit (read the shards in turn)", "limit", "st"),
        ("safetensors load_file per shard", "st", "st"),
        ("ztio load_file of the index", "zt", "st"),
        ("Run:ai Model Streamer", "runai", "st"),
        ("fastsafetensors (CPU, no GDS)", "fst", "st"),
    ], nbytes))


def core(args, tensors, st: str, zt: str, nbytes: int) -> None:
    print("load every tensor into numpy and touch every byte (warm page cache)")
    r = in_turns(args.runs, {"st": lambda: timed(load_safetensors, st), "zt": lambda: timed(load_ztio, zt),
                             "zt_st": lambda: timed(load_ztio, st)})
    row("safetensors safe_open + get_tensor", r["st"], r["st"], nbytes)
    row("ztio safe_open + get_tensor (.zt)", r["zt"], r["st"], nbytes)
    row("ztio safe_open + get_tensor (.safetensors)", r["zt_st"], r["st"], nbytes)

    if drop_cache():
        print("the same, page cache dropped before every run")
        r = in_turns(args.runs, {"st": lambda: timed(load_safetensors, st),
                                              "zt": lambda: timed(load_ztio, zt)}, cold=True)
        row("safetensors safe_open + get_tensor", r["st"], r["st"], nbytes)
        row("ztio safe_open + get_tensor (.zt)", r["zt"], r["st"], nbytes)
    else:
        print("(cold rows skipped: dropping the page cache needs root)")

    small_slices(args)

    print("save_file of the same arrays (to the page cache)")
    out_st, out_zt = os.path.join(args.dir, "py-save.safetensors"), os.path.join(args.dir, "py-save.zt")
    out_zst = os.path.join(args.dir, "py-save-ztio.safetensors")

    def settle():
        for f in (out_st, out_zt, out_zst):
            if os.path.exists(f):
                os.remove(f)
        subprocess.run(["sync"], check=False)
        fresh_memory(nbytes)

    def save(fn):
        settle()
        return timed(fn)

    r = in_turns(args.runs, {
        "st": lambda: save(lambda: st_numpy.save_file(tensors, out_st)),
        "zt": lambda: save(lambda: ztio.save_file(tensors, out_zt, sync=False)),
        "zt_st": lambda: save(lambda: ztio.save_file(tensors, out_zst, sync=False)),
        "zt_sync": lambda: save(lambda: ztio.save_file(tensors, out_zt)),
    })
    row("safetensors.numpy.save_file", r["st"], r["st"], nbytes)
    row("ztio.save_file (.zt, sync=False)", r["zt"], r["st"], nbytes)
    row("ztio.save_file (.safetensors, sync=False)", r["zt_st"], r["st"], nbytes)
    row("ztio.save_file (.zt, default: synced)", r["zt_sync"], r["st"], nbytes)


def small_slices(args) -> None:
    """``get_slice(name)[1:3, 0:2]`` of every one of many 4 x 3 f32 tensors: the per-call cost
    of a slice, where parsing the index outweighs reading it."""
    count = 20_000 // args.scale
    print(f"get_slice(name)[1:3, 0:2] of each of {count:,} tensors of 4 x 3 f32 (warm)")
    small = os.path.join(args.dir, f"py-small-{count}.safetensors")
    if not os.path.exists(small):
        one = np.arange(12, dtype=np.float32).reshape(4, 3)
        st_numpy.save_file({f"t{i:06d}": one for i in range(count)}, small)

    def boxes(safe_open):
        with safe_open(small, framework="np") as f:
            for k in f.keys():
                f.get_slice(k)[1:3, 0:2]

    r = in_turns(args.runs, {"st": lambda: timed(boxes, safetensors.safe_open),
                             "zt": lambda: timed(boxes, ztio.safe_open)})
    nbytes = os.path.getsize(small)
    row("safetensors safe_open + get_slice", r["st"], r["st"], nbytes)
    row("ztio safe_open + get_slice", r["zt"], r["st"], nbytes)


# framework -> (safe_open's name for it, the tensors of the workload in that framework)
FRAMEWORK_NAMES = {"numpy": "np", "torch": "pt", "flax": "flax", "tensorflow": "tf", "paddle": "paddle", "mlx": "mlx"}


def _torch_touch(t) -> int:
    """One byte of every page: each page of the tensor is faulted in (read from the disk when
    cold), the same for both libraries. Not a sum of every byte: torch sums uint8 at about
    0.2 GiB/s here, 4.3 s per GiB, which drowned the reads the rows are about."""
    import torch

    return int(t.reshape(-1).view(torch.uint8)[::4096].sum(dtype=torch.int64)) if t.numel() else 0


def _jax_settled(obj) -> int:
    """Waits for JAX's asynchronous copy so the time counts it, then reads one byte of every
    page, as ``_torch_touch`` does: an array JAX keeps in place (ztio's aligned tensors) has
    copied nothing, and its pages must still come in. ``np.asarray`` of a CPU array is a view."""
    obj.block_until_ready()
    return int(np.asarray(obj).reshape(-1).view(np.uint8)[::4096].sum(dtype=np.uint64))


def _mlx_settled(obj) -> int:
    """MLX is lazy: evaluates the array so the time counts its copy."""
    import mlx.core

    mlx.core.eval(obj)
    return 0


def _paddle_touch(t) -> int:
    """Paddle tensors can point into the file's map (both libraries share it through DLPack
    or their own storage): every byte is summed, as for numpy, through a same-size int view."""
    import paddle

    ints = {1: paddle.uint8, 2: paddle.int16, 4: paddle.int32, 8: paddle.int64}
    return touch(np.from_dlpack(paddle.view(t, ints[t.element_size()]))) if t.size else 0


def _tf_touch(t) -> int:
    """Reads one byte of every page, as ``_torch_touch`` does: a tensor TensorFlow copied is in
    memory already, and one it holds in the file's map (ztio's aligned tensors, through
    DLPack) must still have its pages come in. ``np.asarray`` of an eager CPU tensor is a
    view."""
    a = np.asarray(t)
    return int(a.reshape(-1).view(np.uint8)[::4096].sum(dtype=np.uint64)) if a.size else 0


def toucher(framework: str):
    if framework == "numpy":
        return touch
    if framework == "torch":
        return _torch_touch
    if framework == "flax":
        return _jax_settled
    if framework == "mlx":
        return _mlx_settled
    if framework == "paddle":
        return _paddle_touch
    if framework == "tensorflow":
        return _tf_touch
    raise ValueError(f"no toucher for {framework}")


def available_frameworks(wanted):
    import importlib

    found = []
    for fw in wanted:
        try:
            importlib.import_module(f"safetensors.{fw}")
            getattr(ztio, fw).load_file  # noqa: B018  (the module exists)
            importlib.import_module({"flax": "jax", "numpy": "numpy"}.get(fw, fw))
        except Exception as e:  # an absent or broken framework is skipped with its reason
            print(f"  ({fw}: skipped, {type(e).__name__}: {str(e)[:80]})")
            continue
        found.append(fw)
    return found


def frameworks(args, st: str, zt: str, nbytes: int) -> None:
    import importlib

    wanted = [f for f in args.frameworks.split(",") if f]
    if len(wanted) > 1:
        # Each framework in a process of its own: TensorFlow and Paddle, imported into one
        # process, crash it (their bundled libraries clash), and one framework's allocator
        # state should not weigh on the next one's rows.
        print(f"\nframeworks ({', '.join(wanted)}): ztio's module against safetensors' same module")
        for fw in wanted:
            sys.stdout.flush()
            child = [sys.executable, __file__, "--framework-child", str(nbytes), "--frameworks", fw,
                     "--runs", str(args.runs), "--dir", args.dir]
            done = subprocess.run(child, check=False)
            if done.returncode != 0:
                print(f"  ({fw}: its process ended with status {done.returncode})")
        return
    for fw in available_frameworks(wanted):
        st_mod = importlib.import_module(f"safetensors.{fw}")
        zt_mod = getattr(ztio, fw)
        name = FRAMEWORK_NAMES[fw]
        tch = toucher(fw)

        def load_file(mod, path):
            return lambda: timed(lambda: sum(tch(t) for t in mod.load_file(path).values()))

        def safe_open(opener, path):
            def run():
                with opener(path, framework=name) as f:
                    return sum(tch(f.get_tensor(k)) for k in f.keys())

            return lambda: timed(run)

        def columns(opener, path):
            # A tensor-parallel rank's share, as TGI's `get_sharded(dim=1)` takes it: half the
            # columns of each matrix (a strided box), all of each vector.
            def run():
                total = 0
                with opener(path, framework=name) as f:
                    for k in f.keys():
                        s = f.get_slice(k)
                        shape = s.get_shape()
                        total += tch(s[:, : shape[1] // 2] if len(shape) == 2 else s[:])
                return total

            return lambda: timed(run)

        def each_shard(mod):
            # Every shard's tensors kept to the end, as a load of the index keeps them: one
            # shard's freed memory would otherwise serve the next shard's copies.
            def run():
                loaded = {}
                for shard in shards:
                    loaded.update(mod.load_file(shard))
                return sum(tch(t) for t in loaded.values())

            return lambda: timed(run)

        index, shards = set_files(args, st, nbytes)
        rows = {
            "limit": lambda: timed(read_through, [st]),
            "st_load": load_file(st_mod, st),
            "zt_load": load_file(zt_mod, st),
            "zt_load_zt": load_file(zt_mod, zt),
            "st_open": safe_open(safetensors.safe_open, st),
            "zt_open": safe_open(ztio.safe_open, st),
            "st_cols": columns(safetensors.safe_open, st),
            "zt_cols": columns(ztio.safe_open, st),
            "st_set": each_shard(st_mod),
            "zt_set": load_file(zt_mod, index),
        }

        warm_then_cold(args, rows, report_rows(fw, [
            ("limit (read the file through)", "limit", "st_load"),
            ("safetensors load_file", "st_load", "st_load"),
            ("ztio load_file (.safetensors)", "zt_load", "st_load"),
            ("ztio load_file (.zt)", "zt_load_zt", "st_load"),
            ("safetensors safe_open+get_tensor", "st_open", "st_open"),
            ("ztio safe_open+get_tensor", "zt_open", "st_open"),
            ("safetensors get_slice[:, :n/2]", "st_cols", "st_cols"),
            ("ztio get_slice[:, :n/2]", "zt_cols", "st_cols"),
            ("a 5-shard set: safetensors load_file per shard", "st_set", "st_set"),
            ("a 5-shard set: ztio load_file of the index", "zt_set", "st_set"),
        ], nbytes))

        # The framework's own tensors, as ztio's module gives them (safetensors' TensorFlow
        # module hands bfloat16 back as numpy arrays, which its own save_file then refuses).
        tensors = zt_mod.load_file(st)
        out = os.path.join(args.dir, f"py-save-{fw}.safetensors")

        def save(fn):
            def run():
                if os.path.exists(out):
                    os.remove(out)
                subprocess.run(["sync"], check=False)
                fresh_memory(nbytes)
                return timed(fn)

            return run

        # A fresh dict per call: safetensors' TensorFlow and Paddle modules replace the values
        # of the dict they are given by numpy arrays.
        savers = {
            "st": save(lambda: st_mod.save_file(dict(tensors), out)),
            "zt": save(lambda: zt_mod.save_file(dict(tensors), out, sync=False)),
            "zt_sync": save(lambda: zt_mod.save_file(dict(tensors), out)),
        }
        try:
            st_mod.save_file(dict(tensors), out)
        except Exception as e:  # safetensors' module cannot save these tensors: ztio alone
            print(f"  {fw}: safetensors save_file fails on the workload: {type(e).__name__}: {str(e)[:70]}")
            del savers["st"]
        r = in_turns(args.runs, savers)
        base = r.get("st", r["zt"])
        if "st" in r:
            row(f"{fw}: safetensors save_file", r["st"], base, nbytes)
        row(f"{fw}: ztio save_file (sync=False)", r["zt"], base, nbytes)
        row(f"{fw}: ztio save_file (default: synced)", r["zt_sync"], base, nbytes)
        del tensors


if __name__ == "__main__":
    main()
