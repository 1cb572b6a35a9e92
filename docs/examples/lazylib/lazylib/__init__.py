"""lazylib: quick summaries, and model fitting imported on first use.

``import lazylib`` imports ``lazylib.summary`` only; ``lazylib.fitting``, which
needs a heavy dependency, is imported when ``lazylib.fit`` or ``lazylib.Model``
is first used (SPEC 1, as lazy_loader's ``attach`` does it).
"""

import importlib

import coheriq

domain = coheriq.AccelerationDomain("lazylib", env_prefix="LAZYLIB")

# 1. The candidates of the modules imported lazily: names, kinds and module.
domain.declare("lazylib.fitting", functions=["fit"], classes=["Model"])

# 2. The modules imported eagerly mark theirs.
from lazylib.summary import spread  # noqa: E402

# 3. Materialize: engines may now override spread, fit and Model.
domain.materialize()

_lazy = {"fit": "lazylib.fitting", "Model": "lazylib.fitting"}
__all__ = ["Model", "domain", "fit", "spread"]


def __getattr__(name: str) -> object:
    """Import a lazily loaded submodule on the first use of one of its names."""
    if name in _lazy:
        return getattr(importlib.import_module(_lazy[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
