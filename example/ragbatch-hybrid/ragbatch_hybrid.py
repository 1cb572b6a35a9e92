"""Engine "hybrid" of ragbatch: the numpy and compiled engines, each where it is faster.

A diamond: both engines derive from ragbatch's reference class, and this class
from both, so Python's MRO (Hybrid, numpy, compiled, reference) decides whatever
is not chosen here. Both engines build their results with ``self.RaggedBatch``,
so under this engine they all build the hybrid's container.
"""

from typing import Any

import ragbatch

import coheriq

Numpy = coheriq.engine_class("ragbatch", "numpy")  # imports the two engines
Compiled = coheriq.engine_class("ragbatch", "compiled")


class HybridBatch(Numpy.RaggedBatch):
    """NumPy arrays inside (cheap to hand to both engines' kernels)."""

    @property
    def backend(self) -> str:
        return "hybrid"


class Hybrid(Numpy, Compiled, name="hybrid"):
    """The numpy and compiled engines combined: each function from the faster one."""

    RaggedBatch = HybridBatch
    softmax = Compiled.softmax  # one pass in C beats NumPy's temporaries
    row_sum = Compiled.row_sum
    row_mean = Compiled.row_mean

    def topk(self, batch: Any, k: int) -> Any:
        if ragbatch.check_k(k) > 64:  # many kept per row: NumPy's one sort of the padded rows wins
            return super().topk(batch, k)
        return Compiled.topk(self, batch, k)
