"""Typing names, and two types, that cost nothing at run time.

``import coheriq`` happens in every program that imports an accelerated library,
so it must not import :mod:`typing` (several milliseconds, with ``re`` and
``contextlib`` behind it) or even :mod:`types`. Annotations are strings (``from
__future__ import annotations``), type-only names are imported under ``if
TYPE_CHECKING:``, and :func:`overload` is a stand-in with the same run-time effect
as :func:`typing.overload`: the last, real definition replaces the overloads.
"""

TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import overload
else:

    def overload(fn):
        """Return ``fn``: the overloads exist for type checkers only."""
        return fn


FunctionType = type(overload)
""":class:`types.FunctionType`: the type of functions written in Python."""

MappingProxyType = type(type.__dict__)
""":class:`types.MappingProxyType`: a read-only view of a mapping."""

__all__ = ["TYPE_CHECKING", "FunctionType", "MappingProxyType", "overload"]
