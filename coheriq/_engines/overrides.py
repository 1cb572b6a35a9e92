"""Whether each override of an engine accepts every call its candidate accepts.

Checked when the engine class is made (or, for a candidate marked later, then), with the
override's parameters as a call through the engine meets them; each difference is a
:class:`~coheriq.CoheriqSignatureWarning`, or a :class:`~coheriq.CoheriqEngineError` in
strict mode. Extra optional parameters, catch-alls and unreadable signatures pass.
"""

from __future__ import annotations

import sys
from functools import partial, partialmethod

from .. import _stdlib
from .._call.marked import alternate_constructors, raw_attribute
from .._call.proxy import candidate_of
from .._names import environment_flag
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
from .declines import DecliningMethod, function_of

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping
    from inspect import Signature
    from typing import Any

STRICT_ENV = "COHERIQ_STRICT"


def check_overrides(
    domain: Any, engine: str, mixin: bool, namespace: Mapping[str, Any], overrides: frozenset[str]
) -> None:
    """Compare each override in the class body ``namespace`` of engine (or ``mixin``) ``engine``
    with its candidate; warn of each problem, or raise CoheriqEngineError in strict mode."""
    for candidate in sorted(overrides):
        reference = domain.engines.reference_of(candidate)
        if reference is None:
            continue  # declared, not imported yet: checked when it is marked
        is_class = domain.candidate_kinds[candidate]
        problems = override_problems(candidate, reference, namespace[candidate], is_class)
        if problems and (errors := _judged(domain, engine, mixin, candidate, problems)):
            raise CoheriqEngineError(errors[0])


def override_problems(candidate: str, reference: Any, override: Any, is_class: bool) -> list[str]:
    """What is wrong with one override of ``candidate``: sentences that continue
    "Engine 'fast' of domain 'mylib' " and say the fix."""
    problems: list[str] = []
    if is_class and isinstance(override, type):
        problems += _constructor_problems(candidate, reference, override)
    asynchrony = [] if is_class else _asynchrony(reference, _code_behind(override))
    if not asynchrony and (
        not is_class and _same_parameters(reference, function_of(override), skip=_binds(override))
    ):
        return problems  # the usual case, decided without building Signature objects
    try:
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


def _judged(
    domain: Any, engine: str, mixin: bool, candidate: str, problems: list[str]
) -> list[str]:
    """``problems`` of an engine's override as messages: in strict mode returned, else warned of
    (and none returned). CoheriqTypeError where ``COHERIQ_STRICT`` says neither yes nor no."""
    strict = domain.strict or environment_flag(
        STRICT_ENV, ("for strict signature checks", "for warnings")
    )
    label = f"Engine {'mixin ' if mixin else ''}{engine!r} of domain {domain.name!r}"
    if strict:
        return [f"{label} {problem}" for problem in problems]
    for problem in problems:
        warn(f"{label} {problem} (Set {STRICT_ENV}=1 to make this an error.)", engine, candidate)
    return []


def _late_verdict(
    domain: Any, cls: Any, candidate: str, reference: Any, is_class: bool
) -> tuple[str, str | None]:
    """``(engine, why it is refused or None)`` for ``cls``'s override of ``candidate``;
    what is not an error is warned of now."""
    engine = cls.__coheriq_name__ or cls.__qualname__
    override = cls.__dict__[candidate]
    if isinstance(override, DecliningMethod):
        override = override.function
    errors: list[str] = []
    if is_class:
        try:
            check_exception_class(engine, candidate, override, reference, domain)
        except CoheriqEngineError as error:
            errors.append(str(error))
    problems = override_problems(candidate, reference, override, is_class)
    why = f"domain {domain.name!r} is strict" if domain.strict else f"{STRICT_ENV} is set"
    for message in _judged(domain, engine, cls.__coheriq_name__ is None, candidate, problems):
        errors.append(f"{message} It is an error because {why}.")
    return engine, " ".join(errors) or None


def check_late_overrides(
    domain: Any, candidate: str, reference: Any, classes: list[Any], in_use: Collection[Any]
) -> None:
    """Check the overrides of ``candidate`` in ``classes``, engine classes of ``domain`` (a state)
    made before it was marked (by a lazy module, or one run again). What would have failed the
    class statement refuses the engine instead (:func:`~coheriq._engines.meta.refusal`), with a
    warning, so that the marking module imports; a fitting override is no longer refused; other
    problems are warned of. CoheriqEngineError where an engine to refuse is in ``in_use``
    (started, or starting) and runs the override."""
    is_class = isinstance(reference, type)
    verdicts = [
        (cls, *_late_verdict(domain, cls, candidate, reference, is_class)) for cls in classes
    ]
    for cls, _, reason in verdicts:  # first, so that nothing is refused if this raises
        running = [k for k in in_use if _supplier(k, candidate) is cls]
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


def _supplier(engine: Any, candidate: str) -> Any:
    """meta.supplier, without its fallback (meta imports this module, not the reverse)."""
    mro = engine.__mro__
    return next((k for k in mro if candidate in getattr(k, "__coheriq_overrides__", ())), None)


def warn(message: str, engine: str, candidate: str) -> None:
    """Issue a :class:`~coheriq.CoheriqSignatureWarning`, attributed to the code outside coheriq."""
    import warnings  # on the warning path only

    warnings.warn(
        CoheriqSignatureWarning(message, engine, candidate), stacklevel=outside_coheriq()[1]
    )


