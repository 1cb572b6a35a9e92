"""Running an engine and another implementation side by side: :func:`verify`.

While a verification is on for a context, every call of a function candidate
that the program makes there on the verified engine, where the engine and the
other implementation (the reference, by default) run different code, runs that
engine's implementation (whose result, or exception, the program gets) and then
the other implementation on its own copy of the arguments, inside a
``using_engine`` block of it; the two results are compared by the library's
rules (:mod:`coheriq._library.comparing`), and the outcome is recorded in the
:class:`Verification`. Calls made inside a verified call (the engine's
code calling the library, say) are part of it and are not verified on their
own; where the other side's run reaches a candidate with side effects, it is
stopped there and the call is not compared, so that no such candidate runs
twice. Constructing a class candidate is never compared: its objects are,
through the calls that return or take them.

A verification is a watcher (see :mod:`coheriq._library.observing`), carried like a
block: asyncio tasks created inside it and :func:`coheriq.snapshot` carry it.
When none is on anywhere, the proxies' fast path is what it is without this
module. ``<PREFIX>_VERIFY=ENGINE`` (or ``ENGINE:OTHER``) turns one on for the
whole process from the domain's materialization, prints its report to standard
error at exit, and where it found a difference ends the process with status 1
(see :func:`_finish`).
"""

from __future__ import annotations

import _thread
import os
import sys
from contextlib import contextmanager
from contextvars import ContextVar
from time import perf_counter_ns

