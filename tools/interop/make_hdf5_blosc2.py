"""Writes fixtures/interop/hdf5/blosc2.h5.gz, HDF5 datasets through the Blosc2 filter (32026),
gzipped (HDF5's free space and small chunks pack to a quarter), and blosc2_small.h5, a few
small ones of the same kinds (the fuzz target's seed); and records in blosc2.json what h5py
(with hdf5plugin's c-blosc2) reads from each dataset: its shape, our element type name, the
SHA-256 of its row-major bytes, and who wrote its chunks.
Run in a throwaway environment:

    /tmp/h5env/bin/pip install h5py hdf5plugin tables blosc2
    /tmp/h5env/bin/python tools/interop/make_hdf5_blosc2.py fixtures/interop/hdf5

Three writers, so that the chunks are the ones people meet:
- hdf5plugin's filter through h5py: every codec (BloscLZ, LZ4, LZ4HC, zlib, Zstandard) with
  no filter, the byte shuffle and the bit shuffle; B2ND chunks of several blocks padded at the
  chunk's far edges (3-D and 4-D); one-dimensional chunks of several blocks and a short last
  one; delta, which the filter passes as its "shuffle";
- PyTables, whose own Blosc2 path writes the chunks (2-D, 3-D and 1-D);
- python-blosc2 (c-blosc2 itself) making frames that h5py writes as the chunks
  (`write_direct_chunk`), for what the filter does not choose: bytedelta, delta before the
  shuffle, the shuffle by a meta byte, split modes, LZ4HC, bytes stored as they are, a value
  repeated over the chunk, chunks of zeros, NaNs and uninitialised values (frame offsets with
  the top bit set), and LZ4 and Zstandard dictionaries.
h5py reads every dataset back through hdf5plugin; the expected bytes are what it reads, but
for the uninitialised chunk, which c-blosc2 leaves as the buffer was (we give zeros).
"""

import gzip
import hashlib
import json
import os
import sys

import blosc2
import h5py
import hdf5plugin
import numpy as np
import tables

out = sys.argv[1]
path = os.path.join(out, "blosc2.h5")
OURS = {
    np.dtype("f8"): "f64", np.dtype("f4"): "f32", np.dtype("i8"): "i64", np.dtype("i4"): "i32",
    np.dtype("i2"): "i16", np.dtype("u1"): "u8",
}
writers = {}

