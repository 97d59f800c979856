#!/usr/bin/env bash
# The wheel a user installs, as README says to build it: `maturin build --features abi3` (one
# wheel for CPython 3.11 and later), installed by pip into a fresh virtual environment that
# has nothing else. Then what `pip install` promises: the `zt` command, `python -m ztio`
# (the same code), and ztio itself from the wheel, not from the source tree. The test suite
# runs on the development install (tools/test.sh); this is the one check of the wheel.
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

python3 -m venv "$out/venv"
"$out/venv/bin/pip" install -q --disable-pip-version-check "$wheel"

# Away from the source tree, so that `import ztio` can only find the installed package.
cd "$out"
fixture=$root/fixtures/valid/dtypes.zt
version=$("$out/venv/bin/zt" --version)
[[ $version == "zt "* ]] || { echo "wheel check: zt --version said: $version" >&2; exit 1; }
from_command=$("$out/venv/bin/zt" ls "$fixture")
from_module=$("$out/venv/bin/python" -m ztio ls "$fixture")
from_binary=$("$root/target/debug/zt" ls "$fixture")
if [ "$from_command" != "$from_binary" ] || [ "$from_module" != "$from_binary" ]; then
  echo "wheel check: the wheel's zt ls differs from the zt binary's" >&2
  exit 1
fi
"$out/venv/bin/python" - "$out/venv" <<'EOF'
import os, sys
import numpy as np
import ztio, ztio.numpy

venv = os.path.realpath(sys.argv[1])
assert os.path.realpath(ztio.__file__).startswith(venv), ztio.__file__
w = np.arange(12, dtype=np.float32).reshape(3, 4)
ztio.numpy.save_file({"w": w}, "w.safetensors")
back = ztio.numpy.load_file("w.safetensors")["w"]
assert back.dtype == w.dtype and (back == w).all()
ztio.convert("w.safetensors", "w.zt")
with ztio.open("w.zt") as f:
    assert (f.get_tensor("w") == w).all()
EOF
echo "wheel check: $(basename "$wheel") installs zt, python -m ztio and ztio"
