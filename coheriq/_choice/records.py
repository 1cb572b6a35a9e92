"""Kept for imports: the records of blocks live in :mod:`coheriq._choice.blocks`."""

from .blocks import Fallthrough, Scope, Starting, live_scope

__all__ = ["Fallthrough", "Scope", "Starting", "live_scope"]
