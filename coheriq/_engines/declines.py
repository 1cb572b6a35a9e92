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

An implementation that is not marked ends the chain where it stands: it answers,
and a ``Decline`` raised in it is an error, also where a marked implementation
called it (:func:`note_implementation`). An implementation reached through
``self`` or ``super()`` from an engine's own code, a method or a class, goes on
along the MRO to the reference, since that code has run already
(:class:`DecliningMethod`, :class:`DecliningClass`). Each
decline is recorded (:func:`record`): counted per candidate, engine and reason,
logged once per such triple, shown to the watchers (a profile), and turned into
an error where the program asks (``COHERIQ_FAIL_ON_DECLINE=1``,
``<PREFIX>_FAIL_ON_DECLINE=1``, or another spelling of yes:
:func:`environment_flag`).

Nothing here is on the path of a call that no marked implementation answers:
an engine's members are its bound methods, as ever, except the marked ones.
"""

from __future__ import annotations

import _thread
from _contextvars import ContextVar
from _weakref import ref as _weak
from functools import partial
from os import environ as _environ

from .._names import REFERENCE
from .._stdlib import (
    CO_ASYNC_GENERATOR,
    CO_COROUTINE,
    CO_GENERATOR,
    INFO,
    TYPE_CHECKING,
    FunctionType,
    MethodType,
    after_fork_in_child,
    code_flags,
    log,
)
from ..exceptions import CoheriqDeclineError, CoheriqTypeError, ended

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

    from .._choice.state import DomainState

__all__ = [
    "FAIL_ON_DECLINE",
    "Chain",
    "Decline",
    "DecliningClass",
    "DecliningMethod",
    "Step",
    "answered",
    "bound_chain",
    "chain_of",
    "check_of",
    "environment_flag",
    "may_decline",
    "note_implementation",
    "record",
    "watchers",
]

FAIL_ON_DECLINE = "COHERIQ_FAIL_ON_DECLINE"
"""The environment variable that makes every decline an error (``1``, or another
spelling of yes: see :func:`environment_flag`), for CI."""

_MARK = "__coheriq_may_decline__"  # on a marked implementation: True, or its check
_NOTHING = object()  # what a staticmethod's check gets before the call's arguments: nothing

# Called with (state, candidate, engine, reason) on every decline (a profile's).
watchers: list[Callable[[DomainState, str, str, str], None]] = []
# Guards the counts of declines; re-entrant, so that a signal handler whose call is
# declined while its thread counts another decline does not deadlock.
_lock = _thread.RLock()


# The code of each implementation that cannot decline (not marked), so that a
# Decline raised in it is not taken for the decline of a marked implementation
# that called it (see note_implementation); and of each marked one, which may share its
# code with one that is not (a factory's). Weak: they hold no engine's code alive.
class _WeakCodes:
    """Code objects, by identity, held weakly (weakref.WeakSet without its imports)."""

    def __init__(self) -> None:
        self._refs: dict[int, Any] = {}

    def add(self, code: Any) -> None:
        key, refs = id(code), self._refs

        def forget(_: object) -> None:  # as the code is freed, before its id is reused
            refs.pop(key, None)

        refs[key] = _weak(code, forget)

    def __contains__(self, code: object) -> bool:
        held = self._refs.get(id(code))
        return held is not None and held() is code


_answering = _WeakCodes()
_declining = _WeakCodes()

# Set when a call that was declined returns: its chain, and the engine that answered it
# in the end (a verification reads it to say which implementation it compared; the
# chain tells the verified call's own decline from one of a call made inside it).
answered: ContextVar[tuple[Chain, str] | None] = ContextVar(
    "coheriq: who answered a declined call", default=None
)


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

    An ``async def`` or generator implementation runs its body only when the
    call is awaited or iterated, after the call has returned: too late to pass
    it on. It declines by its check alone, and a bare mark on it is refused.

    Returns the implementation itself, marked.

    Raises:
        CoheriqTypeError: ``when`` is not callable, the target is neither a
            function nor a class, or it is an ``async def`` or generator function
            marked without ``when``.
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
        if when is None:
            _check_runs_when_called(target)
        setattr(target, _MARK, when if when is not None else True)
        return target

    return mark if implementation is None else mark(implementation)


def _check_runs_when_called(target: Any) -> None:
    """Refuse a bare mark on a function whose body runs after its call returns."""
    function = target.__func__ if isinstance(target, (staticmethod, classmethod)) else target
    flags = code_flags(function)
    kind = (
        "an async generator"
        if flags & CO_ASYNC_GENERATOR
        else "an async def"
        if flags & CO_COROUTINE
        else "a generator"
        if flags & CO_GENERATOR
        else None
    )
    if kind is not None:
        name = getattr(function, "__qualname__", repr(function))
        raise CoheriqTypeError(
            f"coheriq.may_decline cannot mark {kind} function {name} bare: its body runs "
            "only when the call is awaited or iterated, after the call has returned, so a "
            "Decline raised there is too late to pass the call on. Give it a check instead, "
            "may_decline(when=check), which coheriq asks when the call is made."
        )


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

    __slots__ = ("ask", "call", "check", "engine", "final", "name", "owner")

    def __init__(self, owner: Any, name: str, call: Any, check: Any, subject: Any) -> None:
        self.owner = owner  # the class whose body defines it
        self.name = name  # the candidate it implements
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
        """``reason``, what the check returned, if it is one: None runs, a non-blank
        string declines; anything else is refused, wherever the check is asked.

        Raises:
            CoheriqTypeError: The check returned something else (``False``, ``""``).
        """
        if reason is None or (isinstance(reason, str) and reason.strip()):
            return reason
        raise CoheriqTypeError(
            f"The decline check of engine {self.engine!r} for candidate {self.name!r} "
            f"returned {reason!r}: it must return the reason to decline (a non-empty "
            "string), or None to run. Return None where the implementation should run."
        )

    def attempt(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[bool, Any]:
        """``(True, result)`` if it answers the call, ``(False, reason)`` if it declines."""
        reason = self.reason_for(args, kwargs)
        if reason is not None:
            return False, reason
        try:
            return True, self.call(*args, **kwargs)
        except Decline as decline:
            if self.final or raised_by_answering(decline):  # an error, not a signal
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
            if reason is None:
                try:
                    return call(*args, **kwargs)
                except Decline as decline:
                    if final or raised_by_answering(decline):  # an error, not a signal
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
        """The first step declined for ``reason`` (what :meth:`Step.checked` passed)."""
        record(self.state, self.name, self.steps[0].engine, reason or "")
        for step in self.all_steps(after_first=True):
            answers, value = step.attempt(args, kwargs)
            if answers:
                answered.set((self, step.engine))
                return value
            record(self.state, self.name, step.engine, value)
        result = self.reference(*args, **kwargs)
        answered.set((self, REFERENCE))
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
        steps.append(Step(klass, name, call, check, subject))
        if check is False:
            break
    return steps


class DecliningMethod:
    """A marked implementation in its engine class's dict, as ``self`` and ``super()`` reach it.

    Read from an instance, a function is a bound method, as any method is, and
    a class (a class candidate's implementation) is a :class:`DecliningClass`
    that stands for it: nothing is kept on the instance, which pickles and
    copies as it would without coheriq. Called, it runs the implementation
    (after its check), and only once that declines does it build the rest of
    the chain: along the MRO of the instance's class, past the implementations
    that decline, to the reference. That code has run already, on this engine.
    (A call a proxy dispatches runs the engine's :class:`Chain` instead, which
    may go on to the engines later in the user's list: see :func:`bound_chain`.)
    Read from the class, it is the implementation itself.
    """

    __slots__ = ("function", "method", "name", "owner")

    def __init__(self, function: Any, owner: Any, name: str) -> None:
        self.function, self.owner, self.name = function, owner, name
        self.method = self._as_method()

    @property
    def __wrapped__(self) -> Any:
        return self.function

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        function = self.function
        if isinstance(function, type):
            if instance is None:
                return function  # the class itself: Fast.Box, and pickle, find it
            return DecliningClass(function, MethodType(self.method, instance))
        if instance is None:
            return function.__get__(None, owner)
        return MethodType(self.method, instance)

    def chain(self, instance: Any) -> Chain:
        """The chain of this implementation and those after it along ``instance``'s MRO."""
        engine_class, name = type(instance), self.name
        steps = steps_of(engine_class, instance, name, start=self.owner)
        last = steps[-1]

        def reference(*args: Any, **kwargs: Any) -> Any:  # the next along the MRO
            return getattr(super(last.owner, instance), name)(*args, **kwargs)

        state = engine_class.__coheriq_domain__.state
        return Chain(state, name, steps, None if last.final else reference)

    def _as_method(self) -> Callable[..., Any]:
        """The function a read from an instance binds: the implementation first, after
        its check, taking the instance first (what ``Chain.function`` is, unbound)."""
        function, kind, descriptor = self.function, type(self.function), self
        check = check_of(function)
        ask = check if callable(check) else None
        constructs = isinstance(function, type)  # a class: its check takes the class first

        def declining(instance: Any, *args: Any, **kwargs: Any) -> Any:
            reason = None
            if ask is not None:
                if kind is staticmethod:
                    reason = ask(*args, **kwargs)
                elif constructs:
                    reason = ask(function, *args, **kwargs)
                else:
                    subject = type(instance) if kind is classmethod else instance
                    reason = ask(subject, *args, **kwargs)
            if reason is None:
                try:
                    if kind is FunctionType:
                        return function(instance, *args, **kwargs)
                    if constructs:
                        return function(*args, **kwargs)
                    return function.__get__(instance, type(instance))(*args, **kwargs)
                except Decline as decline:
                    if raised_by_answering(decline):  # an error, not a signal
                        raise
                    reason = decline.reason
            chain = descriptor.chain(instance)
            return chain.after_decline(chain.steps[0].checked(reason), args, kwargs)

        underlying = function.__func__ if kind in (staticmethod, classmethod) else function
        for attribute in ("__module__", "__name__", "__qualname__", "__doc__"):
            if hasattr(underlying, attribute):
                setattr(declining, attribute, getattr(underlying, attribute))
        declining.__wrapped__ = underlying  # type: ignore[attr-defined]
        declining.__coheriq_declining__ = descriptor  # type: ignore[attr-defined]
        return declining

    def __repr__(self) -> str:
        return f"<{self.owner.__qualname__}.{self.name}, which may decline>"


class DecliningClass:
    """An engine's marked class, as its own code reaches it (``self.Box``, ``super().Box``).

    Calling it constructs the class, and where the construction declines, the
    next implementation along the engine's MRO constructs instead, up to the
    reference (see :class:`DecliningMethod`). Everything else is the class's:
    ``isinstance``/``issubclass`` with it, its attributes, a class statement
    deriving from it; it equals the class. ``type(obj) is self.Box`` is false:
    it stands for the class, it is not the class (``type(self).Box`` is).

    Args:
        cls: The engine's class.
        construct: Its construction, which goes on along the MRO on a decline.
    """

    __slots__ = ("cls", "construct")

    def __init__(self, cls: type, construct: Callable[..., Any]) -> None:
        self.cls, self.construct = cls, construct

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.construct(*args, **kwargs)

    def __instancecheck__(self, obj: object) -> bool:
        return isinstance(obj, self.cls)

    def __subclasscheck__(self, cls: type) -> bool:
        return issubclass(cls, self.cls)

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type]:
        return (self.cls,)

    def __getattr__(self, name: str) -> Any:  # __name__, a classmethod, a constant...
        return getattr(self.cls, name)

    @property
    def __doc__(self) -> str | None:  # type: ignore[override]
        doc: str | None = self.cls.__doc__
        return doc

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DecliningClass):
            return self.cls is other.cls
        return other is self.cls

    def __hash__(self) -> int:
        return hash(self.cls)

    def __repr__(self) -> str:
        return f"<class {self.cls.__module__}.{self.cls.__qualname__}, which may decline>"


