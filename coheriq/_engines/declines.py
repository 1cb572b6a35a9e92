"""An engine passes one call on: :func:`may_decline`, :class:`Decline`, and what runs next.

A declined call runs the next implementation along the engine's MRO, then (a proxy's call) the
user's ordered list of engines, then the reference (:class:`Chain`); one reached through ``self``
or ``super()`` stays on the MRO (:class:`DecliningMethod`). An implementation that only *should
not* run a call (a soft check) passes it on alike. Each decline is :func:`record`\\ ed.
"""

from __future__ import annotations

import _thread
from _contextvars import ContextVar
from _weakref import ref as _weak
from functools import partial
from os import environ as _environ

from .._names import REFERENCE, environment_flag
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

_MARK = "__coheriq_may_decline__"  # on a marked implementation: True, or its check
_SOFT = "__coheriq_soft_decline__"  # on one whose check says it should not run, not cannot


# Called with (state, candidate, engine, reason) on every decline (a profile's).
watchers: list[Callable[[DomainState, str, str, str], None]] = []
# Re-entrant: a signal handler's call may be declined while its thread counts another.
_lock = _thread.RLock()


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


# The codes of the implementations that cannot decline, and of the marked ones (a factory
# may make both from one ``def``): see note_implementation.
_answering = _WeakCodes()
_declining = _WeakCodes()

# Set when a declined call returns: its chain, and the engine that answered (verification
# reads it, and tells the verified call's decline from one of a call made inside it).
answered: ContextVar[tuple[Chain, str] | None] = ContextVar(
    "coheriq: who answered a declined call", default=None
)


class Decline(Exception):  # noqa: N818 - it is a signal, not an error
    """Raised by an engine's implementation to pass this call on to the next one.

    Only an implementation marked with :func:`may_decline` may raise it, and only before it has done
    anything visible (no output written, no argument changed, no object built that outlives the
    call): the next implementation then runs the call as if the first had never been asked.

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
    implementation: Any = None,
    *,
    when: Callable[..., str | None] | None = None,
    soft: bool = False,
) -> Any:
    """Mark an engine's implementation of a candidate that may decline a call; return it.

    Bare (``@coheriq.may_decline``), the implementation raises :class:`Decline` itself. With
    ``when=check``, ``check`` takes what the implementation takes (``self`` first for a method, the
    class for a classmethod or a class, the call's arguments alone for a staticmethod or an override
    of the decorator form) and returns the reason to decline, or None to run; it runs first, and
    :func:`coheriq.explain` can ask it. On a class, its ``__new__`` or ``__init__`` may raise
    :class:`Decline`. Keep a reason the same from call to call: declines are counted, and logged
    once, per reason. An ``async def`` or generator implementation, whose body runs after the call
    returned, declines by its check alone.

    With ``soft=True`` the check says the implementation *should not* run the call (it would be
    slower there: too small to pay for a transfer), not that it cannot (NetworkX's
    ``should_run``): the call goes on to the next implementation that has no objection, the
    reference at the latest, which takes every call. It is counted and logged as any
    decline, with its reason; :func:`coheriq.explain` says "should not run it".

    Raises:
        CoheriqTypeError: ``when`` is not callable, the target is neither a function nor
            a class, it is an ``async def`` or generator function marked bare, or
            ``soft=True`` comes without a check.
    """
    if when is not None and not callable(when):
        raise CoheriqTypeError(
            f"coheriq.may_decline(when=...) takes a function that returns a reason or None, "
            f"not {type(when).__name__} {when!r}."
        )
    if soft is not False and (soft is not True or when is None):
        raise CoheriqTypeError(
            "coheriq.may_decline(soft=True) needs a check, when=check, that returns why the "
            "implementation should not run a call (or None), which coheriq and explain ask "
            f"before the call (soft={soft!r}, when={when!r})."
        )

    def mark(target: Any) -> Any:
        if not callable(target) and not isinstance(target, (staticmethod, classmethod)):
            raise CoheriqTypeError(
                f"coheriq.may_decline marks an engine's function or class, not "
                f"{type(target).__name__} {target!r}."
            )
        function = function_of(target)
        flags = code_flags(function) if when is None else 0
        for flag, kind in _LATE_BODIES:
            if flags & flag:
                raise CoheriqTypeError(
                    f"coheriq.may_decline cannot mark {kind} function "
                    f"{getattr(function, '__qualname__', repr(function))} bare: its body runs only "
                    "when the call is awaited or iterated, after the call has returned, so a "
                    "Decline raised there is too late to pass the call on. Give it a check "
                    "instead, may_decline(when=check), which coheriq asks when the call is made."
                )
        setattr(target, _MARK, when if when is not None else True)
        if soft:
            setattr(target, _SOFT, True)
        elif _SOFT in getattr(target, "__dict__", {}):  # marked again, hard this time
            delattr(target, _SOFT)
        return target

    return mark if implementation is None else mark(implementation)


_LATE_BODIES = (
    (CO_ASYNC_GENERATOR, "an async generator"),
    (CO_COROUTINE, "an async def"),
    (CO_GENERATOR, "a generator"),
)


def function_of(value: Any) -> Any:
    """The function of a staticmethod or classmethod ``value``; else ``value``."""
    return value.__func__ if isinstance(value, (staticmethod, classmethod)) else value


def check_of(implementation: Any) -> Callable[..., str | None] | bool:
    """``implementation``'s check (``when=``), True if it is marked without one, else False."""
    if isinstance(implementation, DecliningMethod):
        implementation = implementation.function
    found = getattr(implementation, _MARK, False)
    if found is False and isinstance(implementation, (staticmethod, classmethod)):
        found = getattr(implementation.__func__, _MARK, False)  # marked below the wrapper
    return found if callable(found) else found is True


