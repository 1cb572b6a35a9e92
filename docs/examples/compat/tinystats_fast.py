"""tinystats_fast: an engine written for coheriq 0.0.x, unchanged.

Its package advertises it in ``pyproject.toml``::

    [project.entry-points."coheriq.engines.tinystats"]
    fast = "tinystats_fast"
"""

import math

import coheriq

engine = coheriq.AccelerationEngine("tinystats", "fast")


@engine.override
def mean(xs):
    return math.fsum(xs) / len(xs)


@engine.override
def normalize(xs):
    inverse = 1.0 / math.fsum(xs)
    return [x * inverse for x in xs]


engine.materialize()
