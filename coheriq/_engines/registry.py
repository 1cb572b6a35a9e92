"""The engines of one copy of a domain: registered, loaded from entry points, started.

An :class:`Engines` registry belongs to one :class:`~coheriq.AccelerationDomain`
(``domain.engines``), made with the domain's
:class:`~coheriq._choice.state.DomainState`, which is all it reads of the domain.
:class:`~coheriq.EngineMeta` registers each engine class with it when the class
statement runs, through the three methods that are its seam
(:meth:`Engines.reference_of`, :meth:`Engines.check_name_free`,
:meth:`Engines.register`); the rest of coheriq asks it for an engine's class by
name (:meth:`Engines.engine_class`, which imports an advertised engine's module
the first time) and for the one instance of each engine class
(:meth:`Engines.members_of`, which starts it).

Locks: registration takes the domain's lock briefly; no lock is held while an
engine's module is imported or while its ``__init__`` runs (see
:meth:`Engines.members_of`).
"""

from __future__ import annotations

# _thread rather than threading: the same locks, without importing threading.
import _thread
import sys

# _contextvars is what the contextvars module re-exports; importing it directly
# spares a module at start-up.
from _contextvars import ContextVar

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
from .meta import EngineMeta
from .start import EngineStart, instantiate, runs_no_code

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping
    from typing import Any

    from .._choice.state import DomainState
    from .declines import Step


__all__ = ["Engines"]

# While an advertised engine's module is imported: every engine class it
# registers and every name it reserves, in any domain, so that a failed import
# can take back exactly those.
_loading: ContextVar[list[tuple[Engines, EngineMeta | str]] | None] = ContextVar(
    "coheriq: engines registered by the load in progress", default=None
)

loading_for: ContextVar[Any] = ContextVar(
    "coheriq: the copy of a domain an engine is loaded for", default=None
)
"""While an advertised engine's module is imported: the state of the copy of its
domain it is imported for, which the domain's name then stands for (see
:meth:`coheriq._library.registry.Copies.named`)."""

building: ContextVar[object] = ContextVar("coheriq: the engine being materialized", default=None)
"""The :class:`~coheriq.AccelerationEngine` whose ``materialize()`` runs in this
context: the class it builds may take the name it reserved."""


def _defined_again(existing: type) -> bool:
    """Whether the class statement running now is ``existing``'s module's body, run again."""
    frame = caller_outside_coheriq()
    return (
        frame is not None
        and frame.f_code.co_name == "<module>"
        and frame.f_globals.get("__name__") == existing.__module__
    )


