"""Sharded sets wherever a path goes: ztio.open, safe_open and every load_file take a
`*.index.json`, and a model folder (its index, or its one file)."""

import collections.abc
import json
import os

import numpy as np
import pytest

import ztio
import ztio.numpy


@pytest.fixture
def model(tmp_path):
    """A two-shard set as transformers writes one, in a model folder with a config."""
    shards = {
        "model-00001-of-00002.safetensors": {"embed.weight": np.arange(6, dtype=np.float32).reshape(2, 3)},
        "model-00002-of-00002.safetensors": {
            "layer.0.weight": np.ones((3, 3), np.float32),
            "layer.0.bias": np.zeros(3, np.float32),
        },
    }
    weight_map = {}
    for file, tensors in shards.items():
        ztio.numpy.save_file(tensors, tmp_path / file)
        weight_map.update({name: file for name in tensors})
    index = {"metadata": {"total_size": 60}, "weight_map": weight_map}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    (tmp_path / "config.json").write_text("{}")
    expected = {k: v for t in shards.values() for k, v in t.items()}
    return tmp_path, expected


def test_open_takes_an_index_and_a_folder(model):
    folder, expected = model
    for path in (folder / "model.safetensors.index.json", folder):
        with ztio.open(path) as f:
            assert isinstance(f, ztio.ShardedFile)
            assert f.keys() == sorted(expected)
            assert "embed.weight" in f and "nope" not in f
            for name, want in expected.items():
                assert np.array_equal(f.get_tensor(name), want)
            assert f.get_slice("layer.0.weight")[1:2].shape == (1, 3)
            assert f.metadata() == {"total_size": "60"}
            assert f.verify()
            with pytest.raises(ztio.NotFoundError):
                f.get_tensor("nope")


def test_files_and_sets_are_read_only_mappings_read_in_file_order(model, tmp_path):
    folder, expected = model
    single = tmp_path / "one.safetensors"
    ztio.numpy.save_file(expected, single)
    for path in (folder, single):
        with ztio.open(path) as f:
            assert isinstance(f, collections.abc.Mapping)
            assert f.get("nope") is None and f.get("nope", 7) == 7
            assert np.array_equal(f.get("embed.weight"), expected["embed.weight"])
            items = dict(f.items())
            assert items.keys() == expected.keys() and len(f.items()) == len(expected)
            assert all(np.array_equal(items[k], v) for k, v in expected.items())
            assert len(list(f.values())) == len(expected)
            # File order (a set's: the order the shards' bytes come in, which may vary).
            order = [name for name, _ in f.items()]
            assert sorted(order) == sorted(expected)
            if path == single:
                assert order == f.offset_keys()
            assert ("nope", None) not in f.items()
            hash(f)  # a file stays hashable: Mapping's == (a read of every tensor) is not taken


def test_load_file_and_safe_open_take_sets(model):
    folder, expected = model
    index = folder / "model.safetensors.index.json"
    loaded = ztio.numpy.load_file(index)
    assert set(loaded) == set(expected)
    assert loaded["embed.weight"].flags.writeable
    with ztio.safe_open(folder, framework="np") as f:
        assert np.array_equal(f.get_tensor("layer.0.bias"), expected["layer.0.bias"])


def test_a_shard_that_disagrees_with_the_index_is_refused_when_read(model):
    folder, _ = model
    ztio.numpy.save_file({"other": np.ones(1, np.float32)}, folder / "model-00002-of-00002.safetensors")
    with ztio.open(folder) as f:
        assert np.array_equal(f.get_tensor("embed.weight"), np.arange(6, dtype=np.float32).reshape(2, 3))
        with pytest.raises(ztio.FileError, match="index does not list"):
            f.get_tensor("layer.0.bias")


def test_as_read_hands_every_tensor_over_once_as_it_comes_in(model):
    folder, expected = model
    with ztio.open(folder) as f:
        got = list(f.as_read())
        names = [name for name, _ in got]
        assert sorted(names) == sorted(expected) and len(set(names)) == len(names)
        # Each shard's tensors come in file order; which shard comes first is the disk's call.
        by_shard = {}
        for name in names:
            by_shard.setdefault(f._set.shard_of(name), []).append(name)
        for shard, in_order in by_shard.items():
            reader = f._shard(shard)._native
            starts = [reader.info(n)["components"][0]["offset"] for n in in_order]
            assert starts == sorted(starts), shard
        for name, array in got:
            assert np.array_equal(array, expected[name])
    # A single file: every tensor in file order.
    single = folder / "model-00002-of-00002.safetensors"
    with ztio.open(single) as f:
        assert [n for n, _ in f.as_read()] == f.offset_keys() == ["layer.0.bias", "layer.0.weight"]


