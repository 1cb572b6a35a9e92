"""What an engine's own code reaches as ``self.<ClassCandidate>``.

Inside an engine, which implementation ``self.Batch`` stands for is decided by
the engine's MRO, like every other attribute, never by the context that calls
the engine's code. An engine that overrides the class candidate has its class
in its own body, and ``self.Batch`` is that class; where that class is marked
with ``may_decline``, a :class:`~coheriq._engines.declines.DecliningClass` that
stands for it, whose construction goes on along the MRO when it declines. One
that does not inherits
the reference class's attribute, which is the library's *marked* class, whose
call dispatches on the calling context: the engine's code running in a thread
of its own (no block there) would build the global engine's objects.

So the reference class holds each class candidate as a :class:`ClassCandidate`
descriptor. Read from a class (``engine_class("mylib").Batch``, ``Fast.Batch``)
it is the marked class. Read from an engine's instance (``self.Batch``) it is a
:class:`LibraryClass`: calling it constructs the library's class itself;
``isinstance``/``issubclass`` with it answer as with the marked class; its
other attributes are the marked class's own, except that a classmethod of the
library's class runs in a block of the engine, so that what it builds through
``cls(...)`` is decided by the engine too.
"""

from __future__ import annotations

from .._call.marked import own_attribute
from .._stdlib import TYPE_CHECKING, async_generator_inside, calls_inside, generator_inside

if TYPE_CHECKING:
    from typing import Any

    from .._call.proxy import CandidateInfo

__all__ = ["ClassCandidate", "LibraryClass"]


class ClassCandidate:
    """A class candidate on the reference class (see the module's doc).

    Args:
        info: The candidate; ``info.reference`` is the marked class.
    """

    __slots__ = ("info",)

    def __init__(self, info: CandidateInfo) -> None:
        self.info = info

    def __get__(self, engine: Any, owner: Any = None) -> Any:
        if engine is None:
            return self.info.reference
        return LibraryClass(self.info, type(engine))

    def __repr__(self) -> str:
        return f"<class candidate {self.info.name!r} of domain {self.info.domain.name!r}>"


class LibraryClass:
    """The library's class as an engine that does not override it reaches it.

    Everything reached through it runs as the engine's own code: calling it
    constructs the library's class inside a ``using_engine`` block of
    ``engine`` (so the candidates its ``__init__`` calls are the engine's too),
    and so do its classmethods and staticmethods, whatever engine the caller's
    context runs. ``isinstance(obj, self.Batch)`` and ``issubclass`` answer as
    the marked class does (true for every engine's implementation); it equals
    the marked class, and a class statement deriving from it derives from the
    marked class. Its other attributes are the marked class's own (see
    :func:`~coheriq._call.marked.own_attribute`). ``type(obj) is self.Batch`` is
    false: it stands for the class, it is not the class.

    Args:
        info: The class candidate.
        engine: The engine class whose instance reached it.
    """

    __slots__ = ("engine", "info")

    def __init__(self, info: CandidateInfo, engine: Any) -> None:
        self.info = info
        self.engine = engine

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        construct = self.info.construct
        assert construct is not None  # a class candidate's, set when it was marked
        return _InBlock(construct, self.info.domain, self.engine)(*args, **kwargs)

    def __instancecheck__(self, obj: object) -> bool:
        return isinstance(obj, self.info.reference)

    def __subclasscheck__(self, cls: type) -> bool:
        return issubclass(cls, self.info.reference)

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type]:
        return (self.info.reference,)

    def __getattr__(self, name: str) -> Any:
        cls = self.info.reference
        if name.startswith("__") and name.endswith("__"):  # __name__, __mro__, ...
            return getattr(cls, name)
        value = own_attribute(cls, name)
        for klass in cls.__mro__:
            if name in klass.__dict__:
                if isinstance(klass.__dict__[name], (classmethod, staticmethod)):
                    return _InBlock(value, self.info.domain, self.engine)
                break
        return value

    @property
    def __doc__(self) -> str | None:  # type: ignore[override]
        doc: str | None = self.info.reference.__doc__
        return doc

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LibraryClass):
            return self.info is other.info
        return other is self.info.reference

    def __hash__(self) -> int:
        return hash(self.info.reference)

    def __repr__(self) -> str:
        cls = self.info.reference
        engine = getattr(self.engine, "__coheriq_name__", None) or self.engine.__qualname__
        return (
            f"<class {cls.__module__}.{cls.__qualname__}, constructed as it is by engine "
            f"{engine!r}>"
        )


class _InBlock:
    """Library code reached through an engine: runs in a block of that engine.

    A coroutine, generator or async generator it returns runs its body in a
    block too, each time it resumes (see :func:`coheriq._stdlib.generator_inside`),
    and what its consumer sends, throws or closes reaches it as through
    ``yield from``. While the engine itself is starting (its ``__init__``
    reaching ``self.Batch``), there is no block to enter yet: the code runs as
    called.
    """

    __slots__ = ("domain", "engine", "method")

    def __init__(self, method: Any, domain: Any, engine: Any) -> None:
        self.method = method
        self.domain = domain
        self.engine = engine

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.domain.engines.starting_here(self.engine):
            return self.method(*args, **kwargs)
        with self._block():
            result = self.method(*args, **kwargs)

        def started() -> Any:  # what the drivers below start: the result itself
            return result

        if hasattr(result, "cr_code"):  # an async def's coroutine
            return calls_inside(started, self._block, coroutine=True)()
        if hasattr(result, "gi_code"):  # a generator function's generator
            return generator_inside(started, self._block)()
        if hasattr(result, "ag_code"):  # an async generator function's generator
            return async_generator_inside(started, self._block)()
        return result

    def _block(self) -> _Block:
        return _Block(self.domain.scopes, self.engine)

    def __getattr__(self, name: str) -> Any:  # __doc__, __name__, __wrapped__, ...
        return getattr(self.method, name)

    def __repr__(self) -> str:
        return f"<{self.method!r}, run in a block of engine {self.engine!r}>"


class _Block:
    """A ``using_engine`` block of ``engine``, entered and left as a context manager."""

    __slots__ = ("engine", "scope", "scopes")

    def __init__(self, scopes: Any, engine: Any) -> None:
        self.scopes = scopes
        self.engine = engine

    def __enter__(self) -> None:
        self.scope = self.scopes.enter(self.engine)

    def __exit__(self, *exc: object) -> None:
        self.scopes.exit(self.scope)
