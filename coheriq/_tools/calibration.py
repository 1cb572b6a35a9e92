"""Measuring where an engine wins: :func:`calibrate`, and the :class:`Calibration` it returns.

For each implementation of an engine that declares a :func:`~coheriq.crossover`, calibrating
times the engine against the implementation that runs instead (the reference, or the next
engine of the user's list) on calls of growing size, fits the size from which the engine is
faster, and keeps it in the user's calibrations file (:mod:`coheriq._engines.calibrations`).
It runs only when asked: nothing measures on import or on a call.
"""

from __future__ import annotations

import math
import sys
import threading
from functools import partial
from time import perf_counter

from .._api.verbs import resolve_engine, using_engine
from .._choice.ordered import parse_engine_list
from .._engines import calibrations
from .._engines.crossover import Crossover, crossover_of, today, unsettle_all
from .._engines.declines import chain_of
from .._library import observing
from .._library.comparing import SharedSource
from .._library.domain import AccelerationDomain, lookup_domain
from .._names import REFERENCE
from .._stdlib import TYPE_CHECKING, after_fork_in_child
from ..exceptions import CoheriqCalibrationError, CoheriqScopeError, CoheriqTypeError
from . import columns
from .verification import verify

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from pathlib import Path
    from typing import Any

    Call = tuple[tuple[Any, ...], dict[str, Any]]

ROUNDS = 5  # timings of each side per size; the median counts
_ROUND_SECONDS = 0.02  # what one round of one side takes, at most (a slow call takes longer)
_LONGEST_LOOP = 1000  # calls timed together at most (each on its own copy)


class CrossoverRow:
    """What a calibration measured of one candidate.

    Attributes:
        candidate: The candidate's name.
        unit: What its sizes count (the crossover's unit).
        points: ``(size, engine seconds, against seconds)`` per call measured, by size;
            each time the median of the rounds, per call.
        crossover: The fitted size from which the engine is faster, or None where there
            is none in the measured range.
        threshold: The size below which the engine now declines (the crossover; one past
            the largest size measured where the engine never won; 0 where it always won).
        verdict: The fit, as a sentence.
    """

    def __init__(self, candidate: str, unit: str, points: list[tuple[int, float, float]]):
        self.candidate, self.unit, self.points = candidate, unit, points
        self.crossover, self.threshold, self.verdict = _fit(points, unit)

    def __repr__(self) -> str:
        return f"<CrossoverRow {self.candidate}: {self.verdict}>"


