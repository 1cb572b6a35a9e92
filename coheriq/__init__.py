"""coheriq: let a library swap in an accelerated implementation of itself.

A library (the *domain*) marks functions and classes as acceleration candidates;
separately published *engines* re-implement any subset as subclasses of the
domain's reference class; the user picks an engine with one line, an environment
variable or a ``with`` block, and every call site follows.

The tools for looking at a program (:func:`explain`, :func:`coverage`,
:func:`profile`, :func:`snapshot`) are imported on first use, so that importing an
accelerated library does not pay for them.
"""

from os import environ as _environ

from ._stdlib import TYPE_CHECKING
from ._validate import REFERENCE
from .activation import (
    active_implementation,
    available_engines,
    enable_engine,
    engine_of,
    import_domain,
    resolve_impl,
    using_engine,
)
from .domain import AccelerationDomain
from .engine import AccelerationEngine, engine_class
from .exceptions import (
    CoheriqDomainError,
    CoheriqDomainNameError,
    CoheriqDomainNotFoundError,
    CoheriqDomainNotReadyError,
    CoheriqEngineDomainNotFoundError,
    CoheriqEngineError,
    CoheriqEngineInheritanceError,
    CoheriqEngineLoadError,
    CoheriqEngineNameError,
    CoheriqEngineNotFoundError,
    CoheriqEngineSettledError,
    CoheriqEngineStartError,
    CoheriqError,
    CoheriqLibraryError,
    CoheriqReloadWarning,
    CoheriqScopeError,
    CoheriqSignatureWarning,
    CoheriqTypeError,
    CoheriqUserError,
)
from .meta import EngineMeta
from .proxy import proxy_implementation

if TYPE_CHECKING:
    from .introspection import Coverage, Explanation, coverage, explain
    from .profiling import Profile, profile
    from .propagation import Snapshot, snapshot
    from .statements import EngineStatement, engine_statements
    from .verdicts import (
        CoheriqVerificationError,
        CoheriqVerificationWarning,
        Mismatch,
        VerificationRow,
    )
    from .verification import Verification, verify

_ON_FIRST_USE = {
    "Coverage": "introspection",
    "Explanation": "introspection",
    "coverage": "introspection",
    "explain": "introspection",
    "Profile": "profiling",
    "profile": "profiling",
    "Snapshot": "propagation",
    "snapshot": "propagation",
    "EngineStatement": "statements",
    "engine_statements": "statements",
    "CoheriqVerificationError": "verdicts",
    "CoheriqVerificationWarning": "verdicts",
    "Mismatch": "verdicts",
    "Verification": "verification",
    "VerificationRow": "verdicts",
    "verify": "verification",
}

__all__ = [
    "REFERENCE",
    "AccelerationDomain",
    "AccelerationEngine",
    "CoheriqDomainError",
    "CoheriqDomainNameError",
    "CoheriqDomainNotFoundError",
    "CoheriqDomainNotReadyError",
    "CoheriqEngineDomainNotFoundError",
    "CoheriqEngineError",
    "CoheriqEngineInheritanceError",
    "CoheriqEngineLoadError",
    "CoheriqEngineNameError",
    "CoheriqEngineNotFoundError",
    "CoheriqEngineSettledError",
    "CoheriqEngineStartError",
    "CoheriqError",
    "CoheriqLibraryError",
    "CoheriqReloadWarning",
    "CoheriqScopeError",
    "CoheriqSignatureWarning",
    "CoheriqTypeError",
    "CoheriqUserError",
    "CoheriqVerificationError",
    "CoheriqVerificationWarning",
    "Coverage",
    "EngineMeta",
    "EngineStatement",
    "Explanation",
    "Mismatch",
    "Profile",
    "Snapshot",
    "Verification",
    "VerificationRow",
    "active_implementation",
    "available_engines",
    "coverage",
    "enable_engine",
    "engine_class",
    "engine_of",
    "engine_statements",
    "explain",
    "import_domain",
    "profile",
    "proxy_implementation",
    "resolve_impl",
    "snapshot",
    "using_engine",
    "verify",
]

__version__ = "0.1.0"

if any(name.endswith("_VERIFY") for name in _environ):
    # A library's <PREFIX>_VERIFY may be set: the verification hooks in before any
    # domain is materialized.
    from . import verification as _verification  # noqa: F401


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
