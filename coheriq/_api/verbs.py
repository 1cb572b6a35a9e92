"""The user's verbs: choose the engine of a domain, globally or for a scope, and ask.

The active engine of a domain, for a call in a given thread or asyncio task, is
the first of:

1. the engine of the innermost live :class:`using_engine` block in this context;
2. the process-global choice, made the first time it is needed: an earlier
   :func:`enable_engine`, else the engine named by ``<ENV_PREFIX>_ENGINE``, else the
   reference implementation.
"""

from __future__ import annotations

# The module collections.abc re-exports, loaded with every interpreter: an ordered
# choice may be any sequence (a deque too), without importing collections.
from _collections_abc import Sequence as _Sequence

from .._call.proxy import candidate_of, code_flags_behind
from .._choice.global_choice import Settlement
from .._choice.ordered import after_chosen, first_that_starts
from .._choice.records import live_scope
from .._engines.meta import EngineMeta
from .._library.domain import AccelerationDomain, all_domains, lookup_domain
from .._names import REFERENCE, check_name
from .._stdlib import (
    CO_ASYNC_GENERATOR,
    CO_COROUTINE,
    CO_GENERATOR,
    TYPE_CHECKING,
    async_generator_inside,
    calls_inside,
    generator_inside,
)
from ..exceptions import (
    CoheriqDomainNotFoundError,
    CoheriqEngineNameError,
    CoheriqEngineSettledError,
    CoheriqScopeError,
    CoheriqTypeError,
    did_you_mean,
    listing,
)
from .engine_forms import AccelerationEngine

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import TracebackType
    from typing import Any, TypeAlias, TypeGuard, TypeVar

    from .._choice.ordered import Tried
    from .._choice.records import Scope

    F = TypeVar("F", bound=Callable[..., Any])
    T = TypeVar("T")
    EngineLike: TypeAlias = str | AccelerationEngine | EngineMeta
    # An ordered choice: the first of them that starts here.
    EngineChoice: TypeAlias = EngineLike | Sequence[EngineLike]

__all__ = [
    "active_implementation",
    "available_engines",
    "enable_engine",
    "engine_of",
    "import_domain",
    "resolve_impl",
    "using_engine",
]


def enable_engine(domain: AccelerationDomain | str, engine: EngineChoice) -> None:
    """Make ``engine`` the domain's engine for the whole process, from now on.

    Call it before the domain's candidates are first used. The choice is made at
    once (the engine is imported and instantiated now, so a broken engine fails
    here) and is final: enabling the same engine again does nothing, enabling
    another raises. An explicit choice wins over the environment variable. Use
    :class:`using_engine` to run part of a program on another engine.

    Given a list, such as ``["gpu", "compiled", "reference"]``, the first engine
    of it that is installed, imports and starts here is chosen; the others are
    passed over with the reason, which :func:`coheriq.explain` shows. An engine
    that cannot run on a machine says so by raising from its ``__init__``. After
    the choice is made, a list behaves as the engine it would choose now.

    Args:
        domain: The domain or its name.
        engine: An engine name, :data:`~coheriq.REFERENCE`, an
            :class:`~coheriq.AccelerationEngine` or an engine class; or a list of
            them, in order of preference.

    Raises:
        CoheriqDomainNotFoundError: No such domain.
        CoheriqEngineNotFoundError: No such engine (for a list: none of them can
            run here; the message gives each one's reason).
        CoheriqEngineError: The engine failed to load or start; nothing changed.
        CoheriqEngineSettledError: The domain runs on another engine already.
        CoheriqTypeError: A list that is empty or names an engine twice.
    """
    found = lookup_domain(domain)
    tried: Tried = ()
    then: tuple[str | EngineMeta, ...] = ()
    if _is_engine_list(engine):
        named_by = " (named by enable_engine)"
        engines = _engine_list(found, engine)
        cls, tried = first_that_starts(found.engines, engines, named_by=named_by, for_choice=True)
        then = after_chosen(engines, tried)
    else:
        cls = resolve_engine(found, engine)
    settled = found.choice.settle_on(cls, "enable_engine", tried=tried, then=then)
    if settled.engine_class is not cls:
        raise CoheriqEngineSettledError(_settled_message(found, settled, cls.__coheriq_name__))


def resolve_engine(domain: AccelerationDomain, engine: object) -> EngineMeta:
    """Return the engine class that ``engine`` stands for in ``domain``.

    An :class:`~coheriq.AccelerationEngine` stands for the class it built; names
    and engine classes are the engines registry's to resolve
    (:meth:`coheriq._engines.registry.Engines.resolve`, which says what it raises).

    Raises:
        CoheriqEngineError: An :class:`AccelerationEngine` not materialized yet.
    """
    if isinstance(engine, AccelerationEngine):
        engine = engine.engine_class
    return domain.engines.resolve(engine)


