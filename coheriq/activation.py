"""Where coheriq 0.0.x kept its public verbs (:mod:`coheriq`'s own objects), for 0.0.x's code."""

from ._api.verbs import active_implementation, available_engines, enable_engine, resolve_impl

__all__ = ["active_implementation", "available_engines", "enable_engine", "resolve_impl"]
