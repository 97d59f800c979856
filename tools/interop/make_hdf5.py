"""Writes the HDF5 fixtures with h5py (and Keras 3 on the JAX backend) and records what h5py
reads from them in fixtures/interop/hdf5/expected.json: per file, per dataset path, its shape,
our element type name and its row-major little-endian bytes in hex; the datasets listed but
not read (`skipped`: not numbers; `unread`: a layout not read yet, with the reason's words).
Run in a throwaway environment:

    /tmp/onnxv/bin/pip install h5py hdf5plugin keras jax
    KERAS_BACKEND=jax /tmp/onnxv/bin/python tools/interop/make_hdf5.py fixtures/interop/hdf5

- other.h5: the file the others' external links name.
- h5py_default.h5: h5py's defaults (superblock 0, symbol-table groups, contiguous data):
  every numeric dtype, big-endian ones, bool, f16, 0-d, empty, nested groups named like
  Keras 2 weights, attributes, a compact dataset, a soft link, an external link, strings, a
  compound, chunked datasets (gzip, shuffle, fletcher32, edge chunks, chunks never written,
  a growable one), szip, h5py's LZF, hdf5plugin's Zstandard, LZ4, bzip2 and Blosc (every
  codec, every shuffle), bitshuffle (plain, LZ4, Zstandard), scale-offset (integers and
  floats), nbit (full precision: stored as is), Blosc2 (one-dimensional; the rest are in
  make_hdf5_blosc2.py), and ZFP (a filter we do not decode: listed as unread).
- h5py_latest.h5: libver="latest" (superblock 3, object header v2, link messages, and the
  chunk indexes of growable datasets: extensible arrays, v2 B-trees, paged fixed arrays).
- keras.weights.h5 and model.keras: a small Keras 3 model saved by Keras itself, and
  keras_sharded/: its weights saved sharded (`model.weights.json` and two shards).
"""

import json
import os
import sys

import h5py
import hdf5plugin
import numpy as np

out = sys.argv[1]
os.makedirs(out, exist_ok=True)

OURS = {
    np.dtype("f8"): "f64", np.dtype("f4"): "f32", np.dtype("f2"): "f16", np.dtype("i8"): "i64",
    np.dtype("i4"): "i32", np.dtype("i2"): "i16", np.dtype("i1"): "i8", np.dtype("u8"): "u64",
    np.dtype("u4"): "u32", np.dtype("u2"): "u16", np.dtype("u1"): "u8", np.dtype("bool"): "bool",
}


def record(table, name, array):
    a = np.asarray(array)
    le = a.astype(a.dtype.newbyteorder("<")) if a.dtype.byteorder == ">" else a
    table[name] = {"shape": list(a.shape), "type": OURS[le.dtype.newbyteorder("=")], "hex": np.ascontiguousarray(le).tobytes().hex()}


def numbers():
    rng = np.random.default_rng(5)
    f = rng.standard_normal((3, 4)).astype(np.float32)
    yield "f32", f
    yield "f64", f.astype(np.float64)
    yield "f16", f.astype(np.float16)
    yield "i8", np.array([-128, -1, 0, 127], np.int8)
    yield "u8", np.array([0, 255, 7], np.uint8)
    yield "i16", np.array([-32768, 2, 32767], np.int16)
    yield "u16", np.array([65535, 1], np.uint16)
    yield "i32", np.arange(-3, 3, dtype=np.int32).reshape(2, 3)
    yield "u32", np.array([2**32 - 1, 0], np.uint32)
    yield "i64", np.array([-(2**63), 2**63 - 1], np.int64)
    yield "u64", np.array([2**64 - 1, 3], np.uint64)
    yield "bool", np.array([[True, False], [False, True]])
    yield "be_f32", f.astype(">f4")
    yield "be_i64", np.array([1, -2, 3], ">i8")
    yield "scalar", np.array(2.5, np.float64)
    yield "empty", np.zeros((0, 3), np.float32)


