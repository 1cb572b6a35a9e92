"""Stand-ins for the standard-library modules that ``import coheriq`` must not import.

``import coheriq`` happens in every program that imports an accelerated library,
so it must not import :mod:`typing` (several milliseconds, with ``re`` and
``contextlib`` behind it), :mod:`types` or :mod:`logging`:

- typing: annotations are strings (``from __future__ import annotations``),
  type-only names are imported under ``if TYPE_CHECKING:``, and :func:`overload`
  has the run-time effect of :func:`typing.overload` (the last, real definition
  replaces the overloads);
- types: the types coheriq needs, taken from objects at hand;
- logging: :func:`log` sends to ``logging.getLogger("coheriq")`` only if the
  program has imported logging and enabled the level, so coheriq is silent unless
  the application configures logging. Nothing is logged per call: INFO when a
  domain settles or an engine is loaded, DEBUG when a scope is entered or left;
- inspect and annotationlib: imported only when a signature or annotations are
  asked for (:func:`signature`, :func:`carry_annotations`), which also keep 3.14's
  deferred annotations deferred.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import overload
else:

    def overload(fn):
        """Return ``fn``: the overloads exist for type checkers only."""
        return fn


if TYPE_CHECKING:
    from collections.abc import Callable
    from contextvars import ContextVar
    from typing import Any

if TYPE_CHECKING:
    from types import FunctionType, MappingProxyType, MemberDescriptorType, MethodType
else:
    # The types module's own definitions, from objects at hand.
    FunctionType = type(overload)
    MappingProxyType = type(type.__dict__)
    MemberDescriptorType = type(FunctionType.__globals__)

    class _Probe:
        def method(self):
            pass

    MethodType = type(_Probe().method)
    del _Probe

__all__ = [
    "CO_ASYNC_GENERATOR",
    "CO_COROUTINE",
    "CO_GENERATOR",
    "CO_VARARGS",
    "CO_VARKEYWORDS",
    "DEBUG",
    "INFO",
    "TYPE_CHECKING",
    "FunctionType",
    "MappingProxyType",
    "MemberDescriptorType",
    "MethodType",
    "after_fork_in_child",
    "async_generator_inside",
    "caller_outside_coheriq",
    "calls_inside",
    "carry_annotations",
    "code_flags",
    "generator_inside",
    "leave_chain",
    "log",
    "outside_coheriq",
    "overload",
    "signature",
]

DEBUG = 10
INFO = 20

_fork_hooks: list[Callable[[], None]] = []


def after_fork_in_child(hook: Callable[[], None]) -> Callable[[], None]:
    """Run ``hook()`` in a child process right after ``os.fork()``; return ``hook``.

    A thread of the parent may have held one of coheriq's locks when it forked;
    it does not exist in the child, so each module that keeps locks replaces
    them here. The hooks run in the order they were added, which is the order
    their modules are imported in: lower layers first.
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

    contextlib's ``ContextDecorator`` idea, for the blocks that decorate
    (``using_engine``, ``verify``), without importing contextlib. For a coroutine
    function (``coroutine``), the wrapper is one too and the block spans the
    whole ``await``. Generator functions are the caller's to handle: a block
    around the call would end before the generator's body runs.
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
    """Return a generator function that runs ``start``'s generator one step at a time in blocks.

    Each call of the returned function calls ``start(*args, **kwargs)`` and
    drives the generator it returns as ``yield from`` would: from each
    resumption to the next ``yield``, inside a ``with block():`` statement of
    its own, so that its consumer, between steps, runs outside. What the
    consumer sends, throws or closes reaches the generator inside a block too.
    """

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
            value, error = None, None
            try:
                value = yield item
            except GeneratorExit:
                with block():
                    steps.close()
                raise
            except BaseException as exc:  # thrown in by the consumer: pass it on
                error = exc

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
            value, error = None, None
            try:
                value = yield item
            except GeneratorExit:
                with block():
                    await steps.aclose()
                raise
            except BaseException as exc:  # thrown in by the consumer: pass it on
                error = exc

    return inside_async_generator


