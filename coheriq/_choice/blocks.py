"""The ``using_engine`` blocks of a domain: their records, and how proxies find them.

A block is a :class:`Scope` held in a context variable that every copy of the
library's domain shares. A proxy that must look calls its domain's finder and then
``found.members[name]`` (``found``: a scope, the global choice's view before it is
made, or ``None`` for the candidate's slot), and calls the member itself, so no frame
of coheriq's stays on the stack. :class:`Scopes` enters and leaves a domain's blocks
and tells its proxies when they must look.
"""

from __future__ import annotations

import _weakref
from functools import partial

from .._names import REFERENCE
from .._stdlib import DEBUG, TYPE_CHECKING, log
from ..exceptions import CoheriqEngineError, CoheriqError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from contextvars import ContextVar
    from typing import Any

    from .._engines.meta import EngineMeta
    from .state import DomainState


__all__ = ["Fallthrough", "Scope", "Scopes", "Starting", "live_scope"]

# How many times the code-swapped proxies of a domain go back to their candidates'
# own code after its blocks close (see Scopes.blocks_seen).
_SWAPS_BACK = 8


class Scope:
    """One ``using_engine`` block: live from its entry until its exit.

    Proxies call ``scope.members[name]``. A task or thread started inside the
    block inherits the context variable that points here, and may outlive the
    block; so on exit ``members`` becomes a :class:`Fallthrough` to the scope
    around it (or the global choice), and ``live`` turns false.

    ``state`` is the :class:`~coheriq._choice.state.DomainState` of the copy of
    the domain the block was entered through; its members are that copy's.
    Other copies of the same library (see :mod:`coheriq._library.registry`) see
    the block through ``elsewhere``: each one's own engine of the same name,
    made on first use. ``tried`` is what an ordered
    list of engines tried before this one was chosen (``()`` for one engine).
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
        self.token: Any = None  # what setting the context variable to it returned
        self.elsewhere: dict[Any, Scope | None] | None = None  # made when first needed


def live_scope(scope: Scope | None) -> Scope | None:
    """The innermost scope from ``scope`` out whose block has not exited.

    Iterative: a context may hold a long chain of blocks that exited elsewhere
    (generators finished by another task, blocks left in another thread). The
    dead scope it starts from then points at the live one found, so that such a
    chain shrinks as it is walked instead of growing with every block: a block
    that has exited never opens again, so what is live above it only gets nearer.
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
    """The members of the scope a context has while an engine of the domain starts.

    The engine's ``__init__`` runs in it. A call into the engine's own domain from
    there runs what the context around runs (the engine does not exist yet): the
    block around, else the global choice. Where the global choice is not made
    yet, it raises: made now, from inside an engine's start, it would not be the
    program's choice.
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
    """The members of an exited scope: whatever its enclosing context runs now.

    It holds the scope's parent, not the scope (no reference cycle, so an exited
    scope is freed at once); :func:`live_scope` moves both on together.
    """

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
        self.refresh_finder()
        self.refresh_looking()

    def refresh_finder(self) -> None:
        """Give the proxies the finder of what a call runs in its context (see here())."""
        state, variable = self.state, self.variable
        if self._watching is not None or state.copies.made != 1:
            state.switchboard.set_current(self._watching or self.here)
        elif state.choice.settled is not None:  # no translation needed (see here())
            state.switchboard.set_current(variable.get, variable)
        else:  # as here() finds it, with no frame of coheriq's in a block
            state.switchboard.set_current(partial(variable.get, state.choice.unsettled))

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
        self,
        cls: EngineMeta,
        owner: Any = None,
        tried: tuple[tuple[str, str], ...] = (),
        then: tuple[Any, ...] = (),
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
