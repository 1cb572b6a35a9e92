"""EngineMeta, the metaclass of a domain's reference class and of every engine class.

Creating a class checks it against its domain, records the candidates its own body
defines (``__coheriq_overrides__``) and registers it; which implementation an engine
runs is then attribute lookup along its MRO (:func:`supplier`).
"""

from __future__ import annotations

from .._call.proxy import candidate_of
from .._names import REFERENCE, check_name
from .._stdlib import TYPE_CHECKING
from ..exceptions import (
    CoheriqEngineError,
    CoheriqEngineInheritanceError,
    CoheriqEngineNameError,
    CoheriqTypeError,
    did_you_mean,
    ended,
    listing,
)

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, Protocol

    class _Engines(Protocol):  # what the metaclass reads of a domain's engine registry
        def reference_of(self, candidate: str) -> Any: ...  # None: not imported yet
        def check_name_free(self, name: str) -> None: ...
        def register(self, cls: EngineMeta) -> None: ...

    class _Domain(Protocol):  # what the metaclass reads of a domain
        name: str

        @property
        def engines(self) -> _Engines: ...
        @property
        def candidate_kinds(self) -> Mapping[str, bool]: ...  # name -> is a class
        @property
        def declaring_packages(self) -> tuple[str, ...]: ...
        def import_declaring_packages(self) -> dict[str, str | None]: ...  # -> why not

    # For the type checker only: annotations in the metaclass's body would be what its
    # classes, lacking annotations of their own, report as ``__annotations__``.
    class _EngineClassAttributes:
        __coheriq_domain__: _Domain
        __coheriq_name__: str | None
        __coheriq_overrides__: frozenset[str]
        __coheriq_declining__: frozenset[str]
        __coheriq_conversions__: Any  # a conversions.Table, or None

else:
    _EngineClassAttributes = object


class EngineMeta(type, _EngineClassAttributes):
    """Metaclass of a domain's reference class and of every engine class.

    Create an engine by subclassing :func:`coheriq.engine_class`:

    >>> doc = coheriq.AccelerationDomain("doc_engine_meta")
    >>> @doc.acceleration_candidate
    ... def normalize(xs):
    ...     return [x / sum(xs) for x in xs]
    >>> _ = doc.materialize()
    >>> class Fast(coheriq.engine_class("doc_engine_meta"), name="fast"):
    ...     def normalize(self, xs):
    ...         inverse = 1 / sum(xs)
    ...         return [x * inverse for x in xs]
    >>> type(Fast) is coheriq.EngineMeta
    True

    Class keywords:
        name: The engine's name in its domain. Without it the class is an unnamed
            mixin: usable as a base of other engines, not enabled by name.

    The domain's reference class is created by :meth:`AccelerationDomain.materialize`, never
    directly. An engine whose override a candidate marked later (a lazily imported module's) finds
    wanting, where defining the engine then would have failed, is refused: starting it raises
    :class:`~coheriq.CoheriqEngineStartError`, which says why.
    """

    def __new__(
        mcls,
        cls_name: str,
        bases: tuple[type, ...],
        namespace: dict[str, Any],
        /,
        *,
        name: str | None = None,
        conversions: Any = None,
        results: str | None = None,
        accepts_library_types: Any = None,
        **kwargs: Any,
    ) -> EngineMeta:
        reference_of = namespace.pop("__coheriq_reference_of__", None)
        if reference_of is not None:
            domain: _Domain = reference_of
            name = REFERENCE
        else:
            domain = _domain_of_bases(cls_name, bases)
            if name is not None:
                check_name(name, f"engine name of class {cls_name!r}", CoheriqEngineNameError)
                if name == REFERENCE:
                    raise CoheriqEngineError(
                        f"Engine class {cls_name!r} of domain {domain.name!r} cannot be named "
                        f"{REFERENCE!r}: that name is reserved for the domain's own "
                        "implementations. Choose another name."
                    )
                domain.engines.check_name_free(name)
            _check_mro(cls_name, bases, domain)
            _check_class_keywords(cls_name, bases, kwargs)
        overrides = _check_body(cls_name, namespace, domain, reference=reference_of is not None)
        if reference_of is None:
            _check_delegation(cls_name, namespace, bases, domain)
            from .overrides import check_overrides  # only defining an engine needs it

            check_overrides(domain, name or cls_name, name is None, namespace, overrides)
        namespace["__coheriq_domain__"] = domain
        namespace["__coheriq_name__"] = name
        namespace["__coheriq_overrides__"] = overrides
        namespace["__coheriq_conversions__"] = _conversions(
            cls_name, bases, conversions, results, accepts_library_types
        )
        cls = super().__new__(mcls, cls_name, bases, namespace, **kwargs)
        if reference_of is None:
            _wrap_declining(cls, overrides)
            domain.engines.register(cls)
        return cls

    def __init__(cls, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args[:3])  # the class keywords were __new__'s

    def __repr__(cls) -> str:
        domain = cls.__coheriq_domain__.name
        where = f"{cls.__module__}.{cls.__qualname__}"
        if cls.__coheriq_name__ == REFERENCE:
            return f"<reference class of coheriq domain {domain!r}>"
        if cls.__coheriq_name__ is None:
            return f"<engine mixin {where} of coheriq domain {domain!r}>"
        return f"<engine {cls.__coheriq_name__!r} of coheriq domain {domain!r}: {where}>"


