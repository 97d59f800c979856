"""Writes fixtures/interop/hdf5/chunk_btree_deep.h5 with h5py: one dataset, `d`, of 200
int16 (0..199) in chunks of one element under h5py's default index, a v1 B-tree, which at
64 entries a node has inner nodes (crates/ztensor/tests/hdf5.rs damages one of their keys).

    python tools/interop/make_hdf5_btree.py fixtures/interop/hdf5
"""

import os
import sys

import h5py
import numpy as np

out = sys.argv[1]
path = os.path.join(out, "chunk_btree_deep.h5")
with h5py.File(path, "w", libver="earliest") as f:
    f.create_dataset("d", data=np.arange(200, dtype="<i2"), chunks=(1,))
data = open(path, "rb").read()
levels = sorted({data[i + 5] for i in range(len(data) - 6) if data[i:i + 4] == b"TREE" and data[i + 4] == 1})
print(path, len(data), "bytes; chunk B-tree levels", levels)
