"""A profiler of the calls made through candidate proxies: :func:`profile`.

A watcher (:mod:`coheriq._library.observing`), on while a profile block is open anywhere: it
times the calls made where the calling context has a profile (or every call, for a profile of
``everywhere=True``), labelled with the place they ran in. A profile carried by a
:class:`~coheriq.Snapshot` records other threads directly; in another process a fresh profile
records the task (:func:`call_carrying`) and its data comes back with the task's result.
"""

from __future__ import annotations

import _thread
import os
import sys
import weakref
from contextvars import ContextVar
from time import perf_counter_ns

from .._engines import conversions, declines
from .._library import observing
from .._library.domain import AccelerationDomain
from .._names import REFERENCE
from .._stdlib import TYPE_CHECKING, after_fork_in_child
from ..exceptions import CoheriqScopeError
from . import columns, send_back_with

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from contextlib import AbstractContextManager
    from typing import Any

    # (domain, candidate, engine that answered, where, engine that passed it on or "")
    CallKey = tuple[str, str, str, str, str]
    # (domain, candidate, engine, reason, where) and (domain, candidate, pair, direction, where)
    Key5 = tuple[str, str, str, str, str]
    # What one process sends back: (id, calls, declines, conversions), as plain tuples.
    Parcel = tuple[int, tuple[Any, ...], tuple[Any, ...], tuple[Any, ...]]
    Shipment = dict[str, list[Parcel]]  # profile token -> parcels

SCHEMA = "coheriq.profile/1"  # the "schema" of Profile.as_dict(): see its docstring

# The profiles recording in this context, outermost first (one may be there twice), each with
# the place it labels the calls with and the thread that place names.
_active: ContextVar[tuple[tuple[Profile, str, int], ...]] = ContextVar(
    "coheriq profiler", default=()
)
_everywhere: tuple[Profile, ...] = ()  # the open profiles of everywhere=True (replaced whole)
_ORDER = 0  # innermost of the watchers: it times the engine's call alone
_profiles: weakref.WeakSet[Profile] = weakref.WeakSet()  # for the fork hook

# Where the data of a task run in another process goes when it comes back: the profile it was
# carried from (in its own process), or a carrier open for the same profile here.
_registry_lock = _thread.allocate_lock()
_by_token: weakref.WeakValueDictionary[str, Profile] = weakref.WeakValueDictionary()
_carriers: dict[str, list[_Carrier]] = {}
# Parcels that reached a process where their profile is not open (a dask result given to a
# task on another worker), kept for the next task of that profile there, up to _KEPT.
_orphans: dict[str, list[Parcel]] = {}
_KEPT = 1000
_SHIPPED = "_coheriq_profile"  # the attribute of a task's exception that carries its data


def _calls(count: int) -> str:
    return f"{count} call{'s' if count != 1 else ''}"


def _thread_name() -> str:
    import threading  # a program that profiles threads has imported it already

    return threading.current_thread().name


class ProfileRow:
    """One candidate run by one engine: how often and how long (inclusive of nested calls).

    Attributes:
        domain: The domain's name.
        candidate: The candidate's name.
        engine: The engine that ran it.
        count: Number of calls.
        total: Seconds spent in them, in total.
        mean: Seconds per call.
        where: The places the calls ran in (``'thread MainThread'``, ``'process 4242'``,
            ``'dask worker tcp://…'``), in the order first seen; one place for a row of
            :meth:`Profile.rows_by_place`.
    """

    __slots__ = ("candidate", "count", "domain", "engine", "total", "where")

    def __init__(
        self,
        domain: str,
        candidate: str,
        engine: str,
        count: int,
        total: float,
        where: tuple[str, ...] = (),
    ):
        self.domain, self.candidate, self.engine = domain, candidate, engine
        self.count, self.total, self.where = count, total, where

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
        where: The places the declines happened in, in the order first seen.
    """

    __slots__ = ("candidate", "count", "domain", "engine", "reason", "where")

    def __init__(
        self,
        domain: str,
        candidate: str,
        engine: str,
        reason: str,
        count: int,
        where: tuple[str, ...] = (),
    ):
        self.domain, self.candidate, self.engine = domain, candidate, engine
        self.reason, self.count, self.where = reason, count, where

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
        where: The places the conversions happened in, in the order first seen.
    """

    __slots__ = ("candidate", "count", "direction", "domain", "pair", "total", "where")

    def __init__(
        self,
        domain: str,
        candidate: str,
        pair: str,
        direction: str,
        count: int,
        total: float,
        where: tuple[str, ...] = (),
    ):
        self.domain, self.candidate, self.pair = domain, candidate, pair
        self.direction, self.count, self.total, self.where = direction, count, total, where

    def __repr__(self) -> str:
        return (
            f"ConversionRow({self.domain}.{self.candidate}: {self.pair} by {self.direction}, "
            f"{self.count} objects, {self.total:.6f} s)"
        )