def fill(f, table, skipped, unread, libver):
    for name, array in numbers():
        f.create_dataset(name, data=array)
        record(table, "/" + name, f[name][()])
    g = f.create_group("model_weights/dense")
    g.attrs["weight_names"] = [b"dense/kernel:0", b"dense/bias:0"]
    kernel = np.arange(6, dtype=np.float32).reshape(2, 3) / 8
    g.create_dataset("dense/kernel:0", data=kernel)
    g.create_dataset("dense/bias:0", data=np.array([0.5, -0.5, 1.0], np.float32))
    record(table, "/model_weights/dense/dense/kernel:0", kernel)
    record(table, "/model_weights/dense/dense/bias:0", np.array([0.5, -0.5, 1.0], np.float32))
    f["model_weights/dense/dense/kernel:0"].attrs["units"] = np.int64(3)
    f.attrs["keras_version"] = "2.15.0"
    f.attrs["backend"] = np.bytes_(b"tensorflow")
    f.attrs["step"] = np.int32(7)
    f.attrs["scale"] = np.float64(0.125)
    f.attrs["shape"] = np.array([2, 3], np.int64)
    # A compact dataset (data inside the object header).
    space = h5py.h5s.create_simple((4,))
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_layout(h5py.h5d.COMPACT)
    dsid = h5py.h5d.create(f.id, b"compact", h5py.h5t.NATIVE_INT32, space, dcpl=dcpl)
    dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, np.array([4, 3, 2, 1], np.int32))
    record(table, "/compact", np.array([4, 3, 2, 1], np.int32))
    f["soft_kernel"] = h5py.SoftLink("/model_weights/dense/dense/kernel:0")
    table["/soft_kernel"] = table["/model_weights/dense/dense/kernel:0"]
    # External links: to a dataset and to a group of other.h5 beside the file (followed); to
    # a file outside the folder and to a missing file (listed as not followed).
    f["elsewhere"] = h5py.ExternalLink("other.h5", "/x")
    f["elsewhere_group"] = h5py.ExternalLink("other.h5", "/g")
    f["outside"] = h5py.ExternalLink("../other.h5", "/x")
    f["missing"] = h5py.ExternalLink("missing.h5", "/x")
    for name in ["/elsewhere", "/elsewhere_group/a", "/elsewhere_group/b"]:
        record(table, name, f[name][()])
    unread.extend(["/outside", "/missing"])
    f.create_dataset("text", data=np.array([b"ab", b"cd"]))
    skipped.append("/text")
    f.create_dataset("table", data=np.array([(1, 2.0)], dtype=[("a", "i4"), ("b", "f8")]))
    skipped.append("/table")
    f.create_dataset("chunked", data=np.arange(100, dtype=np.float32), chunks=(10,), compression="gzip", shuffle=True)
    record(table, "/chunked", f["chunked"][()])
    grid = (np.arange(7 * 9, dtype=np.int32).reshape(7, 9) * 3 - 50).astype(">i4")
    f.create_dataset("chunked_edges", data=grid, chunks=(3, 4), compression="gzip", compression_opts=9, shuffle=True, fletcher32=True)
    record(table, "/chunked_edges", f["chunked_edges"][()])
    f.create_dataset("chunked_plain", data=np.arange(24, dtype=np.float64).reshape(2, 3, 4), chunks=(1, 2, 4))
    record(table, "/chunked_plain", f["chunked_plain"][()])
    sparse = f.create_dataset("chunked_unwritten", shape=(10, 10), dtype=np.float32, chunks=(5, 5))
    sparse[0:5, 0:5] = 1.5
    record(table, "/chunked_unwritten", f["chunked_unwritten"][()])
    # Growable datasets: under libver "latest", one unlimited dimension is indexed by an
    # extensible array (its index block, data blocks and super blocks), more by a version 2
    # B-tree; room to grow without an unlimited dimension by a fixed array over the maximum
    # dimensions, paged when it has more than 1024 chunks. Under "earliest", v1 B-trees.
    grows = f.create_dataset("growable", data=np.arange(6, dtype=np.int16), chunks=(4,), maxshape=(None,))
    record(table, "/growable", grows[()])
    many = f.create_dataset("growable_many", shape=(300,), dtype=np.float32, chunks=(1,), maxshape=(None,))
    # Chunks 0-3 in the index block, 4-5 and 100-101 in its data blocks, 250-253 in a super
    # block's (few written: the damage sweep reads every chunk of every damaged copy).
    many[0:6] = np.arange(6, dtype=np.float32) + 0.5
    many[100:102] = 7.25
    many[250:254] = -np.arange(4, dtype=np.float32)
    record(table, "/growable_many", many[()])
    gz = f.create_dataset("growable_gzip", data=np.arange(600, dtype=np.int32).reshape(200, 3) * 7, chunks=(20, 3), maxshape=(None, 3), compression="gzip", shuffle=True)
    record(table, "/growable_gzip", gz[()])
    cols = f.create_dataset("growable_columns", data=np.arange(45, dtype=np.float64).reshape(5, 9), chunks=(2, 2), maxshape=(5, None))
    record(table, "/growable_columns", cols[()])
    # 90 chunks: more than a leaf of the v2 B-tree holds, so it has an internal node.
    both = f.create_dataset("growable_both", data=(np.arange(360, dtype=np.int16).reshape(18, 20) - 300), chunks=(2, 2), maxshape=(None, None))
    record(table, "/growable_both", both[()])
    both_gz = f.create_dataset("growable_both_gzip", shape=(30, 20), dtype=np.float64, chunks=(3, 4), maxshape=(None, 40), compression="gzip", shuffle=True)
    both_gz[0:12, :] = np.arange(240, dtype=np.float64).reshape(12, 20) / 4
    both_gz[21:30, 4:12] = 9.0
    record(table, "/growable_both_gzip", both_gz[()])
    room = f.create_dataset("room_to_grow", data=np.arange(10, dtype=np.uint16), chunks=(3,), maxshape=(20,))
    record(table, "/room_to_grow", room[()])
    room2 = f.create_dataset("room_to_grow_2d", data=np.arange(30, dtype=np.int64).reshape(5, 6), chunks=(2, 4), maxshape=(10, 12))
    record(table, "/room_to_grow_2d", room2[()])
    # h5py's own LZF filter: chunks that shrink, an edge, and chunks of random bytes that LZF
    # cannot shrink (stored as they are, the filter skipped in the chunk's mask).
    lzf_rng = np.random.default_rng(13)
    for name, data, chunks, shuffle in [
        ("lzf", np.arange(10, dtype=np.float32), (5,), False),
        ("lzf_shuffled", np.repeat(np.linspace(-1, 1, 40, dtype=np.float32), 30).reshape(40, 30), (16, 30), True),
        ("lzf_edges", (np.arange(63, dtype=np.int16) % 7).reshape(7, 9), (3, 4), False),
        ("lzf_random", lzf_rng.integers(0, 256, (4, 300), dtype=np.uint8), (2, 300), False),
    ]:
        f.create_dataset(name, data=data, chunks=chunks, compression="lzf", shuffle=shuffle)
        record(table, "/" + name, f[name][()])
    # Filters of hdf5plugin: its Zstandard, LZ4 and bzip2. LZ4 with blocks of 200 bytes, so that a chunk holds several, the last one
    # shorter, and random bytes that LZ4 cannot shrink (those blocks stored as they are).
    f.create_dataset("zstd", data=np.repeat(np.arange(50, dtype=np.float64), 8).reshape(20, 20), chunks=(8, 20), shuffle=True, **hdf5plugin.Zstd(clevel=3))
    record(table, "/zstd", f["zstd"][()])
    lz4_rng = np.random.default_rng(17)
    lz4_data = np.repeat(np.arange(30, dtype=np.float32), 20).reshape(30, 20)
    lz4_data[10:14] = lz4_rng.standard_normal((4, 20), dtype=np.float32)
    f.create_dataset("lz4", data=lz4_data, chunks=(16, 20), **hdf5plugin.LZ4(nbytes=200))
    record(table, "/lz4", f["lz4"][()])
    f.create_dataset("lz4_shuffled", data=np.arange(1000, dtype=np.int64).reshape(40, 25), chunks=(16, 25), shuffle=True, **hdf5plugin.LZ4())
    record(table, "/lz4_shuffled", f["lz4_shuffled"][()])
    f.create_dataset("bzip2", data=(np.arange(600, dtype=np.int32) % 37).reshape(20, 30), chunks=(7, 30), **hdf5plugin.BZip2(blocksize=1))
    record(table, "/bzip2", f["bzip2"][()])
    # Blosc (c-blosc 1.x): each codec, each shuffle. Chunks past 64 KiB for
    # BloscLZ and LZ4, so that a chunk holds a block of 64 KiB split into byte streams and a
    # shorter last block that is not; bit shuffles of a count of elements divisible by 8 and
    # not (left as it is); a chunk too small to compress and random bytes (both stored as
    # they are, the filter skipped in the chunk's mask).
    blosc_rng = np.random.default_rng(19)
    steps = np.repeat(np.arange(1000, dtype=np.float32), 25) / 8
    B = hdf5plugin.Blosc
    for name, data, chunks, opts in [
        ("blosc", np.arange(10, dtype=np.float32), (5,), B()),
        ("blosc_blosclz", steps.reshape(250, 100), (250, 100), B(cname="blosclz", clevel=1, shuffle=B.SHUFFLE)),
        ("blosc_lz4_bitshuffle", (np.arange(50000, dtype=np.int16) % 100).reshape(2, 25000), (2, 25000), B(cname="lz4", clevel=1, shuffle=B.BITSHUFFLE)),
        ("blosc_lz4hc", steps.astype(np.float64)[:600:2].reshape(15, 20), (8, 20), B(cname="lz4hc", clevel=4, shuffle=B.SHUFFLE)),
        ("blosc_zlib", (np.arange(3000, dtype=np.uint8) % 13).reshape(60, 50), (60, 50), B(cname="zlib", clevel=6, shuffle=B.NOSHUFFLE)),
        ("blosc_zlib_bitshuffle_odd", steps[:1003:3].copy(), (335,), B(cname="zlib", clevel=6, shuffle=B.BITSHUFFLE)),
        ("blosc_snappy", steps[::7].reshape(-1, 1), (1000, 1), B(cname="snappy", clevel=5, shuffle=B.SHUFFLE)),
        ("blosc_zstd", steps.astype(np.float64)[:500:5].reshape(5, 20), (5, 20), B(cname="zstd", clevel=3, shuffle=B.SHUFFLE)),
        ("blosc_random", blosc_rng.integers(0, 256, (8, 300), dtype=np.uint8), (8, 300), B(cname="blosclz", clevel=9, shuffle=B.NOSHUFFLE)),
    ]:
        f.create_dataset(name, data=data, chunks=chunks, **opts)
        record(table, "/" + name, f[name][()])
    # HDF5's scale-offset filter: integers with the bit count worked out (0) or given, both
    # byte orders, zeros among them (the default fill value, coded as all ones), floats scaled
    # by 10^2 and 10^4, a fill value of its own, edge chunks.
    so_rng = np.random.default_rng(23)
    for name, data, chunks, opts in [
        ("so_i32", (so_rng.integers(-500, 500, (30, 17)) * (so_rng.random((30, 17)) > 0.2)).astype(np.int32), (8, 10), dict(scaleoffset=0)),
        ("so_u16_bits", so_rng.integers(0, 4000, (50,)).astype(np.uint16), (16,), dict(scaleoffset=12)),
        ("so_i8", so_rng.integers(-128, 127, (40,)).astype(np.int8), (40,), dict(scaleoffset=0)),
        ("so_u64", (so_rng.integers(0, 2**40, (20,)).astype(np.uint64) + np.uint64(2**63)), (7,), dict(scaleoffset=0)),
        ("so_be_i32", so_rng.integers(-(2**20), 2**20, (25,)).astype(">i4"), (10,), dict(scaleoffset=0)),
        ("so_f32", (so_rng.standard_normal((12, 9)) * 10).astype(np.float32), (5, 9), dict(scaleoffset=2)),
        ("so_f64", so_rng.standard_normal((40,)) * 1000, (16,), dict(scaleoffset=4)),
        ("so_f32_fill", np.where(so_rng.random(30) > 0.7, -1.5, so_rng.standard_normal(30)).astype(np.float32), (10,), dict(scaleoffset=3, fillvalue=-1.5)),
        ("so_i16_full", so_rng.integers(-30000, 30000, (20,)).astype(np.int16), (8,), dict(scaleoffset=16)),
    ]:
        f.create_dataset(name, data=data, chunks=chunks, **opts)
        record(table, "/" + name, f[name][()])
    # The bitshuffle filter (hdf5plugin): no compression, LZ4 and Zstandard; the default
    # block (about 8 KiB) and one of 64 elements, so that a chunk holds several blocks and a
    # shorter last one; element counts that leave a tail of fewer than 8 elements as they
    # are; one-byte elements; random bytes LZ4 cannot shrink.
    bs_rng = np.random.default_rng(29)
    BS = hdf5plugin.Bitshuffle
    for name, data, chunks, opts in [
        ("bitshuffle", np.linspace(-3, 3, 1000, dtype=np.float32), (333,), BS(cname="none")),
        ("bitshuffle_lz4", (np.arange(909, dtype=np.uint16) * 7 % 1000).reshape(9, 101), (3, 101), BS(nelems=64, cname="lz4")),
        ("bitshuffle_zstd", np.round(np.arange(2200) / 9.0).reshape(2, 1100), (1, 1100), BS(cname="zstd", clevel=5)),
        ("bitshuffle_u8", (np.arange(9003) % 17).astype(np.uint8).reshape(3, 3001), (3, 3001), BS(cname="lz4")),
        ("bitshuffle_random", bs_rng.integers(-(2**31), 2**31 - 1, (4, 100), dtype=np.int32), (4, 100), BS(nelems=128, cname="lz4")),
    ]:
        f.create_dataset(name, data=data, chunks=chunks, **opts)
        record(table, "/" + name, f[name][()])
    # HDF5's nbit filter, set on the property list (h5py has no keyword for it). On types of
    # full precision, the only ones h5py makes (HDF 2.0 refuses others unless told), HDF5
    # marks it "need not compress" and stores the chunks as they are; once with deflate.
    for name, data, deflate in [
        ("nbit_i32", (np.arange(50, dtype=np.int32) * 997 - 20000).reshape(5, 10), False),
        ("nbit_f64_deflate", np.linspace(-1, 1, 30), True),
    ]:
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk((2,) + data.shape[1:] if data.ndim > 1 else (8,))
        dcpl.set_filter(5, h5py.h5z.FLAG_OPTIONAL, ())
        if deflate:
            dcpl.set_deflate(4)
        space = h5py.h5s.create_simple(data.shape)
        h5py.h5d.create(f.id, name.encode(), h5py.h5t.py_create(data.dtype), space, dcpl=dcpl)
        f[name][...] = data
        record(table, "/" + name, f[name][()])
    # Blosc2 (hdf5plugin), one-dimensional; make_hdf5_blosc2.py writes the others.
    f.create_dataset("blosc2", data=np.arange(10, dtype=np.int32), chunks=(5,), **hdf5plugin.Blosc2())
    record(table, "/blosc2", f["blosc2"][()])
    # szip (libaec in h5py's wheels), decoded by our own decoder (docs/decisions.md): every
    # sample width (32- and 64-bit pixels are coded as byte planes), both byte orders, the
    # predictor and entropy coding alone, scanlines padded to whole blocks (13, 30 pixels),
    # runs of zero blocks, low-entropy blocks (second extension) and raw blocks.
    rng = np.random.default_rng(11)
    for name, data, chunks, opts in [
        ("szip_nn_i32", np.arange(1000, dtype=np.int32).reshape(25, 40) * 7 - 300, (5, 40), ("nn", 8)),
        ("szip_ec_f64", rng.standard_normal((12, 10)), (6, 10), ("ec", 16)),
        ("szip_nn_u16", (rng.integers(0, 5000, (9, 13))).astype(np.uint16), (3, 13), ("nn", 8)),
        ("szip_nn_be_f32", rng.standard_normal((8, 30)).astype(">f4"), (4, 30), ("nn", 32)),
        ("szip_ec_u8_runs", np.repeat(rng.integers(0, 3, 20), 40).astype(np.uint8).reshape(20, 40), (10, 40), ("ec", 4)),
        ("szip_nn_i64", rng.integers(-(2**62), 2**62, (6, 16)), (3, 16), ("nn", 2)),
        ("szip_ec_i16_raw", rng.integers(-32768, 32767, (4, 64), endpoint=True).astype("<i2"), (2, 64), ("ec", 32)),
    ]:
        f.create_dataset(name, data=data, chunks=chunks, compression="szip", compression_opts=opts)
        record(table, "/" + name, f[name][()])
    # ZFP (hdf5plugin), a lossy filter we do not decode: listed as unread. Last, so that the
    # datasets before it keep their places in the file.
    f.create_dataset("zfp", data=np.linspace(0, 1, 64, dtype=np.float32).reshape(8, 8), chunks=(4, 8), **hdf5plugin.Zfp(rate=8))
    unread.append("/zfp")


