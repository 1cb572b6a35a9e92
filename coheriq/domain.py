"""AccelerationDomain: a library's candidates, its engines and its dispatch state.

A domain is created once by the library it accelerates::

    domain = coheriq.AccelerationDomain("mylib", env_prefix="MYLIB")

    @domain.acceleration_candidate
    def normalize(xs): ...

    domain.materialize()   # after the last candidate is marked

It keeps the registry of its engines, the one engine instance per engine class,
the process-global choice (made once, see :meth:`AccelerationDomain._settle`) and
the context variable that holds scoped choices. Proxies ask it which member to
run; the user's verbs in :mod:`coheriq.activation` ask it to change that.

Locks guard setup only and are never held while an engine module is imported;
the lock of a domain is held while an engine's ``__init__`` runs, so that each
engine class is instantiated once. A forked child gets fresh locks.
"""

from __future__ import annotations

# _thread rather than threading: the same locks, without importing threading.
import _thread
import os
import sys

# _contextvars is what the contextvars module re-exports; importing it directly
# spares a module at start-up.
from _contextvars import ContextVar

from . import registry
from ._stdlib import (
    DEBUG,
    INFO,
    TYPE_CHECKING,
    MappingProxyType,
    log,
    outside_coheriq,
    overload,
)
from ._validate import REFERENCE, check_candidate_name, check_name, is_engine_name
from .choice import Fallthrough, Scope, Settlement, Starting, Unsettled, live_scope
from .exceptions import (
    CoheriqDomainError,
    CoheriqDomainNotFoundError,
    CoheriqEngineError,
    CoheriqEngineLoadError,
    CoheriqEngineNotFoundError,
    CoheriqEngineStartError,
    CoheriqError,
    CoheriqReloadWarning,
    CoheriqTypeError,
    did_you_mean,
    listing,
)
from .marked import check_implementations, construct_directly, mark_class
from .meta import EngineMeta
from .proxy import CandidateInfo, Switchboard, candidate_of

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any, TypeVar

    F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["AccelerationDomain", "Settlement", "all_domains", "lookup_domain"]

# Set by coheriq.profiling while a profile block is open anywhere: makes, for a
# domain, the function its proxies use to find the current scope.
profiling_current: Callable[[AccelerationDomain], Callable[[], Any]] | None = None

# While an advertised engine's module is imported: every engine class it
# registers, in any domain, so that a failed import can take back exactly those.
_loading: ContextVar[list[tuple[AccelerationDomain, EngineMeta]] | None] = ContextVar(
    "coheriq: engines registered by the load in progress", default=None
)


def all_domains() -> list[AccelerationDomain]:
    """Return every domain created in this process, in creation order.

    Where a library's module ran more than once (see :mod:`coheriq.registry`),
    the copy its name stands for now.
    """
    return registry.named_domains()


def lookup_domain(domain: AccelerationDomain | str) -> AccelerationDomain:
    """Return the domain given by object or name.

    Raises:
        CoheriqTypeError: ``domain`` is neither a domain nor a string.
        CoheriqDomainNotFoundError: No domain of that name exists.
    """
    if isinstance(domain, AccelerationDomain):
        return domain
    if not isinstance(domain, str):
        raise CoheriqTypeError(
            "A domain is given as an AccelerationDomain or its name, not as "
            f"{type(domain).__name__} ({domain!r})."
        )
    lineage = registry.lineage_of(domain)
    if lineage is None:
        known = [d.name for d in all_domains()]
        raise CoheriqDomainNotFoundError(
            f"There is no coheriq domain named {domain!r}.{did_you_mean(domain, known)} "
            f"Known domains: {listing(known)}. Import the library that creates the "
            "domain before enabling or listing its engines."
        )
    found: AccelerationDomain = lineage.named()
    return found


def _runs_no_code(cls: type) -> bool:
    """Whether instantiating ``cls`` runs no code of its own (no ``__init__``/``__new__``)."""
    return cls.__init__ is object.__init__ and cls.__new__ is object.__new__  # type: ignore[misc,comparison-overlap]


class _Start:
    """An engine being started by one thread; others wait for it on its lock."""

    __slots__ = ("lock", "thread")

    def __init__(self) -> None:
        self.thread = _thread.get_ident()
        self.lock = _thread.allocate_lock()
        self.lock.acquire()

    def wait(self) -> None:
        """Return when the start has ended, however it ended."""
        self.lock.acquire()
        self.lock.release()

    def finish(self) -> None:
        self.lock.release()


