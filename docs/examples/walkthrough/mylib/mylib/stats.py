"""Functions on lists of numbers."""

import math

from mylib._domain import domain


@domain.acceleration_candidate
def normalize(xs: list[float]) -> list[float]:
    """Scale ``xs`` so that it sums to one."""
    total = math.fsum(xs)
    return [x / total for x in xs]


@domain.acceleration_candidate
def mean(xs: list[float]) -> float:
    """The arithmetic mean of ``xs``."""
    return math.fsum(xs) / len(xs)
