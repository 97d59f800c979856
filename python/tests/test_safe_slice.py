"""`safe_open(...).get_slice(name)[...]` follows safetensors 0.8's rules: its own parse for
numpy and the other frameworks (and any framework with `backend="pread"`), the framework's own
indexing for torch and Paddle over a map. The expected answers and messages below are what
safetensors 0.8.0 gives for the same file (checked with it installed; the tests do not need it).
"""

import numpy as np
import pytest

import ztio
import ztio.numpy

Y = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


@pytest.fixture
def path(tmp_path):
    p = tmp_path / "g.safetensors"
    ztio.numpy.save_file({"y": Y, "s": np.array(2.0, np.float32), "e": np.zeros((0, 3), np.float32)}, str(p))
    return str(p)


# (tensor, index, shape of the answer) where safetensors answers.
ANSWERED = [
    ("y", np.s_[1:2], (1, 3, 4)),
    ("y", np.s_[:, 1], (2, 4)),
    ("y", np.s_[-1], (3, 4)),
    ("y", np.s_[0:2, -1, -1], (2,)),
    ("y", np.s_[::2, 1, ::3], (1, 2)),
    ("y", np.s_[1, ...], (3, 4)),
    ("y", np.s_[True], (3, 4)),  # a bool is the int 1 to safetensors' parse
    ("y", np.s_[np.int64(1)], (3, 4)),
    ("y", [], (0, 3, 4)),
    ("s", np.s_[()], ()),
    ("s", np.s_[...], ()),
    ("y", np.s_[0, 0, 0], ()),
    # Where safetensors 0.8 fails (docs/decisions.md): a stop before the start selects
    # nothing (it raises SystemError), a full slice of an empty dimension selects it.
    ("y", np.s_[1:0], (0, 3, 4)),
    ("e", np.s_[:], (0, 3)),
    ("e", np.s_[...], (0, 3)),
]


@pytest.mark.parametrize("backend", ["mmap", "pread"])
@pytest.mark.parametrize("name,key,shape", ANSWERED, ids=repr)
def test_answers_match_safetensors(path, backend, name, key, shape):
    with ztio.safe_open(path, framework="np", backend=backend) as f:
        got = f.get_slice(name)[key]
        whole = f.get_tensor(name)
    assert type(got) is np.ndarray  # never a numpy scalar, even 0-d
    assert got.shape == shape
    if got.size:
        index = 1 if key is True else key  # numpy reads True as a new axis
        assert np.array_equal(got, whole[index])


# (tensor, index, exception class, message) as safetensors 0.8 raises them.
REFUSED = [
    ("y", np.s_[::-1], ztio.Error, "Slice step must be a positive integer, got -1"),
    ("y", np.s_[::0], ztio.Error, "Slice step must be a positive integer, got 0"),
    (
        "y",
        np.s_[5],
        ztio.Error,
        "Error during slicing [5] with shape [2, 3, 4]: index 5 out of bounds for tensor dimension #0 of size 2",
    ),
    ("y", np.s_[-3], ztio.Error, "Invalid index -3 for dimension 0 of size 2"),
    (
        "y",
        np.s_[10:20],
        ztio.Error,
        "Error during slicing [10:20] with shape [2, 3, 4]: index 10 out of bounds for tensor dimension #0 of size 2",
    ),
    (
        "y",
        np.s_[:, 3:3],
        ztio.Error,
        "Error during slicing [:, 3:3] with shape [2, 3, 4]: index 3 out of bounds for tensor dimension #1 of size 3",
    ),
    # The innermost dimension is checked first, as safetensors walks them.
    (
        "y",
        np.s_[5, 9],
        ztio.Error,
        "Error during slicing [5, 9] with shape [2, 3, 4]: index 9 out of bounds for tensor dimension #1 of size 3",
    ),
    ("y", np.s_[-10:1], OverflowError, "can't convert negative int to unsigned"),
    ("y", np.s_[0.5:1], TypeError, "'float' object cannot be interpreted as an integer"),
    ("y", np.s_[None], ztio.Error, "Unsupported slice index at position 0: expected slice, int, or ellipsis"),
    ("y", np.s_[0, [1]], ztio.Error, "Unsupported slice index at position 1: expected slice, int, or ellipsis"),
    ("y", np.s_[2**40], ztio.Error, "Unsupported slice index at position 0: expected slice, int, or ellipsis"),
    ("y", [0, 1], ztio.Error, "Non empty lists are not implemented"),
    ("y", np.s_[..., ...], ztio.Error, "Only one ellipsis (...) is allowed in slice index"),
    (
        "y",
        np.s_[0, 0, 0, 0],
        ztio.Error,
        "Error during slicing [0, 0, 0, 0] with shape [2, 3, 4]: more slicing indexes than dimensions in tensor",
    ),
    (
        "y",
        np.s_[0, ..., 5, 1],
        ztio.Error,
        "Error during slicing [0, 5, 1] with shape [2, 3, 4]: index 5 out of bounds for tensor dimension #1 of size 3",
    ),
    (
        "s",
        np.s_[1, ...],
        ztio.Error,
        "Error during slicing [1] with shape []: more slicing indexes than dimensions in tensor",
    ),
    ("s", np.s_[0:2, -1, -1], ztio.Error, "Invalid index -1 for dimension 1 of size 0"),
    (
        "e",
        np.s_[0:0],
        ztio.Error,
        "Error during slicing [0:0] with shape [0, 3]: index 0 out of bounds for tensor dimension #0 of size 0",
    ),
]


