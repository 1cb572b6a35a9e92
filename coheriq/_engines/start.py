"""An engine's start: its ``__init__``, run once in a block of its own, while others wait.

:meth:`EngineStart.wait` refuses a thread that the start itself waits for,
which would otherwise wait for ever (the design FAQ says how it tells).
"""

from __future__ import annotations

import _thread
import sys

from .._choice.blocks import Scope, Starting
from .._names import REFERENCE
from .._stdlib import TYPE_CHECKING
from ..exceptions import CoheriqEngineError, CoheriqEngineStartError, ended
from .meta import refusal

if TYPE_CHECKING:
    from collections.abc import Iterator
    from types import CodeType, FrameType
    from typing import Any

    from .._choice.state import DomainState

POLL_SECONDS = 0.05  # how often a thread waiting for a start looks whether it waits for that thread


def runs_no_code(cls: type) -> bool:
    """Whether instantiating ``cls`` runs no code of its own (no ``__init__``/``__new__``)."""
    return cls.__init__ is object.__init__ and cls.__new__ is object.__new__  # type: ignore[misc,comparison-overlap]


def instantiate(state: DomainState, cls: Any) -> Any:
    """Make the one instance of engine class ``cls``, its ``__init__`` in a block whose
    calls never make the global choice (:class:`~coheriq._choice.blocks.Starting`).

    Raises:
        CoheriqEngineStartError: The engine is refused, or its ``__init__`` raised.
    """
    engine = cls.__coheriq_name__ or REFERENCE
    # Refused by a candidate marked after the engine was defined (meta's code runs only then).
    if any("__coheriq_refused__" in vars(klass) for klass in cls.__mro__):
        refused = refusal(cls)
        if refused is not None:
            raise CoheriqEngineStartError(refused)
    if runs_no_code(cls):  # the reference, or an engine without state
        return cls()
    scopes = state.scopes
    around = scopes.live()
    starting = Scope(engine, {}, around, state)
    starting.members = Starting(state, engine, around)
    scopes.open(starting)
    try:
        return cls()
    except Exception as exc:
        raise CoheriqEngineStartError(
            f"Engine {engine!r} of domain {state.name!r} failed to start: its __init__ raised "
            f"{type(exc).__name__}: {ended(exc)} Nothing was changed; fix the engine's "
            "set-up or choose another engine."
        ) from exc
    finally:
        # exit, not close: a task its __init__ created falls through to the context around.
        scopes.exit(starting)


class EngineStart:
    """An engine being started by one thread (:attr:`thread`); others :meth:`wait` for it.
    ``reference``: the domain's reference class (the code above it is not the engine's)."""

    __slots__ = ("_engine_code", "domain", "engine_class", "lock", "reference", "thread")

    def __init__(self, engine_class: type, reference: type, domain: str) -> None:
        self.engine_class = engine_class
        self.reference = reference
        self.domain = domain
        self.thread = _thread.get_ident()
        self.lock = _thread.allocate_lock()
        self.lock.acquire()
        self._engine_code: frozenset[CodeType] | None = None

    def wait(self) -> None:
        """Return when the start has ended, however it ended; a CoheriqEngineError where the
        start waits for this thread."""
        me = _thread.get_ident()
        # A signal handler that interrupts this wait may wait too: it puts back what it found.
        outer = _waiting.get(me)
        _waiting[me] = self
        try:
            while not self.lock.acquire(True, POLL_SECONDS):
                if self._waits_for(me):
                    name = getattr(self.engine_class, "__coheriq_name__", None) or "reference"
                    raise CoheriqEngineError(
                        f"Engine {name!r} of domain {self.domain!r} was asked for from a "
                        "thread that its __init__ set going and waits for (maybe through "
                        "another engine's start), before the engine existed: the start "
                        "would wait for the thread and the thread for the start. In that "
                        "thread, call the engine's own implementations (self.name(...)) "
                        "instead of the library, or start the thread after __init__."
                    )
        finally:
            if outer is None:
                _waiting.pop(me, None)
            else:
                _waiting[me] = outer
        self.lock.release()

    def finish(self) -> None:
        """End the start: every waiting thread goes on."""
        self.lock.release()

    def _waits_for(self, me: int) -> bool:
        """Whether this start waits for thread ``me``, directly or through other starts."""
        frames = sys._current_frames()
        seen: set[int] = set()
        starts = [self]
        while starts:
            start = starts.pop()
            if start.thread in seen:
                continue
            seen.add(start.thread)
            for thread in start._awaited(frames):
                if thread == me:
                    return True
                further = _waiting.get(thread)
                if further is not None:
                    starts.append(further)
        return False

    def _awaited(self, frames: dict[int, FrameType]) -> list[int]:
        """The threads the starting thread, blocked in the standard library, waits for: those
        it joins or holds, those that run a future it waits for or the engine's code."""
        waited = _waited_for(frames.get(self.thread))
        if not waited:
            return []
        awaited = [thread.ident for obj in waited for thread in _threads_in(obj) if thread.ident]
        if self._engine_code is None:  # the functions of the engine's own classes, and nested
            above = set(self.reference.__mro__)
            own = [klass for klass in self.engine_class.__mro__ if klass not in above]
            self._engine_code = frozenset(
                code for klass in own for value in vars(klass).values() for code in _codes(value)
            )
        for thread, frame in frames.items():
            if thread == self.thread:
                continue
            for caller in _outwards(frame):
                work_item = _work_item(caller)
                if caller.f_code in self._engine_code or (
                    work_item is not None and any(obj is work_item.future for obj in waited)
                ):
                    awaited.append(thread)
                    break
        return awaited


