#!/usr/bin/env python3
"""Writes crates/zt-formats/src/ggml/iq_grids.rs: the code books of ggml's IQ block types
(`iq2xxs_grid`, `iq2xs_grid`, `iq2s_grid`, `iq3xxs_grid`, `iq3s_grid`, `iq1s_grid` of
ggml-common.h), as the `gguf` package (llama.cpp's gguf-py) packs them: each entry's values
as indices into the type's levels, 2 bits each for IQ1/IQ2 and 4 bits each for IQ3, lowest
bits first, in hexadecimal text. ggml.rs unpacks them at compile time.

    python3 -m venv /tmp/gguf-venv && /tmp/gguf-venv/bin/pip install gguf==0.19.0 numpy
    /tmp/gguf-venv/bin/python tools/interop/make_iq_grids.py

The output is deterministic; running it again must leave the file unchanged.
"""
import os

from gguf import quants

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
OUT = os.path.join(ROOT, "crates", "zt-formats", "src", "ggml", "iq_grids.rs")

# (constant, gguf-py class, ggml's name of the table)
GRIDS = [
    ("IQ2XXS", quants.IQ2_XXS, "iq2xxs_grid"),
    ("IQ2XS", quants.IQ2_XS, "iq2xs_grid"),
    ("IQ2S", quants.IQ2_S, "iq2s_grid"),
    ("IQ3XXS", quants.IQ3_XXS, "iq3xxs_grid"),
    ("IQ3S", quants.IQ3_S, "iq3s_grid"),
    ("IQ1S", quants.IQ1_S, "iq1s_grid"),
]

lines = [
    "//! The IQ types' code books (ggml-common.h's `iq2xxs_grid` ... `iq1s_grid`), packed as",
    "//! the `gguf` package 0.19.0 packs them: each entry's values as indices into its type's",
    "//! levels, 2 bits each (IQ1, IQ2) or 4 bits each (IQ3), lowest bits first, as hexadecimal",
    "//! text. Written by tools/interop/make_iq_grids.py; not edited by hand.",
    "",
]
for name, cls, ggml_name in GRIDS:
    text = cls.grid_hex.decode("ascii")
    assert all(c in "0123456789abcdef" for c in text), name
    entries, width = cls.grid_shape
    levels = ", ".join(str(v) for v in cls.grid_map)
    lines.append(f"/// `{ggml_name}`: {entries} entries of {width} values, each one of {levels}.")
    lines.append(f"pub(super) const {name}: &str = concat!(")
    for at in range(0, len(text), 64):
        lines.append(f'    "{text[at:at + 64]}",')
    lines.append(");")
    lines.append("")

os.makedirs(os.path.dirname(OUT), exist_ok=True)
with open(OUT, "w", newline="\n") as f:
    f.write("\n".join(lines[:-1]) + "\n")
print(OUT, sum(len(c.grid_hex) // 2 for _, c, _ in GRIDS), "bytes of grids")