def bound_chain(member: Any) -> Any:
    """What a proxy's call of a candidate runs, given ``member``, read from an engine's instance.

    For a method that may decline (read through a :class:`DecliningMethod`), its
    :class:`Chain`'s function, bound to the instance, which the registry may
    extend to the engines later in the user's list; else ``member`` itself.
    """
    if isinstance(member, MethodType):
        descriptor = getattr(member.__func__, "__coheriq_declining__", None)
        if isinstance(descriptor, DecliningMethod):
            return descriptor.chain(member.__self__).function
    return member


def note_implementation(implementation: Any, *, marked: bool) -> None:
    """Note ``implementation``, an engine's, as the engine class is made.

    One that is not ``marked`` cannot decline: a ``Decline`` raised in it is its
    error, and reaches the caller even through a marked implementation that
    called it (:func:`raised_by_answering`). A marked one's code never counts as
    such, where a factory made both from one ``def``.

    For a class, its own ``__new__`` and ``__init__``. The innermost function of
    a decorated one counts (its body raises), not the decorator's wrapper, whose
    code other functions share.
    """
    if isinstance(implementation, type):
        found = [vars(implementation).get(m) for m in ("__new__", "__init__")]
    else:
        found = [implementation]
    codes = _declining if marked else _answering
    for function in found:
        if isinstance(function, (staticmethod, classmethod)):
            function = function.__func__
        for _ in range(100):  # __wrapped__ chains are short; a loop of them is not followed
            inner = getattr(function, "__wrapped__", None)
            if inner is None or isinstance(inner, type):
                break
            function = inner
        code = getattr(function, "__code__", None)
        if code is not None:
            codes.add(code)