class Calibration:
    """The result of :func:`calibrate`: a :class:`CrossoverRow` per candidate measured.

    Attributes:
        domain: The library's name.
        engine: The engine calibrated.
        against: What it was timed against (``"reference"`` or an engine).
        rows: A :class:`CrossoverRow` per candidate measured.
        skipped: Candidate -> why it was not measured.
        notes: What else the report says: the calls not timed because they raised
            (alike on both sides).
        measured: The date, ``YYYY-MM-DD``.
        seconds: How long measuring took.
        stored: The calibrations file it was stored in, or None.
    """

    def __init__(self, domain: str, engine: str, against: str) -> None:
        self.domain, self.engine, self.against = domain, engine, against
        self.rows: list[CrossoverRow] = []
        self.skipped: dict[str, str] = {}
        self.notes: list[str] = []
        self.measured, self.seconds = today(), 0.0
        self.stored: Path | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Calibration:
        """The calibration :meth:`as_dict` gave (read back from JSON, to print or draw)."""
        made = cls(data["domain"], data["engine"], data["against"])
        made.measured, made.seconds = data["measured"], data["seconds"]
        made.skipped = dict(data.get("skipped", {}))
        made.notes = list(data.get("notes", []))
        made.rows = [
            CrossoverRow(r["candidate"], r["unit"], [tuple(p) for p in r["points"]])
            for r in data["rows"]
        ]
        return made

    def as_dict(self) -> dict[str, Any]:
        """The calibration as plain data (for JSON)."""
        return {
            "domain": self.domain,
            "engine": self.engine,
            "against": self.against,
            "measured": self.measured,
            "seconds": round(self.seconds, 3),
            "rows": [
                {
                    "candidate": r.candidate,
                    "unit": r.unit,
                    "crossover": r.crossover,
                    "threshold": r.threshold,
                    "verdict": r.verdict,
                    "points": [list(point) for point in r.points],
                }
                for r in self.rows
            ],
            "skipped": self.skipped,
            "notes": self.notes,
        }

    def __str__(self) -> str:
        lines = [
            f"{self.domain}: engine {self.engine!r} against {self.against!r}, measured on "
            f"this machine on {self.measured} in {self.seconds:.1f} s"
        ]
        for row in self.rows:
            table = [[f"{row.candidate} ({row.unit})", self.engine, self.against, "ratio"]]
            table += [
                [f"{size:,}", _seconds(mine), _seconds(theirs), f"{mine / theirs:.2f}"]
                for size, mine, theirs in row.points
            ]
            lines += ["", columns(table, 1), f"  {row.verdict}"]
        lines += [f"{name}: not measured: {why}" for name, why in self.skipped.items()]
        lines += self.notes
        if self.stored is not None:
            lines += ["", f"stored in {self.stored}"]
        return "\n".join(lines)

    def draw(self, axes: Any = None) -> Any:
        """Draw the time per call against the size (log-log), one panel per candidate, the
        crossover marked; return the matplotlib figure (matplotlib must be installed)."""
        try:
            import matplotlib.pyplot as plt
        except ImportError:
            raise CoheriqTypeError(
                "Drawing a calibration needs matplotlib: pip install matplotlib (the table, "
                "str(calibration), needs nothing)."
            ) from None
        if axes is None:
            count = max(len(self.rows), 1)
            _, axes = plt.subplots(1, count, figsize=(4.2 * count, 3.4), squeeze=False)
            axes = list(axes[0])
        for ax, row in zip(axes, self.rows, strict=False):
            sizes = [p[0] for p in row.points]
            ax.loglog(sizes, [p[1] for p in row.points], "o-", label=self.engine)
            ax.loglog(sizes, [p[2] for p in row.points], "s--", label=self.against)
            if row.crossover is not None:
                ax.axvline(row.crossover, color="grey", linestyle=":", label="crossover")
            ax.set_title(row.candidate)
            ax.set_xlabel(row.unit)
            ax.set_ylabel("seconds per call")
            ax.legend()
        figure = axes[0].figure if self.rows else plt.gcf()
        figure.tight_layout()
        return figure


