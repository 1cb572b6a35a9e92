"""Engine "numpy" of CPython's statistics module, marked as a coheriq domain.

A few functions on NumPy for the common case, data of plain ints and floats;
everything else (Fractions, Decimals, infinities and NaNs, empty or negative
data, iterators of mixed types, weights) goes to ``super()``, the library's own implementation,
which also raises the library's errors. The results differ from the library's
only by floating-point rounding: NumPy sums pairwise, the library sums exactly
(``math.fsum`` or exact fractions) and rounds once.
"""

from __future__ import annotations

import math

import numpy as np

import coheriq


def _floats(data):
    """``data`` as a list, and as a float64 array if it holds only finite ints and floats."""
    values = data if isinstance(data, list) else list(data)
    if values and all(type(v) in (int, float) for v in values):
        array = np.asarray(values, dtype=np.float64)
        if np.isfinite(array).all():  # the library decides what infinities and NaNs give
            return values, array
    return values, None


def _variance(array):
    """The population variance: exactly 0.0 for data of one value, as the library gives."""
    if array.min() == array.max():  # NumPy's mean of such data may differ in the last bit
        return 0.0
    return float(np.var(array))


class Numpy(coheriq.engine_class("statistics"), name="numpy"):
    """NumPy's vectorized arithmetic for fmean, geometric_mean, pvariance, pstdev, correlation."""

    def fmean(self, data, weights=None):
        values, array = _floats(data)
        if array is None or weights is not None:
            return super().fmean(values, weights)
        return float(np.mean(array))

    def geometric_mean(self, data):
        values, array = _floats(data)
        if array is None or not (array > 0).all():
            return super().geometric_mean(values)
        return float(np.exp(np.mean(np.log(array))))

    def pvariance(self, data, mu=None):
        values, array = _floats(data)
        if array is None or mu is not None:
            return super().pvariance(values, mu)
        return _variance(array)

    def pstdev(self, data, mu=None):
        values, array = _floats(data)
        if array is None or mu is not None:
            return super().pstdev(values, mu)
        return math.sqrt(_variance(array))

    def correlation(self, x, y, /, *, method="linear"):
        xs, x_array = _floats(x)
        ys, y_array = _floats(y)
        # method= is new in 3.12: the library's own is called as the caller called it.
        given = {} if method == "linear" else {"method": method}
        if x_array is None or y_array is None or method != "linear" or len(xs) != len(ys):
            return super().correlation(xs, ys, **given)
        if len(xs) < 2 or x_array.std() == 0 or y_array.std() == 0:
            return super().correlation(xs, ys, **given)
        return float(np.corrcoef(x_array, y_array)[0, 1])
