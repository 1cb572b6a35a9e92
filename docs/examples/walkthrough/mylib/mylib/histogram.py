"""Histograms: a class and the functions that read it."""

from mylib._domain import domain


@domain.acceleration_candidate
class Histogram:
    """Counts of ``values`` in ``bins`` equal-width bins over [0, 1).

    Its public surface, which every engine's histogram has too, is ``counts``:
    a list of ``bins`` integers.
    """

    def __init__(self, values: list[float], bins: int = 4) -> None:
        self.counts = [0] * bins
        for v in values:
            self.counts[min(int(v * bins), bins - 1)] += 1


@domain.acceleration_candidate
def density(histogram: Histogram) -> list[float]:
    """The share of the values in each bin of ``histogram``."""
    total = sum(histogram.counts)
    return [count / total for count in histogram.counts]
