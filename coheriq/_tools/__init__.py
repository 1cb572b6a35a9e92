"""Tools for looking at a program, imported on first use: none is on the call path.

``explain`` and ``coverage`` (:mod:`.introspection`), ``profile`` (:mod:`.profiling`),
``verify`` (:mod:`.verification`, its records in :mod:`.verdicts`), ``snapshot``
(:mod:`.snapshot`); what they share is here.
"""

from __future__ import annotations

from .._stdlib import TYPE_CHECKING
from ..exceptions import CoheriqScopeError

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    T = TypeVar("T")


def send_back_with(error: BaseException, attribute: str, parcel: object) -> None:
    """Let ``parcel`` go back with a task's exception, as its ``attribute`` (what a task
    in another process recorded; lost where the exception takes no attribute, or pickles
    without its attributes)."""
    try:
        setattr(error, attribute, parcel)
    except Exception:  # an exception that takes no attribute: what it recorded is lost
        pass


def take_entry(entries: list[T], here: Callable[[T], object], owner: object) -> T:
    """Remove and return the newest of ``entries`` open in this context, else the newest;
    raise CoheriqScopeError where none is left (``owner`` was exited more often than entered)."""
    seen = list(entries)  # other threads may enter and exit it meanwhile
    try:
        entry = ([e for e in seen if here(e)] or seen)[-1]
        entries.remove(entry)
    except (IndexError, ValueError):  # none left, or another thread took it just now
        raise CoheriqScopeError(
            f"{owner!r} was exited more often than it was entered: each `with` block, "
            "or __exit__ call, ends one __enter__."
        ) from None
    return entry


def columns(table: list[list[str]], left: int) -> str:
    """``table`` as aligned text: its first ``left`` columns to the left, the others right."""
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    return "\n".join(
        "  ".join(
            cell.ljust(width) if i < left else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(line, widths, strict=True))
        ).rstrip()
        for line in table
    )