def raised_by_answering(decline: Decline) -> bool:
    """Whether ``decline`` came out of an implementation that cannot decline (see
    :func:`note_implementation`), called by the one that caught it: then it is an error."""
    traceback = decline.__traceback__
    while traceback is not None:
        code = traceback.tb_frame.f_code
        if code in _answering and code not in _declining:
            return True
        traceback = traceback.tb_next
    return False


def _label(klass: Any) -> str:
    """The engine a class stands for in messages: its name, or a mixin's class name."""
    name: str = getattr(klass, "__coheriq_name__", None) or klass.__qualname__
    return name


def record(state: DomainState, candidate: str, engine: str, reason: str) -> None:
    """Count one decline; log the first of each (candidate, engine, reason); tell watchers.

    Raises:
        CoheriqDeclineError: Declines are errors here (``COHERIQ_FAIL_ON_DECLINE=1``
            or ``<PREFIX>_FAIL_ON_DECLINE=1``, or another spelling of yes).
        CoheriqTypeError: One of those variables says neither yes nor no; nothing
            is counted.
    """
    strict = [v for v in _strict_variables(state) if environment_flag(v, _DECLINES_ARE_ERRORS)]
    key = (candidate, engine, reason)
    with _lock:
        count = state.declines.get(key, 0)
        state.declines[key] = count + 1
    if strict:
        variable = strict[0]
        raise CoheriqDeclineError(
            f"Engine {engine!r} of domain {state.name!r} declined a call of {candidate!r}: "
            f"{ended(reason)} Declines are errors here "
            f"({variable}={_environ.get(variable, '').strip()}); unset it to let the next "
            "implementation run, or call with arguments the engine takes."
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


# What yes and no mean for the variables that make declines errors (environment_flag).
_DECLINES_ARE_ERRORS = (
    "to make every decline an error",
    "to let the next implementation run a declined call",
)
_YES = frozenset({"1", "true", "yes", "on"})
_NO = frozenset({"", "0", "false", "no", "off"})


def environment_flag(variable: str, meaning: tuple[str, str]) -> bool:
    """Whether the environment variable ``variable`` says yes: ``1``, ``true``, ``yes``
    or ``on``, in any case, spaces around ignored; no is ``0``, ``false``, ``no``,
    ``off``, empty or unset. ``meaning``: what yes does and what no does, for the message.

    Raises:
        CoheriqTypeError: Its value is neither; the message says what to set.
    """
    value = _environ.get(variable, "").strip().lower()
    if value in _YES:
        return True
    if value in _NO:
        return False
    raise CoheriqTypeError(
        f"The environment variable {variable} is {value!r}; set it to 1, true, yes or on "
        f"{meaning[0]}, or to 0, false, no, off or nothing {meaning[1]}."
    )


def _strict_variables(state: DomainState) -> tuple[str, ...]:
    if state.env_prefix:
        return (FAIL_ON_DECLINE, f"{state.env_prefix}_FAIL_ON_DECLINE")
    return (FAIL_ON_DECLINE,)


@after_fork_in_child
def _reinit_lock_in_child() -> None:
    # A thread of the parent may have held the lock when it forked.
    global _lock
    _lock = _thread.RLock()
