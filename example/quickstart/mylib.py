"""The library (the domain): plain Python, with two candidates marked for acceleration."""

import coheriq

domain = coheriq.AccelerationDomain("mylib", env_prefix="MYLIB")


@domain.acceleration_candidate
def normalize(xs: list[float]) -> list[float]:
    """Scale ``xs`` so that it sums to one."""
    total = sum(xs)
    return [x / total for x in xs]


@domain.acceleration_candidate
class Histogram:
    """Counts of values in ``bins`` equal-width bins over [0, 1)."""

    def __init__(self, values: list[float], bins: int = 4) -> None:
        self.counts = [0] * bins
        for v in values:
            self.counts[min(int(v * bins), bins - 1)] += 1

    @property
    def backend(self) -> str:
        return "reference"


domain.materialize()
