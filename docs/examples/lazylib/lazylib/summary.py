"""Quick summaries: imported with lazylib."""

from lazylib import domain


@domain.acceleration_candidate
def spread(xs: list[float]) -> float:
    """The distance between the smallest and the largest of ``xs``."""
    return max(xs) - min(xs)
