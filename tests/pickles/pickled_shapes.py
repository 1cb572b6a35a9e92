"""A small marked library whose objects were pickled by an earlier coheriq (see README)."""

import coheriq

domain = coheriq.AccelerationDomain("pickled_shapes")


@domain.acceleration_candidate
class Interval:
    """The numbers from ``lo`` to ``hi``."""

    def __init__(self, lo, hi):
        self.lo, self.hi = lo, hi

    def width(self):
        return self.hi - self.lo


domain.materialize()
