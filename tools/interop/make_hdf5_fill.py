"""Writes fixtures/interop/hdf5/fill_values_{default,latest}.h5 with h5py: chunked datasets
whose fill value is not zeros and some of whose chunks were never written, which HDF5 reads
as the fill value (crates/ztensor/tests/hdf5.rs checks them against the values below).

    python tools/interop/make_hdf5_fill.py fixtures/interop/hdf5

- nan: 8x8 f32 in 2x2 chunks, fill NaN, rows 0-3 written as 1.0.
- neg: 10 big-endian i16 in chunks of 4, fill -1, elements 0-3 written as 0..4.
- grown: f64 4x4 in 2x4 chunks, fill -2.5, written 2x4 with 3.0 and then grown to 4 rows.
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
    with h5py.File(os.path.join(out, name), "r") as f:
        print(name, {k: f[k][()].ravel().tolist() for k in f})
