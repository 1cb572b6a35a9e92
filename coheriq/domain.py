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

from ._stdlib import (
    DEBUG,
    INFO,
    TYPE_CHECKING,
    MappingProxyType,
    log,
    outside_coheriq,
    overload,
)
from ._validate import REFERENCE, check_candidate_name, check_name
from .exceptions import (
    CoheriqDomainError,
    CoheriqDomainNotFoundError,
    CoheriqEngineError,
    CoheriqEngineLoadError,
    CoheriqEngineNotFoundError,
    CoheriqEngineStartError,
    CoheriqTypeError,
    did_you_mean,
    listing,
)
from .meta import EngineMeta
from .proxy import CandidateInfo, Switchboard, candidate_of

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from contextvars import Token
    from typing import Any, TypeVar

    F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["AccelerationDomain", "Settlement", "all_domains", "lookup_domain"]

_domains: dict[str, AccelerationDomain] = {}

# Set by coheriq.profiling while a profile block is open anywhere: makes, for a
# domain, the function its proxies use to find the current scope.
profiling_current: Callable[[AccelerationDomain], Callable[[], Any]] | None = None
_registry_lock = _thread.allocate_lock()


class Settlement:
    """The process-global choice of a domain, once it is made.

    Attributes:
        engine: The engine's name, or :data:`~coheriq.REFERENCE`.
        engine_class: The engine class (the reference class for the reference).
        reason: Why this engine: ``"enable_engine"``, ``"environment variable
            NAME"`` or ``"default"``.
        members: Candidate name -> the member of the engine instance a call runs.
        where: ``FILE:LINE`` of the code whose call or ``enable_engine`` made the choice.
    """

    __slots__ = ("engine", "engine_class", "members", "reason", "where")

    def __init__(
        self,
        engine: str,
        engine_class: EngineMeta,
        reason: str,
        members: Mapping[str, Any],
        where: str,
    ) -> None:
        self.engine = engine
        self.engine_class = engine_class
        self.reason = reason
        self.members = members
        self.where = where

    def __repr__(self) -> str:
        return f"<Settlement on {self.engine!r} by {self.reason}>"


class _Scope:
    """One ``using_engine`` block: live from its entry until its exit.

    Proxies call ``scope.members[name]``. A task or thread started inside the
    block inherits the context variable that points here, and may outlive the
    block; so on exit ``members`` becomes a :class:`_Fallthrough` to the scope
    around it (or the global choice), and ``live`` turns false.
    """

    __slots__ = ("engine", "live", "members", "parent")

    def __init__(self, engine: str, members: Mapping[str, Any], parent: _Scope | None) -> None:
        self.engine = engine
        self.members: Mapping[str, Any] | _Fallthrough = members
        self.parent = parent
        self.live = True


class _Fallthrough:
    """The members of an exited scope: whatever its enclosing context runs now."""

    __slots__ = ("domain", "parent")

    def __init__(self, domain: AccelerationDomain, parent: _Scope | None) -> None:
        self.domain = domain
        self.parent = parent

    def __getitem__(self, name: str) -> Any:
        if self.parent is not None:
            return self.parent.members[name]
        return self.domain._settle(f"call candidate {name!r}").members[name]


def _replace_registry(
    domains: dict[str, AccelerationDomain],
) -> dict[str, AccelerationDomain]:
    """Install ``domains`` as the registry of domains; return the one replaced.

    For :mod:`coheriq.testing`, which gives each test a world of its own.
    """
    with _registry_lock:
        replaced = dict(_domains)
        _domains.clear()
        _domains.update(domains)
    return replaced


