"""Running an engine and another implementation side by side: :func:`verify`.

A verification is a watcher (:mod:`coheriq._library.observing`) carried like a block: a call
of a function candidate on the verified engine, where the other side runs other code, also
runs the other side on a copy of the arguments, and the outcomes are compared by the library's
rules. ``<PREFIX>_VERIFY`` turns one on for the whole process (:func:`from_environment`).
"""

from __future__ import annotations

import _thread
import os
import sys
import weakref
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from time import perf_counter_ns

from .._api.verbs import resolve_engine, using_engine
from .._call.proxy import code_flags_behind
from .._engines import conversions, declines
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
    after_fork_in_child,
    calls_inside,
    code_flags,
    leave_chain,
    outside_coheriq,
    signature,
)
from ..exceptions import CoheriqTypeError
from . import send_back_with, take_entry
from .verdicts import (
    CoheriqVerificationError,
    CoheriqVerificationWarning,
    Mismatch,
    VerificationRow,
    table,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping
    from contextlib import AbstractContextManager
    from typing import Any, Concatenate, Literal, ParamSpec, TypeVar

    from .._api.verbs import EngineLike
    from .._engines.meta import EngineMeta

    F = TypeVar("F", bound=Callable[..., Any])
    P = ParamSpec("P")
    R = TypeVar("R")
    OnMismatch = Literal["warn", "record", "raise"]

# The verifications that cover this context, outermost first (snapshots carry them).
covering: ContextVar[tuple[Verification, ...]] = ContextVar("coheriq verifications", default=())
# The domains whose verified call runs its engine's side in this context: its calls are part of it.
_inside: ContextVar[frozenset[str]] = ContextVar("coheriq verified calls", default=frozenset())
_ORDER = 1  # outside the profiler: comparing is not the engine's time
# Domain name -> the verification its <PREFIX>_VERIFY turned on, and that variable.
_environment: dict[str, tuple[Verification, str]] = {}
_GENERATORS = CO_GENERATOR | CO_ASYNC_GENERATOR
# Token -> the verification a snapshot pickled to another process names by it (see carried).
_by_token: weakref.WeakValueDictionary[str, Verification] = weakref.WeakValueDictionary()
_SHIPPED = "_coheriq_verification"  # the attribute of a task's exception that carries its rows


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
        self.domain, self.engine, self.against = domain, engine, against
        self.rtol, self.atol, self.every, self.budget = rtol, atol, every, budget
        self.on_mismatch, self.examples = on_mismatch, examples
        _check_options(self)
        if not isinstance(domain, (AccelerationDomain, str)):
            lookup_domain(domain)  # raises the error that explains what a domain is
        self._name = domain if isinstance(domain, str) else domain.name
        self._engine_name = engine if isinstance(engine, str) else None
        self._against_name = against if isinstance(against, str) else None
        self._rows: dict[str, VerificationRow] = {}
        self._lock = _thread.RLock()
        self._spent_ns = 0  # running the other side and comparing, for the budget
        # The copy of the domain last called through, the engine's class and the other side's.
        self._other: tuple[AccelerationDomain, EngineMeta, EngineMeta] | None = None
        self._blocks: list[using_engine] = []  # the using_engine blocks entered, innermost last
        self._token: str | None = None  # names it to other processes (see spec)

    def __repr__(self) -> str:
        engine, against = self._engine_name or self.engine, self._against_name or self.against
        return f"<Verification of {self._name!r}: {engine!r} against {against!r}>"

    def __enter__(self) -> Verification:
        found = lookup_domain(self.domain)
        self._resolve(found)
        block = using_engine(found, self.engine)
        block.__enter__()
        with self._lock:
            self._blocks.append(block)
        self.carry_in()
        return self

    def __exit__(self, *exc: Any) -> None:
        with self._lock:
            block = take_entry(self._blocks, lambda b: b._open_here() is not None, self)
        self.carry_out()
        block.__exit__(*exc)

    def carry_in(self) -> None:
        """Cover this context too (a :class:`~coheriq.Snapshot` entered elsewhere)."""
        covering.set((*covering.get(), self))
        observing.start(_ORDER, _verifying)

    def carry_out(self) -> None:
        """Stop covering this context: the end of :meth:`carry_in`."""
        leave_chain(covering, self)
        observing.stop(_ORDER)

    def spec(self) -> dict[str, Any]:
        """What a snapshot pickled to another process carries of this verification: its
        settings, by name, and the token its rows come back to (see :func:`carried`)."""
        with self._lock:
            token = self._token
            if token is None:
                token = self._token = os.urandom(16).hex()  # unique across processes
                _by_token[token] = self
        return {
            "token": token,
            "domain": self._name,
            "engine": self._engine_name or _named(self.engine),
            "against": self._against_name or _named(self.against),
            **{k: getattr(self, k) for k in ("rtol", "atol", "every", "budget", "examples")},
        }

    def absorb(self, rows: list[dict[str, Any]]) -> None:
        """Add the rows a task of another process recorded (:meth:`VerificationRow.as_dict`)
        to this verification's: counts and times summed, examples and notes kept."""
        with self._lock:
            for data in rows:
                name = data["candidate"]
                row = self._rows.get(name)
                if row is None:
                    row = VerificationRow(data["domain"], name, data["engine"], data["against"])
                    self._rows[name] = row
                for count in ("calls", "compared", "mismatches", "one_sided", "not_compared"):
                    setattr(row, count, getattr(row, count) + data[count])
                row.not_comparable += data["not_comparable"]
                row.engine_time += data["engine_time"]
                row.other_time += data["other_time"]
                for example in data["examples"]:
                    if len(row.examples) < self.examples:
                        row.examples.append(Mismatch(**example))
                row.notes += [note for note in data["notes"] if note not in row.notes]
                for who, count in data["answered"].items():
                    row.answered[who] = row.answered.get(who, 0) + count

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
        """Both sides' classes in ``found`` (a copy of the domain), the other side started."""
        other = self._other
        if other is not None and other[0] is found:
            return other
        engine_cls, other_cls = (resolve_engine(found, e) for e in (self.engine, self.against))
        self._engine_name = engine_cls.__coheriq_name__ or REFERENCE
        self._against_name = other_cls.__coheriq_name__ or REFERENCE
        if engine_cls is other_cls:
            raise CoheriqTypeError(
                f"A verification of domain {found.name!r} compares an engine with another "
                f"implementation, but both are {self._engine_name!r}; name another with "
                "against= (the reference, by default)."
            )
        found.engines.members_of(other_cls)  # starts it now, not in the first call
        self._other = (found, engine_cls, other_cls)
        return self._other

    def __call__(self, fn: F) -> F:
        """Decorate ``fn`` so that each of its calls runs inside this verification."""
        flags = code_flags_behind(fn)
        if flags & _GENERATORS:
            raise CoheriqTypeError(
                f"{self!r} cannot decorate generator function {fn.__qualname__!r}: its "
                "body runs after the call returns. Open the verification with a `with` "
                "block inside the generator instead."
            )
        verified: F = calls_inside(fn, lambda: self, coroutine=bool(flags & CO_COROUTINE))
        return verified

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

    def call(
        self,
        domain: AccelerationDomain,
        name: str,
        member: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        chain: declines.Chain | None = None,
        awaited: bool = False,
    ) -> Any:
        """Run ``member`` (the engine's) for the program and, unless the call is skipped, the
        other side on a copy of the arguments, to compare. ``chain``: the declines chain that
        ``member`` runs, if any; ``awaited``: return an awaitable of both sides in turn."""
        with self._lock:
            if (row := self._rows.get(name)) is None:
                engine, against = self._engine_name or "?", self._against_name or "?"
                row = self._rows[name] = VerificationRow(domain.name, name, engine, against)
            row.calls += 1
            number = row.calls
            if name in domain.comparisons.side_effects:
                skip = "marked with side effects: run on the engine only"
            elif code_flags(domain.state.candidates[name].reference) & _GENERATORS:
                skip = "a generator function: what it yields is not compared"
            elif (number - 1) % self.every:
                skip = f"sampled: every {self.every}th call is compared"
            elif self.budget is not None and self._spent_ns >= self.budget * 1e9:
                skip = f"the time budget of {self.budget} s was spent"
            else:
                skip = ""
        if not skip:
            self._resolve(domain)  # an engine that cannot be found is an error of its own
            started = perf_counter_ns()
            try:
                with self._other_side(domain, guarded=False):
                    theirs = domain.comparisons.copy_arguments(args, kwargs)
                theirs = self.in_library_form(domain, name, theirs, depth=3)
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
                with self._lock:
                    self._spent_ns += perf_counter_ns() - started
                call = _Call(self, domain, chain, row, number, (args, kwargs), theirs)
                if awaited:
                    return call.awaiting(member)
                with call:
                    call.result = member(*args, **kwargs)
                return call.result
        self._note(row, skip, compared=False)
        return member(*args, **kwargs)

    @contextmanager
    def _other_side(
        self, domain: AccelerationDomain, *, guarded: bool
    ) -> Iterator[tuple[Mapping[str, Any], _Run]]:
        """A block of the other implementation that no watcher sees; gives its members.
        ``guarded``: calling a candidate with side effects in it stops the run (:class:`_Run`)."""
        found, _, other_cls = self._resolve(domain)
        run = _Run()
        quiet = observing.quiet.set(run if guarded else True)
        scope = found.scopes.enter(other_cls)
        try:
            yield found.engines.members_of(other_cls), run
        finally:
            found.scopes.exit(scope)
            observing.quiet.reset(quiet)

    def copying(self, domain: AccelerationDomain) -> AbstractContextManager[Any]:
        """A block in which copies are made as the other side makes its own: a library's copy
        rule that calls its candidates runs the other implementation, and no watcher sees it."""
        return self._other_side(domain, guarded=False)

    def other_outcome(self, domain: AccelerationDomain, name: str, theirs: tuple[Any, Any]) -> _Run:
        """The other side's run of function candidate ``name`` on ``theirs`` (its arguments,
        in the library's form), ended; it stops at a candidate with side effects."""
        with self._other_side(domain, guarded=True) as (members, run):
            started = perf_counter_ns()
            try:
                run.result = members[name](*theirs[0], **theirs[1])
            except _Stop:
                pass
            except Exception as error:
                run.error = error
            run.nanoseconds = perf_counter_ns() - started
        return run

    def in_library_form(
        self, domain: AccelerationDomain, name: str, value: Any, depth: int = 1
    ) -> Any:
        """``value`` with the verified engine's objects converted to the library's form,
        as the other side reads them and as they are compared (its declared conversions)."""
        table = conversions.table_of(self._resolve(domain)[1])
        if table is None:
            return value
        return conversions.library_form(value, table, domain.state, name, depth)

    def _judge(self, call: _Call, other: _Run, error: BaseException | None) -> None:
        """Compare the two outcomes of ``call`` (``error``: what the engine raised), record
        them, and warn or raise as told."""
        row = call.row
        if other.reached is not None:
            with self._lock:
                self._spent_ns += other.nanoseconds
            self._note(
                row,
                f"the other side reached {other.reached}, marked with side effects: it "
                "was stopped there, so that the candidate does not run twice, and the call "
                "was not compared",
                compared=False,
            )
            return
        started = perf_counter_ns()
        quiet = observing.quiet.set(True)
        try:
            difference, one_sided, skipped = self.difference(
                call.domain, call.name, (call.result, error, call.mine), other, call.theirs
            )
        finally:
            observing.quiet.reset(quiet)
        if skipped is not None:
            self._note(row, _identity_only(skipped))
        opaque = skipped is not None
        with self._lock:
            self._spent_ns += perf_counter_ns() - started + other.nanoseconds
            # Results that compare by identity only, and nothing else differed: not compared.
            if difference is None and opaque:
                row.not_comparable += 1
            else:
                row.compared += 1
            row.engine_time += call.engine_ns / 1e9
            row.other_time += other.nanoseconds / 1e9
            if difference is None:
                return
            row.mismatches += 1
            row.one_sided += one_sided
            kind = "exception" if one_sided else "result"
            mismatch = Mismatch(
                call.domain.name, call.name, call.number, call.arguments, difference, kind
            )
            shown = len(row.examples) < self.examples
            if shown:
                row.examples.append(mismatch)
        if self.on_mismatch == "raise":
            raise CoheriqVerificationError(
                f"Verification of engine {row.engine!r} against {row.against!r} failed: "
                f"{mismatch}. The program would have got the engine's result; turn "
                "on_mismatch='raise' off to go on and record every mismatch."
            ) from error
        if self.on_mismatch == "warn" and shown:  # the report counts the others
            import warnings

            more = (
                f" Further mismatches of {row.domain}.{row.candidate} are counted, not shown."
                if len(row.examples) == self.examples
                else ""
            )
            message = f"Engine {row.engine!r} and {row.against!r} disagree: {mismatch}.{more}"
            warnings.warn(message, CoheriqVerificationWarning, stacklevel=outside_coheriq()[1])

    def difference(
        self,
        domain: AccelerationDomain,
        name: str,
        mine: tuple[Any, BaseException | None, tuple[Any, Any]],
        other: _Run,
        theirs: tuple[Any, Any],
    ) -> tuple[str | None, bool, str | None]:
        """How two outcomes of a call of candidate ``name`` differ (None where they agree),
        whether one side raised, and the type of results that compare by identity only (so
        were not compared), if so. ``mine``: the engine's result, exception and arguments
        after the call; ``other``: the other side's run, on ``theirs``."""
        result, error, arguments = mine
        against, other_error = self._against_name, other.error
        if error is not None and other_error is not None:
            if type(error) is type(other_error):
                return None, False, None
            raised = f"{_exception(error)}, {against} raised {_exception(other_error)}"
            return f"the engine raised {raised}", True, None
        if error is not None:
            return f"only the engine raised: {_exception(error)}", True, None
        if other_error is not None:
            return f"only {against} raised: {_exception(other_error)}", True, None
        comparisons, rtol, atol = domain.comparisons, self.rtol, self.atol
        skipped: list[str] = []
        try:
            converted = self.in_library_form(domain, name, result)
            found = comparisons.difference(
                name, converted, other.result, rtol=rtol, atol=atol, skipped=skipped
            )
        except CoheriqTypeError:
            raise  # a library's compare that answered neither a bool nor a sentence
        except Exception as failure:
            found = f"comparing the results raised {_exception(failure)}"
        if found is None:
            # The program's arguments as the engine left them, against the other side's copies.
            try:
                arguments = self.in_library_form(domain, name, arguments, depth=3)
                found = comparisons.arguments_difference(arguments, theirs, rtol=rtol, atol=atol)
            except CoheriqTypeError:
                raise
            except Exception as failure:
                found = f"comparing the arguments after the call raised {_exception(failure)}"
        return found, False, skipped[0] if skipped else None

    def _note(self, row: VerificationRow, note: str, *, compared: bool = True) -> None:
        """Keep ``note`` in ``row``, once per kind (what it says before its first colon);
        not ``compared``: the call it explains ran on the engine alone."""
        kind = note.split(":")[0]
        with self._lock:
            row.not_compared += not compared
            if all(kept.split(":")[0] != kind for kept in row.notes):
                row.notes.append(note)


def _parameters_of(source: Callable[P, object]) -> Callable[[Callable[..., R]], Callable[P, R]]:
    """Show the decorated function, which hands its arguments on to ``source``, with its own
    leading parameters, then ``source``'s (less ``self``), and its own return annotation:
    to :func:`inspect.signature`, :func:`help` and type checkers."""

    def shown(fn: Callable[..., R]) -> Callable[P, R]:
        own = signature(fn)
        leading = [p for p in own.parameters.values() if p.kind is p.POSITIONAL_OR_KEYWORD]
        rest = [p for name, p in signature(source).parameters.items() if name != "self"]
        fn.__signature__ = own.replace(parameters=[*leading, *rest])  # type: ignore[attr-defined]
        return fn

    return shown


@_parameters_of(Verification)
def verify(*args: Any, **kwargs: Any) -> Verification:
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
    ``against``'s implementation in a ``using_engine`` block of it, on its own
    copy of the arguments taken before the engine runs (so that neither side
    sees what the other changes). The results are compared as the library says
    (see :meth:`~coheriq.AccelerationDomain.register_comparison`): by default
    numbers within ``rtol``, containers item by item, anything else with
    ``==``. A list and a tuple of the same items agree, as do ``1`` and ``1.0``,
    ``True`` and ``1``; an infinity agrees only with itself, ``None`` only with
    ``None``. An exception raised by one side only, or different exceptions, is
    a mismatch; the program gets the engine's exception as without verification.
    Results that compare by identity only (an iterator, a function) are counted
    as :attr:`~VerificationRow.not_comparable`, apart from the compared ones;
    :func:`coheriq.register_comparison` says how to compare them. Comparing
    never builds what the call did not (a ``range`` is compared by its bounds,
    an iterator is not read). Not compared: calls inside a verified call;
    candidates marked with ``side_effects=True`` (and a call whose run on the
    other side reaches one: that run stops there); a call given an iterator
    whose copy may read from the program's own source (``iter(function,
    sentinel)``, a generator: it runs on the engine only, unless the library
    registers a ``copy`` for its type); constructing the library's classes.

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
    return Verification(*args, **kwargs)


