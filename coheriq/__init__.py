"""coheriq: let a library swap in an accelerated implementation of itself.

A library (the *domain*) marks functions and classes as acceleration candidates; separately
published *engines* re-implement any subset; the user picks an engine with one line, an
environment variable or a ``with`` block, and every call site follows. The tools
(:func:`explain`, :func:`profile`, ...) and declines are imported on first use.

PYTEST_DONT_REWRITE: this package, a pytest plugin's, may be imported before pytest starts.
"""

from . import exceptions

# The module named by pickles of users' subclasses of marked classes: cloudpickle pickles
# such a class by that name only where it is imported.
from . import marked as _marked  # noqa: F401
from ._api.engine_forms import AccelerationEngine, engine_class
from ._api.verbs import (
    active_implementation,
    available_engines,
    enable_engine,
    engine_of,
    import_domain,
    resolve_impl,
    using_engine,
)
from ._call.proxy import proxy_implementation
from ._engines.meta import EngineMeta
from ._library import observing as _observing
from ._library.domain import AccelerationDomain
from ._names import REFERENCE
from ._stdlib import TYPE_CHECKING
from .exceptions import *  # noqa: F403  (the error tree: its __all__)

if TYPE_CHECKING:
    from ._api.data import conversion_engine, mutated, to_engine, to_library
    from ._engines.conversions import Conversion
    from ._engines.crossover import crossover
    from ._engines.declines import Decline, may_decline
    from ._outside.activation import accelerate
    from ._tools.calibration import Calibration, CrossoverRow, Recording, calibrate, record_calls
    from ._tools.introspection import Coverage, Explanation, coverage, explain
    from ._tools.profiling import (
        ConversionRow,
        DeclineRow,
        Profile,
        ProfileRow,
        ProfileShare,
        profile,
    )
    from ._tools.shadow import Shadow, ShadowRow, shadow, shadows
    from ._tools.snapshot import Snapshot, snapshot
    from ._tools.verdicts import (
        CoheriqVerificationError,
        CoheriqVerificationWarning,
        Mismatch,
        VerificationRow,
    )
    from ._tools.verification import Verification, register_comparison, verify
    from .statements import EngineStatement, engine_statements

# Tools imported on first use (see __getattr__): name -> its module.
_ON_FIRST_USE = {
    name: module
    for module, names in {
        "_outside.activation": "accelerate",
        "_api.data": "conversion_engine mutated to_engine to_library",
        "_engines.conversions": "Conversion",
        "_engines.crossover": "crossover",
        "_tools.calibration": "Calibration CrossoverRow Recording calibrate record_calls",
        "_engines.declines": "Decline may_decline",
        "_tools.introspection": "Coverage Explanation coverage explain",
        "_tools.profiling": "ConversionRow DeclineRow Profile ProfileRow ProfileShare profile",
        "_tools.shadow": "Shadow ShadowRow shadow shadows",
        "_tools.snapshot": "Snapshot snapshot",
        "statements": "EngineStatement engine_statements",
        "_tools.verdicts": "CoheriqVerificationError CoheriqVerificationWarning Mismatch "
        "VerificationRow",
        "_tools.verification": "Verification register_comparison verify",
    }.items()
    for name in names.split()
}

__all__ = [
    "REFERENCE",
    "AccelerationDomain",
    "AccelerationEngine",
    "Calibration",
    "CoheriqVerificationError",
    "CoheriqVerificationWarning",
    "Conversion",
    "ConversionRow",
    "Coverage",
    "CrossoverRow",
    "Decline",
    "DeclineRow",
    "EngineMeta",
    "EngineStatement",
    "Explanation",
    "Mismatch",
    "Profile",
    "ProfileRow",
    "ProfileShare",
    "Recording",
    "Shadow",
    "ShadowRow",
    "Snapshot",
    "Verification",
    "VerificationRow",
    "accelerate",
    "active_implementation",
    "available_engines",
    "calibrate",
    "conversion_engine",
    "coverage",
    "crossover",
    "enable_engine",
    "engine_class",
    "engine_of",
    "engine_statements",
    "explain",
    "import_domain",
    "may_decline",
    "mutated",
    "profile",
    "proxy_implementation",
    "record_calls",
    "register_comparison",
    "resolve_impl",
    "shadow",
    "shadows",
    "snapshot",
    "to_engine",
    "to_library",
    "using_engine",
    "verify",
]
__all__ += exceptions.__all__

__version__ = "0.1.0"


def _watch_from_environment(domain: AccelerationDomain) -> None:
    """Verify a materialized domain whose ``<PREFIX>_VERIFY`` is set, or shadow it where
    ``COHERIQ_SHADOW`` is (each tool imported only now)."""
    import os

    if domain.env_prefix and os.environ.get(f"{domain.env_prefix}_VERIFY", "").strip():
        from ._tools.verification import from_environment

        from_environment(domain)
    if os.environ.get("COHERIQ_SHADOW", "").strip():
        from ._tools import shadow

        shadow.from_environment(domain)


_observing.on_materialized.append(_watch_from_environment)


def __getattr__(name: str) -> object:
    """Import the module of a tool the first time the tool is asked for."""
    module = _ON_FIRST_USE.get(name)
    if module is None:
        raise AttributeError(f"module 'coheriq' has no attribute {name!r}")
    value = getattr(__import__(f"coheriq.{module}", fromlist=[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def _accelerate_from_environment() -> None:
    """Accelerate what ``COHERIQ_ACCELERATE`` names, unless the start-up file did in this
    process (it does not run under ``python -S`` or without coheriq's ``.pth`` installed)."""
    import sys

    # Not by importing activation: where the start-up ran, another thread may be importing
    # it, waiting for this one.
    startup = sys.modules.get("coheriq._outside.startup")
    if startup is not None and startup.has_started():
        return
    from ._outside.activation import from_environment

    from_environment()


if __import__("os").environ.get("COHERIQ_ACCELERATE"):
    _accelerate_from_environment()
