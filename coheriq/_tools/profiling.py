"""A profiler of the calls made through candidate proxies: :func:`profile`.

A watcher (:mod:`coheriq._library.observing`), on while a profile block is open anywhere: it
times the calls made where the calling context has a profile.
"""

from __future__ import annotations

import _thread
import weakref
from contextvars import ContextVar
from time import perf_counter_ns

from .._engines import conversions, declines
from .._library import observing
from .._library.domain import AccelerationDomain
from .._stdlib import TYPE_CHECKING, after_fork_in_child, leave_chain
from ..exceptions import CoheriqScopeError
from . import columns

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

# The profile blocks open in this context, outermost first (one may be there twice).
_active: ContextVar[tuple[Profile, ...]] = ContextVar("coheriq profiler", default=())
_ORDER = 0  # innermost of the watchers: it times the engine's call alone
_profiles: weakref.WeakSet[Profile] = weakref.WeakSet()  # for the fork hook


def _calls(count: int) -> str:
    return f"{count} call{'s' if count != 1 else ''}"


class ProfileRow:
    """One candidate run by one engine: how often and how long (inclusive of nested calls).

    Attributes:
        domain: The domain's name.
        candidate: The candidate's name.
        engine: The engine that ran it.
        count: Number of calls.
        total: Seconds spent in them, in total.
        mean: Seconds per call.
    """

    __slots__ = ("candidate", "count", "domain", "engine", "total")

    def __init__(self, domain: str, candidate: str, engine: str, count: int, total: float):
        self.domain, self.candidate, self.engine = domain, candidate, engine
        self.count, self.total = count, total

    @property
    def mean(self) -> float:
        return self.total / self.count

    def __repr__(self) -> str:
        return (
            f"ProfileRow({self.domain}.{self.candidate} on {self.engine!r}: "
            f"{self.count} calls, {self.total:.6f} s)"
        )


class DeclineRow:
    """The calls of one candidate that one engine declined for one reason.

    Attributes:
        domain: The domain's name.
        candidate: The candidate's name.
        engine: The engine whose implementation declined (the next one ran).
        reason: The reason it gave.
        count: Number of calls it declined so.
    """

    __slots__ = ("candidate", "count", "domain", "engine", "reason")

    def __init__(self, domain: str, candidate: str, engine: str, reason: str, count: int):
        self.domain, self.candidate, self.engine = domain, candidate, engine
        self.reason, self.count = reason, count

    def __repr__(self) -> str:
        return (
            f"DeclineRow({self.domain}.{self.candidate} declined by {self.engine!r}: "
            f"{self.reason!r}, {_calls(self.count)})"
        )


class ConversionRow:
    """The objects converted for one candidate's calls by one declared conversion.

    Attributes:
        domain: The domain's name.
        candidate: The candidate's name (``coheriq.to_library`` or ``coheriq.to_engine``
            for an explicit request).
        pair: The types, from and to (``'ndarray -> Array'``).
        direction: ``'to_engine'`` or ``'to_library'``.
        count: Objects converted (a cached conversion reused is not counted).
        total: Seconds spent converting them.
    """

    __slots__ = ("candidate", "count", "direction", "domain", "pair", "total")

    def __init__(
        self, domain: str, candidate: str, pair: str, direction: str, count: int, total: float
    ):
        self.domain, self.candidate, self.pair = domain, candidate, pair
        self.direction, self.count, self.total = direction, count, total

    def __repr__(self) -> str:
        return (
            f"ConversionRow({self.domain}.{self.candidate}: {self.pair} by {self.direction}, "
            f"{self.count} objects, {self.total:.6f} s)"
        )


class Profile:
    """The calls recorded by one :func:`profile` block (and the blocks nested in it)."""

    def __init__(self) -> None:
        self._stats: dict[tuple[str, str, str], tuple[int, int]] = {}  # key -> (calls, ns)
        self._declines: dict[tuple[str, str, str, str], int] = {}
        self._conversions: dict[tuple[str, str, str, str], tuple[int, float]] = {}
        # Re-entrant: a signal handler or a __del__ may call a candidate while its
        # thread records.
        self._lock = _thread.RLock()
        self._open_entries = 0  # entered and not exited yet, in any thread
        _profiles.add(self)

    @property
    def rows(self) -> list[ProfileRow]:
        """The recorded calls, most total time first."""
        with self._lock:
            rows = [ProfileRow(*key, count, ns / 1e9) for key, (count, ns) in self._stats.items()]
        return sorted(rows, key=lambda r: (-r.total, r.domain, r.candidate, r.engine))

    @property
    def declines(self) -> list[DeclineRow]:
        """The calls an engine declined (the next implementation ran), most first."""
        with self._lock:
            rows = [DeclineRow(*key, count) for key, count in self._declines.items()]
        return sorted(rows, key=lambda r: (-r.count, r.domain, r.candidate, r.engine, r.reason))

    @property
    def conversions(self) -> list[ConversionRow]:
        """The objects converted where calls crossed implementations, most time first."""
        with self._lock:
            rows = [ConversionRow(*key, *value) for key, value in self._conversions.items()]
        return sorted(rows, key=lambda r: (-r.total, r.domain, r.candidate, r.pair))

    def _record(self, key: tuple[str, str, str], nanoseconds: int) -> None:
        with self._lock:
            count, total = self._stats.get(key, (0, 0))
            self._stats[key] = (count + 1, total + nanoseconds)

    def __enter__(self) -> Profile:
        with self._lock:
            self._open_entries += 1
        _active.set((*_active.get(), self))
        observing.start(_ORDER, _timing)
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            if self._open_entries == 0:
                raise CoheriqScopeError(
                    "A coheriq.profile() block was exited more often than it was entered: "
                    "each `with` block, or __exit__ call, ends one __enter__. Nothing was "
                    "changed; remove the extra __exit__ call."
                )
            self._open_entries -= 1
        leave_chain(_active, self)
        observing.stop(_ORDER)

    def __str__(self) -> str:
        rows = self.rows
        if not rows:
            return "no calls through coheriq candidates were recorded"
        table = [["candidate", "engine", "calls", "total", "mean"]] + [
            [
                f"{r.domain}.{r.candidate}",
                r.engine,
                str(r.count),
                f"{r.total * 1e3:.3f} ms",
                f"{r.mean * 1e6:.2f} us",
            ]
            for r in rows
        ]
        return (
            columns(table, 2)
            + "".join(
                f"\n{r.domain}.{r.candidate}: {r.engine} declined {_calls(r.count)} ({r.reason})"
                for r in self.declines
            )
            + "".join(
                f"\n{r.domain}.{r.candidate}: converted {r.count} ({r.pair}) in "
                f"{r.total * 1e3:.3f} ms"
                for r in self.conversions
            )
        )


