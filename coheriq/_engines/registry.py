"""The engines of one copy of a domain: registered (by :class:`~coheriq.EngineMeta`), loaded
from entry points, started once. No lock is held while an engine's module is imported or its
``__init__`` runs.
"""

from __future__ import annotations

import _thread  # not threading: the same locks, one import fewer
import sys
from _contextvars import ContextVar

from .._call.compiled import share
from .._names import REFERENCE, check_name, is_engine_name
from .._stdlib import TYPE_CHECKING, caller_outside_coheriq
from ..exceptions import (
    CoheriqDomainError,
    CoheriqEngineError,
    CoheriqEngineLoadError,
    CoheriqEngineNameError,
    CoheriqEngineNotFoundError,
    CoheriqEngineStartError,
    CoheriqTypeError,
    did_you_mean,
    listing,
)
from .meta import EngineMeta, supplier
from .start import EngineStart, instantiate, runs_no_code

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from typing import Any

    from .._choice.state import DomainState
    from .declines import Step


# While an advertised engine's module is imported: every engine class it registers and
# name it reserves, in any domain, for a failed import to take back.
_loading: ContextVar[list[tuple[Engines, EngineMeta | str]] | None] = ContextVar(
    "coheriq: engines registered by the load in progress", default=None
)

loading_for: ContextVar[Any] = ContextVar(
    "coheriq: the copy of a domain an engine is loaded for", default=None
)
"""While an advertised engine's module is imported: the state of the copy of its domain
it is imported for, which the domain's name then stands for."""

building: ContextVar[object] = ContextVar("coheriq: the engine being materialized", default=None)
"""The :class:`~coheriq.AccelerationEngine` whose ``materialize()`` runs here: the class
it builds may take the name it reserved."""


def _defined_again(existing: type) -> bool:
    """Whether the class statement running now is ``existing``'s module's body, run again."""
    frame = caller_outside_coheriq()
    return (
        frame is not None
        and frame.f_code.co_name == "<module>"
        and frame.f_globals.get("__name__") == existing.__module__
    )


