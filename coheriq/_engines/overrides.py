"""Checking, once per engine class, that each override accepts every call its candidate accepts.

A call through a proxy is bound against the candidate's signature: an override
that lacks a parameter, makes one keyword-only or positional-only, drops a
default, or requires a parameter the candidate does not have would fail (or,
worse, behave differently) only under that engine. The check compares the two
signatures when the engine class is created and reports every difference, as a
:class:`~coheriq.exceptions.CoheriqSignatureWarning` or, in strict mode, as a
:class:`~coheriq.exceptions.CoheriqEngineError`.

The override's parameters are read as a call through the engine meets them: a
method's without the one that receives the instance (``self``; a decorator's
generic ``def wrapper(*args, **kwargs)`` takes it in its ``*args``), a
candidate's proxy (delegation) as its candidate's, a :class:`functools.partial`
or :class:`functools.partialmethod` as its function's less what it binds.

Extra optional parameters, ``*args``/``**kwargs`` catch-alls and callables whose
signature cannot be read (some built-ins) are accepted.
"""

from __future__ import annotations

import sys
from functools import partial, partialmethod

from .. import _stdlib
from .._call.marked import alternate_constructors
from .._call.proxy import candidate_of
from .._stdlib import (
    CO_COROUTINE,
    CO_VARARGS,
    CO_VARKEYWORDS,
    TYPE_CHECKING,
    FunctionType,
    code_flags,
    outside_coheriq,
)
from ..exceptions import (
    CoheriqEngineError,
    CoheriqSignatureWarning,
    did_you_mean,
    listing,
)
from .declines import DecliningMethod, environment_flag

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping
    from inspect import Signature
    from typing import Any

__all__ = [
    "check_exception_class",
    "check_late_overrides",
    "check_override",
    "engine_label",
    "incompatibilities",
    "override_problems",
    "strict_for",
    "warn",
]

STRICT_ENV = "COHERIQ_STRICT"


def check_override(
    *,
    domain: Any,
    engine: str,
    mixin: bool = False,
    candidate: str,
    reference: Any,
    override: Any,
    is_class: bool,
) -> None:
    """Compare one override with its candidate; warn, or raise in strict mode.

    Args:
        domain: The domain (its ``name`` and ``strict`` are read).
        engine: The engine's name (an unnamed mixin's class name).
        mixin: Whether the class is an unnamed mixin.
        candidate: The candidate's name.
        reference: The reference implementation (function or class).
        override: The value in the engine's class body.
        is_class: Whether the candidate is a class (constructors are compared).

    Raises:
        CoheriqEngineError: In strict mode, when the override is incompatible.
    """
    for problem in override_problems(
        candidate=candidate, reference=reference, override=override, is_class=is_class
    ):
        _report(domain, engine, mixin, candidate, problem)


def override_problems(
    *, candidate: str, reference: Any, override: Any, is_class: bool
) -> list[str]:
    """What is wrong with one override of ``candidate``, as sentences.

    Each continues "Engine 'fast' of domain 'mylib' " (see :func:`engine_label`)
    and suggests the fix. The arguments are those of :func:`check_override`.
    """
    problems: list[str] = []
    if is_class and isinstance(override, type):
        problems += _constructor_problems(candidate, reference, override)
    asynchrony = [] if is_class else _asynchrony(reference, _code_behind(override))
    if not asynchrony and (
        not is_class and _same_parameters(reference, _callable_of(override), skip=_binds(override))
    ):
        return problems  # the usual case, decided without building Signature objects
    try:  # (inspect is imported here: ``import coheriq`` need not pay for it)
        wanted = _stdlib.signature(reference)
        if is_class:
            given = _stdlib.signature(override, follow_wrapped=False)
            receiving: list[str] = []
        else:
            given, receiving = _called_with(override)
    except (TypeError, ValueError):  # no introspectable signature: nothing to compare
        return problems
    found = asynchrony + receiving + incompatibilities(wanted, given)
    if not found:
        return problems
    what = f"the constructor of class candidate {candidate!r}" if is_class else repr(candidate)
    return [
        *problems,
        f"overrides {what} with a signature "
        f"that cannot accept every call the candidate accepts: {'; '.join(found)}. "
        f"Candidate: {candidate}{wanted}; override: {candidate}{given}. Make the override's "
        "parameters match.",
    ]


