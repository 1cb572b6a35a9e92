"""Where an engine starts to win: :func:`crossover`, a size of a call below which it should not run.

An engine declares, for its implementation of a candidate, how big a call is (a function of
the call's arguments) and its declared default: the size below which another implementation
runs the call faster. Below it, the implementation declines softly (see
:func:`~coheriq.may_decline`): the next implementation runs the call. The threshold in force
is the one ``coheriq calibrate`` measured on this machine (:mod:`.calibrations`), else the
declared default; it is settled on the implementation's first call, and its reason says which.
"""

from __future__ import annotations

import os
import weakref
from datetime import date

from .._call.generated import parameter_lists
from .._stdlib import TYPE_CHECKING, FunctionType
from ..exceptions import CoheriqCalibrationError, CoheriqTypeError
from . import calibrations
from .declines import may_decline

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any, TypeVar

    Implementation = TypeVar("Implementation")

MODE_ENV = "COHERIQ_CROSSOVERS"
MODES = ("measured", "declared", "off")
_frozen: str | None = None  # a mode set by freeze() (the pytest plugin), over the variable
_live: weakref.WeakSet[Crossover] = weakref.WeakSet()


class Crossover:
    """An implementation's crossover: ``size`` of a call (the implementation's parameters,
    ``self`` first), in ``unit``; the engine's ``default``; ``inputs`` to calibrate on.

    ``threshold``, ``reason`` and ``origin`` are the crossover in force, settled on the
    first call (None until then): below ``threshold`` the implementation should not run.
    ``where`` is (library, engine, candidate), set when the engine's class is made.
    ``check`` is the soft check, generated with ``size``'s own parameters (a check that
    took ``*args, **kwargs`` would cost twice a ``when=`` check), whose globals are
    ``state``: the threshold and reason it reads.
    """

    __slots__ = (
        "__weakref__",
        "check",
        "default",
        "inputs",
        "module",
        "origin",
        "state",
        "unit",
        "where",
    )

    def __init__(
        self,
        size: Callable[..., int | None],
        unit: str,
        default: int,
        inputs: Callable[[], Iterable[tuple[Any, ...]]] | None = None,
    ) -> None:
        self.unit, self.default, self.inputs = unit, default, inputs
        self.where: tuple[str, str, str] | None = None
        self.module = self.origin = ""
        self.state: dict[str, Any] = {
            "threshold": None,
            "reason": "",
            "size": size,
            "settle": self.settle,
        }
        self.check = _check_reading(self.state, size)
        self.check.__coheriq_crossover__ = self  # type: ignore[attr-defined]
        _live.add(self)

    @property
    def size(self) -> Callable[..., int | None]:
        """How big a call is: the function the engine declared."""
        return self.state["size"]  # type: ignore[no-any-return]

    @property
    def threshold(self) -> int | None:
        """The size below which the implementation should not run (None: not settled)."""
        return self.state["threshold"]  # type: ignore[no-any-return]

    @threshold.setter
    def threshold(self, value: int | None) -> None:
        self.state["threshold"] = value

    @property
    def reason(self) -> str:
        """Why a smaller call is declined: the crossover in force, and where it comes from."""
        return self.state["reason"]  # type: ignore[no-any-return]

    @reason.setter
    def reason(self, value: str) -> None:
        self.state["reason"] = value

    def settle(self) -> int:
        """Put the crossover in force (measured here, else declared, or none where they
        are off); return its threshold."""
        mode = mode_in_force()
        if mode == "off":  # no crossover at all: the engine runs every call
            self.origin = (
                "none (off: the engine runs every call it would run without one; "
                f"{_who_froze(mode)})"
            )
            self.reason, self.threshold = "", 0
            return 0
        entry, why_not = self._calibration(mode)
        unit = self.unit
        if entry is None:
            threshold = self.default
            self.origin = f"declared by the engine{why_not}"
            self.reason = (
                f"fewer than {threshold:,} {unit}: below the crossover declared by the "
                "engine, not measured here"
            )
        else:
            threshold = int(entry["threshold"])
            when, against = entry.get("measured", "?"), entry.get("against", "?")
            self.origin = f"measured on this machine on {when} against {against}"
            self.reason = (
                f"fewer than {threshold:,} {unit}: below the crossover measured on this "
                f"machine on {when}"
                if entry.get("crossover") is not None
                else f"fewer than {threshold:,} {unit}: slower than {against} up to "
                f"{threshold - 1:,}, the largest size measured on this machine on {when}"
            )
        self.threshold = threshold
        return threshold

    def _calibration(self, mode: str) -> tuple[dict[str, Any] | None, str]:
        """The calibration in force under ``mode``, else None and why none (as the
        origin's tail)."""
        if mode == "declared":
            return None, f" (calibrations are off here: {_who_froze(mode)})"
        if self.where is None:
            return None, ""
        try:
            entry = calibrations.find(*self.where)
        except CoheriqCalibrationError as error:  # a cache: the declared default holds
            return None, f" (the calibrations cannot be read: {error})"
        if entry is None:
            return None, ""
        stale = calibrations.still_current(entry, self.module)
        if stale is not None:
            return None, (
                f" (the calibration of {entry.get('measured', '?')} is stale: {stale}; run "
                f"coheriq calibrate {self.where[0]} {self.where[1]} again)"
            )
        return entry, ""

    def identify(self, library: str, engine: str, candidate: str, module: str) -> None:
        """Say whose crossover this is: the class that defines the implementation (the
        first to say), in ``module``, whose version a calibration holds for."""
        if self.where is None:
            self.where, self.module = (library, engine, candidate), module

    def unsettle(self) -> None:
        """Settle again on the next call (a calibration was stored, or the mode changed)."""
        self.threshold = None

    def __repr__(self) -> str:
        if self.threshold is None:
            return f"<crossover at {self.default:,} {self.unit}, declared, not settled yet>"
        return f"<crossover at {self.threshold:,} {self.unit}, {self.origin}>"