expected = {"files": {}, "skipped": {}, "unread": {}}
# The file the others' external links name.
with h5py.File(os.path.join(out, "other.h5"), "w") as f:
    table = {}
    f.create_dataset("x", data=np.array([[1.5, -2.0], [3.25, 4.0]], np.float32))
    f.create_dataset("g/a", data=np.arange(5, dtype=np.int64))
    f.create_dataset("g/b", data=np.arange(40, dtype=np.uint16).reshape(8, 5), chunks=(3, 5), compression="gzip")
    for name in ["/x", "/g/a", "/g/b"]:
        record(table, name, f[name][()])
    expected["files"]["other.h5"] = table
for file, libver in [("h5py_default.h5", "earliest"), ("h5py_latest.h5", "latest")]:
    table, skipped, unread = {}, [], []
    with h5py.File(os.path.join(out, file), "w", libver=libver) as f:
        fill(f, table, skipped, unread, libver)
    expected["files"][file], expected["skipped"][file], expected["unread"][file] = table, skipped, unread

# Paged chunk indexes (pages of 1024 entries, some never written: their bitmap bits clear):
# fixed arrays of more than 1024 chunks, and extensible arrays whose data blocks hold more
# (super block 13 and on, past chunk 131,060: 140,000 one-byte chunks, a few written). The
# file is mostly unset addresses, so it is committed gzipped (the damage sweep's time stays
# on the files above); expected.json keeps each dataset's SHA-256 (its row-major bytes).
import gzip  # noqa: E402
import hashlib  # noqa: E402