def _percent(part: int, whole: int) -> str:
    """``part`` of ``whole`` as a whole percentage that says 0% and 100% only when exact."""
    share = 100 * part / whole
    if part in (0, whole):
        return f"{round(share)}%"
    return "<1%" if share < 1 else ">99%" if share > 99 else f"{round(share)}%"


class ProfileShare:
    """How the recorded calls of one domain were shared between its implementations.

    ``str(share)`` is one sentence: ``"ragbatch: 73% of 12,000 calls on gpu; 27% declined:
    3,240 by gpu (fewer than 65,536 values)"``, or ``"shapes: all 3 calls on the reference
    implementation"`` where no call was sent to an engine.

    Attributes:
        domain: The domain's name.
        calls: Its calls recorded (a candidate calling another counts in both).
        sent: Engine -> the calls sent to it: the engine the program chose where each call was
            made (the reference included).
        ran: Engine -> the calls it ran of those sent to it (the others were declined).
        declined: Calls that the engine they were sent to passed on, and another
            implementation answered.
        declines: The domain's declines, ``((engine, reason), count)``, most first, summed
            over its candidates (a call declined twice on its way counts in two).
    """

    __slots__ = ("calls", "declined", "declines", "domain", "ran", "sent")

    def __init__(
        self,
        domain: str,
        sent: dict[str, int],
        ran: dict[str, int],
        declines: list[tuple[tuple[str, str], int]],
    ) -> None:
        self.domain, self.sent, self.ran, self.declines = domain, sent, ran, declines
        self.calls = sum(sent.values())
        self.declined = self.calls - sum(ran.values())

    def __str__(self) -> str:
        n, engines = self.calls, [e for e in self.sent if e != REFERENCE]
        calls = f"{n:,} call{'s' * (n != 1)}"
        if not engines:
            return f"{self.domain}: all {calls} on the reference implementation"
        # The first engine (the one sent most calls) says of how many; the others follow.
        parts = [f"{_percent(self.ran.get(e, 0), n)} on {e}" for e in engines]
        parts[0] = parts[0].replace(" on ", f" of {calls} on ", 1)
        if self.declined:
            said = ", ".join(f"{c:,} by {e} ({why})" for (e, why), c in self.declines)
            parts.append(f"{_percent(self.declined, n)} declined" + (f": {said}" if said else ""))
        if self.ran.get(REFERENCE):
            parts.append(f"{_percent(self.ran[REFERENCE], n)} on the reference")
        return f"{self.domain}: " + "; ".join(parts)

    def __repr__(self) -> str:
        return f"ProfileShare({self})"

    def as_dict(self) -> dict[str, Any]:
        """The share as plain data: the attributes above and ``"text"``, the sentence."""
        return {
            "domain": self.domain,
            "calls": self.calls,
            "sent": dict(self.sent),
            "ran": dict(self.ran),
            "declined": self.declined,
            "declines": [
                {"engine": engine, "reason": reason, "count": count}
                for (engine, reason), count in self.declines
            ],
            "text": str(self),
        }


