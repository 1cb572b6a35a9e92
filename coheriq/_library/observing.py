"""The hook through which profiles and verifications watch every domain's calls.

While a watcher kind is on anywhere (:func:`start`, :func:`stop`), every domain's proxies find
what a call runs through :func:`finder_for`, which lets each kind wrap it, the lower ``order``
innermost (a profile, 0, times the engine alone; a verification, 1, wraps that). No watcher sees
calls where :data:`quiet` is set."""

from __future__ import annotations

import _thread
from _contextvars import ContextVar  # what contextvars re-exports, without importing it

from .._stdlib import TYPE_CHECKING, after_fork_in_child
from . import registry

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    # wrap(domain) -> a function from what a call finds (a scope, the view before
    # the choice, or None for the settled choice) to what it should find instead.
    Wrapper = Callable[[Any], Callable[[Any], Any]]

# False; True (no watcher sees the calls); or (domain, found) -> what a call finds
# instead: a verification's other side stops at a candidate with side effects.
quiet: ContextVar[bool | Callable[[Any, Any], Any]] = ContextVar(
    "coheriq watchers quiet", default=False
)

_lock = _thread.allocate_lock()
# order -> [wrap, blocks open]: kept at 0 and changed in place, so that opening and closing
# a block allocates nothing (a free-threaded build frees a dict's old table late).
_on: dict[int, list[Any]] = {}
# What runs when a domain whose <PREFIX>_VERIFY, or COHERIQ_SHADOW, is set is materialized:
# ``import coheriq`` installs the hook that imports the tool then, no sooner.
on_materialized: list[Callable[[Any], None]] = []
# Kind of watcher -> what it says of a domain in this context (for explain), or None.
describers: dict[str, Callable[[Any], str | None]] = {}


def describe(kind: str, domain: Any) -> str | None:
    """What the watcher ``kind`` does to ``domain``'s calls here, as a phrase; None if nothing."""
    describer = describers.get(kind)
    return None if describer is None else describer(domain)


def start(order: int, wrap: Wrapper) -> None:
    """Count one more open block of the watcher kind ``order``; the first turns it on."""
    with _lock:
        entry = _on.get(order)
        if entry is None:
            entry = _on[order] = [wrap, 0]
        entry[1] += 1
        if entry[1] == 1:
            _rewire()


def stop(order: int) -> None:
    """Count one block of the kind ``order`` closed; the last turns it off."""
    with _lock:
        entry = _on[order]
        entry[1] -= 1
        if entry[1] == 0:
            _rewire()


def finder_for(domain: Any) -> Callable[[Any], Any] | None:
    """The function ``domain``'s proxies find their scope with while watchers are on; ``None``
    when no watcher is on: the proxies use the domain's own finder."""
    kinds = tuple(wrap for _, (wrap, count) in sorted(_on.items()) if count)
    if not kinds:
        return None
    finders: dict[tuple[Wrapper, ...], Callable[[Any], Any]] = domain.scopes.finders
    finder = finders.get(kinds)  # one per set of kinds: see Scopes.finders
    if finder is None:
        finder = finders[kinds] = _finder(domain, kinds)
    return finder


def _finder(domain: Any, kinds: tuple[Wrapper, ...]) -> Callable[[Any], Any]:
    """The finder of ``domain`` while the watcher ``kinds`` are on, innermost first."""
    wraps = [wrap(domain) for wrap in kinds]
    scope_of = domain.scopes.here

    def current(_missing: Any = None) -> Any:  # finds "not chosen yet" itself
        found = scope_of()
        hushed = quiet.get()
        if hushed:
            return found if hushed is True else hushed(domain, found)
        for wrap in wraps:
            found = wrap(found)
        return found

    return current


class View:
    """What a call finds while a watcher wraps it: a view over what it found otherwise.

    ``found`` is a scope, the view before the global choice, another watcher's view, or ``None``
    for the settled choice. A subclass's ``__getitem__`` wraps :meth:`member`; proxies read
    ``view.members[name]``."""

    __slots__ = ("domain", "found")

    def __init__(self, domain: Any, found: Any) -> None:
        self.domain, self.found = domain, found

    @property
    def members(self) -> View:
        return self

    @property
    def chooses(self) -> bool:
        """Whether asking for a member makes the domain's global choice."""
        return getattr(self.found, "chooses", False)

    def member(self, name: str) -> Any:
        """What the call of candidate ``name`` would run without this watcher."""
        return self._run(name, self.found)

    def unwatched(self, name: str) -> Any:
        """What the call of candidate ``name`` would run without any watcher at all."""
        found = self.found
        while isinstance(found, View):
            found = found.found
        return self._run(name, found)

    def _run(self, name: str, found: Any) -> Any:
        return self.domain.choice.member(name) if found is None else found.members[name]


def _rewire() -> None:
    """Give every domain's proxies the finder for the watchers now on (under ``_lock``)."""
    for domain in registry.alive_everywhere():
        domain.scopes.set_watching(finder_for(domain))


@after_fork_in_child
def _reinit_lock_in_child() -> None:
    # A thread of the parent may have held the lock when it forked.
    global _lock
    _lock = _thread.allocate_lock()