def soft_of(implementation: Any) -> bool:
    """Whether ``implementation``'s check is soft (``may_decline(when=..., soft=True)``)."""
    if isinstance(implementation, DecliningMethod):
        implementation = implementation.function
    # As check_of: a staticmethod or classmethod may be marked above or below its wrapper.
    marked = getattr(implementation, _SOFT, False) or getattr(
        function_of(implementation), _SOFT, False
    )
    return marked is True


def _trying(
    ask: Any, call: Any, final: bool, declined: Callable[[Any, Any, Any], Any]
) -> Callable[..., Any]:
    """One implementation as a function of the call's arguments: ask the check (``ask``,
    or None), then ``call``; a reason, or a ``Decline`` that is a signal, goes to
    ``declined(reason, args, kwargs)``. The one rule of a decline, written once."""

    def declining(*args: Any, **kwargs: Any) -> Any:
        reason = None if ask is None else ask(*args, **kwargs)
        if reason is None:
            try:
                return call(*args, **kwargs)
            except Decline as decline:
                if final or raised_by_answering(decline):  # an error, not a signal
                    raise
                reason = decline.reason
        return declined(reason, args, kwargs)

    return declining


class _Declined:
    """What :attr:`Step.run` returns where the implementation declines."""

    __slots__ = ("reason",)

    def __init__(self, reason: Any, args: object, kwargs: object) -> None:
        self.reason = reason


class Step:
    """Class ``owner``'s implementation of candidate ``name``, bound to an engine's instance;
    ``run`` runs it on a call's arguments and returns its result, or a ``_Declined``."""

    __slots__ = (
        "ask",
        "call",
        "check",
        "chosen",
        "final",
        "first",
        "name",
        "owner",
        "run",
        "soft",
    )

    def __init__(
        self,
        owner: Any,
        name: str,
        implementation: Any,
        instance: Any,
        engine_class: Any,
        check: Any = None,
    ) -> None:
        if isinstance(implementation, DecliningMethod):
            implementation = implementation.function
        if check is None:
            check = check_of(implementation)
        self.owner, self.name, self.check = owner, name, check  # when=, True, or False
        self.chosen = engine_class
        self.final = check is False  # it cannot decline: nothing after it runs
        kind = type(implementation)
        if isinstance(implementation, type):  # a class: constructed as it is
            self.call: Any = implementation
            first: Any = implementation  # what the check is given first, as the implementation
        else:
            self.call = implementation.__get__(instance, engine_class)
            first = engine_class if kind is classmethod else instance
        self.first = None if kind is staticmethod else first  # a check's first argument
        self.ask: Any = None
        if callable(check):
            self.ask = check if kind is staticmethod else partial(check, first)
        self.soft = self.ask is not None and soft_of(implementation)  # what explain says
        self.run = _trying(self.ask, self.call, self.final, _Declined)

    @property
    def engine(self) -> str:
        """Its engine's name (a mixin's class name)."""
        return getattr(self.owner, "__coheriq_name__", None) or self.owner.__qualname__  # type: ignore[no-any-return]

    def checked(self, reason: Any) -> str | None:
        """``reason``, a check's answer: a non-blank string or None; else CoheriqTypeError."""
        if reason is None or (isinstance(reason, str) and reason.strip()):
            return reason
        raise CoheriqTypeError(
            f"The decline check of engine {self.engine!r} for candidate {self.name!r} "
            f"returned {reason!r}: it must return the reason to decline (a non-empty "
            "string), or None to run. Return None where the implementation should run."
        )


