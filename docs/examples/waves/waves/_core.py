"""waves._core: what needs no heavy dependency."""

from waves import domain


@domain.acceleration_candidate
def mean(xs):
    """The mean of ``xs``."""
    return sum(xs) / len(xs)