def _is_engine_list(engine: object) -> TypeGuard[Sequence[Any]]:
    """Whether ``engine`` is an ordered choice: a sequence (list, tuple, deque), not a name."""
    return isinstance(engine, _Sequence) and not isinstance(engine, (str, bytes, bytearray))


def _engine_list(domain: AccelerationDomain, engines: Sequence[object]) -> list[str | EngineMeta]:
    """Check an ordered list of engines: names stay names (found when tried), others resolve.

    Raises:
        CoheriqTypeError: The list is empty, names an engine twice, or holds
            something that is not an engine.
    """
    if not engines:
        raise CoheriqTypeError(
            f"An empty list names no engine of domain {domain.name!r}; give the engines in "
            f"order of preference, e.g. ['gpu', 'compiled', {REFERENCE!r}]."
        )
    items: list[str | EngineMeta] = [
        check_name(e, "engine name", CoheriqEngineNameError)
        if isinstance(e, str)
        else resolve_engine(domain, e)
        for e in engines
    ]
    names = [i if isinstance(i, str) else (i.__coheriq_name__ or REFERENCE) for i in items]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise CoheriqTypeError(
            f"The list of engines {names!r} of domain {domain.name!r} names {twice[0]!r} more "
            "than once; name each engine once, in order of preference."
        )
    return items


def _settled_message(domain: AccelerationDomain, settled: Settlement, wanted: str | None) -> str:
    """Why ``domain`` cannot switch to engine ``wanted``, and what to do instead."""
    if settled.reason == "enable_engine":
        how = f"an earlier enable_engine at {settled.where}"
    elif settled.reason.startswith("environment"):
        how = f"the {settled.reason}"
    else:
        how = f"default, at its first use: a call at {settled.where}"
    scoped = f"`with coheriq.using_engine({domain.name!r}, {wanted!r}):`"
    if settled.during_import:
        variable = f"set {domain.env_var}={wanted} before the program starts, or " * bool(
            domain.env_var
        )
        return (
            f"Domain {domain.name!r} already runs on engine {settled.engine!r} (chosen by "
            f"{how}), so it cannot switch to {wanted!r}. That call ran while module "
            f"{domain.module!r} was being imported, so the choice was made before any "
            f"program could make it. To use {wanted!r}, {variable}run the code inside "
            f"{scoped}. The library itself should not call its candidates at import: it "
            "can call its own implementations there (candidate.__wrapped__(...)), or build "
            "its objects before materialize()."
        )
    return (
        f"Domain {domain.name!r} already runs on engine {settled.engine!r} (chosen by "
        f"{how}), so it cannot switch to {wanted!r}. The global engine is chosen once "
        "per process, before the domain is first used, so that every call site and "
        "every object agrees. Call enable_engine earlier, or run the code that needs "
        f"{wanted!r} inside {scoped}."
    )


