"""Turning on the acceleration of a library that never adopted coheriq.

:func:`accelerate` reads the library's declarations, installs the finder and marks its modules
imported already; the library and its engine are named in :data:`os.environ`
(``COHERIQ_ACCELERATE``, ``<PREFIX>_ENGINE``) so that child processes accelerate it too."""

from __future__ import annotations

import _thread
import os
import sys
import warnings

from .. import discovery
from .._api.verbs import enable_engine
from .._call.proxy import candidate_of
from .._choice.ordered import parse_engine_list
from .._names import check_name
from .._stdlib import TYPE_CHECKING
from ..exceptions import (
    CoheriqDeclarationError,
    CoheriqDeclarationWarning,
    CoheriqEngineNotFoundError,
    did_you_mean,
    listing,
)
from .adapter import Adapter
from .declarations import declaration_of
from .finder import installed_finder
from .startup import ENV, parse_environment, said_before

if TYPE_CHECKING:
    from types import ModuleType

    from .._library.domain import AccelerationDomain
    from .declarations import LibraryDeclaration

_adapters: dict[str, Adapter] = {}
_lock = _thread.RLock()
_started = False  # from_environment has run
_said: list[str] = []  # the libraries from_environment said it cannot accelerate


def accelerate(library: str, engine: str | None = None) -> AccelerationDomain | None:
    """Accelerate ``library``, which never adopted coheriq, from the outside.

    The installed packages' declarations of the library (see
    :mod:`coheriq._outside.declarations`) say which of its functions and classes are
    candidates. Its modules imported from now on are marked as they run; those imported
    already are marked in place (names other modules bound to their objects before stay
    unmarked: :func:`coheriq.explain` lists them). Installed files are never changed. With
    no engine chosen, the library behaves exactly as before; blocks, ``explain``,
    ``profile`` and ``verify`` work as for a library that adopted coheriq.

    Args:
        library: The library's top-level import name (``"statistics"``): its domain's name.
        engine: The engine to run it on (an ordered list as ``"gpu, numpy"`` too), or None
            to choose none here. Set as the domain's environment variable
            ``<PREFIX>_ENGINE``, so the choice is made at the first call, as for any
            library, and child processes make it too; where the library is imported
            already, it is enabled now.

    Returns:
        The library's domain, where it is made already (the library is imported); else None.

    Raises:
        CoheriqDeclarationError: No installed package declares the library, a declaration
            cannot be used, or a module imported already does not define a name it declares
            (nothing is changed then).
        CoheriqEngineNotFoundError: The library is not imported yet and no installed package
            advertises ``engine`` for it.
        CoheriqDomainError: The library marks its own candidates (it adopted coheriq) and
            ``engine`` cannot be enabled for it.
    """
    if not accelerate_if_declared(library, engine):
        raise CoheriqDeclarationError(
            f"Library {library!r} cannot be accelerated from the outside: no installed "
            f"package declares its candidates (entry-point group "
            f"{discovery.declaration_group_of(library)}). Install an engine package that "
            "ships a declaration of it, or write one (see the guide 'Accelerating a library "
            "you do not own')."
        )
    adapter = _adapters[library]
    # A library that marks its own candidates is found by name, as any adopted library.
    return adapter.domain if adapter.stepped_back is None else None


def accelerate_if_declared(library: str, engine: str | None = None) -> bool:
    """:func:`accelerate` ``library`` if installed packages declare it; whether they do.
    Raises what :func:`accelerate` raises, but for an undeclared library."""
    check_name(library, "library name")
    with _lock:
        adapter = _adapters.get(library)
        if adapter is None:
            declaration = declaration_of(library)
            if declaration is None:
                return False
            if engine is not None and library not in sys.modules:
                _check_advertised(library, engine)  # before anything changes
            adapter = _adapter_for(declaration)
    if engine is not None and (adapter.domain is not None or adapter.stepped_back is not None):
        names = parse_engine_list(engine, f" (given for library {library!r})")
        enable_engine(library, names if len(names) > 1 else names[0])
    # Named in the environment that child processes inherit.
    named = [lib for lib, _ in parse_environment(os.environ.get(ENV, ""))]
    if library not in named:
        os.environ[ENV] = ",".join([*named, library])
    if engine is not None:
        os.environ[f"{adapter.declaration.env_prefix}_ENGINE"] = engine
    return True


