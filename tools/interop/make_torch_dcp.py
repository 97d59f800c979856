"""Writes fixtures/interop/torch_dcp/: PyTorch distributed checkpoints as
`torch.distributed.checkpoint.save` writes them (a folder: `.metadata`, a pickle of the
checkpoint's `Metadata`, and `__<rank>_<n>.distcp` files, each tensor a `torch.save` archive
at an offset of one of them).

- `single/`: saved by one process (no process group): f32, bf16, a transposed int64 tensor
  (saved strided), an empty tensor, a 0-d tensor and a non-tensor value (`step`).
- `two_ranks/`: saved by two processes (gloo on loopback) from DTensors sharded over a
  two-device CPU mesh, rows (`Shard(0)`) and columns (`Shard(1)`), and one replicated
  tensor: each sharded tensor is two chunks, one per rank's file.
- `byte_tensors/`: saved by one process, with tensors inside values DCP pickles whole (it
  flattens dicts and lists of tensors, not tuples): `pair`, a tuple of two tensors, and
  `mixed`, a tuple of a text, a tensor and an integer. Readers list them as `pair.0`,
  `pair.1` and `mixed.1` beside `mixed.0` and `mixed.2` as attributes; `dcp.load` gives the
  tuples back.
- `safetensors_format/`: saved by one process through `FileSystemWriter(...,
  serialization_format=SerializationFormat.SAFETENSORS)`: each data file holds the byte
  values, then one safetensors file of its tensors, and `storage_data` gives every tensor the
  offset of that safetensors file. `dcp.load` cannot read it (it runs `torch.load` on each
  chunk): the script checks that it fails, and readers must refuse it with a clear message.
- `zstd/`: saved by one process through `FileSystemWriter(..., _extensions=[ZStandard()])`,
  DCP's storage transform: each chunk and value is its archive as one zstd stream (no frame
  size, no checksum: `zstandard`'s defaults), and its `storage_data` entry names the
  transform (`stream.zstd/1`). The tensors of `single/`, a tuple value of two tensors and a
  step count; the script checks that `dcp.load` reads them back.
- `zstd_two_ranks/`: `two_ranks/` saved through the zstd transform: each rank's chunk of a
  sharded tensor its own compressed archive.

Also expected.json: per `.metadata` and tensor, the shape, the zTensor type name and the
row-major little-endian bytes (hex) that reading must give. Run once in a throwaway venv
(`pip install torch numpy zstandard safetensors`); the files are committed and the tests
never need Python. Reruns write the same data files, but each `.metadata` holds a random
`save_id`: `--only zstd` (a folder's name) writes that folder alone and keeps the other
entries of expected.json (`zstd_two_ranks` likewise).

    python tools/interop/make_torch_dcp.py [out_dir] [--only NAME]
"""
import json
import os
import shutil
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp

ZT = {torch.float32: "f32", torch.bfloat16: "bf16", torch.int64: "i64", torch.float16: "f16"}


def le_hex(t):
    flat = t.detach().contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy().tobytes().hex() if flat.numel() else ""


def expect(table, name, t):
    table[name] = {"shape": list(t.shape), "type": ZT[t.dtype], "hex": le_hex(t)}


def whole_tensors():
    torch.manual_seed(0)
    return {
        "rows": torch.arange(48, dtype=torch.float32).reshape(8, 6),
        "cols": torch.arange(30, dtype=torch.int64).reshape(5, 6) * 3,
        "same": torch.arange(4, dtype=torch.float16),
    }


def write_expected(out, files):
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump({"files": files}, f, indent=1, sort_keys=True)
        f.write("\n")


def rank_main(rank, out, init, sub):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    mesh = init_device_mesh("cpu", (2,))
    whole = whole_tensors()
    state = {
        "rows": distribute_tensor(whole["rows"], mesh, [Shard(0)]),
        "cols": distribute_tensor(whole["cols"], mesh, [Shard(1)]),
        "same": distribute_tensor(whole["same"], mesh, [Replicate()]),
    }
    if sub == "zstd_two_ranks":
        from torch.distributed.checkpoint._extension import ZStandard
        from torch.distributed.checkpoint.filesystem import FileSystemWriter

        writer = FileSystemWriter(os.path.join(out, sub), _extensions=[ZStandard()])
        dcp.save(state, storage_writer=writer)
    else:
        dcp.save(state, checkpoint_id=os.path.join(out, sub))
    dist.barrier()
    dist.destroy_process_group()


def single_state():
    return {
        "embed.weight": torch.arange(12, dtype=torch.float32).reshape(3, 4) / 4,
        "layers.0.norm": torch.tensor([1.5, -2.0, 3.25], dtype=torch.bfloat16),
        "layers.0.proj_t": torch.arange(6, dtype=torch.int64).reshape(2, 3).t(),
        "empty": torch.zeros(0, 5),
        "scale": torch.tensor(0.5),
        "step": 7,
    }


