"""The IPython extension: accelerate libraries from a notebook or an IPython shell::

    %load_ext coheriq.ipython
    %coheriq_accelerate cachetools:plaindict statistics

Each word is ``LIB`` or ``LIB:ENGINE``: the library is accelerated from the outside
(:func:`coheriq.accelerate`), on the engine where one is named. Run it before the cell that
imports the library, so that the names the notebook binds from it are the candidates.
"""

from __future__ import annotations

from typing import Any

from ._outside.activation import accelerate

__all__ = ["coheriq_accelerate", "load_ipython_extension"]


def coheriq_accelerate(line: str) -> None:
    """``%coheriq_accelerate LIB[:ENGINE] ...``: accelerate each library named."""
    words = line.split()
    if not words:
        print("usage: %coheriq_accelerate LIB[:ENGINE] [LIB[:ENGINE] ...]")
        return
    for word in words:
        library, _, engine = word.partition(":")
        accelerate(library, engine or None)
        chosen = f"on engine {engine!r}" if engine else "with no engine chosen"
        print(f"coheriq: library {library!r} is accelerated from the outside, {chosen}.")


def load_ipython_extension(ipython: Any) -> None:
    """Register ``%coheriq_accelerate`` (what ``%load_ext coheriq.ipython`` calls)."""
    ipython.register_magic_function(coheriq_accelerate, "line")