class using_engine:  # noqa: N801 -- named like contextlib's context managers
    """Run a block, or every call of a function, on an engine of a domain.

    The choice holds in the current thread or asyncio task only, for the extent
    of the block; blocks nest and the previous choice returns on exit, also on an
    exception. Asyncio tasks created inside the block (and code run in a copy of
    its context, ``contextvars.copy_context().run``) see it while the block is
    live; a new ``threading.Thread`` starts without it. It never makes or changes
    the global choice.

    >>> doc = coheriq.AccelerationDomain("doc_using_engine")
    >>> @doc.acceleration_candidate
    ... def which():
    ...     return "reference"
    >>> _ = doc.materialize()
    >>> class Fast(coheriq.engine_class("doc_using_engine"), name="fast"):
    ...     def which(self):
    ...         return "fast"
    >>> with coheriq.using_engine("doc_using_engine", "fast"):
    ...     which()
    'fast'
    >>> @coheriq.using_engine("doc_using_engine", "fast")
    ... def work():
    ...     return which()
    >>> work(), which()
    ('fast', 'reference')

    The engine is looked up (and imported, and instantiated once per process) on
    entry. One ``using_engine`` object may be entered by several threads and
    tasks at once, and nested: each entry is a block of its own context, and
    ``__exit__`` ends this context's innermost one. Blocks may end out of order
    (each takes only itself away), and a block that ends in another context
    than it began in (a generator finished by another task) ends there without
    disturbing that context. Exiting more often than entering raises
    :class:`~coheriq.CoheriqScopeError`. As a decorator it is safe in any thread,
    and ``async def`` functions are scoped for the whole of each call.

    Args:
        domain: The domain or its name.
        engine: An engine name, :data:`~coheriq.REFERENCE`, an
            :class:`~coheriq.AccelerationEngine` or an engine class.
    """

    def __init__(self, domain: AccelerationDomain | str, engine: EngineChoice) -> None:
        if not isinstance(domain, (AccelerationDomain, str)):
            lookup_domain(domain)  # raises the error that explains what a domain is
        engines = engine if _is_engine_list(engine) else [engine]
        for one in engines:
            if not isinstance(one, (str, AccelerationEngine, EngineMeta)):
                raise CoheriqTypeError(
                    "using_engine takes an engine name, an AccelerationEngine or an engine "
                    f"class, or a list of them, not {type(one).__name__} ({one!r})."
                )
        self.domain = domain
        self.engine = engine
        # Every block of this object not exited yet, in whatever context: the
        # object may be entered by several tasks or threads at once, or nested.
        self._entered: list[Scope] = []
        # The engine class, looked up once per copy of the domain (a list is
        # resolved then: the first of it that starts), and what a list tried.
        self._resolved: tuple[AccelerationDomain, EngineMeta, Tried, tuple[Any, ...]] | None = None

    def __repr__(self) -> str:
        name = self.domain if isinstance(self.domain, str) else self.domain.name
        return f"using_engine({name!r}, {self.engine!r})"

    def __enter__(self) -> None:
        found = lookup_domain(self.domain)
        resolved = self._resolved
        if resolved is None or resolved[0] is not found:
            resolved = self._resolved = (found, *self._resolve(found))
        scope = found.scopes.enter(resolved[1], owner=self, tried=resolved[2], then=resolved[3])
        self._entered.append(scope)

    def _resolve(self, found: AccelerationDomain) -> tuple[EngineMeta, Tried, tuple[Any, ...]]:
        """The engine class, what a list tried, and the engines after it in the list."""
        engine = self.engine
        if _is_engine_list(engine):
            engines = _engine_list(found, engine)
            named_by = " (named by using_engine)"
            cls, tried = first_that_starts(found.engines, engines, named_by=named_by)
            return cls, tried, after_chosen(engines, tried)
        return resolve_engine(found, engine), (), ()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """End this object's innermost block in this context.

        Where this context has none (a generator's block finished by another
        task, a block entered in one thread and left in another), its newest
        block anywhere.

        Raises:
            CoheriqScopeError: Every block of this object has exited already.
        """
        while True:
            scope = self._open_here() or self._newest()
            if scope is None:
                raise CoheriqScopeError(
                    f"{self!r} was exited more often than it was entered: each `with` block, "
                    "or __exit__ call, ends one __enter__."
                )
            try:
                self._entered.remove(scope)
                break
            except ValueError:  # another thread's exit took that block just now: look again
                continue
        scope.state.scopes.exit(scope)

    # Other threads enter and exit this object while these run (on a free-threaded
    # build, truly at once): nothing here iterates the list of entries (an iterator
    # over a list that another thread shrinks may stop early), and an index that
    # another thread's exit has just made too large is read again.

    def _open_here(self) -> Scope | None:
        """This object's innermost block that is open in this context, if any."""
        resolved = self._resolved
        if resolved is None:  # never entered
            return None
        # Every copy of the domain, and so every entry of this object, looks at
        # the same context variable.
        scope = resolved[0].scopes.live()
        while scope is not None:
            if scope.owner is self:
                return scope
            scope = live_scope(scope.parent)
        return None

    def _newest(self) -> Scope | None:
        """This object's newest block not exited yet, in any context."""
        entered = self._entered
        while entered:
            try:
                return entered[-1]
            except IndexError:  # emptied between the test and the read (free-threaded)
                continue
        return None

    def __call__(self, fn: F) -> F:
        """Decorate ``fn`` so that each of its calls runs inside this scope.

        An ``async def`` function runs in the block for the whole of each call. A
        generator function (``def`` or ``async def`` with ``yield``) runs in it
        one step at a time: from each resumption to the next ``yield``, so that
        the generator's code runs on the engine and its consumer, between steps,
        does not.
        """
        import functools  # here, not at the top: it imports collections (see _stdlib)

        domain, engine = self.domain, self.engine
        flags = code_flags_behind(fn)
        # A block of its own for each call, or each step: this object may be
        # entered elsewhere too.
        block = functools.partial(using_engine, domain, engine)
        if flags & CO_GENERATOR:
            return functools.wraps(fn)(generator_inside(fn, block))  # type: ignore[return-value]
        if flags & CO_ASYNC_GENERATOR:
            return functools.wraps(fn)(async_generator_inside(fn, block))  # type: ignore[return-value]
        scoped: F = calls_inside(fn, block, coroutine=bool(flags & CO_COROUTINE))
        return scoped


