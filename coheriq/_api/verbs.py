"""The user's verbs: choose a domain's engine, globally or for a block, and ask what runs.

A call runs on the engine of the innermost live :class:`using_engine` block in its thread or
task, else on the global choice, made once: :func:`enable_engine`, else ``<PREFIX>_ENGINE``,
else the reference.
"""

from __future__ import annotations

# The module collections.abc re-exports, loaded with every interpreter: an ordered
# choice may be any sequence (a deque too), without importing collections.
from _collections_abc import Sequence as _Sequence

from .._call.proxy import candidate_of, code_flags_behind
from .._choice.blocks import live_scope
from .._choice.global_choice import Settlement
from .._choice.ordered import after_chosen, first_that_starts
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
    from typing import Any, TypeAlias, TypeGuard, TypeVar

    from .._choice.blocks import Scope
    from .._choice.ordered import Tried

    F = TypeVar("F", bound=Callable[..., Any])
    T = TypeVar("T")
    EngineLike: TypeAlias = str | AccelerationEngine | EngineMeta
    # An ordered choice: the first of them that starts here.
    EngineChoice: TypeAlias = EngineLike | Sequence[EngineLike]


def enable_engine(domain: AccelerationDomain | str, engine: EngineChoice) -> None:
    """Make ``engine`` the domain's engine for the whole process, from now on.

    Call it before the domain's candidates are first used. The engine is imported and
    started now (a broken one fails here), and the choice is final: enabling the same engine
    again does nothing, another raises. It wins over the environment variable; use
    :class:`using_engine` to run part of a program on another engine.

    Given a list, such as ``["gpu", "compiled", "reference"]``, the first engine of it that
    is installed, imports and starts here (its ``__init__`` does not raise) is chosen; the
    others are passed over with their reasons, which :func:`coheriq.explain` shows. Once the
    choice is made, a list behaves as the engine it would choose now.

    Args:
        engine: An engine name, :data:`~coheriq.REFERENCE`, an
            :class:`~coheriq.AccelerationEngine` or an engine class; or a list of them, in
            order of preference.

    Raises:
        CoheriqDomainNotFoundError: No such domain.
        CoheriqEngineNotFoundError: No such engine (for a list: none of them can
            run here; the message gives each one's reason).
        CoheriqEngineError: The engine failed to load or start; nothing changed.
        CoheriqEngineSettledError: The domain runs on another engine already.
        CoheriqTypeError: A list that is empty or names an engine twice.
    """
    found = lookup_domain(domain)
    cls, tried, then = _choose(found, engine, " (named by enable_engine)", for_choice=True)
    settled = found.choice.settle_on(cls, "enable_engine", tried=tried, then=then)
    if settled.engine_class is not cls:
        raise CoheriqEngineSettledError(_settled_message(found, settled, cls.__coheriq_name__))


def resolve_engine(domain: AccelerationDomain, engine: object) -> EngineMeta:
    """Return the engine class that ``engine`` (a name, an engine class or a materialized
    :class:`~coheriq.AccelerationEngine`) stands for in ``domain``, raising as
    :meth:`coheriq._engines.registry.Engines.resolve` does."""
    if isinstance(engine, AccelerationEngine):
        engine = engine.engine_class
    return domain.engines.resolve(engine)


def _choose(
    domain: AccelerationDomain, engine: object, named_by: str, for_choice: bool = False
) -> tuple[EngineMeta, Tried, tuple[Any, ...]]:
    """The engine class ``engine`` stands for (of a list, the first that starts here), what a
    list tried, and the engines of the list after it. A list's names stay names (found when
    tried); an empty list or an engine named twice raises :class:`~coheriq.CoheriqTypeError`."""
    if not _is_engine_list(engine):
        return resolve_engine(domain, engine), (), ()
    if not engine:
        raise CoheriqTypeError(
            f"An empty list names no engine of domain {domain.name!r}; give the engines in "
            f"order of preference, e.g. ['gpu', 'compiled', {REFERENCE!r}]."
        )
    engines: list[str | EngineMeta] = [
        check_name(e, "engine name", CoheriqEngineNameError)
        if isinstance(e, str)
        else resolve_engine(domain, e)
        for e in engine
    ]
    names = [e if isinstance(e, str) else (e.__coheriq_name__ or REFERENCE) for e in engines]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise CoheriqTypeError(
            f"The list of engines {names!r} of domain {domain.name!r} names {twice[0]!r} more "
            "than once; name each engine once, in order of preference."
        )
    cls, tried = first_that_starts(
        domain.engines, engines, named_by=named_by, for_choice=for_choice
    )
    return cls, tried, after_chosen(engines, tried)


