"""Engine "jax" of array-api-extra, a library that never adopted coheriq: its own code on JAX.

array-api-extra's functions are written against the array API standard: they compute
with the namespace of their arguments (``xp``). This engine writes no function of its
own. It declares two conversions, and coheriq runs the library's own code on the
arguments converted: a NumPy array becomes a JAX array (64-bit, as NumPy computes),
and the namespace ``array_api_compat.numpy`` (what ``array_namespace`` gives for NumPy
arrays, and what callers pass as ``xp=``) becomes ``jax.numpy``, so that the code runs
on JAX rather than on NumPy. A caller that passed NumPy gets NumPy back: each JAX array
in the result (or in a tuple or list it returns) as a writable ``numpy.ndarray``, as
NumPy's own results are. ``converted`` counts the arrays converted each way, so that a
test can tell the engine ran.

Candidates run on JAX: those whose tests in array-api-extra's own suite, run with
NumPy inputs, all give the same outcome on this engine as on NumPy. The others run the
library's own code on NumPy (JAX arrays given to them are converted to NumPy, as at any
fallback):

* ``angle``, ``deg2rad``, ``rad2deg``, ``nanmin``, ``nanmax``, ``nunique``,
  ``searchsorted``: the suite's read-only NumPy backend passes ``xp=`` an object of
  its own (not a module), which this engine does not convert: NumPy's functions would
  get JAX arrays.
* ``apply_where``: its callbacks may close over NumPy arrays, which no conversion
  sees; the code then mixes NumPy and JAX arrays.
* ``cov``: NumPy warns "Degrees of freedom <= 0" (the suite checks it); JAX does not.
* ``diag_indices``, ``tril_indices``, ``triu_indices``: a NumPy device (``"cpu"``)
  passed as ``device=`` means nothing to JAX.
* ``lazy_apply``: it calls the caller's function, which expects the caller's arrays
  (the suite checks that they are NumPy's).

The declaration (``array_api_extra_jax.declaration.json``) names every public function
of the library, in the module that defines it.
"""

from __future__ import annotations

import collections
import types

import array_api_compat.numpy as numpy_namespace
import jax
import jax.numpy as jnp
import numpy

import coheriq

jax.config.update("jax_enable_x64", True)  # NumPy computes in 64 bits; JAX would in 32

converted: collections.Counter[str] = collections.Counter()  # arrays, "to_jax"/"to_numpy"

CANDIDATES = [
    "argpartition", "atleast_nd", "broadcast_shapes", "create_diagonal", "default_dtype",
    "expand_dims", "isclose", "isin", "kron", "nan_to_num", "nanmean", "nansum", "one_hot",
    "pad", "partition", "setdiff1d", "sinc", "union1d", "unravel_index",
]  # fmt: skip


def to_jax(array: numpy.ndarray) -> jax.Array:
    converted["to_jax"] += 1
    return jnp.asarray(array)


def to_numpy(array: jax.Array) -> numpy.ndarray:
    converted["to_numpy"] += 1
    return numpy.array(array)  # a writable copy: NumPy's own results are writable


def jax_namespace(module: types.ModuleType) -> types.ModuleType:
    return jnp if module is numpy_namespace else module


def numpy_form(module: types.ModuleType) -> types.ModuleType:
    return numpy_namespace if module is jnp else module


Jax = coheriq.conversion_engine(
    "array_api_extra",
    "jax",
    [
        coheriq.Conversion(numpy.ndarray, jax.Array, to_engine=to_jax, to_library=to_numpy),
        coheriq.Conversion(
            types.ModuleType, types.ModuleType, to_engine=jax_namespace, to_library=numpy_form
        ),
    ],
    CANDIDATES,
)