def _adapter_for(declaration: LibraryDeclaration) -> Adapter:
    """A new adapter of ``declaration``'s library, watching its modules; those imported
    already, checked (all before anything changes) and marked in place."""
    for problem in declaration.version_problems():
        warnings.warn(problem, CoheriqDeclarationWarning, stacklevel=4)
    adapter = Adapter(declaration)
    imported = [sys.modules[m] for m in declaration.modules if m in sys.modules]
    for module in imported:
        adapter.check_defines(module)
    installed_finder().watch(adapter)
    _adapters[declaration.library] = adapter
    top = sys.modules.get(declaration.library)
    if top is not None:  # imported already: the domain is made for the run that made it
        adapter.make_domain(vars(top))
    for module in sorted(imported, key=lambda m: m.__name__.count(".")):
        adapter.mark_in_place(module.__name__, vars(module), imported_before=True)
    if top is not None and adapter.stepped_back is None:
        _warn_if_unreachable(adapter, top)
    return adapter


def _warn_if_unreachable(adapter: Adapter, top: ModuleType) -> None:
    """Warn where every declared function that ``top``, imported before, binds (re-exports) is
    unmarked: the user reaches no candidate (unmarked classes are warned of already)."""
    library = adapter.declaration.library
    namespace = vars(top)
    declared = {name for names in adapter.declaration.modules.values() for name in names}
    bound = [n for n in declared if n in namespace and not isinstance(namespace[n], type)]
    if not bound or any(candidate_of(namespace[name]) is not None for name in bound):
        return
    warnings.warn(
        f"Library {library!r} was imported before it was accelerated, and its top-level "
        f"module had bound {listing(bound)} then: they stay unmarked, so calls through "
        f"{library}.{min(bound)} and the like run the library's own code on every engine "
        f"(only the declared modules' own names, {listing(adapter.declaration.modules)}, "
        f"were marked). Accelerate before importing {library!r}: set "
        f"COHERIQ_ACCELERATE={library}, run the program with python -m coheriq run "
        f"--engine {library}:ENGINE, or call coheriq.accelerate({library!r}) first.",
        CoheriqDeclarationWarning,
        stacklevel=5,  # accelerate's caller
    )


def _check_advertised(library: str, engine: str) -> None:
    """Raise unless installed packages advertise each engine ``engine`` names for ``library``."""
    advertised = discovery.advertised(library)
    for name in (part.strip() for part in engine.split(",")):
        if name and name not in advertised and name != "reference":
            raise CoheriqEngineNotFoundError(
                f"No installed package advertises engine {name!r} of library {library!r} "
                f"(entry-point group {discovery.group_of(library)}): installed engines: "
                f"{listing(advertised)}.{did_you_mean(name, advertised)} Install the "
                "engine's package, or correct its name."
            )


def adapter_of(library: str) -> Adapter | None:
    """The adapter of ``library``, if it is accelerated from the outside in this process."""
    return _adapters.get(library)


def from_environment() -> None:
    """Accelerate what :data:`ENV` names, once per process. Never raises (an interpreter must
    start): what cannot be done is said on standard error, once, unless the runner's
    interpreter said it already."""
    global _started
    if _started:
        return
    _started = True
    said = said_before()
    for library, engine in parse_environment(os.environ.get(ENV, "")):
        try:
            accelerate(library, engine)
        except Exception as error:
            _said.append(library)
            if library not in said:
                message = f"{ENV} names library {library!r}, which cannot be accelerated: {error}"
                print(f"coheriq: {message}", file=sys.stderr)


def said_at_start_up() -> list[str]:
    """The libraries :func:`from_environment` said it cannot accelerate, in this process."""
    return list(_said)
