"""The ``using_engine`` blocks of one copy of a domain, and how its proxies find them.

A :class:`Scopes` belongs to one :class:`~coheriq.AccelerationDomain`
(``state.scopes``). A block is a :class:`~coheriq._choice.records.Scope` held in a
context variable that every copy of the library's module shares (see
:mod:`coheriq._library.registry`), so a block entered through one copy covers them all.

Proxies do not read the variable on every call: they look at the context only
while they must (the domain is not settled, or a block, a profile or a
verification is open anywhere), which :meth:`Scopes.refresh_looking` tells them. Entering or leaving
a block counts it under the lock of the library's copies alone and never waits for an
engine's set-up.
"""

from __future__ import annotations

import _weakref

from .._names import REFERENCE
from .._stdlib import DEBUG, TYPE_CHECKING, log
from ..exceptions import CoheriqError
from .records import Fallthrough, Scope, Starting, live_scope

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextvars import ContextVar
    from typing import Any

    from .._engines.meta import EngineMeta
    from .ordered import Tried
    from .state import DomainState


__all__ = ["Scopes"]

# How many times the code-swapped proxies of a domain go back to their candidates'
# own code after its blocks close (see Scopes.blocks_seen).
_SWAPS_BACK = 8


class Scopes:
    """The blocks of one copy of a domain: entered, left, and found by its proxies.

    Attributes:
        variable: The context variable that holds the innermost block (shared by
            every copy of the domain).
    """

    def __init__(self, state: DomainState, variable: ContextVar[Scope | None]) -> None:
        self.state = state
        self.variable = variable
        # While a profile or verification is on (see coheriq._library.observing): the finder
        # that lets it see each call.
        self._watching: Callable[[], Any] | None = None
        # Set for a copy of the domain once a newer copy exists: its proxies look
        # at the context on every call, so that blocks opening and closing need
        # not tell it (a block's cost does not grow with the number of copies).
        self.always_look = False
        # Whether the proxies were told to look at the context. True only while they
        # are: set after the flag goes on, cleared before it goes off (see _count_open).
        self.looking = False
        # How many times a block of the domain (anywhere, through any copy) made this
        # copy's proxies look. Past _SWAPS_BACK, they keep looking when the last block
        # closes: a program that opens blocks in a loop swaps no proxy's code per
        # block (coheriq._call.swapped), and one that opened a few goes back to the
        # candidates' own code.
        self.blocks_seen = 0

    # -- what a call runs here -----------------------------------------------------------

    def member_here(self, name: str) -> Any:
        """Return what a call of candidate ``name`` runs in this context."""
        scope = self.here()
        if scope is not None:
            return scope.members[name]
        return self.state.choice.member(name)

    def implementation_here(self, name: str) -> Any:
        """Return the implementation of candidate ``name`` a call here would use.

        As :meth:`member_here`, except that a class candidate the engine uses as
        it is reads as the class, not as the construction of it.
        """
        member = self.member_here(name)
        info = self.state.candidates[name]
        if info.construct is not None and member is info.construct:
            return info.reference
        return member

    def here(self) -> Any:
        """What proxies look at while they look at the context (see coheriq._choice.records)."""
        state = self.state
        scope = self.variable.get()
        if scope is not None and scope.state is not state:
            scope = self.seen_from_here(scope)
        if scope is None and state.choice.settled is None:
            return state.choice.unsettled
        return scope

    def seen_from_here(self, scope: Scope | None) -> Scope | None:
        """The innermost live block from ``scope`` out, as this copy of the domain runs it.

        A block entered through another copy of the library runs here on this
        copy's engine of the same name, made once per block. Where this copy
        cannot run it, it warns once and keeps its own choice (``None``).
        """
        state = self.state
        scope = live_scope(scope)
        if scope is None or scope.state is state or isinstance(scope.members, Starting):
            return scope
        if scope.elsewhere is None:
            scope.elsewhere = {}
        elif state in scope.elsewhere:
            return scope.elsewhere[state]
        seen: Scope | None = None
        try:
            engines = state.engines
            cls = engines.engine_class(scope.engine, named_by=" (a using_engine block)")
            seen = Scope(scope.engine, engines.members_of(cls), None, state)
        except CoheriqError as error:
            state.warn_once(
                ("scope", scope.engine),
                f"A copy of module {state.module!r} (the library ran more than once, by a "
                f"reload or a fresh import) cannot run engine {scope.engine!r} in a "
                f"using_engine block of domain {state.name!r}: {str(error).rstrip('.')}. "
                "Calls through that copy keep running on its own engine.",
            )
        scope.elsewhere[state] = seen
        return seen

    def live(self) -> Scope | None:
        """The innermost block of this context that has not exited."""
        return live_scope(self.variable.get())

    def active_engine(self) -> str | None:
        """The engine a call would run in this context, or None if undecided."""
        scope = self.live()
        if scope is not None:
            return scope.engine
        settled = self.state.choice.settled
        return None if settled is None else settled.engine

    # -- how proxies find it -------------------------------------------------------------

    def set_watching(self, current: Callable[[], Any] | None) -> None:
        """Route proxies through ``current`` (the watchers'), or back to the scope variable."""
        with self.state.lock:
            self._watching = current
            self.refresh_dispatch()

    def retire(self) -> None:
        """This copy of the domain is replaced by a later one: hold it weakly.

        Its proxies look at the context on every call from now on (a block
        entered through any copy, else this copy's own choice), through a
        finder that holds the copy weakly (see
        :meth:`~coheriq._call.proxy.Switchboard.retire`).
        """
        self.always_look = True
        # Once the copy is freed, its names leave the namespace.
        copy = _weakref.ref(self.state, self.state.switchboard.forget)
        copies = self.state.copies

        def current() -> Any:
            # A copy being freed is still called by finalizers (__del__) of its
            # own garbage, after its weak reference died: the newest copy runs those.
            state = copy()
            if state is None:
                state = copies.current.state
            scopes = state.scopes
            scope = (scopes._watching or scopes.here)()
            return scope if scope is not None else state.choice.settled

        self.state.switchboard.retire(current)
        self.refresh_looking()

    def refresh_dispatch(self) -> None:
        """Tell the proxies how to find what a call runs, after any change.

        The finder is set before the flag, so that a proxy that sees the flag
        finds the right finder.
        """
        state = self.state
        # The scope variable itself, where no translation is needed: the domain is
        # settled and has no other copies (see here()).
        direct = state.choice.settled is not None and state.copies.made == 1
        if self._watching is None and direct:
            state.switchboard.set_current(self.variable.get, self.variable)
        else:
            state.switchboard.set_current(self._watching or self.here)
        self.refresh_looking()

    def refresh_looking(self) -> None:
        """Say whether proxies must look at the context: all a block opening changes.

        They must while the domain is not settled, or a block, a profile or a
        verification is open anywhere. A class that constructs itself directly
        goes back to dispatching before the flag is set; a class is told only
        of a change. Call with the domain's lock held.
        """
        state = self.state
        settled = state.choice.settled
        if state.copies.open_scopes > 0 and not self.looking:
            self.blocks_seen += 1
        looking = (
            self.always_look
            or settled is None
            or state.copies.open_scopes > 0
            or self._watching is not None
        )
        for info in state.class_candidates:
            directly = (
                settled is not None and not looking and settled.members[info.name] is info.construct
            )
            if info.constructs_directly is not directly:
                from .._call.marked import construct_directly  # imported with the class

                construct_directly(info.proxy, directly)
        if looking:
            state.switchboard.run_directly(False)
            state.switchboard.set_scoped(True)
            self.looking = True
        else:
            self.looking = False
            state.switchboard.set_scoped(False)
            state.switchboard.run_directly(self.blocks_seen <= _SWAPS_BACK)

    # -- entering and leaving ------------------------------------------------------------

    def enter(
        self, cls: EngineMeta, owner: Any = None, tried: Tried = (), then: tuple[Any, ...] = ()
    ) -> Scope:
        """Make ``cls`` the engine of this context until :meth:`exit`.

        ``tried`` and ``then``: where ``cls`` was chosen from an ordered list,
        what was tried before it, and the engines after it (see
        :meth:`~coheriq._engines.registry.Engines.members_of`).

        The block covers every copy of the domain (see :meth:`seen_from_here`).
        Its parent is the innermost *live* block around it, so that blocks that
        exited elsewhere never pile up in a context.
        """
        state = self.state
        members = state.engines.members_of(cls, then)
        around = live_scope(self.variable.get())
        scope = Scope(cls.__coheriq_name__ or REFERENCE, members, around, state, owner, tried)
        log(DEBUG, "domain %r: entering a scope of engine %r", state.name, scope.engine)
        self.open(scope)
        return scope

    def exit(self, scope: Scope) -> None:
        """End the block of ``scope``, in whatever context this runs.

        Calls that still find it (a task or generator that outlived the block)
        fall through to the context around it. The context variable moves only if
        it still points at this block, and then to the innermost live block
        around it: a block exited out of order, or in another context than it was
        entered (a generator finished elsewhere), takes no other block with it.
        """
        if not isinstance(scope.members, Starting):  # an engine's start logs no entry
            log(DEBUG, "domain %r: leaving the scope of engine %r", self.state.name, scope.engine)
        scope.members = Fallthrough(self.state, scope.parent)
        self.close(scope)

    def open(self, scope: Scope) -> None:
        """Count ``scope`` as open and make it the innermost block of this context."""
        self._count_open(+1)
        scope.token = self.variable.set(scope)

    def close(self, scope: Scope) -> None:
        """Mark ``scope`` exited, step the context out of it, and count it closed.

        Where the block is left in the context that entered it, the variable is
        reset with the token its entry got, so that leaving the outermost block
        takes the variable out of the context again (a domain dropped later,
        by ``coheriq.testing.isolated``, leaves nothing behind in it).
        """
        scope.live = False
        if self.variable.get() is scope:
            try:
                self.variable.reset(scope.token)
            except (ValueError, RuntimeError):  # another context, or reset already
                pass
            current = self.variable.get()
            if current is scope or (current is not None and not current.live):
                self.variable.set(live_scope(scope.parent))
        scope.token = None
        self._count_open(-1)

    def _count_open(self, change: int) -> None:
        """Count a block opening (+1) or closing (-1), and tell every copy what it changes.

        While a block is open anywhere, every copy's proxies must look at the
        context. That is checked against what each copy was told, not against
        the count's step from 0 to 1: a signal handler that enters a block after
        this thread counted its own, and before it told the proxies, tells them
        itself. The count and the refreshes it causes happen under one lock, so
        that a refresh never acts on a count another thread has changed since.
        """
        copies = self.state.copies
        with copies.lock:
            copies.open_scopes += change
            # The copies older than the newest look at the context always. (This copy
            # is often the newest: then it is looked at twice, the second time cheaply.)
            for copy in (self.state, copies.current.state):
                scopes = copy.scopes
                if scopes.always_look:
                    continue
                if copies.open_scopes > 0:
                    stale = not scopes.looking
                else:  # the last block closed: the proxies may stop looking
                    stale = scopes.looking and change < 0
                if stale:
                    with copy.lock:
                        scopes.refresh_looking()
