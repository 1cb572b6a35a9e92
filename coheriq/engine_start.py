"""One engine's start, which other threads wait for, and the wait that could never end.

The first thread that needs an engine runs its ``__init__``; every other thread
that needs it meanwhile waits for that start (:meth:`EngineStart.wait`). That
wait ends when ``__init__`` returns, unless ``__init__`` itself waits for the
waiting thread: an engine that warms up in a worker thread which calls the
library (``Thread(target=...).start(); join()``, ``pool.submit(...).result()``)
would wait for its worker for ever, and the worker for it. A call from
``__init__``'s own thread is refused at once (see
:meth:`coheriq.engines.Engines.members_of`); a waiting thread is refused when
it finds, looking every :data:`POLL_SECONDS`, that:

* the starting thread is blocked in a wait of the standard library's
  (:mod:`threading`, :mod:`queue`, :mod:`concurrent.futures`), and
* what it waits for is this thread or the future this thread runs (a join, a
  ``result()``), or this thread runs code of the engine being started (a
  method of its class, a function defined in one), which only the start can
  have set going.

A thread of the program's own, one that a pool started while the engine was
starting say, runs no code of the engine and is waited for by no start: it
waits as long as the start takes, and then runs on the engine.
"""

from __future__ import annotations

import _thread
import sys

from ._stdlib import TYPE_CHECKING
from .exceptions import CoheriqEngineError

if TYPE_CHECKING:
    from collections.abc import Iterator
    from types import CodeType, FrameType
    from typing import Any

__all__ = ["POLL_SECONDS", "EngineStart"]

POLL_SECONDS = 0.05
"""How often a thread waiting for a start looks whether the start waits for it."""

# The modules whose functions a thread blocked on another thread is in,
# innermost: a join, a future's result, an event, a queue.
_WAITING_MODULES = frozenset(
    {"threading", "queue", "concurrent.futures._base", "concurrent.futures.thread"}
)


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
        while not self.lock.acquire(True, POLL_SECONDS):
            if self._waits_for_this_thread():
                name = getattr(self.engine_class, "__coheriq_name__", None) or "reference"
                raise CoheriqEngineError(
                    f"Engine {name!r} of domain {self.domain!r} was asked for from a thread "
                    "that its __init__ set going and waits for, before the engine existed: "
                    "the start would wait for the thread and the thread for the start. In "
                    "that thread, call the engine's own implementations (self.name(...)) "
                    "instead of the library, or start the thread after __init__."
                )
        self.lock.release()

    def finish(self) -> None:
        """End the start: every waiting thread goes on."""
        self.lock.release()

    def _waits_for_this_thread(self) -> bool:
        """Whether the starting thread is blocked waiting for this one (see the module doc)."""
        waited = self._waited_for()
        if waited is None:
            return False
        mine = sys._getframe()
        threading = sys.modules.get("threading")
        me = None if threading is None else threading.current_thread()
        if me is not None and any(obj is me for obj in waited):
            return True
        engine_code = self._own_code()
        frame: FrameType | None = mine
        while frame is not None:
            work_item = _work_item(frame)
            if work_item is not None and any(obj is work_item.future for obj in waited):
                return True
            if frame.f_code in engine_code:
                return True
            frame = frame.f_back
        return False

    def _waited_for(self) -> list[Any] | None:
        """What the starting thread waits for, or None where it is not blocked in a wait.

        That is the ``self`` of each of its innermost frames in a waiting module
        (the Thread of a join, the Future of a ``result()``, the Event...), and
        the futures given to :func:`concurrent.futures.wait` or ``as_completed``.
        """
        frame = sys._current_frames().get(self.thread)
        waited: list[Any] = []
        while frame is not None and frame.f_globals.get("__name__") in _WAITING_MODULES:
            local = frame.f_locals
            waited.append(local.get("self"))
            futures = local.get("fs")
            if isinstance(futures, (set, frozenset, list, tuple)):
                waited.extend(futures)
            frame = frame.f_back
        return waited or None

    def _own_code(self) -> frozenset[CodeType]:
        """The code of the engine's own classes: their functions and the functions in those."""
        if self._engine_code is None:
            above = set(self.reference.__mro__)
            own = [klass for klass in self.engine_class.__mro__ if klass not in above]
            self._engine_code = frozenset(
                code for klass in own for value in vars(klass).values() for code in _codes(value)
            )
        return self._engine_code


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
