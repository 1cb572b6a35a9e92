"""Where coheriq 0.0.x kept :class:`AccelerationEngine` (:mod:`coheriq`'s), for 0.0.x's code."""

from ._api.engine_forms import AccelerationEngine

__all__ = ["AccelerationEngine"]
