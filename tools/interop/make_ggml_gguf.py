"""Converts the legacy llama.cpp fixtures in fixtures/interop/ggml/ to GGUF with llama.cpp's own
converter, and writes what it wrote to fixtures/interop/ggml/to_gguf/: the files `zt convert`'s
GGUF output of the same GGML files is checked against (crates/ztensor/tests/ggml.rs).

The converter is `convert-llama-ggml-to-gguf.py` with its `gguf-py`, as vendored by
llama-cpp-python 0.1.85 (the release that brought GGUF), from its source distribution on PyPI
(fetched by this script). Run with its defaults, as a user without the original model beside
the file would: context length 2048, RMS norm epsilon 5e-6, no grouped-query attention.

Why not today's: the same script in llama-cpp-python 0.3.36 (`convert_llama_ggml_to_gguf.py`,
with its `gguf-py`) writes an F16 tensor with half its innermost dimension (token_embd.weight
of 32 x 48 as 16 x 48) and stops at a quantized one ("Quantized tensor bytes per row (32) is
not a multiple of Q4_0 type size (18)"): its `gguf-py` came to read a quantized tensor's
shape as bytes, and the script was not changed with it.

Needs: numpy below 2 (0.1.85's gguf-py predates numpy 2). Run:

    python tools/interop/make_ggml_gguf.py fixtures/interop/ggml
"""

import glob
import os
import subprocess
import sys
import tempfile

from pypi_sdist import sdist

CONVERTER = ("llama-cpp-python", "0.1.85")


def main(fixtures):
    out = os.path.join(fixtures, "to_gguf")
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        llama_cpp = os.path.join(sdist(*CONVERTER, work), "vendor", "llama.cpp")
        env = dict(os.environ, PYTHONPATH=os.path.join(llama_cpp, "gguf-py"))
        script = os.path.join(llama_cpp, "convert-llama-ggml-to-gguf.py")
        for ggml in sorted(glob.glob(os.path.join(fixtures, "llama-*.bin"))):
            gguf = os.path.join(out, os.path.basename(ggml)[: -len(".bin")] + ".gguf")
            subprocess.run([sys.executable, script, "--input", ggml, "--output", gguf],
                           env=env, check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            print(gguf)


if __name__ == "__main__":
    main(sys.argv[1])