def _conversions(
    cls_name: str, bases: tuple[type, ...], conversions: Any, results: Any, accepts: Any
) -> Any:
    """The conversions table of a new engine class, or None: its class keywords (the
    module that reads them imported only where an engine declares some) and its bases'."""
    given = conversions is not None or results is not None or accepts is not None
    if not given and all(getattr(b, "__coheriq_conversions__", None) is None for b in bases):
        return None
    from .conversions import declare

    return declare(cls_name, bases, conversions, results, accepts)


def _wrap_declining(cls: EngineMeta, overrides: frozenset[str]) -> None:
    """Put each marked implementation of ``cls``'s own behind a ``DecliningMethod``; set
    ``cls.__coheriq_declining__``, the candidates whose supplier may decline."""
    from .declines import DecliningMethod, check_of, note_implementation  # only for an engine class

    for candidate in overrides:
        value = cls.__dict__[candidate]
        check = check_of(value)
        note_implementation(value, marked=check is not False)
        if check is not False:
            type.__setattr__(cls, candidate, DecliningMethod(value, cls, candidate))
            _identify_crossover(cls, candidate, check)
    inherited = {c for base in cls.__bases__ for c in getattr(base, "__coheriq_declining__", ())}
    cls.__coheriq_declining__ = frozenset(
        c for c in overrides | inherited if check_of(supplier(cls, c).__dict__[c]) is not False
    )


def _identify_crossover(cls: EngineMeta, candidate: str, check: Any) -> None:
    """Tell a crossover (``check``'s, if any) whose it is: its calibration is looked up by
    library, engine and candidate."""
    if getattr(check, "__coheriq_crossover__", None) is None:
        return  # most checks: not a crossover's
    from .crossover import crossover_of  # imported already, by the crossover's module

    declared = crossover_of(check)
    if declared is not None:
        engine = cls.__coheriq_name__ or f"{cls.__module__}.{cls.__qualname__}"
        declared.identify(cls.__coheriq_domain__.name, engine, candidate, cls.__module__)


def supplier(cls: EngineMeta, candidate: str) -> EngineMeta:
    """The class along ``cls.__mro__`` whose body supplies ``candidate`` (else the reference)."""
    for klass in cls.__mro__:
        if candidate in getattr(klass, "__coheriq_overrides__", ()):
            return klass  # type: ignore[return-value]
    return cls.__mro__[-2]  # type: ignore[return-value]  # the reference, just before object


def refusal(cls: EngineMeta) -> str | None:
    """Why engine class ``cls`` cannot start (an override it runs was refused by
    :func:`~coheriq._engines.overrides.check_late_overrides`), or None."""
    for klass in cls.__mro__:
        refused: dict[str, str] = klass.__dict__.get("__coheriq_refused__", {})
        for candidate, reason in refused.items():
            if supplier(cls, candidate) is klass:  # not overridden again on the way
                engine = cls.__coheriq_name__ or cls.__qualname__
                return (
                    f"Engine {engine!r} of domain {cls.__coheriq_domain__.name!r} cannot "
                    f"start: it was refused when candidate {candidate!r} was marked, after "
                    f"the engine was defined. {reason} Fix the override and restart the "
                    "program, or choose another engine."
                )
    return None