def engine_label(domain: Any, engine: str, mixin: bool) -> str:
    """How a message names an engine: "Engine 'fast' of domain 'mylib'"."""
    return f"Engine {'mixin ' if mixin else ''}{engine!r} of domain {domain.name!r}"


def strict_for(domain: Any) -> bool:
    """Whether a doubtful override of ``domain``'s is an error: the domain is strict,
    or ``COHERIQ_STRICT`` asks for it (see :func:`strict_from_environment`)."""
    return bool(domain.strict) or strict_from_environment()


def _late_verdict(
    domain: Any, cls: Any, candidate: str, reference: Any, is_class: bool
) -> tuple[str, str | None]:
    """``(engine, why it is refused or None)`` for ``cls``'s override of ``candidate``.

    What is not an error (outside strict mode) is warned of now.
    """
    engine, mixin = cls.__coheriq_name__ or cls.__qualname__, cls.__coheriq_name__ is None
    override = cls.__dict__[candidate]
    if isinstance(override, DecliningMethod):
        override = override.function
    errors: list[str] = []
    if is_class:
        try:
            check_exception_class(engine, candidate, override, reference, domain)
        except CoheriqEngineError as error:
            errors.append(str(error))
    strict = strict_for(domain)
    for problem in override_problems(
        candidate=candidate, reference=reference, override=override, is_class=is_class
    ):
        message = f"{engine_label(domain, engine, mixin)} {problem}"
        if strict:
            errors.append(f"{message} It is an error because {_strictness(domain)}.")
        else:
            warn(f"{message} (Set {STRICT_ENV}=1 to make this an error.)", engine, candidate)
    return engine, " ".join(errors) or None


def check_late_overrides(
    domain: Any, candidate: str, reference: Any, classes: list[Any], in_use: Collection[Any]
) -> None:
    """Check the overrides of ``candidate``, marked after the engine classes ``classes``.

    A candidate is marked after the engines were defined by a module imported
    lazily (see :meth:`~coheriq.AccelerationDomain.declare`), or by one that runs
    again. A problem that would have been an error when the engine class was
    created (in strict mode; an exception class that does not derive from the
    library's) refuses the *engine* here, not the module that marks the
    candidate: the module imports, a :class:`~coheriq.CoheriqSignatureWarning`
    says so, and the engine, with every engine that takes the override from it,
    cannot start (see :func:`coheriq._engines.meta.refusal`). An override that
    fits the candidate marked again is no longer refused. Other problems are
    warned of, as when the engine class is created.

    Args:
        domain: The domain's state (its ``name`` and ``strict`` are read).
        candidate: The candidate's name.
        reference: Its reference implementation, just marked.
        classes: The domain's engine classes.
        in_use: Those of them started, or starting: they cannot be refused.

    Raises:
        CoheriqEngineError: An engine to refuse has started already, and runs
            the override.
    """
    is_class = isinstance(reference, type)
    verdicts = [
        (cls, *_late_verdict(domain, cls, candidate, reference, is_class))
        for cls in classes
        if candidate in cls.__coheriq_overrides__
    ]
    for cls, _, reason in verdicts:  # first, so that nothing is refused if this raises
        running = [k for k in in_use if _runs_override_of(k, cls, candidate)]
        if reason is not None and running:
            names = listing(k.__coheriq_name__ or k.__qualname__ for k in running)
            raise CoheriqEngineError(
                f"{reason} Candidate {candidate!r} is marked after the engine was defined, "
                f"but engine {names}, which runs this override, has started already, so the "
                "engine cannot be refused instead of the candidate. Fix the override, or do "
                "not choose that engine."
            )
    for cls, engine, reason in verdicts:
        refused = dict(cls.__dict__.get("__coheriq_refused__", {}))
        if reason is None:
            if refused.pop(candidate, None) is not None:  # fits the candidate marked again
                type.__setattr__(cls, "__coheriq_refused__", refused)
            continue
        refused[candidate] = reason
        type.__setattr__(cls, "__coheriq_refused__", refused)
        warn(
            f"{reason} Candidate {candidate!r} is marked after the engine was defined (its "
            "module was imported, or ran again, later), so the engine is refused, not the "
            "module: choosing it raises CoheriqEngineStartError. Fix the override.",
            engine,
            candidate,
        )