def test_as_read_raises_a_bad_shards_error_after_the_tensors_that_came_in(model):
    folder, expected = model
    (folder / "model-00002-of-00002.safetensors").write_bytes(b"not a tensor file at all")
    seen = []
    with ztio.open(folder) as f:
        with pytest.raises(ztio.Error, match="model-00002-of-00002"):
            for name, _ in f.as_read():
                seen.append(name)
    assert set(seen) <= set(expected)


def test_a_missing_shard_is_refused_at_open(model):
    folder, _ = model
    (folder / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(ztio.Error):
        ztio.open(folder)


def test_a_whole_set_load_reads_every_shard_in_first_and_names_a_bad_one(model, monkeypatch):
    """numpy's arrays are views: the set's are made at once while one stream reads the shards
    in behind them (the caller's work follows it, as a single file's load). Without maps each
    array is a copy, made as its bytes come in (:meth:`ShardedFile._arrivals`)."""
    folder, expected = model
    index = folder / "model.safetensors.index.json"
    calls = []
    for way in ("_arrivals", "_views_read_behind"):
        real = getattr(ztio.ShardedFile, way)

        def counted(self, *args, _real=real, _way=way):
            calls.append(_way)
            return _real(self, *args)

        monkeypatch.setattr(ztio.ShardedFile, way, counted)
    loaded = ztio.numpy.load_file(index)
    assert calls == ["_views_read_behind"]
    # Shard by shard, each in file order (safetensors' order for a file), whatever order
    # the shards came in.
    with ztio.open(index) as f:
        assert list(loaded) == f.offset_keys() == ["embed.weight", "layer.0.bias", "layer.0.weight"]
    for name, want in expected.items():
        assert np.array_equal(loaded[name], want)
        assert not loaded[name].flags.owndata, name  # a view of its shard's map
    calls.clear()
    copied = ztio.numpy.load_file(index, backend="pread")
    assert calls == ["_views_read_behind", "_arrivals"]
    for name, want in expected.items():
        assert np.array_equal(copied[name], want)
    # A single file is not a set: nothing to read ahead of the loop.
    calls.clear()
    ztio.numpy.load_file(folder / "model-00001-of-00002.safetensors")
    assert calls == []
    # A shard that is no tensor file fails the whole load, naming it, either way.
    (folder / "model-00002-of-00002.safetensors").write_bytes(b"not a tensor file at all")
    for backend in ("mmap", "pread"):
        with pytest.raises(ztio.Error, match="model-00002-of-00002"):
            ztio.numpy.load_file(index, backend=backend)


def _four_tensor_set(tmp_path, index_name):
    """Four tensors of 16 KiB each, written as a set of shards of at most 20 KB under
    ``tmp_path/set/index_name``: the arrays and the index."""
    arrays = {f"t{i}": np.full(4096, i, np.float32) for i in range(4)}
    src = tmp_path / "m.zt"
    ztio.save_file(arrays, src)
    index = tmp_path / "set" / index_name
    os.makedirs(index.parent)
    ztio.convert(src, index, shard_size=20_000, progress=False)
    return arrays, index


def test_verify_of_a_set_names_the_damaged_shard(tmp_path):
    _, index = _four_tensor_set(tmp_path, "m.zt.index.json")
    with ztio.open(index) as f:
        shards = f.shards
        assert len(shards) > 1
        assert f.verify()
    # One bit of t1's values (all 1.0) flipped, in the shard that holds t1.
    with open(index) as f:
        holder = index.parent / json.load(f)["weight_map"]["t1"]
    data = bytearray(open(holder, "rb").read())
    at = data.index(np.full(16, 1, np.float32).tobytes())
    data[at + 2] ^= 0x10
    open(holder, "wb").write(bytes(data))
    report = ztio.verify(index)
    assert not report
    (error,) = report.errors
    assert isinstance(error, ztio.ChecksumError)
    assert error.object == "t1"
    assert os.path.samefile(error.path, holder)


def test_a_set_converts_to_zt_v2s_own_shards(tmp_path):
    arrays, index = _four_tensor_set(tmp_path, "m.safetensors.index.json")
    root = tmp_path / "own.zt"
    ztio.convert(index, root, shard_size=40_000, progress=False)
    assert sorted(p.name for p in tmp_path.glob("own-*.zt")) == [
        "own-00001-of-00002.zt",
        "own-00002-of-00002.zt",
    ]
    assert ztio.verify(root)
    with ztio.open(root) as f:
        for name, want in arrays.items():
            np.testing.assert_array_equal(f.get_tensor(name), want)


def test_a_closed_set_opens_no_shard_again_and_answers_as_a_closed_file(model):
    folder, _ = model
    f = ztio.open(folder)
    it = f.as_read()
    next(it)
    f.close()
    with pytest.raises(ztio.ArgumentError, match="closed"):
        list(it)
    with pytest.raises(ztio.ArgumentError, match="closed"):
        f.offset_keys()
    with pytest.raises(ztio.ArgumentError, match="closed"):
        f.get_tensor("embed.weight")
    assert f._shards == {}
    # A slice made before the close reads on, as safetensors' do.
    g = ztio.open(folder)
    rows = g.get_slice("embed.weight")
    whole = g.get_tensor("embed.weight")
    g.close()
    np.testing.assert_array_equal(rows[:2], whole[:2])
    # The rest of the surface answers as a closed File's does.
    for ask in (f.keys, f.metadata, lambda: len(f), lambda: "embed.weight" in f, lambda: f.attributes):
        with pytest.raises(ztio.ArgumentError, match="closed"):
            ask()


TF_SETS = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "interop", "tensorflow")


