"""The package's import rules: the core never imports a framework module, a framework module
imports the core (and numpy) but no other framework module, and no import circle exists."""

import ast
import pathlib

import pytest

import ztio

PACKAGE = pathlib.Path(ztio.__file__).parent
#: The framework modules: leaves over the core.
FRAMEWORKS = {"numpy", "torch", "flax", "tensorflow", "paddle", "mlx"}
#: The package's facade, which imports everything.
FACADE = "__init__"


def _imports(module: str) -> set:
    """The ztio modules `module` imports, at any depth of its code (lazy imports count)."""
    tree = ast.parse((PACKAGE / f"{module}.py").read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ztio."):
            found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("ztio."))
    return found & MODULES


MODULES = {p.stem for p in PACKAGE.glob("*.py")} | {"_native"}


@pytest.mark.parametrize("module", sorted(MODULES - FRAMEWORKS - {FACADE, "_native"}))
def test_the_core_imports_no_framework(module):
    assert not (_imports(module) & FRAMEWORKS), f"{module} imports {_imports(module) & FRAMEWORKS}"


@pytest.mark.parametrize("module", sorted(FRAMEWORKS))
def test_a_framework_module_is_a_leaf(module):
    others = _imports(module) & (FRAMEWORKS - {module})
    assert not others, f"{module} imports {others}"


def test_no_import_circle():
    graph = {m: _imports(m) for m in MODULES - {"_native"}}

    def reach(start, seen):
        for n in graph.get(start, ()):
            if n == FACADE or n in seen:
                continue
            seen.add(n)
            reach(n, seen)
        return seen

    for m in graph:
        if m != FACADE:
            assert m not in reach(m, set()), f"{m} is in an import circle"


def test_safe_open_names_the_frameworks_it_knows(tmp_path):
    import numpy as np

    p = tmp_path / "m.safetensors"
    ztio.numpy.save_file({"x": np.ones(2, np.float32)}, p)
    with pytest.raises(ztio.ArgumentError, match="'mxnet' is not supported .*flax, jax, mlx, np, numpy, paddle, pt, pytorch, tensorflow, tf, torch"):
        ztio.safe_open(p, framework="mxnet")
