"""ztio.torch: the safetensors.torch functions, when torch is installed (skipped otherwise)."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import ztio  # noqa: E402
import ztio.torch  # noqa: E402


def test_torch_round_trip_of_every_dtype(tmp_path):
    tensors = {
        "f32": torch.randn(3, 4),
        "bf16": torch.randn(2, 2).to(torch.bfloat16),
        "f16": torch.randn(5).to(torch.float16),
        "i64": torch.arange(6).reshape(2, 3),
        "u8": torch.arange(4, dtype=torch.uint8),
        "b": torch.tensor([True, False]),
        "e4m3": torch.randn(4).to(torch.float8_e4m3fn),
        "e5m2": torch.randn(4).to(torch.float8_e5m2),
        "c64": torch.randn(3, dtype=torch.complex64),
    }
    for name in ("t.zt", "t.safetensors"):
        # safetensors has C64 only in recent versions of its format; ours writes it too,
        # but the round trip is checked on the .zt file.
        written = {k: v for k, v in tensors.items() if not (name.endswith("safetensors") and k == "c64")}
        ztio.torch.save_file(written, tmp_path / name, metadata={"m": "1"})
        back = ztio.torch.load_file(tmp_path / name)
        assert set(back) == set(written)
        for k, v in back.items():
            want = tensors[k].contiguous()
            assert v.dtype == want.dtype and v.shape == want.shape, k
            # Compared as bytes: FP8 has no equality in torch, and NaN != NaN.
            assert torch.equal(v.reshape(-1).view(torch.uint8), want.reshape(-1).view(torch.uint8)), k


def test_safe_open_pt(tmp_path):
    ztio.numpy.save_file({"w": np.ones((2, 3), np.float32)}, tmp_path / "m.safetensors")
    with ztio.safe_open(tmp_path / "m.safetensors", framework="pt") as f:
        w = f.get_tensor("w")
        assert isinstance(w, torch.Tensor) and w.shape == (2, 3)
        w += 1  # a copy: writable, and the file is untouched
    assert ztio.numpy.load_file(tmp_path / "m.safetensors")["w"].sum() == 6


def test_empty_tensors_load(tmp_path):
    ztio.numpy.save_file({"e": np.zeros((0, 3), np.float32), "w": np.ones(2, np.float32)}, tmp_path / "m.safetensors")
    back = ztio.torch.load_file(tmp_path / "m.safetensors")
    assert back["e"].shape == (0, 3) and back["e"].dtype == torch.float32
    with ztio.safe_open(tmp_path / "m.safetensors", framework="pt") as f:
        assert f.get_tensor("e").shape == (0, 3)


def test_packed_tensors_share_one_private_map_of_the_file(tmp_path):
    path = tmp_path / "m.safetensors"
    ztio.numpy.save_file({"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones(4, np.int64)}, path)
    before = path.read_bytes()
    back = ztio.torch.load_file(path)
    size = path.stat().st_size
    # Both tensors view one storage: the whole file, mapped (no copy per tensor).
    assert back["a"].untyped_storage().nbytes() == size
    assert back["a"].untyped_storage().data_ptr() == back["b"].untyped_storage().data_ptr()
    assert back["a"].tolist() == [[0, 1, 2], [3, 4, 5]]
    # Copy-on-write: writable, and the file is untouched.
    back["a"] += 1
    assert back["a"][0, 0] == 1
    assert path.read_bytes() == before


class _SetRecorder:
    """A native set that records which whole-set loads are asked of it, and runs them."""

    def __init__(self, native):
        self._native = native
        self.asked = []

    def __getattr__(self, name):
        if name in ("load_all_in_background", "load_each"):
            self.asked.append(name)
        return getattr(self._native, name)


@pytest.mark.parametrize("backend", ["mmap", "pread"])
def test_a_set_loads_as_views_of_each_shard_while_it_is_read_in(tmp_path, monkeypatch, backend):
    """A set's tensors are views of torch's private map of each shard, made at once while
    the library reads the shards in, one after another (the caller's copies follow the
    reads), not each after its bytes came in (until 2026-12-08: the copies started after
    every byte was in). Without a map (``backend="pread"``) each tensor is a copy made as
    its bytes come in, as before."""
    shards = {
        "model-00001-of-00002.safetensors": {"embed": torch.arange(6, dtype=torch.float32).reshape(2, 3)},
        "model-00002-of-00002.safetensors": {"w": torch.ones(3, 3, dtype=torch.bfloat16), "b": torch.zeros(3)},
    }
    weight_map = {}
    for file, tensors in shards.items():
        ztio.torch.save_file(tensors, tmp_path / file)
        weight_map.update({name: file for name in tensors})
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": weight_map}))
    recorders = []
    real_open_set = ztio.ShardedFile._open_set

    def recorded(self):
        if not recorders or recorders[-1][0] is not self:
            recorders.append((self, _SetRecorder(real_open_set(self))))
        return recorders[-1][1]

    monkeypatch.setattr(ztio.ShardedFile, "_open_set", recorded)
    back = ztio.torch.load_file(index, backend=backend)
    mapped = backend == "mmap"
    assert recorders[0][1].asked == (["load_all_in_background"] if mapped else ["load_each"])
    # Shard by shard, each in file order, as before.
    assert list(back) == ["embed", "b", "w"]
    for tensors in shards.values():
        for name, want in tensors.items():
            assert back[name].dtype == want.dtype and torch.equal(back[name], want), name
    # In place: the second shard's tensors view one storage, that whole shard's file.
    second = (tmp_path / "model-00002-of-00002.safetensors").stat().st_size
    storage = back["w"].untyped_storage()
    assert (storage.nbytes() == second) == mapped
    assert (storage.data_ptr() == back["b"].untyped_storage().data_ptr()) == mapped


def test_tensors_as_they_lie_load_without_a_listing(tmp_path, monkeypatch):
    """A tensor stored as it lies is made from its place in the file alone: no object's
    listing is built (a file of many small tensors spent most of its load on them)."""
    tensors = {
        "scalar": np.array(2.5, np.float32),
        "m": np.arange(12, dtype=np.int16).reshape(3, 4),
        "f32": np.arange(6, dtype=np.float32).reshape(2, 3),
        "b": np.array([True, False, True]),
        "e": np.zeros((0, 3), np.float32),
    }
    path = tmp_path / "m.safetensors"
    ztio.numpy.save_file(tensors, path)
    wanted = {k: torch.from_numpy(v.copy()) for k, v in tensors.items()}
    listed = []
    real_info = ztio.File.info
    monkeypatch.setattr(ztio.File, "info", lambda self, name: listed.append(name) or real_info(self, name))
    back = ztio.torch.load_file(path)
    assert listed == ["e"], "only the empty tensor takes the general path"
    for k, v in wanted.items():
        assert back[k].dtype == v.dtype and back[k].shape == v.shape and torch.equal(back[k], v), k
    assert back["m"].stride() == (4, 1) and back["scalar"].dim() == 0
    with ztio.safe_open(path, framework="pt") as f:
        assert torch.equal(f.get_tensor("m"), wanted["m"])
    assert listed == ["e"]


def test_compressed_and_strided_tensors_are_decoded(tmp_path):
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    with ztio.Writer(tmp_path / "z.zt") as w:
        w.add("z", t.numpy(), compression=3)
    back = ztio.torch.load_file(tmp_path / "z.zt")
    assert torch.equal(back["z"], t)
    back["z"] += 1  # a decoded buffer: writable


def test_save_and_load_bytes(tmp_path):
    tensors = {"w": torch.randn(2, 3), "e": torch.empty(0, dtype=torch.bfloat16)}
    data = ztio.torch.save(tensors, metadata={"format": "pt"})
    back = ztio.torch.load(data)
    assert torch.equal(back["w"], tensors["w"]) and back["e"].shape == (0,)
    back["w"] += 1  # writable copies


def test_save_refuses_what_safetensors_refuses(tmp_path):
    base = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    with pytest.raises(ValueError, match="non contiguous tensor"):
        ztio.torch.save_file({"t": base[:, ::2]}, tmp_path / "s.safetensors")
    with pytest.raises(RuntimeError, match="share memory"):
        ztio.torch.save_file({"a": base, "b": base[:1]}, tmp_path / "s.safetensors")
    with pytest.raises(ValueError, match="expected torch.Tensor"):
        ztio.torch.save_file({"a": [1, 2]}, tmp_path / "s.safetensors")
    assert not (tmp_path / "s.safetensors").exists()


def test_save_model_and_load_model_keep_shared_weights(tmp_path):
    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(3, 3)
            self.b = self.a

    model = Tied()
    ztio.torch.save_model(model, tmp_path / "m.safetensors")
    with ztio.safe_open(tmp_path / "m.safetensors", framework="pt") as f:
        assert f.metadata() == {"b.bias": "a.bias", "b.weight": "a.weight"}
    other = Tied()
    ztio.torch.load_model(other, tmp_path / "m.safetensors")
    assert torch.equal(other.b.weight, model.a.weight)


def test_fp4_round_trip(tmp_path):
    if not hasattr(torch, "float4_e2m1fn_x2"):
        pytest.skip("torch before 2.8 has no float4_e2m1fn_x2")
    t = torch.randint(0, 255, (2, 2), dtype=torch.uint8).view(torch.float4_e2m1fn_x2)
    ztio.torch.save_file({"t": t}, tmp_path / "f.safetensors")
    with ztio.open(tmp_path / "f.safetensors") as f:
        assert f.info("t").shape == (2, 4) and f.info("t").dtype == "f4_e2m1"
    back = ztio.torch.load_file(tmp_path / "f.safetensors")["t"]
    assert back.dtype == torch.float4_e2m1fn_x2 and back.shape == (2, 2)
    assert torch.equal(back.view(torch.uint8), t.view(torch.uint8))


def test_save_file_writes_safetensors_unless_named_zt(tmp_path):
    t = {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3)}
    ztio.torch.save_file(t, tmp_path / "model.bin")
    assert (tmp_path / "model.bin").read_bytes() == ztio.torch.save(t)
    ztio.torch.save_file(t, tmp_path / "model.zt")
    with ztio.open(tmp_path / "model.zt") as f:
        assert f.version == "zt v2"


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu"])
def test_slices_of_bf16_and_fp8_come_back_as_torch_tensors(tmp_path, dtype):
    """transformers 5 reads every weight as `safe_open(...).get_slice(name)[...]`."""
    want = torch.arange(12, dtype=torch.float32).reshape(3, 4).to(getattr(torch, dtype))
    ztio.torch.save_file({"w": want}, tmp_path / "m.safetensors")
    with ztio.safe_open(tmp_path / "m.safetensors", framework="pt") as f:
        for key, rows in ((..., want), (np.s_[1:3], want[1:3]), (np.s_[:, 1], want[:, 1]), (np.s_[0, 0], want[0, 0])):
            got = f.get_slice("w")[key]
            assert got.dtype == want.dtype and got.shape == rows.shape
            # A box of columns is a strided view, as safetensors gives it: compared by bytes
            # once made contiguous.
            got = got.contiguous()
            assert torch.equal(got.reshape(-1).view(torch.uint8), rows.contiguous().reshape(-1).view(torch.uint8))


@pytest.mark.parametrize("backend", ["mmap", "pread"])
def test_a_box_of_columns_is_a_view_of_the_map_as_safetensors_gives(tmp_path, backend):
    """Tensor-parallel loaders take columns (`get_slice(name)[:, a:b]`): over a map,
    safetensors indexes a view of the whole tensor, so the slice costs no copy. It cost a
    gather of every element (18x safetensors' time on a model's weights) until 2026-12-03."""
    want = torch.arange(24, dtype=torch.float32).reshape(4, 6).to(torch.bfloat16)
    ztio.torch.save_file({"w": want}, tmp_path / "m.safetensors")
    with ztio.safe_open(tmp_path / "m.safetensors", framework="pt", backend=backend) as f:
        whole = f.get_tensor("w")
        for key in (np.s_[:, 2:5], np.s_[1:3, ::2], np.s_[..., 1], np.s_[:, -1]):
            got = f.get_slice("w")[key]
            assert torch.equal(got, want[key]), key
            shares = got.untyped_storage().data_ptr() == whole.untyped_storage().data_ptr()
            # Over the map a view; through positional reads (no map) a copy of the box.
            assert shares == (backend == "mmap"), key
        got = f.get_slice("w")[:, 2:5]
        got[0, 0] = 100  # a write stays in the process (the map is private)
    assert torch.equal(ztio.torch.load_file(tmp_path / "m.safetensors")["w"], want)


class _HintRecorder:
    """A native reader that records the read-ahead hints asked of it, and passes them on."""

    def __init__(self, native):
        self._native = native
        self.told = []

    def __getattr__(self, name):
        return getattr(self._native, name)

    def raw_span(self, name, told=False):
        self.told.append(("raw_span", name, told))
        return self._native.raw_span(name, told)

    def will_need_slice(self, name, ranges, own_map=False):
        self.told.append(("will_need_slice", name, [tuple(r) for r in ranges], own_map))
        return self._native.will_need_slice(name, ranges, own_map)


def test_a_box_of_columns_tells_the_read_ahead_of_the_box_alone(tmp_path):
    """A box of columns is a view of the whole tensor in torch's own map: the read-ahead is
    told of the box, as read through that map (nothing in a file all in the page cache),
    never of the whole tensor. Told of the whole tensor, a cold 16x100 box of a 64 MiB f32
    tensor read 8 MiB from the disk, and a warm one set the read-ahead mapping pages into a
    map torch never touches (until 2026-12-07; 0.1 MiB read since)."""
    want = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    ztio.torch.save_file({"w": want}, tmp_path / "m.safetensors")
    with ztio.safe_open(tmp_path / "m.safetensors", framework="pt") as f:
        recorder = _HintRecorder(f._file._native)
        f._file._native = recorder
        assert torch.equal(f.get_slice("w")[:2, 1:4], want[:2, 1:4])
        assert recorder.told == [
            ("raw_span", "w", False),
            ("will_need_slice", "w", [(0, 2), (1, 4)], True),
        ]
        # A whole tensor read through torch's map is told as a read of it, and so is a key
        # that may touch any part of it (a list of columns).
        recorder.told.clear()
        assert torch.equal(f.get_tensor("w"), want)
        assert torch.equal(f.get_slice("w")[:, [0, 2]], want[:, [0, 2]])
        assert recorder.told == [("raw_span", "w", True), ("raw_span", "w", True)]
