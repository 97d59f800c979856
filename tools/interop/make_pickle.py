"""Writes pickles of NumPy arrays with Paddle's own `paddle.save` and with Python's `pickle`,
and records what `pickle.load` reads from each (and, for Paddle's files, that `paddle.load`
reads the same) in fixtures/interop/pickle/expected.json: per file, per array (its keys
joined with `.`, as ztensor flattens them), its shape, our element type name and its
row-major little-endian bytes in hex; the arrays that hold no numbers under `skipped`.

- paddle/model.pdparams: a small model's state dict (Embedding, Linear, LayerNorm), as
  `paddle.save` writes it (protocol 4); paddle/model.pdopt the Adam state after one step;
  paddle/bf16.pdparams the model in bfloat16 (Paddle hands NumPy its bits as uint16);
  paddle/protocol2.pdparams the state dict saved with `protocol=2` (Python 3 then pickles
  each array's bytes as latin-1 text); paddle/paddle2.pdparams the same state dict as
  Paddle 2.x pickled tensors, each the pair `(name, array)` through `tuple(...)`.
- arrays_p2.pkl .. arrays_p5.pkl: `pickle.dump` of one tree, protocols 2 to 5: every dtype
  NumPy pickles that ztensor reads, a column-major and a big-endian array, 0-d and empty
  arrays, an array over 4 KiB, arrays in a list, an object and a text array, a NumPy scalar,
  numbers and text; protocol 5 pickles arrays through `_frombuffer`.

Run in a throwaway environment:

    python3 -m venv /tmp/pdenv
    /tmp/pdenv/bin/pip install paddlepaddle
    /tmp/pdenv/bin/python tools/interop/make_pickle.py fixtures/interop/pickle
"""

import json
import os
import pickle
import shutil
import sys

import numpy as np
import paddle

from dtype_names import OURS


def join(prefix, key):
    return f"{prefix}.{key}" if prefix else key


def key_text(k):
    return "None" if k is None else str(k)


def flatten(value, name, out):
    """The arrays of `value` by the names ztensor gives them."""
    if isinstance(value, dict):
        for k, v in value.items():
            flatten(v, join(name, key_text(k)), out)
    elif isinstance(value, np.ndarray):
        out[name or "tensor"] = value
    elif (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[0], str)
        and isinstance(value[1], np.ndarray)
    ):
        out[name] = value[1]
    elif isinstance(value, (list, tuple)) and any(
        isinstance(i, (dict, list, tuple, np.ndarray)) for i in value
    ):
        for i, v in enumerate(value):
            flatten(v, join(name, str(i)), out)


def entry(a):
    return {
        "shape": list(a.shape),
        "type": OURS[a.dtype.name],
        "hex": np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes().hex(),
    }


def tree():
    rng = np.random.default_rng(11)
    f = rng.standard_normal((2, 3)).astype(np.float32)
    ints = np.array([[0, 1, -2], [3, -4, 5]])
    return {
        "params": {
            "bool": np.array([True, False, True]),
            "i8": ints.astype(np.int8),
            "i16": ints.astype(np.int16),
            "i32": ints.astype(np.int32),
            "i64": ints.astype(np.int64),
            "u8": abs(ints).astype(np.uint8),
            "u16": abs(ints).astype(np.uint16),
            "u32": abs(ints).astype(np.uint32),
            "u64": abs(ints).astype(np.uint64),
            "f16": f.astype(np.float16),
            "f32": f,
            "f64": f.astype(np.float64),
            "c64": (f + 1j * f).astype(np.complex64),
            "c128": (f + 1j * f).astype(np.complex128),
            "fortran": np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4)),
            "big_endian": np.arange(6, dtype=">i4").reshape(2, 3),
            "scalar": np.array(2.5, np.float32),
            "empty": np.zeros((0, 3), np.float32),
            "large": np.arange(3000, dtype=np.float32).reshape(30, 100),
        },
        "layers": [{"w": f * 2}, {"w": f * 3}],
        "objects": np.array([1, "a"], dtype=object),
        "text": np.array(["ab", "c"]),
        "npscalar": np.float32(1.5),
        "npscalars": {
            "i64": np.int64(-7),
            "u8": np.uint8(200),
            "bool": np.bool_(True),
            "f16": np.float16(0.5),
            "f64": np.float64(2.25),
            "big": np.array([5], dtype=">i4")[0],
        },
        "step": 3,
        "lr": 0.125,
        "name": "adam",
    }