def _constructor_problems(candidate: str, library: type, engine: type) -> list[str]:
    """What is wrong with the classmethods and staticmethods of an engine's class, which
    stand in for the library's under the engine (see ``marked.AlternateConstructor``): one
    of another kind, one that rejects the library's calls, a name close to theirs."""
    wanted = alternate_constructors(library)
    own = [k for k in engine.__mro__[:-1] if k not in library.__mro__]
    defined = {name: value for klass in reversed(own) for name, value in vars(klass).items()}
    problems = []
    for name in wanted:
        if name not in defined:
            continue
        theirs, ours = raw_attribute(library, name), defined[name]
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
                f"match: under the engine, {candidate}.{name} is the engine's."
            )
    for name, value in defined.items():
        if (
            isinstance(value, (classmethod, staticmethod))
            and name not in wanted
            and not (name.startswith("__") and name.endswith("__"))
            and (close := did_you_mean(name, wanted))
        ):
            problems.append(
                f"gives class candidate {candidate!r} a {type(value).__name__} {name!r}, "
                f"which the library's class does not have, so no call of "
                f"{candidate}.{name} reaches it.{close}"
            )
    return problems


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


def _same_parameters(reference: Any, override: Any, *, skip: bool) -> bool:
    """Whether two plain functions have the same parameters (names, kinds, defaults),
    leaving out the override's first where ``skip`` (``self``)."""
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
    candidate_async = bool(code_flags(reference) & CO_COROUTINE)
    if candidate_async == bool(code_flags(override) & CO_COROUTINE):
        return []
    if candidate_async:
        return ["the candidate is an async def function, which callers await; the override is not"]
    return ["the override is an async def function, which the candidate's callers do not await"]


def _binds(override: Any) -> bool:
    """Whether a call of ``override`` through the engine's instance passes the instance (a
    function; a ``partial`` from 3.14) or the class (a classmethod) first."""
    if isinstance(override, (FunctionType, classmethod)):
        return True
    return sys.version_info >= (3, 14) and isinstance(override, partial)


def _called_with(override: Any) -> tuple[Signature, list[str]]:
    """The parameters the caller's arguments meet in ``override``, and what is wrong with
    the way it receives the engine's instance (or class), as sentences. TypeError or
    ValueError where no signature can be read."""
    if isinstance(override, partialmethod):  # its function, bound, given its arguments
        inner = override.func
        given = _signature_of(function_of(inner))
        receiving: list[str] = []
        if not isinstance(inner, staticmethod):
            given, receiving = _without_receiver(given)
        return _partial_signature(given, override.args, override.keywords), receiving
    given = _signature_of(function_of(override))
    return _without_receiver(given) if _binds(override) else (given, [])


def _signature_of(fn: Any) -> Signature:
    """``fn``'s signature as a call meets it: a candidate's proxy's is its candidate's, a
    ``partial``'s its function's less what it binds; anything else's its own, not through
    ``__wrapped__`` (a method made with ``functools.wraps(mylib.normalize)`` is not that)."""
    info = candidate_of(fn)
    if info is not None and not info.is_class:
        return _stdlib.signature(fn)  # type: ignore[no-any-return]
    if isinstance(fn, partial):
        return _partial_signature(_signature_of(fn.func), fn.args, fn.keywords)
    return _stdlib.signature(fn, follow_wrapped=False)  # type: ignore[no-any-return]


def _partial_signature(
    wrapped: Signature, args: tuple[Any, ...], keywords: Mapping[str, Any]
) -> Signature:
    """What :mod:`inspect` gives for a ``partial`` binding ``args`` and ``keywords`` of a
    callable whose signature is ``wrapped``; ValueError where they do not fit."""

    def stand_in(*args: Any, **kwargs: Any) -> None:  # inspect reads its __signature__
        pass

    stand_in.__signature__ = wrapped  # type: ignore[attr-defined]
    return _stdlib.signature(  # type: ignore[no-any-return]
        partial(stand_in, *args, **keywords), follow_wrapped=False
    )


def _without_receiver(given: Signature) -> tuple[Signature, list[str]]:
    """``given`` without its first positional parameter, which receives the instance (or
    class), and what is wrong where it has none; a leading ``*args`` (a decorator's
    wrapper) takes the instance too, and stays."""
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
    """The function whose code a call of ``override`` runs first (for its flags), through
    staticmethods, classmethods, partials and candidates' proxies."""
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
            if at is None or at.name in named_later:  # nothing there, or one named later
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
            if by_name.kind is Parameter.KEYWORD_ONLY:
                moved = "is keyword-only in the override, so it cannot be passed by position"
            elif by_name.kind is Parameter.POSITIONAL_ONLY:
                moved = "is positional-only in the override, so it cannot be passed by name"
            else:
                where = given_positional.index(by_name) + 1
                moved = f"is at position {where} in the override but {i + 1} in the candidate"
            problems.append(f"parameter {want.name!r} {moved}")

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
    """What ``coheriq check`` warns of in engine ``cls``, a sentence per pair: a class
    candidate it overrides whose library parent, not overridden, has a ``__new__`` of its
    own that may build the subclass itself (``Shape("circle")``), bypassing the engine."""
    engine = cls.__coheriq_name__ or cls.__qualname__
    classes = {
        name: domain.engines.reference_of(name)
        for name, is_class in domain.candidate_kinds.items()
        if is_class and domain.engines.reference_of(name) is not None
    }
    own = cls.__mro__[:-2]  # the engine and the mixins it derives from: not the reference
    overridden = {name for name in classes if any(name in k.__coheriq_overrides__ for k in own)}
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
    """Raise CoheriqEngineError where ``library`` is an exception class and the engine's
    ``value`` does not derive from it (``except`` follows the MRO, not ``isinstance``)."""
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