def _runs_override_of(engine: Any, cls: Any, candidate: str) -> bool:
    """Whether engine class ``engine`` runs ``cls``'s override of ``candidate``: the
    first class along its MRO that overrides it is ``cls`` (as
    :func:`coheriq._engines.meta.supplier` finds)."""
    for klass in engine.__mro__:
        if candidate in getattr(klass, "__coheriq_overrides__", ()):
            return klass is cls
    return False


def _strictness(domain: Any) -> str:
    """Why a signature problem of ``domain``'s is an error, in a few words."""
    if domain.strict:
        return f"domain {domain.name!r} is strict"
    return f"{STRICT_ENV} is set"


def _report(domain: Any, engine: str, mixin: bool, candidate: str, problem: str) -> None:
    """Warn of ``problem`` with an engine's override, or raise it in strict mode."""
    message = f"{engine_label(domain, engine, mixin)} {problem}"
    if strict_for(domain):
        raise CoheriqEngineError(message)
    warn(message + f" (Set {STRICT_ENV}=1 to make this an error.)", engine, candidate)


def warn(message: str, engine: str, candidate: str) -> None:
    """Issue a :class:`~coheriq.CoheriqSignatureWarning`, attributed to the code outside coheriq."""
    import warnings  # on the warning path only: not imported by `import coheriq`

    warnings.warn(
        CoheriqSignatureWarning(message, engine, candidate), stacklevel=outside_coheriq()[1]
    )


def _constructor_problems(candidate: str, library: type, engine: type) -> list[str]:
    """What is wrong with the alternate constructors of an engine's class, as sentences.

    Under the engine, a classmethod or staticmethod read from the library's class
    is the engine's class's where it defines one (see
    :class:`~coheriq._call.marked.AlternateConstructor`): one that cannot take the
    library's calls, or that is of another kind, is a problem; so is one whose
    name is close to, but not, the name of one of the library's.
    """
    wanted = alternate_constructors(library)
    own = [k for k in engine.__mro__[:-1] if k not in library.__mro__]
    defined: dict[str, Any] = {}
    for klass in reversed(own):
        defined.update(klass.__dict__)
    problems = []
    for name in wanted:
        if name not in defined:
            continue
        theirs, ours = _raw_attribute(library, name), defined[name]
        kind = type(theirs).__name__
        if type(ours) is not type(theirs):
            problems.append(
                f"gives class candidate {candidate!r} a {name!r} that is a "
                f"{type(ours).__name__}, where the library's class has a {kind}. Make it a "
                f"{kind} too: under the engine, {candidate}.{name} is the engine's."
            )
            continue
        found = _method_incompatibilities(theirs, ours)
        if found:
            problems.append(
                f"gives class candidate {candidate!r} a {kind} {name!r} that cannot accept "
                f"every call the library's accepts: {'; '.join(found)}. Make its parameters "
                "match: under the engine, "
                f"{candidate}.{name} is the engine's."
            )
    for name, value in defined.items():
        if (
            isinstance(value, (classmethod, staticmethod))
            and name not in wanted
            and not (name.startswith("__") and name.endswith("__"))
        ):
            close = did_you_mean(name, wanted)
            if close:
                problems.append(
                    f"gives class candidate {candidate!r} a {type(value).__name__} {name!r}, "
                    f"which the library's class does not have, so no call of "
                    f"{candidate}.{name} reaches it.{close}"
                )
    return problems


def _raw_attribute(cls: type, name: str) -> Any:
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return None


def _method_incompatibilities(theirs: Any, ours: Any) -> list[str]:
    """How a classmethod or staticmethod ``ours`` rejects calls that ``theirs`` takes."""
    try:
        wanted = _stdlib.signature(theirs.__func__)
        given = _stdlib.signature(ours.__func__, follow_wrapped=False)
    except (TypeError, ValueError):
        return []
    receiving: list[str] = []
    if isinstance(theirs, classmethod):  # cls is filled in, not passed
        wanted, _ = _without_receiver(wanted)
        given, receiving = _without_receiver(given)
    return receiving + incompatibilities(wanted, given)


def strict_from_environment() -> bool:
    """Whether ``COHERIQ_STRICT`` asks for strict checks (``1``/``true``/``yes``/``on``).

    Raises:
        CoheriqTypeError: Its value is none of those, nor ``0``/``false``/``no``/``off``
            or empty.
    """
    # One reading of yes and no for coheriq's switches (COHERIQ_FAIL_ON_DECLINE too).
    return environment_flag(STRICT_ENV, ("for strict signature checks", "for warnings"))