class Profile:
    """The calls recorded by one :func:`profile` block (and the blocks nested in it).

    Also the calls made where a :class:`~coheriq.Snapshot` taken inside the block carried
    it (other threads, other processes), each labelled with the place it ran in.

    Attributes:
        everywhere: Whether it records every thread and task of this process while open,
            not only its own context.
    """

    def __init__(self, *, everywhere: bool = False) -> None:
        self.everywhere = everywhere
        self._calls: dict[CallKey, tuple[int, int]] = {}  # -> (calls, nanoseconds)
        self._declines: dict[Key5, int] = {}
        self._conversions: dict[Key5, tuple[int, float]] = {}
        # Re-entrant: a signal handler or a __del__ may call a candidate while its
        # thread records.
        self._lock = _thread.RLock()
        self._open_entries = 0  # entered and not exited yet, in any thread
        self._token: str | None = None  # names it to other processes (see _carry_token)
        self._seen: set[int] = set()  # the parcels merged (a dask result may come twice)
        _profiles.add(self)

    # -- what it recorded ---------------------------------------------------------------

    @property
    def rows(self) -> list[ProfileRow]:
        """The recorded calls per candidate and engine, wherever they ran, most total
        time first."""
        return self._call_rows(by_place=False)

    def rows_by_place(self) -> list[ProfileRow]:
        """The recorded calls per candidate, engine and place (each row's ``where`` names
        one), most total time first."""
        return self._call_rows(by_place=True)

    @property
    def places(self) -> list[str]:
        """The places calls were recorded in (``'thread MainThread'``, ``'process 4242'``,
        ``'dask worker tcp://…'``), in the order first seen."""
        with self._lock:  # where is the 4th item of a call's key, the last of the others'
            found = [key[3] for key in self._calls]
            found += [key[4] for key in [*self._declines, *self._conversions]]
        return list(dict.fromkeys(found))

    @property
    def declines(self) -> list[DeclineRow]:
        """The calls an engine declined (the next implementation ran), most first."""
        with self._lock:
            found = _merged({k: (n,) for k, n in self._declines.items()})
        rows = [DeclineRow(*key, n, where) for key, ((n,), where) in found.items()]
        return sorted(rows, key=lambda r: (-r.count, r.domain, r.candidate, r.engine, r.reason))

    @property
    def conversions(self) -> list[ConversionRow]:
        """The objects converted where calls crossed implementations, most time first."""
        with self._lock:
            found = _merged(dict(self._conversions))
        rows = [
            ConversionRow(*key, count, total, where)
            for key, ((count, total), where) in found.items()
        ]
        return sorted(rows, key=lambda r: (-r.total, r.domain, r.candidate, r.pair))

    def share(self) -> dict[str, ProfileShare]:
        """Domain name -> how its calls were shared between the engine the program chose and
        the implementations its declines passed them to, most calls first.

        ``str()`` of each is the sentence ``print(prof)`` shows under the table.
        """
        with self._lock:
            calls, declined = list(self._calls.items()), list(self._declines.items())
        sent: dict[str, dict[str, int]] = {}
        ran: dict[str, dict[str, int]] = {}
        for (domain, _, engine, _, passed_by), (count, _) in calls:
            chosen = sent.setdefault(domain, {})
            chosen[passed_by or engine] = chosen.get(passed_by or engine, 0) + count
            if not passed_by:
                answered = ran.setdefault(domain, {})
                answered[engine] = answered.get(engine, 0) + count
        reasons: dict[str, dict[tuple[str, str], int]] = {}
        for (domain, _, engine, reason, _), count in declined:
            said = reasons.setdefault(domain, {})
            said[engine, reason] = said.get((engine, reason), 0) + count
        shares = [
            ProfileShare(
                domain,
                dict(sorted(chosen.items(), key=lambda item: -item[1])),
                ran.get(domain, {}),
                sorted(reasons.get(domain, {}).items(), key=lambda item: (-item[1], item[0])),
            )
            for domain, chosen in sent.items()
        ]
        return {s.domain: s for s in sorted(shares, key=lambda s: (-s.calls, s.domain))}

    def as_dict(self) -> dict[str, Any]:
        """The whole profile as plain data (JSON's types), in the schema ``coheriq.profile/1``.

        Keys: ``"schema"`` (that name: a reader checks it; a later schema gets another name),
        ``"places"`` (as :attr:`places`), ``"calls"`` (one row per candidate, engine and
        place: ``domain``, ``candidate``, ``engine``, ``where``, ``count``,
        ``total_seconds``; most time first), ``"declines"`` (``domain``, ``candidate``,
        ``engine``, ``reason``, ``where``, ``count``), ``"conversions"`` (``domain``,
        ``candidate``, ``pair``, ``direction``, ``where``, ``count``, ``total_seconds``) and
        ``"share"`` (one :meth:`ProfileShare.as_dict` per domain, as :meth:`share`).
        """
        with self._lock:
            found_declines = sorted(self._declines.items(), key=lambda i: (-i[1], i[0]))
            found_conversions = sorted(self._conversions.items(), key=lambda i: (-i[1][1], i[0]))
        return {
            "schema": SCHEMA,
            "places": self.places,
            "calls": [
                {
                    "domain": r.domain,
                    "candidate": r.candidate,
                    "engine": r.engine,
                    "where": r.where[0],
                    "count": r.count,
                    "total_seconds": r.total,
                }
                for r in self.rows_by_place()
            ],
            "declines": [
                {**_named(_DECLINE_FIELDS, key), "count": count} for key, count in found_declines
            ],
            "conversions": [
                {**_named(_CONVERSION_FIELDS, key), "count": count, "total_seconds": seconds}
                for key, (count, seconds) in found_conversions
            ],
            "share": [share.as_dict() for share in self.share().values()],
        }

    def to_json(self, *, indent: int | None = 2) -> str:
        """:meth:`as_dict` as JSON text."""
        import json

        return json.dumps(self.as_dict(), indent=indent)

    def _call_rows(self, *, by_place: bool) -> list[ProfileRow]:
        with self._lock:
            found = list(self._calls.items())
        # Merged over the engine that passed a call on (and over places, unless by_place).
        cells: dict[tuple[str, str, str, str], tuple[int, int, tuple[str, ...]]] = {}
        for (domain, candidate, engine, where, _), (count, ns) in found:
            key = (domain, candidate, engine, where if by_place else "")
            before, total, places = cells.get(key, (0, 0, ()))
            cells[key] = (before + count, total + ns, _add(places, where))
        rows = [
            ProfileRow(domain, candidate, engine, count, ns / 1e9, places)
            for (domain, candidate, engine, _), (count, ns, places) in cells.items()
        ]
        return sorted(rows, key=lambda r: (-r.total, r.domain, r.candidate, r.engine, r.where))

    # -- recording -----------------------------------------------------------------------

    def _record(self, key: CallKey, nanoseconds: int) -> None:
        with self._lock:
            count, total = self._calls.get(key, (0, 0))
            self._calls[key] = (count + 1, total + nanoseconds)

    def _place(self) -> str:
        """The place a call in the current thread is labelled with."""
        return f"thread {_thread_name()}"

    def carry_in(self, where: str | None = None) -> None:
        """Record the calls of this context too, labelled ``where`` (by default, this
        thread: ``'thread NAME'``) until :meth:`carry_out`: what entering a
        :class:`~coheriq.Snapshot` taken inside the block does in another thread."""
        entry = (self, self._place() if where is None else where, _thread.get_ident())
        _active.set((*_active.get(), entry))
        observing.start(_ORDER, _timing)

    def carry_out(self) -> None:
        """Stop recording this context: the end of :meth:`carry_in`."""
        entries = _active.get()
        for i in range(len(entries) - 1, -1, -1):
            if entries[i][0] is self:
                _active.set(entries[:i] + entries[i + 1 :])
                break
        observing.stop(_ORDER)

    def __enter__(self) -> Profile:
        global _everywhere
        with self._lock:
            self._open_entries += 1
        self.carry_in()
        if self.everywhere:
            with _registry_lock:
                _everywhere = (*_everywhere, self)
        return self

    def __exit__(self, *exc: object) -> None:
        global _everywhere
        with self._lock:
            if self._open_entries == 0:
                raise CoheriqScopeError(
                    "A coheriq.profile() block was exited more often than it was entered: "
                    "each `with` block, or __exit__ call, ends one __enter__. Nothing was "
                    "changed; remove the extra __exit__ call."
                )
            self._open_entries -= 1
        self.carry_out()
        if self.everywhere:
            with _registry_lock:
                if self in _everywhere:  # not in a forked child: see _forget_in_child
                    at = _everywhere.index(self)
                    _everywhere = _everywhere[:at] + _everywhere[at + 1 :]

    # -- across processes ----------------------------------------------------------------

    def _carry_token(self) -> str:
        """The name a snapshot pickled to another process knows this profile by."""
        with self._lock:
            if self._token is None:
                self._token = os.urandom(16).hex()  # unique across processes and hosts
                with _registry_lock:
                    _by_token[self._token] = self
            return self._token

    def _absorb(self, parcels: Iterable[Parcel]) -> None:
        """Merge what tasks of other processes recorded for this profile (each parcel once)."""
        with self._lock:
            for parcel in parcels:
                if parcel[0] not in self._seen:
                    self._seen.add(parcel[0])
                    self._merge(parcel)

    def _merge(self, parcel: Parcel) -> None:
        _, calls, declined, converted = parcel
        for row in calls:
            key, (count, ns) = row[:5], row[5:]
            before, total = self._calls.get(key, (0, 0))
            self._calls[key] = (before + count, total + ns)
        for row in declined:
            self._declines[row[:5]] = self._declines.get(row[:5], 0) + row[5]
        for row in converted:
            key, (count, seconds) = row[:5], row[5:]
            before, total_s = self._conversions.get(key, (0, 0.0))
            self._conversions[key] = (before + count, total_s + seconds)

    # -- as text -------------------------------------------------------------------------

    def __str__(self) -> str:
        rows, places = self.rows, self.places
        if not rows and not places:
            return "no calls through coheriq candidates were recorded"
        by_place = len(places) > 1
        with self._lock:  # per place, for the lines of declines and conversions
            declined, converted = dict(self._declines), dict(self._conversions)
        lines = self._table(rows, by_place) if rows else []
        lines += [str(share) for share in self.share().values()]
        lines += [
            f"{r.domain}.{r.candidate}: {r.engine} declined {_calls(r.count)} ({r.reason})"
            + (_in(r.where, r, declined) if by_place else "")
            for r in self.declines
        ]
        lines += [
            f"{r.domain}.{r.candidate}: converted {r.count} ({r.pair}) in {r.total * 1e3:.3f} ms"
            + (_in(r.where, r, converted) if by_place else "")
            for r in self.conversions
        ]
        return "\n".join(lines)

    def _table(self, rows: list[ProfileRow], by_place: bool) -> list[str]:
        """The table of ``rows``; ``by_place``: each row's places in a last column, and under
        a row that ran in several, one line per place."""
        each: dict[tuple[str, str, str], list[ProfileRow]] = {}
        if by_place:
            for row in self.rows_by_place():
                each.setdefault((row.domain, row.candidate, row.engine), []).append(row)
        table, wheres = [["candidate", "engine", "calls", "total", "mean"]], ["where"]
        for r in rows:
            table.append([f"{r.domain}.{r.candidate}", r.engine, *_cells(r)])
            wheres.append(r.where[0] if len(r.where) == 1 else f"{len(r.where)} places")
            for part in each.get((r.domain, r.candidate, r.engine), []) if len(r.where) > 1 else ():
                table.append(["", "", *_cells(part)])
                wheres.append(part.where[0])
        lines = columns(table, 2).split("\n")
        if not by_place:
            return lines
        width = max(map(len, lines))
        return [f"{line.ljust(width)}  {where}" for line, where in zip(lines, wheres, strict=True)]


