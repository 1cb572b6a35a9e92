"""Where coheriq 0.0.x kept :class:`AccelerationDomain` and ``REFERENCE`` (:mod:`coheriq`'s
own objects), for code written against 0.0.x."""

from ._library.domain import AccelerationDomain
from ._names import REFERENCE

__all__ = ["REFERENCE", "AccelerationDomain"]
