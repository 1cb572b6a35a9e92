"""Checks of the names and values that users hand to coheriq."""

from __future__ import annotations

from os import environ as _environ

from .exceptions import CoheriqTypeError

REFERENCE = "reference"
"""The name under which a domain's own implementations are chosen; never an engine's."""


def check_name(value: object, what: str, error: type[CoheriqTypeError] = CoheriqTypeError) -> str:
    """Return ``value`` if it is a usable domain or engine name, else raise ``error`` (a
    :class:`~coheriq.CoheriqTypeError`), naming ``what``.

    A name is ASCII letters, digits, ``_``, ``-`` and ``.``, starting with a letter, digit or
    ``_``: it travels through environment variables, entry-point groups and ``DOMAIN:ENGINE``
    options, so whitespace, ``:`` and ``,`` are refused.
    """
    if not isinstance(value, str):
        raise error(f"The {what} must be a string, not {type(value).__name__} ({value!r}).")
    if (
        not value
        or not value.isascii()
        or value[0] in "-."
        or not all(c.isalnum() or c in "_-." for c in value)
    ):
        raise error(
            f"The {what} {value!r} is not a valid name: use letters, digits, '_', '-' "
            "and '.', starting with a letter, digit or '_'."
        )
    return value


def is_engine_name(value: object) -> bool:
    """Whether ``value`` may name an engine: a valid name (:func:`check_name`), not
    :data:`REFERENCE`."""
    try:
        check_name(value, "engine name")
    except CoheriqTypeError:
        return False
    return value != REFERENCE


def check_candidate_name(value: object) -> str:
    """Return ``value`` in NFKC form, as Python reads identifiers (``ﬁlter`` is ``filter``),
    if it can name a candidate: a public identifier, not a keyword; else raise
    :class:`~coheriq.CoheriqTypeError`."""
    if not isinstance(value, str):
        raise CoheriqTypeError(
            f"A candidate name must be a string, not {type(value).__name__} ({value!r})."
        )
    if not value.isascii():
        import unicodedata

        value = unicodedata.normalize("NFKC", value)
    import keyword  # here: marking candidates needs it, `import coheriq` does not

    if not value.isidentifier() or value.startswith("_") or keyword.iskeyword(value):
        raise CoheriqTypeError(
            f"The candidate name {value!r} is not usable: engines override a candidate by "
            "defining an attribute of that name, so it must be a Python identifier that "
            "is not a keyword and does not start with '_'."
        )
    return value


def name_given_once(obj: str | None, name: str | None, twice: str) -> str | None:
    """The name a decorator called with arguments got, as ``obj`` or as ``name=``; raise
    :class:`~coheriq.CoheriqTypeError` with message ``twice`` where it got both."""
    if obj is not None and name is not None:
        raise CoheriqTypeError(twice)
    return obj if obj is not None else name


def environment_flag(variable: str, meaning: tuple[str, str]) -> bool:
    """Whether environment variable ``variable`` says yes (``1``, ``true``, ``yes``, ``on``,
    any case) or no (``0``, ``false``, ``no``, ``off``, empty, unset); else CoheriqTypeError,
    whose message says what yes and no do (``meaning``)."""
    value = _environ.get(variable, "").strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("", "0", "false", "no", "off"):
        return False
    raise CoheriqTypeError(
        f"The environment variable {variable} is {value!r}; set it to 1, true, yes or on "
        f"{meaning[0]}, or to 0, false, no, off or nothing {meaning[1]}."
    )
