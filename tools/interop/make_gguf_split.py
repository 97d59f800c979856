"""Splits a GGUF model with llama.cpp's own `llama-gguf-split` and writes the splits to
fixtures/interop/gguf/split/: `llama-q4_0-0000N-of-00003.gguf`, the Q4_0 llama model of
fixtures/interop/ggml/to_gguf/ in three files of at most five tensors
(`--split-max-tensors 5`), as llama.cpp splits the models people download in parts.
crates/ztensor/tests/gguf_split.rs opens them as one model and compares it with the file
they were split from.

llama.cpp is the one vendored by llama-cpp-python 0.3.36, from its source distribution on
PyPI (fetched by this script), built here with CMake (the `cmake` package from PyPI) and a
C/C++ compiler: the `llama-gguf-split` target only (a few minutes on two cores). Give
`--llama-cpp DIR` to use a llama.cpp tree already built in `DIR/build`. Run:

    python tools/interop/make_gguf_split.py fixtures/interop
"""

import glob
import os
import shutil
import subprocess
import sys
import tempfile

from pypi_sdist import sdist

SOURCE = ("llama-cpp-python", "0.3.36")


def build(llama_cpp):
    """Builds `llama-gguf-split` in `llama_cpp`/build; returns its path."""
    cmake = shutil.which("cmake")
    if cmake is None:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "cmake"], check=True)
        cmake = shutil.which("cmake") or os.path.join(os.path.dirname(sys.executable), "cmake")
    subprocess.run([cmake, "-B", "build", "-DGGML_NATIVE=OFF", "-DLLAMA_CURL=OFF",
                    "-DLLAMA_BUILD_TESTS=OFF", "-DCMAKE_BUILD_TYPE=Release"],
                   cwd=llama_cpp, check=True, stdout=subprocess.DEVNULL)
    subprocess.run([cmake, "--build", "build", "--target", "llama-gguf-split", "-j2"],
                   cwd=llama_cpp, check=True, stdout=subprocess.DEVNULL)
    return os.path.join(llama_cpp, "build", "bin", "llama-gguf-split")


def main(fixtures, llama_cpp=None):
    with tempfile.TemporaryDirectory() as work:
        if llama_cpp is None:
            llama_cpp = os.path.join(sdist(*SOURCE, work), "vendor", "llama.cpp")
        tool = os.path.join(llama_cpp, "build", "bin", "llama-gguf-split")
        if not os.path.exists(tool):
            tool = build(llama_cpp)
        out = os.path.join(fixtures, "gguf", "split")
        os.makedirs(out, exist_ok=True)
        for old in glob.glob(os.path.join(out, "*.gguf")):
            os.remove(old)
        model = os.path.join(fixtures, "ggml", "to_gguf", "llama-ggjt-v3-q4_0.gguf")
        env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(tool))
        subprocess.run([tool, "--split", "--split-max-tensors", "5", model,
                        os.path.join(out, "llama-q4_0")], check=True, env=env,
                       stdout=subprocess.DEVNULL)
        for f in sorted(glob.glob(os.path.join(out, "*.gguf"))):
            print(f)


if __name__ == "__main__":
    args = sys.argv[1:]
    tree = None
    if "--llama-cpp" in args:
        i = args.index("--llama-cpp")
        tree = args[i + 1]
        del args[i:i + 2]
    main(args[0], tree)