@pytest.mark.parametrize(
    "kind,path",
    [("h5", "h5/tf_model.h5.index.json"), ("h5", "h5"), ("safetensors", "safetensors/model.safetensors.index.json")],
)
def test_transformers_tensorflow_sets_name_tensors_as_their_shards_do(kind, path):
    """transformers' sharded TensorFlow models (fixtures/interop/tensorflow, written by
    transformers itself): the index lists `tf_bert_model/bert/...:0`, the shards hold
    `bert/...:0`; the set gives the shards' names and their bytes, by index or folder."""
    with open(os.path.join(TF_SETS, "expected.json")) as f:
        want = json.load(f)[kind]
    full = os.path.join(TF_SETS, path)
    with ztio.open(full) as f:
        assert sorted(f.keys()) == sorted(want)
    loaded = ztio.numpy.load_file(full)
    assert {n: a.tobytes().hex() for n, a in loaded.items()} == {n: w["hex"] for n, w in want.items()}
    assert {n: list(a.shape) for n, a in loaded.items()} == {n: w["shape"] for n, w in want.items()}


def test_a_split_gguf_model_opens_whole_from_any_of_its_files():
    # llama.cpp's llama-gguf-split wrote the three files (tools/interop/make_gguf_split.py) of
    # the model in fixtures/interop/ggml/to_gguf.
    here = os.path.dirname(os.path.abspath(__file__))
    interop = os.path.join(here, "..", "..", "fixtures", "interop")
    split = os.path.join(interop, "gguf", "split", "llama-q4_0-00002-of-00003.gguf")
    whole = os.path.join(interop, "ggml", "to_gguf", "llama-ggjt-v3-q4_0.gguf")
    with ztio.open(split) as s, ztio.open(whole) as w:
        assert len(s.shards) == 3
        assert sorted(s.keys()) == sorted(w.keys())
        assert s.attributes == w.attributes
        assert "split.count" not in s.attributes
        for name in w.keys():
            assert s.component(name, "data").tobytes() == w.component(name, "data").tobytes()


def test_convert_writes_a_gguf_model_in_splits(tmp_path):
    here = os.path.dirname(os.path.abspath(__file__))
    whole = os.path.join(here, "..", "..", "fixtures", "interop", "ggml", "to_gguf", "llama-ggjt-v3-q4_0.gguf")
    ztio.convert(whole, str(tmp_path / "m.gguf"), shard_size="4KB")
    first = tmp_path / "m-00001-of-00003.gguf"
    with ztio.open(str(first)) as s, ztio.open(whole) as w:
        assert len(s.shards) == 3
        assert s.attributes == w.attributes
        assert sorted(s.keys()) == sorted(w.keys())


def test_upgrade_and_rm_take_a_set_into_one_file(model, tmp_path_factory):
    folder, expected = model
    out = tmp_path_factory.mktemp("out")
    ztio.upgrade(folder, out / "up.zt", progress=False)
    ztio.rm(folder / "model.safetensors.index.json", ["layer.0.bias"], out / "rm.zt", progress=False)
    with ztio.open(out / "up.zt") as f:
        assert sorted(f.keys()) == sorted(expected)
        for name, want in expected.items():
            np.testing.assert_array_equal(f.get_tensor(name), want)
    with ztio.open(out / "rm.zt") as f:
        assert sorted(f.keys()) == ["embed.weight", "layer.0.weight"]
    with pytest.raises(ztio.NotFoundError, match='no object named "absent"'):
        ztio.rm(folder, ["absent"], out / "none.zt", progress=False)
    assert not (out / "none.zt").exists()
    with pytest.raises(ztio.NotFoundError, match='named "layer.0.bais"; did you mean "layer.0.bias"'):
        ztio.rm(folder, ["layer.0.bais"], out / "none.zt", progress=False)
    with ztio.open(folder) as f:
        with pytest.raises(ztio.NotFoundError) as e:
            f.get_tensor("model.layer.0.bias")
        assert "did you mean 'layer.0.bias'" in str(e.value)