def leave_chain(chain: ContextVar[tuple[Any, ...]], member: object) -> None:
    """End ``member``'s innermost entry in the chain this context holds, if it has one.

    The profiles and verifications that cover a context are a tuple in a context
    variable, outermost first; one object may be in it more than once (a block
    of it entered inside another).
    """
    entries = chain.get()
    if member in entries:
        last = len(entries) - 1 - entries[::-1].index(member)
        chain.set(entries[:last] + entries[last + 1 :])


def code_flags(function: object) -> int:
    """The flags of ``function``'s code object; 0 for one without code (a builtin, a class)."""
    flags: int = getattr(getattr(function, "__code__", None), "co_flags", 0)
    return flags


_logger = None  # logging.getLogger("coheriq"), once the program has imported logging


def log(level: int, message: str, *args: object) -> None:
    """Log ``message % args`` at ``level`` on the "coheriq" logger, if anyone listens."""
    global _logger
    logger = _logger
    if logger is None:
        logging = sys.modules.get("logging")
        if logging is None:
            return
        # Kept: getLogger takes logging's lock, and blocks log on entry and exit.
        logger = _logger = logging.getLogger("coheriq")
    if logger.isEnabledFor(level):
        logger.log(level, message, *args, stacklevel=2)  # the record names our caller


def outside_coheriq() -> tuple[str, int]:
    """Where the code that called into coheriq is, seen from the caller of this function.

    Returns ``("FILE:LINE", stacklevel)``: the innermost frame that is neither
    coheriq's own code (proxies included: they run in a namespace named
    ``coheriq.proxy``) nor :func:`types.new_class` (which builds decorator-form
    engines), and the ``stacklevel`` that makes ``warnings.warn``, called by the
    caller of this function, point there.
    """
    level, frame = 1, sys._getframe(1)
    while frame is not None:
        if not _of_coheriq(frame):
            return f"{frame.f_code.co_filename}:{frame.f_lineno}", level
        frame, level = frame.f_back, level + 1  # type: ignore[assignment]
    return "<unknown>", level


# The local names only the code-swapped proxies' trampolines have (coheriq._call.swapped):
# those run in the library's globals, so their module's name cannot tell them.
_TRAMPOLINE_LOCALS = ("_coheriq_scope", "_coheriq_target")


def _of_coheriq(frame: Any) -> bool:
    """Whether ``frame`` runs coheriq's code: its own modules, a proxy or trampoline,
    or :func:`types.new_class`."""
    module = frame.f_globals.get("__name__", "")
    if module in ("coheriq", "types") or module.startswith("coheriq."):
        return True
    varnames = frame.f_code.co_varnames
    return any(name in varnames for name in _TRAMPOLINE_LOCALS)


def caller_outside_coheriq() -> Any:
    """The innermost frame, seen from the caller of this function, that is not coheriq's.

    As :func:`outside_coheriq` finds it; ``None`` if there is none.
    """
    frame = sys._getframe(1)
    while frame is not None:
        if not _of_coheriq(frame):
            return frame
        frame = frame.f_back  # type: ignore[assignment]
    return None


def carry_annotations(target: Any, source: Any) -> None:
    """Give ``target`` the annotations of ``source``, evaluated no sooner than source's.

    From Python 3.14 annotations are computed when first asked for (PEP 649): a
    name defined further down the module, or imported only under
    ``TYPE_CHECKING``, is legal in them. ``target`` then gets an ``__annotate__``
    that answers each format (:mod:`annotationlib`) from ``source``, so asking
    either object fails or succeeds alike, and :func:`functools.wraps` over the
    target carries them on. Before 3.14, ``target`` gets a copy of the dict.
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
            # Not code that can run with fake globals: annotationlib then asks for
            # the format it wants directly, which the source answers.
            raise NotImplementedError
        return dict(annotationlib.get_annotations(self.source, format=format))

    def __repr__(self) -> str:
        return f"<annotations of {self.source!r}>"


def signature(obj: Any, **options: Any) -> Any:
    """:func:`inspect.signature`, without evaluating an annotation that cannot be.

    From 3.14 an annotation may name what is not defined yet (see
    :func:`carry_annotations`): such a name reads as a forward reference, as
    :func:`help` shows it, instead of raising :class:`NameError`. Any other error
    that computing the signature raises comes out as :class:`ValueError`, which
    is what a caller asking "has it a signature?" already handles.
    """
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
