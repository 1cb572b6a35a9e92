"""One engine's start, which other threads wait for, and the wait that could never end.

The first thread that needs an engine runs its ``__init__``; every other thread
that needs it meanwhile waits for that start (:meth:`EngineStart.wait`). That
wait ends when ``__init__`` returns, unless ``__init__`` itself waits for the
waiting thread: an engine that warms up in a worker thread which calls the
library (``Thread(target=...).start(); join()``, ``pool.submit(...).result()``)
would wait for its worker for ever, and the worker for it. A call from
``__init__``'s own thread is refused at once (see
:meth:`coheriq._engines.registry.Engines.members_of`); a waiting thread is refused when
it finds, looking every :data:`POLL_SECONDS`, that:

* the starting thread is blocked in the standard library (a join, a future's
  ``result()``, an event, a queue, a pool's ``apply()``...), and
* what it waits for is this thread, or holds it (the worker threads of a
  ``multiprocessing.pool`` pool), or is the future this thread runs, or
  this thread runs code of the engine being started (a method of its class, a
  function defined in one), which only the start can have set going; or what
  it waits for is a thread that waits for another start, and so on, back to
  this thread (two engines whose starts wait for each other's warm-up threads).

A thread of the program's own, one that a pool started while the engine was
starting say, runs no code of the engine and is waited for by no start: it
waits as long as the start takes, and then runs on the engine.
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

__all__ = ["POLL_SECONDS", "EngineStart", "instantiate", "runs_no_code"]

POLL_SECONDS = 0.05
"""How often a thread waiting for a start looks whether the start waits for it."""


def runs_no_code(cls: type) -> bool:
    """Whether instantiating ``cls`` runs no code of its own (no ``__init__``/``__new__``)."""
    return cls.__init__ is object.__init__ and cls.__new__ is object.__new__  # type: ignore[misc,comparison-overlap]


def instantiate(state: DomainState, cls: Any) -> Any:
    """Make the one instance of engine class ``cls`` of the domain whose state is ``state``.

    Its ``__init__`` runs inside a block of its own engine whose members refuse to
    be called (:class:`~coheriq._choice.blocks.Starting`): a call into the domain
    from there says what to do, and never makes the global choice.

    Raises:
        CoheriqEngineStartError: The engine is refused, or its ``__init__`` raised.
    """
    engine = cls.__coheriq_name__ or REFERENCE
    # Refused by a candidate marked after the engine was defined (rare: looked up only
    # where some class of the engine's holds a refusal).
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
        # exit, not only close: a task or context copied during the start (an asyncio
        # task its __init__ created) then falls through to the context around it.
        scopes.exit(starting)


class EngineStart:
    """An engine being started by one thread (:attr:`thread`); others :meth:`wait` for it.

    Args:
        engine_class: The engine class whose ``__init__`` runs.
        reference: Its domain's reference class: what the engine class has
            above it is not the engine's own code.
        domain: The domain's name, for messages.
    """

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
        """Return when the start has ended, however it ended.

        Raises:
            CoheriqEngineError: The start waits for this thread (see the module doc).
        """
        me = _thread.get_ident()
        # A signal handler that interrupts this wait may wait for a start too:
        # it puts back what it found.
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
        """Whether this start waits for thread ``me``, directly or through other starts.

        The threads a start waits for (see :meth:`_awaited`) may themselves wait
        for a start, and so on: a chain that leads back to ``me`` never ends.
        """
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
        """The threads that the starting thread, blocked in a wait, waits for.

        That is, while it is blocked in a waiting module: a thread it joins, a
        thread that runs a future it waits for, and a thread that runs code of
        the engine being started.
        """
        waited = _waited_for(frames.get(self.thread))
        if not waited:
            return []
        awaited = [thread.ident for obj in waited for thread in _threads_in(obj) if thread.ident]
        engine_code = self._own_code()
        for thread, frame in frames.items():
            if thread == self.thread:
                continue
            caller: FrameType | None = frame
            while caller is not None:
                work_item = _work_item(caller)
                if caller.f_code in engine_code or (
                    work_item is not None and any(obj is work_item.future for obj in waited)
                ):
                    awaited.append(thread)
                    break
                caller = caller.f_back
        return awaited

    def _own_code(self) -> frozenset[CodeType]:
        """The code of the engine's own classes: their functions and the functions in those."""
        if self._engine_code is None:
            above = set(self.reference.__mro__)
            own = [klass for klass in self.engine_class.__mro__ if klass not in above]
            self._engine_code = frozenset(
                code for klass in own for value in vars(klass).values() for code in _codes(value)
            )
        return self._engine_code


# Thread -> the start it waits for now.
_waiting: dict[int, EngineStart] = {}


def _in_standard_library(frame: FrameType) -> bool:
    """Whether ``frame`` runs a module of the standard library."""
    module = frame.f_globals.get("__name__") or ""
    return module.partition(".")[0] in sys.stdlib_module_names


def _waited_for(frame: FrameType | None) -> list[Any]:
    """What a thread whose innermost frame is ``frame`` is blocked waiting for, if it is.

    That is the ``self`` of each of its innermost frames in the standard
    library (the Thread of a join, the Future of a ``result()``, the Event, the
    pool of an ``apply()``...), and the futures given to
    :func:`concurrent.futures.wait` or ``as_completed``. Every waiter of the
    standard library is covered this way, not a list of them.
    """
    waited: list[Any] = []
    while frame is not None and _in_standard_library(frame):
        local = frame.f_locals
        waited.append(local.get("self"))
        futures = local.get("fs")
        if isinstance(futures, (set, frozenset, list, tuple)):
            waited.extend(futures)
        frame = frame.f_back
    return waited


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
        # changes them (a set would).
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


def _nested(code: CodeType) -> Iterator[CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, _CODE):
            yield from _nested(const)
