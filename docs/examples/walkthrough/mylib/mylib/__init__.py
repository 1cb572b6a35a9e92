"""mylib: small statistics on lists of numbers.

Every public function and class is a coheriq acceleration candidate of the
domain "mylib"; MYLIB_ENGINE or coheriq.enable_engine("mylib", ...) chooses an
engine.
"""

# 1. The domain, before any module that marks candidates.
from mylib._domain import domain

# 2. Every module that marks candidates.
from mylib.histogram import Histogram, density
from mylib.stats import mean, normalize

# 3. Once, after the last candidate: builds the reference class engines derive from.
domain.materialize()

__all__ = ["Histogram", "density", "domain", "mean", "normalize"]