def calibrate(
    domain: AccelerationDomain | str,
    engine: str,
    *,
    against: str | None = None,
    candidates: Iterable[str] | None = None,
    calls: Mapping[str, Iterable[Call]] | None = None,
    budget: float = 60.0,
    store: bool = True,
) -> Calibration:
    """Measure where ``engine`` starts to win, for each candidate it declares a crossover for.

    Each implementation that :func:`coheriq.crossover` marks is timed against ``against``
    (default: the engine after ``engine`` in the library's ``<PREFIX>_ENGINE`` list, else
    the reference) on the crossover's ``inputs`` (or the ``calls`` given for the
    candidate, as ``(args, kwargs)`` pairs), each call on its own copy of the arguments,
    after one call of each side has checked that the two agree (:func:`coheriq.verify`).
    The crossover is the size from which the engine is faster at every size measured
    (interpolated between the two sizes around it), or none in the measured range. It is
    stored in the user's calibrations file (unless ``store=False``), and the engine declines
    smaller calls from then on, in this process too.

    Args:
        domain: The library's domain or its name.
        engine: The engine to calibrate (its name).
        against: The implementation to time it against.
        candidates: Only these candidates (default: every one with a crossover).
        calls: Candidate -> the calls to time it on, instead of its crossover's inputs.
        budget: Seconds measuring may take in all; sizes left when it is spent are not
            measured (the report says so).
        store: Whether to keep the result in the calibrations file.

    Raises:
        CoheriqCalibrationError: Nothing could be calibrated (the message says why, per
            candidate), or the two implementations disagree (with the verification's
            report); nothing is stored then.
        CoheriqTypeError: An argument is of the wrong kind.
    """
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not budget > 0:
        raise CoheriqTypeError(
            f"calibrate(budget=...) takes the seconds measuring may take, a number above 0, "
            f"not {budget!r}."
        )
    found = lookup_domain(domain)
    engine_class = resolve_engine(found, engine)
    engine_name = engine_class.__coheriq_name__ or REFERENCE
    if engine_name == REFERENCE:
        raise CoheriqTypeError(
            f"calibrate measures an engine of {found.name!r} against the implementation that "
            "runs instead; the reference runs every call itself: name an engine."
        )
    other = _against(found, engine_name) if against is None else against
    other_name = resolve_engine(found, other).__coheriq_name__ or REFERENCE
    if other_name == engine_name:
        raise CoheriqTypeError(
            f"calibrate times engine {engine_name!r} of {found.name!r} against another "
            "implementation, not itself: name another with against= (the reference, say)."
        )
    declared = _crossovers(found, engine_class, candidates)
    _check_what_runs_instead(found, engine_class, engine_name, other_name, declared)
    result = Calibration(found.name, engine_name, other_name)
    started = perf_counter()
    refused = {n: _refusal(found, n, declared[n][0], calls) for n in declared}
    result.skipped.update((n, why) for n, why in refused.items() if why is not None)
    measured = [n for n, why in refused.items() if why is None]
    for index, name in enumerate(measured):
        crossover, size = declared[name]
        # An equal share of what is left for each candidate still to measure.
        deadline = perf_counter() + (started + budget - perf_counter()) / (len(measured) - index)
        points = _measure(found, result, name, crossover, size, calls, deadline)
        if len(points) >= 2:
            result.rows.append(CrossoverRow(name, crossover.unit, points))
        elif name not in result.skipped:
            result.skipped[name] = "fewer than two sizes measured within the budget"
    result.seconds = perf_counter() - started
    if not result.rows:
        reasons = "; ".join(f"{n}: {why}" for n, why in result.skipped.items())
        raise CoheriqCalibrationError(
            f"Nothing of engine {engine_name!r} of {found.name!r} could be calibrated "
            f"({reasons or 'it declares no crossover'}). An engine declares what to measure "
            "with coheriq.crossover(size=..., default=..., inputs=...)."
        )
    if store:
        result.stored = calibrations.store(_entries(result, engine_class, declared))
        unsettle_all()
    return result