class Chain:
    """What a call of one candidate runs on an engine some of whose implementations decline.

    The ``steps`` are tried in order, then those ``later`` yields (the engines after
    this one in the user's list, started on first need), then ``reference``. Proxies
    call its ``function`` (cheaper to call than an object), read as the first step's.
    """

    __slots__ = ("_crossed", "function", "later", "name", "reference", "state", "steps")

    def __init__(
        self,
        state: DomainState,
        name: str,
        steps: list[Step],
        reference: Any,
        later: Callable[[], Iterator[Step]] | None = None,
    ) -> None:
        self.state, self.name, self.steps, self.later = state, name, steps, later
        self._crossed: dict[Step, Callable[..., Any]] = {}  # a step's run, converting
        first = steps[0]
        self.reference = reference and self.crossing(None, reference)

        def declined(reason: Any, args: Any, kwargs: Any) -> Any:
            return self.after_decline(first.checked(reason), args, kwargs)

        call = self.crossing(first.owner, first.call)
        self.function = _trying(first.ask, call, first.final, declined)
        _read_as(self.function, first.call, ("__name__", "__qualname__", "__doc__", "__self__"))
        self.function.__coheriq_chain__ = self  # type: ignore[attr-defined]

    def after_decline(
        self, reason: str | None, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """Record that the first step declined for ``reason``; run the rest of the chain."""
        record(self.state, self.name, self.steps[0].engine, reason or "")
        for step in self.all_steps(after_first=True):
            run = self._crossed.get(step)
            if run is None:
                run = self._crossed[step] = self.crossing(step.owner, step.run)
            value = run(*args, **kwargs)
            if type(value) is not _Declined:
                answered.set((self, step.engine))
                return value
            record(self.state, self.name, step.engine, step.checked(value.reason) or "")
        result = self.reference(*args, **kwargs)
        answered.set((self, REFERENCE))
        return result

    def crossing(self, owner: Any, call: Callable[..., Any]) -> Callable[..., Any]:
        """``call``, ``owner``'s (None: the reference), converting what crosses to it
        from this chain's engine (:func:`~coheriq._engines.conversions.crossing`)."""
        chosen = self.steps[0].chosen
        if getattr(chosen, "__coheriq_conversions__", None) is None:
            return call
        from .conversions import crossing  # imported when chosen was defined

        return crossing(self.state, self.name, chosen, owner, call)  # type: ignore[no-any-return]

    def all_steps(self, after_first: bool = False) -> Iterator[Step]:
        """The steps in order, those of the engines later in the list included."""
        yield from self.steps[1:] if after_first else self.steps
        if self.later is not None and not self.steps[-1].final:
            yield from self.later()

    def would_run(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, list[str]]:
        """Which engine a call with these arguments would run, and the declines on the way,
        asking the checks only (one that may raise ``Decline`` is noted, and taken to run)."""
        passed: list[str] = []
        for step in self.all_steps():
            reason = None if step.ask is None else step.checked(step.ask(*args, **kwargs))
            if reason is None:
                if step.check is True:
                    passed.append(f"{step.engine}: may decline when it runs")
                return step.engine, passed
            verdict = "should not run it" if step.soft else "declines"
            passed.append(f"{step.engine} {verdict}: {reason}")
        return REFERENCE, passed


def _read_as(function: Any, wrapped: Any, attributes: tuple[str, ...]) -> None:
    """Give ``function`` the ``attributes`` ``wrapped`` has, and ``wrapped`` as ``__wrapped__``."""
    for attribute in attributes:
        if hasattr(wrapped, attribute):
            setattr(function, attribute, getattr(wrapped, attribute))
    function.__wrapped__ = wrapped


def chain_of(member: Any) -> Chain | None:
    """The :class:`Chain` whose ``function`` a member of an engine is, or None."""
    return getattr(member, "__coheriq_chain__", None)


def steps_of(engine_class: Any, instance: Any, name: str, start: Any = None) -> list[Step]:
    """The implementations of candidate ``name`` along ``engine_class``'s MRO, bound to
    ``instance``: from class ``start`` (else the first) to the first that cannot decline,
    the reference left out."""
    steps: list[Step] = []
    mro = engine_class.__mro__
    for klass in mro[mro.index(start) :] if start is not None else mro:
        if name not in getattr(klass, "__coheriq_overrides__", ()):
            continue
        if getattr(klass, "__coheriq_name__", None) == REFERENCE:
            break
        steps.append(Step(klass, name, klass.__dict__[name], instance, engine_class))
        if steps[-1].final:
            break
    return steps


class DecliningMethod:
    """A marked implementation in its engine class's dict. Read from the class, it is the
    implementation; from an instance, a bound method (for a class, a :class:`DecliningClass`)
    that runs it and, where it declines, the rest of the chain along the instance's MRO,
    not the user's list: ``self`` and ``super()`` calls stay in the engine. Nothing is kept
    on the instance, which pickles and copies as without coheriq."""

    __slots__ = ("function", "method", "name", "owner")

    def __init__(self, function: Any, owner: Any, name: str) -> None:
        self.function, self.owner, self.name = function, owner, name
        self.method = self._as_method()

    @property
    def __wrapped__(self) -> Any:
        return self.function

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        function, is_class = self.function, isinstance(self.function, type)
        if instance is None:  # from the class: a class itself (Fast.Box, pickle find it)
            return function if is_class else function.__get__(None, owner)
        method = MethodType(self.method, instance)
        return DecliningClass(function, method) if is_class else method

    def chain(self, instance: Any) -> Chain:
        """The chain of this implementation and those after it along ``instance``'s MRO."""
        engine_class, name = type(instance), self.name
        steps = steps_of(engine_class, instance, name, start=self.owner)
        last = steps[-1]

        def reference(*args: Any, **kwargs: Any) -> Any:  # the next along the MRO
            return getattr(super(last.owner, instance), name)(*args, **kwargs)

        # Read through super(), the reference converts what reaches it: not twice.
        reference.__coheriq_crossing__ = True  # type: ignore[attr-defined]

        state = engine_class.__coheriq_domain__.state
        return Chain(state, name, steps, None if last.final else reference)

    def _as_method(self) -> Callable[..., Any]:
        """The function a read from an instance binds (the instance first)."""
        descriptor, function, owner, name = self, self.function, self.owner, self.name
        check = check_of(function)

        def declined(reason: Any, args: Any, kwargs: Any) -> Any:  # args: instance first
            chain = descriptor.chain(args[0])
            return chain.after_decline(chain.steps[0].checked(reason), args[1:], kwargs)

        # A class or a staticmethod is called alike for every instance: one Step serves.
        alike = isinstance(function, (type, staticmethod))
        fixed = Step(owner, name, function, None, owner, check) if alike else None

        def bound_per_call(instance: Any, *args: Any, **kwargs: Any) -> Any:
            step = fixed or Step(owner, name, function, instance, type(instance), check)
            value = step.run(*args, **kwargs)
            if type(value) is _Declined:
                return declined(value.reason, (instance, *args), kwargs)
            return value

        # A plain function takes the instance first, as its check does: no binding per call.
        if type(function) is FunctionType:
            method = _trying(check if callable(check) else None, function, False, declined)
        else:  # a classmethod's, or another descriptor's, Step binds it per call
            method = bound_per_call
        _read_as(
            method, function_of(function), ("__module__", "__name__", "__qualname__", "__doc__")
        )
        method.__coheriq_declining__ = descriptor  # type: ignore[attr-defined]
        return method

    def __repr__(self) -> str:
        return f"<{self.owner.__qualname__}.{self.name}, which may decline>"


class ClassStandIn:
    """Stands for a class (``_coheriq_class``) where an engine's own code reaches it:
    ``isinstance``, ``issubclass``, ``==``, ``__doc__`` and a class statement deriving
    from it answer as with the class; ``type(obj) is stand_in`` is false. A subclass
    sets ``__doc__ = ClassStandIn.__doc__`` (the property) after its docstring."""

    __slots__ = ()
    _coheriq_class: Any

    def __instancecheck__(self, obj: object) -> bool:
        return isinstance(obj, self._coheriq_class)

    def __subclasscheck__(self, cls: type) -> bool:
        return issubclass(cls, self._coheriq_class)

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type]:
        return (self._coheriq_class,)

    @property
    def __doc__(self) -> str | None:  # type: ignore[override]
        return self._coheriq_class.__doc__  # type: ignore[no-any-return]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ClassStandIn):
            other = other._coheriq_class
        return other is self._coheriq_class

    def __hash__(self) -> int:
        return hash(self._coheriq_class)


