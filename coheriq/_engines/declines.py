"""An engine that passes one call on: :class:`Decline`, and what runs next.

An engine's implementation marked with :func:`may_decline` may raise
``Decline(reason)`` (or name a check, ``when=``, that returns the reason) before
it has done anything visible; the call then runs the next implementation. The
rule, written once here (:class:`Chain`), is:

1. the next class along the engine's MRO that implements the candidate (for
   ``class Hybrid(Gpu, Compiled)``: Compiled's after Gpu's), as long as each
   one declines;
2. where the user named an ordered list of engines, the next engine of the list
   that implements the candidate (started on the first call that reaches it),
   along its own MRO the same way;
3. the reference, which never declines.

An implementation that is not marked ends the chain where it stands: it answers.
An implementation reached through ``super()`` from an engine's own code goes on
along the MRO to the reference, since that code has run already
(:class:`DecliningMethod`). Each decline is recorded (:func:`record`): counted
per candidate, engine and reason, logged once per such triple, shown to the
watchers (a profile), and turned into an error where the program asks
(``COHERIQ_FAIL_ON_DECLINE=1``, ``<PREFIX>_FAIL_ON_DECLINE=1``).

Nothing here is on the path of a call that no marked implementation answers:
an engine's members are its bound methods, as ever, except the marked ones.
"""

from __future__ import annotations

import _thread
from _contextvars import ContextVar
from functools import partial
from os import environ as _environ

from .._names import REFERENCE
from .._stdlib import INFO, TYPE_CHECKING, after_fork_in_child, log
from ..exceptions import CoheriqDeclineError, CoheriqTypeError, ended

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

    from .._choice.state import DomainState

__all__ = [
    "FAIL_ON_DECLINE",
    "Chain",
    "Decline",
    "DecliningMethod",
    "Step",
    "answered",
    "chain_of",
    "check_of",
    "may_decline",
    "record",
    "watchers",
]

FAIL_ON_DECLINE = "COHERIQ_FAIL_ON_DECLINE"
"""The environment variable that makes every decline an error (``1``), for CI."""

_MARK = "__coheriq_may_decline__"  # on a marked implementation: True, or its check
_NOTHING = object()  # what a staticmethod's check gets before the call's arguments: nothing

# Called with (state, candidate, engine, reason) on every decline (a profile's).
watchers: list[Callable[[DomainState, str, str, str], None]] = []
# Guards the counts of declines; re-entrant, so that a signal handler whose call is
# declined while its thread counts another decline does not deadlock.
_lock = _thread.RLock()

# Set when a call that was declined returns: the engine that answered it in the end
# (a verification reads it to say which implementation it compared).
answered: ContextVar[str | None] = ContextVar("coheriq: who answered a declined call", default=None)


class Decline(Exception):  # noqa: N818 - it is a signal, not an error
    """Raised by an engine's implementation to pass this call on to the next one.

    Only an implementation marked with :func:`may_decline` may raise it, and only
    before it has done anything visible (no output written, no argument changed,
    no object built that outlives the call): the next implementation then runs
    the call as if the first had never been asked.

    Args:
        reason: Why, in a few words the user can act on, the same for every call
            declined so ("a batch below 512 rows: the transfer costs more than the
            work"): declines are counted, and logged once, per reason.
    """

    def __init__(self, reason: str) -> None:
        if not isinstance(reason, str) or not reason.strip():
            raise CoheriqTypeError(
                "coheriq.Decline needs a reason: a non-empty string that says why this "
                "implementation passes the call on (it is shown to the user)."
            )
        super().__init__(reason)
        self.reason = reason


def may_decline(
    implementation: Any = None, *, when: Callable[..., str | None] | None = None
) -> Any:
    """Mark an engine's implementation of a candidate that may decline a call.

    Use it bare (``@coheriq.may_decline``), when the implementation raises
    :class:`Decline` itself, or with ``when=check``, a function that takes what
    the implementation takes (``self`` first for a method, the class for a
    classmethod, the call's arguments alone for a staticmethod or an override
    of the decorator form) and returns the reason to decline, or None to run:
    it runs before the implementation, and :func:`coheriq.explain` can ask it
    what a call with given arguments would run. On a class (a class
    candidate's implementation), its ``__new__`` or ``__init__`` may raise
    :class:`Decline`, and ``when`` takes the construction's arguments (the
    class first). Keep a reason the same from call to call (no sizes in it):
    declines are counted, and logged once, per reason.

    Returns the implementation itself, marked.
    """
    if when is not None and not callable(when):
        raise CoheriqTypeError(
            f"coheriq.may_decline(when=...) takes a function that returns a reason or None, "
            f"not {type(when).__name__} {when!r}."
        )

    def mark(target: Any) -> Any:
        if not callable(target) and not isinstance(target, (staticmethod, classmethod)):
            raise CoheriqTypeError(
                f"coheriq.may_decline marks an engine's function or class, not "
                f"{type(target).__name__} {target!r}."
            )
        setattr(target, _MARK, when if when is not None else True)
        return target

    return mark if implementation is None else mark(implementation)


