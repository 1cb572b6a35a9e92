"""Stand-ins for the standard-library modules that ``import coheriq`` must not import.

typing (type-only names under ``TYPE_CHECKING``; :func:`overload`), types (taken from objects
at hand), logging (:func:`log` is silent unless the program imported logging and enabled the
level), inspect and annotationlib (imported when a signature or annotations are asked for);
and the helpers built on them: fork hooks, code flags, block-scoped call drivers, frame walkers.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextvars import ContextVar
    from types import FrameType
    from types import FunctionType as FunctionType
    from types import MappingProxyType as MappingProxyType
    from types import MemberDescriptorType as MemberDescriptorType
    from types import MethodType as MethodType
    from typing import Any
    from typing import overload as overload
else:

    def overload(fn):
        """Return ``fn``: the overloads exist for type checkers only."""
        return fn

    # As the types module defines them.
    FunctionType = type(overload)
    MappingProxyType = type(type.__dict__)
    MemberDescriptorType = type(FunctionType.__globals__)
    MethodType = type(overload.__get__(object()))  # a function bound to an object

DEBUG = 10
INFO = 20
WARNING = 30

_fork_hooks: list[Callable[[], None]] = []


def after_fork_in_child(hook: Callable[[], None]) -> Callable[[], None]:
    """Run ``hook()`` in a child process right after ``os.fork()``; return ``hook``.

    For a module to replace its locks, which a thread that the child lacks may have held.
    Hooks run in the order added: the order their modules are imported in, lower layers first.
    """
    _fork_hooks.append(hook)
    return hook


def _run_fork_hooks() -> None:
    for hook in _fork_hooks:
        hook()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_run_fork_hooks)

# The inspect module's code-object flags, without importing inspect.
CO_VARARGS = 0x04
CO_VARKEYWORDS = 0x08
CO_GENERATOR = 0x20
CO_COROUTINE = 0x80
CO_ASYNC_GENERATOR = 0x200


def calls_inside(fn: Any, block: Callable[[], Any], *, coroutine: bool) -> Any:
    """Return ``fn`` wrapped so that each call runs inside a ``with block():`` statement.

    With ``coroutine``, the wrapper is a coroutine function and the block spans the whole
    ``await``. Not for generator functions (see :func:`generator_inside`).
    """
    import functools  # here, not at the top: it imports collections

    if coroutine:

        @functools.wraps(fn)
        async def inside_coroutine(*args: Any, **kwargs: Any) -> Any:
            with block():
                return await fn(*args, **kwargs)

        return inside_coroutine

    @functools.wraps(fn)
    def inside(*args: Any, **kwargs: Any) -> Any:
        with block():
            return fn(*args, **kwargs)

    return inside


def generator_inside(start: Callable[..., Any], block: Callable[[], Any]) -> Callable[..., Any]:
    """Return a generator function that drives ``start(*args, **kwargs)``'s generator as
    ``yield from`` would, each step (resumption to ``yield``; a send, throw or close) inside
    a ``with block():`` of its own, so that its consumer runs outside."""

    def inside_generator(*args: Any, **kwargs: Any) -> Any:
        steps = start(*args, **kwargs)
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                with block():
                    item = steps.throw(error) if error else steps.send(value)
            except StopIteration as stop:
                return stop.value
            try:
                value, error = (yield item), None
            except GeneratorExit:
                with block():
                    steps.close()
                raise
            except BaseException as exc:  # thrown in by the consumer: pass it on
                value, error = None, exc

    return inside_generator


def async_generator_inside(
    start: Callable[..., Any], block: Callable[[], Any]
) -> Callable[..., Any]:
    """Return an async generator function: :func:`generator_inside` for async generators."""

    async def inside_async_generator(*args: Any, **kwargs: Any) -> Any:
        steps = start(*args, **kwargs)
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                with block():
                    item = await (steps.athrow(error) if error else steps.asend(value))
            except StopAsyncIteration:
                return
            try:
                value, error = (yield item), None
            except GeneratorExit:
                with block():
                    await steps.aclose()
                raise
            except BaseException as exc:  # thrown in by the consumer: pass it on
                value, error = None, exc

    return inside_async_generator


def leave_chain(chain: ContextVar[tuple[Any, ...]], member: object) -> None:
    """Remove ``member``'s innermost entry, if any, from ``chain``'s tuple (outermost first;
    a member may be in it more than once)."""
    entries = chain.get()
    if member in entries:
        last = len(entries) - 1 - entries[::-1].index(member)
        chain.set(entries[:last] + entries[last + 1 :])


def code_flags(function: object) -> int:
    """The flags of ``function``'s code object; 0 for one without code (a builtin, a class)."""
    return getattr(getattr(function, "__code__", None), "co_flags", 0)