def available_engines(domain: AccelerationDomain | str) -> tuple[str, ...]:
    """Return the sorted names of the domain's engines, registered or advertised.

    Reads package metadata but imports no engine and settles nothing. The
    reference is not listed: it is always available as :data:`~coheriq.REFERENCE`.
    An :class:`~coheriq.AccelerationEngine` is listed from its construction on.

    Returns:
        The names in a tuple (as coheriq 0.0.x returned them), e.g. ``('fast', 'gpu')``.
    """
    return tuple(lookup_domain(domain).engines.names())


def active_implementation(domain: AccelerationDomain | str) -> str | None:
    """Return the engine a call of the domain would run here and now, without choosing.

    Returns:
        The engine of the innermost live :class:`using_engine` block in this
        context; else the global choice (an engine name or
        :data:`~coheriq.REFERENCE`) if it is made; else the engine the first
        call will choose, as :func:`coheriq.explain` says (``enable_engine``
        not called yet: the environment variable's engine, or the reference),
        without choosing it. ``None`` where no call can run yet: the domain is
        not materialized, or the environment variable names no engine.
    """
    found = lookup_domain(domain)
    engine = found.scopes.active_engine()
    if engine is None and found.materialized:
        engine = found.choice.prospect()[0]
    return engine


def resolve_impl(candidate: T) -> T:
    """Return what a call of ``candidate`` would run here and now.

    For a function candidate, the engine's function or bound method; for a class
    candidate, the implementing class. Where the engine's implementation may
    decline a call (:func:`coheriq.may_decline`), a function that tries it
    first: its ``__wrapped__`` is the implementation (and, for a method, its
    ``__self__`` the engine's instance). Like a call, this makes the domain's
    global choice if it is not made yet.

    Raises:
        CoheriqTypeError: ``candidate`` is not a candidate proxy.
    """
    info = candidate_of(candidate)
    if info is None:
        raise CoheriqTypeError(
            f"{candidate!r} is not a coheriq candidate. Pass a function or class that a "
            "library marked with @domain.acceleration_candidate, as the library exports it."
        )
    member: T = info.domain.scopes.implementation_here(info.name)
    return member


def engine_of(obj: object) -> str:
    """Return the name of the engine whose implementation of a class candidate made ``obj``.

    The engine is the one whose class body defines the implementation: an object
    made while a hybrid was active reports the engine the hybrid inherits that
    class from. Instances of subclasses of an implementation count as that
    implementation.

    Returns:
        An engine name, or :data:`~coheriq.REFERENCE` for the reference class.

    Raises:
        CoheriqTypeError: ``obj`` is not an instance of any class candidate's
            implementation.
    """
    for domain in all_domains():
        engine = domain.engines.engine_of_type(type(obj))
        if engine is not None:
            return engine
    raise CoheriqTypeError(
        f"{type(obj).__qualname__} object {obj!r:.80} is not an instance of any coheriq class "
        "candidate's implementation, so it was made by no engine. engine_of takes objects "
        "made by calling a class candidate such as mylib.Batch(...)."
    )


def import_domain(name: str) -> AccelerationDomain:
    """Return the domain ``name``, importing the library that creates it if need be.

    The library is the module that a distribution advertises for the domain in the
    entry-point group ``coheriq.domains``, else the module named like the domain.

    Raises:
        CoheriqTypeError: ``name`` is not a valid domain name.
        CoheriqDomainNotFoundError: The domain is neither registered nor created by
            importing that module; the message says what the import did.
    """
    check_name(name, "domain name")  # "" or "a b" can name neither a domain nor a module
    try:
        return lookup_domain(name)
    except CoheriqDomainNotFoundError as missing:
        from .. import discovery  # metadata is read only when a domain is missing

        advertised = discovery.advertised_domains()
        ep = advertised.get(name)
        module = discovery.module_of(ep) if ep is not None else name
        try:
            __import__(module)
        except ImportError as error:
            others = f" Installed packages advertise {listing(advertised)}." if advertised else ""
            raise CoheriqDomainNotFoundError(
                f"{missing} Importing a module named {module!r} to create it failed too: "
                f"{error}.{others}{did_you_mean(name, advertised)}"
            ) from error
    return lookup_domain(name)