def _is_engine_list(engine: object) -> TypeGuard[Sequence[Any]]:
    """Whether ``engine`` is an ordered choice: a sequence (list, tuple, deque), not a name."""
    return isinstance(engine, _Sequence) and not isinstance(engine, (str, bytes, bytearray))


def _settled_message(domain: AccelerationDomain, settled: Settlement, wanted: str | None) -> str:
    """Why ``domain`` cannot switch to engine ``wanted``, and what to do instead."""
    if settled.reason == "enable_engine":
        how = f"an earlier enable_engine at {settled.where}"
    elif settled.reason.startswith("environment"):
        how = f"the {settled.reason}"
    else:
        how = f"default, at its first use: a call at {settled.where}"
    scoped = f"`with coheriq.using_engine({domain.name!r}, {wanted!r}):`"
    runs = (
        f"Domain {domain.name!r} already runs on engine {settled.engine!r} (chosen by "
        f"{how}), so it cannot switch to {wanted!r}."
    )
    if settled.during_import:
        variable = f"set {domain.env_var}={wanted} before the program starts, or " * bool(
            domain.env_var
        )
        return (
            f"{runs} That call ran while module {domain.module!r} was being imported, so the "
            f"choice was made before any program could make it. To use {wanted!r}, "
            f"{variable}run the code inside {scoped}. The library itself should not call its "
            "candidates at import: it can call its own implementations there "
            "(candidate.__wrapped__(...)), or build its objects before materialize()."
        )
    return (
        f"{runs} The global engine is chosen once per process, before the domain is first "
        "used, so that every call site and every object agrees. Call enable_engine earlier, "
        f"or run the code that needs {wanted!r} inside {scoped}."
    )


class using_engine:  # noqa: N801 -- named like contextlib's context managers
    """Run a block, or every call of a function, on an engine of a domain.

    The choice holds in the current thread or asyncio task only, for the extent of the block;
    blocks nest, and the previous choice returns on exit, also on an exception. Asyncio tasks
    created inside the block (and code run in a copy of its context,
    ``contextvars.copy_context().run``) see it while the block is live; a new
    ``threading.Thread`` starts without it. It never makes or changes the global choice.

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

    The engine is looked up (imported, and instantiated once per process) on entry. One
    ``using_engine`` object may be entered by several threads and tasks at once, and nested:
    each entry is a block of its own context, and ``__exit__`` ends this context's innermost
    one. Blocks may end out of order (each takes only itself away), and a block that ends in
    another context than it began in (a generator finished by another task) ends there without
    disturbing that context. Exiting more often than entering raises
    :class:`~coheriq.CoheriqScopeError`. As a decorator it is safe in any thread, and
    ``async def`` functions are scoped for the whole of each call.

    ``engine`` is as for :func:`enable_engine` (of a list, the first that starts here).
    """

    def __init__(self, domain: AccelerationDomain | str, engine: EngineChoice) -> None:
        if not isinstance(domain, (AccelerationDomain, str)):
            lookup_domain(domain)  # raises the error that explains what a domain is
        for one in engine if _is_engine_list(engine) else [engine]:
            if not isinstance(one, (str, AccelerationEngine, EngineMeta)):
                raise CoheriqTypeError(
                    "using_engine takes an engine name, an AccelerationEngine or an engine "
                    f"class, or a list of them, not {type(one).__name__} ({one!r})."
                )
        self.domain, self.engine = domain, engine
        self._entered: list[Scope] = []  # every block not exited yet, in whatever context
        # (domain copy, engine class, what a list tried, the list after it): once per copy.
        self._resolved: tuple[AccelerationDomain, EngineMeta, Tried, tuple[Any, ...]] | None = None

    def __repr__(self) -> str:
        name = self.domain if isinstance(self.domain, str) else self.domain.name
        return f"using_engine({name!r}, {self.engine!r})"

    def __enter__(self) -> None:
        found = lookup_domain(self.domain)
        resolved = self._resolved
        if resolved is None or resolved[0] is not found:
            chosen = _choose(found, self.engine, " (named by using_engine)")
            resolved = self._resolved = (found, *chosen)
        scope = found.scopes.enter(resolved[1], owner=self, tried=resolved[2], then=resolved[3])
        self._entered.append(scope)

    def __exit__(self, *exc_info: object) -> None:
        """End this object's innermost block in this context, else (a generator finished by
        another task) its newest block anywhere; raise :class:`~coheriq.CoheriqScopeError`
        where every block has exited already."""
        # Other threads enter and exit this object meanwhile (free-threaded: truly at once), so
        # nothing iterates the list of entries, and a block another exit took is looked for again.
        while True:
            scope = self._open_here()
            try:
                scope = scope or self._entered[-1]
                self._entered.remove(scope)
                break
            except IndexError:
                raise CoheriqScopeError(
                    f"{self!r} was exited more often than it was entered: each `with` block, "
                    "or __exit__ call, ends one __enter__."
                ) from None
            except ValueError:  # another thread's exit took that block just now: look again
                continue
        scope.state.scopes.exit(scope)

    def _open_here(self) -> Scope | None:
        """This object's innermost block that is open in this context, if any."""
        resolved = self._resolved
        if resolved is None:  # never entered
            return None
        # Every copy of the domain looks at the same context variable.
        scope = resolved[0].scopes.live()
        while scope is not None:
            if scope.owner is self:
                return scope
            scope = live_scope(scope.parent)
        return None

    def __call__(self, fn: F) -> F:
        """Decorate ``fn`` so that each of its calls runs inside this scope: an ``async def``
        function for the whole of each call, a generator function one step at a time (from
        each resumption to the next ``yield``), so that its consumer runs outside."""
        import functools  # here, not at the top: it imports collections

        flags = code_flags_behind(fn)
        # A block of its own for each call or step: this object may be entered elsewhere too.
        block = functools.partial(using_engine, self.domain, self.engine)
        if flags & CO_GENERATOR:
            return functools.wraps(fn)(generator_inside(fn, block))  # type: ignore[return-value]
        if flags & CO_ASYNC_GENERATOR:
            return functools.wraps(fn)(async_generator_inside(fn, block))  # type: ignore[return-value]
        return calls_inside(fn, block, coroutine=bool(flags & CO_COROUTINE))  # type: ignore[no-any-return]


