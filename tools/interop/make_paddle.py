"""Writes Paddle inference models with Paddle's own `paddle.jit.save` and records what
Paddle's own loader reads from each in fixtures/interop/paddle/expected.json: per
parameters file, per variable (by the name the program gives it), its shape, our element
type name and its row-major little-endian bytes in hex.

- pir/model.json + pir/model.pdiparams: Paddle 3's default output (a PIR program in JSON);
- legacy/model.pdmodel + legacy/model.pdiparams (+ .pdiparams.info): the same model saved
  with the PIR API off (`FLAGS_enable_pir_api=0`): a ProgramDesc, as Paddle 2 wrote it;
- paddle1/__model__ + one file per variable: a small static program (two fc layers and a
  batch norm) as Paddle 1's `save_inference_model` wrote it with no params file name (the
  program from `save_inference_model`, the files from `paddle.static.save_vars`), read back
  by `load_inference_model(dir, model_filename="__model__", params_filename=None)`.

The model: twelve Linear layers (`linear_10` sorts before `linear_2`, as Paddle orders
the file), a BatchNorm (its statistics are persistable, not trainable), parameters of
float16, bfloat16 and float64, and buffers of the integer and boolean types and an empty
one (bfloat16, int8 and the empty buffer in the PIR model only), all used by `forward` (jit.save keeps only what the program uses).

Run in a throwaway environment (PaddlePaddle 3.3.1 wrote the committed files):

    python3 -m venv /tmp/pdenv
    /tmp/pdenv/bin/pip install paddlepaddle
    cd tools/interop && /tmp/pdenv/bin/python make_paddle.py ../../fixtures/interop/paddle
"""

import json
import os
import subprocess
import sys

import numpy as np

from dtype_names import OURS


def build(out, pir):
    import paddle

    paddle.seed(7)
    np.random.seed(7)

    class Net(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.layers = paddle.nn.LayerList([paddle.nn.Linear(3, 3) for _ in range(12)])
            self.norm = paddle.nn.BatchNorm1D(3)
            self.w_half = self.create_parameter([2, 3], dtype="float16")
            # (the legacy program builder casts no bfloat16 parameter)
            self.w_bf16 = self.create_parameter([3], dtype="bfloat16" if pir else "float32")
            self.w_double = self.create_parameter([3, 1], dtype="float64")
            buffers = {
                "ints64": np.arange(-3, 3, dtype=np.int64).reshape(2, 3),
                "ints32": np.array([7, -8, 9], dtype=np.int32),
                "ints16": np.array([-300, 300], dtype=np.int16),
                "bytes": np.array([0, 200, 255], dtype=np.uint8),
                "flags": np.array([True, False, True]),
            }
            if pir:  # (the legacy program builder casts no int8 and takes no empty buffer)
                buffers["ints8"] = np.array([-5, 5], dtype=np.int8)
                buffers["empty"] = np.zeros((0, 3), dtype=np.float32)
            self.names = sorted(buffers)
            for name, value in buffers.items():
                self.register_buffer(name, paddle.to_tensor(value))

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            x = self.norm(x)
            # One element of each, added by broadcasting (the legacy program builder has no
            # `sum`, and an empty buffer has no element to take).
            used = [self.w_half, self.w_bf16, self.w_double]
            used += [getattr(self, name) for name in self.names if name != "empty"]
            for value in used:
                x = x + paddle.cast(value, "float32").reshape([-1])[0:1]
            if "empty" in self.names:
                x = x + paddle.cast(self.empty, "float32").reshape([-1]).sum()
            return x

    net = Net()
    net.eval()
    spec = [paddle.static.InputSpec([None, 3], "float32", name="x")]
    paddle.jit.save(net, os.path.join(out, "model"), input_spec=spec)


def per_variable(out):
    """Saves a small static program as Paddle 1's `save_inference_model` did with no params
    file name: `__model__` and each persistable variable in a file named as it is. (The jit
    model above holds types Paddle's `save` op has no kernel for, so its variables cannot
    be saved one by one.)"""
    import shutil

    import paddle

    paddle.enable_static()
    paddle.seed(7)
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [None, 4], "float32")
        y = paddle.static.nn.fc(x, 3)
        y = paddle.static.nn.batch_norm(y)
        y = paddle.static.nn.fc(y, 2)
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    prefix = os.path.join(out, "inference")
    paddle.static.save_inference_model(prefix, [x], [y], exe, program=main)
    shutil.move(prefix + ".pdmodel", os.path.join(out, "__model__"))
    os.remove(prefix + ".pdiparams")
    # Paddle's own test of what is saved: persistable, and not a feed, fetch or reader.
    paddle.static.save_vars(exe, out, main, predicate=paddle.static.io.is_persistable)


def read_back(prefix, **files):
    """What Paddle's own loader binds to each persistable variable."""
    import paddle

    paddle.enable_static()
    exe = paddle.static.Executor(paddle.CPUPlace())
    program, _, _ = paddle.static.load_inference_model(prefix, exe, **files)
    scope = paddle.static.global_scope()
    arrays = {}
    for var in program.list_vars():
        if not var.persistable:
            continue
        try:
            name = var.name
        except ValueError:  # a PIR value an op made in place (a statistic's update)
            continue
        if name in ("feed", "fetch") or name in arrays:
            continue
        tensor = scope.find_var(name).get_tensor()
        value = np.array(tensor)
        dtype = str(tensor._dtype()).split(".")[-1].lower()
        dtype = {"float32": "float32", "bfloat16": "bfloat16", "bool": "bool"}.get(dtype, dtype)
        arrays[name] = {
            "shape": list(value.shape),
            "type": OURS[dtype],
            "hex": np.ascontiguousarray(value).astype(value.dtype.newbyteorder("<")).tobytes().hex(),
        }
    return arrays


def main(out):
    if len(sys.argv) > 2:  # a child: one build or one read in a fresh interpreter
        what, where = sys.argv[2], sys.argv[3]
        if what == "build":
            build(where, pir=os.environ.get("FLAGS_enable_pir_api") != "0")
        elif what == "per-variable":
            per_variable(where)
        elif what == "read-per-variable":
            files = {"model_filename": "__model__", "params_filename": None}
            json.dump(read_back(where, **files), sys.stdout)
        else:
            json.dump(read_back(os.path.join(where, "model")), sys.stdout)
        return
    expected = {"files": {}}
    for folder, pir in (("pir", "1"), ("legacy", "0")):
        where = os.path.join(out, folder)
        os.makedirs(where, exist_ok=True)
        env = dict(os.environ, FLAGS_enable_pir_api=pir)
        run = [sys.executable, __file__, out]
        subprocess.run(run + ["build", where], env=env, check=True)
        text = subprocess.run(
            run + ["read", where], env=env, check=True, stdout=subprocess.PIPE
        ).stdout
        arrays = json.loads(text)
        expected["files"][f"{folder}/model.pdiparams"] = {"arrays": arrays}
    env = dict(os.environ, FLAGS_enable_pir_api="0")
    run = [sys.executable, __file__, out]
    paddle1 = os.path.join(out, "paddle1")
    os.makedirs(paddle1, exist_ok=True)
    subprocess.run(run + ["per-variable", paddle1], env=env, check=True)
    text = subprocess.run(
        run + ["read-per-variable", paddle1], env=env, check=True, stdout=subprocess.PIPE
    ).stdout
    expected["files"]["paddle1/__model__"] = {"arrays": json.loads(text)}
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