def profile() -> Profile:
    """Record every call through a candidate proxy made in this context, inside the block.

    >>> doc = coheriq.AccelerationDomain("doc_profile")
    >>> @doc.acceleration_candidate
    ... def double(x):
    ...     return 2 * x
    >>> _ = doc.materialize()
    >>> with coheriq.profile() as prof:
    ...     _ = [double(i) for i in range(3)]
    >>> [(r.candidate, r.engine, r.count) for r in prof.rows]
    [('double', 'reference', 3)]

    Calls are counted per candidate and engine, with total and mean time (a
    candidate calling another counts in both). ``print(prof)`` renders a table;
    ``prof.rows`` is the data. The calls an engine declined (see
    :func:`coheriq.may_decline`) are counted per candidate, engine and reason in
    ``prof.declines``, and listed under the table; so are the objects converted
    where calls crossed implementations (``prof.conversions``, see
    :class:`coheriq.Conversion`). Like :class:`using_engine`, a block covers its
    own thread or task (and tasks created inside it); it never chooses an engine.
    """
    return Profile()


class _Timed(observing.View):
    """A view whose members are what the call finds, wrapped in a timer."""

    __slots__ = ("profiles",)

    def __init__(
        self, domain: AccelerationDomain, found: Any, profiles: tuple[Profile, ...]
    ) -> None:
        super().__init__(domain, found)
        # Once each: a nested block's calls count for the outer ones too, once for a
        # profile entered twice.
        self.profiles = dict.fromkeys(profiles)

    def __getitem__(self, name: str) -> Callable[..., Any]:
        domain, profiles = self.domain, self.profiles
        member = self.member(name)
        key = (domain.name, name, domain.scopes.active_engine() or "?")
        chain = declines.chain_of(member)  # where some implementation may decline
        answered = declines.answered

        def timed(*args: Any, **kwargs: Any) -> Any:
            if chain is not None:
                answered.set(None)
            start = perf_counter_ns()
            try:
                return member(*args, **kwargs)
            finally:
                elapsed = perf_counter_ns() - start
                # A declined call counts for the implementation that answered it.
                who = answered.get() if chain is not None else None
                at = key if who is None or who[0] is not chain else (*key[:2], who[1])
                for profile in profiles:
                    profile._record(at, elapsed)

        return timed


def _timing(domain: AccelerationDomain) -> Callable[[Any], Any]:
    """What ``domain``'s calls find, timed where the calling context has a profile."""

    def wrap(scope: Any) -> Any:
        profiles = _active.get()
        return _Timed(domain, scope, profiles) if profiles else scope

    return wrap


def _count_decline(state: Any, candidate: str, engine: str, reason: str) -> None:
    """A declines watcher: count a decline in the profiles open in this context."""
    key = (state.name, candidate, engine, reason)
    for profile in dict.fromkeys(_active.get()):
        with profile._lock:
            profile._declines[key] = profile._declines.get(key, 0) + 1


declines.watchers.append(_count_decline)


def _count_conversion(
    state: Any, candidate: str, conversion: Any, direction: str, seconds: float
) -> None:
    """A conversions watcher: count one conversion in the profiles open in this context."""
    key = (state.name, candidate, conversion.label(direction), direction)
    for profile in dict.fromkeys(_active.get()):
        with profile._lock:
            count, total = profile._conversions.get(key, (0, 0.0))
            profile._conversions[key] = (count + 1, total + seconds)


conversions.watchers.append(_count_conversion)


@after_fork_in_child
def _reinit_locks_in_child() -> None:
    # A thread of the parent may have held one of these locks when it forked.
    for profile in list(_profiles):
        profile._lock = _thread.RLock()