def _domain_of_bases(cls_name: str, bases: tuple[type, ...]) -> _Domain:
    if not bases:
        raise CoheriqEngineInheritanceError(
            f"Engine class {cls_name!r} has no base: derive it from "
            "coheriq.engine_class('<domain>') or from another engine of the domain."
        )
    strangers = [b for b in bases if not isinstance(b, EngineMeta)]
    if strangers:
        raise CoheriqEngineInheritanceError(
            f"Engine class {cls_name!r} may only derive from engine classes of one coheriq "
            f"domain, but {strangers[0].__qualname__!r} is not one. Make it an engine mixin "
            "(a subclass of coheriq.engine_class('<domain>') without name=) or keep helpers "
            "in methods whose names start with '_'."
        )
    domains: dict[int, _Domain] = {
        id(b.__coheriq_domain__): b.__coheriq_domain__  # type: ignore[attr-defined]
        for b in bases
    }
    if len(domains) > 1:
        names = listing(d.name for d in domains.values())
        raise CoheriqEngineInheritanceError(
            f"Engine class {cls_name!r} derives from engines of several domains ({names}). "
            "An engine belongs to exactly one domain: combine only engines of the same domain."
        )
    return next(iter(domains.values()))


def _check_mro(cls_name: str, bases: tuple[type, ...], domain: _Domain) -> None:
    """Raise unless Python can linearize ``bases`` (the C3 rule of ``type``)."""
    sequences = [list(b.__mro__) for b in bases] + [list(bases)]
    while sequences := [s for s in sequences if s]:
        head = next((s[0] for s in sequences if not any(s[0] in o[1:] for o in sequences)), None)
        if head is None:
            order = ", ".join(b.__qualname__ for b in bases)
            raise CoheriqEngineInheritanceError(
                f"Engine class {cls_name!r} of domain {domain.name!r} cannot combine its bases "
                f"({order}): they admit no consistent method resolution order (MRO). List each "
                "engine before the engines it derives from, and each base only once."
            )
        for sequence in sequences:
            if sequence[0] is head:
                del sequence[0]


def _check_class_keywords(cls_name: str, bases: tuple[type, ...], kwargs: dict[str, Any]) -> None:
    # Other keywords go to __init_subclass__; unless a base defines one, they are typos.
    if kwargs and not any("__init_subclass__" in vars(k) for b in bases for k in b.__mro__[:-1]):
        key = next(iter(kwargs))
        raise CoheriqTypeError(
            f"Engine class {cls_name!r} got the unknown class keyword {key!r}; coheriq takes "
            "name=, conversions=, results= and accepts_library_types="
            f".{did_you_mean(key, ['name', *_CONVERSION_KEYWORDS])}"
        )


_CONVERSION_KEYWORDS = ("conversions", "results", "accepts_library_types")


def _check_body(
    cls_name: str, namespace: dict[str, Any], domain: _Domain, *, reference: bool
) -> frozenset[str]:
    """Check the public names of a class body and return the candidates it defines."""
    kinds = domain.candidate_kinds
    slots = namespace.get("__slots__", ())
    for slot in [slots] if isinstance(slots, str) else slots:
        if slot in kinds:
            raise CoheriqEngineError(
                f"Engine class {cls_name!r} declares a slot named {slot!r}, like a candidate "
                f"of domain {domain.name!r}: a slot holds instance data and would hide the "
                "candidate's implementation. Rename the slot (a leading '_' keeps it private)."
            )
    failed: dict[str, str | None] = {}
    if domain.declaring_packages and any(
        not attr.startswith("_") and attr not in kinds for attr in namespace
    ):  # a subpackage not imported yet may declare them
        failed = domain.import_declaring_packages()
        kinds = domain.candidate_kinds
    overrides = []
    for attr, value in namespace.items():
        if attr.startswith("_"):
            continue
        if attr not in kinds:
            raise CoheriqEngineError(
                f"Engine class {cls_name!r} defines {attr!r}, which is not a candidate of "
                f"domain {domain.name!r}.{did_you_mean(attr, kinds)} Public names of an engine "
                "must override candidates; name private helpers with a leading '_'. "
                f"Candidates: {listing(kinds)}."
                + "".join(
                    f" (Subpackage {package!r} declares candidates of its own, but "
                    f"{ended(problem)})"
                    for package, problem in failed.items()
                    if problem is not None
                )
            )
        if not reference:
            namespace[attr] = _checked_override(cls_name, attr, value, domain, kinds[attr])
        overrides.append(attr)
    return frozenset(overrides)