from .._api.verbs import resolve_engine, using_engine
from .._call.proxy import code_flags_behind
from .._engines import declines
from .._engines.meta import supplier
from .._library import observing, registry
from .._library.comparing import SharedSource, summarize
from .._library.domain import AccelerationDomain, lookup_domain
from .._names import REFERENCE
from .._stdlib import (
    CO_ASYNC_GENERATOR,
    CO_COROUTINE,
    CO_GENERATOR,
    TYPE_CHECKING,
    calls_inside,
    code_flags,
    leave_chain,
    outside_coheriq,
)
from ..exceptions import CoheriqScopeError, CoheriqTypeError
from .verdicts import (
    CoheriqVerificationError,
    CoheriqVerificationWarning,
    Mismatch,
    VerificationRow,
    table,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping
    from types import TracebackType
    from typing import Any, Literal, TypeVar

    from .._api.verbs import EngineLike
    from .._engines.meta import EngineMeta

    F = TypeVar("F", bound=Callable[..., Any])
    OnMismatch = Literal["warn", "record", "raise"]

__all__ = ["Verification", "register_comparison", "verify"]

# The verifications open in this context, outermost first.
_active: ContextVar[tuple[Verification, ...]] = ContextVar("coheriq verifications", default=())
# The names of the domains whose verified call runs its engine's implementation in
# this context: the calls it makes are part of it.
_inside: ContextVar[frozenset[str]] = ContextVar("coheriq verified calls", default=frozenset())
_ORDER = 1  # outside the profiler: comparing is not the engine's time
# Domain name -> the verification its <PREFIX>_VERIFY variable turned on.
_environment: dict[str, Verification] = {}


class Verification:
    """Runs a domain's calls on an engine and on another implementation, and compares them.

    Made by :func:`verify`, which documents the arguments. Use it as a context
    manager or as a decorator; read what it saw from :attr:`rows`,
    :attr:`mismatches`, :attr:`ok`, ``print(verification)`` (a table) or
    :meth:`to_json`.
    """

    def __init__(
        self,
        domain: AccelerationDomain | str,
        engine: EngineLike,
        against: EngineLike = REFERENCE,
        *,
        rtol: float | None = None,
        atol: float | None = None,
        every: int = 1,
        budget: float | None = None,
        on_mismatch: OnMismatch = "warn",
        examples: int = 3,
    ) -> None:
        _check_options(rtol, atol, every, budget, on_mismatch, examples)
        if not isinstance(domain, (AccelerationDomain, str)):
            lookup_domain(domain)  # raises the error that explains what a domain is
        self.domain = domain
        self.engine, self.against = engine, against
        self.rtol, self.atol, self.every, self.budget = rtol, atol, every, budget
        self.on_mismatch: OnMismatch = on_mismatch
        self.examples = examples
        self._name = domain if isinstance(domain, str) else domain.name
        self._engine_name = engine if isinstance(engine, str) else None
        self._against_name = against if isinstance(against, str) else None
        self._rows: dict[str, VerificationRow] = {}
        self._lock = _thread.RLock()
        self._spent_ns = 0  # the time the other side and comparing took, for budget
        # The copy of the domain last called through, its engine and its other implementation.
        self._other: tuple[AccelerationDomain, EngineMeta, EngineMeta] | None = None
        self._blocks: list[using_engine] = []  # the using_engine blocks entered, innermost last

    def __repr__(self) -> str:
        engine = self._engine_name or self.engine
        against = self._against_name or self.against
        return f"<Verification of {self._name!r}: {engine!r} against {against!r}>"

    # -- entering and leaving --------------------------------------------------------

    def __enter__(self) -> Verification:
        found = lookup_domain(self.domain)
        self._resolve(found)
        block = using_engine(found, self.engine)
        block.__enter__()
        with self._lock:
            self._blocks.append(block)
        self.carry_in()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with self._lock:
            if not self._blocks:
                raise CoheriqScopeError(
                    f"{self!r} was exited more often than it was entered: each `with` "
                    "block, or __exit__ call, ends one __enter__."
                )
            # The entry open in this context (one verification may be entered by
            # several threads or tasks at once), else the newest, as using_engine does.
            here = [b for b in self._blocks if b._open_here() is not None]
            block = (here or self._blocks)[-1]
            self._blocks.remove(block)
        self.carry_out()  # this context's innermost entry of it ends
        block.__exit__(exc_type, exc, tb)

    def carry_in(self) -> None:
        """Cover this context too (a :class:`~coheriq.Snapshot` entered elsewhere)."""
        _active.set((*_active.get(), self))
        observing.start(_ORDER, _verifying)

    def carry_out(self) -> None:
        """Stop covering this context: the end of :meth:`carry_in`."""
        leave_chain(_active, self)
        observing.stop(_ORDER)

    @property
    def environ(self) -> dict[str, str]:
        """The environment variable that turns this verification on in a child process.

        Empty for a domain without ``env_prefix``, or before the block was entered.
        """
        found = self.domain if isinstance(self.domain, AccelerationDomain) else None
        if found is None:
            copies = registry.copies_of(self._name)
            found = None if copies is None else copies.named()
        if found is None or not found.env_prefix or self._engine_name is None:
            return {}
        value = f"{self._engine_name}:{self._against_name or REFERENCE}"
        return {f"{found.env_prefix}_VERIFY": value}

    def _resolve(
        self, found: AccelerationDomain
    ) -> tuple[AccelerationDomain, EngineMeta, EngineMeta]:
        """Check both sides in ``found`` (a copy of the domain); start the other one.

        Returns the copy, the engine's class and the other implementation's.
        """
        other = self._other
        if other is not None and other[0] is found:
            return other
        engine_cls = resolve_engine(found, self.engine)
        other_cls = resolve_engine(found, self.against)
        engine, against = engine_cls.__coheriq_name__, other_cls.__coheriq_name__
        self._engine_name, self._against_name = engine or REFERENCE, against or REFERENCE
        if engine_cls is other_cls:
            raise CoheriqTypeError(
                f"A verification of domain {found.name!r} compares an engine with another "
                f"implementation, but both are {self._engine_name!r}; name another with "
                "against= (the reference, by default)."
            )
        found.engines.members_of(other_cls)  # starts it now, not in the first call
        self._other = (found, engine_cls, other_cls)
        return self._other

    def _two_implementations(self, domain: AccelerationDomain, name: str) -> bool:
        """Whether the engine and the other side run different code for candidate ``name``.

        Not where neither overrides it (both run the reference), nor where one
        engine takes the other's implementation by deriving from it: running one
        implementation twice compares nothing, and results that embed copies of
        the arguments (a composed function) would differ for no fault of either.
        """
        _, engine_cls, other_cls = self._resolve(domain)
        return supplier(engine_cls, name) is not supplier(other_cls, name)

    def __call__(self, fn: F) -> F:
        """Decorate ``fn`` so that each of its calls runs inside this verification."""
        flags = code_flags_behind(fn)
        if flags & (CO_GENERATOR | CO_ASYNC_GENERATOR):
            raise CoheriqTypeError(
                f"{self!r} cannot decorate generator function {fn.__qualname__!r}: its "
                "body runs after the call returns. Open the verification with a `with` "
                "block inside the generator instead."
            )
        verified: F = calls_inside(fn, lambda: self, coroutine=bool(flags & CO_COROUTINE))
        return verified

    # -- the report ------------------------------------------------------------------

    @property
    def rows(self) -> list[VerificationRow]:
        """A row per candidate called on the engine, in the order they were first called."""
        with self._lock:
            return list(self._rows.values())

    @property
    def mismatches(self) -> list[Mismatch]:
        """The recorded mismatches (the first few of each candidate)."""
        return [m for row in self.rows for m in row.examples]

    @property
    def ok(self) -> bool:
        """Whether every compared call agreed."""
        return all(row.mismatches == 0 for row in self.rows)

    def as_dict(self) -> dict[str, Any]:
        """The report as plain data."""
        return {
            "domain": self._name,
            "engine": self._engine_name,
            "against": self._against_name,
            "ok": self.ok,
            "candidates": [row.as_dict() for row in self.rows],
        }

    def to_json(self) -> str:
        """The report as JSON."""
        import json

        return json.dumps(self.as_dict(), indent=2, sort_keys=True)

    def __str__(self) -> str:
        engine = self._engine_name or str(self.engine)
        against = self._against_name or str(self.against)
        title = f"verification of {self._name!r}: {engine!r} against {against!r}"
        return table(title, engine, self.rows)

    # -- a verified call -------------------------------------------------------------

    def _row(self, domain: AccelerationDomain, name: str) -> VerificationRow:
        row = self._rows.get(name)
        if row is None:
            with self._lock:
                row = self._rows.setdefault(
                    name,
                    VerificationRow(
                        domain.name, name, self._engine_name or "?", self._against_name or "?"
                    ),
                )
        return row

    def _skip_reason(self, domain: AccelerationDomain, name: str, row: VerificationRow) -> str:
        """Why this call is run on the engine alone, or "" to compare it."""
        if name in domain.comparisons.side_effects:
            return "marked with side effects: run on the engine only"
        if code_flags(domain.state.candidates[name].reference) & (
            CO_GENERATOR | CO_ASYNC_GENERATOR
        ):
            return "a generator function: what it yields is not compared"
        if (row.calls - 1) % self.every:
            return f"sampled: every {self.every}th call is compared"
        if self.budget is not None and self._spent_ns >= self.budget * 1e9:
            return f"the time budget of {self.budget} s was spent"
        return ""

    def call(
        self,
        domain: AccelerationDomain,
        name: str,
        member: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        chain: declines.Chain | None = None,
    ) -> Any:
        """Run ``member`` (the engine's) for the program, and the other side to compare.

        ``chain``: the engine's :class:`~coheriq._engines.declines.Chain` that
        ``member`` runs, where its implementation may decline.
        """
        prepared = self._prepare(domain, name, args, kwargs)
        if prepared is None:
            return member(*args, **kwargs)
        try:
            with self._engine_side(domain, prepared, chain) as engine:
                result = member(*args, **kwargs)
        except Exception as error:
            with self._other_side(domain, guarded=True) as (members, guard):
                other = _outcome(members[name], prepared.theirs, guard)
            self._judge(domain, name, prepared, engine.nanoseconds, other, error=error)
            raise
        with self._other_side(domain, guarded=True) as (members, guard):
            other = _outcome(members[name], prepared.theirs, guard)
        self._judge(domain, name, prepared, engine.nanoseconds, other, result=result)
        return result

    async def call_async(
        self,
        domain: AccelerationDomain,
        name: str,
        member: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        chain: declines.Chain | None = None,
    ) -> Any:
        """:meth:`call` for an ``async def`` candidate: each side's coroutine is awaited."""
        prepared = self._prepare(domain, name, args, kwargs)
        if prepared is None:
            return await member(*args, **kwargs)
        try:
            with self._engine_side(domain, prepared, chain) as engine:
                result = await member(*args, **kwargs)
        except Exception as error:
            with self._other_side(domain, guarded=True) as (members, guard):
                other = await _outcome_async(members[name], prepared.theirs, guard)
            self._judge(domain, name, prepared, engine.nanoseconds, other, error=error)
            raise
        with self._other_side(domain, guarded=True) as (members, guard):
            other = await _outcome_async(members[name], prepared.theirs, guard)
        self._judge(domain, name, prepared, engine.nanoseconds, other, result=result)
        return result

    @contextmanager
    def _engine_side(
        self, domain: AccelerationDomain, prepared: _Prepared, chain: declines.Chain | None
    ) -> Iterator[_EngineRun]:
        """The engine's run of a verified call: :meth:`call`'s and :meth:`call_async`'s.

        The calls made inside it are part of it; it is timed; and where the
        call's own chain declined it, who answered is counted (a decline of a
        call made inside it, which sets the same variable, is not).
        """
        run = _EngineRun()
        inside = _inside.set(_inside.get() | {domain.name})
        who = declines.answered.set(None)
        started = perf_counter_ns()
        try:
            yield run
        finally:
            run.nanoseconds = perf_counter_ns() - started
            _inside.reset(inside)
            answered = declines.answered.get()
            declines.answered.reset(who)
            if answered is not None and chain is not None and answered[0] is chain:
                with self._lock:
                    row = prepared.row
                    row.answered[answered[1]] = row.answered.get(answered[1], 0) + 1

    def _prepare(
        self, domain: AccelerationDomain, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> _Prepared | None:
        """Count the call; give the other side its arguments, or None to run the engine alone."""
        row = self._row(domain, name)
        with self._lock:
            row.calls += 1
            number = row.calls
            skip = self._skip_reason(domain, name, row)
        if not skip:
            self._resolve(domain)  # an engine that cannot be found is an error of its own
            started = perf_counter_ns()
            try:
                with self._other_side(domain, guarded=False):
                    theirs = domain.comparisons.copy_arguments(args, kwargs)
            except SharedSource as shared:
                skip = (
                    f"an argument is an iterator that may share its source with a copy "
                    f"({shared.kind}): the other side would read the program's items, so the "
                    "call ran on the engine only and was not compared; the library can "
                    "register a copy for the type with domain.register_comparison(type, copy=...)"
                )
            except Exception as error:
                skip = (
                    f"arguments could not be copied for the other side "
                    f"({type(error).__name__}: {error}): register a copy for their type "
                    "with domain.register_comparison(type, copy=...)"
                )
            else:
                self._spend(perf_counter_ns() - started)
                return _Prepared(row, number, (args, kwargs), theirs, summarize(args, kwargs))
        with self._lock:
            row.not_compared += 1
        self._note(row, skip)
        return None

    @contextmanager
    def _other_side(
        self, domain: AccelerationDomain, *, guarded: bool
    ) -> Iterator[tuple[Mapping[str, Any], _Guard]]:
        """A block of the other implementation, no watcher seeing it; gives its members.

        ``guarded``: the calls made in it of a candidate with side effects, in any
        domain, stop the run instead (see :class:`_Guard`); the engine's run made
        them, or the program did not ask for them.
        """
        found, _, other_cls = self._resolve(domain)
        guard = _Guard()
        quiet = observing.quiet.set(guard if guarded else True)
        scope = found.scopes.enter(other_cls)
        try:
            yield found.engines.members_of(other_cls), guard
        finally:
            found.scopes.exit(scope)
            observing.quiet.reset(quiet)

    def _judge(
        self,
        domain: AccelerationDomain,
        name: str,
        prepared: _Prepared,
        engine_ns: int,
        other: _Outcome,
        *,
        result: Any = None,
        error: BaseException | None = None,
    ) -> None:
        """Compare the two outcomes of a call, record them, and warn or raise as told."""
        if other.stopped_at is not None:
            self._spend(other.nanoseconds)
            with self._lock:
                prepared.row.not_compared += 1
            self._note(
                prepared.row,
                f"the other side reached {other.stopped_at}, marked with side effects: it "
                "was stopped there, so that the candidate does not run twice, and the call "
                "was not compared",
            )
            return
        started = perf_counter_ns()
        quiet = observing.quiet.set(True)
        try:
            difference, one_sided, opaque = self._difference(
                domain, name, result, error, other.result, other.error
            )
            if difference is None and error is None:
                difference = self._arguments_difference(domain, prepared)
        finally:
            observing.quiet.reset(quiet)
        self._spend(perf_counter_ns() - started + other.nanoseconds)
        row, mismatch = prepared.row, None
        with self._lock:
            # A result that compares by identity only, in whole or in part, with no
            # difference found elsewhere: both sides ran, nothing was compared.
            if difference is None and opaque:
                row.not_comparable += 1
            else:
                row.compared += 1
            row.engine_time += engine_ns / 1e9
            row.other_time += other.nanoseconds / 1e9
            if difference is not None:
                row.mismatches += 1
                row.one_sided += one_sided
                mismatch = Mismatch(
                    domain.name,
                    name,
                    prepared.number,
                    prepared.arguments,
                    difference,
                    "exception" if one_sided else "result",
                )
                if len(row.examples) < self.examples:
                    row.examples.append(mismatch)
                else:
                    mismatch = None if self.on_mismatch == "warn" else mismatch
        if difference is not None:
            self._tell(mismatch, row, error)

    def _difference(
        self,
        domain: AccelerationDomain,
        name: str,
        result: Any,
        error: BaseException | None,
        other: Any,
        other_error: BaseException | None,
    ) -> tuple[str | None, bool, bool]:
        """How the two outcomes differ (None where they agree), whether by an exception,
        and whether the results held values that compare by identity only (not compared)."""
        against = self._against_name
        if error is not None or other_error is not None:
            if error is not None and other_error is not None:
                if type(error) is type(other_error):
                    return None, False, False
                return (
                    f"the engine raised {_exception(error)}, {against} raised "
                    f"{_exception(other_error)}",
                    True,
                    False,
                )
            if error is not None:
                return f"only the engine raised: {_exception(error)}", True, False
            assert other_error is not None
            return f"only {against} raised: {_exception(other_error)}", True, False
        skipped: list[str] = []
        try:
            found = domain.comparisons.difference(
                name, result, other, rtol=self.rtol, atol=self.atol, skipped=skipped
            )
            if skipped:
                self._note(
                    self._row(domain, name),
                    f"results of type {skipped[0]!r} compare by identity only and were not "
                    "compared (counted as not comparable): the library, or the engine's "
                    "author, can register a comparison for the type",
                )
        except CoheriqTypeError:
            raise
        except Exception as failure:
            found = f"comparing the results raised {_exception(failure)}"
        return found, False, bool(skipped)

    def _arguments_difference(self, domain: AccelerationDomain, prepared: _Prepared) -> str | None:
        """How the two sides' arguments differ after the call (None where they agree).

        In place: the program's arguments, as the engine left them, against the
        other side's copies, as it left them. A comparison that raises is a
        difference, as for results: the program still gets the engine's result.
        """
        try:
            return domain.comparisons.arguments_difference(
                prepared.mine, prepared.theirs, rtol=self.rtol, atol=self.atol
            )
        except CoheriqTypeError:
            raise  # a library's compare that answered something else: see _verdict
        except Exception as failure:
            return f"comparing the arguments after the call raised {_exception(failure)}"

    def _note(self, row: VerificationRow, note: str) -> None:
        """Keep ``note`` in ``row``, once per kind (what it says before its first colon)."""
        kind = note.split(":")[0]
        with self._lock:
            if all(kept.split(":")[0] != kind for kept in row.notes):
                row.notes.append(note)

    def _tell(self, mismatch: Mismatch | None, row: VerificationRow, error: Any) -> None:
        """Warn of, or raise for, a mismatch, as ``on_mismatch`` says."""
        if self.on_mismatch == "record":
            return
        if self.on_mismatch == "raise":
            shown = mismatch or row.examples[-1]
            raise CoheriqVerificationError(
                f"Verification of engine {row.engine!r} against {row.against!r} failed: "
                f"{shown}. The program would have got the engine's result; turn "
                "on_mismatch='raise' off to go on and record every mismatch."
            ) from error
        if mismatch is None:
            return  # warned of the first few already; the report has the count
        import warnings

        more = (
            f" Further mismatches of {row.domain}.{row.candidate} are counted, not shown."
            if len(row.examples) == self.examples
            else ""
        )
        message = f"Engine {row.engine!r} and {row.against!r} disagree: {mismatch}.{more}"
        warnings.warn(message, CoheriqVerificationWarning, stacklevel=outside_coheriq()[1])

    def _spend(self, nanoseconds: int) -> None:
        if self.budget is not None:
            with self._lock:
                self._spent_ns += nanoseconds


def verify(
    domain: AccelerationDomain | str,
    engine: EngineLike,
    against: EngineLike = REFERENCE,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    every: int = 1,
    budget: float | None = None,
    on_mismatch: OnMismatch = "warn",
    examples: int = 3,
) -> Verification:
    """Run calls on ``engine`` and on ``against`` side by side, and compare their results.

    >>> doc = coheriq.AccelerationDomain("doc_verify")
    >>> @doc.acceleration_candidate
    ... def mean(xs):
    ...     return sum(xs) / len(xs)
    >>> _ = doc.materialize()
    >>> class Sloppy(coheriq.engine_class("doc_verify"), name="sloppy"):
    ...     def mean(self, xs):
    ...         return sum(xs) // len(xs)
    >>> with coheriq.verify("doc_verify", "sloppy", on_mismatch="record") as check:
    ...     _ = mean([1, 2]), mean([2, 4])
    >>> check.ok
    False
    >>> for mismatch in check.mismatches:
    ...     print(mismatch.arguments, mismatch.difference)
    ([1, 2]) result: 1 against 1.5 (relative difference 0.333, tolerance 1e-09)

    Inside the block (or each call of a function it decorates) the domain's
    calls run on ``engine``, as in ``using_engine(domain, engine)``; the program
    gets the engine's results. Each call of a function candidate made there on
    ``engine``, where ``engine`` implements it otherwise than ``against`` does
    (a candidate neither overrides runs once, and has no row), also runs
    ``against``'s implementation, on its own copy of the arguments (taken
    before the engine runs, so that neither side sees what the other
    changes), inside a ``using_engine`` block of ``against``, and the
    results are compared as the library says (see
    :meth:`~coheriq.AccelerationDomain.register_comparison`): by default numbers
    within ``rtol``, containers item by item, anything else with ``==``. An
    exception raised by one side only, or different exceptions, is a mismatch;
    the program gets the engine's exception as it would without verification.
    Calls inside a verified call, candidates marked with ``side_effects=True``
    (and a call whose run on the other side reaches one: that run stops there),
    a call given an iterator whose copy may read from the program's own source
    (``iter(function, sentinel)``, a generator; it runs on the engine only,
    unless the library registers a ``copy`` for its type), and constructing the
    library's classes are not compared. What agrees: a
    list and a tuple of the same items, ``1`` and ``1.0``, ``True`` and ``1``;
    an infinity agrees only with itself, and ``None`` only with ``None``.
    Results that compare by identity only (an iterator, a function) are
    counted as :attr:`~VerificationRow.not_comparable`, apart from the
    compared ones; :func:`coheriq.register_comparison` says how to compare
    them. Comparing never builds what the call did not (a ``range`` is
    compared by its bounds, an iterator is not read).

    Like :class:`~coheriq.using_engine`, the block covers its own thread or task
    and the tasks created inside it; :func:`coheriq.snapshot` carries it into
    other threads. ``<PREFIX>_VERIFY=ENGINE`` or ``ENGINE:AGAINST`` turns a
    verification on for the whole process, prints its report at exit, and
    makes the exit status 1 where the two disagreed.

    Args:
        domain: The domain or its name.
        engine: The engine whose results the program gets (a name, an
            :class:`~coheriq.AccelerationEngine` or an engine class).
        against: What to compare it with: :data:`~coheriq.REFERENCE` (the
            default) or another engine.
        rtol: The relative tolerance for numbers, where the library's rules set
            none (default 1e-9).
        atol: The absolute tolerance for numbers, where the library's rules set
            none (default 0).
        every: Compare every ``every``-th call of each candidate (the first
            always); the others run on the engine alone.
        budget: Seconds that running the other side and comparing may take in
            all; once spent, calls run on the engine alone.
        on_mismatch: ``"warn"`` (a :class:`CoheriqVerificationWarning` for the
            first few of each candidate), ``"record"`` (silently), or
            ``"raise"`` (the call raises :class:`CoheriqVerificationError`).
        examples: How many mismatches of each candidate to keep.

    Returns:
        The :class:`Verification`, to enter or to decorate with; after the
        block it holds the report.

    Raises:
        CoheriqTypeError: An option is out of range, or both sides are one engine.
        CoheriqEngineNotFoundError: On entry, either engine does not exist.
    """
    return Verification(
        domain,
        engine,
        against,
        rtol=rtol,
        atol=atol,
        every=every,
        budget=budget,
        on_mismatch=on_mismatch,
        examples=examples,
    )


def register_comparison(
    domain: AccelerationDomain | str,
    target: type | Callable[..., Any] | str,
    *,
    convert: Callable[[Any], Any] | None = None,
    compare: Callable[[Any, Any], bool | str] | None = None,
    copy: Callable[[Any], Any] | None = None,
    rtol: float | None = None,
    atol: float | None = None,
) -> None:
    """Say how a verification compares ``domain``'s values: for an engine's author.

    The same rule, with the same options, as
    :meth:`AccelerationDomain.register_comparison <coheriq.AccelerationDomain.register_comparison>`,
    for whoever does not hold the domain object: the author of an engine for a
    library accelerated from the outside (which registers nothing itself)
    calls it from the engine's module, which runs before the engine's first
    call, verified or not::

        coheriq.register_comparison("toolz", toolz.functoolz.Compose,
                                    convert=lambda c: (c.first, c.funcs))

    Args:
        domain: The domain, or its name (the library's import name for a
            library accelerated from the outside).
        target: A type (the rule covers every value of it, in results and
            arguments), or a candidate (its proxy or its name: the rule covers
            its results).
        convert, compare, copy, rtol, atol: As for
            :meth:`~coheriq.AccelerationDomain.register_comparison`.

    Raises:
        CoheriqDomainNotFoundError: No domain of that name exists (yet): its
            library is not imported, or not accelerated.
        CoheriqTypeError: As for
            :meth:`~coheriq.AccelerationDomain.register_comparison`.
    """
    lookup_domain(domain).register_comparison(
        target, convert=convert, compare=compare, copy=copy, rtol=rtol, atol=atol
    )


def carried() -> tuple[Verification, ...]:
    """The verifications that cover this context, outermost first (for snapshots)."""
    return _active.get()


def active_verification(domain: Any) -> Verification | None:
    """The verification of ``domain`` that covers calls in this context, if any."""
    for verification in reversed(_active.get()):
        if verification._name == domain.name:
            return verification
    return _environment.get(domain.name)


class _Prepared:
    """A call to compare: its row and number, both sides' arguments, and their summary."""

    __slots__ = ("arguments", "mine", "number", "row", "theirs")

    def __init__(
        self,
        row: VerificationRow,
        number: int,
        mine: tuple[Any, Any],
        theirs: tuple[Any, Any],
        arguments: str,
    ) -> None:
        self.row, self.number, self.mine, self.theirs = row, number, mine, theirs
        self.arguments = arguments  # as the call was made, before either side ran


class _EngineRun:
    """How long the engine's run of a verified call took (set when it ends)."""

    __slots__ = ("nanoseconds",)

    def __init__(self) -> None:
        self.nanoseconds = 0


class _Outcome:
    """What the other side's implementation returned or raised, and how long it took.

    ``stopped_at``: the candidate with side effects (``domain.name``) at which
    its run was stopped, or None.
    """

    __slots__ = ("error", "nanoseconds", "result", "stopped_at")

    def __init__(
        self, result: Any, error: BaseException | None, nanoseconds: int, guard: _Guard
    ) -> None:
        self.result, self.error, self.nanoseconds = result, error, nanoseconds
        self.stopped_at = guard.reached


def _outcome(member: Callable[..., Any], theirs: tuple[Any, Any], guard: _Guard) -> _Outcome:
    """What ``member`` returns or raises on the other side's arguments, and how long it took."""
    started = perf_counter_ns()
    try:
        result = member(*theirs[0], **theirs[1])
    except _Stop:
        result = None
    except Exception as error:
        return _Outcome(None, error, perf_counter_ns() - started, guard)
    return _Outcome(result, None, perf_counter_ns() - started, guard)


async def _outcome_async(
    member: Callable[..., Any], theirs: tuple[Any, Any], guard: _Guard
) -> _Outcome:
    """:func:`_outcome` for an ``async def`` candidate: the coroutine is awaited."""
    started = perf_counter_ns()
    try:
        result = await member(*theirs[0], **theirs[1])
    except _Stop:
        result = None
    except Exception as error:
        return _Outcome(None, error, perf_counter_ns() - started, guard)
    return _Outcome(result, None, perf_counter_ns() - started, guard)


class _Stop(BaseException):
    """Stops the other side's run where it calls a candidate with side effects.

    A BaseException, so that the library's ``except Exception`` does not take it
    for an error of its own; where code catches it all the same, the guard has
    recorded the call, and the outcome is not compared anyway.
    """


class _Guard:
    """What the other side's calls find (set as :data:`observing.quiet` while it runs).

    Each call finds what it would without watchers, except a function candidate
    marked with side effects (in any domain): calling that stops the run, so that
    the candidate does not run a second time, after the engine's run.
    """

    __slots__ = ("reached",)

    def __init__(self) -> None:
        self.reached: str | None = None  # "domain.candidate" where the run was stopped

    def __call__(self, domain: AccelerationDomain, found: Any) -> Any:
        if not domain.comparisons.side_effects:
            return found
        return _Guarded(domain, found, self)


class _Guarded(observing.View):
    """What a call on the other side finds in a domain with candidates with side effects."""

    __slots__ = ("guard",)

    def __init__(self, domain: AccelerationDomain, found: Any, guard: _Guard):
        super().__init__(domain, found)
        self.guard = guard

    def __getitem__(self, name: str) -> Any:
        domain = self.domain
        info = domain.state.candidates.get(name)
        if name not in domain.comparisons.side_effects or info is None or info.is_class:
            return self.member(name)
        guard = self.guard

        def stop(*args: Any, **kwargs: Any) -> Any:
            guard.reached = f"{domain.name}.{name}"
            raise _Stop

        return stop


class _Checked(observing.View):
    """What a call finds while a verification covers its context."""

    __slots__ = ("verification",)

    def __init__(self, domain: AccelerationDomain, found: Any, verification: Verification):
        super().__init__(domain, found)
        self.verification = verification

    def __getitem__(self, name: str) -> Callable[..., Any]:
        domain, found = self.domain, self.found
        member: Callable[..., Any] = self.member(name)
        verification = self.verification
        info = domain.state.candidates.get(name)
        engine = _running_engine(domain, found)
        if (
            info is None
            or info.is_class
            or engine != verification._engine_name
            or not verification._two_implementations(domain, name)
        ):
            return member
        # The chain that says whether this call was declined (a profile's timer, a
        # watcher's wrapper, may stand between).
        chain = declines.chain_of(self.unwatched(name))

        if code_flags(info.reference) & CO_COROUTINE:

            async def verified_coroutine(*args: Any, **kwargs: Any) -> Any:
                return await verification.call_async(domain, name, member, args, kwargs, chain)

            return verified_coroutine

        def verified(*args: Any, **kwargs: Any) -> Any:
            return verification.call(domain, name, member, args, kwargs, chain)

        return verified


class _Nested(observing.View):
    """What a call made inside a verified call of its domain finds: part of that call.

    Not verified on its own; a decline of it is not the verified call's (a
    recursive candidate's inner calls run the very chain the verified call runs).
    """

    __slots__ = ()

    def __getitem__(self, name: str) -> Callable[..., Any]:
        member: Callable[..., Any] = self.member(name)

        def nested(*args: Any, **kwargs: Any) -> Any:
            token = declines.answered.set(None)
            try:
                return member(*args, **kwargs)
            finally:
                declines.answered.reset(token)

        return nested


def _running_engine(domain: AccelerationDomain, found: Any) -> str | None:
    """The engine whose member a call takes from ``found`` (see :mod:`coheriq._choice.records`).

    Not the engine of the block around: a copy of a reloaded library that cannot
    run that block's engine runs its own choice instead.
    """
    scope = found
    while scope is not None and not hasattr(scope, "live"):  # a watcher's view, Unsettled
        scope = getattr(scope, "found", None)
    if scope is not None:
        return scope.engine if scope.live else domain.scopes.active_engine()
    settled = domain.choice.settled
    return None if settled is None else settled.engine


def _verifying(domain: AccelerationDomain) -> Callable[[Any], Any]:
    """What ``domain``'s calls find, verified where a verification covers the context."""

    def wrap(found: Any) -> Any:
        if domain.name in _inside.get():
            return _Nested(domain, found)
        verification = active_verification(domain)
        return found if verification is None else _Checked(domain, found, verification)

    return wrap


def _check_options(
    rtol: object, atol: object, every: object, budget: object, on_mismatch: object, examples: object
) -> None:
    def number(value: object) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0

    problems = []
    if rtol is not None and not number(rtol):
        problems.append(f"rtol is a number of at least 0, not {rtol!r}")
    if atol is not None and not number(atol):
        problems.append(f"atol is a number of at least 0, not {atol!r}")
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        problems.append(f"every is a whole number of at least 1, not {every!r}")
    if budget is not None and not number(budget):
        problems.append(f"budget is a number of seconds, at least 0, not {budget!r}")
    if on_mismatch not in ("warn", "record", "raise"):
        problems.append(f"on_mismatch is 'warn', 'record' or 'raise', not {on_mismatch!r}")
    if isinstance(examples, bool) or not isinstance(examples, int) or examples < 0:
        problems.append(f"examples is a whole number of at least 0, not {examples!r}")
    if problems:
        raise CoheriqTypeError("coheriq.verify: " + "; ".join(problems) + ".")


def _exception(error: BaseException) -> str:
    text = str(error)
    text = text if len(text) <= 120 else text[:117] + "..."
    return f"{type(error).__name__}({text!r})"


# -- <PREFIX>_VERIFY ------------------------------------------------------------------


def from_environment(domain: AccelerationDomain) -> None:
    """Turn on the verification ``<PREFIX>_VERIFY`` names, for the whole process.

    Called by ``import coheriq``'s hook (:data:`observing.on_materialized`) once
    ``domain``, whose own variable is set, is materialized: this module is
    imported then, and only then.
    """
    variable = f"{domain.env_prefix}_VERIFY"
    value = os.environ.get(variable, "").strip()
    if domain.name in _environment or not value:
        return
    parts = [part.strip() for part in value.split(":")]
    engine, against = parts[0], (parts[1] if len(parts) > 1 else "") or REFERENCE
    problem = None
    if not engine:
        problem = "names no engine to verify"
    elif len(parts) > 2 or "," in value:
        problem = "names more than two implementations"
    elif engine == against:
        problem = f"compares {engine!r} with itself"
    if problem:
        raise CoheriqTypeError(
            f"The environment variable {variable}={value!r} {problem}: set it to an engine "
            f"of domain {domain.name!r} (ENGINE, or ENGINE:OTHER to compare it with another "
            "engine than the reference)."
        )
    verification = Verification(domain, engine, against)
    _environment[domain.name] = verification
    _reported.append((verification, variable))
    observing.start(_ORDER, _verifying)
    if len(_reported) == 1:
        _at_exit()


# -- at exit: the reports, and the exit status --------------------------------------------

# The verifications <PREFIX>_VERIFY turned on, and their variables, in that order.
_reported: list[tuple[Verification, str]] = []
_FAILED = 1  # the exit status where one found a difference, as `coheriq verify`'s
_ending: list[bool] = []  # [True] once _finish runs the exit handlers before it ends


def _at_exit() -> None:
    """Have the reports printed at exit, and a difference end the process with status 1.

    :func:`_report` prints them in its turn among the exit handlers (after those
    registered after the library's materialization, which may still call it).
    :func:`_finish` is registered with :mod:`atexit` when the interpreter starts
    to shut down (threading's hook for that runs before the exit handlers), so
    that it runs first: where a verification found a difference, it runs the
    others (the report among them) before it ends the process.
    """
    import atexit
    import threading

    atexit.register(_report)
    hook = getattr(threading, "_register_atexit", None)  # CPython 3.9 and later
    if hook is not None:
        try:
            hook(atexit.register, _finish)
        except RuntimeError:  # shutting down already: _report ends it, in its turn
            pass


def _finish() -> None:
    """The first exit handler: where a verification found a difference, end the process.

    The other exit handlers run first, once each and in their order (the report
    among them); then the open files are flushed, and :func:`os._exit` ends the
    process with status 1, skipping the rest of the interpreter's end (objects'
    ``__del__``). Where there is no difference, it leaves the exit as it is.
    (It may not run the others and return: from Python 3.14 on, they would then
    run a second time.)
    """
    if not _failed():
        return
    import atexit

    _ending.append(True)
    atexit.unregister(_finish)
    atexit._run_exitfuncs()
    _end()


def _report() -> None:
    """Print each report; a difference found only now, in an exit handler, ends the process."""
    for verification, variable in _reported:
        # A worker process that made no call has nothing to say; the main one says so.
        if verification.rows or _in_main_process():
            print(f"{variable} (process {os.getpid()}): {verification}", file=sys.stderr)
    if not _ending and _failed():
        # After _finish looked (a later exit handler's call), or without it: the exit
        # handlers registered before the library's materialization do not run.
        _end()


def _failed() -> bool:
    """Whether a verification found a difference that should fail this process.

    Not where the program ended with an uncaught exception (its status is not 0
    then: it keeps it), nor in a worker process (multiprocessing: it keeps its
    own; its report says what it found).
    """
    return (
        any(not verification.ok for verification, _ in _reported)
        and _in_main_process()
        and not _program_failed()
    )


def _end() -> None:
    """End the process with status 1, its open files flushed."""
    _flush_files()
    os._exit(_FAILED)


def _program_failed() -> bool:
    """Whether the program ended with an uncaught exception (its status is not 0 then)."""
    return (
        getattr(sys, "last_exc", None) is not None or getattr(sys, "last_value", None) is not None
    )


def _flush_files() -> None:
    """Flush every open file, as the interpreter's end would (:func:`os._exit` does not)."""
    import gc
    import io

    for obj in gc.get_objects():
        try:
            if isinstance(obj, io.IOBase) and not obj.closed:
                obj.flush()
        except Exception:  # a file that cannot be flushed is left as it is
            continue
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            continue


def _in_main_process() -> bool:
    multiprocessing = sys.modules.get("multiprocessing")  # not imported: no workers
    return multiprocessing is None or multiprocessing.parent_process() is None


def _describe(domain: AccelerationDomain) -> str | None:
    """For explain: what verification does to ``domain``'s calls in this context."""
    verification = active_verification(domain)
    if verification is None:
        return None
    how = (
        f"the environment variable {domain.env_prefix}_VERIFY"
        if verification is _environment.get(domain.name)
        else "coheriq.verify"
    )
    return (
        f"on: calls on {verification._engine_name!r} are also run on "
        f"{verification._against_name!r} and compared ({how})"
    )


observing.describers["verification"] = _describe
