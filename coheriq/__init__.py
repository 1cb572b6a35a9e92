"""coheriq: let a library swap in an accelerated implementation of itself.

A library (the *domain*) marks functions and classes as acceleration candidates;
separately published *engines* re-implement any subset as subclasses of the
domain's reference class; the user picks an engine with one line, an environment
variable or a ``with`` block, and every call site follows.

The tools for looking at a program (:func:`explain`, :func:`coverage`,
:func:`profile`, :func:`snapshot`), and what an engine declines a call with
(:class:`Decline`, :func:`may_decline`), are imported on first use, so that
importing an accelerated library does not pay for them.

PYTEST_DONT_REWRITE: pytest rewrites the asserts of a test plugin's package,
coheriq, and warns where it was imported before pytest started (by
``COHERIQ_ACCELERATE`` or ``python -m coheriq run``): an error in projects that
set ``filterwarnings = error``. Library code needs no rewritten asserts.
"""

# The module whose name pickles of users' subclasses of marked classes carry: it
# must be imported for cloudpickle to pickle them by that name (it pickles by value
# a class whose module is not imported). It imports nothing until it is read.
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
from .exceptions import (
    CoheriqDeclarationError,
    CoheriqDeclarationWarning,
    CoheriqDeclineError,
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

if TYPE_CHECKING:
    from ._engines.declines import Decline, may_decline
    from ._outside.activation import accelerate
    from ._tools.introspection import Coverage, Explanation, coverage, explain
    from ._tools.profiling import DeclineRow, Profile, ProfileRow, profile
    from ._tools.snapshot import Snapshot, snapshot
    from ._tools.verdicts import (
        CoheriqVerificationError,
        CoheriqVerificationWarning,
        Mismatch,
        VerificationRow,
    )
    from ._tools.verification import Verification, register_comparison, verify
    from .statements import EngineStatement, engine_statements

_ON_FIRST_USE = {
    "accelerate": "_outside.activation",
    "Decline": "_engines.declines",
    "may_decline": "_engines.declines",
    "Coverage": "_tools.introspection",
    "Explanation": "_tools.introspection",
    "coverage": "_tools.introspection",
    "explain": "_tools.introspection",
    "DeclineRow": "_tools.profiling",
    "Profile": "_tools.profiling",
    "ProfileRow": "_tools.profiling",
    "profile": "_tools.profiling",
    "Snapshot": "_tools.snapshot",
    "snapshot": "_tools.snapshot",
    "EngineStatement": "statements",
    "engine_statements": "statements",
    "CoheriqVerificationError": "_tools.verdicts",
    "CoheriqVerificationWarning": "_tools.verdicts",
    "Mismatch": "_tools.verdicts",
    "Verification": "_tools.verification",
    "VerificationRow": "_tools.verdicts",
    "register_comparison": "_tools.verification",
    "verify": "_tools.verification",
}

__all__ = [
    "REFERENCE",
    "AccelerationDomain",
    "AccelerationEngine",
    "CoheriqDeclarationError",
    "CoheriqDeclarationWarning",
    "CoheriqDeclineError",
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
    "Decline",
    "DeclineRow",
    "EngineMeta",
    "EngineStatement",
    "Explanation",
    "Mismatch",
    "Profile",
    "ProfileRow",
    "Snapshot",
    "Verification",
    "VerificationRow",
    "accelerate",
    "active_implementation",
    "available_engines",
    "coverage",
    "enable_engine",
    "engine_class",
    "engine_of",
    "engine_statements",
    "explain",
    "import_domain",
    "may_decline",
    "profile",
    "proxy_implementation",
    "register_comparison",
    "resolve_impl",
    "snapshot",
    "using_engine",
    "verify",
]

__version__ = "0.1.0"


def _verify_from_environment(domain: AccelerationDomain) -> None:
    """``domain``'s own ``<PREFIX>_VERIFY`` is set: verify it (the module is imported now)."""
    from ._tools.verification import from_environment

    from_environment(domain)


# Only a domain whose own variable is set, at its materialization, imports the
# verification: another program's variable (GIT_SSL_NO_VERIFY) costs nothing.
_observing.on_materialized.append(_verify_from_environment)


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
    """``COHERIQ_ACCELERATE`` is set: accelerate what it names now, unless the start-up file
    (which does, at the library's first import) ran in this process; it did not under
    ``python -S``, nor without coheriq's ``coheriq-accelerate.pth`` installed."""
    import sys

    # Asked of the start-up module as it is: where it ran, the activation module may be
    # importing, in another thread, waiting for this one (which it imports).
    startup = sys.modules.get("coheriq._outside.startup")
    if startup is not None and startup.has_started():
        return
    from ._outside.activation import from_environment_unless_started

    from_environment_unless_started()


# One dictionary lookup where the variable is unset (os is imported at start-up).
if __import__("os").environ.get("COHERIQ_ACCELERATE"):
    _accelerate_from_environment()
