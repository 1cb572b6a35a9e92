"""waves.signal._filters: the heavy module (here, plain Python)."""

from waves import domain


@domain.acceleration_candidate
class Kernel:
    """Weights to slide over a signal."""

    def __init__(self, *weights):
        self.weights = weights


@domain.acceleration_candidate
def convolve(xs, kernel):
    """``xs`` filtered by ``kernel`` (the positions where it fits whole)."""
    width = len(kernel.weights)
    return [
        sum(w * x for w, x in zip(kernel.weights, xs[i : i + width], strict=True))
        for i in range(len(xs) - width + 1)
    ]
