"""Fitting a line: imported on first use of lazylib.fit or lazylib.Model."""

# A real library imports its heavy dependency here (SciPy, JAX, ...): the reason
# this module is imported lazily.
import statistics

from lazylib import domain


@domain.acceleration_candidate
class Model:
    """A line ``y = slope * x + intercept``."""

    def __init__(self, slope: float, intercept: float) -> None:
        self.slope = slope
        self.intercept = intercept

    def __call__(self, x: float) -> float:
        return self.slope * x + self.intercept


@domain.acceleration_candidate
def fit(xs: list[float], ys: list[float]) -> Model:
    """The least-squares line through the points ``(xs[i], ys[i])``."""
    slope, intercept = statistics.linear_regression(xs, ys)
    return Model(slope, intercept)
