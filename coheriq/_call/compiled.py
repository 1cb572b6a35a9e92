"""coheriq's optional compiled part, ``coheriq/_cproxy.c``: whether this process runs it.

Loaded once, when coheriq is imported. Where it is built (and
``COHERIQ_PURE_PYTHON=1`` does not turn it off), :mod:`coheriq._call.proxy`
makes its compiled dispatchers, and :mod:`coheriq._call.swapped` swaps a marked
function's code with :func:`set_code` (which CPython 3.13+ specializes again)
and :func:`set_dispatcher` (calls then dispatch in C, with no trampoline
frame); elsewhere the pure-Python code, the reference, does the same work a
little slower.
"""

from __future__ import annotations

import sys
from os import environ as _environ

from .._stdlib import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import CodeType, FunctionType
    from typing import Any

__all__ = [
    "COMPILED_VERSION",
    "IMPLEMENTATION",
    "compiled",
    "load",
    "set_code",
    "set_dispatcher",
]

# The VERSION of coheriq/_cproxy.c that this package drives.
COMPILED_VERSION = 7


def load() -> tuple[Any, str]:
    """The compiled part's module (or None), and why coheriq uses the proxy it does.

    The compiled part is used wherever it was built, unless
    ``COHERIQ_PURE_PYTHON=1``; the pure-Python code is the reference and the
    fallback.
    """
    setting = _environ.get("COHERIQ_PURE_PYTHON", "")
    if setting not in ("", "0"):
        if setting != "1":
            import warnings  # only for a mistyped setting

            warnings.warn(
                f"COHERIQ_PURE_PYTHON={setting!r} is neither '1' (use the pure-Python proxy) "
                "nor '0' (use the compiled proxy where it is built); coheriq uses the "
                "pure-Python proxy. Set it to '1' or '0'.",
                RuntimeWarning,
                stacklevel=2,
            )
        return None, "python (COHERIQ_PURE_PYTHON is set)"
    name = "coheriq._cproxy"  # built beside coheriq/__init__.py (hatch_build.py)
    try:
        __import__(name)  # not `from . import`: that says "circular import" when it is missing
    except ModuleNotFoundError:  # an install without a compiler, a free-threaded CPython
        return None, "python (the compiled proxy is not built here)"
    except ImportError as error:  # built, but not loadable by this interpreter
        return None, f"python (the compiled proxy could not be loaded: {error})"
    _cproxy = sys.modules[name]
    if getattr(_cproxy, "VERSION", None) != COMPILED_VERSION:
        # An editable install whose extension was built from older source.
        return None, (
            f"python (the compiled proxy at {_cproxy.__file__} was built from another "
            "version of coheriq's source: reinstall coheriq to rebuild it)"
        )
    return _cproxy, "compiled"


compiled, IMPLEMENTATION = load()


# set_code(function, code): function.__code__ = code, which also gives the function its
# new code's version, as a `def` would, so that CPython 3.13+ specializes its calls again:
# an assignment alone leaves them generic for good (see _cproxy.c). None without the
# compiled part, where the assignment is all there is.
set_code: Callable[[FunctionType, CodeType], None] | None = getattr(compiled, "set_code", None)

# set_dispatcher(function, code): function.__code__ = code, a trampoline to a compiled
# proxy, its last constant, which calls of the function then call from C, with no frame
# of the trampoline's. None without the compiled part, and on CPython 3.11, whose
# interpreter runs a function's code whatever its vectorcall (_cproxy.c leaves it out).
set_dispatcher: Callable[[FunctionType, CodeType], None] | None = getattr(
    compiled, "set_dispatcher", None
)
