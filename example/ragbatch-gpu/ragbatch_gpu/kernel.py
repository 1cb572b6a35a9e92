"""Segmented softmax as one Pallas kernel: a program per row, the row read twice.

XLA's segment reductions go through scatters into per-row slots and move each
value several times (its row id too), which keeps a softmax far from the memory
bandwidth of a GPU. This kernel gives each row a program of its own, which walks
the row in blocks of ``BLOCK`` values twice: once to find the row's maximum and
its sum of ``exp(x - max)`` together (an online softmax: the running sum is
rescaled whenever the maximum grows), and once to write ``exp(x - max) / sum``.
The second read of a row mostly hits the cache, so each value crosses memory
about once each way: one read and one write of 8 bytes.

On a GPU the kernel is compiled through Triton; elsewhere Pallas interprets it
(slowly, but the same program: that is how it is tested without a GPU).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

BLOCK = 1024  # values of a row handled at once by one program
WARPS = 4


def _softmax_row(offsets_ref, values_ref, out_ref):
    """The program of one row: ``out = exp(values - max) / sum`` over the row's values."""
    row = pl.program_id(0)
    start, stop = offsets_ref[row], offsets_ref[row + 1]
    lanes = jnp.arange(BLOCK, dtype=start.dtype)
    blocks = (stop - start + BLOCK - 1) // BLOCK

    def block(i):
        """Block ``i`` of the row: where it is, and which of its lanes are in the row."""
        first = start + i * BLOCK
        return pl.ds(first, BLOCK), first + lanes < stop

    def scan(i, carry):
        top, total = carry
        where, mask = block(i)
        x = plgpu.load(values_ref.at[where], mask=mask, other=-jnp.inf)
        new_top = jnp.maximum(top, jnp.max(x))
        # -inf values (and the masked lanes) add nothing; a row of only -inf ends with
        # a sum of 0, and 0/0 gives NaN, as the reference does.
        terms = jnp.where(x == -jnp.inf, 0.0, jnp.exp(x - new_top))
        rescale = jnp.where(new_top == top, 1.0, jnp.exp(top - new_top))
        return new_top, total * rescale + jnp.sum(terms)

    zero = jnp.zeros((), values_ref.dtype)
    top, total = lax.fori_loop(0, blocks, scan, (zero - jnp.inf, zero))

    def write(i, carry):
        where, mask = block(i)
        x = plgpu.load(values_ref.at[where], mask=mask, other=0.0)
        plgpu.store(out_ref.at[where], jnp.exp(x - top) / total, mask=mask)
        return carry

    lax.fori_loop(0, blocks, write, 0)


@functools.partial(jax.jit, static_argnames=("rows", "interpret"))
def softmax(values: jax.Array, offsets: jax.Array, rows: int, interpret: bool) -> jax.Array:
    """Per-row softmax of flat ``values`` over the first ``rows`` rows of ``offsets``.

    Values outside every row (padding) are left undefined in the result.
    """
    return pl.pallas_call(
        _softmax_row,
        out_shape=jax.ShapeDtypeStruct(values.shape, values.dtype),
        grid=(rows,),
        interpret=interpret,
        compiler_params=plgpu.CompilerParams(num_warps=WARPS),
        name="ragbatch_segmented_softmax",
    )(offsets, values)
