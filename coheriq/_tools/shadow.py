"""Shadow verification: a sample of an engine's calls, run again off the caller's path.

:func:`shadow` (or ``COHERIQ_SHADOW=lib:rate``) puts a sampler, generated with the candidate's
own parameters, in front of each function candidate of the domain's global choice: an unsampled
call costs one random draw. A sampled call copies its arguments and its result, hands them to a
background thread through a bounded queue, and returns what the engine returned. The thread runs
the other implementation (the reference) in a block of it, compares as :func:`coheriq.verify`
does, and aggregates what differs per candidate; the report is JSON (:meth:`Shadow.write`, at
exit, ``coheriq shadow report``).
"""

from __future__ import annotations

import copy
import os
import sys
import threading
from collections import deque
from datetime import UTC
from time import monotonic, perf_counter_ns

from .._api.verbs import resolve_engine
from .._call.generated import parameter_lists
from .._choice import global_choice
from .._engines import calibrations, declines
from .._engines.meta import supplier
from .._library import observing, registry
from .._library.comparing import SharedSource, relative_difference, summarize
from .._library.domain import AccelerationDomain, lookup_domain
from .._names import REFERENCE
from .._stdlib import (
    CO_ASYNC_GENERATOR,
    CO_COROUTINE,
    CO_GENERATOR,
    INFO,
    TYPE_CHECKING,
    FunctionType,
    after_fork_in_child,
    code_flags,
    log,
)
from ..exceptions import CoheriqTypeError, CoheriqUserError
from . import columns
from .verification import Verification, _parameters_of

if TYPE_CHECKING:
    import pathlib
    from collections.abc import Callable, Iterable, Mapping
    from typing import Any

    from .._api.verbs import EngineLike

ENV = "COHERIQ_SHADOW"
"""The libraries to shadow and the share of calls: ``"ragbatch:0.01,statistics:0.1"``."""
BUDGET_ENV = "COHERIQ_SHADOW_BUDGET"
"""Seconds per minute the shadows that ``COHERIQ_SHADOW`` starts may spend (default 1)."""
REPORT_ENV = "COHERIQ_SHADOW_REPORT"
"""Where reports are written: a ``.json`` file, else a folder (default: the cache's)."""
SCHEMA = "coheriq.shadow/1"
EXIT_WAIT = 2.0  # seconds the exit handler waits for the calls still queued
_NOT_SAMPLED = CO_GENERATOR | CO_ASYNC_GENERATOR | CO_COROUTINE
_is_gil_enabled = getattr(sys, "_is_gil_enabled", None)  # 3.13+
_FREE_THREADED = _is_gil_enabled is not None and not _is_gil_enabled()

_lock = threading.Lock()
_live: dict[str, Shadow] = {}  # domain name -> its shadow, on now

_SAMPLER = """\
def {name}({params}):
    if {draw}() < {rate!r}:
        return _coheriq_sample({arguments})
    return _coheriq_member({arguments})
"""


class ShadowRow:
    """What a shadow verification saw of one candidate.

    ``sampled`` counts the calls the draw chose; each is then ``compared`` (agreeing, or
    counted in ``mismatches``), ``not_comparable`` (results that compare by identity only),
    ``dropped`` (the queue was full), ``over_budget`` (the minute's time was spent),
    ``not_compared`` (see ``notes``), or still queued. ``worst`` is the largest relative
    difference of a mismatch between numbers; ``example`` the first mismatch: the call's
    arguments, the difference and its kind (``"result"`` or ``"exception"``). Times are the
    seconds each side took on the calls run on both.
    """

    COUNTS = (
        "sampled",
        "compared",
        "mismatches",
        "one_sided",
        "not_comparable",
        "dropped",
        "over_budget",
        "not_compared",
    )

    def __init__(self, candidate: str) -> None:
        self.candidate = candidate
        self.sampled = self.compared = self.mismatches = self.one_sided = 0
        self.not_comparable = self.dropped = self.over_budget = self.not_compared = 0
        self.engine_time = self.other_time = 0.0
        self.worst: float | None = None
        self.example: dict[str, str] | None = None
        self.notes: list[str] = []

    def __repr__(self) -> str:
        return (
            f"ShadowRow({self.candidate}: {self.compared} of {self.sampled} sampled calls "
            f"compared, {self.mismatches} mismatches)"
        )

    def as_dict(self) -> dict[str, Any]:
        """The row as plain data (the report's ``candidates`` entries)."""
        data: dict[str, Any] = {"candidate": self.candidate}
        data.update((count, getattr(self, count)) for count in self.COUNTS)
        data.update(engine_time=self.engine_time, other_time=self.other_time)
        data.update(worst=self.worst, example=self.example, notes=list(self.notes))
        return data

    def note(self, text: str) -> None:
        """Keep ``text``, once per kind (what it says before its first colon)."""
        kind = text.split(":")[0]
        if all(kept.split(":")[0] != kind for kept in self.notes):
            self.notes.append(text)