paged_path = os.path.join(out, "paged_ea.h5")
expected["gzipped"] = {"paged_ea.h5": {}}
with h5py.File(paged_path, "w", libver="latest") as f:
    for name, kw in [("paged", {}), ("paged_gzip", {"compression": "gzip"})]:
        d = f.create_dataset(name, shape=(140000,), dtype=np.uint8, chunks=(1,), maxshape=(None,), **kw)
        d[0:10] = np.arange(10) + 1
        d[132000:132100] = np.arange(100) + 3
        d[134200:134300] = 200
    d = f.create_dataset("many_chunks", shape=(2100,), dtype=np.uint8, chunks=(1,))
    d[0:40] = np.arange(40, dtype=np.uint8)
    d[2050:2090] = 255 - np.arange(40, dtype=np.uint8)
    d = f.create_dataset("many_chunks_gzip", shape=(1100,), dtype=np.int16, chunks=(1,), compression="gzip")
    d[1030:1060] = -np.arange(30, dtype=np.int16)
    for name in f:
        data = f[name][()]
        expected["gzipped"]["paged_ea.h5"]["/" + name] = {"shape": list(data.shape), "type": OURS[data.dtype], "sha256": hashlib.sha256(data.tobytes()).hexdigest()}
with open(paged_path, "rb") as raw, open(paged_path + ".gz", "wb") as packed:
    packed.write(gzip.compress(raw.read(), compresslevel=9, mtime=0))