_DECLINE_FIELDS = ("domain", "candidate", "engine", "reason", "where")
_CONVERSION_FIELDS = ("domain", "candidate", "pair", "direction", "where")


def _named(fields: tuple[str, ...], key: tuple[str, ...]) -> dict[str, str]:
    return dict(zip(fields, key, strict=True))


def _in(where: tuple[str, ...], row: DeclineRow | ConversionRow, found: dict[Any, Any]) -> str:
    """`` in PLACE``, or `` in PLACE (COUNT), …``: where the decline or conversion ``row``
    happened (``found``: the profile's records of its kind, keyed by place last)."""
    if len(where) == 1:
        return f" in {where[0]}"
    head = (
        (row.domain, row.candidate, row.engine, row.reason)
        if isinstance(row, DeclineRow)
        else (row.domain, row.candidate, row.pair, row.direction)
    )
    counts = [found.get((*head, place), 0) for place in where]
    return " in " + ", ".join(
        f"{place} ({count if isinstance(count, int) else count[0]})"
        for place, count in zip(where, counts, strict=True)
    )


def _add(places: tuple[str, ...], where: str) -> tuple[str, ...]:
    return places if where in places else (*places, where)


def _merged(
    found: dict[Key5, tuple[Any, ...]],
) -> dict[tuple[str, str, str, str], tuple[tuple[Any, ...], tuple[str, ...]]]:
    """Rows keyed with their place as the last item -> summed over places, with the places."""
    merged: dict[tuple[str, str, str, str], tuple[tuple[Any, ...], tuple[str, ...]]] = {}
    for (*head, where), values in found.items():
        key = (head[0], head[1], head[2], head[3])
        before, places = merged.get(key, ((0,) * len(values), ()))
        merged[key] = (
            tuple(a + b for a, b in zip(before, values, strict=True)),
            _add(places, where),
        )
    return merged