class _Draws(threading.local):
    """A random generator per thread (``.random``), seeded from ``seed`` and the order in
    which the threads first drew, where ``seed`` is given."""

    def __init__(self, seed: int | None) -> None:
        import random

        global _threads_drawn
        _threads_drawn += 1
        self.random = random.Random(None if seed is None else f"{seed}/{_threads_drawn}").random


_threads_drawn = 0  # threads that made a _Draws, for their seeds


class _Job:
    """A sampled call, handed to the worker: its arguments before and after the engine ran,
    and what the engine returned or raised, each copied."""

    __slots__ = ("after", "before", "domain", "engine_ns", "error", "result", "row")

    def __init__(
        self,
        domain: AccelerationDomain,
        row: ShadowRow,
        before: tuple[Any, Any],
        after: tuple[Any, Any],
        result: Any,
        error: BaseException | None,
        engine_ns: int,
    ) -> None:
        self.domain, self.row, self.before, self.after = domain, row, before, after
        self.result, self.error, self.engine_ns = result, error, engine_ns


class Shadow:
    """A shadow verification of one domain, on from :func:`shadow` until :meth:`stop`.

    Read it with :attr:`rows`, :attr:`ok`, ``print(shadow)`` (a table), :meth:`as_dict`;
    :meth:`flush` waits for the calls queued; :meth:`write` writes the JSON report.
    """

    def __init__(
        self,
        domain: AccelerationDomain | str,
        rate: float = 0.01,
        *,
        against: EngineLike = REFERENCE,
        budget: float = 1.0,
        queue: int = 64,
        rtol: float | None = None,
        atol: float | None = None,
        report: str | os.PathLike[str] | None = None,
        seed: int | None = None,
    ) -> None:
        import random

        name = lookup_domain(domain).name
        _check(name, rate, budget, queue, rtol, atol)
        self.domain, self.rate, self.against = name, rate, against
        self.budget, self.queue, self.rtol, self.atol = budget, queue, rtol, atol
        self.report = report
        self.engine: str | None = None  # the engine watched, once the choice is made
        self._random = random.Random(seed)
        self._draws = _Draws(seed)
        self._rows: dict[str, ShadowRow] = {}
        self._notes: list[str] = []
        self._logged: set[tuple[str, str]] = set()  # (candidate, kind) of mismatches logged
        # Each copy of the library's module watched: its choice, and the members it ran before.
        self._attached: list[tuple[global_choice.GlobalChoice, Mapping[str, Any]]] = []
        self._verification: Verification | None = None
        self._stopped = False
        self._restart()

    def _restart(self) -> None:
        """Start from nothing (also in a forked child: its report is its own)."""
        # Re-entrant: a signal handler or a __del__ may call a sampled candidate while its
        # thread holds the lock.
        self._cond = threading.Condition(threading.RLock())
        self._jobs: deque[_Job] = deque()
        self._busy = False
        self._worker: threading.Thread | None = None
        self._window = (monotonic(), 0)  # this minute's start, and nanoseconds spent in it
        self._paused_until = 0.0  # the budget is spent until then
        self._pid = os.getpid()
        self._started = _now()
        for row in self._rows.values():  # in place: the samplers hold them
            row.__init__(row.candidate)  # type: ignore[misc]
        self._logged = set()

    def __repr__(self) -> str:
        on = "stopped" if self._stopped else f"on {self.engine!r}" if self.engine else "waiting"
        return f"<Shadow of {self.domain!r}: {self.rate:g} of calls, {on}>"

    @property
    def rows(self) -> list[ShadowRow]:
        """A row per candidate sampled, in the order they were first sampled."""
        with self._cond:
            return [row for row in self._rows.values() if row.sampled]

    @property
    def ok(self) -> bool:
        """Whether every compared call agreed."""
        return all(row.mismatches == 0 for row in self.rows)

    @property
    def compared(self) -> int:
        """How many sampled calls were run on both sides and compared."""
        return sum(row.compared for row in self.rows)

    # -- on the caller's path ---------------------------------------------------------

    def _sampler(
        self, domain: AccelerationDomain, name: str, member: Callable[..., Any], reference: Any
    ) -> Any:
        """``member`` (of ``domain``, a copy of the library's) behind a draw: a sampled
        call goes through :meth:`_sample`."""
        row = self._rows.setdefault(name, ShadowRow(name))
        exact = parameter_lists(reference)
        params, arguments = exact or ("*args, **kwargs", "*args, **kwargs")
        chain = declines.chain_of(member)

        def sample(*args: Any, **kwargs: Any) -> Any:
            return self._sample(domain, row, member, chain, args, kwargs)

        namespace = {
            "__name__": "coheriq.shadow",
            "_coheriq_draw": self._random.random,
            "_coheriq_draws": self._draws,
            "_coheriq_sample": sample,
            "_coheriq_member": member,
        }
        defname = name if name.isidentifier() else "sampled"
        # A free-threaded build draws from a generator per thread: one shared by every
        # thread would make the calls wait for each other (a GIL serializes them anyway).
        draw = "_coheriq_draws.random" if _FREE_THREADED else "_coheriq_draw"
        source = _SAMPLER.format(
            name=defname, params=params, arguments=arguments, draw=draw, rate=float(self.rate)
        )
        code = compile(source, f"<coheriq shadow of {self.domain}.{name}>", "exec")
        function = FunctionType(
            next(c for c in code.co_consts if getattr(c, "co_name", "") == defname), namespace
        )
        if exact is not None:
            function.__defaults__ = reference.__defaults__
            function.__kwdefaults__ = reference.__kwdefaults__
        function.__qualname__ = f"shadow of {getattr(member, '__qualname__', name)}"
        function.__wrapped__ = member  # type: ignore[attr-defined]
        if chain is not None:  # a profile counts a declined call for who answered it
            function.__coheriq_chain__ = chain  # type: ignore[attr-defined]
        return function

    def _sample(
        self,
        domain: AccelerationDomain,
        row: ShadowRow,
        member: Callable[..., Any],
        chain: declines.Chain | None,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        """Run a sampled call: copy its arguments, run the engine, hand both over."""
        with self._cond:
            row.sampled += 1
            refused = self._refusal(row)
        if refused:
            if refused == "first drop":
                _warn(
                    "shadow verification of %r dropped a sampled call: its queue of %d calls "
                    "is full (the other side is slower than the calls come); the report counts "
                    "the calls dropped",
                    self.domain,
                    self.queue,
                )
            return member(*args, **kwargs)
        before = self._copies(domain, row, args, kwargs)
        if before is None:
            return member(*args, **kwargs)
        token = declines.answered.set(None)
        started = perf_counter_ns()
        try:
            result = member(*args, **kwargs)
        except Exception as error:
            self._hand_over(domain, row, chain, before, (None, error, args, kwargs), started)
            raise
        else:
            self._hand_over(domain, row, chain, before, (result, None, args, kwargs), started)
            return result
        finally:
            declines.answered.reset(token)

    def _refusal(self, row: ShadowRow) -> str | None:
        """Why a sampled call must run on the engine alone (under the lock), counted in
        ``row``: the queue is full (``"first drop"`` the first time) or the minute's budget
        is spent; None where it is compared."""
        if self._stopped:
            row.not_compared += 1
            row.note("stopped: the shadow was stopped while the call ran")
            return "stopped"
        if len(self._jobs) >= self.queue:
            row.dropped += 1
            first = sum(r.dropped for r in self._rows.values()) == 1
            return "first drop" if first else "dropped"
        if monotonic() < self._paused_until:
            row.over_budget += 1
            return "over budget"
        return None

    def _copies(
        self,
        domain: AccelerationDomain,
        row: ShadowRow,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        """Copies of the arguments, or None (noted) where they cannot be copied. Made as
        the other side makes its own (a copy rule that calls the library's candidates
        would otherwise call the samplers, and sample its own calls)."""
        try:
            with self._checker().copying(domain):
                return domain.comparisons.copy_arguments(args, kwargs)
        except SharedSource as shared:
            problem = f"an argument is an iterator that may share its source ({shared.kind})"
        except Exception as error:
            problem = f"arguments could not be copied ({type(error).__name__}: {error})"
        with self._cond:
            row.not_compared += 1
            row.note(
                f"{problem}: the call ran on the engine alone; the library can register a "
                "copy for the type with domain.register_comparison(type, copy=...)"
            )
        return None

    def _hand_over(
        self,
        domain: AccelerationDomain,
        row: ShadowRow,
        chain: declines.Chain | None,
        before: tuple[Any, Any],
        outcome: tuple[Any, BaseException | None, tuple[Any, ...], dict[str, Any]],
        started: int,
    ) -> None:
        """Queue a sampled call for the worker, with copies of what the engine left."""
        engine_ns = perf_counter_ns() - started
        result, error, args, kwargs = outcome
        answered = declines.answered.get()
        passed_on = chain is not None and answered is not None and answered[0] is chain
        who = answered[1] if passed_on and answered is not None else None
        if who is not None and who == self._against_name():
            with self._cond:
                row.not_compared += 1
                row.note(
                    f"declined: the engine passed the call on to {who!r}, the other side "
                    "itself, so there was nothing to compare"
                )
            return
        after = self._copies_after(domain, row, args, kwargs, result, error)
        if after is None:
            return
        job = _Job(domain, row, before, after[0], after[1], after[2], engine_ns)
        with self._cond:
            if len(self._jobs) >= self.queue:
                row.dropped += 1
                return
            self._jobs.append(job)
            if self._worker is None:
                self._worker = threading.Thread(
                    target=self._work, name=f"coheriq shadow of {self.domain}", daemon=True
                )
                self._worker.start()
            self._cond.notify_all()

    def _copies_after(
        self,
        domain: AccelerationDomain,
        row: ShadowRow,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        result: Any,
        error: BaseException | None,
    ) -> tuple[Any, Any, BaseException | None] | None:
        """Copies of the arguments as the engine left them, its result, and its exception
        without its traceback (which would keep the caller's frames alive)."""
        comparisons = domain.comparisons
        try:
            with self._checker().copying(domain):
                after = comparisons.copy_arguments(args, kwargs)
                kept = comparisons.copy_arguments((result,), {})[0][0] if error is None else None
                raised = copy.copy(error) if error is not None else None
        except Exception as failure:
            with self._cond:
                row.not_compared += 1
                row.note(
                    f"outcome not copied: the engine's result or exception could not be "
                    f"copied ({type(failure).__name__}: {failure}), so the call was not "
                    "compared; register a copy for its type with "
                    "domain.register_comparison(type, copy=...)"
                )
            return None
        return after, kept, raised

    # -- on the worker's thread ---------------------------------------------------------

    def _work(self) -> None:
        """The worker: compare the queued calls until the shadow stops."""
        quiet = observing.quiet.set(True)  # a profile does not count the other side
        try:
            while True:
                with self._cond:
                    while not self._jobs and not self._stopped:
                        self._cond.wait()
                    if not self._jobs:
                        return
                    job = self._jobs.popleft()
                    self._busy = True
                try:
                    self._compare(job)
                except BaseException as error:  # the worker must outlive a bad comparison
                    with self._cond:
                        job.row.not_compared += 1
                        job.row.note(
                            f"comparison failed: comparing raised {type(error).__name__}: {error}"
                        )
                finally:
                    with self._cond:
                        self._busy = False
                        self._cond.notify_all()
        finally:
            observing.quiet.reset(quiet)

    def _compare(self, job: _Job) -> None:
        """Run the other side on the call's copy, compare, and record (in the worker)."""
        row = job.row
        if self._spend(0):
            with self._cond:
                row.over_budget += 1
            return
        started = perf_counter_ns()
        domain, verification = job.domain, self._checker()
        name = row.candidate
        theirs = verification.in_library_form(domain, name, job.before, depth=3)
        arguments = summarize(*theirs)  # before the other side ran on them
        other = verification.other_outcome(domain, name, theirs)
        if other.reached is not None:
            with self._cond:
                row.not_compared += 1
                row.note(
                    f"side effects: the other side reached {other.reached}, marked with side "
                    "effects, and was stopped there, so that it does not run twice"
                )
            self._spend(perf_counter_ns() - started)
            return
        difference, one_sided, opaque = verification.difference(
            domain, name, (job.result, job.error, job.after), other, theirs
        )
        self._spend(perf_counter_ns() - started)
        self._record(job, other.nanoseconds, difference, one_sided, opaque, arguments)

    def _record(
        self,
        job: _Job,
        other_ns: int,
        difference: str | None,
        one_sided: bool,
        opaque: str | None,
        arguments: str,
    ) -> None:
        row = job.row
        with self._cond:
            if difference is None and opaque is not None:
                row.not_comparable += 1
                row.note(f"results of type {opaque!r} compare by identity only: not compared")
                return
            row.compared += 1
            row.engine_time += job.engine_ns / 1e9
            row.other_time += other_ns / 1e9
            if difference is None:
                return
            row.mismatches += 1
            row.one_sided += one_sided
            kind = "exception" if one_sided else "result"
            relative = relative_difference(difference)
            if relative is not None and (row.worst is None or relative > row.worst):
                row.worst = relative
            if row.example is None:
                row.example = {"arguments": arguments, "difference": difference, "kind": kind}
            new = (row.candidate, kind) not in self._logged
            self._logged.add((row.candidate, kind))
        if new:
            _warn(
                "shadow verification of %r: engine %r and %r disagree on %s (%s): %s, for "
                "arguments %s; further mismatches of this kind are counted in the report",
                self.domain,
                self.engine,
                self._against_name(),
                row.candidate,
                kind,
                difference,
                arguments,
            )

    def _spend(self, nanoseconds: int) -> bool:
        """Count ``nanoseconds`` of comparing against this minute's budget; whether the
        budget is spent (then sampled calls are refused until the minute ends)."""
        with self._cond:
            start, spent = self._window
            now = monotonic()
            if now - start >= 60.0:
                start, spent = now, 0
            spent += nanoseconds
            self._window = (start, spent)
            over = spent >= self.budget * 1e9
            self._paused_until = start + 60.0 if over else 0.0
            return over

    # -- control -----------------------------------------------------------------------

    def attach(self, domain: AccelerationDomain) -> None:
        """Watch the global choice of ``domain`` (a copy of the library's), if it is made
        (else :func:`_on_settled` calls this again when it is)."""
        choice = domain.choice
        settled = choice.settled
        if settled is None or self._stopped or any(c is choice for c, _ in self._attached):
            return
        self.engine = settled.engine
        engine_cls = settled.engine_class
        against_cls = resolve_engine(domain, self.against)
        against = against_cls.__coheriq_name__ or REFERENCE
        if engine_cls is against_cls:
            note = (
                f"the program runs {settled.engine!r} ({settled.reason}), the implementation "
                "it would be compared with: nothing to compare"
            )
            if note not in self._notes:
                self._notes.append(note)
            return
        if self._verification is None:  # by names: each copy of the library has its classes
            self._verification = Verification(
                domain, settled.engine, against, rtol=self.rtol, atol=self.atol
            )
        members = dict(settled.members)
        for name, info in domain.state.candidates.items():
            if self._samples(domain, name, info, engine_cls, against_cls, settled):
                members[name] = self._sampler(domain, name, settled.members[name], info.reference)
        before = choice.reconnect(members)
        if before is not None:
            self._attached.append((choice, before))
        log(
            INFO,
            "shadow verification of %r on: %g of the calls on engine %r are also run on %r",
            self.domain,
            self.rate,
            self.engine,
            against,
        )

    def _samples(
        self,
        domain: AccelerationDomain,
        name: str,
        info: Any,
        engine_cls: Any,
        against_cls: Any,
        settled: Any,
    ) -> bool:
        """Whether calls of candidate ``name`` are sampled: a plain function candidate
        without side effects, run by other code than the other side's."""
        if info.is_class or name in domain.comparisons.side_effects:
            return False
        if code_flags(info.reference) & _NOT_SAMPLED or name not in settled.members:
            return False
        differs = supplier(engine_cls, name) is not supplier(against_cls, name)
        return differs or declines.chain_of(settled.members[name]) is not None

    def stop(self, timeout: float = 10.0) -> None:
        """Stop sampling, compare what is queued (waiting at most ``timeout`` seconds), and
        write the report; the calls run the engine alone again."""
        with _lock:
            if _live.get(self.domain) is self:
                del _live[self.domain]
        if self._stopped:
            return
        for choice, before in self._attached:
            choice.reconnect(before)
        self._attached = []
        self.flush(timeout)
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self.write()

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every queued call is compared, at most ``timeout`` seconds; whether
        they were."""
        deadline = monotonic() + timeout
        with self._cond:
            while self._jobs or self._busy:
                left = deadline - monotonic()
                if left <= 0 or (self._worker is not None and not self._worker.is_alive()):
                    return False
                self._cond.wait(left)
        return True

    def as_dict(self) -> dict[str, Any]:
        """The report as plain data (its JSON schema is ``coheriq.shadow/1``: see the tools
        guide)."""
        from .. import __version__

        rows = self.rows
        with self._cond:
            totals = {count: sum(getattr(r, count) for r in rows) for count in ShadowRow.COUNTS}
            totals["queued"] = len(self._jobs) + self._busy
            candidates = [row.as_dict() for row in rows]
        return {
            "schema": SCHEMA,
            "coheriq": __version__,
            "domain": self.domain,
            "engine": self.engine,
            "against": self._against_name(),
            "rate": self.rate,
            "budget": self.budget,
            "queue": self.queue,
            "pid": os.getpid(),
            "python": sys.version.split()[0],
            "started": self._started,
            "written": _now(),
            "totals": totals,
            "notes": list(self._notes),
            "candidates": candidates,
        }

    def to_json(self) -> str:
        """The report as JSON."""
        import json

        return json.dumps(self.as_dict(), indent=2, sort_keys=True)

    def write(self, path: str | os.PathLike[str] | None = None) -> pathlib.Path:
        """Write the report to ``path`` (else where :func:`shadow`'s ``report`` or
        ``COHERIQ_SHADOW_REPORT`` says, else the user's cache folder); return the file."""
        target = report_file(self.domain, path or self.report, self._pid)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
            partial.write_text(self.to_json() + "\n", encoding="utf-8")
            os.replace(partial, target)
        except OSError as error:
            raise CoheriqUserError(
                f"The shadow verification of {self.domain!r} could not write its report to "
                f"{str(target)!r} ({type(error).__name__}: {error}). Name a file or folder "
                f"that can be written with report= or {REPORT_ENV}."
            ) from None
        return target

    def __str__(self) -> str:
        return render(self.as_dict())

    def _checker(self) -> Verification:
        assert self._verification is not None  # made by attach, before any sampler exists
        return self._verification

    def _against_name(self) -> str:
        if isinstance(self.against, str):
            return self.against
        return getattr(self.against, "__coheriq_name__", None) or REFERENCE


@_parameters_of(Shadow)
def shadow(*args: Any, **kwargs: Any) -> Shadow:
    """Verify a random share of ``domain``'s engine calls in the background; return the
    :class:`Shadow`, on until its :meth:`~Shadow.stop` (or the end of the process).

    Each call of a function candidate on the domain's global choice is sampled with
    probability ``rate``. A sampled call's arguments (before and after the engine ran)
    and result are copied, and handed to a background thread through a queue of
    ``queue`` calls; the program gets the engine's result, and is never made to wait
    for the other side (``against``, the reference by default), which the thread runs
    on the copies and compares as :func:`coheriq.verify` does (``rtol``, ``atol``, the
    library's comparisons, engines' conversions). When the queue is full, or the thread
    spent ``budget`` seconds in the current minute, a sampled call is not copied, and is
    counted as dropped or over budget. Candidates marked with ``side_effects=True``,
    generators, coroutines and class candidates are never sampled; calls inside
    ``using_engine`` blocks are not either (only the global choice is watched).

    Each new kind of mismatch (a candidate's result, or exception) is logged once as a
    warning on the ``coheriq`` logger; all are counted. The report is written as JSON
    at :meth:`~Shadow.stop` and at exit (:meth:`~Shadow.write` on demand) to ``report``
    (a ``.json`` file, else a folder), else to ``COHERIQ_SHADOW_REPORT``, else the user's
    cache folder; ``coheriq shadow report`` reads it. ``seed`` makes the draw repeatable.

    Raises:
        CoheriqTypeError: An argument is out of range (the message says which).
        CoheriqUserError: ``domain`` has a shadow verification on already.
    """
    watcher = Shadow(*args, **kwargs)
    _start(watcher, lookup_domain(watcher.domain))
    return watcher


def shadows() -> list[Shadow]:
    """The shadow verifications on in this process, by domain name."""
    with _lock:
        return [_live[name] for name in sorted(_live)]


def _start(watcher: Shadow, domain: AccelerationDomain) -> None:
    """Make ``watcher`` the shadow of ``domain``, attached now or at the choice."""
    import logging  # noqa: F401 - now, not in the worker while the program's threads log

    with _lock:
        running = _live.get(watcher.domain)
        if running is not None:
            raise CoheriqUserError(
                f"Domain {watcher.domain!r} has a shadow verification on already ({running!r}). "
                "Stop it first (coheriq.shadows() lists them; call .stop() on it), then "
                "start the new one."
            )
        _live[watcher.domain] = watcher
        if len(_live) == 1 and not _exit_handler:
            import atexit

            atexit.register(_at_exit)
            _exit_handler.append(True)
        if _on_settled not in global_choice.watchers:
            global_choice.watchers.append(_on_settled)
    copies = registry.copies_of(domain.name)
    for copy_of_library in copies.alive() if copies is not None else [domain]:
        watcher.attach(copy_of_library)


_exit_handler: list[bool] = []


def _on_settled(state: Any, settled: Any) -> None:
    """A global-choice watcher: attach a shadow waiting for its domain's choice."""
    watcher = _live.get(state.name)
    if watcher is not None:
        for domain in state.copies.alive():
            if domain.state is state:
                watcher.attach(domain)


def _check(
    domain: str,
    rate: object,
    budget: object,
    queue: object,
    rtol: object,
    atol: object,
) -> None:
    def number(value: object) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool)

    problems = []
    if not (number(rate) and 0 < rate <= 1):  # type: ignore[operator]
        problems.append(f"rate is a share of calls above 0 and at most 1, not {rate!r}")
    if not (number(budget) and budget > 0):  # type: ignore[operator]
        problems.append(f"budget is seconds per minute above 0, not {budget!r}")
    if not (isinstance(queue, int) and not isinstance(queue, bool) and queue >= 1):
        problems.append(f"queue is a whole number of calls of at least 1, not {queue!r}")
    for name, value in (("rtol", rtol), ("atol", atol)):
        if value is not None and not (number(value) and value >= 0):  # type: ignore[operator]
            problems.append(f"{name} is a number of at least 0, not {value!r}")
    if problems:
        raise CoheriqTypeError(f"coheriq.shadow({domain!r}): " + "; ".join(problems) + ".")


def from_environment(domain: AccelerationDomain) -> None:
    """Start the shadow that ``COHERIQ_SHADOW`` names for ``domain`` (once it is made)."""
    if domain.name in _live:
        return
    for name, rate in parse_environment(os.environ.get(ENV, "")):
        if name == domain.name:
            budget_text = os.environ.get(BUDGET_ENV, "").strip() or "1"
            try:
                budget = float(budget_text)
            except ValueError:
                budget = -1.0
            if not budget > 0:
                raise CoheriqTypeError(
                    f"The environment variable {BUDGET_ENV}={budget_text!r} is not a number of "
                    "seconds per minute above 0: set it to one, like 1 or 0.5."
                )
            _start(Shadow(name, rate, budget=budget), domain)
            return


def parse_environment(value: str) -> list[tuple[str, float]]:
    """``"ragbatch:0.01,statistics"`` -> ``[("ragbatch", 0.01), ("statistics", 0.01)]``."""
    found = []
    for word in value.split(","):
        word = word.strip()
        if not word:
            continue
        name, _, rate_text = (part.strip() for part in word.partition(":"))
        try:
            rate = float(rate_text) if rate_text else 0.01
        except ValueError:
            rate = -1.0
        if not name or not 0 < rate <= 1:
            raise CoheriqTypeError(
                f"The environment variable {ENV}={value!r} has {word!r}, which is not LIB or "
                "LIB:RATE with a share of calls above 0 and at most 1: write it like "
                "'ragbatch:0.01' (one call in a hundred), several separated by commas."
            )
        found.append((name, rate))
    return found


def report_file(domain: str, given: str | os.PathLike[str] | None, pid: int) -> pathlib.Path:
    """The file a shadow of ``domain`` writes its report to: ``given`` (a ``.json`` file,
    else a folder), else ``COHERIQ_SHADOW_REPORT``, else the cache's ``shadow`` folder; a
    process forked from the one that started it writes beside it, with its own pid."""
    from pathlib import Path

    where = given if given is not None else os.environ.get(REPORT_ENV, "").strip() or None
    if where is None:
        return calibrations.folder() / "shadow" / f"shadow-{domain}-{os.getpid()}.json"
    path = Path(where)
    if path.suffix != ".json":
        return path / f"shadow-{domain}-{os.getpid()}.json"
    if os.getpid() != pid:
        return path.with_name(f"{path.stem}-{os.getpid()}.json")
    return path


def default_folder() -> pathlib.Path:
    """Where reports go when nothing says otherwise (``coheriq shadow report`` reads it)."""
    from pathlib import Path

    given = os.environ.get(REPORT_ENV, "").strip()
    return Path(given) if given else calibrations.folder() / "shadow"


def read_reports(paths: Iterable[str | os.PathLike[str]]) -> list[dict[str, Any]]:
    """The reports in ``paths`` (files, or folders of ``*.json`` reports), checked.

    Raises:
        CoheriqUserError: A path is missing, or a file is not a shadow report.
    """
    import json
    from pathlib import Path

    reports = []
    for given in paths:
        path = Path(given)
        files = sorted(path.glob("*.json")) if path.is_dir() else [path]
        for file in files:
            try:
                data = json.loads(file.read_text(encoding="utf-8"))
            except (OSError, ValueError) as error:
                raise CoheriqUserError(
                    f"{str(file)!r} could not be read as a shadow verification report "
                    f"({type(error).__name__}: {error}). Name a report that "
                    "COHERIQ_SHADOW or coheriq.shadow() wrote."
                ) from None
            if not isinstance(data, dict) or data.get("schema") != SCHEMA:
                raise CoheriqUserError(
                    f"{str(file)!r} is not a shadow verification report (its schema is not "
                    f"{SCHEMA!r}). Name a report that COHERIQ_SHADOW or coheriq.shadow() wrote."
                )
            reports.append(data)
    return reports


def merge(reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Reports of one domain, engine and other side (from several processes) summed into one
    each: counts and times added, the worst difference the largest, the first example kept."""
    merged: dict[tuple[str, str, str], dict[str, Any]] = {}
    for report in reports:
        key = (report["domain"], str(report["engine"]), report["against"])
        into = merged.setdefault(
            key,
            {**report, "candidates": [], "totals": {}, "notes": [], "processes": 0},
        )
        into["processes"] += 1
        into["rate"] = max(into["rate"], report["rate"])
        for count, value in report["totals"].items():
            into["totals"][count] = into["totals"].get(count, 0) + value
        into["notes"] += [note for note in report["notes"] if note not in into["notes"]]
        rows = {row["candidate"]: row for row in into["candidates"]}
        for row in report["candidates"]:
            kept = rows.get(row["candidate"])
            if kept is None:
                rows[row["candidate"]] = dict(row, notes=list(row["notes"]))
                continue
            for count in (*ShadowRow.COUNTS, "engine_time", "other_time"):
                kept[count] += row[count]
            if row["worst"] is not None and (kept["worst"] or 0) < row["worst"]:
                kept["worst"] = row["worst"]
            kept["example"] = kept["example"] or row["example"]
            kept["notes"] += [n for n in row["notes"] if n not in kept["notes"]]
        into["candidates"] = list(rows.values())
    return list(merged.values())


def render(report: dict[str, Any]) -> str:
    """One report (or a merged one) as text: a title, a line per candidate, what differed."""
    totals = report["totals"]
    processes = report.get("processes", 1)
    title = (
        f"shadow verification of {report['domain']!r}: {report['engine']!r} against "
        f"{report['against']!r}, {report['rate']:.3g} of calls sampled"
        + (f", {processes} processes" if processes > 1 else "")
        + f": {totals.get('compared', 0):,} compared, {totals.get('mismatches', 0):,} differed"
    )
    lines = [title]
    if report["candidates"]:
        table = [["candidate", "sampled", "compared", "differed", "dropped", "over budget"]]
        table += [
            [
                row["candidate"],
                f"{row['sampled']:,}",
                f"{row['compared']:,}",
                f"{row['mismatches']:,}",
                f"{row['dropped']:,}",
                f"{row['over_budget']:,}",
            ]
            for row in report["candidates"]
        ]
        lines.append(columns(table, 1))
    for row in report["candidates"]:
        example = row["example"]
        if example is not None:
            worst = f"; worst relative difference {row['worst']:.3g}" if row["worst"] else ""
            lines.append(
                f"{row['candidate']}: {row['mismatches']:,} differed{worst}; for example "
                f"{example['arguments']}: {example['difference']}"
            )
        lines += [f"{row['candidate']}: {note}" for note in row["notes"]]
    lines += list(report["notes"])
    if totals.get("dropped"):
        lines.append(
            f"{totals['dropped']:,} sampled calls were dropped: the queue of "
            f"{report['queue']} calls was full"
        )
    if totals.get("queued"):
        lines.append(f"{totals['queued']:,} sampled calls were still queued when it was written")
    return "\n".join(lines)


def _warn(message: str, *args: object) -> None:
    """Log a warning on the ``coheriq`` logger, importing logging if the program did not:
    what a shadow finds is said even where nobody configured logging (its last resort
    prints it on standard error)."""
    import logging

    logging.getLogger("coheriq").warning(message, *args)


def _now() -> str:
    from datetime import datetime

    return datetime.now(UTC).isoformat(timespec="seconds")


def _at_exit() -> None:
    """Compare what is queued (a little while) and write every shadow's report."""
    for watcher in shadows():
        watcher.flush(EXIT_WAIT)
        try:
            path = watcher.write()
        except CoheriqUserError as error:
            _warn("%s", error)
            continue
        with watcher._cond:
            watcher._stopped = True
            watcher._cond.notify_all()
        log(INFO, "shadow verification of %r: report written to %s", watcher.domain, path)


def _describe(domain: AccelerationDomain) -> str | None:
    """For explain: what a shadow verification does to ``domain``'s calls, if one is on."""
    watcher = _live.get(domain.name)
    if watcher is None:
        return None
    if not watcher._attached:
        return f"on, {watcher.rate:g} of the calls, once the program chooses an engine"
    return (
        f"on: {watcher.rate:g} of the calls on {watcher.engine!r} outside using_engine blocks "
        f"are also run on {watcher._against_name()!r} in the background and compared"
    )


observing.describers["shadow"] = _describe


@after_fork_in_child
def _restart_in_child() -> None:
    # The worker thread is not in the child, and a parent's thread may have held a lock.
    global _lock
    _lock = threading.Lock()
    for watcher in list(_live.values()):
        watcher._restart()
