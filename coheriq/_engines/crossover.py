"""Where an engine starts to win: :func:`crossover`, a size of a call below which it should not run.

An engine declares, for its implementation of a candidate, how big a call is (a function of
the call's arguments) and its declared default: the size below which another implementation
runs the call faster. Below it, the implementation declines softly (see
:func:`~coheriq.may_decline`): the next implementation runs the call, and this one only where
every other engine declines. The reason names the crossover and where it comes from.
"""

from __future__ import annotations

from .._stdlib import TYPE_CHECKING
from ..exceptions import CoheriqTypeError
from .declines import may_decline

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


class Crossover:
    """An implementation's declared crossover: ``size`` of a call (the implementation's
    parameters, ``self`` first), in ``unit``, and the ``threshold`` below which it should
    not run (the engine's declared default: nothing is measured yet)."""

    __slots__ = ("reason", "size", "threshold", "unit")

    def __init__(self, size: Callable[..., int], unit: str, threshold: int) -> None:
        self.size, self.unit, self.threshold = size, unit, threshold
        self.reason = (
            f"fewer than {threshold:,} {unit}: below the crossover declared by the engine, "
            "not measured here"
        )

    def check(self, *args: Any, **kwargs: Any) -> str | None:
        """The soft check: the reason where the call is smaller than the threshold."""
        return self.reason if self.size(*args, **kwargs) < self.threshold else None

    def __repr__(self) -> str:
        return f"<crossover at {self.threshold:,} {self.unit}, declared>"


def crossover(*, size: Callable[..., int], default: int, unit: str = "values") -> Any:
    """Mark an engine's implementation that should not run calls smaller than ``default``.

    ``size`` takes what the implementation takes (``self`` first for a method) and returns
    how big the call is, in ``unit`` (values, rows, nodes): below ``default``, the
    implementation declines the call softly (``may_decline(when=..., soft=True)``), with the
    reason "fewer than N values: below the crossover declared by the engine, not measured
    here", which :func:`coheriq.explain` and a profile show. Keep ``size`` cheap: it runs
    before every call of the implementation.

    Raises:
        CoheriqTypeError: ``size`` is not callable, ``default`` is not a whole number of
            at least 0, or ``unit`` is not a non-empty string.
    """
    if not callable(size):
        raise CoheriqTypeError(
            f"coheriq.crossover(size=...) takes a function of the implementation's arguments "
            f"that returns how big the call is, not {type(size).__name__} {size!r}."
        )
    if isinstance(default, bool) or not isinstance(default, int) or default < 0:
        raise CoheriqTypeError(
            f"coheriq.crossover(default=...) takes the size below which the implementation "
            f"should not run, a whole number of at least 0, not {default!r}."
        )
    if not isinstance(unit, str) or not unit.strip():
        raise CoheriqTypeError(
            f"coheriq.crossover(unit=...) takes what the size counts, a word such as "
            f"'values' or 'rows', not {unit!r}."
        )

    def mark(implementation: Any) -> Any:
        declared = Crossover(size, unit.strip(), default)
        return may_decline(implementation, when=declared.check, soft=True)

    return mark
