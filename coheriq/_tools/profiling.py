"""A profiler of the calls made through candidate proxies: :func:`profile`.

While a ``with coheriq.profile() as prof:`` block is open anywhere, proxies find
their implementation through this module (a watcher, see
:mod:`coheriq._library.observing`), which wraps it in a timer if the calling context has
a profiler. Outside any profile block proxies are exactly as fast as without
this module: it swaps itself out when the last block closes.

Which profiles a call records into is the chain of blocks open in its context,
kept in a context variable (so a profile object may be entered in several tasks
or threads at once, and nested in itself). Recording takes a re-entrant lock per
profile, so that a signal handler or a ``__del__`` that calls a candidate while
its thread is recording cannot deadlock, and a forked child gets fresh locks.
"""

from __future__ import annotations

import _thread
import weakref
from contextvars import ContextVar
from time import perf_counter_ns

from .._engines import declines
from .._library import observing
from .._library.domain import AccelerationDomain
from .._stdlib import TYPE_CHECKING, after_fork_in_child, leave_chain
from ..exceptions import CoheriqScopeError

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType
    from typing import Any

__all__ = ["DeclineRow", "Profile", "ProfileRow", "profile"]

# The profile blocks open in this context, outermost first.
_active: ContextVar[tuple[Profile, ...]] = ContextVar("coheriq profiler", default=())
_ORDER = 0  # innermost of the watchers: it times the engine's call alone
_profiles: weakref.WeakSet[Profile] = weakref.WeakSet()  # for the fork hook


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
            f"{self.reason!r}, {self.count} call{'s' if self.count != 1 else ''})"
        )


class Profile:
    """The calls recorded by one :func:`profile` block (and the blocks nested in it)."""

    def __init__(self) -> None:
        self._stats: dict[tuple[str, str, str], list[int]] = {}
        self._declines: dict[tuple[str, str, str, str], int] = {}
        self._lock = _thread.RLock()
        self._open_entries = 0  # entered and not exited yet, in any thread
        _profiles.add(self)

    @property
    def rows(self) -> list[ProfileRow]:
        """The recorded calls, most total time first."""
        with self._lock:
            items = [(key, list(value)) for key, value in self._stats.items()]
        rows = [ProfileRow(*key, count, total / 1e9) for key, (count, total) in items]
        return sorted(rows, key=lambda r: (-r.total, r.domain, r.candidate, r.engine))

    @property
    def declines(self) -> list[DeclineRow]:
        """The calls an engine declined (the next implementation ran), most first."""
        with self._lock:
            items = list(self._declines.items())
        rows = [DeclineRow(*key, count) for key, count in items]
        return sorted(rows, key=lambda r: (-r.count, r.domain, r.candidate, r.engine, r.reason))

    def _record_decline(self, key: tuple[str, str, str, str]) -> None:
        with self._lock:
            self._declines[key] = self._declines.get(key, 0) + 1

    def _record(self, key: tuple[str, str, str], nanoseconds: int) -> None:
        with self._lock:
            stats = self._stats.setdefault(key, [0, 0])
            stats[0] += 1
            stats[1] += nanoseconds

    def __enter__(self) -> Profile:
        with self._lock:
            self._open_entries += 1
        _active.set((*_active.get(), self))
        observing.start(_ORDER, _timing)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with self._lock:
            if self._open_entries == 0:
                raise CoheriqScopeError(
                    "A coheriq.profile() block was exited more often than it was entered: "
                    "each `with` block, or __exit__ call, ends one __enter__. Nothing was "
                    "changed; remove the extra __exit__ call."
                )
            self._open_entries -= 1
        leave_chain(_active, self)  # the innermost entry of this profile in this context
        observing.stop(_ORDER)

    def __str__(self) -> str:
        rows = self.rows
        if not rows:
            return "no calls through coheriq candidates were recorded"
        return self._calls_table(rows) + "".join(
            f"\n{r.domain}.{r.candidate}: {r.engine} declined {r.count} "
            f"call{'s' if r.count != 1 else ''} ({r.reason})"
            for r in self.declines
        )

    @staticmethod
    def _calls_table(rows: list[ProfileRow]) -> str:
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
        widths = [max(len(line[i]) for line in table) for i in range(5)]
        return "\n".join(
            "  ".join(
                cell.ljust(w) if i < 2 else cell.rjust(w)
                for i, (cell, w) in enumerate(zip(line, widths, strict=True))
            )
            for line in table
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
    ``prof.declines``, and listed under the table. Like :class:`using_engine`, a
    block covers its own thread or task (and tasks created inside it); it never
    chooses an engine.
    """
    return Profile()


class _Timed(observing.View):
    """A view whose members are what the call finds, wrapped in a timer."""

    __slots__ = ("profiles",)

    def __init__(
        self, domain: AccelerationDomain, found: Any, profiles: tuple[Profile, ...]
    ) -> None:
        super().__init__(domain, found)
        self.profiles = profiles

    def __getitem__(self, name: str) -> Callable[..., Any]:
        domain = self.domain
        member = self.member(name)
        key = (domain.name, name, domain.scopes.active_engine() or "?")
        # A nested block's calls count for the outer ones too, and once for a
        # profile entered twice.
        profiles = dict.fromkeys(self.profiles)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = perf_counter_ns()
            try:
                return member(*args, **kwargs)
            finally:
                elapsed = perf_counter_ns() - start
                for profile in profiles:
                    profile._record(key, elapsed)

        return timed


def _timing(domain: AccelerationDomain) -> Callable[[Any], Any]:
    """What ``domain``'s calls find, timed where the calling context has a profile."""

    def wrap(scope: Any) -> Any:
        profiles = _active.get()
        return _Timed(domain, scope, profiles) if profiles else scope

    return wrap


def _count_decline(state: Any, candidate: str, engine: str, reason: str) -> None:
    """Count a decline in the profiles open in this context (a declines watcher)."""
    for profile in dict.fromkeys(_active.get()):
        profile._record_decline((state.name, candidate, engine, reason))


declines.watchers.append(_count_decline)


@after_fork_in_child
def _reinit_locks_in_child() -> None:
    # A thread of the parent may have held one of these locks when it forked.
    for profile in list(_profiles):
        profile._lock = _thread.RLock()