def _cells(row: ProfileRow) -> list[str]:
    return [str(row.count), f"{row.total * 1e3:.3f} ms", f"{row.mean * 1e6:.2f} us"]


def profile(*, everywhere: bool = False) -> Profile:
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
    >>> str(prof.share()["doc_profile"])
    'doc_profile: all 3 calls on the reference implementation'

    Calls are counted per candidate and engine, with total and mean time (a
    candidate calling another counts in both). ``print(prof)`` renders a table;
    ``prof.rows`` is the data, ``prof.share()`` the share of each domain's calls
    that ran on the engine chosen, and ``prof.as_dict()`` / ``prof.to_json()``
    all of it as plain data. The calls an engine declined (see
    :func:`coheriq.may_decline`) are counted per candidate, engine and reason in
    ``prof.declines``, and listed under the table; so are the objects converted
    where calls crossed implementations (``prof.conversions``, see
    :class:`coheriq.Conversion`). Like :class:`using_engine`, a block covers its
    own thread or task (and tasks created inside it), and it never chooses an engine.

    A :func:`coheriq.snapshot` taken inside the block carries it: calls made where
    the snapshot is entered (another thread) or where ``snap.wrap(fn)`` runs (a
    process pool, a dask worker) are recorded too, labelled with the place they
    ran in (``prof.rows_by_place()``, ``row.where``; the table gets a column for it).

    Args:
        everywhere: Record the calls of every thread and task of this process while
            the block is open, each labelled with its thread, not only this context's.
    """
    return Profile(everywhere=everywhere)


def profiles_here() -> tuple[Profile, ...]:
    """The profiles that record a call made here (for :func:`coheriq.snapshot` to carry)."""
    return tuple(_here())


def _here() -> dict[Profile, str]:
    """The profiles that record a call made here -> the place each labels it with."""
    entries, everywhere = _active.get(), _everywhere
    if not entries and not everywhere:
        return {}
    found: dict[Profile, str] = {}
    me = _thread.get_ident()
    for profile, where, ident in entries:
        # A thread may have been started with this context (3.14's free-threaded builds
        # copy it): its calls are labelled with their own thread.
        found[profile] = where if ident == me else profile._place()
    for profile in everywhere:
        if profile not in found:
            found[profile] = profile._place()
    return found


class _Timed(observing.View):
    """A view whose members are what the call finds, wrapped in a timer."""

    __slots__ = ("profiles",)

    def __init__(self, domain: AccelerationDomain, found: Any, profiles: dict[Profile, str]):
        super().__init__(domain, found)
        # Once each: a nested block's calls count for the outer ones too, once for a
        # profile entered twice.
        self.profiles = profiles

    def __getitem__(self, name: str) -> Callable[..., Any]:
        domain, profiles = self.domain, self.profiles
        member = self.member(name)
        sent_to = domain.scopes.active_engine() or "?"
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
                engine, passed_by = (
                    (sent_to, "") if who is None or who[0] is not chain else (who[1], sent_to)
                )
                for profile, where in profiles.items():
                    profile._record((domain.name, name, engine, where, passed_by), elapsed)

        return timed


def _timing(domain: AccelerationDomain) -> Callable[[Any], Any]:
    """What ``domain``'s calls find, timed where the calling context has a profile."""

    def wrap(scope: Any) -> Any:
        profiles = _here()
        return _Timed(domain, scope, profiles) if profiles else scope

    return wrap


