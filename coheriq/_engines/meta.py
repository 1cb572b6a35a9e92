"""EngineMeta: the metaclass of every engine class, and its record of overrides.

A domain's reference class and every engine built on it are classes of
:class:`EngineMeta`. When one is created the metaclass checks it against its
domain (bases of one domain only, a consistent MRO, public names that are
candidates, overrides of the right kind, a free engine name), records which
candidates its own body defines, and registers it with the domain. Which
implementation of a candidate an engine uses is then nothing but attribute
lookup along ``Engine.__mro__``.
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

__all__ = ["EngineMeta", "refusal", "supplier"]


if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, Protocol

    class _Engines(Protocol):
        """The seam of a domain's engine registry (see :mod:`coheriq._engines.registry`)."""

        def reference_of(self, candidate: str) -> Any:
            """The reference implementation, or None where not imported yet."""

        def check_name_free(self, name: str) -> None: ...

        def register(self, cls: EngineMeta) -> None: ...

    class _Domain(Protocol):
        """What the metaclass needs from a domain (see :mod:`coheriq._library.domain`)."""

        name: str

        @property
        def strict(self) -> bool:
            """Whether a doubtful override is an error."""

        @property
        def engines(self) -> _Engines:
            """The domain's engine registry."""

        @property
        def candidate_kinds(self) -> Mapping[str, bool]:
            """Candidate name -> whether it is a class candidate."""

        @property
        def declaring_packages(self) -> tuple[str, ...]:
            """The subpackages that declare their own candidates when imported."""

        def import_declaring_packages(self) -> dict[str, str | None]:
            """Import those subpackages; subpackage -> None, or why its import failed."""


