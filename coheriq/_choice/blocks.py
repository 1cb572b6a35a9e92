"""The ``using_engine`` blocks of a domain, and how its proxies find what a call runs.

A block is a :class:`Scope` in a context variable shared by every copy of the
library's domain. A proxy that must look calls its domain's finder with what a context
without a block finds (``missing``), then ``found.members[name]`` (``None`` found: the
candidate's slot), and calls that itself.
"""

from __future__ import annotations

import _weakref

from .._names import REFERENCE
from .._stdlib import DEBUG, TYPE_CHECKING, log
from ..exceptions import CoheriqEngineError, CoheriqError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from contextvars import ContextVar
    from typing import Any

    from .._engines.meta import EngineMeta
    from .state import DomainState


# How many times a domain's code-swapped proxies go back to their candidates' own code
# when its last block closes: a program that opens blocks in a loop swaps no code per block.
_SWAPS_BACK = 8


class Scope:
    """One ``using_engine`` block, live from its entry until its exit.

    On exit ``members`` becomes a :class:`Fallthrough`, for the tasks that inherited
    the block and outlive it. ``members`` are those of the copy of the domain whose
    ``state`` entered it; ``elsewhere`` holds each other copy's view of it, made on
    first use. ``tried``: what an ordered list tried before this engine.
    """

    __slots__ = (
        "elsewhere",
        "engine",
        "live",
        "members",
        "owner",
        "parent",
        "state",
        "token",
        "tried",
    )

    def __init__(
        self,
        engine: str,
        members: Mapping[str, Any],
        parent: Scope | None,
        state: DomainState,
        owner: Any = None,
        tried: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.engine = engine
        self.tried = tried
        self.members: Mapping[str, Any] | Fallthrough | Starting = members
        self.parent = parent
        self.live = True
        self.state = state
        self.owner = owner  # the using_engine object that entered it
        self.token: Any = None
        self.elsewhere: dict[Any, Scope | None] | None = None


def live_scope(scope: Scope | None) -> Scope | None:
    """The innermost scope from ``scope`` out whose block has not exited.

    The dead scope it starts from then points at the live one found, so that a
    chain of blocks exited elsewhere shrinks as it is walked (an exited block
    never opens again).
    """
    start = scope
    while scope is not None and not scope.live:
        scope = scope.parent
    if start is not None and start is not scope:
        start.parent = scope
        if isinstance(start.members, Fallthrough):
            start.members.parent = scope
    return scope


class Starting:
    """The members of the block an engine's ``__init__`` runs in.

    A call into the domain from there runs what the context around runs; where
    that would make the global choice (from inside an engine's start), it raises.
    """

    __slots__ = ("engine", "parent", "state")

    def __init__(self, state: DomainState, engine: str, parent: Scope | None) -> None:
        self.state = state
        self.engine = engine
        self.parent = parent

    def __getitem__(self, name: str) -> Any:
        state = self.state
        around = state.scopes.seen_from_here(self.parent)
        if around is not None:
            return around.members[name]
        settled = state.choice.settled
        if settled is not None:
            return settled.members[name]
        raise CoheriqEngineError(
            f"Candidate {name!r} of domain {state.name!r} was called while engine "
            f"{self.engine!r} was starting, from that engine's __init__, before the domain's "
            "global engine was chosen; the call would choose it, from inside another "
            f"engine's start. Inside the engine, call its own implementations (self.{name}"
            "(...)) instead, or choose the global engine before this one starts."
        )


class Fallthrough:
    """The members of an exited scope: what the context around it runs now (it holds the
    scope's parent, not the scope, so that an exited scope is freed at once)."""

    __slots__ = ("parent", "state")

    def __init__(self, state: DomainState, parent: Scope | None) -> None:
        self.state = state
        self.parent = parent

    def __getitem__(self, name: str) -> Any:
        seen = self.state.scopes.seen_from_here(self.parent)
        if seen is not None:
            return seen.members[name]
        return self.state.choice.member(name)


class Scopes:
    """The blocks of one copy of a domain, the innermost in ``variable``: entered, left,
    and found by its proxies."""

    def __init__(self, state: DomainState, variable: ContextVar[Scope | None]) -> None:
        self.state = state
        self.variable = variable
        # While a profile or verification is on: the finder that lets it see each call.
        self._watching: Callable[[Any], Any] | None = None
        # Once a newer copy exists, this copy's proxies look on every call, so that
        # a block's cost does not grow with the number of copies.
        self.always_look = False
        # Whether the proxies were told to look: set after the flag goes on, cleared
        # before it goes off.
        self.looking = False
        self.blocks_seen = 0  # how many times a block made the proxies look (_SWAPS_BACK)
        # The finders given to the proxies, made once: a free-threaded build's compiled
        # proxies keep each finder they were given, for a call that may still read it.
        self._find_here, self._get = self.here, variable.get
        self.finders: dict[tuple[Any, ...], Callable[[Any], Any]] = {}  # observing's, by kinds

    def implementation_here(self, name: str) -> Any:
        """The implementation of candidate ``name`` a call here would use (for a class
        candidate the engine uses as it is, the class, not its construction)."""
        scope = self.here()
        member = scope.members[name] if scope is not None else self.state.choice.member(name)
        info = self.state.candidates[name]
        if info.construct is not None and member is info.construct:
            return info.reference
        return member

    def here(self, _missing: Any = None) -> Any:
        """The scope a proxy finds here, the global choice's ``unsettled`` view before it is
        made, or None for the candidate's slot (a finder: it finds ``missing`` itself)."""
        state = self.state
        scope = self.variable.get()
        if scope is not None and scope.state is not state:
            scope = self.seen_from_here(scope)
        if scope is None and state.choice.settled is None:
            return state.choice.unsettled
        return scope

    def seen_from_here(self, scope: Scope | None) -> Scope | None:
        """The innermost live block from ``scope`` out, as this copy of the domain runs it:
        on its own engine of the same name, else (warned once) ``None``, its own choice."""
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

    def set_watching(self, current: Callable[[Any], Any] | None) -> None:
        """Route proxies through ``current`` (the watchers'), or back to the scope variable."""
        with self.state.lock:
            self._watching = current
            self.refresh_dispatch()

    def retire(self) -> None:
        """A later copy replaced this one: its proxies look on every call, through a finder
        that holds this copy weakly."""
        self.always_look = True
        copy = _weakref.ref(self.state, self.state.switchboard.forget)
        copies = self.state.copies

        def current(_missing: Any = None) -> Any:
            # Finalizers of a freed copy's garbage still call it: the newest copy runs those.
            state = copy()
            if state is None:
                state = copies.current.state
            scopes = state.scopes
            scope = (scopes._watching or scopes.here)()
            return scope if scope is not None else state.choice.settled

        self.state.switchboard.retire(current)
        self.refresh_looking()

    def refresh_dispatch(self) -> None:
        """Tell the proxies how to find what a call runs, after any change (the finder
        before the flag, so that a proxy that sees the flag finds the right finder)."""
        self.refresh_finder()
        self.refresh_looking()

    def refresh_finder(self) -> None:
        """Give the proxies the finder of what a call runs in its context (see :meth:`here`)."""
        state, switchboard = self.state, self.state.switchboard
        if self._watching is not None or state.copies.made != 1:
            switchboard.set_current(self._watching or self._find_here)
        else:  # as here() finds it, with no frame of coheriq's
            switchboard.set_current(self._get, self.variable)
        choice = state.choice
        switchboard.set_missing(choice.unsettled if choice.settled is None else None)

    def refresh_looking(self) -> None:
        """Say whether proxies must look at the context: while the domain is not settled,
        or a block, a profile or a verification is open anywhere. Call with the lock held."""
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
        for info in state.class_candidates:  # before the flag; each told only of a change
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

    def enter(
        self,
        cls: EngineMeta,
        owner: Any = None,
        tried: tuple[tuple[str, str], ...] = (),
        then: tuple[Any, ...] = (),
    ) -> Scope:
        """Make ``cls`` the engine of this context, for every copy of the domain, until
        :meth:`exit`. ``tried``, ``then``: what an ordered list tried, and its engines after
        ``cls``."""
        state = self.state
        members = state.engines.members_of(cls, then)
        around = live_scope(self.variable.get())
        scope = Scope(cls.__coheriq_name__ or REFERENCE, members, around, state, owner, tried)
        log(DEBUG, "domain %r: entering a scope of engine %r", state.name, scope.engine)
        self.open(scope)
        return scope

    def exit(self, scope: Scope) -> None:
        """End the block of ``scope``, in whatever context this runs: calls that still find
        it fall through to the context around it."""
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

        The variable moves only if it still points here, so a block exited out of
        order or elsewhere takes no other with it; reset by its token, leaving the
        outermost block takes the variable out of the context again.
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

        Checked against what each copy was told, not the count's step from 0 to 1, so
        that a signal handler's block between the two tells them itself; count and
        refreshes share one lock.
        """
        copies = self.state.copies
        with copies.lock:
            copies.open_scopes += change
            # Older copies always look (always_look); this one may be the newest.
            for copy in (self.state, copies.current.state):
                scopes = copy.scopes
                if scopes.always_look:
                    continue
                if copies.open_scopes > 0:
                    stale = not scopes.looking
                else:
                    stale = scopes.looking and change < 0
                if stale:
                    with copy.lock:
                        scopes.refresh_looking()
