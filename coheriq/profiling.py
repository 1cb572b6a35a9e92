"""Where :class:`coheriq.ProfileRow` was before 0.2: kept for one release.

Import it from :mod:`coheriq` (``coheriq.ProfileRow``); this module goes in 0.3.
"""

from ._tools.profiling import Profile, ProfileRow, profile

__all__ = ["Profile", "ProfileRow", "profile"]
