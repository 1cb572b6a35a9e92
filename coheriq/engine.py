"""Where coheriq 0.0.x kept :class:`AccelerationEngine` (:mod:`coheriq`'s own class), for code
written against 0.0.x."""

from ._api.engine_forms import AccelerationEngine

__all__ = ["AccelerationEngine"]
