"""The error tree of coheriq.

A :class:`CoheriqLibraryError` means a library's or an engine's code is wrong; a
:class:`CoheriqUserError` means the program asked for what cannot be done. A leaf that is
clearer than the class coheriq 0.0.x raised in its situation derives from that class too.
"""

from __future__ import annotations

from ._stdlib import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "CoheriqCalibrationError",
    "CoheriqConversionError",
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
    """An engine's ``__init__`` raised (its ``__cause__``): it cannot start here."""


class CoheriqDeclineError(CoheriqEngineError):
    """An engine declined a call where declines are errors (``COHERIQ_FAIL_ON_DECLINE=1``)."""


class CoheriqConversionError(CoheriqEngineError):
    """Data could not cross between implementations: an engine's declared conversion failed or
    cannot be imported, or a call fell back where that is an error
    (``COHERIQ_FAIL_ON_CONVERT=1``)."""


class CoheriqDeclarationError(CoheriqLibraryError):
    """A declaration of a library accelerated from the outside cannot be used: it cannot be
    read, two packages' declarations disagree, or it names what the library does not define."""


class CoheriqUserError(CoheriqError):
    """The program asked coheriq for something that cannot be done."""


class CoheriqDomainNotFoundError(CoheriqUserError):
    """No domain of the given name exists."""


class CoheriqEngineNotFoundError(CoheriqUserError):
    """No engine of the given name is registered or advertised for a domain."""


class CoheriqEngineSettledError(CoheriqUserError, CoheriqDomainError):
    """The domain's global engine was already chosen and cannot change (also a
    :class:`CoheriqDomainError`, as in coheriq 0.0.x)."""


class CoheriqCalibrationError(CoheriqUserError):
    """A calibration (``coheriq calibrate``) could not be made, read or stored, or the two
    implementations it timed disagreed."""


class CoheriqScopeError(CoheriqUserError):
    """A ``using_engine`` block was left that is not open (exited twice, say)."""


class CoheriqTypeError(CoheriqUserError, TypeError):
    """A value of the wrong kind was passed to coheriq."""


class CoheriqDomainNameError(CoheriqTypeError, CoheriqDomainError):
    """A domain was created with a name that is empty, malformed or not a string (also a
    :class:`CoheriqDomainError`, as in coheriq 0.0.x)."""


class CoheriqEngineNameError(CoheriqTypeError, CoheriqEngineError):
    """An engine was created or named with a name that is empty, malformed or not a string
    (also a :class:`CoheriqEngineError`, as in coheriq 0.0.x)."""


class CoheriqEngineDomainNotFoundError(CoheriqDomainNotFoundError, CoheriqEngineError):
    """An engine was created for a domain that does not exist (also a
    :class:`CoheriqEngineError`, as in coheriq 0.0.x)."""


class CoheriqDomainNotReadyError(CoheriqDomainError, CoheriqEngineError):
    """An engine was created for a domain that is not materialized yet (also a
    :class:`CoheriqEngineError`, as in coheriq 0.0.x)."""


class CoheriqReloadWarning(UserWarning):
    """A copy of a library's module cannot run the engine the program chose.

    A module that runs again (a reload, a notebook's autoreload) makes a new copy of its
    domain, which follows the program's choice; where the engine cannot run for that copy,
    this is said once, and the copy runs on the reference (in a ``using_engine`` block, on
    the block's own engine).
    """


class CoheriqSignatureWarning(UserWarning):
    """An engine's override cannot accept every call its candidate accepts.

    A :class:`CoheriqEngineError` instead where the domain is strict or ``COHERIQ_STRICT=1``.

    Attributes:
        engine: The engine's name (for an unnamed mixin, its class name).
        candidate: The candidate whose override does not fit.
    """

    def __init__(self, message: str, engine: str = "", candidate: str = "") -> None:
        super().__init__(message)
        self.engine, self.candidate = engine, candidate


class CoheriqDeclarationWarning(UserWarning):
    """A library accelerated from the outside does not match its declaration: its version is outside
    the declared versions, or a module lacks a declared name (it is then imported unmarked)."""


def did_you_mean(name: object, choices: Iterable[str]) -> str:
    """Return a sentence suggesting the closest of ``choices`` to ``name``, or ``""``."""
    if not isinstance(name, str):
        return ""
    import difflib  # here: it imports re, needed on the error path only

    close = difflib.get_close_matches(name, list(choices), n=3, cutoff=0.6)
    return f" Did you mean {' or '.join(map(repr, close))}?" if close else ""


def ended(text: object) -> str:
    """Return another's message ``text``, quoted in one of coheriq's, as a sentence ending in
    one full stop (or its own ``?`` or ``!``)."""
    text = str(text).rstrip().rstrip(".")
    return text if text.endswith(("?", "!")) else f"{text}."


def listing(names: Iterable[str], *, none: str = "none") -> str:
    """Return ``names`` as a sorted, comma-separated list of quoted names."""
    ordered = sorted(names)
    return ", ".join(repr(n) for n in ordered) if ordered else none
