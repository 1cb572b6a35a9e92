"""Checks of the names and values that users hand to coheriq."""

from __future__ import annotations

from .exceptions import CoheriqTypeError

REFERENCE = "reference"
"""The name under which a domain's own implementations are chosen; never an engine's."""

_NAME_PUNCTUATION = frozenset("_-.")


def check_name(value: object, what: str, error: type[CoheriqTypeError] = CoheriqTypeError) -> str:
    """Return ``value`` if it is a usable domain or engine name, else raise.

    A name is a non-empty ASCII string of letters, digits, ``_``, ``-`` and ``.``
    that starts with a letter, digit or ``_``. Names travel through environment
    variables, entry-point groups and ``DOMAIN:ENGINE`` command-line options, so
    whitespace, ``:`` and ``,`` are refused.

    Raises:
        CoheriqTypeError: ``value`` is not such a string; the message names ``what``.
            Raised as ``error``, a subclass that also tells the situation
            (:class:`~coheriq.CoheriqDomainNameError`, say).
    """
    if not isinstance(value, str):
        raise error(f"The {what} must be a string, not {type(value).__name__} ({value!r}).")
    if (
        not value
        or not value.isascii()
        or value[0] in "-."
        or not all(c.isalnum() or c in _NAME_PUNCTUATION for c in value)
    ):
        raise error(
            f"The {what} {value!r} is not a valid name: use letters, digits, '_', '-' "
            "and '.', starting with a letter, digit or '_'."
        )
    return value


def is_engine_name(value: object) -> bool:
    """Whether ``value`` may name an engine: a valid name (see :func:`check_name`),
    not :data:`REFERENCE`. The one rule for engine classes, ``enable_engine``, the
    environment variable and what packages advertise."""
    try:
        check_name(value, "engine name")
    except CoheriqTypeError:
        return False
    return value != REFERENCE


def check_candidate_name(value: object) -> str:
    """Return ``value`` if it can name a candidate (a public Python identifier), else raise.

    Engines override a candidate by defining an attribute of the same name, and
    names starting with ``_`` are reserved for an engine's private helpers. The
    name comes back in NFKC form, the form Python gives the identifiers of source
    code (an engine's ``def ﬁlter`` defines ``filter``).

    Raises:
        CoheriqTypeError: ``value`` is not a public identifier.
    """
    if not isinstance(value, str):
        raise CoheriqTypeError(
            f"A candidate name must be a string, not {type(value).__name__} ({value!r})."
        )
    if not value.isascii():
        import unicodedata  # as Python reads identifiers: "ﬁlter" is "filter"

        value = unicodedata.normalize("NFKC", value)
    import keyword  # here: marking candidates needs it, `import coheriq` does not

    if not value.isidentifier() or value.startswith("_") or keyword.iskeyword(value):
        raise CoheriqTypeError(
            f"The candidate name {value!r} is not usable: engines override a candidate by "
            "defining an attribute of that name, so it must be a Python identifier that "
            "is not a keyword and does not start with '_'."
        )
    return value
