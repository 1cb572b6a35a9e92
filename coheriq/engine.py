"""Where coheriq 0.0.x kept :class:`AccelerationEngine`: kept for code written against 0.0.x.

``from coheriq.engine import AccelerationEngine`` gives :mod:`coheriq`'s own class;
new code imports it from :mod:`coheriq`.
"""

from ._api.engine_forms import AccelerationEngine

__all__ = ["AccelerationEngine"]
