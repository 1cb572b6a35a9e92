"""Domains by name, and the copies of one library's domain.

Each run of the module that creates a domain (a reload, a fresh import) makes a new copy of it; the
copies share one :class:`Copies`: the global choice, the ``using_engine`` blocks, and which copy the
name stands for. A package's module that runs again while its other modules hold candidates
continues the domain instead (:func:`continuing`). An older copy lives while something holds it."""

from __future__ import annotations

# _thread, _weakref: the same objects as threading's and weakref's, without importing them.
import _frozen_importlib
import _thread
import _weakref
import sys
from _contextvars import ContextVar

from .._engines.registry import loading_for
from .._stdlib import TYPE_CHECKING, after_fork_in_child, caller_outside_coheriq
from ..exceptions import (
    CoheriqDomainNotFoundError,
    CoheriqEngineError,
    CoheriqTypeError,
    did_you_mean,
    listing,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any


class Copies:
    """The copies of one library module's domain, one made each time the module runs.

    ``current`` is the newest, ``made`` counts them all. They share ``namespace`` (their proxies'
    globals), ``scope`` (the context variable of their blocks: a block entered through one copy
    covers them all), ``open_scopes`` (guarded by ``lock``) and ``choice`` (the first copy's settled
    :class:`~coheriq._choice.global_choice.Settlement`, or None)."""

    def __init__(self, name: str, module: str, first: Any) -> None:
        self.name, self.module, self.current, self.made = name, module, first, 1
        self.choice: Any = None
        self.namespace: dict[str, Any] = {}
        self.scope: ContextVar[Any] = ContextVar(f"coheriq:{name}", default=None)
        self.open_scopes = 0
        # Re-entrant: a signal handler that enters a block may interrupt this
        # thread while it holds the lock to enter or leave one.
        self.lock = _thread.RLock()
        self._older: list[Callable[[], Any]] = []

    def add(self, copy: Any) -> None:
        """Make ``copy`` the newest; keep the previous ones weakly."""
        self._older = [ref for ref in self._older if ref() is not None]
        self._older.append(_weakref.ref(self.current))
        self.current = copy
        self.made += 1

    def alive(self) -> list[Any]:
        """The live copies, oldest first."""
        older = [ref() for ref in self._older]
        return [g for g in older if g is not None] + [self.current]

    def named(self) -> Any:
        """The copy the name stands for: the one an engine is loaded for, else the one in
        ``sys.modules``, else the newest."""
        loading = loading_for.get()  # the state of a copy an engine is loaded for
        if loading is not None and loading.copies is self:
            for copy in self.alive():
                if copy.state is loading:
                    return copy
        if not self._older:
            return self.current
        namespace = getattr(sys.modules.get(self.module), "__dict__", None)
        if self.current._globals is namespace:  # the usual case, without a walk
            return self.current
        return next((c for c in reversed(self.alive()) if c._globals is namespace), self.current)


_by_name: dict[str, Copies] = {}
_lock = _thread.allocate_lock()


def register(domain: Any) -> tuple[Copies, int] | None:
    """Record a new domain; return its copies and its copy's number (1 for the first).

    A domain whose name exists already is its newest copy where a module of the same name runs its
    body again after its earlier run (:func:`run_of`) ended, however it ended; otherwise the name is
    taken, and this returns None."""
    with _lock:
        copies = _by_name.get(domain.name)
        if copies is None:
            copies = _by_name[domain.name] = Copies(domain.name, domain.module, domain)
            return copies, 1
        if (
            copies.module != domain.module
            or running(copies.current._run)
            or domain._run.f_code.co_name != "<module>"  # a function, not the module again
        ):
            return None
        copies.add(domain)
        return copies, copies.made


def run_of(frame: Any) -> Any:
    """The outermost frame up the stack running a module body in ``frame``'s globals, or it."""
    run = frame
    for caller in stack(frame):
        if caller.f_globals is frame.f_globals and caller.f_code.co_name == "<module>":
            run = caller
    return run


def continuing(name: str, creator: Any) -> Any:
    """The domain that a new ``AccelerationDomain(name)`` made by ``creator`` continues, or None.

    That is the newest copy of ``name`` when the module that made it runs again (a reload, or a
    retry of a failed import) and other modules, which do not run again, mark some of its
    candidates: a new, empty copy would lose them."""
    with _lock:
        copies = _by_name.get(name)
        if copies is None:
            return None
        current = copies.current
        same_module = current._globals is creator.f_globals
        retry = (
            current.engines.reference is None
            and creator.f_globals.get("__name__") == current.module
        )
        if not (same_module or retry) or running(current._run):
            return None
        if all(info.module == current.module for info in current.state.candidates.values()):
            return None
        current._run = run_of(creator)
        current._globals = creator.f_globals
        return current


def caller_run() -> Any:
    """The run (see :func:`run_of`) of the code that called into coheriq, or None."""
    frame = caller_outside_coheriq()
    return None if frame is None else run_of(frame)


def ran_before(run: Any, now: Any) -> bool:
    """Whether the run ``now`` is the module body of the ended run ``run`` running again."""
    return (
        run is not None
        and now is not None
        and run.f_code.co_name == now.f_code.co_name == "<module>"
        and run.f_globals.get("__name__") == now.f_globals.get("__name__")
        and not running(run)
    )


def reran(run: Any, now: Any) -> bool:
    """:func:`ran_before`, where the import system runs ``now`` (not a notebook's next cell)."""
    return ran_before(run, now) and any(
        caller.f_code.co_filename == _IMPORT_SYSTEM for caller in stack(now.f_back)
    )


# Where the import system's own frames come from (whichever loader runs the module).
_IMPORT_SYSTEM: str = _frozen_importlib._exec.__code__.co_filename  # type: ignore[attr-defined]


def running(frame: Any) -> bool:
    """Whether ``frame`` is on the current thread's stack, that is, still running."""
    return any(caller is frame for caller in stack(sys._getframe(1)))


def stack(frame: Any) -> Iterator[Any]:
    """``frame`` and its callers, innermost first."""
    while frame is not None:
        yield frame
        frame = frame.f_back


def lookup_domain(
    domain: object, missing: type[CoheriqDomainNotFoundError] = CoheriqDomainNotFoundError
) -> Any:
    """Return the domain given by object or name: for a name, the copy it stands for here.

    Raises ``missing`` where no domain has that name, CoheriqTypeError where ``domain`` is neither a
    domain nor a string."""
    if isinstance(domain, str):
        copies = _by_name.get(domain)
        if copies is None:
            known = [d.name for d in named_domains()]
            fix = (
                "Import the library that creates the domain (by convention, the module "
                f"named {domain!r}) at the top of the engine's module, before "
                f"coheriq.engine_class({domain!r}) or AccelerationEngine({domain!r}, ...)."
                if issubclass(missing, CoheriqEngineError)  # an engine is being defined
                else "Import the library that creates the domain before enabling or listing "
                "its engines."
            )
            raise missing(
                f"There is no coheriq domain named {domain!r}.{did_you_mean(domain, known)} "
                f"Known domains: {listing(known)}. {fix}"
            )
        return copies.named()
    # Every domain's state has its copies (a half-made domain's state has none yet).
    if isinstance(getattr(getattr(domain, "state", None), "copies", None), Copies):
        return domain
    raise CoheriqTypeError(
        "A domain is given as an AccelerationDomain or its name, not as "
        f"{type(domain).__name__} ({domain!r})."
    )


def copies_of(name: str) -> Copies | None:
    """The copies of the domain named ``name``, if any."""
    return _by_name.get(name)


def named_domains() -> list[Any]:
    """The domain each name stands for now, in the order the names were first used."""
    return [copies.named() for copies in list(_by_name.values())]


def alive_everywhere() -> Iterator[Any]:
    """Every live copy of every domain."""
    for copies in list(_by_name.values()):
        yield from copies.alive()


def replace(by_name: dict[str, Copies]) -> dict[str, Copies]:
    """Install ``by_name`` as the registry; return the one replaced (for testing)."""
    with _lock:
        replaced = dict(_by_name)
        _by_name.clear()
        _by_name.update(by_name)
    return replaced


@after_fork_in_child
def _reinit_locks_in_child() -> None:
    # A thread that held a lock at fork time does not exist in the child, so its
    # locks would stay held forever; replace them, and forget set-ups in flight.
    global _lock
    _lock = _thread.allocate_lock()
    for copies in _by_name.values():
        copies.lock = _thread.RLock()
        for domain in copies.alive():
            domain.state.lock = _thread.RLock()
            domain.engines.reinit_in_child()
