"""The two forms of an engine: a subclass of the domain's reference class
(:func:`engine_class`), or decorated functions (:class:`AccelerationEngine`). Either way the
result is an :class:`~coheriq._engines.meta.EngineMeta` class registered under its name in
its domain, so hybrids are ordinary multiple inheritance.
"""

from __future__ import annotations

import sys

from .._engines.meta import EngineMeta
from .._engines.registry import building
from .._library.domain import AccelerationDomain, lookup_domain
from .._names import REFERENCE, check_candidate_name, check_name, name_given_once
from .._stdlib import TYPE_CHECKING
from ..exceptions import (
    CoheriqDomainNotReadyError,
    CoheriqEngineDomainNotFoundError,
    CoheriqEngineError,
    CoheriqEngineNameError,
    CoheriqTypeError,
    did_you_mean,
    listing,
)

# typing.overload for type checkers and Sphinx (which shows overloads from typing only).
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any, TypeVar, overload

    F = TypeVar("F", bound=Callable[..., Any])
else:
    from .._stdlib import overload


def engine_class(domain: AccelerationDomain | str, name: str | None = None) -> EngineMeta:
    """Return a domain's reference class, or the class of one of its engines.

    Subclass the reference class to write an engine in the class form, and the
    classes of engines to combine them into a hybrid:

    >>> doc = coheriq.AccelerationDomain("doc_engine_class")
    >>> _ = doc.materialize()
    >>> class Gpu(coheriq.engine_class("doc_engine_class"), name="gpu"): pass
    >>> class Mpi(coheriq.engine_class("doc_engine_class"), name="mpi"): pass
    >>> class Hybrid(coheriq.engine_class("doc_engine_class", "gpu"),
    ...              coheriq.engine_class("doc_engine_class", "mpi"), name="hybrid"):
    ...     pass
    >>> [klass.__name__ for klass in Hybrid.__mro__[:4]]
    ['Hybrid', 'Gpu', 'Mpi', 'reference']

    Args:
        name: An engine name (an advertised engine is imported if needed); ``None`` or
            :data:`~coheriq.REFERENCE` for the reference class.

    Raises:
        CoheriqDomainNotFoundError: No such domain (a
            :class:`~coheriq.CoheriqEngineDomainNotFoundError`, which says that an
            engine's module imports the library first).
        CoheriqDomainError: The domain is not materialized yet.
        CoheriqEngineNotFoundError: No such engine is registered or advertised.
        CoheriqEngineLoadError: Importing the advertised engine failed.
    """
    found = lookup_domain(domain, CoheriqEngineDomainNotFoundError)
    if name is None:
        return found.require_reference("return its reference class")
    return found.engines.engine_class(check_name(name, "engine name", CoheriqEngineNameError))


