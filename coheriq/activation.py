"""Where coheriq 0.0.x kept its verbs: kept for code written against 0.0.x.

``from coheriq import activation`` and ``activation.enable_engine(...)`` work as they
did. These are the same objects as :mod:`coheriq`'s own names; new code imports them
from :mod:`coheriq`. 0.0.x's private helpers are not here (see the migrating guide).
"""

from ._api.verbs import active_implementation, available_engines, enable_engine, resolve_impl

__all__ = ["active_implementation", "available_engines", "enable_engine", "resolve_impl"]