def _same_parameters(reference: Any, override: Any, *, skip: bool) -> bool:
    """Whether two plain functions have the same parameters (names, kinds, defaults).

    ``skip`` drops the override's first parameter (``self`` or ``cls``).
    """
    if type(reference) is not FunctionType or type(override) is not FunctionType:
        return False
    ref, over = reference.__code__, override.__code__
    shift = int(skip)
    if (
        over.co_argcount - shift != ref.co_argcount
        or max(over.co_posonlyargcount - shift, 0) != ref.co_posonlyargcount
        or over.co_kwonlyargcount != ref.co_kwonlyargcount
        or over.co_flags & _VARIADIC != ref.co_flags & _VARIADIC
    ):
        return False
    count = ref.co_argcount + ref.co_kwonlyargcount + bin(ref.co_flags & _VARIADIC).count("1")
    if over.co_varnames[shift : shift + count] != ref.co_varnames[:count]:
        return False
    ref_defaults, over_defaults = reference.__defaults__ or (), override.__defaults__ or ()
    ref_kw, over_kw = reference.__kwdefaults__ or {}, override.__kwdefaults__ or {}
    return (
        len(ref_defaults) == len(over_defaults)
        and all(map(_same, ref_defaults, over_defaults))
        and ref_kw.keys() == over_kw.keys()
        and all(_same(ref_kw[k], over_kw[k]) for k in ref_kw)
    )


_VARIADIC = CO_VARARGS | CO_VARKEYWORDS


def _asynchrony(reference: Any, override: Any) -> list[str]:
    """A sentence if one of the two is a coroutine function and the other is not."""
    candidate_async, override_async = (
        bool(code_flags(f) & CO_COROUTINE) for f in (reference, override)
    )
    if candidate_async and not override_async:
        return ["the candidate is an async def function, which callers await; the override is not"]
    if override_async and not candidate_async:
        return ["the override is an async def function, which the candidate's callers do not await"]
    return []


def _callable_of(override: Any) -> Any:
    return override.__func__ if isinstance(override, (staticmethod, classmethod)) else override


def _binds(override: Any) -> bool:
    """Whether a call of ``override`` through the engine's instance passes something first.

    A function in a class body is a method (the instance fills its first
    parameter), and so is a classmethod (the class does); from Python 3.14 a
    :class:`functools.partial` binds like a function too. A staticmethod, a
    candidate's proxy (kept as a static member) and other callable objects
    take the caller's arguments only. (A ``partialmethod``: see :func:`_called_with`.)
    """
    if isinstance(override, (FunctionType, classmethod)):
        return True
    return sys.version_info >= (3, 14) and isinstance(override, partial)


def _called_with(override: Any) -> tuple[Signature, list[str]]:
    """The parameters that the caller's arguments meet in ``override``, and what is wrong
    with the way it receives the engine's instance (or class), as sentences.

    Read through a staticmethod or classmethod, a candidate's proxy (the compiled
    one has no signature of its own), :class:`functools.partial` and
    :class:`functools.partialmethod` objects, never through ``__wrapped__`` of a
    function of the engine's own (see :func:`_signature_of`).

    Raises:
        TypeError, ValueError: No signature can be read.
    """
    if isinstance(override, partialmethod):
        # What partialmethod.__get__ makes: its function bound to the instance (a
        # staticmethod to nothing), then given the partialmethod's own arguments.
        inner = override.func
        given = _signature_of(_callable_of(inner))
        receiving: list[str] = []
        if not isinstance(inner, staticmethod):
            given, receiving = _without_receiver(given)
        return _partial_signature(given, override.args, override.keywords), receiving
    given = _signature_of(_callable_of(override))
    return _without_receiver(given) if _binds(override) else (given, [])


def _signature_of(fn: Any) -> Signature:
    """``fn``'s signature as a call meets it.

    A candidate's proxy has its candidate's signature (through ``__wrapped__``,
    which both proxies keep); a :class:`functools.partial` has its function's, read
    the same way, less what it binds; anything else has its own: a method
    decorated with ``functools.wraps(mylib.normalize)`` (to take the candidate's
    docstring) would otherwise show the candidate's.
    """
    info = candidate_of(fn)
    if info is not None and not info.is_class:
        return _stdlib.signature(fn)  # type: ignore[no-any-return]
    if isinstance(fn, partial):
        return _partial_signature(_signature_of(fn.func), fn.args, fn.keywords)
    return _stdlib.signature(fn, follow_wrapped=False)  # type: ignore[no-any-return]


