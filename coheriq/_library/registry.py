"""The registry of domains by name, and the copies of one library's domain.

A library creates its domain once per execution of its module. When the module
runs again (:func:`importlib.reload`, ``test.support.import_helper.
import_fresh_module``, a second module object made from the same file), the
second ``AccelerationDomain`` of the same name, created by a module of the same
name, is a new **copy** of the domain rather than a clash. Every copy keeps
working for the objects that came from its copy of the module; they share one
:class:`Copies`, which holds:

- the **global choice**: the first copy to settle fixes the engine's name
  for all of them, so a copy made later runs the engine the program chose (see
  ``GlobalChoice.settle`` in :mod:`coheriq._choice.global_choice`);
- the ``using_engine`` **blocks**: one context variable for all of them, so a
  block entered through any copy covers every copy, also one made inside it;
- which copy the domain's **name** stands for (:meth:`Copies.named`): the
  one an engine is being loaded for, else the one whose module is in
  ``sys.modules`` now, else the newest.

A package's module that runs again in the same module object, while some of
the domain's candidates are marked by its other modules (which do not run
again), carries on the same domain instead of making a copy that would lack
them (:func:`continuing`; see :mod:`coheriq._library.late_candidates` for what its
candidates do then).

The registry holds older copies weakly, but their proxies' names in the
shared namespace hold them, so every copy lives as long as the process.
"""

from __future__ import annotations

# _thread rather than threading, _weakref rather than weakref: the same objects,
# without importing the Python modules at `import coheriq`.
import _frozen_importlib
import _thread
import _weakref
import sys
from _contextvars import ContextVar

from .._engines.registry import loading_for
from .._stdlib import TYPE_CHECKING, caller_outside_coheriq
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

__all__ = [
    "Copies",
    "alive_everywhere",
    "caller_run",
    "continuing",
    "copies_of",
    "lookup_domain",
    "named_domains",
    "ran_before",
    "register",
    "replace",
    "reran",
    "run_of",
    "running",
]


class Copies:
    """The copies of one library module's domain, one made each time the module runs.

    Attributes:
        name: The domain's name.
        module: The name of the module that creates it.
        current: The newest copy.
        made: How many copies were made, the first included.
        namespace: The globals of every copy's proxies.
        scope: The context variable of every copy's ``using_engine`` blocks.
        open_scopes: How many blocks are open, anywhere.
        lock: Guards ``open_scopes``.
        choice: The global choice (a :class:`~coheriq._choice.global_choice.Settlement`) of the
            first copy that settled, or ``None``.
    """

    __slots__ = (
        "_older",
        "choice",
        "current",
        "lock",
        "made",
        "module",
        "name",
        "namespace",
        "open_scopes",
        "scope",
    )

    def __init__(self, name: str, module: str, first: Any) -> None:
        self.name = name
        self.module = module
        self.current = first
        self.choice: Any = None
        self.made = 1
        # The globals of every copy's proxies (see coheriq._call.proxy.Switchboard).
        self.namespace: dict[str, Any] = {}
        # using_engine blocks, one variable for every copy: a block entered
        # through one copy is the program's choice for all of them.
        self.scope: ContextVar[Any] = ContextVar(f"coheriq:{name}", default=None)
        self.open_scopes = 0  # blocks open anywhere, in any thread or task
        # Guards open_scopes. Re-entrant: a signal handler that enters a block may
        # interrupt this thread while it holds the lock to enter or leave one.
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
        """The copy that the domain's name stands for here and now."""
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
        for copy in reversed(self.alive()):
            if copy._globals is namespace:
                return copy
        return self.current


_by_name: dict[str, Copies] = {}
_lock = _thread.allocate_lock()


