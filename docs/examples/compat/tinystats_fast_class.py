"""tinystats_fast in the class form: the same engine, if its authors want to move.

Nothing requires the move; the entry point stays ``fast = "tinystats_fast"``
with this file's contents.
"""

import math

import coheriq


class Fast(coheriq.engine_class("tinystats"), name="fast"):
    def mean(self, xs):
        return math.fsum(xs) / len(xs)

    def normalize(self, xs):
        inverse = 1.0 / math.fsum(xs)
        return [x * inverse for x in xs]