def _partial_signature(
    wrapped: Signature, args: tuple[Any, ...], keywords: Mapping[str, Any]
) -> Signature:
    """The signature of a :class:`functools.partial` of a callable whose signature is
    ``wrapped``, binding ``args`` and ``keywords``, as :mod:`inspect` computes it.

    Raises:
        ValueError: The arguments do not fit ``wrapped``.
    """

    def stand_in(*args: Any, **kwargs: Any) -> None:
        """Has the signature ``wrapped``, which inspect reads from ``__signature__``."""

    stand_in.__signature__ = wrapped  # type: ignore[attr-defined]
    return _stdlib.signature(  # type: ignore[no-any-return]
        partial(stand_in, *args, **keywords), follow_wrapped=False
    )


def _without_receiver(given: Signature) -> tuple[Signature, list[str]]:
    """``given`` without the parameter that receives the instance (or class), and
    what is wrong if it has none.

    That is its first positional parameter; a ``*args`` (a decorator's generic
    wrapper: ``def wrapper(*args, **kwargs)``) takes the instance along with the
    caller's arguments, and stays.
    """
    from inspect import Parameter

    parameters = list(given.parameters.values())
    first = parameters[0].kind if parameters else None
    if first in (Parameter.POSITIONAL_ONLY, Parameter.POSITIONAL_OR_KEYWORD):
        return given.replace(parameters=parameters[1:]), []
    if first is Parameter.VAR_POSITIONAL:
        return given, []
    return given, [
        "the override is a method, called with the engine's instance (or, for a "
        "classmethod, its class) first, but it takes no positional parameter for it; add "
        "one (self), or make the override a staticmethod"
    ]


def _code_behind(override: Any) -> Any:
    """The function whose code a call of ``override`` runs first, for its flags (async def).

    Read through staticmethod, classmethod, partial and partialmethod objects
    and candidates' proxies (to their reference implementations).
    """
    for _ in range(32):  # wrappers of wrappers, within reason
        info = candidate_of(override)
        if info is not None and not info.is_class:
            override = info.reference
        elif isinstance(override, (staticmethod, classmethod)):
            override = override.__func__
        elif isinstance(override, (partial, partialmethod)):
            override = override.func
        else:
            break
    return override


def incompatibilities(candidate: Signature, override: Signature) -> list[str]:
    """Return, as sentences, each way in which ``override`` rejects a call ``candidate`` takes."""
    from inspect import Parameter

    positional_kinds = (Parameter.POSITIONAL_ONLY, Parameter.POSITIONAL_OR_KEYWORD)
    wanted = list(candidate.parameters.values())
    given = list(override.parameters.values())
    given_by_name = {p.name: p for p in given}
    given_positional = [p for p in given if p.kind in positional_kinds]
    takes_args = any(p.kind is Parameter.VAR_POSITIONAL for p in given)
    takes_kwargs = any(p.kind is Parameter.VAR_KEYWORD for p in given)
    named_later = {p.name for p in wanted if p.kind is not Parameter.POSITIONAL_ONLY}
    problems: list[str] = []
    matched: set[str] = set()

    for i, want in enumerate(p for p in wanted if p.kind in positional_kinds):
        at = given_positional[i] if i < len(given_positional) else None
        by_name = given_by_name.get(want.name)
        if want.kind is Parameter.POSITIONAL_ONLY:
            if at is None or at.name in named_later:
                # Nothing in this position, or a parameter the candidate has further on.
                if at is not None or not takes_args:
                    problems.append(f"positional parameter {i + 1} ({want.name!r}) is missing")
                continue
            matched.add(at.name)
            problems += _default_problems(want, at)
        elif at is not None and at.name == want.name and at.kind is want.kind:
            matched.add(at.name)
            problems += _default_problems(want, at)
        elif by_name is None:
            if not (takes_args and takes_kwargs):
                problems.append(f"parameter {want.name!r} is missing")
        else:
            matched.add(by_name.name)
            problems.append(_moved(want, by_name, i, given_positional))

    for want in (p for p in wanted if p.kind is Parameter.KEYWORD_ONLY):
        have = given_by_name.get(want.name)
        if have is None or have.kind is Parameter.POSITIONAL_ONLY:
            if have is None and takes_kwargs:
                continue
            problems.append(f"keyword-only parameter {want.name!r} is missing")
            continue
        matched.add(have.name)
        problems += _default_problems(want, have)

    if any(p.kind is Parameter.VAR_POSITIONAL for p in wanted) and not takes_args:
        problems.append("the candidate takes extra positional arguments (*args), the override not")
    if any(p.kind is Parameter.VAR_KEYWORD for p in wanted) and not takes_kwargs:
        problems.append("the candidate takes extra keyword arguments (**kwargs), the override not")
    for have in given:
        variadic = have.kind in (Parameter.VAR_POSITIONAL, Parameter.VAR_KEYWORD)
        if have.name not in matched and not variadic and have.default is Parameter.empty:
            problems.append(
                f"the override requires {have.name!r}, which the candidate does not have"
            )
    return problems


