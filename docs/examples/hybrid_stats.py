"""A library with two candidates, two engines written apart, and a hybrid of both."""

import coheriq

# the library
stats = coheriq.AccelerationDomain("stats")


@stats.acceleration_candidate
def normalize(xs):
    total = sum(xs)
    return [x / total for x in xs]


@stats.acceleration_candidate
class Histogram:
    def __init__(self, bins):
        self.counts = [0] * bins

    def add(self, xs):
        for x in xs:
            self.counts[x] += 1
        return self


stats.materialize()


# an engine for the GPU, from one team
class Gpu(coheriq.engine_class("stats"), name="gpu"):
    def normalize(self, xs):
        return ["gpu", *super().normalize(xs)]  # falls back along the MRO


# an engine over MPI, from another team
class Mpi(coheriq.engine_class("stats"), name="mpi"):
    class Histogram(coheriq.engine_class("stats").Histogram):
        def add(self, xs):  # here each rank would count its share, then reduce
            super().add(xs)
            self.ranks = 1
            return self


# a hybrid of the two: plain multiple inheritance, and the MRO decides
class Hybrid(
    coheriq.engine_class("stats", "gpu"), coheriq.engine_class("stats", "mpi"), name="hybrid"
):
    pass