def _domain_first(
    method: Callable[Concatenate[AccelerationDomain, P], R],
) -> Callable[[Callable[..., R]], Callable[Concatenate[AccelerationDomain | str, P], R]]:
    """:func:`_parameters_of` a domain's method, for a function that takes the domain first."""
    return _parameters_of(method)  # type: ignore[arg-type]  # the domain: a name too


@_domain_first(AccelerationDomain.register_comparison)
def register_comparison(domain: AccelerationDomain | str, *args: Any, **kwargs: Any) -> None:
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
    lookup_domain(domain).register_comparison(*args, **kwargs)


def carried(spec: dict[str, Any]) -> Verification:
    """The verification that covers a task in another process for the one ``spec`` names
    (:meth:`Verification.spec`): it records, and its rows go back with the task."""
    settings = {k: v for k, v in spec.items() if k not in ("token", "domain", "engine")}
    made = Verification(spec["domain"], spec["engine"], **settings, on_mismatch="record")
    made._token = spec["token"]
    return made


def resolve_specs(
    specs: tuple[dict[str, Any], ...],
) -> tuple[tuple[Verification, ...], tuple[dict[str, Any], ...]]:
    """The verifications ``specs`` name that live in this process, and the specs of the
    others (of the process a snapshot was taken in)."""
    here = [_by_token.get(spec["token"]) for spec in specs]
    return (
        tuple(v for v in here if v is not None),
        tuple(spec for spec, v in zip(specs, here, strict=True) if v is None),
    )


