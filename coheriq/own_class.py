"""What an engine's own code reaches as ``self.<ClassCandidate>``.

Inside an engine, which implementation ``self.Batch`` stands for is decided by
the engine's MRO, like every other attribute, never by the context that calls
the engine's code. An engine that overrides the class candidate has its class
in its own body, and ``self.Batch`` is that class. One that does not inherits
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

from ._stdlib import TYPE_CHECKING
from .marked import own_attribute

if TYPE_CHECKING:
    from typing import Any

    from .proxy import CandidateInfo

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

    Calling it constructs the library's class, whatever engine the caller's
    context runs; ``isinstance(obj, self.Batch)`` and ``issubclass`` answer as
    the marked class does (so they are true for every engine's implementation);
    every other attribute is the marked class's own (see
    :func:`~coheriq.marked.own_attribute`), a classmethod run inside a
    ``using_engine`` block of ``engine``.

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
        return construct(*args, **kwargs)

    def __instancecheck__(self, obj: object) -> bool:
        return isinstance(obj, self.info.reference)

    def __subclasscheck__(self, cls: type) -> bool:
        return issubclass(cls, self.info.reference)

    def __getattr__(self, name: str) -> Any:
        cls = self.info.reference
        value = own_attribute(cls, name)
        if any(isinstance(k.__dict__.get(name), classmethod) for k in cls.__mro__):
            return _InBlock(value, self.info.domain, self.engine)
        return value

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LibraryClass):
            return self.info is other.info and self.engine is other.engine
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.info.name, self.engine))

    def __repr__(self) -> str:
        cls = self.info.reference
        engine = getattr(self.engine, "__coheriq_name__", None) or self.engine.__qualname__
        return (
            f"<class {cls.__module__}.{cls.__qualname__}, constructed as it is by engine "
            f"{engine!r}>"
        )


class _InBlock:
    """A library classmethod reached through an engine: runs in a block of that engine."""

    __slots__ = ("domain", "engine", "method")

    def __init__(self, method: Any, domain: Any, engine: Any) -> None:
        self.method = method
        self.domain = domain
        self.engine = engine

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        scopes = self.domain.scopes
        scope = scopes.enter(self.engine)
        try:
            return self.method(*args, **kwargs)
        finally:
            scopes.exit(scope)

    def __getattr__(self, name: str) -> Any:  # __doc__, __name__, __wrapped__, ...
        return getattr(self.method, name)

    def __repr__(self) -> str:
        return f"<{self.method!r}, run in a block of engine {self.engine!r}>"