def record(path, skipped=()):
    with open(path, "rb") as fh:
        loaded = pickle.load(fh)
    arrays = {}
    flatten(loaded, "", arrays)
    out = {"arrays": {}, "skipped": sorted(skipped)}
    for name, a in arrays.items():
        if name in skipped:
            continue
        out["arrays"][name] = entry(a)
    return out, arrays


def main(out):
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(os.path.join(out, "paddle"))
    expected = {"numpy_version": np.__version__, "paddle_version": paddle.__version__, "files": {}}

    paddle.seed(5)
    model = paddle.nn.Sequential(
        paddle.nn.Embedding(10, 4), paddle.nn.Linear(4, 3), paddle.nn.LayerNorm(3)
    )
    paddle.save(model.state_dict(), os.path.join(out, "paddle/model.pdparams"))
    opt = paddle.optimizer.Adam(learning_rate=0.01, parameters=model.parameters())
    loss = model(paddle.to_tensor([[1, 2]])).mean()
    loss.backward()
    opt.step()
    paddle.save(opt.state_dict(), os.path.join(out, "paddle/model.pdopt"))
    paddle.save(model.state_dict(), os.path.join(out, "paddle/protocol2.pdparams"), protocol=2)
    model.to(dtype="bfloat16")
    paddle.save(model.state_dict(), os.path.join(out, "paddle/bf16.pdparams"))

    for file in ["paddle/model.pdparams", "paddle/model.pdopt", "paddle/bf16.pdparams"]:
        want, arrays = record(os.path.join(out, file))
        # Paddle's own reader reads the same arrays.
        theirs = paddle.load(os.path.join(out, file), return_numpy=True)
        for name, a in arrays.items():
            t = theirs[name]
            assert np.array_equal(np.asarray(t).view(a.dtype), a), (file, name)
        expected["files"][file] = want
    # Protocol 2 from Python 3: each array's bytes pickled as latin-1 text.
    expected["files"]["paddle/protocol2.pdparams"] = record(
        os.path.join(out, "paddle/protocol2.pdparams")
    )[0]

    # Paddle 2.x pickled each tensor as `tuple(((name, array),))` (its `reduce_varbase`):
    # the same reduction, on the same state dict.
    class Paddle2Tensor:
        def __init__(self, name, array):
            self.name, self.array = name, array

        def __reduce__(self):
            return (tuple, ((self.name, self.array),))

    with open(os.path.join(out, "paddle/model.pdparams"), "rb") as fh:
        state = pickle.load(fh)
    structured = state.pop("StructuredToParameterName@@")
    old_style = {k: Paddle2Tensor(structured[k], v) for k, v in state.items()}
    old_style["StructuredToParameterName@@"] = structured
    file = "paddle/paddle2.pdparams"
    with open(os.path.join(out, file), "wb") as fh:
        pickle.dump(old_style, fh, protocol=4)
    expected["files"][file] = record(os.path.join(out, file))[0]
    expected["files"][file]["paddle_names"] = structured

    for protocol in [2, 3, 4, 5]:
        file = f"arrays_p{protocol}.pkl"
        with open(os.path.join(out, file), "wb") as fh:
            pickle.dump(tree(), fh, protocol=protocol)
        expected["files"][file] = record(os.path.join(out, file), skipped=["objects", "text"])[0]

    with open(os.path.join(out, "expected.json"), "w") as fh:
        json.dump(expected, fh, indent=1, sort_keys=True)
        fh.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