def call_verified(specs: tuple[dict[str, Any], ...], run: Callable[[], R]) -> R:
    """``run()`` covered by a verification for each of ``specs`` (of another
    process); its result goes back with their rows, merged where it is unpickled (into
    the verifications the specs name). An exception ``run`` raises propagates as it is,
    carrying the rows in an attribute (lost where its class pickles without it)."""
    made = [carried(spec) for spec in specs]
    for verification in made:
        verification.carry_in()
    try:
        result = run()
    except BaseException as error:
        shipment = _shipment(made)
        if shipment:
            send_back_with(error, _SHIPPED, _Shipped(shipment))
        raise
    finally:
        for verification in reversed(made):
            verification.carry_out()
    shipment = _shipment(made)
    return _Verified(result, shipment) if shipment else result  # type: ignore[return-value]


def unwrapped(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """``args`` and ``kwargs`` with the results of verified tasks among them (a dask result
    that stayed on this worker reaches the next task as it was returned) made results."""

    def result(value: Any) -> Any:
        return arrive(value.shipment, value.result) if type(value) is _Verified else value

    return tuple(map(result, args)), {k: result(v) for k, v in kwargs.items()}


def _named(engine: Any) -> Any:
    """An engine by name where it has one (a name pickles into any process)."""
    return engine if isinstance(engine, str) else getattr(engine, "__coheriq_name__", engine)


def _shipment(made: list[Verification]) -> dict[str, list[dict[str, Any]]]:
    rows = {v._token or "": [row.as_dict() for row in v.rows] for v in made}
    return {token: found for token, found in rows.items() if found}


class _Verified:
    """A task's result and the rows its verifications recorded: unpickled, the result
    alone, once the rows have reached their verifications (see :func:`arrive`)."""

    __slots__ = ("result", "shipment")

    def __init__(self, result: Any, shipment: dict[str, list[dict[str, Any]]]) -> None:
        self.result, self.shipment = result, shipment

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return arrive, (self.shipment, self.result)


class _Shipped:
    """What a task's exception carries of its verifications: unpickled, merged, then None."""

    __slots__ = ("shipment",)

    def __init__(self, shipment: dict[str, list[dict[str, Any]]]) -> None:
        self.shipment = shipment

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return arrive, (self.shipment,)


def arrive(shipment: dict[str, list[dict[str, Any]]], result: Any = None) -> Any:
    """Add the rows of ``shipment`` (token -> rows) to the verifications of this process
    they belong to (others are dropped: their verification is not here); return ``result``.
    What a task's result, or its exception's attribute, becomes when it is unpickled."""
    for token, rows in shipment.items():
        verification = _by_token.get(token)
        if verification is not None:
            verification.absorb(rows)
    return result


def active_verification(domain: Any) -> Verification | None:
    """The verification of ``domain`` that covers calls in this context, if any."""
    for verification in reversed(covering.get()):
        if verification._name == domain.name:
            return verification
    return _environment[domain.name][0] if domain.name in _environment else None


class _Call:
    """A call to compare, entered (``async with`` for an ``async def`` candidate) around the
    engine's run, which sets :attr:`result`; leaving runs the other side and judges the two.
    The engine's exception leaves as raised (a StopIteration too, which a coroutine that
    re-raised it would turn into a RuntimeError), and nothing here keeps a reference to it."""

    def __init__(
        self,
        verification: Verification,
        domain: AccelerationDomain,
        chain: declines.Chain | None,
        row: VerificationRow,
        number: int,
        mine: tuple[tuple[Any, ...], dict[str, Any]],
        theirs: tuple[Any, Any],
    ) -> None:
        self.verification, self.domain, self.name = verification, domain, row.candidate
        self.row, self.number, self.mine, self.theirs, self.chain = row, number, mine, theirs, chain
        self.arguments = summarize(*mine)  # before either side ran
        self.result: Any = None  # the engine's
        self.engine_ns = 0  # how long the engine's run took, once it ended

    def __enter__(self) -> None:
        self._inside = _inside.set(_inside.get() | {self.domain.name})
        self._answered = declines.answered.set(None)
        self._started = perf_counter_ns()

    def __exit__(self, kind: Any, error: BaseException | None, traceback: Any) -> None:
        with suppress(StopIteration):
            self._leave(error, awaited=False).send(None)  # nothing in it suspends: it ends

    async def __aenter__(self) -> None:
        self.__enter__()

    async def __aexit__(self, kind: Any, error: BaseException | None, traceback: Any) -> None:
        await self._leave(error, awaited=True)

    async def awaiting(self, member: Callable[..., Any]) -> Any:
        async with self:
            self.result = await member(*self.mine[0], **self.mine[1])
        return self.result

    async def _leave(self, error: BaseException | None, awaited: bool) -> None:
        """The end of the engine's run (``error``: what it raised); then, unless that was
        no :class:`Exception`, the other side's run and the judgement."""
        self.engine_ns = perf_counter_ns() - self._started
        _inside.reset(self._inside)
        answered = declines.answered.get()
        declines.answered.reset(self._answered)
        if answered is not None and answered[0] is self.chain:
            with self.verification._lock:
                self.row.answered[answered[1]] = self.row.answered.get(answered[1], 0) + 1
        if error is None or isinstance(error, Exception):
            self.verification._judge(self, await self._outcome(awaited), error)

    async def _outcome(self, awaited: bool) -> _Run:
        """The other side's run on its copy of the arguments, ended."""
        with self.verification._other_side(self.domain, guarded=True) as (members, run):
            started = perf_counter_ns()
            try:
                result = members[self.name](*self.theirs[0], **self.theirs[1])
                run.result = await result if awaited else result
            except _Stop:
                pass
            except Exception as error:
                run.error = error
            run.nanoseconds = perf_counter_ns() - started
        return run


class _Stop(BaseException):
    """Stops the other side's run at a candidate with side effects: not an Exception, so that
    the library's ``except Exception`` lets it pass (code that catches it is not compared)."""


class _Run:
    """A run of the other side. Called, what its calls find (its :data:`observing.quiet`):
    what they would without watchers, but a function candidate with side effects stops it.
    Then what it returned or raised, how long it took, and where it was stopped."""

    __slots__ = ("error", "nanoseconds", "reached", "result")

    def __init__(self) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.nanoseconds = 0
        self.reached: str | None = None  # "domain.candidate" where the run was stopped

    def __call__(self, domain: AccelerationDomain, found: Any) -> Any:
        return _Guarded(domain, found, self) if domain.comparisons.side_effects else found


class _Guarded(observing.View):
    """What a call on the other side finds in a domain with candidates with side effects."""

    __slots__ = ("run",)

    def __init__(self, domain: AccelerationDomain, found: Any, run: _Run):
        super().__init__(domain, found)
        self.run = run

    def __getitem__(self, name: str) -> Any:
        domain, run = self.domain, self.run
        info = domain.state.candidates.get(name)
        if name not in domain.comparisons.side_effects or info is None or info.is_class:
            return self.member(name)

        def stop(*args: Any, **kwargs: Any) -> Any:
            run.reached = f"{domain.name}.{name}"
            raise _Stop

        return stop


class _Checked(observing.View):
    """What a call finds while a verification covers its context."""

    __slots__ = ("verification",)

    def __init__(self, domain: AccelerationDomain, found: Any, verification: Verification):
        super().__init__(domain, found)
        self.verification = verification

    def __getitem__(self, name: str) -> Callable[..., Any]:
        domain, verification = self.domain, self.verification
        member: Callable[..., Any] = self.member(name)
        info = domain.state.candidates.get(name)
        if (
            info is None
            or info.is_class
            or _running_engine(domain, self.found) != verification._engine_name
        ):
            return member
        # Only where the two sides run different code: one implementation twice compares nothing.
        _, engine_cls, other_cls = verification._resolve(domain)
        if supplier(engine_cls, name) is supplier(other_cls, name):
            return member
        # The chain that says whether this call was declined (a profile's timer may be between).
        chain = declines.chain_of(self.unwatched(name))

        if code_flags(info.reference) & CO_COROUTINE:

            async def verified_coroutine(*args: Any, **kwargs: Any) -> Any:
                return await verification.call(domain, name, member, args, kwargs, chain, True)

            return verified_coroutine

        def verified(*args: Any, **kwargs: Any) -> Any:
            return verification.call(domain, name, member, args, kwargs, chain)

        return verified


class _Nested(observing.View):
    """What a call made inside a verified call of its domain finds: part of that call, but
    its declines are not the verified call's (a recursive candidate's inner calls run its chain)."""

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
    """The engine whose member a call takes from ``found`` (not always the block's: a copy
    of a reloaded library that cannot run that block's engine runs its own choice)."""
    while found is not None and not hasattr(found, "live"):  # a watcher's view, Unsettled
        found = getattr(found, "found", None)
    if found is not None:  # a scope
        return found.engine if found.live else domain.scopes.active_engine()
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


def _check_options(verification: Verification) -> None:
    def at_least(least: int, kinds: Any = int) -> Callable[[Any], bool]:
        return lambda v: isinstance(v, kinds) and not isinstance(v, bool) and v >= least

    def number(value: object) -> bool:
        return value is None or at_least(0, (int, float))(value)

    rules: dict[str, tuple[str, Callable[[Any], bool]]] = {
        "rtol": ("a number of at least 0", number),
        "atol": ("a number of at least 0", number),
        "every": ("a whole number of at least 1", at_least(1)),
        "budget": ("a number of seconds, at least 0", number),
        "on_mismatch": ("'warn', 'record' or 'raise'", ("warn", "record", "raise").__contains__),
        "examples": ("a whole number of at least 0", at_least(0)),
    }
    problems = [
        f"{name} is {what}, not {value!r}"
        for name, (what, valid) in rules.items()
        if not valid(value := getattr(verification, name))
    ]
    if problems:
        raise CoheriqTypeError("coheriq.verify: " + "; ".join(problems) + ".")


def _identity_only(kind: str) -> str:
    """The note on results of type ``kind``, which compare by identity only."""
    return (
        f"results of type {kind!r} compare by identity only and were not compared (counted "
        "as not comparable): the library, or the engine's author, can register a comparison "
        "for the type"
    )


def _exception(error: BaseException) -> str:
    text = str(error)
    text = text if len(text) <= 120 else text[:117] + "..."
    return f"{type(error).__name__}({text!r})"


def from_environment(domain: AccelerationDomain) -> None:
    """Turn on, for the whole process, the verification that ``<PREFIX>_VERIFY`` names.

    ``import coheriq`` calls it once ``domain``, whose variable is set, is materialized.
    """
    variable = f"{domain.env_prefix}_VERIFY"
    value = os.environ.get(variable, "").strip()
    if domain.name in _environment or not value:
        return
    engine, _, against = (part.strip() for part in value.partition(":"))
    against = against or REFERENCE
    problem = None
    if not engine:
        problem = "names no engine to verify"
    elif ":" in against or "," in value:
        problem = "names more than two implementations"
    elif engine == against:
        problem = f"compares {engine!r} with itself"
    if problem:
        raise CoheriqTypeError(
            f"The environment variable {variable}={value!r} {problem}: set it to an engine "
            f"of domain {domain.name!r} (ENGINE, or ENGINE:OTHER to compare it with another "
            "engine than the reference)."
        )
    _environment[domain.name] = (Verification(domain, engine, against), variable)
    observing.start(_ORDER, _verifying)
    if len(_environment) == 1:
        # _report prints the reports among the exit handlers; _finish runs before them
        # (threading's hook registers it as the interpreter starts to shut down).
        import atexit
        import threading

        atexit.register(_report)
        with suppress(RuntimeError):  # shutting down already: _report ends it, in its turn
            threading._register_atexit(atexit.register, _finish)  # type: ignore[attr-defined]


_ending: list[bool] = []  # [True] once _finish runs the exit handlers before it ends


def _finish() -> None:
    """Where a verification found a difference, run the other exit handlers, then end
    (not return: from Python 3.14 on, they would run again)."""
    if not _failed():
        return
    import atexit

    _ending.append(True)
    atexit.unregister(_finish)
    atexit._run_exitfuncs()
    _end()


def _report() -> None:
    """Print each report; a difference found only now, in an exit handler, ends the process."""
    for verification, variable in _environment.values():
        # A worker process that made no call has nothing to say; the main one says so.
        if verification.rows or _in_main_process():
            print(f"{variable} (process {os.getpid()}): {verification}", file=sys.stderr)
    if not _ending and _failed():
        _end()


def _failed() -> bool:
    """Whether a difference should fail this process: in the main one, where the program
    did not end with an uncaught exception (it keeps its own status then)."""
    return (
        any(not verification.ok for verification, _ in _environment.values())
        and _in_main_process()
        and getattr(sys, "last_exc", None) is None
        and getattr(sys, "last_value", None) is None
    )


def _end() -> None:
    """End the process with status 1, after flushing every open file (``os._exit`` does not)."""
    import gc
    import io

    for obj in [*gc.get_objects(), sys.stdout, sys.stderr]:
        try:
            stream = obj is sys.stdout or obj is sys.stderr or isinstance(obj, io.IOBase)
            if stream and not getattr(obj, "closed", False):
                obj.flush()
        except Exception:  # a file that cannot be flushed is left as it is
            continue
    os._exit(1)  # as `coheriq verify` does


def _in_main_process() -> bool:
    multiprocessing = sys.modules.get("multiprocessing")  # not imported: no workers
    return multiprocessing is None or multiprocessing.parent_process() is None


@after_fork_in_child
def _forget_tokens_in_child() -> None:
    # The parent's verifications, copied into a forked child, are not where its rows go:
    # a task there records in a verification of its own and sends the rows back.
    _by_token.clear()


def _describe(domain: AccelerationDomain) -> str | None:
    """For explain: what verification does to ``domain``'s calls in this context."""
    verification = active_verification(domain)
    if verification is None:
        return None
    how = (
        "coheriq.verify"
        if verification in covering.get()
        else f"the environment variable {domain.env_prefix}_VERIFY"
    )
    return (
        f"on: calls on {verification._engine_name!r} are also run on "
        f"{verification._against_name!r} and compared ({how})"
    )


observing.describers["verification"] = _describe
