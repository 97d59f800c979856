#!/usr/bin/env bash
# Every test of the project: the Rust workspace, then the Python package `ztio`, built with
# maturin into its own virtual environment (target/pyenv, made on first use; packages from
# PyPI only). Runs on a fresh machine with nothing but Rust and Python 3 installed.
set -euo pipefail
cd "$(dirname "$0")/.."
# Seconds since the start before each phase, so a slow phase shows in the log.
phase() { printf '\n-- [%ds] %s\n' "$SECONDS" "$*"; }

phase "Rust: cargo test --workspace"
cargo test --workspace
# The Python tests compare ztio's output with the Rust writer's, through the zt binary.
phase "Rust: the zt binary for the Python tests"
cargo build -p zt-cli

venv=target/pyenv
phase "Python: the test packages and ztio, into $venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r python/requirements-test.txt
# maturin installs the package in development mode: python/ztio with the extension beside it.
(cd python && VIRTUAL_ENV="$PWD/../$venv" PATH="$PWD/../$venv/bin:$PATH" maturin develop -q)
phase "Python: pytest"
ZT_BIN="$PWD/target/debug/zt" "$venv/bin/python" -m pytest -q -p no:cacheprovider \
  --doctest-modules python/ztio python/tests