def _count_decline(state: Any, candidate: str, engine: str, reason: str) -> None:
    """A declines watcher: count a decline in the profiles recording this context."""
    for profile, where in _here().items():
        key = (state.name, candidate, engine, reason, where)
        with profile._lock:
            profile._declines[key] = profile._declines.get(key, 0) + 1


declines.watchers.append(_count_decline)


def _count_conversion(
    state: Any, candidate: str, conversion: Any, direction: str, seconds: float
) -> None:
    """A conversions watcher: count one conversion in the profiles recording this context."""
    for profile, where in _here().items():
        key = (state.name, candidate, conversion.label(direction), direction, where)
        with profile._lock:
            count, total = profile._conversions.get(key, (0, 0.0))
            profile._conversions[key] = (count + 1, total + seconds)


conversions.watchers.append(_count_conversion)


# -- profiles carried to other processes ------------------------------------------------


class _Carrier(Profile):
    """The profile a task opens in another process for the profile of ``token``: what it
    records, and the parcels of other tasks that reach it, go back with the task."""

    def __init__(self, token: str, home: str) -> None:
        super().__init__()
        self._token, self._home = token, home
        self._forward: list[Parcel] = []

    def _place(self) -> str:
        return f"{self._home}, thread {_thread_name()}"

    def _absorb(self, parcels: Iterable[Parcel]) -> None:
        with self._lock:  # passed on whole: the parent may get the same parcel directly too
            for parcel in parcels:
                if parcel[0] not in self._seen:
                    self._seen.add(parcel[0])
                    self._forward.append(parcel)

    def parcels(self) -> list[Parcel]:
        """What goes back: its own records as one parcel, and those it was given."""
        with self._lock:
            own = (
                int.from_bytes(os.urandom(8), "big"),
                tuple((*key, *value) for key, value in self._calls.items()),
                tuple((*key, count) for key, count in self._declines.items()),
                tuple((*key, *value) for key, value in self._conversions.items()),
            )
            return ([own] if any(own[1:]) else []) + self._forward