os.remove(paged_path)

# Keras 3, saving a small model itself.
import keras  # noqa: E402

keras.utils.set_random_seed(3)
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, name="dense"), keras.layers.Dense(2, name="head")])
model.save_weights(os.path.join(out, "keras.weights.h5"))
model.save(os.path.join(out, "model.keras"))
table = {}
with h5py.File(os.path.join(out, "keras.weights.h5"), "r") as f:
    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            record(table, "/" + name, obj[()])
    f.visititems(visit)
expected["files"]["keras.weights.h5"] = table
expected["files"]["model.keras"] = table
expected["keras_version"] = keras.__version__
# Keras's sharded weights: an index of variable groups, each group with the shards that hold
# its variables; shards of at most 50 bytes, so that the first layer's kernel and bias land
# in two shards. Expected: what h5py reads from each shard.
sharded = os.path.join(out, "keras_sharded")
os.makedirs(sharded, exist_ok=True)
for old in os.listdir(sharded):
    os.remove(os.path.join(sharded, old))
model.save_weights(os.path.join(sharded, "model.weights.json"), max_shard_size=50 / 1024**3)
table = {}
for shard in sorted(os.listdir(sharded)):
    if shard.endswith(".h5"):
        with h5py.File(os.path.join(sharded, shard), "r") as f:
            def visit(name, obj):
                if isinstance(obj, h5py.Dataset):
                    record(table, "/" + name, obj[()])
            f.visititems(visit)
expected["keras_sharded"] = table

with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump(expected, f, indent=1, sort_keys=True)
    f.write("\n")
print("wrote", sorted(expected["files"]), "h5py", h5py.__version__, "keras", keras.__version__)