def available_engines(domain: AccelerationDomain | str) -> tuple[str, ...]:
    """Return the sorted names of the domain's engines, registered or advertised.

    Reads package metadata but imports no engine and settles nothing. The reference is not
    listed: it is always available as :data:`~coheriq.REFERENCE`. An
    :class:`~coheriq.AccelerationEngine` is listed from its construction on.

    Returns:
        The names in a tuple (as coheriq 0.0.x returned them), e.g. ``('fast', 'gpu')``.
    """
    return tuple(lookup_domain(domain).engines.names())


def active_implementation(domain: AccelerationDomain | str) -> str | None:
    """Return the engine a call of the domain would run here and now, without choosing.

    Returns:
        The engine of the innermost live :class:`using_engine` block in this context; else
        the global choice (an engine name or :data:`~coheriq.REFERENCE`) if it is made; else
        the engine the first call will choose (the environment variable's, or the
        reference), as :func:`coheriq.explain` says, without choosing it. ``None`` where no
        call can run yet: the domain is not materialized, or the variable names no engine.
    """
    found = lookup_domain(domain)
    engine = found.scopes.active_engine()
    if engine is None and found.materialized:
        engine = found.choice.prospect().engine
    return engine


def resolve_impl(candidate: T) -> T:
    """Return what a call of ``candidate`` would run here and now.

    For a function candidate, the engine's function or bound method; for a class candidate,
    the implementing class. Where the implementation may decline a call
    (:func:`coheriq.may_decline`), or the engine converts data (:class:`coheriq.Conversion`),
    a function that tries it first: its ``__wrapped__`` is the implementation (for a method,
    its ``__self__`` the engine's instance). Like a call, this
    makes the domain's global choice if it is not made yet.

    Raises:
        CoheriqTypeError: ``candidate`` is not a candidate proxy.
    """
    info = candidate_of(candidate)
    if info is None:
        raise CoheriqTypeError(
            f"{candidate!r} is not a coheriq candidate. Pass a function or class that a "
            "library marked with @domain.acceleration_candidate, as the library exports it."
        )
    return info.domain.scopes.implementation_here(info.name)  # type: ignore[no-any-return]


def engine_of(obj: object) -> str:
    """Return the name of the engine whose implementation of a class candidate made ``obj``.

    The engine is the one whose class body defines the implementation (for a hybrid, the
    engine it inherits that class from); an instance of a subclass of an implementation
    counts as that implementation's.

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

    The library is the module a distribution advertises for the domain in the entry-point
    group ``coheriq.domains``, else the module named like the domain.

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