def resolve_tokens(tokens: tuple[str, ...]) -> tuple[tuple[Profile, ...], tuple[str, ...]]:
    """The profiles of ``tokens`` open in this process, and the tokens of the others."""
    with _registry_lock:
        here = {token: _open_here(token) for token in tokens}
    return (
        tuple(profile for profile in here.values() if profile is not None),
        tuple(token for token, profile in here.items() if profile is None),
    )


def _open_here(token: str) -> Profile | None:
    """The profile of ``token`` in this process (under ``_registry_lock``): the profile
    itself, or the latest carrier of it open here."""
    carriers = _carriers.get(token)
    return _by_token.get(token) or (carriers[-1] if carriers else None)


def _arrive(shipment: Shipment, result: Any = None) -> Any:
    """Merge ``shipment`` into the profiles it belongs to, here; return ``result``.

    What a task's result (or exception) becomes when it is unpickled. A parcel whose profile
    is not open in this process waits for the next task carrying that profile here (a few,
    then none: see _KEPT).
    """
    for token, parcels in shipment.items():
        with _registry_lock:
            target = _open_here(token)
            if target is None:
                if sum(map(len, _orphans.values())) + len(parcels) <= _KEPT:
                    _orphans.setdefault(token, []).extend(parcels)
                continue
        target._absorb(parcels)
    return result


class _Carried:
    """A task's result and what its profiles recorded: unpickled, the result alone, once the
    records have reached their profiles."""

    __slots__ = ("result", "shipment")

    def __init__(self, result: Any, shipment: Shipment) -> None:
        self.result, self.shipment = result, shipment

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Shipment, Any]]:
        return _arrive, (self.shipment, self.result)

    def __sizeof__(self) -> int:
        # What a dask worker counts for the result it holds (dask.sizeof, where loaded).
        sizeof = getattr(sys.modules.get("dask.sizeof"), "sizeof", sys.getsizeof)
        return object.__sizeof__(self) + int(sizeof(self.result))