def zstd_checkpoint(out, table):
    """The `zstd/` folder: `single/`'s state and a tuple value, through DCP's zstd transform."""
    from torch.distributed.checkpoint._extension import ZStandard
    from torch.distributed.checkpoint.filesystem import FileSystemWriter

    state = single_state()
    state["pair"] = (torch.arange(6, dtype=torch.float32).reshape(2, 3) * 0.25,
                     torch.tensor([7, -8, 9], dtype=torch.int64))
    path = os.path.join(out, "zstd")
    dcp.save(state, storage_writer=FileSystemWriter(path, _extensions=[ZStandard()]))
    for name, t in state.items():
        if isinstance(t, torch.Tensor):
            expect(table, name, t)
    for i in (0, 1):
        expect(table, f"pair.{i}", state["pair"][i])
    back = {n: torch.empty_like(t) for n, t in state.items() if isinstance(t, torch.Tensor)}
    back.update(step=0, pair=None)
    dcp.load(back, checkpoint_id=path)
    assert back["step"] == 7
    assert all(torch.equal(a, b) for a, b in zip(back["pair"], state["pair"]))
    for name, t in back.items():
        if isinstance(t, torch.Tensor):
            assert le_hex(t) == table[name]["hex"], name
    # Each storage entry names the transform: the files hold what this script means.
    from torch.distributed.checkpoint.filesystem import FileSystemReader
    stored = FileSystemReader(path).read_metadata().storage_data.values()
    assert all(s.transform_descriptors == ["stream.zstd/1"] for s in stored), stored


def two_ranks(out, sub, table):
    """Saves the DTensors of `whole_tensors` from two processes into `sub`."""
    init = "file://" + os.path.abspath(os.path.join(out, ".rendezvous"))
    mp.spawn(rank_main, args=(out, init, sub), nprocs=2, join=True)
    if os.path.exists(os.path.join(out, ".rendezvous")):
        os.remove(os.path.join(out, ".rendezvous"))
    for name, t in whole_tensors().items():
        expect(table, name, t)


def load_back(out, sub, table):
    """Checks that `dcp.load` reads every tensor of `table` back from `sub`."""
    target = {n: torch.empty(e["shape"], dtype={v: k for k, v in ZT.items()}[e["type"]])
              for n, e in table.items()}
    dcp.load(target, checkpoint_id=os.path.join(out, sub))
    for n, t in target.items():
        assert le_hex(t) == table[n]["hex"], (sub, n)


def main():
    args = sys.argv[1:]
    only = None
    if "--only" in args:
        at = args.index("--only")
        only = args[at + 1]
        del args[at:at + 2]
    out = args[0] if args else "fixtures/interop/torch_dcp"
    os.makedirs(out, exist_ok=True)
    if only is not None:
        if only not in ("zstd", "zstd_two_ranks"):
            raise SystemExit(f"--only takes zstd or zstd_two_ranks, not {only!r}")
        shutil.rmtree(os.path.join(out, only), ignore_errors=True)
        with open(os.path.join(out, "expected.json")) as f:
            files = json.load(f)["files"]
        table = {}
        if only == "zstd":
            zstd_checkpoint(out, table)
        else:
            two_ranks(out, only, table)
            load_back(out, only, table)
        files[f"{only}/.metadata"] = {"tensors": table}
        write_expected(out, files)
        print(only, sorted(os.listdir(os.path.join(out, only))))
        return
    subs = ("single", "two_ranks", "byte_tensors", "safetensors_format", "zstd", "zstd_two_ranks")
    for sub in subs:
        shutil.rmtree(os.path.join(out, sub), ignore_errors=True)
    expected = {sub: {} for sub in subs if sub != "safetensors_format"}

    single = single_state()
    dcp.save(single, checkpoint_id=os.path.join(out, "single"))
    for name, t in single.items():
        if isinstance(t, torch.Tensor):
            expect(expected["single"], name, t)

    in_values = {
        "w": torch.arange(4, dtype=torch.float32) - 1.5,
        "pair": (torch.arange(6, dtype=torch.float32).reshape(2, 3) * 0.25,
                 torch.tensor([7, -8, 9], dtype=torch.int64)),
        "mixed": ("cfg", torch.tensor([1.0, 2.5], dtype=torch.bfloat16), 3),
    }
    path = os.path.join(out, "byte_tensors")
    dcp.save(in_values, checkpoint_id=path)
    table = expected["byte_tensors"]
    expect(table, "w", in_values["w"])
    for i in (0, 1):
        expect(table, f"pair.{i}", in_values["pair"][i])
    expect(table, "mixed.1", in_values["mixed"][1])
    # torch hands the tuples back whole (compared here, not by the loop below, which loads
    # the tensors by name).
    back = {"w": torch.empty(4), "pair": None, "mixed": None}
    dcp.load(back, checkpoint_id=path)
    assert back["mixed"][0] == "cfg" and back["mixed"][2] == 3
    assert torch.equal(back["mixed"][1], in_values["mixed"][1])
    assert all(torch.equal(a, b) for a, b in zip(back["pair"], in_values["pair"]))

    from torch.distributed.checkpoint.api import CheckpointException
    from torch.distributed.checkpoint.filesystem import FileSystemWriter, SerializationFormat

    as_safetensors = {"a": torch.arange(6, dtype=torch.float32).reshape(2, 3), "step": 7}
    path = os.path.join(out, "safetensors_format")
    dcp.save(as_safetensors, storage_writer=FileSystemWriter(
        path, serialization_format=SerializationFormat.SAFETENSORS))
    try:
        dcp.load({"a": torch.empty(2, 3), "step": 0}, checkpoint_id=path)
    except CheckpointException:  # (a BaseException) torch.load of a chunk that is no archive
        pass
    else:
        raise AssertionError("dcp.load read a checkpoint saved as safetensors")

    for sub in ("two_ranks", "zstd_two_ranks"):
        two_ranks(out, sub, expected[sub])

    zstd_checkpoint(out, expected["zstd"])

    # What torch reads back, compared with what was saved.
    for sub, table in expected.items():
        if sub not in ("byte_tensors", "zstd"):
            load_back(out, sub, table)

    write_expected(out, {f"{sub}/.metadata": {"tensors": t} for sub, t in expected.items()})
    for sub in (*expected, "safetensors_format"):
        print(sub, sorted(os.listdir(os.path.join(out, sub))))


if __name__ == "__main__":
    main()
