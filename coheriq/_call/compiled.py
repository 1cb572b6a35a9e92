"""Whether this process runs coheriq's compiled part (``coheriq/_cproxy.c``), decided at import.

``compiled`` is its module, or None where the pure-Python reference does its work;
``set_code`` and ``set_dispatcher`` its code swaps, or None; ``share``, on a
free-threaded build, what keeps threads from queuing on an object's reference count.
"""

from __future__ import annotations

import sys
from os import environ as _environ

from .._stdlib import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import CodeType, FunctionType
    from typing import Any


COMPILED_VERSION = 9  # the VERSION of coheriq/_cproxy.c that this package drives


def load() -> tuple[Any, str]:
    """The compiled part's module (or None), and why coheriq uses the proxy it does.

    Used wherever it was built, unless ``COHERIQ_PURE_PYTHON=1``.
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
    name = "coheriq._cproxy"
    try:
        __import__(name)  # not `from . import`: that says "circular import" when it is missing
    except ModuleNotFoundError:  # an install without a compiler
        return None, "python (the compiled proxy is not built here)"
    except ImportError as error:  # built, but not loadable by this interpreter
        return None, f"python (the compiled proxy could not be loaded: {error})"
    _cproxy = sys.modules[name]
    if getattr(_cproxy, "VERSION", None) != COMPILED_VERSION:  # an editable install's old build
        return None, (
            f"python (the compiled proxy at {_cproxy.__file__} was built from another "
            "version of coheriq's source: reinstall coheriq to rebuild it)"
        )
    return _cproxy, "compiled"


compiled, IMPLEMENTATION = load()

# set_code(function, code) assigns function.__code__ and gives the function the code's
# version, as a `def` would, so that CPython 3.13+ specializes its calls again.
set_code: Callable[[FunctionType, CodeType], None] | None = getattr(compiled, "set_code", None)

# set_dispatcher(function, code) assigns a trampoline whose last constant is a compiled
# proxy, which calls of the function then call from C. Not on 3.11, whose interpreter
# runs a function's code whatever its vectorcall.
set_dispatcher: Callable[[FunctionType, CodeType], None] | None = getattr(
    compiled, "set_dispatcher", None
)

# share(obj) lets every thread use obj, just made by this thread, without writing its
# reference count: deferred reference counting (on free-threaded 3.13, as that
# interpreter gives a module's functions: immortal once a second thread starts).
# Free-threaded builds only.
share: Callable[[object], bool] | None = getattr(compiled, "share", None)