def check_of(implementation: Any) -> Callable[..., str | None] | bool:
    """``implementation``'s check (``when=``), True if it is marked without one, else False."""
    if isinstance(implementation, DecliningMethod):
        implementation = implementation.function
    found = getattr(implementation, _MARK, False)
    if found is False and isinstance(implementation, (staticmethod, classmethod)):
        found = getattr(implementation.__func__, _MARK, False)  # marked below the wrapper
    return found if callable(found) else found is True


class Step:
    """One implementation a declining call may run: whose, and how to call it."""

    __slots__ = ("ask", "call", "check", "engine", "final", "owner")

    def __init__(self, owner: Any, call: Any, check: Any, subject: Any) -> None:
        self.owner = owner  # the class whose body defines it
        self.engine = _label(owner)  # its engine's name (a mixin's class name)
        self.call = call  # the implementation, bound to the engine's instance
        self.check = check  # its when= check, True (it may raise Decline), or False
        self.final = check is False  # it cannot decline: nothing after it runs
        # The check to ask first, given what the implementation is given: the call's
        # arguments, after the instance (a method) or the class (a classmethod, a class).
        self.ask: Any = None
        if callable(check):
            self.ask = check if subject is _NOTHING else partial(check, subject)

    def reason_for(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        """What the check says for these arguments (None: run it)."""
        if self.ask is None:
            return None
        return self.checked(self.ask(*args, **kwargs))

    def checked(self, reason: Any) -> str | None:
        """``reason``, what the check returned, if it is one (None, or "": run it)."""
        if reason is not None and not isinstance(reason, str):
            raise CoheriqTypeError(
                f"The decline check of engine {self.engine!r} returned {reason!r}: it must "
                "return the reason to decline (a string), or None to run."
            )
        return reason or None

    def attempt(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[bool, Any]:
        """``(True, result)`` if it answers the call, ``(False, reason)`` if it declines."""
        reason = self.reason_for(args, kwargs)
        if reason is not None:
            return False, reason
        try:
            return True, self.call(*args, **kwargs)
        except Decline as decline:
            if self.final:  # not marked: a Decline is its error, not a signal
                raise
            return False, decline.reason


class Chain:
    """What a call of one candidate runs on an engine some of whose implementations decline.

    The steps are tried in order (see the module's doc); the first that does not
    decline answers. ``later`` yields the steps of the engines after this one in
    the user's list, started on first need; ``reference`` answers last.
    """

    __slots__ = ("function", "later", "name", "reference", "state", "steps")

    def __init__(
        self,
        state: DomainState,
        name: str,
        steps: list[Step],
        reference: Any,
        later: Callable[[], Iterator[Step]] | None = None,
    ) -> None:
        self.state, self.name, self.steps = state, name, steps
        self.reference, self.later = reference, later
        self.function = self._as_function()

    def _as_function(self) -> Callable[..., Any]:
        """The chain as a plain function, what proxies call (a function's call is cheaper
        than an object's): it asks the first implementation, and only once that one
        declines does it go through :meth:`after_decline`."""
        first, chain = self.steps[0], self
        ask, call, final = first.ask, first.call, first.final

        def declining(*args: Any, **kwargs: Any) -> Any:
            reason = None if ask is None else ask(*args, **kwargs)
            if not reason:
                try:
                    return call(*args, **kwargs)
                except Decline as decline:
                    if final:  # not marked: a Decline is its error, not a signal
                        raise
                    reason = decline.reason
            return chain.after_decline(first.checked(reason), args, kwargs)

        # Read as the implementation it tries first (resolve_impl's answer): its name
        # and doc, and, for a method, the engine's instance as __self__.
        for attribute in ("__name__", "__qualname__", "__doc__", "__self__"):
            if hasattr(call, attribute):
                setattr(declining, attribute, getattr(call, attribute))
        declining.__wrapped__ = call  # type: ignore[attr-defined]
        declining.__coheriq_chain__ = self  # type: ignore[attr-defined]
        return declining

    def after_decline(
        self, reason: str | None, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """The first step declined for ``reason``: record it, and run the next ones."""
        record(self.state, self.name, self.steps[0].engine, reason or "")
        for step in self.all_steps(after_first=True):
            answers, value = step.attempt(args, kwargs)
            if answers:
                answered.set(step.engine)
                return value
            record(self.state, self.name, step.engine, value)
        result = self.reference(*args, **kwargs)
        answered.set(REFERENCE)
        return result

    def all_steps(self, after_first: bool = False) -> Iterator[Step]:
        """The steps in order, those of the engines later in the list included."""
        yield from self.steps[1:] if after_first else self.steps
        if self.later is not None and not self.steps[-1].final:
            yield from self.later()

    def would_run(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, list[str]]:
        """Which engine a call with these arguments would run, and the declines on the way.

        Asks the checks only (``when=``); an implementation that declines by
        raising is taken to run, with ``"(may decline when it runs)"`` noted.
        """
        passed: list[str] = []
        for step in self.all_steps():
            reason = step.reason_for(args, kwargs)
            if reason is None:
                if step.check is True:
                    passed.append(f"{step.engine}: may decline when it runs")
                return step.engine, passed
            passed.append(f"{step.engine} declines: {reason}")
        return REFERENCE, passed


def chain_of(member: Any) -> Chain | None:
    """The :class:`Chain` whose ``function`` a member of an engine is, or None."""
    return getattr(member, "__coheriq_chain__", None)


def steps_of(engine_class: Any, instance: Any, name: str, start: Any = None) -> list[Step]:
    """The implementations of candidate ``name`` along ``engine_class``'s MRO, bound to
    ``instance``: from ``start`` (a class; else the first) up to the first that cannot
    decline, the reference left out."""
    steps: list[Step] = []
    mro = engine_class.__mro__
    for klass in mro[mro.index(start) :] if start is not None else mro:
        if name not in getattr(klass, "__coheriq_overrides__", ()):
            continue
        if getattr(klass, "__coheriq_name__", None) == REFERENCE:
            break
        implementation = klass.__dict__[name]
        if isinstance(implementation, DecliningMethod):
            implementation = implementation.function
        check = check_of(implementation)
        if isinstance(implementation, type):  # a class: constructed as it is
            subject: Any = implementation
            call = implementation
        else:
            call = implementation.__get__(instance, engine_class)
            subject = {staticmethod: _NOTHING, classmethod: engine_class}.get(
                type(implementation), instance
            )
        steps.append(Step(klass, call, check, subject))
        if check is False:
            break
    return steps


class DecliningMethod:
    """A marked implementation in its engine class's dict, as ``self`` and ``super()`` reach it.

    Called from an engine's own code, it goes on along the MRO past the
    implementations that decline, to the reference: that code has run already.
    (A call a proxy dispatches runs the engine's :class:`Chain` instead, which
    may go on to the engines later in the user's list.) Read as ``self.name``,
    the chain is kept in the instance's ``__dict__``, as
    ``functools.cached_property`` keeps its value, so that the next read
    finds it at once; the reference at its end is looked up when it runs.
    """

    __slots__ = ("function", "name", "owner")

    def __init__(self, function: Any, owner: Any, name: str) -> None:
        self.function, self.owner, self.name = function, owner, name

    @property
    def __wrapped__(self) -> Any:
        return self.function

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        if instance is None:
            return self.function.__get__(None, owner)
        engine_class, name = type(instance), self.name
        steps = steps_of(engine_class, instance, name, start=self.owner)
        last = steps[-1]

        def reference(*args: Any, **kwargs: Any) -> Any:  # the next along the MRO
            return getattr(super(last.owner, instance), name)(*args, **kwargs)

        state = engine_class.__coheriq_domain__.state
        function = Chain(state, name, steps, None if last.final else reference).function
        if _first_supplier(engine_class, name) is self.owner:  # what self.name reads
            try:
                instance.__dict__[name] = function
            except AttributeError:  # an engine with __slots__: built on each read
                pass
        return function

    def __repr__(self) -> str:
        return f"<{self.owner.__qualname__}.{self.name}, which may decline>"


def _first_supplier(engine_class: Any, name: str) -> Any:
    """The class along ``engine_class``'s MRO whose body implements candidate ``name``."""
    return next(k for k in engine_class.__mro__ if name in getattr(k, "__coheriq_overrides__", ()))


def _label(klass: Any) -> str:
    """The engine a class stands for in messages: its name, or a mixin's class name."""
    name: str = getattr(klass, "__coheriq_name__", None) or klass.__qualname__
    return name


def record(state: DomainState, candidate: str, engine: str, reason: str) -> None:
    """Count one decline; log the first of each (candidate, engine, reason); tell watchers.

    Raises:
        CoheriqDeclineError: Declines are errors here (``COHERIQ_FAIL_ON_DECLINE=1``
            or ``<PREFIX>_FAIL_ON_DECLINE=1``).
    """
    key = (candidate, engine, reason)
    with _lock:
        count = state.declines.get(key, 0)
        state.declines[key] = count + 1
    for variable in _strict_variables(state):
        if _environ.get(variable, "").strip() == "1":
            raise CoheriqDeclineError(
                f"Engine {engine!r} of domain {state.name!r} declined a call of {candidate!r}: "
                f"{ended(reason)} Declines are errors here ({variable}=1); unset it to let the "
                "next implementation run, or call with arguments the engine takes."
            )
    if count == 0:
        log(
            INFO,
            "domain %r: engine %r declined %r (%s); the next implementation runs",
            state.name,
            engine,
            candidate,
            reason,
        )
    for watcher in list(watchers):
        watcher(state, candidate, engine, reason)


def _strict_variables(state: DomainState) -> tuple[str, ...]:
    if state.env_prefix:
        return (FAIL_ON_DECLINE, f"{state.env_prefix}_FAIL_ON_DECLINE")
    return (FAIL_ON_DECLINE,)


@after_fork_in_child
def _reinit_lock_in_child() -> None:
    # A thread of the parent may have held the lock when it forked.
    global _lock
    _lock = _thread.RLock()