if TYPE_CHECKING:

    class _EngineClassAttributes:
        """What every engine class carries. Declared for the type checker only:
        annotations in the metaclass's own body would be what its classes, lacking
        annotations of their own, report as ``__annotations__``."""

        __coheriq_domain__: _Domain
        __coheriq_name__: str | None
        __coheriq_overrides__: frozenset[str]
        __coheriq_declining__: frozenset[str]

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

    The domain's reference class is created by
    :meth:`AccelerationDomain.materialize`, never directly.

    An engine whose override a candidate marked later (a lazily imported
    module's) finds wanting, where defining the engine then would have failed,
    is refused: starting it raises :class:`~coheriq.CoheriqEngineStartError`,
    which says why (see ``refusal()``).
    """

    def __new__(
        mcls,
        cls_name: str,
        bases: tuple[type, ...],
        namespace: dict[str, Any],
        /,
        *,
        name: str | None = None,
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
        kinds = domain.candidate_kinds
        overrides = _check_body(
            cls_name, namespace, domain, kinds, reference=reference_of is not None
        )
        if reference_of is None:
            _check_delegation(cls_name, namespace, bases, domain)
            # Imported here: only defining an engine needs it, `import coheriq` does not.
            from .overrides import check_override

            label = name if name is not None else cls_name
            for candidate in sorted(overrides):
                reference = domain.engines.reference_of(candidate)
                if reference is None:
                    continue  # declared, not imported yet: checked when it is marked
                check_override(
                    domain=domain,
                    engine=label,
                    mixin=name is None,
                    candidate=candidate,
                    reference=reference,
                    override=namespace[candidate],
                    is_class=kinds[candidate],
                )
        namespace["__coheriq_domain__"] = domain
        namespace["__coheriq_name__"] = name
        namespace["__coheriq_overrides__"] = overrides
        cls = super().__new__(mcls, cls_name, bases, namespace, **kwargs)
        if reference_of is None:
            _wrap_declining(cls, overrides)
            domain.engines.register(cls)
        return cls

    def __init__(cls, *args: Any, **kwargs: Any) -> None:
        # The class keywords were consumed by __new__; type.__init__ takes none.
        super().__init__(*args[:3])

    def __repr__(cls) -> str:
        domain = cls.__coheriq_domain__.name
        where = f"{cls.__module__}.{cls.__qualname__}"
        if cls.__coheriq_name__ == REFERENCE:
            return f"<reference class of coheriq domain {domain!r}>"
        if cls.__coheriq_name__ is None:
            return f"<engine mixin {where} of coheriq domain {domain!r}>"
        return f"<engine {cls.__coheriq_name__!r} of coheriq domain {domain!r}: {where}>"


def _wrap_declining(cls: EngineMeta, overrides: frozenset[str]) -> None:
    """Note the candidates whose implementation in ``cls`` may decline; wrap the functions.

    ``cls.__coheriq_declining__`` is the candidates whose supplier along the MRO
    is marked with ``may_decline``: only their members are chains (see
    :mod:`coheriq._engines.declines`). A marked function goes behind a
    :class:`DecliningMethod`, and so does a marked class (a class candidate's
    implementation, read from the class as itself), so that one reached through
    ``self`` or ``super()`` from the engine's own code goes on along the MRO
    when it declines.
    An implementation that is not marked is noted, so that a ``Decline`` it
    raises is its error even where a marked one called it.
    """
    from .declines import DecliningMethod, check_of, note_implementation  # only for an engine class

    for candidate in overrides:
        value = cls.__dict__[candidate]
        marked = check_of(value) is not False
        note_implementation(value, marked=marked)
        if marked:
            type.__setattr__(cls, candidate, DecliningMethod(value, cls, candidate))
    # Inherited: a base's candidate that may decline still may where the MRO takes
    # it from a class that marks it (not where cls, or a base before it, overrides it).
    inherited = {c for base in cls.__bases__ for c in getattr(base, "__coheriq_declining__", ())}
    cls.__coheriq_declining__ = frozenset(
        c for c in overrides | inherited if check_of(supplier(cls, c).__dict__[c]) is not False
    )


def supplier(cls: EngineMeta, candidate: str) -> EngineMeta:
    """Return the class along ``cls.__mro__`` whose own body supplies ``candidate``.

    That is the reference class when no engine on the way overrides it.
    """
    for klass in cls.__mro__:
        if candidate in getattr(klass, "__coheriq_overrides__", ()):
            return klass  # type: ignore[return-value]
    return cls.__mro__[-2]  # type: ignore[return-value]  # the reference, just before object


def refusal(cls: EngineMeta) -> str | None:
    """Why engine class ``cls`` cannot start, as a message; None where it can.

    It cannot where an override it runs (its own, or one it takes from a base
    engine or mixin) was refused: a candidate marked after the engine was
    defined found the override wanting where defining the engine then would have
    failed (see :func:`coheriq._engines.overrides.check_late_overrides`).
    """
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
    while True:
        sequences = [s for s in sequences if s]
        if not sequences:
            return
        for sequence in sequences:
            head = sequence[0]
            if not any(head in other[1:] for other in sequences):
                break
        else:
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
    # Keywords other than name= go to __init_subclass__. Unless some base defines
    # one, they can only be typos of name=: say so rather than type's bare TypeError.
    takes_keywords = any(
        "__init_subclass__" in vars(klass)
        for base in bases
        for klass in base.__mro__
        if klass is not object
    )
    if kwargs and not takes_keywords:
        key = next(iter(kwargs))
        raise CoheriqTypeError(
            f"Engine class {cls_name!r} got the unknown class keyword {key!r}; the only one "
            f"coheriq takes is name=.{did_you_mean(key, ['name'])}"
        )


def _check_body(
    cls_name: str,
    namespace: dict[str, Any],
    domain: _Domain,
    kinds: Mapping[str, bool],
    *,
    reference: bool = False,
) -> frozenset[str]:
    """Check the public names of a class body and return the candidates it defines."""
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
    ):
        # Names the domain does not know yet may be declared by a subpackage that
        # is not imported yet: its __init__ declares them (see declare_package).
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
    """Check what an engine's body gives for candidate ``attr``; return what to keep.

    Any callable overrides a function candidate, and so does a descriptor that
    makes one when read from the engine (``functools.singledispatchmethod``,
    ``partialmethod``: a descriptor that is not a data descriptor such as a
    property). Another candidate's proxy (delegation, to a
    candidate of this domain or another) is kept as a static member, so that
    the engine's instance is not passed to it. Only the candidate itself is
    refused.
    """
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
    """The candidate (its domain and name) an override hands every call to, if any.

    That is a candidate's proxy, also as a static method, in a
    ``functools.partial`` or behind ``functools.lru_cache``; not a function of
    the engine's own that wraps one (``functools.wraps``): that one may do
    anything before it calls.
    """
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
    """Refuse overrides that hand calls to each other in a circle (``a = lib.b; b = lib.a``).

    Raises:
        CoheriqEngineError: A circle of delegations; the message shows it.
    """

    def delegate_of(name: str) -> str | None:
        # What the engine being defined runs for ``name``: its own override, else
        # the first base engine's (the reference's ends every chain).
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
