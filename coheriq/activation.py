"""Where coheriq 0.0.x kept its verbs (:mod:`coheriq`'s own objects), for code written
against 0.0.x; its private helpers are not here."""

from ._api.verbs import active_implementation, available_engines, enable_engine, resolve_impl

__all__ = ["active_implementation", "available_engines", "enable_engine", "resolve_impl"]
