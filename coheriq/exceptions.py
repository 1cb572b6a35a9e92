"""The error tree of coheriq.

Two branches tell who has to act. A :class:`CoheriqLibraryError` means the code of a
library or of an engine is wrong (a candidate marked after materialization, an
engine that overrides a name its domain does not have); a :class:`CoheriqUserError`
means the program that uses them asked for something that cannot be done (an
engine that does not exist, a second global engine). Every message names the
domain, engine or candidate involved and says what to do instead.

A few leaves derive from two branches, as :class:`io.UnsupportedOperation` is
both an :class:`OSError` and a :class:`ValueError`: where coheriq 0.0.x raised
one class in a situation and this coheriq raises a clearer one, the error is an
instance of both, so ``except`` clauses written for 0.0.x keep working (see
"Coming from coheriq 0.0.x" in the documentation).
"""

from __future__ import annotations

from ._stdlib import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
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
]


class CoheriqError(RuntimeError):
    """Base class of every error raised by coheriq."""


class CoheriqLibraryError(CoheriqError):
    """The code of a domain or of an engine is wrong; its author has to fix it."""


class CoheriqDomainError(CoheriqLibraryError):
    """A domain was set up wrongly, or used before it was ready."""


class CoheriqEngineError(CoheriqLibraryError):
    """An engine was defined wrongly, or failed while it was being set up."""


class CoheriqEngineInheritanceError(CoheriqEngineError):
    """An engine class has bases that cannot be combined."""


class CoheriqEngineLoadError(CoheriqEngineError):
    """Importing an advertised engine failed, or did not define the engine."""


class CoheriqEngineStartError(CoheriqEngineError):
    """An engine's ``__init__`` raised: it cannot start here (no device, no cluster).

    The exception that ``__init__`` raised is the ``__cause__``.
    """


class CoheriqDeclineError(CoheriqEngineError):
    """An engine declined a call where declines are errors (``COHERIQ_FAIL_ON_DECLINE=1``).

    The message gives the engine, the candidate and the engine's reason.
    """


class CoheriqDeclarationError(CoheriqLibraryError):
    """A declaration of a library accelerated from the outside cannot be used.

    It cannot be read, two packages' declarations of one library disagree, or
    it names a function or class the installed library does not define; the
    message names the declaration and what is wrong.
    """


class CoheriqUserError(CoheriqError):
    """The program asked coheriq for something that cannot be done."""


class CoheriqDomainNotFoundError(CoheriqUserError):
    """No domain of the given name exists."""


class CoheriqEngineNotFoundError(CoheriqUserError):
    """No engine of the given name is registered or advertised for a domain."""


class CoheriqEngineSettledError(CoheriqUserError, CoheriqDomainError):
    """The domain's global engine was already chosen and cannot change.

    Also a :class:`CoheriqDomainError`, the class coheriq 0.0.x raised here.
    """


class CoheriqScopeError(CoheriqUserError):
    """A ``using_engine`` block was left that is not open (exited twice, say)."""


class CoheriqTypeError(CoheriqUserError, TypeError):
    """A value of the wrong kind was passed to coheriq."""


class CoheriqDomainNameError(CoheriqTypeError, CoheriqDomainError):
    """A domain was created with a name that is empty, malformed or not a string.

    Also a :class:`CoheriqDomainError`, the class coheriq 0.0.x raised here.
    """


class CoheriqEngineNameError(CoheriqTypeError, CoheriqEngineError):
    """An engine was created or named with a name that is empty, malformed or not a string.

    Also a :class:`CoheriqEngineError`, the class coheriq 0.0.x raised here.
    """


class CoheriqEngineDomainNotFoundError(CoheriqDomainNotFoundError, CoheriqEngineError):
    """An engine was created for a domain that does not exist.

    Also a :class:`CoheriqEngineError`, the class coheriq 0.0.x raised here.
    """


class CoheriqDomainNotReadyError(CoheriqDomainError, CoheriqEngineError):
    """An engine was created for a domain that is not materialized yet.

    Also a :class:`CoheriqEngineError`, the class coheriq 0.0.x raised here.
    """


class CoheriqReloadWarning(UserWarning):
    """A copy of a library's module cannot run the engine the program chose.

    A library's module that runs again (:func:`importlib.reload`, a fresh import
    in a test suite, a notebook's autoreload) makes a new copy of its domain,
    which follows the program's engine choice; where the engine cannot run for
    that copy, coheriq says so once, with the reason, and the copy runs on the
    reference implementation (or, in a ``using_engine`` block, keeps its own).
    """


class CoheriqSignatureWarning(UserWarning):
    """An engine's override cannot accept every call its candidate accepts.

    Raised as a :class:`CoheriqEngineError` instead when the domain is strict or
    the environment variable ``COHERIQ_STRICT`` is set to ``1``.

    Attributes:
        engine: The engine's name (for an unnamed mixin, its class name).
        candidate: The candidate whose override does not fit.
    """

    def __init__(self, message: str, engine: str = "", candidate: str = "") -> None:
        super().__init__(message)
        self.engine = engine
        self.candidate = candidate


class CoheriqDeclarationWarning(UserWarning):
    """A library accelerated from the outside does not match its declaration.

    Its version is outside the versions the declaration was written against, or
    a module of it does not define a name the declaration gives (that module is
    then imported unmarked, as if it were not declared).
    """


def did_you_mean(name: object, choices: Iterable[str]) -> str:
    """Return a sentence suggesting the closest of ``choices`` to ``name``, or ``""``."""
    if not isinstance(name, str):
        return ""
    # Imported here: difflib pulls in ``re`` and is only needed on the error path.
    import difflib

    close = difflib.get_close_matches(name, list(choices), n=3, cutoff=0.6)
    if not close:
        return ""
    return " Did you mean " + " or ".join(repr(c) for c in close) + "?"


def ended(text: object) -> str:
    """Return ``text`` as one sentence, ending in one full stop (or its own ``?`` or ``!``).

    For a message of another's that a message of coheriq's quotes and goes on after.
    """
    text = str(text).rstrip().rstrip(".")
    return text if text.endswith(("?", "!")) else f"{text}."


def listing(names: Iterable[str], *, none: str = "none") -> str:
    """Return ``names`` as a sorted, comma-separated list of quoted names."""
    ordered = sorted(names)
    return ", ".join(repr(n) for n in ordered) if ordered else none
