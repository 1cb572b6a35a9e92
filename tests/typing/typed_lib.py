"""A typed domain and engine; tests/test_typing.py runs mypy --strict over it.

Never imported: the reveal_type lines are for the type checker only.
"""

from typing import TYPE_CHECKING

import coheriq

domain = coheriq.AccelerationDomain("typed_lib")


@domain.acceleration_candidate
def scale(xs: list[float], factor: float = 2.0) -> list[float]:
    return [x * factor for x in xs]


@domain.acceleration_candidate(name="rows")
class Batch:
    def __init__(self, rows: list[list[float]]) -> None:
        self.rows = rows

    @classmethod
    def empty(cls) -> "Batch":
        return cls([])


domain.materialize()

fast = coheriq.AccelerationEngine("typed_lib", "fast")


@fast.override("scale")
def fast_scale(xs: list[float], factor: float = 2.0) -> list[float]:
    return [x * factor for x in xs]


fast.materialize()

# The class form: type checkers cannot follow a base class computed by a call, so
# give them a plain base and the runtime the engine class.
if TYPE_CHECKING:
    Reference = object
else:
    Reference = coheriq.engine_class("typed_lib")


class Gpu(Reference, name="gpu"):  # type: ignore[call-arg]
    def scale(self, xs: list[float], factor: float = 2.0) -> list[float]:
        return xs


reveal_type(scale)
reveal_type(scale([1.0], factor=3.0))
reveal_type(Batch)
reveal_type(Batch([[1.0]]))
reveal_type(Batch.empty())
reveal_type(fast_scale)
reveal_type(coheriq.resolve_impl(scale))
reveal_type(coheriq.resolve_impl(Batch))
reveal_type(coheriq.engine_of(Batch.empty()))
scale("not a list")  # an error the checker must still report through the decorator
