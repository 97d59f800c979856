"""Checks zt's szip decoder against h5py (libaec) on generated datasets: every sample width
from 8 to 64 bits, both byte orders, signed, unsigned and float, the predictor on and off,
2 to 32 pixels per block, random, constant, smooth, low-entropy and zero data, scanlines that
are not whole blocks. Each dataset is read by h5py and by `zt cat`, and compared.

    /tmp/onnxv/bin/python tools/interop/szip_sweep.py [path/to/zt]

Needs h5py from PyPI (its wheels carry libaec). Not run by CI: the fixtures keep ten cases
(tools/interop/make_hdf5.py); this is the wider check behind docs/decisions.md.
"""

import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

ZT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "target", "release", "zt")
rng = np.random.default_rng(1)
_tmp_dir = tempfile.TemporaryDirectory()  # removed at exit
path = os.path.join(_tmp_dir.name, 's.h5')
cases = {}
with h5py.File(path, 'w') as f:
    i = 0
    for dt in ['u1','i1','<u2','>i2','<i4','>u4','<f4','>f4','<f8','<i8','>f8']:
        for kind in ['rand','const','smooth','lowent','zeros']:
            for opts in [('nn', 8), ('ec', 16), ('nn', 32), ('ec', 4), ('nn', 2)]:
                shape = (rng.integers(3, 30), rng.integers(1, 70))
                n = shape[0]*shape[1]
                if kind == 'rand':
                    a = rng.integers(0, 255, n).astype(np.uint8).view(np.uint8)
                    a = rng.standard_normal(n) * 1000 if dt[-2] == 'f' else rng.integers(np.iinfo(np.dtype(dt)).min, np.iinfo(np.dtype(dt)).max, n, endpoint=True, dtype=np.dtype(dt).newbyteorder('='))
                elif kind == 'const':
                    a = np.full(n, 7)
                elif kind == 'smooth':
                    a = np.cumsum(rng.integers(-3, 4, n)) + 100
                elif kind == 'lowent':
                    a = rng.integers(0, 3, n)
                else:
                    a = np.zeros(n)
                a = a.astype(dt).reshape(shape)
                chunks = (max(1, shape[0] // 2), shape[1])
                name = f'd{i}'
                try:
                    f.create_dataset(name, data=a, chunks=chunks, compression='szip', compression_opts=opts)
                except Exception as e:
                    print('skip', dt, opts, e); continue
                cases[name] = (dt, kind, opts)
                i += 1
bad = 0
with h5py.File(path) as f:
    for name, c in cases.items():
        a = f[name][()]
        out = subprocess.run([ZT, 'cat', path, '/' + name], capture_output=True)
        if out.returncode:
            print(name, c, 'ERR', out.stderr[:300]); bad += 1; continue
        b = np.frombuffer(out.stdout, dtype=a.dtype.newbyteorder('<')).reshape(a.shape)
        if not np.array_equal(a, b, equal_nan=True):
            print(name, c, a.shape, 'DIFF', int((a != b).sum())); bad += 1
print(len(cases), 'cases', bad, 'bad')
sys.exit(1 if bad else 0)
