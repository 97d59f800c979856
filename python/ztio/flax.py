"""safetensors' ``safetensors.flax`` functions over ztio: JAX arrays in and out.

``load_file``/``load`` give ``jax.Array`` values. On the CPU, a tensor whose bytes lie aligned
to 64 bytes in the file's (copy-on-write) map becomes a JAX array over those bytes, with no
copy (every tensor of a ``.zt`` file ztio wrote); JAX holds the map as long as the array
lives. Others, and every array on another device, are copied, as safetensors copies every
one. ``save_file``/``save`` take JAX arrays (or anything ``numpy.asarray`` takes). bf16 and
the FP8 types travel as ml_dtypes' numpy types, which JAX uses itself; so do the packed 4- and
2-bit types JAX has (``int4``, ``uint4``, ``int2``, ``uint2``, ``float4_e2m1fn``), unpacked.
``safe_open(..., framework="flax")`` (or ``"jax"``) reads JAX arrays too.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ._bridge import functions, typed_by_ml_dtypes

__all__ = ["load_file", "save_file", "load", "save"]


def _jax_array(array: np.ndarray, device: str = "cpu", kind: Optional[str] = None) -> Any:
    import jax

    typed = typed_by_ml_dtypes(array, kind)
    # `may_alias`: JAX on the CPU keeps an array aligned to 64 bytes where it lies instead of
    # copying it (`jnp.asarray` always copies: about 0.5 s per GiB into fresh memory here).
    # Only over a writable (private) map: JAX treats the bytes as its own, and a donated
    # buffer may be written. The dtypes JAX does not keep (float64 without x64) are converted
    # by both calls alike.
    if array.flags.writeable:
        try:
            return jax.device_put(typed, may_alias=True)
        except TypeError:  # a JAX from before `may_alias`
            pass
    return jax.device_put(typed)


def _keeps_aligned(dtype: np.dtype, device: str) -> bool:
    # Every array JAX takes: on the CPU it keeps the aligned ones in place (`_jax_array`),
    # and onto another device it copies from wherever the bytes lie.
    return True


def _jax_has(dtype: np.dtype) -> bool:
    # The sub-byte types a JAX array can hold, where this JAX names them. JAX 0.10 names
    # float6_e2m3fn too, yet its CPU client refuses to take an array of it ("Unknown NumPy
    # dtype"): FP6 stays bytes.
    import jax.numpy as jnp

    return dtype.name in ("int4", "uint4", "int2", "uint2", "float4_e2m1fn") and hasattr(jnp, dtype.name)


load_file, load, save_file, save = functions(
    ("flax", "jax"), "JAX arrays", _jax_array, keeps_aligned=_keeps_aligned, sub_byte=_jax_has
)
