"""The process-global choice of one copy of a domain: made once, then never changed.

The first call outside any block (or ``enable_engine``) makes it, by the one rule:
the choice another copy of the library's module made; else an earlier
``enable_engine``; else the engine ``<PREFIX>_ENGINE`` names; else the reference.
"""

from __future__ import annotations

import _thread
import os
import sys

from .._names import REFERENCE
from .._stdlib import INFO, TYPE_CHECKING, log, outside_coheriq
from ..exceptions import CoheriqDomainError, CoheriqError
from .ordered import Tried, after_chosen, describe_tried, first_that_starts, parse_engine_list

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    from .._engines.meta import EngineMeta
    from .._engines.start import EngineStart
    from .state import DomainState

# Called with a copy's state and its Settlement once a global choice is made, outside the
# lock: a shadow verification (coheriq._tools.shadow) waiting for the engine to watch.
watchers: list[Callable[[DomainState, Settlement], None]] = []


class Settlement:
    """The process-global choice of a domain, once it is made.

    Attributes:
        reason: ``"enable_engine"``, ``"environment variable NAME='VALUE'"`` or
            ``"default"`` (for a later copy of the module, with what it inherited).
        members: Candidate name -> what a call of it runs.
        where: ``FILE:LINE`` of the call or ``enable_engine`` that made the choice.
        state: The state of the copy of the domain that made it.
        during_import: Whether the library's module was still being imported then.
        tried: What an ordered list tried (see :data:`~coheriq._choice.ordered.Tried`).
    """

    __slots__ = (
        "during_import",
        "engine",
        "engine_class",
        "members",
        "reason",
        "state",
        "tried",
        "where",
    )

    def __init__(
        self,
        engine: str,
        engine_class: EngineMeta,
        reason: str,
        members: Mapping[str, Any],
        where: str,
        state: DomainState | None = None,
        tried: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.engine = engine
        self.engine_class = engine_class
        self.reason = reason
        self.members = members
        self.where = where
        self.state = state
        self.during_import = False
        self.tried = tried

    def __repr__(self) -> str:
        return f"<Settlement on {self.engine!r} by {self.reason}>"


class Unsettled:
    """What proxies find outside blocks until the global choice is made: asking it for a
    member makes the choice (before ``materialize()``, a class constructs itself)."""

    __slots__ = ("state",)

    chooses = True  # what only looks does not ask (see Switchboard.member)

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
                return info.construct
            raise CoheriqDomainError(
                f"Cannot call candidate {name!r} of domain {state.name!r}: the domain is "
                "not materialized yet, so no engine can be chosen. Code that runs before "
                f"materialize() (the library's own import) can call the library's "
                f"implementation directly as {info.reference.__qualname__}.__wrapped__(...). "
                f"{state.unmaterialized_fix()}"
            )
        return state.choice.member(name)


class Unchosen:
    """A candidate's slot until the global choice is made: a call makes the choice (it is
    reached only where a block exited out of order left the variable set to ``None``)."""

    __slots__ = ("name", "unsettled")

    chooses = True

    def __init__(self, unsettled: Unsettled, name: str) -> None:
        self.unsettled = unsettled
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.unsettled[self.name](*args, **kwargs)

    def __repr__(self) -> str:
        return f"<candidate {self.name!r} of domain {self.unsettled.state.name!r}: not chosen yet>"


class Prospect:
    """What a call here and now would run, and why (:meth:`GlobalChoice.prospect`).

    Attributes:
        engine: The engine's name; None where the variable names no engine that exists.
        reason: Why, as a sentence.
        engine_class: Its class; None for an advertised engine not imported yet.
        tried: What an ordered list tried (see :data:`~coheriq._choice.ordered.Tried`).
    """

    __slots__ = ("engine", "engine_class", "reason", "tried")

    def __init__(
        self,
        engine: str | None,
        reason: str,
        engine_class: EngineMeta | None = None,
        tried: Tried = (),
    ) -> None:
        self.engine = engine
        self.reason = reason
        self.engine_class = engine_class
        self.tried = tried

    def __repr__(self) -> str:
        return f"<Prospect of {self.engine!r}: {self.reason}>"


class GlobalChoice:
    """Makes and holds the global choice (``settled``, None before) of one copy of a domain."""

    def __init__(self, state: DomainState) -> None:
        self.state = state
        self.settled: Settlement | None = None
        self.unsettled = Unsettled(state)
        # The start of the engine that is to be the choice: a first call in another thread
        # waits for it rather than choose the reference while enable_engine starts it.
        self.choosing: EngineStart | None = None
        # For a library accelerated from the outside: whether it is being imported now
        # (a call meanwhile runs the reference and chooses nothing).
        self.importing: Callable[[], bool] | None = None

    def unchosen(self, name: str) -> Unchosen:
        """What candidate ``name``'s slot holds until the choice is made."""
        return Unchosen(self.unsettled, name)

    def settle(self, action: str = "call its candidates") -> Settlement:
        """Return the global choice, made now if need be; ``action`` is for the error
        raised when the domain is not materialized."""
        settled = self.settled
        if settled is not None:
            return settled
        state = self.state
        if self._await_choosing():
            return self.settle(action)
        reference = state.engines.require_reference(action)
        choice = state.copies.choice
        if choice is not None and choice.state is not state:
            return self._settle_as(choice)
        variable, value = self.env_choice()
        if not value:
            return self.settle_on(reference, "default")
        # Resolved before taking the lock: naming an engine may import its module.
        named_by = f" (named by the environment variable {variable})"
        if "," in value:  # an ordered choice: the first of them that starts here
            names: list[str | EngineMeta] = [*parse_engine_list(value, named_by)]
            cls, tried = first_that_starts(state.engines, names, named_by=named_by, for_choice=True)
            reason = f"environment variable {variable}={value!r}"
            return self.settle_on(cls, reason, tried=tried, then=after_chosen(names, tried))
        cls = state.engines.engine_class(value, named_by=named_by)
        return self.settle_on(cls, f"environment variable {variable}={value!r}")

    def start_for_choice(self, cls: EngineMeta) -> Mapping[str, Any]:
        """Start ``cls``, which is to be the choice, while first calls in other threads wait."""
        record = self._begin_choosing(cls)
        try:
            members: Mapping[str, Any] = self.state.engines.members_of(cls)
        finally:
            self._end_choosing(record)
        return members

    def _begin_choosing(self, cls: EngineMeta) -> EngineStart | None:
        """Record this thread's start of ``cls`` as the choice's; None where one is recorded."""
        start: EngineStart = self.state.engines.start_record(cls)
        with self.state.lock:
            if self.choosing is not None:
                return None
            self.choosing = start
        return start

    def _end_choosing(self, record: EngineStart | None) -> None:
        """End what :meth:`_begin_choosing` recorded, once the choice is stored."""
        if record is not None:
            with self.state.lock:
                self.choosing = None
            record.finish()

    def _await_choosing(self) -> bool:
        """Wait while another thread starts the engine that is to be the choice; whether it
        did. A CoheriqEngineError where that start waits for this thread."""
        start = self.choosing
        if start is None or start.thread == _thread.get_ident():
            return False
        start.wait()
        return True

    def member(self, name: str) -> Any:
        """What a call of candidate ``name`` runs under the global choice, made now if need be
        (not while :attr:`importing`: then the reference)."""
        importing = self.importing
        if importing is not None and self.settled is None and importing():
            reference = self.state.engines.require_reference(f"call candidate {name!r}")
            return self.state.engines.members_of(reference)[name]
        return self.settle(f"call candidate {name!r}").members[name]

    def settle_on(
        self,
        cls: EngineMeta,
        reason: str,
        *,
        inherited: bool = False,
        tried: Tried = (),
        then: tuple[Any, ...] = (),
    ) -> Settlement:
        """Make ``cls`` the global choice unless one is made; return the choice.

        Copies of a library's module share one choice: where another copy chose a
        different engine, that is returned, unless this copy is taking its share
        (``inherited``). ``tried``, ``then``: what an ordered list tried, and its
        engines after ``cls``.
        """
        state, copies = self.state, self.state.copies
        engine = cls.__coheriq_name__ or REFERENCE
        settled = self.settled
        if settled is not None:
            return settled
        choice = copies.choice
        if choice is not None and not inherited and choice.engine != engine:
            return choice  # type: ignore[no-any-return]
        record = self._begin_choosing(cls)
        try:
            members = state.engines.members_of(cls, then)  # starts the engine, holding no lock
            with state.lock:
                settled = self.settled
                if settled is not None:  # another thread chose meanwhile
                    return settled
                choice = copies.choice
                if choice is not None and not inherited and choice.engine != engine:
                    return choice  # type: ignore[no-any-return]
                where, _ = outside_coheriq()
                settled = Settlement(engine, cls, reason, members, where, state, tried)
                spec = getattr(sys.modules.get(state.module), "__spec__", None)
                settled.during_import = bool(getattr(spec, "_initializing", False))
                state.switchboard.connect(members)
                self.settled = settled
                if copies.choice is None:
                    copies.choice = settled
                state.scopes.refresh_dispatch()
        finally:
            self._end_choosing(record)
        for watcher in list(watchers):  # shadow verification waits for the choice
            watcher(state, settled)
        log(
            INFO,
            "domain %r runs on engine %r (%s), chosen at %s%s",
            state.name,
            settled.engine,
            reason,
            where,
            f"; tried {describe_tried(tried)}" if tried else "",
        )
        return settled

    def reconnect(self, members: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """Make the settled choice's calls run ``members`` instead (the same implementations,
        watched: shadow verification); return the members it ran before, or None where no
        choice is settled yet."""
        state = self.state
        with state.lock:
            settled = self.settled
            if settled is None:
                return None
            before, settled.members = settled.members, members
            state.switchboard.connect(members)
        return before

    def _settle_as(self, choice: Settlement) -> Settlement:
        """Settle this copy of the library on the engine another copy runs on; where this
        copy cannot run it, warn once and run the reference."""
        state = self.state
        reference = state.engines.require_reference("inherit the global choice")
        engine = choice.engine
        reason = choice.reason
        if "earlier copy" not in reason:
            reason = f"{reason}, for an earlier copy of module {state.module!r}"
        if engine == REFERENCE:
            return self.settle_on(reference, reason, inherited=True)
        try:
            cls = state.engines.engine_class(engine, named_by=" (the engine the program chose)")
            return self.settle_on(cls, reason, inherited=True)
        except CoheriqError as error:
            state.warn_once(
                ("global", engine),
                f"Module {state.module!r} ran again (a reload or a fresh import), and its "
                f"new copy of domain {state.name!r} cannot run engine {engine!r}, which the "
                f"program chose ({choice.reason}): {str(error).rstrip('.')}. This copy runs "
                "on the reference implementation. Import the engine's module again after "
                "reloading the library, or advertise the engine through an entry point so "
                "that coheriq can.",
            )
        return self.settle_on(
            reference,
            f"the reference: engine {engine!r}, chosen for an earlier copy of module "
            f"{state.module!r}, is not available to this copy",
            inherited=True,
        )

    def env_value(self) -> str:
        """The engine ``<PREFIX>_ENGINE`` names now ("" when unset, empty or no prefix)."""
        variable = self.state.env_var
        return (os.environ.get(variable, "") if variable else "").strip()

    def env_choice(self) -> tuple[str | None, str]:
        """The environment variable that names the engine now, and what it names:
        ``<PREFIX>_ENGINE``, else the engine ``<PREFIX>_VERIFY`` (``gpu:compiled``) verifies."""
        variable, value = self.state.env_var, self.env_value()
        if value or variable is None:
            return variable, value
        verify = variable[: -len("_ENGINE")] + "_VERIFY"
        engine = os.environ.get(verify, "").split(":")[0].strip()
        return (verify, engine) if engine else (variable, value)

    def prospect(self) -> Prospect:
        """What a call here and now would run, and why, without choosing anything.

        A list in the variable is tried (started, not chosen) now, as the first call
        would try it.
        """
        state = self.state
        by_name = state.engines.by_name
        scope = state.scopes.live()
        if scope is not None:
            cls = by_name.get(scope.engine) or state.engines.reference
            why = "the innermost using_engine block in this context"
            return Prospect(scope.engine, why, cls, scope.tried)
        settled = self.settled
        if settled is not None:
            how = {"enable_engine": "enable_engine", "default": "the reference by default"}.get(
                settled.reason, f"the {settled.reason}"
            )
            why = f"{how}, settled by a call at {settled.where}"
            return Prospect(settled.engine, why, settled.engine_class, settled.tried)
        choice = state.copies.choice
        if choice is not None:
            why = (
                f"the choice made for an earlier copy of module {state.module!r} "
                f"({choice.reason}); not settled in this copy yet"
            )
            return Prospect(choice.engine, why, by_name.get(choice.engine), choice.tried)
        return self._prospect_from_environment()

    def _prospect_from_environment(self) -> Prospect:
        """:meth:`prospect` where only the environment variable can choose."""
        state = self.state
        by_name = state.engines.by_name
        variable, value = self.env_choice()
        if not value or value == REFERENCE:
            raw = os.environ.get(variable) if variable else None
            if value:
                why = f"{variable} is {value!r}"
            elif raw:  # set, to blanks only
                why = f"{variable} is set to {raw!r}, which names no engine"
            else:
                why = "no enable_engine and no variable set"
            why = f"the reference by default ({why}); not settled yet"
            return Prospect(REFERENCE, why, state.engines.reference)
        reason = f"the environment variable {variable}={value!r}; not settled yet"
        if "," in value:
            named_by = f" (named by the environment variable {variable})"
            try:
                names: list[str | EngineMeta] = [*parse_engine_list(value, named_by)]
                cls, tried = first_that_starts(state.engines, names, named_by=named_by)
            except CoheriqError as error:
                return Prospect(None, f"{reason}, and the first call will fail: {error}")
            engine = cls.__coheriq_name__ or REFERENCE
            return Prospect(engine, f"{reason}; the first of the list that starts here", cls, tried)
        if value in by_name:
            return Prospect(value, reason, by_name[value])
        from .. import discovery  # reading metadata imports no engine

        if value in discovery.advertised(state.name):
            return Prospect(value, reason + " (advertised, not imported yet)")
        return Prospect(None, reason + ", which names no engine: the first call will fail")
