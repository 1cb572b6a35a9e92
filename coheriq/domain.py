"""Where coheriq 0.0.x kept :class:`AccelerationDomain`: kept for code written against 0.0.x.

``from coheriq.domain import AccelerationDomain, REFERENCE`` gives :mod:`coheriq`'s
own objects; new code imports them from :mod:`coheriq`.
"""

from ._library.domain import AccelerationDomain
from ._names import REFERENCE

__all__ = ["REFERENCE", "AccelerationDomain"]
