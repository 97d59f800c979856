#!/usr/bin/env bash
# The wheel a user installs, as README says to build it: `maturin build --features abi3` (one
# wheel for CPython 3.11 and later), installed by pip into a fresh virtual environment that
# has nothing else. Then what `pip install` promises: the `zt` command, `python -m ztio`
# (the same code), and ztio itself from the wheel, not from the source tree. The test suite
# runs on the development install (tools/test.sh) and, where a Python after 3.11 is
# installed, once more on the wheel under that Python (below).
# Needs target/pyenv (made by tools/test.sh) for maturin. A debug build: this checks what
# the wheel holds and installs, not its speed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=$root/target/wheel-check
rm -rf "$out"
mkdir -p "$out"

(cd python && VIRTUAL_ENV="$root/target/pyenv" PATH="$root/target/pyenv/bin:$PATH" \
  maturin build -q --features abi3 -o "$out/dist")
wheels=("$out"/dist/*.whl)
if [ "${#wheels[@]}" -ne 1 ]; then
  echo "wheel check: expected one wheel, found: ${wheels[*]}" >&2
  exit 1
fi
wheel=${wheels[0]}
case "$(basename "$wheel")" in
  ztio-*-cp311-abi3-*.whl) ;;
  *) echo "wheel check: not an abi3 wheel for CPython 3.11 and later: $wheel" >&2; exit 1 ;;
esac

# What the installed package in `venv` does, run from a folder outside the source tree so
# that `import ztio` can only find the installed package.
check_installed() {
  local venv=$1 fixture=$root/fixtures/valid/dtypes.zt
  local version from_command from_module from_binary
  version=$("$venv/bin/zt" --version)
  [[ $version == "zt "* ]] || { echo "wheel check: zt --version said: $version" >&2; exit 1; }
  from_command=$("$venv/bin/zt" ls "$fixture")
  from_module=$("$venv/bin/python" -m ztio ls "$fixture")
  from_binary=$("$root/target/debug/zt" ls "$fixture")
  if [ "$from_command" != "$from_binary" ] || [ "$from_module" != "$from_binary" ]; then
    echo "wheel check: the wheel's zt ls differs from the zt binary's" >&2
    exit 1
  fi
  "$venv/bin/python" - "$venv" <<'PY'
import os, sys
import numpy as np
import ztio, ztio.numpy

venv = os.path.realpath(sys.argv[1])
assert os.path.realpath(ztio.__file__).startswith(venv), ztio.__file__
w = np.arange(12, dtype=np.float32).reshape(3, 4)
ztio.numpy.save_file({"w": w}, "w.safetensors")
back = ztio.numpy.load_file("w.safetensors")["w"]
assert back.dtype == w.dtype and (back == w).all()
ztio.convert("w.safetensors", "w.zt", force=True)
with ztio.open("w.zt") as f:
    assert (f.get_tensor("w") == w).all()
PY
  echo "wheel check: $(basename "$wheel") installs zt, python -m ztio and ztio on $("$venv/bin/python" -V)"
}

# A fresh virtual environment of `python` with the wheel installed by pip, checked.
check_with() {
  local python=$1 venv=$2
  "$python" -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "$wheel"
  (cd "$out" && check_installed "$venv")
}

# The 3.11 every machine has, and a later Python where one is installed (pyenv's, here),
# which only an abi3 wheel can serve.
check_with python3 "$out/venv"
later=
# The last of these that runs: the latest (a pyenv shim of a version not selected is on PATH
# but does not run).
for python in python3.12 python3.13 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[2-9]*/bin/python3; do
  if command -v "$python" >/dev/null && "$python" -V >/dev/null 2>&1; then
    later=$python
  fi
done
if [ -n "$later" ]; then
  check_with "$later" "$out/venv-later"
  # The test suite once more, on the installed wheel under that Python and the numpy pip
  # picks for it: numpy 2.5 and later need Python 3.12, so tools/test.sh's 3.11 gets 2.4,
  # and a user on a current Python gets 2.5. Without JAX (its tests skip, saying so), to keep
  # the download small. Run from the root: `import ztio` finds the installed package, since
  # pytest puts python/tests on the path, not python/.
  "$out/venv-later/bin/pip" install -q --disable-pip-version-check pytest ml_dtypes scipy
  (cd "$root" && ZT_BIN="$root/target/debug/zt" "$out/venv-later/bin/python" -m pytest -q \
    -p no:cacheprovider python/tests)
  echo "wheel check: the test suite passed on the wheel, $("$out/venv-later/bin/python" -V), numpy $("$out/venv-later/bin/python" -c 'import numpy; print(numpy.__version__)')"
else
  echo "wheel check: no Python after 3.11 on this machine; the abi3 wheel was checked on 3.11 only"
fi
