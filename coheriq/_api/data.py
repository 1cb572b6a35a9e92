"""Data on request: :func:`to_library`, :func:`to_engine`, :func:`mutated`, and an engine made
of conversions alone (:func:`conversion_engine`). Each uses the conversions engines declare
(:class:`~coheriq.Conversion`), and their cache.
"""

from __future__ import annotations

import sys

from .._engines.conversions import TO_ENGINE, TO_LIBRARY, Conversion, convert, mutated, table_of
from .._library.domain import AccelerationDomain, lookup_domain
from .._stdlib import TYPE_CHECKING
from ..exceptions import CoheriqEngineError, CoheriqTypeError, listing
from .verbs import resolve_engine

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any, TypeVar

    from .._engines.meta import EngineMeta

    T = TypeVar("T")

__all__ = ["Conversion", "conversion_engine", "mutated", "to_engine", "to_library"]


def to_library(obj: T, domain: AccelerationDomain | str | None = None) -> T:
    """``obj`` in its library's form: converted by the conversion an engine (of ``domain``,
    else of any domain) declares for its type; ``obj`` itself where none does.

    The conversion is cached, counted and logged as at a boundary.

    Raises:
        CoheriqDomainNotFoundError: ``domain`` names no domain.
        CoheriqConversionError: The engine's conversion failed.
    """
    from .._library import registry

    domains = [lookup_domain(domain)] if domain is not None else registry.named_domains()
    for found in domains:
        for cls in list(found.engines.classes):
            table = table_of(cls)
            conversion = None if table is None else table.find(type(obj), TO_LIBRARY)
            if conversion is not None:
                return convert(obj, conversion, TO_LIBRARY, found.state, "coheriq.to_library")  # type: ignore[no-any-return]
    return obj


def to_engine(obj: Any, domain: AccelerationDomain | str, engine: object) -> Any:
    """``obj``, a library's object, in ``engine``'s form (the engine loaded if need be):
    converted by the conversion the engine declares for its type; ``obj`` itself where
    none does (it is the engine's, or the engine reads it as it is).

    Raises:
        CoheriqDomainNotFoundError, CoheriqEngineNotFoundError: No such domain or engine.
        CoheriqConversionError: The engine's conversion failed.
    """
    found = lookup_domain(domain)
    table = table_of(resolve_engine(found, engine))
    conversion = None if table is None else table.find(type(obj), TO_ENGINE)
    if conversion is None or table.find(type(obj), TO_LIBRARY) is not None:  # type: ignore[union-attr]
        return obj
    return convert(obj, conversion, TO_ENGINE, found.state, "coheriq.to_engine")


def conversion_engine(
    domain: AccelerationDomain | str,
    name: str,
    conversions: Iterable[Conversion],
    candidates: Iterable[str],
    *,
    results: str = "input",
) -> EngineMeta:
    """Make and register engine ``name`` of ``domain`` from conversions alone: its
    implementation of each of ``candidates`` is the library's own code, run on the
    arguments converted to the engine's form, its results converted back (with
    ``results="input"``, where the caller passed the library's form). A library written
    against the array API runs so on an array library of another kind.

    Returns:
        The engine class, as :func:`~coheriq.engine_class` would return it.

    Raises:
        CoheriqEngineError: A name is not a function candidate of the domain, or the
            engine's name is taken.
        CoheriqTypeError: ``conversions`` are not :class:`~coheriq.Conversion` objects.
    """
    found = lookup_domain(domain)
    reference = found.require_reference(f"make engine {name!r}")
    wanted = [candidates] if isinstance(candidates, str) else list(candidates)
    kinds = found.candidate_kinds
    classes = [c for c in wanted if kinds.get(c)]
    if not wanted or classes:
        what = f"class candidates ({listing(classes)})" if classes else "no candidate"
        raise CoheriqEngineError(
            f"conversion_engine({found.name!r}, {name!r}) was given {what}: it runs the "
            "library's own functions on converted arguments, so name function candidates "
            f"of the domain. Candidates: {listing(kinds)}."
        )
    if not isinstance(conversions, (list, tuple)):
        raise CoheriqTypeError(
            f"conversion_engine({found.name!r}, {name!r}) takes its conversions as a list of "
            f"coheriq.Conversion, not {conversions!r}."
        )
    body: dict[str, Any] = {n: staticmethod(_reference_run(reference, n)) for n in wanted}
    body["__module__"] = sys._getframe(1).f_globals.get("__name__", "__main__")
    body["__doc__"] = (
        f"Engine {name!r} of domain {found.name!r}: the library's own code on converted data."
    )
    import types  # only making such an engine needs it

    keywords = {"name": name, "conversions": list(conversions), "results": results}
    return types.new_class(name, (reference,), keywords, lambda ns: ns.update(body))  # type: ignore[return-value]


def _reference_run(reference: Any, name: str) -> Callable[..., Any]:
    """A function that runs the reference implementation of candidate ``name``."""

    def run(*args: Any, **kwargs: Any) -> Any:
        return getattr(reference, name)(*args, **kwargs)  # read now: marked late, reloaded

    run.__name__ = run.__qualname__ = name
    run.__doc__ = f"The library's {name!r}, run on the engine's data."
    return run
