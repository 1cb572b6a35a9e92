"""Where coheriq 0.0.x kept :class:`AccelerationDomain` and ``REFERENCE``, for 0.0.x's code."""

from ._library.domain import AccelerationDomain
from ._names import REFERENCE

__all__ = ["REFERENCE", "AccelerationDomain"]
