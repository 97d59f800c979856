#!/usr/bin/env bash
# The ONNX, HDF5 and PyTorch rows of `cargo xtask bench`: builds ztio optimized into its own virtual
# environment (target/bench-formats-pyenv, with onnx and h5py from PyPI to compare against;
# torch is never installed here: ZT_BENCH_FORMATS_PYENV may name a venv that has it)
# and runs tools/bench/formats_bench.py. Arguments go to the script.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=${ZT_BENCH_FORMATS_PYENV:-target/bench-formats-pyenv}
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check maturin numpy ml_dtypes onnx h5py safetensors
venv=$(cd "$venv" && pwd)
(cd python && VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" maturin develop -q --release)
cd tools/bench && exec "$venv/bin/python" formats_bench.py --dir ../../target/bench-data "$@"