_CHECK = (
    "def check({params}):\n"
    "    if threshold is None:\n"
    "        settle()\n"
    "    measured = size({arguments})\n"
    "    return reason if measured is not None and measured < threshold else None\n"
)


def _check_reading(state: dict[str, Any], size: Callable[..., Any]) -> Callable[..., Any]:
    """The soft check of a crossover: settle it on the first call, then the reason where
    ``size`` of the call is below the threshold, else None; ``state`` is its globals.
    With ``size``'s own parameters where it is a plain function, else ``*args, **kwargs``."""
    exact = parameter_lists(size)
    params, arguments = exact or ("*args, **kwargs", "*args, **kwargs")
    code = compile(_CHECK.format(params=params, arguments=arguments), "<coheriq crossover>", "exec")
    made = FunctionType(
        next(c for c in code.co_consts if getattr(c, "co_name", "") == "check"), state
    )
    if exact is not None:
        made.__defaults__, made.__kwdefaults__ = size.__defaults__, size.__kwdefaults__
    return made


def crossover_of(check: Any) -> Crossover | None:
    """The :class:`Crossover` whose check ``check`` is (an implementation's ``when=``)."""
    found = getattr(check, "__coheriq_crossover__", None)
    return found if isinstance(found, Crossover) else None


def mode_in_force() -> str:
    """``"measured"`` (calibrations hold), ``"declared"`` (the engines' defaults) or
    ``"off"`` (none: engines run every call): :func:`freeze`'s, else
    ``COHERIQ_CROSSOVERS``'s (default measured)."""
    if _frozen is not None:
        return _frozen
    mode = os.environ.get(MODE_ENV, "").strip().lower() or "measured"
    if mode not in MODES:
        raise CoheriqTypeError(
            f"{MODE_ENV}={os.environ[MODE_ENV]!r} is none of 'measured' (an engine's "
            "crossover is the one coheriq calibrate measured on this machine, where there "
            "is one), 'declared' (always the engine's declared default) and 'off' (no "
            "crossover: engines run every call); set one, or unset it."
        )
    return mode


def _who_froze(mode: str) -> str:
    """Who holds the crossovers at ``mode``: a freeze (tests), or the variable."""
    return "frozen for tests" if _frozen is not None else f"{MODE_ENV}={mode}"


def freeze(mode: str | None) -> str | None:
    """Hold every crossover at ``mode`` (``"declared"``: the engines' defaults, whatever
    was measured; ``"measured"``; ``"off"``: none, engines run every call), or None to
    follow ``COHERIQ_CROSSOVERS`` again; return the mode held before. Crossovers settle
    again at their next call."""
    global _frozen
    if mode is not None and mode not in MODES:
        raise CoheriqTypeError(
            f"Crossovers are frozen at 'measured', 'declared' or 'off' (or None to follow "
            f"{MODE_ENV}), not {mode!r}."
        )
    before, _frozen = _frozen, mode
    unsettle_all()
    return before


def unsettle_all() -> None:
    """Settle every crossover again at its next call."""
    calibrations.forget_read()
    for declared in list(_live):
        declared.unsettle()


def today() -> str:
    """Today's date as a calibration records it."""
    return date.today().isoformat()


def crossover(
    *,
    size: Callable[..., int | None],
    default: int,
    unit: str = "values",
    inputs: Callable[[], Iterable[tuple[Any, ...]]] | None = None,
) -> Callable[[Implementation], Implementation]:
    """Mark an engine's implementation that should not run calls smaller than a crossover.

    ``size`` takes what the implementation takes (``self`` first for a method) and returns
    how big the call is, in ``unit`` (values, rows, nodes), or None where the crossover does
    not apply to the call (it runs). Below the crossover in force, the implementation
    declines the call softly (``may_decline(when=..., soft=True)``) with a reason that
    names it: the one ``coheriq calibrate`` measured on this machine ("fewer than N values:
    below the crossover measured on this machine on DATE"), else ``default`` ("...
    declared by the engine, not measured here"). ``inputs``, for calibration, returns the
    calls to time: tuples of positional arguments, made in the library's own types (it
    is called under the reference), over the sizes where the crossover may lie. Keep
    ``size`` cheap: it runs before every call of the implementation.

    Raises:
        CoheriqTypeError: ``size`` or ``inputs`` is not callable, ``default`` is not a
            whole number of at least 0, or ``unit`` is not a non-empty string.
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
    if inputs is not None and not callable(inputs):
        raise CoheriqTypeError(
            f"coheriq.crossover(inputs=...) takes a function that returns the calls to "
            f"calibrate on (tuples of arguments), not {type(inputs).__name__} {inputs!r}."
        )

    def mark(implementation: Implementation) -> Implementation:
        declared = Crossover(size, unit.strip(), default, inputs)
        return may_decline(implementation, when=declared.check, soft=True)  # type: ignore[no-any-return]

    return mark
