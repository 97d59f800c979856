#!/usr/bin/env bash
# The Python rows of `cargo xtask bench`: builds ztio optimized into its own virtual
# environment (target/bench-pyenv, with safetensors from PyPI to compare against) and runs
# tools/bench/python_bench.py. Arguments go to the script.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=${ZT_BENCH_PYENV:-target/bench-pyenv}  # ZT_BENCH_PYENV: a venv that has torch etc. for their rows
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check maturin numpy ml_dtypes safetensors jax
venv=$(cd "$venv" && pwd)
(cd python && VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" maturin develop -q --release)
exec "$venv/bin/python" tools/bench/python_bench.py "$@"
