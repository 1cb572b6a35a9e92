"""What a proxy finds when it looks at its context: a block, or the view before the choice.

A proxy that has to look at its context calls ``current()`` and then
``found.members[name]``, where ``found`` is one of:

- a :class:`Scope`, the innermost ``using_engine`` block of this context: its
  ``members`` are the engine's; after the block exits they fall through to the
  context around it (:class:`Fallthrough`);
- :class:`Unsettled`, while the domain's global choice is not made: asking it for
  a member makes the choice (or, before the domain is materialized, constructs a
  class candidate as the library's own class);
- ``None``: the proxy calls the settled member its cell holds (the global choice,
  once made, is a :class:`~coheriq._choice.global_choice.Settlement`).

Asking returns the member; the proxy calls it, so no frame of coheriq's is on the
stack while the implementation runs.
"""

from __future__ import annotations

from .._stdlib import TYPE_CHECKING
from ..exceptions import CoheriqDomainError, CoheriqEngineError

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from .state import DomainState


__all__ = ["Fallthrough", "Scope", "Starting", "Unsettled", "live_scope"]


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


class Unsettled:
    """What proxies of a domain call through until its global choice is made."""

    __slots__ = ("state",)

    # Asking it for a member makes the choice: what only looks (the alternate
    # constructors of a marked class, read) does not ask (see Switchboard.member).
    chooses = True

    def __init__(self, state: DomainState) -> None:
        self.state = state

    @property
    def members(self) -> Unsettled:
        return self

    def __getitem__(self, name: str) -> Any:
        state = self.state
        if state.engines.reference is None:
            info = state.candidates[name]
            if info.construct is not None:
                # A library may build constants of its own classes at import, before
                # materialize(): those are the library's objects, and choose nothing.
                return info.construct
            raise CoheriqDomainError(
                f"Cannot call candidate {name!r} of domain {state.name!r}: the domain is "
                "not materialized yet, so no engine can be chosen. Code that runs before "
                f"materialize() (the library's own import) can call the library's "
                f"implementation directly as {info.reference.__qualname__}.__wrapped__(...). "
                f"{state.unmaterialized_fix()}"
            )
        return state.choice.member(name)