_waiting: dict[int, EngineStart] = {}  # thread -> the start it waits for now


def _waited_for(frame: FrameType | None) -> list[Any]:
    """What a thread whose innermost frame is ``frame`` is blocked waiting for: the ``self``
    of each innermost frame in the standard library, and the futures given to ``wait``."""
    waited: list[Any] = []
    stdlib = sys.stdlib_module_names
    for caller in _outwards(frame):
        if (caller.f_globals.get("__name__") or "").partition(".")[0] not in stdlib:
            break
        local = caller.f_locals
        waited.append(local.get("self"))
        futures = local.get("fs")
        if isinstance(futures, (set, frozenset, list, tuple)):
            waited.extend(futures)
    return waited


def _outwards(frame: FrameType | None) -> Iterator[FrameType]:
    """``frame`` and its callers, outwards, as far as they can be read."""
    # Another thread's frames are read while that thread runs. Without a GIL (free-threaded
    # builds) its calls may return meanwhile, and a caller read then can be any object:
    # the walk ends there, and the next poll looks again.
    while isinstance(frame, _FRAME):
        yield frame
        frame = frame.f_back


def _threads_in(obj: Any) -> Iterator[Any]:
    """The threads ``obj`` is or holds directly: a pool's workers, say."""
    threading = sys.modules.get("threading")
    if threading is None:
        return
    if isinstance(obj, threading.Thread):
        yield obj
        return
    for value in getattr(obj, "__dict__", {}).values():
        # Lists and tuples only: iterating them never raises while another thread
        # changes them.
        for item in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(item, threading.Thread):
                yield item


def _work_item(frame: FrameType) -> Any:
    """The work item a thread pool's worker runs in ``frame``, if that is its ``run``."""
    if frame.f_code.co_name != "run" or frame.f_globals.get("__name__") != (
        "concurrent.futures.thread"
    ):
        return None
    item = frame.f_locals.get("self")
    return item if hasattr(item, "future") else None


def _codes(value: Any) -> Iterator[CodeType]:
    """The code of a class attribute (a function, maybe wrapped) and the code nested in it."""
    for function in (
        getattr(value, "__func__", None),  # classmethod, staticmethod
        getattr(value, "fget", None),  # property
        getattr(value, "func", None),  # partialmethod, singledispatchmethod...
        getattr(value, "__wrapped__", None),
        value,
    ):
        code = getattr(function, "__code__", None)
        if code is not None:
            yield from _nested(code)


_CODE = type(_codes.__code__)
_FRAME = type(sys._getframe())


def _nested(code: CodeType) -> Iterator[CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, _CODE):
            yield from _nested(const)
