"""Stand-ins for the standard-library modules that ``import coheriq`` must not import.

``import coheriq`` happens in every program that imports an accelerated library,
so it must not import :mod:`typing` (several milliseconds, with ``re`` and
``contextlib`` behind it), :mod:`types` or :mod:`logging`:

- typing: annotations are strings (``from __future__ import annotations``),
  type-only names are imported under ``if TYPE_CHECKING:``, and :func:`overload`
  has the run-time effect of :func:`typing.overload` (the last, real definition
  replaces the overloads);
- types: the two types coheriq needs, taken from objects at hand;
- logging: :func:`log` sends to ``logging.getLogger("coheriq")`` only if the
  program has imported logging and enabled the level, so coheriq is silent unless
  the application configures logging. Nothing is logged per call: INFO when a
  domain settles or an engine is loaded, DEBUG when a scope is entered or left.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import overload
else:

    def overload(fn):
        """Return ``fn``: the overloads exist for type checkers only."""
        return fn


if TYPE_CHECKING:
    from typing import Any

if TYPE_CHECKING:
    from types import FunctionType, MappingProxyType, MemberDescriptorType
else:
    # The types module's own definitions, from objects at hand.
    FunctionType = type(overload)
    MappingProxyType = type(type.__dict__)
    MemberDescriptorType = type(FunctionType.__globals__)

__all__ = [
    "DEBUG",
    "INFO",
    "TYPE_CHECKING",
    "FunctionType",
    "MappingProxyType",
    "MemberDescriptorType",
    "caller_outside_coheriq",
    "log",
    "outside_coheriq",
    "overload",
]

DEBUG = 10
INFO = 20


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
        logger.log(level, message, *args)


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
        module = frame.f_globals.get("__name__", "")
        if not (module in ("coheriq", "types") or module.startswith("coheriq.")):
            return f"{frame.f_code.co_filename}:{frame.f_lineno}", level
        frame, level = frame.f_back, level + 1  # type: ignore[assignment]
    return "<unknown>", level


def caller_outside_coheriq() -> Any:
    """The innermost frame, seen from the caller of this function, that is not coheriq's.

    As :func:`outside_coheriq` finds it; ``None`` if there is none.
    """
    frame = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if not (module in ("coheriq", "types") or module.startswith("coheriq.")):
            return frame
        frame = frame.f_back  # type: ignore[assignment]
    return None
