"""Paddle inference parameters (.pdiparams, paddle.jit.save): every tensor reads as Paddle's
own loader binds it (fixtures/interop/paddle/expected.json), named by the program beside the
file (a PIR program in JSON, or a ProgramDesc), or Paddle 1's __model__ with a file per
variable; a model folder opens its .pdiparams; without
a program the tensors are named by their place, and the file attribute says so."""

import os
import shutil

import numpy as np
import pytest

import ztio
import ztio.numpy
from conftest import assert_as_expected, interop

PADDLE, EXPECTED = interop("paddle")



@pytest.mark.parametrize("file", sorted(EXPECTED["files"]))
def test_every_tensor_reads_as_paddles_loader_binds_it(file):
    want = EXPECTED["files"][file]["arrays"]
    path = os.path.join(PADDLE, file)
    loaded = ztio.numpy.load_file(path)
    assert_as_expected(loaded, want)
    with ztio.open(path) as f:
        assert f.version == "Paddle inference parameters"
        if file.startswith("paddle1"):
            assert f.attributes["paddle.names"] == "from __model__, one file per variable"
            probe = "fc_0.w_0", "float32"
        else:
            program = "model.json" if file.startswith("pir") else "model.pdmodel"
            assert f.attributes["paddle.names"] == f"from {program}"
            probe = "net_0.w_2", "float64"
        name, dtype = probe
        assert str(f.get_tensor(name).dtype) == dtype


def test_paddle_1_variables_in_files_of_their_own_open_by_their_folder():
    folder = os.path.join(PADDLE, "paddle1")
    loaded = ztio.numpy.load_file(folder)
    assert_as_expected(loaded, EXPECTED["files"]["paddle1/__model__"]["arrays"])
    with ztio.open(folder) as f:
        assert f.version == "Paddle inference parameters"
        w = f.get_tensor("fc_0.w_0")
        # Each variable is its own file's bytes after the header.
        with open(os.path.join(folder, "fc_0.w_0"), "rb") as raw:
            assert raw.read().endswith(w.tobytes())


def test_a_folder_opens_its_parameters_and_alone_they_are_named_by_place(tmp_path):
    folder = tmp_path / "ocr"
    folder.mkdir()
    for name in ("model.json", "model.pdiparams"):
        shutil.copy(os.path.join(PADDLE, "pir", name), folder / name.replace("model", "inference"))
    (folder / "inference.yml").write_text("Global: {}\n")
    by_folder = ztio.numpy.load_file(str(folder))
    assert "linear_10.w_0" in by_folder
    alone = tmp_path / "alone.pdiparams"
    shutil.copy(os.path.join(PADDLE, "pir", "model.pdiparams"), alone)
    with ztio.open(str(alone)) as f:
        assert f.attributes["paddle.names"].startswith("by place")
        keys = sorted(f.keys())
        assert keys[0] == "00" and keys[-1] == "37"
        # Paddle writes the tensors sorted by name: the program's names in order.
        names = sorted(by_folder)
        for i, name in enumerate(names):
            np.testing.assert_array_equal(f.get_tensor(keys[i]), by_folder[name])


def test_structured_names_come_from_the_info_file():
    with ztio.open(os.path.join(PADDLE, "legacy", "model.pdiparams")) as f:
        assert f.info("linear_10.w_0").attributes["paddle.structured_name"] == "layers.10.weight"
    with ztio.open(os.path.join(PADDLE, "pir", "model.pdiparams")) as f:
        assert "paddle.structured_name" not in f.info("linear_10.w_0").attributes