def _checked_override(cls_name: str, attr: str, value: Any, domain: _Domain, is_class: bool) -> Any:
    """Check what an engine's body gives for candidate ``attr``; return what to keep: a
    function candidate takes a callable or a non-data descriptor (``partialmethod``), another
    candidate's proxy (delegation) as a staticmethod, not the candidate itself."""
    delegate = candidate_of(getattr(value, "__func__", value))
    if _delegate(value) == (domain, attr):
        raise CoheriqEngineError(
            f"Engine class {cls_name!r} sets {attr!r} to candidate {attr!r} of domain "
            f"{domain.name!r} itself, whose calls would come back to this engine for ever. "
            "An engine that does not re-implement a candidate leaves it out (it inherits "
            "the library's); to build on the library's class, derive from it."
        )
    if is_class:
        if not isinstance(value, type):
            raise CoheriqEngineError(
                f"Engine class {cls_name!r} overrides class candidate {attr!r} of domain "
                f"{domain.name!r} with {type(value).__name__} {value!r}; a class candidate "
                "must be overridden by a class."
            )
        from .overrides import check_exception_class  # only when defining an engine

        check_exception_class(cls_name, attr, value, domain.engines.reference_of(attr), domain)
        return value
    if delegate is not None and not delegate.is_class and not isinstance(value, staticmethod):
        return staticmethod(value)  # a proxy is a plain function: do not bind it
    binds = hasattr(type(value), "__get__") and not hasattr(type(value), "__set__")
    if not (callable(value) or binds):
        raise CoheriqEngineError(
            f"Engine class {cls_name!r} overrides function candidate {attr!r} of domain "
            f"{domain.name!r} with the non-callable {type(value).__name__} {value!r}; "
            "override it with a function, a method or another callable."
        )
    return value


def _delegate(value: Any) -> tuple[Any, str] | None:
    """The candidate (domain, name) an override hands every call to: a candidate's proxy,
    also as a staticmethod, in a ``partial`` or behind ``lru_cache`` (not in a function of
    the engine's own, which may do anything before it calls); else None."""
    for _ in range(32):  # wrappers of wrappers, within reason
        info = candidate_of(value)
        if info is not None:
            return info.domain, info.name
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        elif type(value).__name__ == "partial" and hasattr(value, "func"):
            value = value.func
        elif hasattr(value, "cache_info") and hasattr(value, "__wrapped__"):
            value = value.__wrapped__  # an lru_cache
        else:
            return None
    return None


def _check_delegation(
    cls_name: str, namespace: dict[str, Any], bases: tuple[type, ...], domain: _Domain
) -> None:
    """Raise CoheriqEngineError where overrides delegate in a circle (``a = lib.b; b = lib.a``)."""

    def delegate_of(name: str) -> str | None:  # the candidate the engine runs for name
        for holder in [namespace, *(k.__dict__ for b in bases for k in b.__mro__[:-2])]:
            if name in holder:
                found = _delegate(holder[name])
                return found[1] if found is not None and found[0] is domain else None
        return None

    for start in namespace:
        chain, name = [start], delegate_of(start)
        while name is not None and name not in chain:
            chain.append(name)
            name = delegate_of(name)
        if name == start and len(chain) > 1:
            circle = " -> ".join([*chain, start])
            raise CoheriqEngineError(
                f"Engine class {cls_name!r} of domain {domain.name!r} hands calls around in a "
                f"circle ({circle}): each override delegates to a candidate that this engine "
                "overrides by delegating again, so no call would ever end. Implement one of "
                "them, or leave it out so that the library's runs."
            )