class DecliningClass(ClassStandIn):
    """An engine's marked class, as its own code reaches it (``self.Box``, ``super().Box``):
    calling it constructs the class, going on along the engine's MRO where that declines
    (see :class:`DecliningMethod`); its attributes are the class's."""

    __doc__ = ClassStandIn.__doc__
    __slots__ = ("_coheriq_class", "construct")

    def __init__(self, cls: type, construct: Callable[..., Any]) -> None:
        self._coheriq_class, self.construct = cls, construct

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.construct(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:  # __name__, a classmethod, a constant...
        return getattr(self._coheriq_class, name)

    def __repr__(self) -> str:
        cls = self._coheriq_class
        return f"<class {cls.__module__}.{cls.__qualname__}, which may decline>"


def bound_chain(member: Any) -> Any:
    """What a proxy's call runs for ``member``, read from an engine's instance: a method
    read through a :class:`DecliningMethod` as its :class:`Chain`'s function."""
    if isinstance(member, MethodType):
        descriptor = getattr(member.__func__, "__coheriq_declining__", None)
        if isinstance(descriptor, DecliningMethod):
            return descriptor.chain(member.__self__).function
    return member


def note_implementation(implementation: Any, *, marked: bool) -> None:
    """Note the code of ``implementation``, an engine's, as its class is made: a ``Decline`` out of
    one not ``marked`` is an error, even where a marked one called it. A class's ``__new__`` and
    ``__init__`` count; a decorated function's innermost (a wrapper's code is shared)."""
    if isinstance(implementation, type):
        found = [vars(implementation).get(m) for m in ("__new__", "__init__")]
    else:
        found = [implementation]
    codes = _declining if marked else _answering
    for function in map(function_of, found):
        for _ in range(100):  # __wrapped__ chains are short; a loop of them is not followed
            inner = getattr(function, "__wrapped__", None)
            if inner is None or isinstance(inner, type):
                break
            function = inner
        code = getattr(function, "__code__", None)
        if code is not None:
            codes.add(code)


def raised_by_answering(decline: Decline) -> bool:
    """Whether ``decline`` passed through an implementation that cannot decline."""
    traceback = decline.__traceback__
    while traceback is not None:
        code = traceback.tb_frame.f_code
        if code in _answering and code not in _declining:
            return True
        traceback = traceback.tb_next
    return False


def record(state: DomainState, candidate: str, engine: str, reason: str) -> None:
    """Count one decline; log the first of each (candidate, engine, reason); tell watchers. Raises
    CoheriqDeclineError where ``COHERIQ_FAIL_ON_DECLINE`` or ``<PREFIX>_FAIL_ON_DECLINE`` says yes
    (CoheriqTypeError, counting nothing, where one says neither yes nor no)."""
    variables = ["COHERIQ_FAIL_ON_DECLINE"]
    if state.env_prefix:
        variables.append(f"{state.env_prefix}_FAIL_ON_DECLINE")
    strict = [v for v in variables if environment_flag(v, _DECLINES_ARE_ERRORS)]
    key = (candidate, engine, reason)
    with _lock:
        count = state.declines.get(key, 0)
        state.declines[key] = count + 1
    if strict:
        raise CoheriqDeclineError(
            f"Engine {engine!r} of domain {state.name!r} declined a call of {candidate!r}: "
            f"{ended(reason)} Declines are errors here "
            f"({strict[0]}={_environ.get(strict[0], '').strip()}); unset it to let the next "
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


_DECLINES_ARE_ERRORS = (
    "to make every decline an error",
    "to let the next implementation run a declined call",
)


@after_fork_in_child
def _reinit_lock_in_child() -> None:
    # A thread of the parent may have held the lock when it forked.
    global _lock
    _lock = _thread.RLock()
