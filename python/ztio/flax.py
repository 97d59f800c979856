"""safetensors' ``safetensors.flax`` functions over ztio: JAX arrays in and out.

``load_file``/``load`` give ``jax.Array`` values (JAX copies each into its own buffer, as
with safetensors); ``save_file``/``save`` take JAX arrays (or anything ``numpy.asarray``
takes). bf16 and the FP8 types travel as ml_dtypes' numpy types, which JAX uses itself.
``safe_open(..., framework="flax")`` (or ``"jax"``) reads JAX arrays too.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ._bridge import functions, typed_by_ml_dtypes

__all__ = ["load_file", "save_file", "load", "save"]


def _jax_array(array: np.ndarray, device: str = "cpu", kind: Optional[str] = None) -> Any:
    import jax.numpy as jnp

    return jnp.asarray(typed_by_ml_dtypes(array, kind))


load_file, load, save_file, save = functions(("flax", "jax"), "JAX arrays", _jax_array)
