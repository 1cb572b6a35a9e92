"""An ordered choice of engines: the first of a list that is installed, loads and starts here.

What it tried (:data:`Tried`) stays with the choice, for :func:`coheriq.explain`,
the log and the pytest plugin's header.
"""

from __future__ import annotations

from .._names import REFERENCE, is_engine_name
from .._stdlib import TYPE_CHECKING
from ..exceptions import (
    CoheriqEngineLoadError,
    CoheriqEngineNotFoundError,
    CoheriqEngineStartError,
    CoheriqTypeError,
    listing,
)

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from .._engines.meta import EngineMeta
    from .._engines.registry import Engines


Tried = tuple[tuple[str, str], ...]
"""What an ordered choice tried: ``((engine, outcome), ...)``, in order; the
outcome is ``"chosen"`` or why the engine was passed over."""


def after_chosen(engines: Sequence[Any], tried: Tried) -> tuple[Any, ...]:
    """The engines of a list after the one :func:`first_that_starts` chose: they run
    the calls that the chosen engine's implementations all decline."""
    return tuple(engines[len(tried) :])


def describe_tried(tried: Tried) -> str:
    """``"gpu: skipped, failed to start: ...; compiled: chosen"``."""
    return "; ".join(
        f"{name}: {outcome}" if outcome == "chosen" else f"{name}: skipped, {outcome}"
        for name, outcome in tried
    )


def parse_engine_list(value: str, named_by: str) -> list[str]:
    """The engine names of ``"gpu, compiled"``; a CoheriqTypeError for an empty item, a
    duplicate or a name that cannot name an engine (almost surely a typo)."""
    names = [item.strip() for item in value.split(",")]
    problem = ""
    if any(not name for name in names):
        problem = "it has an empty item (two commas in a row, or one at an end)"
    elif len(set(names)) < len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        problem = f"it names {listing(twice)} more than once"
    else:
        bad = [n for n in names if not is_engine_name(n) and n != REFERENCE]
        if bad:
            problem = f"{listing(bad)} cannot name an engine (letters, digits, '_', '-', '.')"
    if problem:
        raise CoheriqTypeError(
            f"The engine list {value!r}{named_by} is malformed: {problem}. Write the engines "
            "in order of preference, separated by commas, e.g. 'gpu,compiled,reference'."
        )
    return names


def first_that_starts(
    registry: Engines,
    engines: list[str | EngineMeta],
    *,
    named_by: str = "",
    for_choice: bool = False,
) -> tuple[EngineMeta, Tried]:
    """Return the first of ``engines`` that is installed, imports and starts, and what was
    tried; a CoheriqEngineNotFoundError with each one's reason where none can run here.

    ``for_choice``: the engine chosen becomes the global choice, so first calls in
    other threads wait for each start.
    """
    tried: list[tuple[str, str]] = []
    for engine in engines:
        name = engine if isinstance(engine, str) else (engine.__coheriq_name__ or REFERENCE)
        try:
            cls = engine if not isinstance(engine, str) else registry.engine_class(engine)
            if for_choice:
                registry.state.choice.start_for_choice(cls)
            else:
                registry.members_of(cls)
        except CoheriqEngineNotFoundError:
            tried.append((name, "not installed"))
        except CoheriqEngineLoadError as error:
            tried.append((name, f"failed to import: {_why(error)}"))
        except CoheriqEngineStartError as error:
            tried.append((name, f"failed to start: {_why(error)}"))
        else:
            tried.append((name, "chosen"))
            return cls, tuple(tried)
    reasons = "; ".join(f"{name}: {outcome}" for name, outcome in tried)
    raise CoheriqEngineNotFoundError(
        f"None of the engines {', '.join(repr(n) for n, _ in tried)} of domain "
        f"{registry.state.name!r}{named_by} can run here ({reasons}). Install or fix one "
        f"of them, or end the list with {REFERENCE!r}, which always runs."
    )


def _why(error: BaseException) -> str:
    """The reason an engine gave: its own exception's message."""
    cause = error.__cause__
    if cause is None:
        return str(error).rstrip(".")
    return f"{type(cause).__name__}: {str(cause).rstrip('.')}"
