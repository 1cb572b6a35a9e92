"""Where :class:`coheriq.ProfileRow` was before 0.2; import it from :mod:`coheriq`. Goes in 0.3."""

from ._tools.profiling import Profile, ProfileRow, profile

__all__ = ["Profile", "ProfileRow", "profile"]