@pytest.mark.parametrize("name,key,error,message", REFUSED, ids=repr)
def test_refusals_match_safetensors(path, name, key, error, message):
    with ztio.safe_open(path, framework="np") as f:
        with pytest.raises(error) as caught:
            f.get_slice(name)[key]
    assert str(caught.value) == message


def test_a_missing_name_is_worded_as_safetensors_words_it(path):
    with ztio.safe_open(path, framework="np") as f:
        for read in (f.get_tensor, f.get_slice):
            with pytest.raises(ztio.NotFoundError, match="^File does not contain tensor nope$"):
                read("nope")


TORCH_KEYS = [
    np.s_[1:2],
    np.s_[:, 1],
    np.s_[10:20],
    np.s_[-10:1],
    np.s_[None],
    np.s_[[0, 1]],
    np.s_[True],
    np.s_[..., ...],
    np.s_[0:2, -1, -1],
    np.s_[::2, 1, ::3],
    np.s_[0, 0, 0],
]
TORCH_ERRORS = [np.s_[::-1], np.s_[5], np.s_[-3], np.s_[0, 0, 0, 0]]


@pytest.mark.parametrize("key", TORCH_KEYS, ids=repr)
def test_torch_over_a_map_indexes_as_torch_does(path, key):
    torch = pytest.importorskip("torch")
    import ztio.torch  # noqa: F401  (registers the framework)

    with ztio.safe_open(path, framework="pt") as f:
        got = f.get_slice("y")[key]
    want = torch.from_numpy(Y.copy())[key]
    assert got.shape == want.shape and torch.equal(got, want)


@pytest.mark.parametrize("key", TORCH_ERRORS, ids=repr)
def test_torch_over_a_map_refuses_as_torch_does(path, key):
    torch = pytest.importorskip("torch")
    import ztio.torch  # noqa: F401

    try:
        torch.from_numpy(Y.copy())[key]
    except Exception as e:  # noqa: BLE001 - whatever torch raises is what we must raise
        want = e
    with ztio.safe_open(path, framework="pt") as f:
        with pytest.raises(type(want)) as caught:
            f.get_slice("y")[key]
    assert str(caught.value) == str(want)


def test_torch_with_pread_follows_safetensors_parse(path):
    pytest.importorskip("torch")
    import ztio.torch  # noqa: F401

    with ztio.safe_open(path, framework="pt", backend="pread") as f:
        with pytest.raises(ztio.Error, match="Slice step must be a positive integer, got -1"):
            f.get_slice("y")[::-1]


