"""coheriq: let a library swap in an accelerated implementation of itself.

A library (the *domain*) marks functions and classes as acceleration candidates;
separately published *engines* re-implement any subset as subclasses of the
domain's reference class; the user picks an engine with one line, an environment
variable or a ``with`` block, and every call site follows.
"""

from ._validate import REFERENCE
from .activation import (
    active_implementation,
    available_engines,
    enable_engine,
    engine_of,
    resolve_impl,
    using_engine,
)
from .domain import AccelerationDomain
from .engine import AccelerationEngine, engine_class
from .exceptions import (
    CoheriqDomainError,
    CoheriqDomainNotFoundError,
    CoheriqEngineError,
    CoheriqEngineInheritanceError,
    CoheriqEngineLoadError,
    CoheriqEngineNotFoundError,
    CoheriqEngineSettledError,
    CoheriqError,
    CoheriqLibraryError,
    CoheriqSignatureWarning,
    CoheriqTypeError,
    CoheriqUserError,
)
from .meta import EngineMeta

__all__ = [
    "REFERENCE",
    "AccelerationDomain",
    "AccelerationEngine",
    "CoheriqDomainError",
    "CoheriqDomainNotFoundError",
    "CoheriqEngineError",
    "CoheriqEngineInheritanceError",
    "CoheriqEngineLoadError",
    "CoheriqEngineNotFoundError",
    "CoheriqEngineSettledError",
    "CoheriqError",
    "CoheriqLibraryError",
    "CoheriqSignatureWarning",
    "CoheriqTypeError",
    "CoheriqUserError",
    "EngineMeta",
    "active_implementation",
    "available_engines",
    "enable_engine",
    "engine_class",
    "engine_of",
    "resolve_impl",
    "using_engine",
]

__version__ = "0.1.0"