def register(domain: Any) -> tuple[Copies, int] | None:
    """Record a new domain; return its copies and its copy's number (1 for the first).

    Returns None if the name is taken.

    A domain whose name exists already becomes the newest copy of that domain
    if the module that creates it runs again: a module of the same name,
    whose earlier run (see :func:`run_of`) has ended, however it ended (a reload,
    a fresh import, a retry after a failed import, a notebook cell run again).
    A domain of that name made while the earlier run still runs, by another
    module, or by a function that no run of the module's body is running (a
    helper called after the import), is a second domain of the same name.
    """
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
    """The frame of the module run that ``frame`` belongs to, or ``frame`` itself.

    That is the outermost frame up the stack running a module's body
    (``<module>``) in the same globals; a domain created in a function that no
    module body is running (a test, say) belongs to that function's frame.
    """
    run, caller = frame, frame
    while caller is not None:
        if caller.f_globals is frame.f_globals and caller.f_code.co_name == "<module>":
            run = caller
        caller = caller.f_back
    return run


def continuing(name: str, creator: Any) -> Any:
    """The domain that a new ``AccelerationDomain(name)`` made by ``creator`` continues, or None.

    That is the newest copy of ``name`` when the module that made it
    runs again, and some of the domain's candidates are marked by other
    modules, which do not run again with it: a new, empty copy would lose
    them. The module runs again in the same module object (``importlib.reload``),
    or in a new one after its import failed (the domain never materialized:
    a retry). The domain then carries on, belonging to the new run; its
    module's own candidates are redefined when they are marked again (see
    :mod:`coheriq._library.late_candidates`).
    """
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
    """Whether the run ``now`` is the module of the ended run ``run`` running again.

    Both must be runs of one module's body (``<module>``: an import, a reload,
    a notebook cell), not calls of a function: a function that marks a candidate
    twice marks it twice.
    """
    return (
        run is not None
        and now is not None
        and run.f_code.co_name == now.f_code.co_name == "<module>"
        and run.f_globals.get("__name__") == now.f_globals.get("__name__")
        and not running(run)
    )


def reran(run: Any, now: Any) -> bool:
    """Whether the run ``now`` is an import running the module of the ended run ``run`` again.

    That is :func:`ran_before` where the import system runs ``now``: a reload
    or a retry of a failed import, not the next cell of a notebook or example
    of a doctest, which run other code as the same module. New candidates, and
    a second materialize(), are let through only then.
    """
    return ran_before(run, now) and _imported(now)


def _imported(frame: Any) -> bool:
    """Whether the import system runs ``frame`` (below it on the stack)."""
    caller = frame.f_back
    while caller is not None:
        if caller.f_code.co_filename == _IMPORT_SYSTEM:
            return True
        caller = caller.f_back
    return False


# Where the import system's own frames come from (whichever loader runs the module).
_IMPORT_SYSTEM: str = _frozen_importlib._exec.__code__.co_filename  # type: ignore[attr-defined]


def running(frame: Any) -> bool:
    """Whether ``frame`` is on the current thread's stack, that is, still running."""
    caller: Any = sys._getframe(1)
    while caller is not None:
        if caller is frame:
            return True
        caller = caller.f_back
    return False


def lookup_domain(
    domain: object, missing: type[CoheriqDomainNotFoundError] = CoheriqDomainNotFoundError
) -> Any:
    """Return the domain given by object or name: for a name, the copy it stands for here.

    Raises:
        CoheriqTypeError: ``domain`` is neither a domain nor a string.
        CoheriqDomainNotFoundError: No domain of that name exists (raised as
            ``missing``, a subclass that also tells the situation).
    """
    if isinstance(domain, str):
        copies = _by_name.get(domain)
        if copies is None:
            known = [d.name for d in named_domains()]
            if issubclass(missing, CoheriqEngineError):  # an engine is being defined
                fix = (
                    "Import the library that creates the domain (by convention, the module "
                    f"named {domain!r}) at the top of the engine's module, before "
                    f"coheriq.engine_class({domain!r}) or AccelerationEngine({domain!r}, ...)."
                )
            else:
                fix = (
                    "Import the library that creates the domain before enabling or listing "
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


def reinit_locks_in_child() -> None:
    """Replace the registry's locks in a forked child (their holders did not fork)."""
    global _lock
    _lock = _thread.allocate_lock()
    for copies in _by_name.values():
        copies.lock = _thread.RLock()