class Engines:
    """The engine classes of one copy of a domain, and the one instance of each.

    Attributes:
        by_name: Engine name -> engine class, for the named engines registered.
        reserved: Engine name -> the :class:`~coheriq.AccelerationEngine` that
            reserved it at construction and is not materialized yet.
        classes: Every engine class registered, named or not, in order.
        implementations: Class candidate -> {implementing class: the engine class
            whose body defines it, or None for the reference}; marked classes
            answer ``isinstance`` from it.
        reference: The domain's reference class, the root of its engine classes,
            once :meth:`~coheriq.AccelerationDomain.materialize` made it; else None.
    """

    def __init__(self, state: DomainState) -> None:
        self.state = state
        self.reference: EngineMeta | None = None
        self.by_name: dict[str, EngineMeta] = {}
        self.reserved: dict[str, object] = {}
        self.classes: list[EngineMeta] = []
        self.implementations: dict[str, dict[type, EngineMeta | None]] = {}
        self._instances: dict[EngineMeta, dict[str, Any]] = {}  # the members of each
        # The members of an engine chosen from an ordered list, for the rest of the
        # list: (engine class, the engines after it) -> members (see members_of).
        self._then: dict[tuple[EngineMeta, tuple[Any, ...]], dict[str, Any]] = {}
        self._started: dict[EngineMeta, Any] = {}  # the instance of each
        self._starting: dict[EngineMeta, EngineStart] = {}  # engines whose __init__ runs now

    def require_reference(
        self, action: str, error: type[CoheriqDomainError] = CoheriqDomainError
    ) -> EngineMeta:
        """Return the reference class, or raise ``error`` saying the domain is not materialized.

        ``action`` is what the caller was about to do, for the message.
        """
        reference = self.reference
        if reference is None:
            raise error(
                f"Cannot {action}: domain {self.state.name!r} is not materialized yet, and must "
                f"be materialized first. {self.state.unmaterialized_fix()}"
            )
        return reference

    # -- the seam EngineMeta uses -----------------------------------------------------

    def reference_of(self, candidate: str) -> Any:
        """The reference implementation of ``candidate``; None for one not imported yet.

        (A declared candidate, whose module is not imported yet: see
        :meth:`~coheriq.AccelerationDomain.declare`.)
        """
        info = self.state.candidates.get(candidate)
        return None if info is None else info.reference

    def check_name_free(self, name: str) -> None:
        """Raise :class:`~coheriq.CoheriqEngineError` if engine ``name`` is taken.

        A name is taken by a registered engine class, or reserved by an
        :class:`~coheriq.AccelerationEngine` not materialized yet (except for the
        class that engine's own ``materialize()`` builds).
        """
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
        """Reserve engine ``name`` for ``owner``, an AccelerationEngine being written.

        Raises:
            CoheriqEngineError: The name is taken.
        """
        with self.state.lock:
            self.check_name_free(name)
            self.reserved[name] = owner
        loaded = _loading.get()
        if loaded is not None:
            loaded.append((self, name))

    def register(self, cls: EngineMeta) -> None:
        """Record the new engine class ``cls`` (its name checked free again)."""
        with self.state.lock:
            name = cls.__coheriq_name__
            if name is not None:
                self.check_name_free(name)
                self.by_name[name] = cls
                self.reserved.pop(name, None)  # its own reservation, if any
            self.classes.append(cls)
            for candidate in cls.__coheriq_overrides__:
                if candidate in self.implementations:
                    self.implementations[candidate].setdefault(getattr(cls, candidate), cls)
                    self._refresh_isinstance(candidate)
        loaded = _loading.get()
        if loaded is not None:
            loaded.append((self, cls))

    # -- class candidates ---------------------------------------------------------------

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
        """Let the marked class answer isinstance natively unless an engine needs more.

        An engine's class that derives from the marked class is an instance of it
        for Python already; only one that does not needs the marked class's own
        check, which costs a Python call (also for every False answer).
        """
        from .._call.marked import check_implementations  # imported with the class

        marked = self.reference_of(candidate)
        # By the MRO: the marked class's issubclass would count every implementation.
        foreign = any(marked not in impl.__mro__ for impl in self.implementations[candidate])
        check_implementations(marked, foreign)

    def engine_of_type(self, cls: type) -> str | None:
        """The engine whose implementation of a class candidate ``cls`` is, or None.

        The engine is the one whose class body defines the implementation (the
        first named engine built on it, for an unnamed mixin); a subclass of an
        implementation counts as that implementation.
        """
        for klass in cls.__mro__:
            for implementations in self.implementations.values():
                if klass in implementations:
                    owner = implementations[klass]
                    if owner is None or owner.__coheriq_name__ is not None:
                        return REFERENCE if owner is None else owner.__coheriq_name__
                    users = [e for e in self.by_name.values() if issubclass(e, owner)]
                    return users[0].__coheriq_name__ if users else repr(owner)
        return None

    # -- by name --------------------------------------------------------------------------

    def names(self) -> list[str]:
        """Sorted names of the registered and the advertised engines (imports none)."""
        from .. import discovery  # first use of entry points: see engine_class

        advertised = [n for n in discovery.advertised(self.state.name) if is_engine_name(n)]
        return sorted(set(self.by_name) | set(self.reserved) | set(advertised))

    def resolve(self, engine: object) -> EngineMeta:
        """Return the engine class that ``engine`` stands for in this domain.

        Args:
            engine: An engine name (or :data:`REFERENCE`) or an engine class (the
                verbs pass an :class:`~coheriq.AccelerationEngine`'s class).

        Raises:
            CoheriqEngineNameError: A string that is not a valid engine name.
            CoheriqTypeError: ``engine`` is none of these, belongs to another
                domain, or is an unnamed mixin.
            CoheriqEngineNotFoundError: No such engine in the domain.
        """
        state = self.state
        if isinstance(engine, str):
            if engine not in self.by_name:  # a registered name was checked when registered
                check_name(engine, "engine name", CoheriqEngineNameError)
            return self.engine_class(engine)
        if isinstance(engine, EngineMeta):
            cls = engine
        else:
            raise CoheriqTypeError(
                f"An engine of domain {state.name!r} is given by its name, its "
                f"AccelerationEngine or its engine class, not by {type(engine).__name__} "
                f"({engine!r})."
            )
        owner = cls.__coheriq_domain__
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
        """Return the class of engine ``name``, loading its entry point if needed.

        Args:
            name: An engine name, or :data:`REFERENCE`.
            named_by: Where the name came from, for error messages.

        Raises:
            CoheriqDomainError: The domain is not materialized.
            CoheriqEngineNotFoundError: No such engine is registered or advertised.
            CoheriqEngineLoadError: Its entry point failed to load or define it.
        """
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
        # Imported on the first look for an advertised engine, not with coheriq:
        # a program that only uses registered engines never reads package metadata.
        from .. import discovery

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
        """Import the module that advertises engine ``name``; return the engine class.

        If the import fails, or does not define the engine, or is interrupted
        (``KeyboardInterrupt``), exactly the engine classes it registered, in any
        domain, are taken back, and the module leaves ``sys.modules`` only if this
        import put it there: a retry then imports it afresh, and engines loaded
        before from the same module stay.

        Raises:
            CoheriqEngineLoadError: The import failed or defined no such engine.
        """
        from .. import discovery

        state = self.state
        module = discovery.module_of(ep)
        imported = sys.modules.get(module)
        # A module that defined its engines for another copy of this library's
        # module only (see coheriq._library.registry) runs again, for this copy.
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
                defined = [
                    c if isinstance(c, str) else c.__coheriq_name__
                    for e, c in registered
                    if e is self
                ]
                also = (
                    f" It defined {listing({n for n in defined if n})} instead."
                    if any(defined)
                    else ""
                )
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

    # -- the one instance of each engine class -------------------------------------------

    def members_of(self, cls: EngineMeta, then: tuple[Any, ...] = ()) -> Mapping[str, Any]:
        """Return candidate name -> what a call runs on ``cls``'s instance, starting it once.

        ``then``: the engines (names or classes) that follow ``cls`` in the
        user's ordered list, which run a call that ``cls``'s implementations all
        decline (see :mod:`coheriq._engines.declines`), before the reference.

        No lock is held while an engine's ``__init__`` runs: it may take seconds
        (a GPU), import other engines, or wait for threads that enter and leave
        blocks. The first thread to need the engine starts it; others wait on
        that start alone. Should the start fail, the next thread tries again.

        Raises:
            CoheriqEngineStartError: The engine's ``__init__`` failed.
            CoheriqEngineError: The engine was asked for from its own ``__init__``.
        """
        if then:
            return self._members_then(cls, then)
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
                    # A start that runs no code of the engine's (the reference) was
                    # interrupted in this thread (a signal handler, a __del__):
                    # another instance harms nothing.
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
                members = self._instances[cls] = self._members_from(cls, instance)
                self._started[cls] = instance
        finally:
            with lock:
                del self._starting[cls]
            start.finish()
        return members

    def start_record(self, cls: EngineMeta) -> EngineStart:
        """A record of a start of ``cls`` by this thread, which other threads can wait on."""
        return EngineStart(cls, self.require_reference("start an engine"), self.state.name)

    def starting_here(self, cls: EngineMeta) -> bool:
        """Whether this thread is starting ``cls`` now (its ``__init__`` runs)."""
        start = self._starting.get(cls)
        return start is not None and start.thread == _thread.get_ident()

    def _members_then(self, cls: EngineMeta, then: tuple[Any, ...]) -> Mapping[str, Any]:
        """:meth:`members_of` ``cls``, whose declining calls go on to the engines ``then``."""
        key = (cls, then)
        members = self._then.get(key)
        if members is None:
            members = {
                name: self._then_member(then, name, member)
                for name, member in self.members_of(cls).items()
            }
            with self.state.lock:
                members = self._then.setdefault(key, members)
        return members

    def _then_member(self, then: tuple[Any, ...], name: str, member: Any) -> Any:
        """``member``, what a call of ``name`` runs on an engine, going on to the engines
        ``then`` where all its implementations decline."""
        from .declines import Chain, chain_of  # imported with the first engine class (meta)

        chain = chain_of(member)
        if chain is None or chain.steps[-1].final:
            return member
        later = self._later(then, name, {step.owner for step in chain.steps})
        return Chain(self.state, name, chain.steps, chain.reference, later).function

    def _later(
        self, then: tuple[Any, ...], name: str, tried: set[Any]
    ) -> Callable[[], Iterator[Step]]:
        """The steps, for candidate ``name``, of the engines ``then`` that implement it.

        Each is started when a call first reaches it; one that is not installed
        or cannot start is passed over, as an ordered choice passes it over. An
        implementation already ``tried`` (a hybrid's base, named again in the
        list) is not asked twice.
        """

        from .declines import steps_of

        def steps() -> Iterator[Step]:
            for engine in then:
                try:
                    cls = engine if not isinstance(engine, str) else self.engine_class(engine)
                    if cls is self.reference:
                        return  # the reference answers last anyway
                    self.members_of(cls)
                except (
                    CoheriqEngineNotFoundError,
                    CoheriqEngineLoadError,
                    CoheriqEngineStartError,
                ):
                    continue
                found = [
                    s for s in steps_of(cls, self._started.get(cls), name) if s.owner not in tried
                ]
                yield from found
                if found and found[-1].final:
                    return

        return steps

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
            return member
        from .own_class import LibraryClass  # imported with the class

        if member is info.reference or (isinstance(member, LibraryClass) and member.info is info):
            return info.construct  # not the class: its call would dispatch
        if name in getattr(cls, "__coheriq_declining__", ()):  # may decline a construction
            from .declines import Chain, steps_of  # imported when cls was defined

            return Chain(self.state, name, steps_of(cls, instance, name), info.construct).function
        return member

    def check_overrides(self, name: str, reference: Any) -> None:
        """Check the overrides of candidate ``name``, now ``reference``, in every engine class.

        For a candidate marked or redefined after engines were defined: warns;
        where the engine's class statement would have failed (strict mode, an
        exception class that does not derive from the library's), refuses the
        engine instead of failing the module that marks the candidate (see
        :func:`coheriq._engines.overrides.check_late_overrides`).

        Raises:
            CoheriqEngineError: An engine to refuse has started already.
        """
        classes = [cls for cls in self.classes if name in cls.__coheriq_overrides__]
        if not classes:
            return
        # As in EngineMeta: only when needed (not while a library marks its candidates).
        from .overrides import check_late_overrides

        in_use = {*self._started, *self._starting}
        check_late_overrides(self.state, name, reference, classes, in_use)

    def candidate_changed(self, name: str) -> None:
        """Bring the engines up to date with candidate ``name``, new or redefined.

        For a class candidate, the engine classes that override it answer
        ``isinstance`` with it; every engine started so far gets its member.
        Call with the domain's lock held, after :meth:`check_overrides`.
        """
        implementations = self.implementations.get(name)
        if implementations is not None:
            for cls in self.classes:
                if name in cls.__coheriq_overrides__:
                    implementations.setdefault(getattr(cls, name), cls)
            self._refresh_isinstance(name)
        for cls, instance in self._started.items():
            self._instances[cls][name] = self._member(cls, instance, name)
        # And the members of each engine chosen from an ordered list, which choices
        # and blocks hold (copies of the above, going on to the engines after it).
        for (cls, then), members in self._then.items():
            members[name] = self._then_member(then, name, self._instances[cls][name])

    def reinit_in_child(self) -> None:
        """In a forked child: forget the starts that threads of the parent had in flight."""
        self._starting.clear()
        self.state.choice.choosing = None