# Data that compresses, so that chunks of several blocks stay small on disk, and that
# changes every few elements, so that a block placed wrong shows.
steps = ((np.arange(2_000_000) // 8) % 256).astype(np.float32) * 0.5 - 3
ints = (np.arange(400_000) // 6 % 1000 - 500).astype(np.int32)

B = hdf5plugin.Blosc2
with h5py.File(path, "w") as f:
    for cname in ["blosclz", "lz4", "lz4hc", "zlib", "zstd"]:
        for filters, tag in [(B.NOFILTER, "plain"), (B.SHUFFLE, "shuffle"), (B.BITSHUFFLE, "bitshuffle")]:
            name = f"{cname}_{tag}"
            f.create_dataset(name, data=steps[:64 * 200].reshape(64, 200), chunks=(32, 200), **B(cname=cname, clevel=5, filters=filters))
            writers[name] = "hdf5plugin"
    for name, data, chunks, opts in [
        ("padded_3d", steps[:37 * 130 * 129].reshape(37, 130, 129), (37, 130, 129), B(cname="zstd", clevel=5, filters=B.SHUFFLE)),
        ("padded_4d", (np.arange(9 * 17 * 33 * 65) // 5 % 251).astype(np.int32).reshape(9, 17, 33, 65), (9, 17, 33, 65), B(cname="zlib", clevel=9, filters=B.BITSHUFFLE)),
        ("edge_chunks", steps[:100 * 130].reshape(100, 130), (64, 64), B(cname="lz4", filters=B.BITSHUFFLE)),
        ("blocks_1d", steps[:300_001].astype(np.float64), (300_001,), B(cname="lz4", filters=B.SHUFFLE)),
        ("delta_2d", ints[:300 * 400].reshape(300, 400), (300, 400), B(cname="lz4", filters=3)),
        ("delta_3d", ints[:7 * 130 * 129].reshape(7, 130, 129), (7, 130, 129), B(cname="zstd", filters=3)),
        ("u8", (np.arange(100_000) % 7).astype(np.uint8).reshape(100, 1000), (50, 1000), B()),
        ("zeros", np.zeros((200, 300), np.float32), (100, 300), B()),
    ]:
        f.create_dataset(name, data=data, chunks=chunks, **opts)
        writers[name] = "hdf5plugin"

with tables.open_file(path, "a") as t:
    for name, data, chunks, flt in [
        ("pytables_zstd", steps[:600 * 700].reshape(600, 700), (100, 700), tables.Filters(complevel=5, complib="blosc2:zstd", shuffle=True)),
        ("pytables_lz4_3d", steps[:50 * 60 * 70].reshape(50, 60, 70), (10, 33, 70), tables.Filters(complevel=3, complib="blosc2:lz4", bitshuffle=True)),
        ("pytables_1d", steps[:100_001].astype(np.float64), (30_000,), tables.Filters(complevel=9, complib="blosc2:blosclz", shuffle=False)),
    ]:
        t.create_carray("/", name, obj=data, chunkshape=chunks, filters=flt)
        writers[name] = f"PyTables {tables.__version__}"

F, C = blosc2.Filter, blosc2.Codec


def frame(data, blocks=None, codec=C.ZSTD, clevel=5, filters=(F.SHUFFLE,), meta=(), splitmode=blosc2.SplitMode.AUTO_SPLIT, use_dict=False, kind="array"):
    """A frame of one chunk holding `data`, as the HDF5 filter would store it."""
    pipeline = [F.NOFILTER] * (6 - len(filters)) + list(filters)
    pipeline_meta = [0] * (6 - len(meta)) + list(meta)
    cparams = blosc2.CParams(codec=codec, clevel=clevel, filters=pipeline, filters_meta=pipeline_meta, typesize=data.dtype.itemsize, splitmode=splitmode, use_dict=use_dict)
    if data.ndim == 1:
        sc = blosc2.SChunk(chunksize=data.nbytes, cparams=cparams)
        sc.append_data(data)
        return bytes(sc.to_cframe())
    if kind == "full":
        a = blosc2.full(data.shape, data.flat[0], dtype=data.dtype, chunks=data.shape, blocks=blocks, cparams=cparams)
    else:
        a = blosc2.asarray(data, chunks=data.shape, blocks=blocks, cparams=cparams)
    return bytes(a.to_cframe())


def special(n, dtype, kind, value=None):
    """A one-dimensional frame whose one chunk is a special offset (or a repeated value)."""
    itemsize = np.dtype(dtype).itemsize
    sc = blosc2.SChunk(chunksize=n * itemsize, cparams=blosc2.CParams(typesize=itemsize))
    if value is None:
        sc.fill_special(n, kind)
    else:
        sc.fill_special(n, kind, value=value)
    return bytes(sc.to_cframe())


S = blosc2.SpecialValue
crafted = [
    ("bytedelta", (240, 500), np.int32, frame(ints[:240 * 500].reshape(240, 500), filters=(F.SHUFFLE, F.BYTEDELTA), blocks=(32, 500))),
    ("bytedelta_meta", (240, 500), np.float32, frame(steps[:240 * 500].reshape(240, 500), filters=(F.SHUFFLE, F.BYTEDELTA), meta=(0, 4), codec=C.LZ4, blocks=(17, 100))),
    ("delta_shuffle", (300, 400), np.int32, frame(ints[:300 * 400].reshape(300, 400), filters=(F.DELTA, F.SHUFFLE), blocks=(64, 64))),
    ("delta_1d", (30_003,), np.int64, frame(ints[:30_003].astype(np.int64), filters=(F.DELTA, F.BITSHUFFLE), codec=C.LZ4)),
    ("delta_padded", (3, 70, 129), np.int32, frame(ints[:3 * 70 * 129].reshape(3, 70, 129), filters=(F.DELTA,), blocks=(2, 32, 50), codec=C.BLOSCLZ, clevel=9)),
    ("trunc_meta", (200, 300), np.float32, frame(steps[:200 * 300].reshape(200, 300) + 0.1, filters=(F.TRUNC_PREC, F.SHUFFLE), meta=(10, 0), blocks=(50, 300))),
    ("shuffle_meta", (200, 300), np.float64, frame(steps[:200 * 300].astype(np.float64).reshape(200, 300), meta=(2,), codec=C.ZLIB, blocks=(40, 300))),
    ("lz4hc_always_split", (256, 256), np.float32, frame(steps[:256 * 256].reshape(256, 256), codec=C.LZ4HC, splitmode=blosc2.SplitMode.ALWAYS_SPLIT, blocks=(64, 256))),
    ("never_split", (256, 256), np.float32, frame(steps[:256 * 256].reshape(256, 256), splitmode=blosc2.SplitMode.NEVER_SPLIT, blocks=(64, 256))),
    ("memcpyed_padded", (40, 40), np.float32, frame(steps[:40 * 40].reshape(40, 40), clevel=0, blocks=(15, 15))),
    ("repeated_value", (120, 130), np.float64, frame(np.full((120, 130), 2.25), kind="full", blocks=(40, 130))),
    ("repeated_i16", (64, 65), np.int16, frame(np.full((64, 65), -7, np.int16), kind="full")),
    ("dict_zstd", (100, 400), np.int32, frame(ints[:100 * 400].reshape(100, 400), use_dict=True, blocks=(16, 400))),
    ("dict_lz4", (100, 400), np.int32, frame(ints[:100 * 400].reshape(100, 400), use_dict=True, codec=C.LZ4, blocks=(16, 400))),
    ("runs", (400, 400), np.int32, frame((np.repeat(np.arange(40, dtype=np.int32), 4000) + 0x01020300).reshape(400, 400), codec=C.LZ4, blocks=(100, 400))),
    ("special_nan_f32", (5000,), np.float32, special(5000, np.float32, S.NAN)),
    ("special_nan_f64", (5000,), np.float64, special(5000, np.float64, S.NAN)),
    ("special_zero", (5000,), np.int16, special(5000, np.int16, S.ZERO)),
    ("special_uninit", (5000,), np.float32, special(5000, np.float32, S.UNINIT)),
    ("special_value", (5000,), np.float64, special(5000, np.float64, S.VALUE, value=np.float64(1.5))),
]
with h5py.File(path, "a") as f:
    for name, shape, dtype, chunk in crafted:
        ds = f.create_dataset(name, shape=shape, dtype=dtype, chunks=shape, **B())
        ds.id.write_direct_chunk((0,) * len(shape), chunk)
        writers[name] = f"python-blosc2 {blosc2.__version__}"

# A small file of the same kinds, committed as it is: the fuzz target's seed (the big one
# decodes megabytes a run).
small_path = os.path.join(out, "blosc2_small.h5")
small = [
    ("padded_delta", (5, 7, 9), np.int32, frame(ints[:5 * 7 * 9].reshape(5, 7, 9), filters=(F.DELTA, F.SHUFFLE), blocks=(2, 4, 4), codec=C.LZ4)),
    ("bytedelta", (6, 50), np.float32, frame(steps[:300].reshape(6, 50), filters=(F.SHUFFLE, F.BYTEDELTA), blocks=(2, 50))),
    ("dict", (20, 40), np.int32, frame(ints[:800].reshape(20, 40), use_dict=True, blocks=(4, 40))),
    ("memcpyed", (10, 10), np.float32, frame(steps[:100].reshape(10, 10), clevel=0, blocks=(3, 3))),
    ("runs", (8, 100), np.int32, frame((np.arange(800, dtype=np.int32) // 100 + 0x01020300).reshape(8, 100), codec=C.LZ4, blocks=(2, 100))),
    ("repeated", (8, 9), np.float64, frame(np.full((8, 9), -0.5), kind="full")),
    ("special_nan", (64,), np.float32, special(64, np.float32, S.NAN)),
]
small_writers = {}
with h5py.File(small_path, "w") as f:
    f.create_dataset("plain_1d", data=steps[:1000].astype(np.float64), chunks=(400,), **B(cname="lz4", filters=B.BITSHUFFLE))
    small_writers["plain_1d"] = "hdf5plugin"
    for name, shape, dtype, chunk in small:
        ds = f.create_dataset(name, shape=shape, dtype=dtype, chunks=shape, **B())
        ds.id.write_direct_chunk((0,) * len(shape), chunk)
        small_writers[name] = f"python-blosc2 {blosc2.__version__}"

expected = {"files": {}, "versions": {"h5py": h5py.__version__, "hdf5plugin": hdf5plugin.version, "tables": tables.__version__, "blosc2": blosc2.__version__}}
for file, where, who in [("blosc2.h5.gz", path, writers), ("blosc2_small.h5", small_path, small_writers)]:
    table = expected["files"][file] = {}
    with h5py.File(where) as f:
        for name in sorted(who):
            data = f[name][()]
            if name == "special_uninit":
                data = np.zeros_like(data)
            table["/" + name] = {
                "shape": list(data.shape), "type": OURS[data.dtype],
                "sha256": hashlib.sha256(np.ascontiguousarray(data).tobytes()).hexdigest(),
                "writer": who[name],
            }
with open(os.path.join(out, "blosc2.json"), "w") as f:
    json.dump(expected, f, indent=1, sort_keys=True)
    f.write("\n")
with open(path, "rb") as raw, open(path + ".gz", "wb") as packed:
    packed.write(gzip.compress(raw.read(), compresslevel=9, mtime=0))
os.remove(path)
print("wrote", path + ".gz", os.path.getsize(path + ".gz"), "bytes,", len(writers), "datasets;", small_path, os.path.getsize(small_path), "bytes")
