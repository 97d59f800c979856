"""Writes fixtures/interop/hdf5/fill_values_{default,latest}.h5 with h5py: chunked datasets
whose fill value is not zeros and some of whose chunks were never written, and contiguous
datasets never written (no data address), which HDF5 reads as the fill value
(crates/ztensor/tests/hdf5.rs checks them against the values below).

    python tools/interop/make_hdf5_fill.py fixtures/interop/hdf5

- nan: 8x8 f32 in 2x2 chunks, fill NaN, rows 0-3 written as 1.0.
- neg: 10 big-endian i16 in chunks of 4, fill -1, elements 0-3 written as 0..4.
- grown: f64 4x4 in 2x4 chunks, fill -2.5, written 2x4 with 3.0 and then grown to 4 rows.
- unwritten: contiguous 3x5 f32, fill 7.5, never written.
- unwritten_zeros: contiguous 4 i32, HDF5's default fill (zeros), never written.
- unwritten_scalar: a contiguous f64 scalar, fill -1.0, never written.
- chunked_unwritten: 8 f32 in chunks of 2, fill 6.5, never written (no chunk index).
"""

import os
import sys

import h5py
import numpy as np

out = sys.argv[1]
for name, libver in [("fill_values_default.h5", "earliest"), ("fill_values_latest.h5", "latest")]:
    with h5py.File(os.path.join(out, name), "w", libver=libver) as f:
        d = f.create_dataset("nan", (8, 8), "f4", chunks=(2, 2), fillvalue=np.nan)
        d[:4] = 1.0
        d = f.create_dataset("neg", (10,), ">i2", chunks=(4,), fillvalue=-1)
        d[:4] = np.arange(4)
        d = f.create_dataset("grown", (2, 4), "f8", chunks=(2, 4), maxshape=(None, 4), fillvalue=-2.5)
        d[:] = 3.0
        d.resize((4, 4))
        f.create_dataset("unwritten", (3, 5), "f4", fillvalue=7.5)
        f.create_dataset("unwritten_zeros", (4,), "<i4")
        f.create_dataset("unwritten_scalar", (), "f8", fillvalue=-1.0)
        f.create_dataset("chunked_unwritten", (8,), "f4", chunks=(2,), fillvalue=6.5)
    with h5py.File(os.path.join(out, name), "r") as f:
        print(name, {k: f[k][()].ravel().tolist() for k in f})