class _Shipped:
    """What a task's exception carries of its profiles: unpickled, merged, then ``None``."""

    __slots__ = ("shipment",)

    def __init__(self, shipment: Shipment) -> None:
        self.shipment = shipment

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Shipment]]:
        return _arrive, (self.shipment,)


def _process_place() -> str:
    """The place of this process: its dask worker's address, or its process id."""
    distributed = sys.modules.get("distributed")
    if distributed is not None:
        try:
            return f"dask worker {distributed.get_worker().address}"
        except Exception:  # not in a worker's task (ValueError), or no such function
            pass
    return f"process {os.getpid()}"


def call_carrying(
    tokens: tuple[str, ...],
    scope: AbstractContextManager[Any],
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    """Run ``fn(*args, **kwargs)`` inside ``scope`` (a snapshot's blocks), recorded for the
    profiles of another process named by ``tokens``; return its result, carrying the records
    back when it is pickled (see :class:`_Carried`). An exception ``fn`` raises propagates
    as it is, carrying them in an attribute (lost where its class pickles without it)."""
    place = _process_place()
    carriers = _open_carriers(tokens, place)
    try:
        # A dask result that stayed on this worker reaches this task as it was returned.
        args = tuple(_unwrapped(a) for a in args)
        kwargs = {k: _unwrapped(v) for k, v in kwargs.items()}
        with _carried_in(carriers, place), scope:
            result = fn(*args, **kwargs)
    except BaseException as error:
        shipment = _close(carriers)
        if shipment:
            send_back_with(error, _SHIPPED, _Shipped(shipment))
        raise
    shipment = _close(carriers)
    return _Carried(result, shipment) if shipment else result


def _open_carriers(tokens: tuple[str, ...], place: str) -> list[_Carrier]:
    carriers = [_Carrier(token, place) for token in dict.fromkeys(tokens)]
    with _registry_lock:
        for carrier in carriers:
            _carriers.setdefault(carrier._token or "", []).append(carrier)
        waiting = [_orphans.pop(c._token or "", []) for c in carriers]
    for carrier, parcels in zip(carriers, waiting, strict=True):
        carrier._absorb(parcels)
    return carriers


def _close(carriers: list[_Carrier]) -> Shipment:
    """Unregister ``carriers``; what they send back, by token (none where they got none)."""
    with _registry_lock:
        for carrier in carriers:
            token = carrier._token or ""
            open_ones = _carriers.get(token, [])
            if carrier in open_ones:
                open_ones.remove(carrier)
            if not open_ones:
                _carriers.pop(token, None)
    shipment = {c._token or "": c.parcels() for c in carriers}
    return {token: parcels for token, parcels in shipment.items() if parcels}


class _carried_in:  # noqa: N801 - a context manager used as a function
    """Carry ``carriers`` into this context, labelled ``place``, for the block."""

    def __init__(self, carriers: list[_Carrier], place: str) -> None:
        self.carriers, self.place, self.entered = carriers, place, 0

    def __enter__(self) -> None:
        for carrier in self.carriers:
            carrier.carry_in(self.place)
            self.entered += 1

    def __exit__(self, *exc: object) -> None:
        for carrier in reversed(self.carriers[: self.entered]):
            carrier.carry_out()


def _unwrapped(value: Any) -> Any:
    """``value`` with the carried results in it (itself, or an item of a list, tuple or
    dict) replaced by their results, their records merged here."""
    kind = type(value)
    if kind is _Carried:
        return _arrive(value.shipment, value.result)
    if kind in (list, tuple) and any(type(item) is _Carried for item in value):
        return kind(_unwrapped(item) for item in value)
    if kind is dict and any(type(item) is _Carried for item in value.values()):
        return {key: _unwrapped(item) for key, item in value.items()}
    return value


@after_fork_in_child
def _forget_in_child() -> None:
    # A thread of the parent may have held one of these locks when it forked.
    global _registry_lock, _everywhere
    for profile in list(_profiles):
        profile._lock = _thread.RLock()
    _registry_lock = _thread.allocate_lock()
    # The parent's profiles are copies here: a task's records must go back to the parent
    # (its tokens are unknown here), and "every thread" is the parent's threads.
    _by_token.clear()
    _carriers.clear()
    _orphans.clear()
    _everywhere = ()