class AccelerationEngine:
    """An engine of a domain written as decorated functions (the decorator form).

    Args:
        domain: The domain (object or name); it must exist and be materialized.
        name: The engine's name; not :data:`~coheriq.REFERENCE`, not taken.
        bases: Engines to inherit from, in MRO order: names, AccelerationEngine
            objects or engine classes. Empty means the reference class.
        conversions, results, accepts_library_types: What the engine's data is, as
            the class form's keywords of the same names say (:class:`coheriq.Conversion`).

    Overrides are static: they receive the call's arguments only, no engine instance (use the
    class form for engines with state). As in coheriq 0.0.x, constructing the engine reserves
    its name: :func:`~coheriq.available_engines` lists it from then on, and a second engine
    of that name is refused at once; it cannot be enabled until :meth:`materialize` runs.

    Every error below is also a :class:`~coheriq.CoheriqEngineError`, as in coheriq 0.0.x.

    Raises:
        CoheriqEngineDomainNotFoundError: No such domain.
        CoheriqDomainNotReadyError: The domain is not materialized yet.
        CoheriqEngineNameError: A malformed name.
        CoheriqTypeError: A malformed list of bases.
        CoheriqEngineError: The name is reserved or taken.
    """

    def __init__(
        self,
        domain: AccelerationDomain | str,
        name: str,
        bases: Iterable[str | AccelerationEngine | EngineMeta] = (),
        *,
        conversions: Iterable[Any] | None = None,
        results: str | None = None,
        accepts_library_types: Iterable[str] | bool | None = None,
    ) -> None:
        self.domain = lookup_domain(domain, CoheriqEngineDomainNotFoundError)
        self.name = check_name(name, "engine name", CoheriqEngineNameError)
        self.domain.require_reference(f"create engine {name!r}", CoheriqDomainNotReadyError)
        if name == REFERENCE:
            raise CoheriqEngineError(
                f"An engine of domain {self.domain.name!r} cannot be named {REFERENCE!r}: that "
                "name is reserved for the domain's own implementations. Choose another name."
            )
        if isinstance(bases, (str, AccelerationEngine, EngineMeta)) or not hasattr(
            bases, "__iter__"
        ):
            raise CoheriqTypeError(
                f"The bases of engine {name!r} must be a list of engines (names, "
                f"AccelerationEngine objects or engine classes), not {bases!r}."
            )
        self.bases = tuple(bases)
        given = (conversions, results, accepts_library_types)
        keywords = zip(("conversions", "results", "accepts_library_types"), given, strict=True)
        self._data = {key: value for key, value in keywords if value is not None}
        self._overrides: dict[str, Any] = {}
        self._class: EngineMeta | None = None
        # The module that created the engine: the engine class's __module__.
        self.module: str = sys._getframe(1).f_globals.get("__name__", "__main__")
        self.domain.engines.reserve(name, self)  # last: a refused engine reserves nothing

    def __repr__(self) -> str:
        state = "materialized" if self._class is not None else "not materialized"
        return f"<AccelerationEngine {self.name!r} of domain {self.domain.name!r}, {state}>"

    @overload
    def override(self, obj: F, /) -> F: ...
    @overload
    def override(self, name: str, /) -> Callable[[F], F]: ...
    @overload
    def override(self, obj: None = None, /, *, name: str) -> Callable[[F], F]: ...

    def override(self, obj: Any = None, /, *, name: str | None = None) -> Any:
        """Register a function or class as this engine's implementation of a candidate.

        Use it bare (the candidate is the function's ``__name__``), as ``override("name")``
        or as ``override(name="name")``.

        Returns:
            The decorated object itself, unchanged, or a decorator.

        Raises:
            CoheriqEngineError: The engine is materialized, the name is not a
                candidate, or it is overridden already.
        """
        if obj is None or isinstance(obj, str):
            given = name_given_once(
                obj,
                name,
                f"Engine {self.name!r}: give the overridden name once, either as "
                "override('name') or as override(name='name').",
            )
            return lambda target: self._add(target, given)
        return self._add(obj, name)

    def _add(self, target: Any, name: str | None) -> Any:
        if not callable(target):
            raise CoheriqTypeError(
                f"Engine {self.name!r} of domain {self.domain.name!r} can only override with "
                f"functions and classes, not {type(target).__name__} {target!r}."
            )
        if name is None:
            name = getattr(target, "__name__", None)
            if name is None:
                raise CoheriqTypeError(
                    f"Engine {self.name!r} of domain {self.domain.name!r} cannot tell which "
                    f"candidate {target!r} overrides: a {type(target).__name__} has no "
                    "__name__. Name it with override(name='...')."
                )
        name = check_candidate_name(name)
        kinds = self.domain.candidate_kinds
        if self._class is not None:
            raise CoheriqEngineError(
                f"Cannot override {name!r} in engine {self.name!r} of domain "
                f"{self.domain.name!r}: the engine is materialized already. Add every override "
                "before calling materialize()."
            )
        if name not in kinds:
            raise CoheriqEngineError(
                f"Engine {self.name!r} cannot override {name!r}: it is not a candidate of "
                f"domain {self.domain.name!r}.{did_you_mean(name, kinds)} Candidates: "
                f"{listing(kinds)}."
            )
        if name in self._overrides:
            raise CoheriqEngineError(
                f"Engine {self.name!r} of domain {self.domain.name!r} overrides {name!r} twice; "
                "keep one implementation."
            )
        self._overrides[name] = target
        return target

    def materialize(self) -> EngineMeta:
        """Build and register the engine class; call once, after the last override.

        Returns:
            The engine class (what :func:`engine_class` returns for this engine).

        Raises:
            CoheriqEngineError: The engine is materialized already, or its
                overrides do not fit their candidates.
            CoheriqEngineInheritanceError: Its bases cannot be combined.
        """
        if self._class is not None:
            raise CoheriqEngineError(
                f"Engine {self.name!r} of domain {self.domain.name!r} is materialized already; "
                "materialize() is called once."
            )
        bases = tuple(self._base(b) for b in self.bases) or (
            self.domain.require_reference(f"materialize engine {self.name!r}"),
        )
        body: dict[str, Any] = {
            n: v if isinstance(v, type) else staticmethod(v) for n, v in self._overrides.items()
        }
        body["__module__"] = self.module
        import types  # only materializing an engine needs it

        token = building.set(self)  # the class may take the name this engine reserved
        try:
            self._class = types.new_class(  # type: ignore[assignment]
                self.name, bases, {"name": self.name, **self._data}, lambda ns: ns.update(body)
            )
        finally:
            building.reset(token)
        return self._class  # type: ignore[return-value]

    def _base(self, base: object) -> EngineMeta:
        """One of ``bases`` as a class (unlike ``Engines.resolve``, an unnamed mixin and the
        reference are allowed)."""
        if isinstance(base, EngineMeta) and base.__coheriq_domain__ is self.domain:
            return base
        if isinstance(base, AccelerationEngine):
            base = base.engine_class
        return self.domain.engines.resolve(base)

    @property
    def engine_class(self) -> EngineMeta:
        """The engine class built by :meth:`materialize`.

        Raises:
            CoheriqEngineError: The engine is not materialized yet.
        """
        if self._class is None:
            raise CoheriqEngineError(
                f"Engine {self.name!r} of domain {self.domain.name!r} is not materialized yet; "
                "call its materialize() after the last override, before using it."
            )
        return self._class