def all_domains() -> list[AccelerationDomain]:
    """Return every domain created in this process, in creation order."""
    return list(_domains.values())


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
    found = _domains.get(domain)
    if found is None:
        raise CoheriqDomainNotFoundError(
            f"There is no coheriq domain named {domain!r}.{did_you_mean(domain, _domains)} "
            f"Known domains: {listing(_domains)}. Import the library that creates the "
            "domain before enabling or listing its engines."
        )
    return found


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
        CoheriqDomainError: A domain of that name exists already.
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
        self._module = sys._getframe(1).f_globals.get("__name__", "__main__")
        self._candidates: dict[str, CandidateInfo] = {}
        self._kinds: dict[str, bool] = {}  # name -> is a class; read on every engine check
        # Class candidate -> {implementing class: engine class whose body defines
        # it, or None for the reference}; proxies answer isinstance from its keys.
        self._implementations: dict[str, dict[type, EngineMeta | None]] = {}
        self._reference: EngineMeta | None = None
        self._engines: dict[str, EngineMeta] = {}
        self._engine_classes: list[EngineMeta] = []
        self._instances: dict[EngineMeta, Mapping[str, Any]] = {}
        self._initializing: set[EngineMeta] = set()
        self._settled: Settlement | None = None
        self._settling: str | None = None
        self._open_scopes = 0
        self._scope: ContextVar[_Scope | None] = ContextVar(f"coheriq:{name}", default=None)
        self._switchboard = Switchboard(
            current=self._scope.get, here=self._member_here, first_call=self._call_first
        )
        self._lock = _thread.RLock()
        self._profiling: Callable[[], Any] | None = None
        if profiling_current is not None:
            self._set_profiling(profiling_current(self))
        with _registry_lock:
            if name in _domains:
                raise CoheriqDomainError(
                    f"A coheriq domain named {name!r} exists already; each library creates its "
                    "domain once, at import. Reuse it (coheriq.engine_class(name) reaches it) "
                    "or choose another name."
                )
            _domains[name] = self

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
        decorated object becomes the reference implementation, and what the
        decorator returns, a proxy, stands in its place: calling it runs the
        active engine's implementation.

        Returns:
            The proxy, or a decorator that makes one when given a name.

        Raises:
            CoheriqTypeError: The target is not a function or class, or the name is
                not usable.
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
                implementations: dict[type, EngineMeta | None] = {target: None}
                proxy: Any = self._switchboard.class_proxy(info, implementations)
                self._implementations[name] = implementations
            else:
                proxy = self._switchboard.function_proxy(info)
            self._candidates[name] = info
            self._kinds[name] = info.is_class
        return proxy

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

    def _forget_engines_of_module(self, module: str) -> None:
        """Drop the engine classes defined by ``module``, whose import failed."""
        with self._lock:
            doomed = [
                cls
                for cls in self._engine_classes
                if cls.__module__ == module or cls.__module__.startswith(module + ".")
            ]
            for cls in doomed:
                self._engine_classes.remove(cls)
                if self._engines.get(cls.__coheriq_name__ or "") is cls:
                    del self._engines[cls.__coheriq_name__]  # type: ignore[arg-type]
                for implementations in self._implementations.values():
                    for impl, owner in list(implementations.items()):
                        if owner is cls:
                            del implementations[impl]

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

        return sorted(set(self._engines) | set(discovery.advertised(self.name)))

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

        ep = discovery.advertised(self.name).get(name)
        if ep is None:
            known = self._engine_names()
            raise CoheriqEngineNotFoundError(
                f"Domain {self.name!r} has no engine named {name!r}{named_by}."
                f"{did_you_mean(name, known)} Available engines: {listing(known)} (and "
                f"{REFERENCE!r}, the domain's own implementations). Install the package that "
                f"provides the engine, or advertise it in entry-point group "
                f"{discovery.group_of(self.name)!r}."
            )
        try:
            discovery.load(self.name, name, ep)
        except CoheriqEngineLoadError:
            self._forget_engines_of_module(discovery.module_of(ep))
            raise
        cls = self._engines.get(name)
        if cls is None:
            module = discovery.module_of(ep)
            defined = [c.__coheriq_name__ for c in self._engine_classes if c.__module__ == module]
            also = f" It defined {listing(n for n in defined if n)} instead." if defined else ""
            # As for a failed import: the domain is left as it was, and the module is
            # forgotten, so that a fixed package is imported afresh on the next try.
            self._forget_engines_of_module(module)
            imported = sys.modules.get(module)
            spec = getattr(imported, "__spec__", None)
            if not getattr(spec, "_initializing", False):  # not while its import runs
                sys.modules.pop(module, None)
            raise CoheriqEngineLoadError(
                f"Engine {name!r} of domain {self.name!r} is advertised by "
                f"{discovery.describe(ep)}, but importing it did not define an engine of that "
                f"name.{also} The entry point's name and the engine class's name= must agree."
            )
        return cls

    # -- instances and the global choice --------------------------------------------

    def _members_of(self, cls: EngineMeta) -> Mapping[str, Any]:
        """Return candidate name -> member of ``cls``'s instance, creating it once."""
        members = self._instances.get(cls)
        if members is not None:
            return members
        with self._lock:
            members = self._instances.get(cls)
            if members is not None:
                return members
            engine = cls.__coheriq_name__
            if cls in self._initializing:
                raise CoheriqEngineError(
                    f"Engine {engine!r} of domain {self.name!r} called a candidate of its own "
                    "domain through the domain while its __init__ was running, before the "
                    "engine existed. Inside the engine, call its own implementations "
                    "(self.name(...)) instead."
                )
            self._initializing.add(cls)
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
                self._initializing.discard(cls)
            members = {name: getattr(instance, name) for name in self._candidates}
            self._instances[cls] = members
            return members

    def _settle_on(self, cls: EngineMeta, reason: str) -> Settlement:
        """Make ``cls`` the global choice unless one is made; return the choice."""
        with self._lock:
            settled = self._settled
            if settled is not None:
                return settled
            if self._settling:
                # Only this thread can be here (the lock is held): an engine's
                # __init__, run below, is calling into its own domain.
                raise CoheriqEngineError(
                    f"A candidate of domain {self.name!r} was called while the domain was "
                    f"starting engine {self._settling!r} as its global engine, from that "
                    "engine's __init__. Inside the engine, call its own implementations "
                    "(self.name(...)) instead."
                )
            self._settling = cls.__coheriq_name__ or REFERENCE
            try:
                members = self._members_of(cls)
            finally:
                self._settling = None
            where, _ = outside_coheriq()
            settled = Settlement(cls.__coheriq_name__ or REFERENCE, cls, reason, members, where)
            self._switchboard.connect(members)
            self._settled = settled
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

        The choice is an earlier ``enable_engine``; else the engine named by the
        environment variable; else the reference.
        """
        settled = self._settled
        if settled is not None:
            return settled
        self._require_materialized(action)
        variable, value = self.env_var, self._env_value()
        if not value:
            return self._settle_on(self._require_materialized(action), "default")
        # Resolved before taking the lock: naming an engine may import its module.
        cls = self._engine_class(value, named_by=f" (named by the environment variable {variable})")
        return self._settle_on(cls, f"environment variable {variable}")

    def _env_value(self) -> str:
        """The engine ``<PREFIX>_ENGINE`` names now ("" when unset, empty or no prefix)."""
        variable = self.env_var
        return (os.environ.get(variable, "") if variable else "").strip()

    def _call_first(self, name: str, /, *args: Any, **kwargs: Any) -> Any:
        """Run a call made before the domain settled: settle it, then call."""
        return self._settle(f"call candidate {name!r}").members[name](*args, **kwargs)

    # -- scopes --------------------------------------------------------------------

    def _member_here(self, name: str) -> Any:
        """Return the member a call of candidate ``name`` runs in this context."""
        scope = self._scope.get()
        if scope is not None:
            return scope.members[name]
        return self._settle(f"call candidate {name!r}").members[name]

    def _set_profiling(self, current: Callable[[], Any] | None) -> None:
        """Route proxies through ``current`` (a profiler's), or back to the scope variable."""
        with self._lock:
            self._profiling = current
            self._refresh_dispatch()

    def _refresh_dispatch(self) -> None:
        # Proxies look at the context only while a scope or a profile is open anywhere.
        self._switchboard.set_scoped(self._open_scopes > 0 or self._profiling is not None)
        self._switchboard.set_current(self._profiling or self._scope.get)

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

    def _live_scope(self) -> _Scope | None:
        """The innermost scope of this context whose block has not exited."""
        scope = self._scope.get()
        while scope is not None and not scope.live:
            scope = scope.parent
        return scope

    def _active_engine(self) -> str | None:
        """The engine a call would run in this context, or None if undecided."""
        scope = self._live_scope()
        if scope is not None:
            return scope.engine
        settled = self._settled
        return None if settled is None else settled.engine

    def _enter_scope(self, cls: EngineMeta) -> tuple[_Scope, Token[_Scope | None]]:
        """Make ``cls`` the engine of this context until :meth:`_exit_scope`."""
        members = self._members_of(cls)
        scope = _Scope(cls.__coheriq_name__ or REFERENCE, members, self._scope.get())
        with self._lock:
            self._open_scopes += 1
            self._refresh_dispatch()
        log(DEBUG, "domain %r: entering a scope of engine %r", self.name, scope.engine)
        return scope, self._scope.set(scope)

    def _exit_scope(self, scope: _Scope, token: Token[_Scope | None]) -> None:
        scope.live = False
        scope.members = _Fallthrough(self, scope.parent)
        log(DEBUG, "domain %r: leaving the scope of engine %r", self.name, scope.engine)
        try:
            self._scope.reset(token)
        except ValueError:
            # Exited in another context than it was entered (a generator resumed
            # elsewhere): the dead scope stays there but lookups skip it.
            pass
        with self._lock:
            self._open_scopes -= 1
            self._refresh_dispatch()


def _reinit_locks_in_child() -> None:
    # A thread that held a lock at fork time does not exist in the child, so its
    # locks would stay held forever; replace them, and forget set-ups in flight.
    global _registry_lock
    _registry_lock = _thread.allocate_lock()
    for domain in _domains.values():
        domain._lock = _thread.RLock()
        domain._initializing.clear()
        domain._settling = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reinit_locks_in_child)