class AccelerationDomain:
    """A library's set of acceleration candidates and the engines that implement them.

    Args:
        name: The domain's name, conventionally the library's import name. Engines
            advertise themselves in the entry-point group ``coheriq.engines.<name>``.
        env_prefix: If given, the environment variable ``<env_prefix>_ENGINE`` names
            the engine to use when the program does not call ``enable_engine``;
            an empty value means the reference implementation.
        strict: If true, an engine override whose signature cannot accept every
            call its candidate accepts is an error instead of a
            :class:`~coheriq.CoheriqSignatureWarning` (``COHERIQ_STRICT=1`` does the
            same for every domain).

    Raises:
        CoheriqTypeError: ``name`` or ``env_prefix`` is not a valid name.
        CoheriqDomainError: A domain of that name exists already, created by
            another module. (The same module running again, by a reload or a
            fresh import, makes a new copy of the domain: see
            :mod:`coheriq.registry`.)
    """

    def __init__(self, name: str, *, env_prefix: str | None = None, strict: bool = False) -> None:
        check_name(name, "domain name")
        if env_prefix is not None and not (
            isinstance(env_prefix, str) and env_prefix.isidentifier() and env_prefix.isascii()
        ):
            raise CoheriqTypeError(
                f"The env_prefix of domain {name!r} must be a string of letters, digits and "
                f"'_' that can start an environment variable name, not {env_prefix!r}."
            )
        if not isinstance(strict, bool):
            raise CoheriqTypeError(
                f"The strict option of domain {name!r} is True or False, not {strict!r}."
            )
        self.name = name
        self.env_prefix = env_prefix
        self.strict = strict
        creator = sys._getframe(1)
        self._module: str = creator.f_globals.get("__name__", "__main__")
        self._globals = creator.f_globals  # tells copies of the library's module apart
        # The run of the module (or function) that creates the domain: a domain of
        # the same name made while it still runs is a second domain, not a copy.
        self._run = registry.run_of(creator)
        self._candidates: dict[str, CandidateInfo] = {}
        self._kinds: dict[str, bool] = {}  # name -> is a class; read on every engine check
        self._class_candidates: list[CandidateInfo] = []
        # Class candidate -> {implementing class: engine class whose body defines
        # it, or None for the reference}; marked classes answer isinstance from it.
        self._implementations: dict[str, dict[type, EngineMeta | None]] = {}
        self._reference: EngineMeta | None = None
        self._engines: dict[str, EngineMeta] = {}
        self._engine_classes: list[EngineMeta] = []
        self._instances: dict[EngineMeta, Mapping[str, Any]] = {}
        self._starting: dict[EngineMeta, _Start] = {}  # engines whose __init__ runs now
        self._settled: Settlement | None = None
        self._unsettled = Unsettled(self)
        self._warned: set[object] = set()  # keys of the warnings given, each once
        self._lock = _thread.RLock()
        self._profiling: Callable[[], Any] | None = None
        # Registered and wired under the domain's lock: a thread that finds the
        # new domain by name (a profile block opening, say) waits until it is whole.
        with self._lock:
            registered = registry.register(self)
            if registered is None:
                existing = lookup_domain(name)
                raise CoheriqDomainError(
                    f"A coheriq domain named {name!r} exists already, created by module "
                    f"{existing._module!r}"
                    f"{'' if existing.materialized else ', not materialized yet'}; each library "
                    "creates its domain once, at import (a module that runs again, by a reload "
                    "or a fresh import, makes a new copy of its domain). Reuse it "
                    "(coheriq.engine_class(name) reaches it) or choose another name."
                )
            self._lineage, copy = registered
            self._scope: ContextVar[Scope | None] = self._lineage.scope
            tag = "" if copy == 1 else str(copy)
            self._switchboard = Switchboard(self._scope_here, self._lineage.namespace, tag)
            if profiling_current is not None:
                self._set_profiling(profiling_current(self))
        if copy > 1:  # the copies made before now look at scopes through other copies
            for other in self._lineage.generations():
                if other is not self:
                    with other._lock:
                        other._refresh_dispatch()

    def __repr__(self) -> str:
        state = "materialized" if self._reference is not None else "collecting candidates"
        return f"<AccelerationDomain {self.name!r}: {len(self._candidates)} candidates, {state}>"

    # -- the library's side --------------------------------------------------------

    @property
    def env_var(self) -> str | None:
        """The environment variable that can name this domain's engine, if any."""
        return None if self.env_prefix is None else f"{self.env_prefix}_ENGINE"

    @property
    def candidate_kinds(self) -> Mapping[str, bool]:
        """Candidate name -> whether it is a class candidate, in marking order (read-only)."""
        return MappingProxyType(self._kinds)

    def _reference_of(self, candidate: str) -> Any:
        """The reference implementation of ``candidate`` (for EngineMeta)."""
        return self._candidates[candidate].reference

    @property
    def materialized(self) -> bool:
        """Whether :meth:`materialize` has run."""
        return self._reference is not None

    @overload
    def acceleration_candidate(self, obj: F, /) -> F: ...
    @overload
    def acceleration_candidate(self, name: str, /) -> Callable[[F], F]: ...
    @overload
    def acceleration_candidate(self, obj: None = None, /, *, name: str) -> Callable[[F], F]: ...

    def acceleration_candidate(self, obj: Any = None, /, *, name: str | None = None) -> Any:
        """Mark a function or class as a candidate that engines may re-implement.

        Use it bare (``@domain.acceleration_candidate``), with a name
        (``@domain.acceleration_candidate("name")``) or with ``name=``. The
        decorated object becomes the reference implementation. For a function,
        what the decorator returns is a proxy that stands in its place: calling
        it runs the active engine's implementation. For a class, it returns the
        class itself, rebuilt with a metaclass whose ``__call__`` constructs the
        active engine's implementation (see :mod:`coheriq.marked`); everything
        else about the class is unchanged, and constructing its subclasses is
        never dispatched.

        Returns:
            The proxy or marked class, or a decorator that makes one when given a name.

        Raises:
            CoheriqTypeError: The target is not a function or class, the name is
                not usable, or the class cannot be marked (an Enum, a class written
                in C, one with subclasses already; the message says why).
            CoheriqDomainError: The domain is materialized, or the name is taken.
        """
        if obj is None or isinstance(obj, str):
            if obj is not None and name is not None:
                raise CoheriqTypeError(
                    f"Domain {self.name!r}: give the candidate's name once, either as "
                    "acceleration_candidate('name') or as acceleration_candidate(name='name')."
                )
            given = obj if obj is not None else name
            if given is not None:
                check_candidate_name(given)
            return lambda target: self._mark(target, given)
        return self._mark(obj, name)

    def _mark(self, target: Any, name: str | None) -> Any:
        if isinstance(target, staticmethod):  # a function marked inside a class body
            return staticmethod(self._mark(target.__func__, name))
        if isinstance(target, classmethod):
            raise CoheriqTypeError(
                f"Domain {self.name!r} cannot mark classmethod "
                f"{getattr(target.__func__, '__qualname__', target)!r}: a candidate is called "
                "the same way whichever engine runs it, and a classmethod's first argument "
                "depends on the class it is read from. Mark a module-level function that "
                "the classmethod calls, or the class itself."
            )
        if not callable(target):
            raise CoheriqTypeError(
                f"Domain {self.name!r} can only mark functions and classes as candidates, "
                f"not {type(target).__name__} {target!r}."
            )
        other = candidate_of(target)
        if other is not None:
            raise CoheriqDomainError(
                f"{other.name!r} is already candidate {other.name!r} of domain "
                f"{other.domain.name!r}; mark the original function or class only once."
            )
        if name is None:
            name = getattr(target, "__name__", None)
        name = check_candidate_name(name)
        with self._lock:
            if self._reference is not None:
                raise CoheriqDomainError(
                    f"Cannot mark {name!r} as a candidate of domain {self.name!r}: the domain "
                    "is materialized already. Mark every candidate before calling "
                    "materialize()."
                )
            if name in self._candidates:
                raise CoheriqDomainError(
                    f"Domain {self.name!r} has a candidate named {name!r} already; give the "
                    "new one another name with acceleration_candidate(name=...)."
                )
            info = CandidateInfo(self, name, target)
            if info.is_class:
                implementations: dict[type, EngineMeta | None] = {}
                info.reference = mark_class(info, self._switchboard, implementations)
                implementations[info.reference] = None
                self._implementations[name] = implementations
                info.proxy = info.reference
                self._class_candidates.append(info)
            else:
                info.proxy = self._switchboard.function_proxy(info)
            self._candidates[name] = info
            self._kinds[name] = info.is_class
        return info.proxy

    def materialize(self) -> EngineMeta:
        """Build the domain's reference class; call once, after the last candidate.

        The reference class, also reached as ``coheriq.engine_class(name)``, has
        each candidate as an attribute: functions as static methods, classes as
        classes. Every engine subclasses it.

        Returns:
            The reference class.

        Raises:
            CoheriqDomainError: The domain is materialized already.
        """
        with self._lock:
            if self._reference is not None:
                raise CoheriqDomainError(
                    f"Domain {self.name!r} is materialized already; materialize() is called "
                    "once, after the last candidate is marked."
                )
            namespace: dict[str, Any] = {
                "__module__": self._module,
                "__qualname__": f"{self.name}.reference",
                "__doc__": f"The reference implementations of coheriq domain {self.name!r}.",
                "__coheriq_reference_of__": self,
            }
            for name, info in self._candidates.items():
                namespace[name] = info.reference if info.is_class else staticmethod(info.reference)
            self._reference = EngineMeta("reference", (), namespace)
            return self._reference

    # -- engines ---------------------------------------------------------------------

    def _require_materialized(self, action: str) -> EngineMeta:
        reference = self._reference
        if reference is None:
            raise CoheriqDomainError(
                f"Cannot {action}: domain {self.name!r} is not materialized yet. The library "
                "that creates it must call materialize() after marking its candidates; if "
                "it does, import the library completely first."
            )
        return reference

    def _check_engine_name_free(self, name: str) -> None:
        """Raise if an engine of this name is registered (called by EngineMeta)."""
        existing = self._engines.get(name)
        if existing is not None:
            raise CoheriqEngineError(
                f"Domain {self.name!r} has an engine named {name!r} already "
                f"({existing.__module__}.{existing.__qualname__}); choose another name."
            )

    def _register_engine_class(self, cls: EngineMeta) -> None:
        """Record a new engine class of this domain (called by EngineMeta)."""
        with self._lock:
            name = cls.__coheriq_name__
            if name is not None:
                self._check_engine_name_free(name)
                self._engines[name] = cls
            self._engine_classes.append(cls)
            for candidate in cls.__coheriq_overrides__:
                if candidate in self._implementations:
                    self._implementations[candidate].setdefault(getattr(cls, candidate), cls)
                    self._refresh_isinstance(candidate)
        loaded = _loading.get()
        if loaded is not None:
            loaded.append((self, cls))

    def _forget(self, cls: EngineMeta) -> None:
        """Drop the engine class ``cls``, registered by an import that failed."""
        with self._lock:
            if cls in self._engine_classes:
                self._engine_classes.remove(cls)
            if self._engines.get(cls.__coheriq_name__ or "") is cls:
                del self._engines[cls.__coheriq_name__]  # type: ignore[arg-type]
            for candidate, implementations in self._implementations.items():
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
        marked = self._candidates[candidate].reference
        # By the MRO: the marked class's issubclass would count every implementation.
        foreign = any(marked not in impl.__mro__ for impl in self._implementations[candidate])
        check_implementations(marked, foreign)

    def _engine_of_type(self, cls: type) -> str | None:
        """The engine whose implementation of a class candidate ``cls`` is, or None.

        The engine is the one whose class body defines the implementation (the
        first named engine built on it, for an unnamed mixin); a subclass of an
        implementation counts as that implementation.
        """
        for klass in cls.__mro__:
            for implementations in self._implementations.values():
                if klass in implementations:
                    owner = implementations[klass]
                    if owner is None or owner.__coheriq_name__ is not None:
                        return REFERENCE if owner is None else owner.__coheriq_name__
                    users = [e for e in self._engines.values() if issubclass(e, owner)]
                    return users[0].__coheriq_name__ if users else repr(owner)
        return None

    def _engine_names(self) -> list[str]:
        """Sorted names of the registered and the advertised engines (imports none)."""
        from . import discovery  # first use of entry points: see _engine_class

        advertised = [n for n in discovery.advertised(self.name) if is_engine_name(n)]
        return sorted(set(self._engines) | set(advertised))

    def _engine_class(self, name: str, *, named_by: str = "") -> EngineMeta:
        """Return the class of engine ``name``, loading its entry point if needed.

        Args:
            name: An engine name, or :data:`REFERENCE`.
            named_by: Where the name came from, for error messages.

        Raises:
            CoheriqEngineNotFoundError: No such engine is registered or advertised.
            CoheriqEngineLoadError: Its entry point failed to load or define it.
        """
        reference = self._require_materialized(f"look up engine {name!r}")
        if name == REFERENCE:
            return reference
        cls = self._engines.get(name)
        if cls is not None:
            return cls
        # Imported on the first look for an advertised engine, not with coheriq:
        # a program that only uses registered engines never reads package metadata.
        from . import discovery

        ep = discovery.advertised(self.name).get(name) if is_engine_name(name) else None
        if ep is None:
            known = self._engine_names()
            invalid = "" if is_engine_name(name) else " (that is not a valid engine name)"
            raise CoheriqEngineNotFoundError(
                f"Domain {self.name!r} has no engine named {name!r}{named_by}{invalid}."
                f"{did_you_mean(name, known)} Available engines: {listing(known)} (and "
                f"{REFERENCE!r}, the domain's own implementations). Install the package that "
                f"provides the engine, or advertise it in entry-point group "
                f"{discovery.group_of(self.name)!r}."
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
        from . import discovery

        module = discovery.module_of(ep)
        imported = sys.modules.get(module)
        # A module that defined its engines for another copy of this library's
        # module only (see coheriq.registry) runs again, for this copy.
        again = (
            imported is not None
            and self._lineage.copies > 1
            and not getattr(getattr(imported, "__spec__", None), "_initializing", False)
            and not any(c.__module__ == module for c in self._engine_classes)
        )
        registered: list[tuple[AccelerationDomain, EngineMeta]] = []
        loading, copy = _loading.set(registered), registry.loading_for(self)
        try:
            discovery.load(self.name, name, ep, again=again)
            cls = self._engines.get(name)
            if cls is None:
                defined = [c.__coheriq_name__ for d, c in registered if d is self]
                also = (
                    f" It defined {listing(n for n in defined if n)} instead."
                    if any(defined)
                    else ""
                )
                raise CoheriqEngineLoadError(
                    f"Engine {name!r} of domain {self.name!r} is advertised by "
                    f"{discovery.describe(ep)}, but importing it did not define an engine of "
                    f"that name.{also} The entry point's name and the engine class's name= "
                    "must agree."
                )
        except BaseException:
            for domain, engine_cls in registered:
                domain._forget(engine_cls)
            if imported is None:
                sys.modules.pop(module, None)
            raise
        finally:
            registry.done_loading(copy)
            _loading.reset(loading)
        return cls

    # -- instances and the global choice --------------------------------------------

    def _members_of(self, cls: EngineMeta) -> Mapping[str, Any]:
        """Return candidate name -> what a call runs on ``cls``'s instance, starting it once.

        No lock is held while an engine's ``__init__`` runs: it may take seconds
        (a GPU), import other engines, or wait for threads that enter and leave
        blocks. The first thread to need the engine starts it; others wait on
        that start alone. Should the start fail, the next thread tries again.
        """
        while True:
            members = self._instances.get(cls)
            if members is not None:
                return members
            with self._lock:
                members = self._instances.get(cls)
                if members is not None:
                    return members
                start = self._starting.get(cls)
                if start is None:
                    start = self._starting[cls] = _Start()
                    break  # this thread starts the engine
            if start.thread == _thread.get_ident():
                if _runs_no_code(cls):
                    # A start that runs no code of the engine's (the reference) was
                    # interrupted in this thread (a signal handler, a __del__):
                    # another instance harms nothing.
                    return self._start(cls)
                raise CoheriqEngineError(
                    f"Engine {cls.__coheriq_name__!r} of domain {self.name!r} was asked for "
                    "from its own __init__ (through using_engine, enable_engine or "
                    "engine_class), before it existed. Inside the engine, use its own "
                    "implementations (self.name(...)) instead."
                )
            start.wait()
        try:
            members = self._start(cls)
            with self._lock:
                self._instances[cls] = members
        finally:
            with self._lock:
                del self._starting[cls]
            start.finish()
        return members

    def _start(self, cls: EngineMeta) -> Mapping[str, Any]:
        """Instantiate ``cls`` and return its members (see :meth:`_members_of`).

        The ``__init__`` runs inside a block of its own engine whose members
        refuse to be called: a call into the domain from there says what to do,
        and never makes the global choice.
        """
        engine = cls.__coheriq_name__ or REFERENCE
        if _runs_no_code(cls):  # the reference, or an engine without state
            return self._members_from(engine, cls())
        around = live_scope(self._scope.get())
        starting = Scope(engine, {}, around, self)
        starting.members = Starting(self, engine, around)
        self._count_open_scopes(+1)
        self._scope.set(starting)
        try:
            instance = cls()
        except Exception as exc:
            # The engine's message may end a sentence of its own: one full stop.
            detail = str(exc).rstrip(".")
            raise CoheriqEngineStartError(
                f"Engine {engine!r} of domain {self.name!r} failed to start: its __init__ "
                f"raised {type(exc).__name__}: {detail}. Nothing was changed; fix the "
                "engine's set-up or choose another engine."
            ) from exc
        finally:
            self._leave(starting)
        return self._members_from(engine, instance)

    def _members_from(self, engine: str, instance: Any) -> Mapping[str, Any]:
        """What a call of each candidate runs on the engine ``instance``."""
        try:
            members = {name: getattr(instance, name) for name in self._candidates}
        except AttributeError as exc:  # a property of the engine's, or __getattr__, failing
            raise CoheriqEngineStartError(
                f"Engine {engine!r} of domain {self.name!r} failed to start: reading its "
                f"implementations raised AttributeError: {exc}. Each candidate must be an "
                "attribute of the engine's instance."
            ) from exc
        for name, info in self._candidates.items():
            if info.construct is not None and members[name] is info.reference:
                members[name] = info.construct  # not the class: its call would dispatch
        return members

    def _settle_on(self, cls: EngineMeta, reason: str, *, inherited: bool = False) -> Settlement:
        """Make ``cls`` the global choice unless one is made; return the choice.

        Where another copy of the library's module has chosen a different engine
        already, that choice is returned instead (copies share one global choice,
        see :mod:`coheriq.registry`), unless ``inherited`` says this copy is taking
        its share of it.
        """
        engine = cls.__coheriq_name__ or REFERENCE
        settled = self._settled
        if settled is not None:
            return settled
        choice = self._lineage.choice
        if choice is not None and not inherited and choice.engine != engine:
            return choice  # type: ignore[no-any-return]
        members = self._members_of(cls)  # starts the engine, holding no lock
        with self._lock:
            settled = self._settled
            if settled is not None:  # another thread chose meanwhile
                return settled
            choice = self._lineage.choice
            if choice is not None and not inherited and choice.engine != engine:
                return choice  # type: ignore[no-any-return]
            where, _ = outside_coheriq()
            settled = Settlement(engine, cls, reason, members, where, self)
            spec = getattr(sys.modules.get(self._module), "__spec__", None)
            settled.during_import = bool(getattr(spec, "_initializing", False))
            self._switchboard.connect(members)
            self._settled = settled
            if self._lineage.choice is None:
                self._lineage.choice = settled
            self._refresh_dispatch()
        log(
            INFO,
            "domain %r runs on engine %r (%s), chosen at %s",
            self.name,
            settled.engine,
            reason,
            where,
        )
        return settled

    def _settle(self, action: str = "call its candidates") -> Settlement:
        """Return the global choice, making it now if it is not made yet.

        The choice is the one another copy of the library's module made, if any;
        else an earlier ``enable_engine``; else the engine named by the
        environment variable; else the reference.
        """
        settled = self._settled
        if settled is not None:
            return settled
        reference = self._require_materialized(action)
        choice = self._lineage.choice
        if choice is not None and choice.domain is not self:
            return self._settle_as(choice)
        variable, value = self.env_var, self._env_value()
        if not value:
            return self._settle_on(reference, "default")
        # Resolved before taking the lock: naming an engine may import its module.
        cls = self._engine_class(value, named_by=f" (named by the environment variable {variable})")
        return self._settle_on(cls, f"environment variable {variable}")

    def _settle_as(self, choice: Settlement) -> Settlement:
        """Settle this copy of the library on the engine another copy runs on.

        If that engine cannot run for this copy (it was defined in code that ran
        for the other copy only, or its module fails to load again), warn once and
        run the reference, saying why.
        """
        reference = self._require_materialized("inherit the global choice")
        engine = choice.engine
        reason = choice.reason
        if "earlier copy" not in reason:
            reason = f"{reason}, for an earlier copy of module {self._module!r}"
        if engine == REFERENCE:
            return self._settle_on(reference, reason, inherited=True)
        try:
            cls = self._engine_class(engine, named_by=" (the engine the program chose)")
            return self._settle_on(cls, reason, inherited=True)
        except CoheriqError as error:
            self._warn_once(
                ("global", engine),
                f"Module {self._module!r} ran again (a reload or a fresh import), and its new "
                f"copy of domain {self.name!r} cannot run engine {engine!r}, which the "
                f"program chose ({choice.reason}): {str(error).rstrip('.')}. This copy runs "
                "on the reference implementation. Import the engine's module again after "
                "reloading the library, or advertise the engine through an entry point so "
                "that coheriq can.",
            )
        return self._settle_on(
            reference,
            f"the reference: engine {engine!r}, chosen for an earlier copy of module "
            f"{self._module!r}, is not available to this copy",
            inherited=True,
        )

    def _warn_once(self, key: object, message: str) -> None:
        """Warn about this copy of the domain (a CoheriqReloadWarning), once per key."""
        if key in self._warned:
            return
        self._warned.add(key)
        import warnings  # only when there is something to say

        warnings.warn(message, CoheriqReloadWarning, stacklevel=outside_coheriq()[1])

    def _env_value(self) -> str:
        """The engine ``<PREFIX>_ENGINE`` names now ("" when unset, empty or no prefix)."""
        variable = self.env_var
        return (os.environ.get(variable, "") if variable else "").strip()

    # -- scopes --------------------------------------------------------------------

    def _member_here(self, name: str) -> Any:
        """Return what a call of candidate ``name`` runs in this context."""
        scope = self._scope_here()
        if scope is not None:
            return scope.members[name]
        return self._settle(f"call candidate {name!r}").members[name]

    def _implementation_here(self, name: str) -> Any:
        """Return the implementation of candidate ``name`` a call here would use.

        As :meth:`_member_here`, except that a class candidate the engine uses as
        it is reads as the class, not as the construction of it.
        """
        member = self._member_here(name)
        info = self._candidates[name]
        if info.construct is not None and member is info.construct:
            return info.reference
        return member

    def _scope_here(self) -> Any:
        """What proxies look at while they look at the context (see coheriq.choice)."""
        scope = self._scope.get()
        if scope is not None and scope.domain is not self:
            scope = self._seen_from_here(scope)
        if scope is None and self._settled is None:
            return self._unsettled
        return scope

    def _seen_from_here(self, scope: Scope | None) -> Scope | None:
        """The innermost live block from ``scope`` out, as this copy of the domain runs it.

        A block entered through another copy of the library runs here on this
        copy's engine of the same name, made once per block. Where this copy
        cannot run it, it warns once and keeps its own choice (``None``).
        """
        scope = live_scope(scope)
        if scope is None or scope.domain is self or isinstance(scope.members, Starting):
            return scope
        if scope.elsewhere is None:
            scope.elsewhere = {}
        elif self in scope.elsewhere:
            return scope.elsewhere[self]
        seen: Scope | None = None
        try:
            cls = self._engine_class(scope.engine, named_by=" (a using_engine block)")
            seen = Scope(scope.engine, self._members_of(cls), None, self)
        except CoheriqError as error:
            self._warn_once(
                ("scope", scope.engine),
                f"A copy of module {self._module!r} (the library ran more than once, by a "
                f"reload or a fresh import) cannot run engine {scope.engine!r} in a "
                f"using_engine block of domain {self.name!r}: {str(error).rstrip('.')}. "
                "Calls through that copy keep running on its own engine.",
            )
        scope.elsewhere[self] = seen
        return seen

    def _set_profiling(self, current: Callable[[], Any] | None) -> None:
        """Route proxies through ``current`` (a profiler's), or back to the scope variable."""
        with self._lock:
            self._profiling = current
            self._refresh_dispatch()

    def _refresh_dispatch(self) -> None:
        """Tell the proxies how to find what a call runs, after any change.

        The finder is set before the flag, so that a proxy that sees the flag
        finds the right finder.
        """
        # The scope variable itself, where no translation is needed: the domain is
        # settled and has no other copies (see _scope_here).
        direct = self._settled is not None and self._lineage.copies == 1
        self._switchboard.set_current(
            self._profiling or (self._scope.get if direct else self._scope_here)
        )
        self._refresh_looking()

    def _refresh_looking(self) -> None:
        """Say whether proxies must look at the context: all a block opening changes.

        They must while the domain is not settled, or a block or a profile is open
        anywhere. A class that constructs itself directly goes back to
        dispatching before the flag is set.
        """
        settled = self._settled
        looking = settled is None or self._lineage.open_scopes > 0 or self._profiling is not None
        for info in self._class_candidates:
            directly = not looking and settled.members[info.name] is info.construct  # type: ignore[union-attr]
            construct_directly(info.proxy, directly)
        self._switchboard.set_scoped(looking)

    def _prospect(self) -> tuple[str | None, str, EngineMeta | None]:
        """What a call here and now would run, and why, without choosing anything.

        Returns ``(engine, reason, engine class)``; the class is ``None`` for an
        advertised engine not imported yet, and the engine too when the
        environment variable names no engine.
        """
        scope = self._live_scope()
        if scope is not None:
            cls = self._engines.get(scope.engine) or self._reference
            return scope.engine, "the innermost using_engine block in this context", cls
        settled = self._settled
        if settled is not None:
            how = {"enable_engine": "enable_engine", "default": "the reference by default"}.get(
                settled.reason, f"the {settled.reason}"
            )
            return (
                settled.engine,
                f"{how}, settled by a call at {settled.where}",
                settled.engine_class,
            )
        choice = self._lineage.choice
        if choice is not None:
            return (
                choice.engine,
                f"the choice made for an earlier copy of module {self._module!r} "
                f"({choice.reason}); not settled in this copy yet",
                self._engines.get(choice.engine),
            )
        variable, value = self.env_var, self._env_value()
        if not value or value == REFERENCE:
            why = f"{variable} is {value!r}" if value else "no enable_engine and no variable set"
            return REFERENCE, f"the reference by default ({why}); not settled yet", self._reference
        reason = f"the environment variable {variable}={value!r}; not settled yet"
        if value in self._engines:
            return value, reason, self._engines[value]
        from . import discovery  # reading metadata imports no engine

        if value in discovery.advertised(self.name):
            return value, reason + " (advertised, not imported yet)", None
        return None, reason + ", which names no engine: the first call will fail", None

    def _live_scope(self) -> Scope | None:
        """The innermost scope of this context whose block has not exited."""
        return live_scope(self._scope.get())

    def _active_engine(self) -> str | None:
        """The engine a call would run in this context, or None if undecided."""
        scope = self._live_scope()
        if scope is not None:
            return scope.engine
        settled = self._settled
        return None if settled is None else settled.engine

    def _enter_scope(self, cls: EngineMeta, owner: Any = None) -> Scope:
        """Make ``cls`` the engine of this context until :meth:`_exit_scope`.

        The block covers every copy of the domain (see :meth:`_seen_from_here`).
        Its parent is the innermost *live* block around it, so that blocks that
        exited elsewhere never pile up in a context.
        """
        members = self._members_of(cls)
        scope = Scope(
            cls.__coheriq_name__ or REFERENCE, members, live_scope(self._scope.get()), self, owner
        )
        self._count_open_scopes(+1)
        log(DEBUG, "domain %r: entering a scope of engine %r", self.name, scope.engine)
        self._scope.set(scope)
        return scope

    def _count_open_scopes(self, change: int) -> None:
        """Count a block opening (+1) or closing (-1); the first and last tell every copy.

        The count and the refreshes it causes happen under one lock, so that a
        refresh never acts on a count another thread has changed since.
        """
        lineage = self._lineage
        with lineage.lock:
            lineage.open_scopes += change
            if lineage.open_scopes == (1 if change > 0 else 0):
                for copy in lineage.generations() if lineage.copies > 1 else (self,):
                    with copy._lock:
                        copy._refresh_looking()

    def _exit_scope(self, scope: Scope) -> None:
        """End the block of ``scope``, in whatever context this runs.

        Calls that still find it (a task or generator that outlived the block)
        fall through to the context around it. The context variable moves only if
        it still points at this block, and then to the innermost live block
        around it: a block exited out of order, or in another context than it was
        entered (a generator finished elsewhere), takes no other block with it.
        """
        scope.members = Fallthrough(self, scope.parent)
        log(DEBUG, "domain %r: leaving the scope of engine %r", self.name, scope.engine)
        self._leave(scope)

    def _leave(self, scope: Scope) -> None:
        scope.live = False
        if self._scope.get() is scope:
            self._scope.set(live_scope(scope.parent))
        self._count_open_scopes(-1)


def _reinit_locks_in_child() -> None:
    # A thread that held a lock at fork time does not exist in the child, so its
    # locks would stay held forever; replace them, and forget set-ups in flight.
    registry.reinit_locks_in_child()
    for domain in registry.generations():
        domain._lock = _thread.RLock()
        domain._starting.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reinit_locks_in_child)