def _f4_file(tmp_path):
    """A safetensors file of 4-bit (F4) tensors, written by hand: numpy has no such dtype."""
    import json
    import struct

    shapes = {"a": [2, 3, 4], "b": [2, 5, 3], "c": [4, 6], "e": [0, 3]}
    header, offset = {}, 0
    for name, shape in shapes.items():
        size = int(np.prod(shape)) // 2
        header[name] = {"dtype": "F4", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    p = tmp_path / "f4.safetensors"
    p.write_bytes(struct.pack("<Q", len(text)) + text + bytes(offset))
    return str(p)


MISALIGNED = "The slice is slicing for subbytes dtypes, and the slice does not end up at a byte boundary, this is invalid."

# (tensor, index, message or None) for 4-bit elements, as safetensors 0.8 answers: None where
# its checks pass (it then fails converting to numpy; ztio reads no slice of 4-bit data).
F4_CASES = [
    ("a", np.s_[:, 1], None),  # runs of 4 elements (2 bytes), the dimensions inside counted
    ("a", np.s_[:, 1:3], None),
    ("b", np.s_[1:], f"Error during slicing [1:] with shape [2, 5, 3]: {MISALIGNED}"),  # row 1 starts mid-byte
    ("c", np.s_[:, ::2], f"Error during slicing [:, ::2] with shape [4, 6]: {MISALIGNED}"),
    # innermost first, with the stop as given: 4:1 ends mid-byte before 8 is out of bounds
    ("b", np.s_[8:4, 4:1], f"Error during slicing [8:4, 4:1] with shape [2, 5, 3]: {MISALIGNED}"),
    ("e", np.s_[...], None),  # no bits at all (safetensors: index 0 out of bounds; decisions.md)
]


@pytest.mark.parametrize("name,key,message", F4_CASES, ids=repr)
def test_four_bit_elements_follow_safetensors_byte_rules(tmp_path, name, key, message):
    with ztio.safe_open(_f4_file(tmp_path), framework="np") as f:
        with pytest.raises(ztio.Error) as caught:
            f.get_slice(name)[key]
    if message is None:
        # Past the rules: ztio then refuses to slice packed 4-bit data, as its own error.
        assert isinstance(caught.value, ztio.UnsupportedError), caught.value
    else:
        assert type(caught.value) is ztio.ArgumentError and str(caught.value) == message


def test_random_indexes_inside_the_tensor_give_numpys_values(tmp_path):
    """Property: every index safetensors' parse accepts and that stays inside the tensor (ints
    in range, slices with a positive step and bounds within the dimension, at most one
    ``...``) gives what numpy gives for the same index, shape and values alike."""
    import random

    rng = random.Random(20261128)
    shapes = [(2, 3, 4), (5,), (7, 2), (3, 1, 8), (4, 6)]
    arrays = {f"t{i}": np.arange(int(np.prod(s)), dtype=np.float32).reshape(s) for i, s in enumerate(shapes)}
    path = str(tmp_path / "r.safetensors")
    ztio.numpy.save_file(arrays, path)

    def item(n):
        if rng.random() < 0.4:
            return rng.randrange(-n, n)
        start = rng.choice([None, rng.randrange(n)])
        stop = rng.choice([None, rng.randrange((start or 0) + 1, n + 1)])
        return slice(start, stop, rng.choice([None, 1, 2, 3]))

    checked = 0
    with ztio.safe_open(path, framework="np") as f:
        for _ in range(3000):
            name = rng.choice(list(arrays))
            shape = arrays[name].shape
            lead = rng.randint(0, len(shape))
            key = tuple(item(n) for n in shape[:lead])
            if rng.random() < 0.3:
                # `...` then indexes of the last dimensions, those the leading ones left.
                trail = rng.randint(0, len(shape) - lead)
                key += (Ellipsis,) + tuple(item(n) for n in shape[len(shape) - trail :])
            got = f.get_slice(name)[key]
            want = arrays[name][key]
            assert got.shape == want.shape and np.array_equal(got, want), (name, key)
            checked += 1
    assert checked == 3000


@pytest.mark.parametrize("backend", ["mmap", "pread"])
def test_gathered_boxes_lie_aligned_for_frameworks_that_share_memory(tmp_path, backend):
    # JAX and TensorFlow take an array as it lies only when it is aligned to 64 bytes (and
    # copy it otherwise): a box gathered from several runs is gathered into such storage.
    m = np.arange(64 * 48, dtype=np.float32).reshape(64, 48)
    path = tmp_path / "m.safetensors"
    ztio.numpy.save_file({"m": m, "b": (m % 3 == 0)}, str(path))
    with ztio.safe_open(str(path), framework="np", backend=backend) as f:
        for name, want in (("m", m), ("b", m % 3 == 0)):
            s = f.get_slice(name)
            for key in (np.s_[:, :7], np.s_[3:9, 1:2], np.s_[:, 5], np.s_[::2, :3], np.s_[1:60, 40:]):
                got = s[key]
                assert np.array_equal(got, want[key]), (name, key)
                assert got.ctypes.data % 64 == 0 and got.flags.writeable, (name, key)
