"""tinystats: a library written for coheriq 0.0.x, unchanged."""

import coheriq

_domain = coheriq.AccelerationDomain("tinystats", env_prefix="TINYSTATS")


@_domain.acceleration_candidate
def mean(xs):
    """The arithmetic mean of ``xs``."""
    return sum(xs) / len(xs)


@_domain.acceleration_candidate
def normalize(xs):
    """``xs`` scaled so that it sums to one."""
    total = sum(xs)
    return [x / total for x in xs]


_domain.materialize()