_logger = None  # logging.getLogger("coheriq"), once the program has imported logging


def log(level: int, message: str, *args: object) -> None:
    """Log ``message % args`` at ``level`` on the "coheriq" logger, if anyone listens."""
    global _logger
    logger = _logger
    if logger is None:
        logging = sys.modules.get("logging")
        if logging is None or getattr(logging.__spec__, "_initializing", False):
            return  # not imported, or another thread is importing it: nobody listens yet
        # Kept: getLogger takes logging's lock, and blocks log on entry and exit.
        logger = _logger = logging.getLogger("coheriq")
    if logger.isEnabledFor(level):
        logger.log(level, message, *args, stacklevel=2)  # the record names our caller


def outside_coheriq() -> tuple[str, int]:
    """``("FILE:LINE", stacklevel)`` of the code that called into coheriq, seen from the
    caller of this function (see :func:`caller_outside_coheriq`); ``stacklevel`` makes
    ``warnings.warn``, called by that caller, point there."""
    frame, level = _outside(sys._getframe(1))
    if frame is None:
        return "<unknown>", level
    return f"{frame.f_code.co_filename}:{frame.f_lineno}", level


def caller_outside_coheriq() -> Any:
    """The innermost frame, seen from the caller of this function, that runs neither
    coheriq's code (its modules, a proxy or trampoline) nor :func:`types.new_class` (which
    builds decorator-form engines); ``None`` if there is none."""
    return _outside(sys._getframe(1))[0]


# The local names only the code-swapped proxies' trampolines have (coheriq._call.swapped):
# those run in the library's globals, so their module's name cannot tell them.
_TRAMPOLINE_LOCALS = ("_coheriq_scope", "_coheriq_target")


def _outside(frame: FrameType | None) -> tuple[FrameType | None, int]:
    level = 1
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        varnames = frame.f_code.co_varnames
        if not (
            module in ("coheriq", "types")
            or module.startswith("coheriq.")
            or any(name in varnames for name in _TRAMPOLINE_LOCALS)
        ):
            break
        frame, level = frame.f_back, level + 1
    return frame, level


def carry_annotations(target: Any, source: Any) -> None:
    """Give ``target`` the annotations of ``source``, evaluated no sooner than source's.

    From 3.14 (PEP 649) ``target`` gets an ``__annotate__`` that answers each format from
    ``source``, so that asking either fails or succeeds alike; before, a copy of the dict.
    """
    if sys.version_info >= (3, 14):
        target.__annotate__ = _AnnotationsOf(source)
    else:
        target.__annotations__ = dict(getattr(source, "__annotations__", None) or {})


class _AnnotationsOf:
    """An ``__annotate__`` function that answers with another object's annotations."""

    __slots__ = ("source",)

    def __init__(self, source: Any) -> None:
        self.source = source

    def __call__(self, format: int) -> dict[str, Any]:
        import annotationlib  # type: ignore[import-not-found, unused-ignore]  # 3.14+

        if format == annotationlib.Format.VALUE_WITH_FAKE_GLOBALS:
            # Not code that can run with fake globals: annotationlib then asks for the
            # format it wants directly.
            raise NotImplementedError
        return dict(annotationlib.get_annotations(self.source, format=format))

    def __repr__(self) -> str:
        return f"<annotations of {self.source!r}>"


def signature(obj: Any, **options: Any) -> Any:
    """:func:`inspect.signature`, reading an annotation that names what is not defined yet
    (3.14) as a forward reference; an error other than :class:`TypeError` comes out as
    :class:`ValueError`, which a caller asking "has it a signature?" handles."""
    import inspect

    if sys.version_info >= (3, 14):
        import annotationlib  # type: ignore[import-not-found, unused-ignore]

        options.setdefault("annotation_format", annotationlib.Format.FORWARDREF)
    try:
        return inspect.signature(obj, **options)
    except (TypeError, ValueError):
        raise
    except Exception as error:
        raise ValueError(f"no signature could be computed for {obj!r}: {error}") from error
