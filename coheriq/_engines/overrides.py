"""Checking, once per engine class, that each override accepts every call its candidate accepts.

A call through a proxy is bound against the candidate's signature: an override
that lacks a parameter, makes one keyword-only or positional-only, drops a
default, or requires a parameter the candidate does not have would fail (or,
worse, behave differently) only under that engine. The check compares the two
signatures when the engine class is created and reports every difference, as a
:class:`~coheriq.exceptions.CoheriqSignatureWarning` or, in strict mode, as a
:class:`~coheriq.exceptions.CoheriqEngineError`.

Extra optional parameters, ``*args``/``**kwargs`` catch-alls and callables whose
signature cannot be read (some built-ins) are accepted.
"""

from __future__ import annotations

import os

from .. import _stdlib
from .._call.marked import alternate_constructors
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
    CoheriqTypeError,
    did_you_mean,
)

if TYPE_CHECKING:
    from inspect import Signature
    from typing import Any

__all__ = ["check_exception_class", "check_override", "incompatibilities"]

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
    if is_class and isinstance(override, type):
        for problem in _constructor_problems(candidate, reference, override):
            _report(domain, engine, mixin, candidate, problem)
    is_method = not is_class and isinstance(override, (FunctionType, classmethod))
    asynchrony = [] if is_class else _asynchrony(reference, _callable_of(override))
    if not asynchrony and (
        not is_class and _same_parameters(reference, _callable_of(override), skip=is_method)
    ):
        return  # the usual case, decided without building Signature objects
    try:  # (inspect is imported here: ``import coheriq`` need not pay for it)
        wanted = _stdlib.signature(reference)
        # The override's own parameters: a method decorated with functools.wraps
        # (to take the candidate's docstring) would otherwise show the candidate's.
        given = _stdlib.signature(_callable_of(override), follow_wrapped=False)
    except (TypeError, ValueError):  # no introspectable signature: nothing to compare
        return
    if is_method:
        # A function in a class body is a method (the instance fills its first
        # parameter), and so is a classmethod (the class does).
        given = given.replace(parameters=list(given.parameters.values())[1:])
    problems = asynchrony + incompatibilities(wanted, given)
    if not problems:
        return
    what = f"the constructor of class candidate {candidate!r}" if is_class else repr(candidate)
    _report(
        domain,
        engine,
        mixin,
        candidate,
        f"overrides {what} with a signature "
        f"that cannot accept every call the candidate accepts: {'; '.join(problems)}. "
        f"Candidate: {candidate}{wanted}; override: {candidate}{given}. Make the override's "
        "parameters match.",
    )


def _report(domain: Any, engine: str, mixin: bool, candidate: str, problem: str) -> None:
    """Warn of ``problem`` with an engine's override, or raise it in strict mode."""
    message = f"Engine {'mixin ' if mixin else ''}{engine!r} of domain {domain.name!r} {problem}"
    if domain.strict or strict_from_environment():
        raise CoheriqEngineError(message)
    import warnings  # on the warning path only: not imported by `import coheriq`

    warnings.warn(
        CoheriqSignatureWarning(
            message + f" (Set {STRICT_ENV}=1 to make this an error.)", engine, candidate
        ),
        stacklevel=outside_coheriq()[1],
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
    if isinstance(theirs, classmethod):  # cls is filled in, not passed
        wanted = wanted.replace(parameters=list(wanted.parameters.values())[1:])
        given = given.replace(parameters=list(given.parameters.values())[1:])
    return incompatibilities(wanted, given)


_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off"})


def strict_from_environment() -> bool:
    """Whether ``COHERIQ_STRICT`` asks for strict checks (``1``/``true``/``yes``/``on``).

    Raises:
        CoheriqTypeError: Its value is none of those, nor ``0``/``false``/``no``/``off``
            or empty.
    """
    value = os.environ.get(STRICT_ENV, "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise CoheriqTypeError(
        f"The environment variable {STRICT_ENV} is {value!r}; set it to 1, true, yes or on "
        "for strict signature checks, or to 0, false, no, off or nothing for warnings."
    )


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
