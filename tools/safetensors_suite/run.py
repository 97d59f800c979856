"""Runs safetensors' own Python test suite against ztio.

The suite is not copied into this project: this script downloads the safetensors sdist from
PyPI (pinned version), extracts `bindings/python/tests` under target/safetensors-suite, writes
a `safetensors` package there whose modules forward every name to ztio (private names
included: `from ztio.numpy import *` would miss them), and runs pytest on the test files with
that package first on the path. It prints pytest's summary and exits with its status.

    target/pyenv/bin/python tools/safetensors_suite/run.py              # numpy and flax files
    /tmp/torch/bin/python tools/safetensors_suite/run.py --all          # every file it can import
    python tools/safetensors_suite/run.py --files=test_tf_comparison.py  # chosen files
    python tools/safetensors_suite/run.py --shim-only   # writes the shim, prints its folder

Test files need their framework: the numpy and flax files run where numpy and JAX are
installed (CI), the torch files where torch is (`--all`). docs/python.md keeps the table of
what matches and what does not.
"""

import re
import subprocess
import sys
import tarfile
import urllib.request
from pathlib import Path

VERSION = "0.8.0"
ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / "target" / "safetensors-suite"
#: The files that need neither torch nor the frameworks we do not serve.
DEFAULT_FILES = ["test_flax_comparison.py", "test_handle.py", "test_threadable.py"]
#: With torch installed (`--all`).
ALL_FILES = DEFAULT_FILES + [
    "test_simple.py",
    "test_pt_comparison.py",
    "test_pt_model.py",
    "test_pread_backend.py",
    "test_multithreaded.py",
]
# TensorFlow's and Paddle's files (test_tf_comparison.py, test_paddle_comparison.py) run with
# `--files=...`, each in a process of its own: the two frameworks crash in one process.
#: What the default files import beside numpy and JAX (from PyPI, into this interpreter).
NEEDS = {"flax": "flax", "fsspec": "fsspec", "pytest": "pytest"}

#: `safetensors` module -> the ztio module whose names it forwards.
SHIM = {
    "__init__": "ztio._safetensors",
    "numpy": "ztio.numpy",
    "torch": "ztio.torch",
    "flax": "ztio.flax",
    "tensorflow": "ztio.tensorflow",
    "paddle": "ztio.paddle",
    "mlx": "ztio.mlx",
}


def fetch() -> Path:
    """The sdist's tests folder, downloaded and extracted once."""
    tests = WORK / f"safetensors-{VERSION}" / "bindings" / "python" / "tests"
    if tests.is_dir():
        return tests
    WORK.mkdir(parents=True, exist_ok=True)
    name = f"safetensors-{VERSION}.tar.gz"
    index = urllib.request.urlopen("https://pypi.org/simple/safetensors/").read().decode()
    url = next(u for u in re.findall(r'href="([^"]+)"', index) if f"/{name}" in u)
    archive = WORK / name
    urllib.request.urlretrieve(url.split("#")[0], archive)
    with tarfile.open(archive) as t:
        members = [m for m in t.getmembers() if "/bindings/python/tests/" in m.name]
        t.extractall(WORK, members=members, filter="data")
    return tests


def write_shim() -> Path:
    """A `safetensors` package forwarding every name of the ztio modules in `SHIM`. Each
    submodule also has the top-level names, as safetensors' own submodules import them
    (Paddle imports `safe_open` from `safetensors.numpy`)."""
    package = WORK / "shim" / "safetensors"
    package.mkdir(parents=True, exist_ok=True)
    top = SHIM["__init__"]
    for module, target in SHIM.items():
        (package / f"{module}.py").write_text(
            f'"""safetensors, forwarded to {target} (tools/safetensors_suite/run.py)."""\n'
            f"import importlib as _importlib\n"
            f"for _name in ({top!r}, {target!r}):\n"
            f"    _module = _importlib.import_module(_name)\n"
            f"    globals().update({{k: v for k, v in vars(_module).items() if not k.startswith('__')}})\n"
        )
    return package.parent


def install_needs() -> None:
    import importlib.util

    missing = [pkg for module, pkg in NEEDS.items() if importlib.util.find_spec(module) is None]
    if missing:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", *missing], check=True)


def main() -> int:
    files = ALL_FILES if "--all" in sys.argv else DEFAULT_FILES
    chosen = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--files=")]
    if chosen:
        files = chosen[0].split(",")
    if "--shim-only" in sys.argv:
        # For other cross-checks (tools/interop/check_transformers.py): the shim, no suite.
        print(write_shim())
        return 0
    install_needs()
    tests = fetch()
    shim = write_shim()
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE"]
    cmd += [f"tests/{f}" for f in files]
    paths = [str(shim), *filter(None, [__import__("os").environ.get("PYTHONPATH")])]
    env = {**__import__("os").environ, "PYTHONPATH": ":".join(paths)}
    (tests / "data").mkdir(exist_ok=True)
    # The suite writes files into the working folder and reads `tests/data/...`: run it in
    # the extracted bindings/python folder.
    return subprocess.run(cmd, cwd=tests.parent, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
