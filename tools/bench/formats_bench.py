"""ONNX, HDF5 and PyTorch checkpoints from Python: ztio against the reference readers on a
~1 GiB model.

The workload of python_bench.py (258 tensors, 0.97 GiB; bf16 kept as float32 here, since
neither h5py nor onnx's numpy_helper takes ml_dtypes arrays everywhere: 1.2 GiB) written once
as an ONNX model (initializers, raw_data; onnx.save) and as an HDF5 file (h5py, contiguous
datasets, the Keras-like layout). Rows, each the median of several runs in turns:

- list: open the file and list every tensor's name, dtype and shape;
- read: open, then every tensor as a numpy array, every byte touched (a sum over the bytes);
- load_file: ``ztio.numpy.load_file``, every byte touched: the whole-file load, which decodes
  compressed tensors on every core;

and two compressed files of a quarter of the tensors (every fourth): a NumPy ``.npz`` written
by ``np.savez_compressed`` (deflate; against ``np.load``) and an HDF5 file of gzip-4 and
shuffle chunks of 64 rows (h5py), read rows only (listing a compressed file costs what listing
the plain one does);

page cache warm, and cold (dropped before every run, when running as root, once the process
maps no bench file). Each round starts at the next row. The references: `onnx.load` +
`numpy_helper.to_array` per initializer, `h5py.File` + `dataset[()]`, and, where torch is
installed (the bench never installs it; `ZT_BENCH_FORMATS_PYENV` names a venv that has it),
`torch.load(weights_only=True)` with and without `mmap=True` of the same tensors saved by
`torch.save`. Run by tools/bench/formats.sh (`cargo xtask bench --only formats`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time

import h5py
import numpy as np
import onnx
from onnx import helper, numpy_helper

import ztio

import python_bench
from python_bench import drop_cache, touch, workload


def as_f32(tensors: dict) -> dict:
    return {k: np.asarray(v, dtype=np.float32) for k, v in tensors.items()}


def write_onnx(tensors: dict, path: str) -> None:
    inits = [numpy_helper.from_array(v, k) for k, v in tensors.items()]
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "bench", [x],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])], initializer=inits)
    onnx.save_model(helper.make_model(graph), path)


def write_hdf5(tensors: dict, path: str) -> None:
    with h5py.File(path, "w") as f:
        for k, v in tensors.items():
            f.create_dataset("model_weights/" + k.replace(".", "/"), data=v)


def write_hdf5_gzip(tensors: dict, path: str) -> None:
    with h5py.File(path, "w") as f:
        for k, v in tensors.items():
            chunks = (min(64, v.shape[0]),) + v.shape[1:] if v.ndim else None
            f.create_dataset(k, data=v, chunks=chunks, compression="gzip", compression_opts=4, shuffle=True)


def ztio_load_file(path: str) -> int:
    import ztio.numpy

    return sum(touch(a) for a in ztio.numpy.load_file(path).values())


def npz_read(path: str) -> int:
    with np.load(path) as z:
        return sum(touch(z[k]) for k in z.files)


def ztio_list(path: str) -> int:
    with ztio.open(path) as f:
        return sum(len(i.shape) for i in f.infos())


def ztio_read(path: str) -> int:
    with ztio.open(path) as f:
        return sum(touch(f.get_tensor(k)) for k in f.keys())


def onnx_list(path: str) -> int:
    m = onnx.load(path)
    return sum(len(t.dims) for t in m.graph.initializer)


def onnx_read(path: str) -> int:
    m = onnx.load(path)
    return sum(touch(numpy_helper.to_array(t)) for t in m.graph.initializer)


def h5_names(f) -> list:
    names = []
    f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
    return names


def h5py_list(path: str) -> int:
    with h5py.File(path, "r") as f:
        return sum(len(f[n].shape) for n in h5_names(f))


def h5py_read(path: str) -> int:
    with h5py.File(path, "r") as f:
        return sum(touch(f[n][()]) for n in h5_names(f))


def write_torch(tensors: dict, path: str) -> None:
    import torch

    torch.save({k: torch.from_numpy(v) for k, v in tensors.items()}, path)


def torch_list(path: str, mmap: bool) -> int:
    import torch

    sd = torch.load(path, mmap=mmap, weights_only=True)
    return sum(len(t.shape) for t in sd.values())


def torch_read(path: str, mmap: bool) -> int:
    import torch

    sd = torch.load(path, mmap=mmap, weights_only=True)
    return sum(touch(t.numpy()) for t in sd.values())


def have_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def timed(fn, *args) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def in_turns(runs: int, rows: dict, cold: bool) -> dict:
    times = {k: [] for k in rows}
    names = list(rows)
    for run in range(runs):
        # Each round starts at the next row, as in python_bench.in_turns.
        turn = run % len(names)
        for name in names[turn:] + names[:turn]:
            fn = rows[name]
            if cold:
                drop_cache()
                time.sleep(2)
            times[name].append(fn())
    return {k: (statistics.median(v), min(v), max(v)) for k, v in times.items()}


def report(label: str, got: tuple, base: float, nbytes: int) -> None:
    med, lo, hi = got
    print(f"  {label:<40} {med * 1000:9.1f} ms  ({lo * 1000:.0f}-{hi * 1000:.0f})  {nbytes / med / 2**30:6.2f} GiB/s  {med / base:6.3f}x")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--scale", type=int, default=1)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--dir", default="target/bench-data")
    args = p.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    # drop_cache waits until no file under the bench folder is mapped (python_bench).
    python_bench.DATA_DIR = os.path.realpath(args.dir) + os.sep
    tensors = as_f32(workload(args.scale))
    nbytes = sum(v.nbytes for v in tensors.values())
    on, h5 = os.path.join(args.dir, "formats.onnx"), os.path.join(args.dir, "formats.h5")
    if not os.path.exists(on):
        write_onnx(tensors, on)
    if not os.path.exists(h5):
        write_hdf5(tensors, h5)
    assert ztio_read(on) == onnx_read(on) and ztio_read(h5) == h5py_read(h5)
    pt = os.path.join(args.dir, "formats.pt")
    # (kind, file, reference, its list or None, its read, bytes read)
    kinds = [
        ("onnx", on, "onnx.load + numpy_helper", onnx_list, onnx_read, nbytes),
        ("hdf5", h5, "h5py", h5py_list, h5py_read, nbytes),
    ]
    if have_torch():
        if not os.path.exists(pt):
            write_torch(tensors, pt)
        assert ztio_read(pt) == torch_read(pt, True)
        kinds += [
            ("pytorch", pt, "torch.load", lambda p: torch_list(p, False), lambda p: torch_read(p, False), nbytes),
            ("pytorch", pt, "torch.load(mmap=True)", lambda p: torch_list(p, True), lambda p: torch_read(p, True), nbytes),
        ]
    else:
        print("(pytorch rows skipped: torch is not installed in this venv)")
    quarter = dict(list(tensors.items())[::4])
    npz, h5z = os.path.join(args.dir, "formats.npz"), os.path.join(args.dir, "formats-gzip.h5")
    if not os.path.exists(npz):
        np.savez_compressed(npz, **quarter)
    if not os.path.exists(h5z):
        write_hdf5_gzip(quarter, h5z)
    qbytes = sum(v.nbytes for v in quarter.values())
    assert ztio_read(npz) == npz_read(npz) and ztio_read(h5z) == h5py_read(h5z)
    # Compressed: read rows only (listing costs what it costs on the plain files).
    kinds += [
        ("npz deflated", npz, "np.load", None, npz_read, qbytes),
        ("hdf5 gzip", h5z, "h5py", None, h5py_read, qbytes),
    ]
    print(f"formats: {len(tensors)} tensors, {nbytes / 2**30:.2f} GiB; onnx {onnx.__version__}, h5py {h5py.__version__}, ztio {ztio.__version__}")
    for cold in (False, True):
        if cold and not drop_cache():
            print("(cold rows skipped: dropping the page cache needs root)")
            break
        runs = max(3, args.runs // 2) if cold else args.runs
        how = "cold" if cold else "warm"
        for kind, path, ref_name, ref_list, ref_read, size in kinds:
            rows = {
                "ref_read": lambda: timed(ref_read, path), "zt_read": lambda: timed(ztio_read, path),
                "zt_load": lambda: timed(ztio_load_file, path),
            }
            if ref_list is not None:
                rows.update(ref_list=lambda: timed(ref_list, path), zt_list=lambda: timed(ztio_list, path))
            r = in_turns(runs, rows, cold)
            if ref_list is not None:
                report(f"{kind} {how}: list, {ref_name}", r["ref_list"], r["ref_list"][0], size)
                report(f"{kind} {how}: list, ztio", r["zt_list"], r["ref_list"][0], size)
            report(f"{kind} {how}: read all, {ref_name}", r["ref_read"], r["ref_read"][0], size)
            report(f"{kind} {how}: read all, ztio", r["zt_read"], r["ref_read"][0], size)
            report(f"{kind} {how}: ztio.numpy.load_file", r["zt_load"], r["ref_read"][0], size)


if __name__ == "__main__":
    main()