class Engines:
    """The engine classes of one copy of a domain, and the one instance of each."""

    def __init__(self, state: DomainState) -> None:
        self.state = state
        self.reference: EngineMeta | None = None  # the reference class, once materialized
        self.by_name: dict[str, EngineMeta] = {}
        self.reserved: dict[str, object] = {}  # name -> its AccelerationEngine, not materialized
        self.classes: list[EngineMeta] = []  # every engine class registered, named or not
        # Class candidate -> {implementation: the engine class whose body defines it, None for
        # the reference}, for isinstance.
        self.implementations: dict[str, dict[type, EngineMeta | None]] = {}
        self.converting = False  # whether an engine declares conversions
        self._instances: dict[EngineMeta, dict[str, Any]] = {}  # the members of each
        # (engine class, the engines after it in an ordered list) -> members.
        self._then: dict[tuple[EngineMeta, tuple[Any, ...]], dict[str, Any]] = {}
        self._started: dict[EngineMeta, Any] = {}  # the instance of each
        self._starting: dict[EngineMeta, EngineStart] = {}  # engines whose __init__ runs now

    def require_reference(
        self, action: str, error: type[CoheriqDomainError] = CoheriqDomainError
    ) -> EngineMeta:
        """Return the reference class, or raise ``error`` saying that one cannot ``action``."""
        reference = self.reference
        if reference is None:
            raise error(
                f"Cannot {action}: domain {self.state.name!r} is not materialized yet, and must "
                f"be materialized first. {self.state.unmaterialized_fix()}"
            )
        return reference

    def reference_of(self, candidate: str) -> Any:
        """The reference implementation of ``candidate``; None for one not imported yet."""
        info = self.state.candidates.get(candidate)
        return None if info is None else info.reference

    def check_name_free(self, name: str) -> None:
        """Raise a CoheriqEngineError if engine ``name`` is registered, or reserved other
        than for the class being built (:data:`building`)."""
        existing = self.by_name.get(name)
        if existing is not None and _defined_again(existing):
            raise CoheriqEngineError(
                f"Domain {self.state.name!r} has engine {name!r} already: module "
                f"{existing.__module__!r} defines it again (a reload of the engine's module, "
                "or a notebook cell run again). An engine is defined once per process, since "
                "objects and choices refer to it: restart the program to load the new code."
            )
        if existing is not None:
            raise CoheriqEngineError(
                f"Domain {self.state.name!r} has an engine named {name!r} already "
                f"({existing.__module__}.{existing.__qualname__}); choose another name."
            )
        owner = self.reserved.get(name)
        if owner is not None and owner is not building.get():
            raise CoheriqEngineError(
                f"Domain {self.state.name!r} has an engine named {name!r} already: "
                f"{owner!r}, created in module {getattr(owner, 'module', '?')!r}, reserved the "
                "name. Choose another name (each engine is created once)."
            )

    def reserve(self, name: str, owner: object) -> None:
        """Reserve engine ``name`` for ``owner``, an AccelerationEngine being written."""
        with self.state.lock:
            self.check_name_free(name)
            self.reserved[name] = owner
        if (loaded := _loading.get()) is not None:
            loaded.append((self, name))

    def register(self, cls: EngineMeta) -> None:
        """Record the new engine class ``cls`` (its name checked free again)."""
        with self.state.lock:
            name = cls.__coheriq_name__
            if name is not None:
                self.check_name_free(name)
                self.by_name[name] = cls
                self.reserved.pop(name, None)
            self.classes.append(cls)
            if cls.__coheriq_conversions__ is not None and not self.converting:
                self._convert_at_reference()
            for candidate in cls.__coheriq_overrides__:
                if candidate in self.implementations:
                    self.implementations[candidate].setdefault(getattr(cls, candidate), cls)
                    self._refresh_isinstance(candidate)
        if (loaded := _loading.get()) is not None:
            loaded.append((self, cls))

    def _convert_at_reference(self) -> None:
        """From the first engine that declares conversions: the reference class's function
        candidates convert what reaches them from an engine (``super()``, a fallback)."""
        from .conversions import ReferenceReached  # imported when cls was defined

        self.converting = True
        reference = self.reference
        for name, info in self.state.candidates.items():
            if reference is not None and not info.is_class:
                reached = ReferenceReached(self.state, name, info.reference)
                type.__setattr__(reference, name, reached)

    def _forget(self, cls: EngineMeta | str) -> None:
        """Drop the engine class ``cls`` (or reserved name), from an import that failed."""
        with self.state.lock:
            if isinstance(cls, str):
                self.reserved.pop(cls, None)
                return
            if cls in self.classes:
                self.classes.remove(cls)
            if self.by_name.get(cls.__coheriq_name__ or "") is cls:
                del self.by_name[cls.__coheriq_name__]  # type: ignore[arg-type]
            for candidate, implementations in self.implementations.items():
                for impl, owner in list(implementations.items()):
                    if owner is cls:
                        del implementations[impl]
                self._refresh_isinstance(candidate)

    def _refresh_isinstance(self, candidate: str) -> None:
        """Let the marked class answer isinstance natively (no Python call) unless an
        implementation does not derive from it."""
        from .._call.marked import check_implementations  # imported with the class

        marked = self.reference_of(candidate)
        # By the MRO: the marked class's issubclass would count every implementation.
        foreign = any(marked not in impl.__mro__ for impl in self.implementations[candidate])
        check_implementations(marked, foreign)

    def engine_of_type(self, cls: type) -> str | None:
        """The engine whose class body defines ``cls``, or one of its bases, as an
        implementation of a class candidate (for a mixin, the first engine on it); or None."""
        for klass in cls.__mro__:
            for implementations in self.implementations.values():
                if klass in implementations:
                    owner = implementations[klass]
                    if owner is None or owner.__coheriq_name__ is not None:
                        return REFERENCE if owner is None else owner.__coheriq_name__
                    users = [e for e in self.by_name.values() if issubclass(e, owner)]
                    return users[0].__coheriq_name__ if users else repr(owner)
        return None

    def names(self) -> list[str]:
        """Sorted names of the registered and the advertised engines (imports none)."""
        from .. import discovery

        advertised = [n for n in discovery.advertised(self.state.name) if is_engine_name(n)]
        return sorted(set(self.by_name) | set(self.reserved) | set(advertised))

    def resolve(self, engine: object) -> EngineMeta:
        """Return the engine class that ``engine``, a name or an engine class, stands for.
        CoheriqEngineNameError for an invalid name, CoheriqEngineNotFoundError for an unknown
        one, CoheriqTypeError for neither, another domain's class or an unnamed mixin."""
        state = self.state
        if isinstance(engine, str):
            if engine not in self.by_name:
                check_name(engine, "engine name", CoheriqEngineNameError)
            return self.engine_class(engine)
        if not isinstance(engine, EngineMeta):
            raise CoheriqTypeError(
                f"An engine of domain {state.name!r} is given by its name, its "
                f"AccelerationEngine or its engine class, not by {type(engine).__name__} "
                f"({engine!r})."
            )
        cls, owner = engine, engine.__coheriq_domain__
        if owner.engines is not self:
            if owner.name == state.name:  # two copies of one library's domain
                raise CoheriqTypeError(
                    f"{cls!r} was defined for an earlier copy of domain {state.name!r}, before "
                    "its library's module ran again (a reload): pass the engine by name, which "
                    "loads it for the copy in use."
                )
            raise CoheriqTypeError(
                f"{cls!r} belongs to domain {owner.name!r}, not to {state.name!r}; pass an "
                f"engine of domain {state.name!r}."
            )
        if cls.__coheriq_name__ is None:
            raise CoheriqTypeError(
                f"{cls!r} is an unnamed engine mixin of domain {state.name!r}; only named "
                "engines can be activated. Subclass it with name='...' to make an engine of it."
            )
        return cls

    def engine_class(self, name: str, *, named_by: str = "") -> EngineMeta:
        """Return the class of engine ``name``, importing its entry point the first time;
        ``named_by``: where the name came from, for messages. CoheriqDomainError before the
        domain is materialized, CoheriqEngineNotFoundError for an engine neither registered nor
        advertised, CoheriqEngineLoadError where its entry point fails to load or define it."""
        state = self.state
        reference = self.require_reference(f"look up engine {name!r}")
        if name == REFERENCE:
            return reference
        cls = self.by_name.get(name)
        if cls is not None:
            return cls
        owner = self.reserved.get(name)
        if owner is not None:
            raise CoheriqEngineNotFoundError(
                f"Engine {name!r} of domain {state.name!r}{named_by} is created ({owner!r}, "
                f"in module {getattr(owner, 'module', '?')!r}) but not materialized yet. Its "
                "author calls materialize() after the last override; import the engine's "
                "module completely before using the engine."
            )
        from .. import discovery  # a program that names no advertised engine reads no metadata

        ep = discovery.advertised(state.name).get(name) if is_engine_name(name) else None
        if ep is None:
            known = self.names()
            invalid = "" if is_engine_name(name) else " (that is not a valid engine name)"
            raise CoheriqEngineNotFoundError(
                f"Domain {state.name!r} has no engine named {name!r}{named_by}{invalid}."
                f"{did_you_mean(name, known)} Available engines: {listing(known)} (and "
                f"{REFERENCE!r}, the domain's own implementations). Install the package that "
                f"provides the engine, or advertise it in entry-point group "
                f"{discovery.group_of(state.name)!r}."
            )
        return self._load(name, ep)

    def _load(self, name: str, ep: Any) -> EngineMeta:
        """Import the module that advertises engine ``name``; return the engine class. Where
        the import fails, defines no such engine (CoheriqEngineLoadError) or is interrupted,
        the engine classes it registered are taken back, and the module leaves ``sys.modules``
        if this import put it there, so that a retry imports it afresh."""
        from .. import discovery

        state = self.state
        module = discovery.module_of(ep)
        imported = sys.modules.get(module)
        # A module that defined its engines for another copy only runs again, for this one.
        again = (
            imported is not None
            and state.copies.made > 1
            and not getattr(getattr(imported, "__spec__", None), "_initializing", False)
            and not any(c.__module__ == module for c in self.classes)
        )
        registered: list[tuple[Engines, EngineMeta | str]] = []
        loading, copy = _loading.set(registered), loading_for.set(state)
        try:
            discovery.load(state.name, name, ep, again=again)
            cls = self.by_name.get(name)
            if cls is None:
                # The names reserved, and those of the classes registered (None: a mixin's).
                defined = [getattr(c, "__coheriq_name__", c) for e, c in registered if e is self]
                names = {n for n in defined if isinstance(n, str)}
                also = f" It defined {listing(names)} instead." if names else ""
                raise CoheriqEngineLoadError(
                    f"Engine {name!r} of domain {state.name!r} is advertised by "
                    f"{discovery.describe(ep)}, but importing it did not define an engine of "
                    f"that name.{also} The entry point's name and the engine class's name= "
                    "must agree."
                )
        except BaseException:
            for engines, engine_cls in registered:
                engines._forget(engine_cls)
            if imported is None:
                sys.modules.pop(module, None)
            raise
        finally:
            loading_for.reset(copy)
            _loading.reset(loading)
        return cls

    def members_of(self, cls: EngineMeta, then: tuple[Any, ...] = ()) -> Mapping[str, Any]:
        """Return candidate name -> what a call runs on ``cls``'s instance, starting it once;
        ``then``: the engines after ``cls`` in an ordered list, which run the calls that its
        implementations all decline. Other threads wait on a start (no lock is held while
        ``__init__`` runs); should it fail (CoheriqEngineStartError), the next one tries again.
        A CoheriqEngineError where the engine's own ``__init__`` asks for it."""
        if then:
            members = self._then.get((cls, then))
            if members is None:
                members = {
                    name: self._then_member(then, name, member)
                    for name, member in self.members_of(cls).items()
                }
                with self.state.lock:
                    members = self._then.setdefault((cls, then), members)
            return members
        lock = self.state.lock
        while True:
            members = self._instances.get(cls)
            if members is not None:
                return members
            with lock:
                members = self._instances.get(cls)
                if members is not None:
                    return members
                start = self._starting.get(cls)
                if start is None:
                    start = self._starting[cls] = self.start_record(cls)
                    break  # this thread starts the engine
            if start.thread == _thread.get_ident():
                if runs_no_code(cls):
                    # A start of the reference interrupted in this thread (a signal
                    # handler, a __del__): another instance harms nothing.
                    return self._members_from(cls, instantiate(self.state, cls))
                raise CoheriqEngineError(
                    f"Engine {cls.__coheriq_name__!r} of domain {self.state.name!r} was asked "
                    "for from its own __init__ (through using_engine, enable_engine or "
                    "engine_class), before it existed. Inside the engine, use its own "
                    "implementations (self.name(...)) instead."
                )
            start.wait()
        try:
            instance = instantiate(self.state, cls)
            with lock:  # so that no candidate published meanwhile is missed
                members = self._members_from(cls, instance)
                if share is not None:  # free-threaded: what every call reads, uncounted
                    for obj in (instance, members, *members.values()):
                        share(obj)
                self._instances[cls] = members
                self._started[cls] = instance
        finally:
            with lock:
                del self._starting[cls]
            start.finish()
        return members

    def start_record(self, cls: EngineMeta) -> EngineStart:
        """A start of ``cls`` by this thread, which other threads can wait on."""
        return EngineStart(cls, self.require_reference("start an engine"), self.state.name)

    def starting_here(self, cls: EngineMeta) -> bool:
        """Whether this thread is starting ``cls`` now (its ``__init__`` runs)."""
        start = self._starting.get(cls)
        return start is not None and start.thread == _thread.get_ident()

    def _then_member(self, then: tuple[Any, ...], name: str, member: Any) -> Any:
        """``member``, a call of ``name`` on an engine, going on where all its implementations
        decline to the engines ``then`` that implement ``name``: each started when a call first
        reaches it, passed over where it cannot start."""
        from .declines import Chain, chain_of, steps_of  # imported with the first engine class

        chain = chain_of(member)
        if chain is None or chain.steps[-1].final:
            return member
        tried = {step.owner for step in chain.steps}
        # Each later engine's steps, made on the first call that reaches it: an engine
        # keeps its one instance, so they hold (a soft decline may pass on every call).
        made: dict[Any, list[Step]] = {}

        def later() -> Iterator[Step]:
            for engine in then:
                try:
                    cls = self.engine_class(engine) if isinstance(engine, str) else engine
                    if cls is self.reference:
                        return  # the reference answers last anyway
                    found = made.get(cls)
                    if found is None:
                        self.members_of(cls)
                except (
                    CoheriqEngineNotFoundError,
                    CoheriqEngineLoadError,
                    CoheriqEngineStartError,
                ):
                    continue
                if found is None:
                    instance = self._started.get(cls)
                    found = [s for s in steps_of(cls, instance, name) if s.owner not in tried]
                    made[cls] = found
                yield from found
                if found and found[-1].final:
                    return

        return Chain(self.state, name, chain.steps, chain.reference, later).function

    def _members_from(self, cls: EngineMeta, instance: Any) -> dict[str, Any]:
        """What a call of each candidate runs on the engine ``instance``."""
        return {name: self._member(cls, instance, name) for name in self.state.candidates}

    def _member(self, cls: EngineMeta, instance: Any, name: str) -> Any:
        """What a call of candidate ``name`` runs on the engine ``instance``."""
        info = self.state.candidates[name]
        try:
            member = getattr(instance, name)
        except AttributeError as exc:  # a property of the engine's, or __getattr__, failing
            raise CoheriqEngineStartError(
                f"Engine {cls.__coheriq_name__ or REFERENCE!r} of domain {self.state.name!r} "
                f"failed to start: reading its implementation of {name!r} raised "
                f"AttributeError: {exc}. Each candidate must be an attribute of the engine's "
                "instance."
            ) from exc
        if info.construct is None:  # a function's: a bound method, or one that may decline
            if name in getattr(cls, "__coheriq_declining__", ()):
                from .declines import bound_chain  # imported when cls was defined

                return bound_chain(member)  # its Chain, which a list may extend
            if cls.__coheriq_conversions__ is None:
                return member
            from .conversions import crossing  # imported when cls was defined

            return crossing(self.state, name, cls, supplier(cls, name), member)
        from .own_class import LibraryClass  # imported with the class

        if member is info.reference or (isinstance(member, LibraryClass) and member.info is info):
            return info.construct  # not the class: its call would dispatch
        if name in getattr(cls, "__coheriq_declining__", ()):  # may decline a construction
            from .declines import Chain, steps_of  # imported when cls was defined

            return Chain(self.state, name, steps_of(cls, instance, name), info.construct).function
        return member

    def check_overrides(self, name: str, reference: Any) -> None:
        """Check the overrides of candidate ``name``, marked or redefined late
        (:func:`coheriq._engines.overrides.check_late_overrides`)."""
        classes = [cls for cls in self.classes if name in cls.__coheriq_overrides__]
        if not classes:
            return
        from .overrides import check_late_overrides  # only when needed, as in EngineMeta

        in_use = {*self._started, *self._starting}
        check_late_overrides(self.state, name, reference, classes, in_use)

    def candidate_changed(self, name: str) -> None:
        """Bring the engines started so far, and ``isinstance``, up to date with candidate
        ``name``, new or redefined. With the lock held, after :meth:`check_overrides`."""
        implementations = self.implementations.get(name)
        if implementations is not None:
            for cls in self.classes:
                if name in cls.__coheriq_overrides__:
                    implementations.setdefault(getattr(cls, name), cls)
            self._refresh_isinstance(name)
        for cls, instance in self._started.items():
            self._instances[cls][name] = self._member(cls, instance, name)
        for (cls, then), members in self._then.items():
            members[name] = self._then_member(then, name, self._instances[cls][name])

    def reinit_in_child(self) -> None:
        """In a forked child: forget the starts that threads of the parent had in flight."""
        self._starting.clear()
        self.state.choice.choosing = None