class Recording:
    """Calls of a library's candidates recorded from a run, a few of each size (of each
    power of two), copied as they were made: :func:`record_calls` makes it, and
    ``calibrate(..., calls=recording.calls)`` times the engine on them.

    Attributes:
        domain: The library's name.
        engine: The engine whose crossovers size the calls.
        per_size: How many calls of each power of two of size are kept.
    """

    def __init__(
        self, domain: AccelerationDomain, engine: str, sizes: dict[str, Any], per_size: int
    ) -> None:
        self._domain, self.domain, self.engine = domain, domain.name, engine
        self.per_size, self._sizes = per_size, sizes
        self._kept: dict[str, dict[int, list[Call]]] = {name: {} for name in sizes}
        self._lock = threading.Lock()

    @property
    def calls(self) -> dict[str, list[Call]]:
        """Candidate -> the calls kept, ``(args, kwargs)``, smallest first."""
        with self._lock:
            return {
                name: [call for _, kept in sorted(by_size.items()) for call in kept]
                for name, by_size in self._kept.items()
                if by_size
            }

    def keep(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Keep a copy of this call of ``name`` where its size has fewer than
        ``per_size`` calls kept."""
        try:
            size = self._sizes[name](*args, **kwargs)
            if size is None:
                return
            bucket = int(size).bit_length()
            with self._lock:
                if len(self._kept[name].get(bucket, ())) >= self.per_size:
                    return
            (copied,) = _copies(self._domain, (args, kwargs), 1)
        except Exception:  # an argument the size or a copy cannot take: the call says so
            return
        with self._lock:
            kept = self._kept[name].setdefault(bucket, [])
            if len(kept) < self.per_size:
                kept.append(copied)

    def __enter__(self) -> Recording:
        with _recording_lock:
            _recordings.append(self)
        observing.start(_RECORD_ORDER, _recorder)
        return self

    def __exit__(self, *exc: object) -> None:
        with _recording_lock:
            if self not in _recordings:
                raise CoheriqScopeError(
                    f"{self!r} was exited more often than it was entered: each `with` "
                    "block, or __exit__ call, ends one __enter__."
                )
            _recordings.remove(self)
        observing.stop(_RECORD_ORDER)

    def __repr__(self) -> str:
        counts = {name: len(calls) for name, calls in self.calls.items()}
        return f"<Recording of {self.domain!r} for engine {self.engine!r}: {counts}>"


_RECORD_ORDER = 2  # outermost of the watchers: the calls as the program makes them
_recordings: list[Recording] = []  # open in any thread: a run's calls, wherever made
_recording_lock = threading.Lock()


def record_calls(domain: AccelerationDomain | str, engine: str, *, per_size: int = 2) -> Recording:
    """Record, inside the block, the calls of ``domain``'s candidates that ``engine``
    declares a crossover for (in every thread, whatever engine runs them): a copy of
    the first ``per_size`` calls of each power of two of size, as the crossover sizes
    them. Calibrate on them with ``calibrate(domain, engine, calls=recording.calls)``.

    Raises:
        CoheriqTypeError: ``per_size`` is not a whole number of at least 1.
    """
    if isinstance(per_size, bool) or not isinstance(per_size, int) or per_size < 1:
        raise CoheriqTypeError(
            f"record_calls(per_size=...) takes how many calls of each size to keep, a whole "
            f"number of at least 1, not {per_size!r}."
        )
    found = lookup_domain(domain)
    engine_class = resolve_engine(found, engine)
    sizes = {name: size for name, (_, size) in _crossovers(found, engine_class, None).items()}
    return Recording(found, engine_class.__coheriq_name__ or engine, sizes, per_size)


class _Recorded(observing.View):
    """A view whose members keep a copy of their calls in the open recordings."""

    __slots__ = ("recordings",)

    def __init__(self, domain: Any, found: Any, recordings: list[Recording]) -> None:
        super().__init__(domain, found)
        self.recordings = recordings

    def __getitem__(self, name: str) -> Callable[..., Any]:
        member = self.member(name)
        keeping = [r for r in self.recordings if name in r._sizes]
        if not keeping:
            return member  # type: ignore[no-any-return]

        def recorded(*args: Any, **kwargs: Any) -> Any:
            for recording in keeping:
                recording.keep(name, args, kwargs)
            return member(*args, **kwargs)

        return recorded


def _recorder(domain: AccelerationDomain) -> Callable[[Any], Any]:
    """What ``domain``'s calls find, recorded where a recording of it is open."""

    def wrap(found: Any) -> Any:
        open_here = [r for r in _recordings if r._domain is domain]
        return _Recorded(domain, found, open_here) if open_here else found

    return wrap


def _against(domain: AccelerationDomain, engine: str) -> str:
    """What runs a call ``engine`` declines: the next engine of the library's list, if
    the list starts with ``engine``, else the reference."""
    variable, value = domain.choice.env_choice()
    names = parse_engine_list(value, f" (named by {variable})") if variable and value else []
    if len(names) > 1 and names[0] == engine:
        return names[1]
    return REFERENCE


def _crossovers(
    domain: AccelerationDomain, engine_class: Any, wanted: Iterable[str] | None
) -> dict[str, tuple[Crossover, Callable[..., Any]]]:
    """Candidate -> its crossover and the function of a call's arguments that sizes it,
    for the implementations ``engine_class`` supplies with a crossover (starting it)."""
    members = domain.engines.members_of(engine_class)
    names = list(members) if wanted is None else list(wanted)
    unknown = [n for n in names if n not in members]
    if unknown:
        raise CoheriqTypeError(
            f"calibrate: {', '.join(map(repr, unknown))} names no candidate of "
            f"{domain.name!r}; its candidates are {', '.join(sorted(members))}."
        )
    found: dict[str, tuple[Crossover, Callable[..., Any]]] = {}
    for name in names:
        chain = chain_of(members[name])
        step = chain.steps[0] if chain is not None else None
        crossover = None if step is None else crossover_of(step.check)
        if crossover is not None and step is not None:
            size, first = crossover.size, step.first
            found[name] = (crossover, size if first is None else partial(size, first))
    if wanted is not None and len(found) < len(names):
        lacking = [n for n in names if n not in found]
        raise CoheriqTypeError(
            f"calibrate: engine {engine_class.__coheriq_name__!r} declares no crossover for "
            f"{', '.join(map(repr, lacking))}: only what coheriq.crossover marks is measured."
        )
    return found


def _check_what_runs_instead(
    domain: AccelerationDomain,
    engine_class: Any,
    engine: str,
    against: str,
    declared: Mapping[str, Any],
) -> None:
    """Raise where a declined call of one of ``declared`` goes to another implementation
    along ``engine_class``'s MRO than ``against``: that one runs it, so it is the one to
    time against."""
    members = domain.engines.members_of(engine_class)
    for name in declared:
        chain = chain_of(members[name])
        after = chain.steps[1].engine if chain is not None and len(chain.steps) > 1 else None
        if after is not None and after != against:
            raise CoheriqTypeError(
                f"calibrate: a call of {name!r} that engine {engine!r} of {domain.name!r} "
                f"declines runs the implementation of {after!r}, next along its MRO, not "
                f"that of {against!r}: calibrate it against that one (against={after!r}), "
                "or only the other candidates (candidates=...)."
            )


def _refusal(
    domain: AccelerationDomain,
    name: str,
    crossover: Crossover,
    calls: Mapping[str, Iterable[Call]] | None,
) -> str | None:
    """Why candidate ``name`` is not measured, or None."""
    if name in domain.comparisons.side_effects:
        return (
            "refused: it is marked side_effects=True, so running it the many times timing "
            "takes would repeat what it does beyond its result"
        )
    if crossover.inputs is None and (calls is None or name not in calls):
        return "its crossover declares no inputs= (pass calls= to calibrate on)"
    return None


def _inputs(
    domain: AccelerationDomain,
    name: str,
    crossover: Crossover,
    size: Callable[..., Any],
    calls: Mapping[str, Iterable[Call]] | None,
) -> list[tuple[int, Call]]:
    """The calls to time, by size (made under the reference: the library's own types)."""
    with using_engine(domain, REFERENCE):
        if calls is not None and name in calls:
            made = [(tuple(a), dict(k)) for a, k in calls[name]]
        else:
            assert crossover.inputs is not None
            made = [(tuple(a), {}) for a in crossover.inputs()]
    sized = [(size(*a, **k), (a, k)) for a, k in made]
    return sorted(((s, c) for s, c in sized if s is not None), key=lambda item: item[0])


def _measure(
    domain: AccelerationDomain,
    result: Calibration,
    name: str,
    crossover: Crossover,
    size: Callable[..., Any],
    calls: Mapping[str, Iterable[Call]] | None,
    deadline: float,
) -> list[tuple[int, float, float]]:
    """Time candidate ``name`` on both sides at each size until ``deadline``."""
    proxy = domain.state.candidates[name].proxy
    sizes = _inputs(domain, name, crossover, size, calls)
    points: list[tuple[int, float, float]] = []
    held = crossover.threshold, crossover.reason
    crossover.reason = "timed as declined by coheriq calibrate"
    try:
        for index, (measured, (args, kwargs)) in enumerate(sizes):
            if perf_counter() >= deadline:
                result.skipped[name] = (
                    f"the budget was spent: sizes from {measured:,} {crossover.unit} not measured"
                )
                break
            crossover.threshold = 0  # the engine runs the call it is checked on
            raised = _agree(domain, result, name, proxy, args, kwargs)
            if raised is not None:
                result.notes.append(
                    f"{name}: a call of {measured:,} {crossover.unit} raised {raised} on both "
                    "sides, and was not timed"
                )
                continue
            left = (deadline - perf_counter()) / (len(sizes) - index)
            try:
                mine, theirs = _time_both(domain, result, crossover, proxy, (args, kwargs), left)
            except SharedSource as shared:
                result.skipped[name] = (
                    f"its arguments hold an iterator ({shared.kind}) that cannot be copied "
                    "for each call"
                )
                return []
            points.append((measured, mine, theirs))
    finally:
        crossover.threshold, crossover.reason = held
    return points


def _agree(
    domain: AccelerationDomain,
    result: Calibration,
    name: str,
    proxy: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> str | None:
    """Run one call on both sides (:func:`coheriq.verify`): raise where they disagree;
    else return what the call raised on both (a call not worth timing), or None."""
    ((copied_args, copied_kwargs),) = _copies(domain, (args, kwargs), 1)
    raised = None
    with verify(domain, result.engine, against=result.against, on_mismatch="record") as check:
        try:
            proxy(*copied_args, **copied_kwargs)
        except Exception as error:  # a recorded call may be one that fails: on both sides?
            raised = type(error).__name__
    if not check.ok:
        raise CoheriqCalibrationError(
            f"Calibrating engine {result.engine!r} of {domain.name!r} stopped: on {name!r} "
            f"it disagrees with {result.against!r}, so its time is not worth measuring "
            f"(nothing was stored). Fix the engine, or verify it alone:\n{check}"
        )
    return raised


def _time_both(
    domain: AccelerationDomain,
    result: Calibration,
    crossover: Crossover,
    proxy: Any,
    call: Call,
    seconds: float,
) -> tuple[float, float]:
    """The median time per call of each side, in rounds that alternate the sides; each
    call on its own copy of the arguments. Both sides are timed as the user's calls run:
    in a block of the engine (then ``against``), the engine's crossover at 0 (it runs
    the call) or above every size (it declines the call, which ``against`` runs)."""
    chosen: Any = result.engine if result.against == REFERENCE else [result.engine, result.against]
    thresholds = (0, sys.maxsize)

    def timed(threshold: int, loops: int) -> float:
        copies = _copies(domain, call, loops)
        with using_engine(domain, chosen):
            crossover.threshold = threshold
            return _timed(proxy, copies)

    timed(0, 1)  # warm: a first call may compile
    started = perf_counter()
    for threshold in thresholds:
        timed(threshold, 1)
    each = max(perf_counter() - started, 1e-6)  # a call of each side, with its copy
    # Rounds of a few hundredths of a second at most: enough to read a fast call, and
    # what a slow one leaves of the budget goes to the sizes after it.
    spend = min(seconds, _ROUND_SECONDS * 2 * ROUNDS)
    loops = max(1, min(_LONGEST_LOOP, int(spend / (ROUNDS * each))))
    rounds: list[list[float]] = [[], []]
    for _ in range(ROUNDS):
        for side, threshold in enumerate(thresholds):
            rounds[side].append(timed(threshold, loops))
    return _median(rounds[0]), _median(rounds[1])


def _copies(domain: AccelerationDomain, call: Call, count: int) -> list[Call]:
    """``count`` copies of ``call``'s arguments, made under the reference: the library's
    own objects, as the inputs are (a copy made in an engine's block may be the engine's)."""
    with using_engine(domain, REFERENCE):
        return [domain.comparisons.copy_arguments(*call) for _ in range(count)]


def _timed(proxy: Any, copies: list[Call]) -> float:
    """Seconds per call of ``proxy``, one call on each of ``copies``, waiting for results
    a device computes later (``block_until_ready``)."""
    started = perf_counter()
    for copied_args, copied_kwargs in copies:
        _wait(proxy(*copied_args, **copied_kwargs))
    return (perf_counter() - started) / len(copies)


def _wait(value: Any) -> None:
    """Wait for ``value`` (or each item of a tuple or list of them) where it has
    ``block_until_ready``, as JAX's arrays do: a result still computing is not done."""
    for item in value if isinstance(value, (tuple, list)) else (value,):
        ready = getattr(item, "block_until_ready", None)
        if callable(ready):
            ready()


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _fit(points: list[tuple[int, float, float]], unit: str) -> tuple[int | None, int, str]:
    """The crossover in ``points`` (size, engine, against), the threshold it puts in force,
    and the verdict: the engine wins from the smallest size from which it is faster at
    every larger size measured; between that size and the one before, the size where the
    log of the ratio of times crosses 0 (interpolated on a log scale of sizes)."""
    wins = [mine < theirs for _, mine, theirs in points]
    smallest, largest = points[0][0], points[-1][0]
    if not wins[-1]:
        return (
            None,
            largest + 1,
            f"no crossover: the engine was slower at every size measured from "
            f"{smallest:,} {unit} up to the largest, {largest:,}"
            if not any(wins)
            else f"no crossover: the engine was slower at the largest size measured, "
            f"{largest:,} {unit}",
        )
    first_win = len(wins)
    while first_win > 0 and wins[first_win - 1]:
        first_win -= 1
    if first_win == 0:
        return (
            None,
            0,
            (
                f"no crossover: the engine was faster at every size measured, from {smallest:,} "
                f"{unit}"
            ),
        )
    (low, low_mine, low_theirs), (high, high_mine, high_theirs) = points[
        first_win - 1 : first_win + 1
    ]
    above, below = math.log(low_mine / low_theirs), math.log(high_mine / high_theirs)
    share = above / (above - below) if above != below else 1.0
    crossing = math.exp(math.log(low) + share * (math.log(high) - math.log(low)))
    fitted = min(high, max(low + 1, math.ceil(crossing)))
    return (
        fitted,
        fitted,
        (f"crossover at {fitted:,} {unit}: slower at {low:,}, faster from {high:,} on"),
    )


def _entries(
    result: Calibration,
    engine_class: Any,
    declared: dict[str, tuple[Crossover, Callable[..., Any]]],
) -> list[dict[str, Any]]:
    """The calibrations file's entries for ``result``: one per candidate measured, under
    the engine whose class defines the implementation."""
    made = []
    for row in result.rows:
        crossover = declared[row.candidate][0]
        distribution, version = calibrations.engine_version(
            crossover.module or engine_class.__module__
        )
        library, engine, candidate = crossover.where or (
            result.domain,
            result.engine,
            row.candidate,
        )
        made.append(
            {
                "library": library,
                "engine": engine,
                "candidate": candidate,
                "machine": calibrations.machine(),
                "python": calibrations.python_build(),
                "engine_version": version,
                "engine_distribution": distribution,
                "coheriq_version": calibrations.coheriq_version(),
                "measured": result.measured,
                "against": result.against,
                "unit": row.unit,
                "crossover": row.crossover,
                "threshold": row.threshold,
                "verdict": row.verdict,
                "table": [
                    {"size": size, "engine": mine, "against": theirs}
                    for size, mine, theirs in row.points
                ],
            }
        )
    return made


def _seconds(value: float) -> str:
    """``value`` seconds, readably: ``812 ns``, ``4.10 us``, ``3.20 ms``, ``1.50 s``."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value * 1e9:.3g} ns"


@after_fork_in_child
def _reinit_locks_in_child() -> None:
    # A thread of the parent may have held one of these locks when it forked.
    global _recording_lock
    _recording_lock = threading.Lock()
    for recording in _recordings:
        recording._lock = threading.Lock()
