"""What an engine's own code reaches as ``self.<ClassCandidate>``: decided by the engine's MRO.

The reference class holds each class candidate as a :class:`ClassCandidate`: read from a
class, the marked class; read from an engine's instance, a :class:`LibraryClass`, which
constructs the library's class itself, and runs its classmethods, in a block of that engine.
An engine that overrides the candidate reaches its own class instead.
"""

from __future__ import annotations

from .._call.marked import own_attribute, raw_attribute
from .._stdlib import TYPE_CHECKING, async_generator_inside, calls_inside, generator_inside
from .declines import ClassStandIn

if TYPE_CHECKING:
    from typing import Any

    from .._call.proxy import CandidateInfo


class ClassCandidate:
    """A class candidate on the reference class; ``info.reference`` is the marked class."""

    __slots__ = ("info",)

    def __init__(self, info: CandidateInfo) -> None:
        self.info = info

    def __get__(self, engine: Any, owner: Any = None) -> Any:
        return self.info.reference if engine is None else LibraryClass(self.info, type(engine))

    def __repr__(self) -> str:
        return f"<class candidate {self.info.name!r} of domain {self.info.domain.name!r}>"


class LibraryClass(ClassStandIn):
    """The library's class as engine class ``engine``, which does not override it, reaches it.

    Calling it, and its classmethods and staticmethods, run in a block of ``engine``,
    whatever the caller's context runs; its other attributes are the marked class's own
    (:func:`~coheriq._call.marked.own_attribute`).
    """

    __doc__ = ClassStandIn.__doc__
    __slots__ = ("engine", "info")

    def __init__(self, info: CandidateInfo, engine: Any) -> None:
        self.info, self.engine = info, engine

    @property
    def _coheriq_class(self) -> Any:
        return self.info.reference

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        construct = self.info.construct
        assert construct is not None  # a class candidate's, set when it was marked
        return _InBlock(construct, self.info.domain, self.engine)(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        cls = self.info.reference
        if name.startswith("__") and name.endswith("__"):  # __name__, __mro__, ...
            return getattr(cls, name)
        value = own_attribute(cls, name)
        if isinstance(raw_attribute(cls, name), (classmethod, staticmethod)):
            return _InBlock(value, self.info.domain, self.engine)
        return value

    def __repr__(self) -> str:
        cls = self.info.reference
        engine = getattr(self.engine, "__coheriq_name__", None) or self.engine.__qualname__
        return (
            f"<class {cls.__module__}.{cls.__qualname__}, constructed as it is by engine "
            f"{engine!r}>"
        )


class _InBlock:
    """Library code reached through an engine, run in a block of that engine.

    A coroutine or (async) generator it returns runs in a block each time it resumes.
    While the engine itself is starting (its ``__init__`` reaching ``self.Batch``) it runs
    as called: there is no block to enter yet.
    """

    __slots__ = ("domain", "engine", "method")

    def __init__(self, method: Any, domain: Any, engine: Any) -> None:
        self.method, self.domain, self.engine = method, domain, engine

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.domain.engines.starting_here(self.engine):
            return self.method(*args, **kwargs)
        with self._block():
            result = self.method(*args, **kwargs)

        def started() -> Any:  # what the drivers below start: the result itself
            return result

        if hasattr(result, "cr_code"):  # a coroutine
            return calls_inside(started, self._block, coroutine=True)()
        if hasattr(result, "gi_code"):  # a generator
            return generator_inside(started, self._block)()
        if hasattr(result, "ag_code"):  # an async generator
            return async_generator_inside(started, self._block)()
        return result

    def _block(self) -> _Block:
        return _Block(self.domain.scopes, self.engine)

    def __getattr__(self, name: str) -> Any:  # __doc__, __name__, __wrapped__, ...
        return getattr(self.method, name)

    def __repr__(self) -> str:
        return f"<{self.method!r}, run in a block of engine {self.engine!r}>"


class _Block:
    """A ``using_engine`` block of ``engine``, as a context manager."""

    __slots__ = ("engine", "scope", "scopes")

    def __init__(self, scopes: Any, engine: Any) -> None:
        self.scopes, self.engine = scopes, engine

    def __enter__(self) -> None:
        self.scope = self.scopes.enter(self.engine)

    def __exit__(self, *exc: object) -> None:
        self.scopes.exit(self.scope)