def _moved(want: Any, have: Any, index: int, given_positional: list[Any]) -> str:
    from inspect import Parameter

    name = repr(want.name)
    if have.kind is Parameter.KEYWORD_ONLY:
        return (
            f"parameter {name} is keyword-only in the override, so it cannot be passed by position"
        )
    if have.kind is Parameter.POSITIONAL_ONLY:
        return (
            f"parameter {name} is positional-only in the override, so it cannot be passed by name"
        )
    where = given_positional.index(have) + 1
    return (
        f"parameter {name} is at position {where} in the override but {index + 1} in the candidate"
    )


def _default_problems(want: Any, have: Any) -> list[str]:
    from inspect import Parameter

    if want.default is Parameter.empty:
        return []
    if have.default is Parameter.empty:
        return [f"parameter {have.name!r} lost its default ({want.default!r})"]
    if not _same(want.default, have.default):
        return [
            f"parameter {have.name!r} defaults to {have.default!r} in the override but to "
            f"{want.default!r} in the candidate"
        ]
    return []


def _same(a: object, b: object) -> bool:
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:  # arrays and the like: cannot tell, so do not complain
        return True


def bypassed_classes(domain: Any, cls: Any) -> list[str]:
    """What ``coheriq check`` warns of in engine ``cls``: classes its library can bypass.

    A library class whose own ``__new__`` returns a subclass for some arguments
    (``Shape("circle")`` builds a ``Circle``) builds that subclass itself, with
    ``object.__new__``. An engine that overrides the subclass's candidate but
    not the parent's is bypassed there. Returns one sentence per such pair.
    """
    engine = cls.__coheriq_name__ or cls.__qualname__
    classes = {
        name: domain.engines.reference_of(name)
        for name, is_class in domain.candidate_kinds.items()
        if is_class and domain.engines.reference_of(name) is not None
    }
    overridden = {  # by the engine or a mixin it derives from
        name
        for name in classes
        if any(name in k.__coheriq_overrides__ for k in cls.__mro__[:-2])  # not the reference
    }
    warnings = []
    for name in sorted(overridden):
        for parent in sorted(set(classes) - overridden):
            library, base = classes[name], classes[parent]
            builds_itself = any("__new__" in vars(k) for k in base.__mro__ if k is not object)
            if base in library.__mro__[1:] and builds_itself:
                warnings.append(
                    f"Engine {engine!r} of domain {domain.name!r} overrides class candidate "
                    f"{name!r} but not {parent!r}, whose own __new__ may build a {name!r} "
                    f"itself (with object.__new__), bypassing the engine's class. Override "
                    f"{parent!r} too, with a __new__ that builds the engine's {name!r}, or "
                    "neither."
                )
    return warnings


def check_exception_class(
    engine: str, candidate: str, value: type, library: Any, domain: Any
) -> None:
    """Refuse an engine's class for an exception candidate that does not derive from it.

    ``except ParseError`` matches by the real MRO, not by ``isinstance``: an
    engine's error that is no subclass of the library's would escape every
    handler written for it.

    Raises:
        CoheriqEngineError: The library's class is an exception and ``value``
            does not derive from it.
    """
    if (
        isinstance(library, type)
        and issubclass(library, BaseException)
        and library not in value.__mro__
    ):
        raise CoheriqEngineError(
            f"Engine {engine!r} overrides exception class {candidate!r} of domain "
            f"{domain.name!r} with {value.__qualname__!r}, which does not derive from it: "
            f"`except {candidate}` would not catch the engine's errors (except follows the "
            f"MRO, not isinstance). Derive the engine's class from the library's "
            f"{candidate}."
        )
