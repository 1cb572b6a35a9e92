"""What the parts of a domain read of the domain that owns them: for the type checker only.

A domain owns three parts, :mod:`coheriq._engines.registry`,
:mod:`coheriq._choice.global_choice` and :mod:`coheriq._choice.blocks`, and each
reaches it through the object that owns it, never by importing
:mod:`coheriq._library.domain` (that would be a cycle). What they read of it is
described here once, as :class:`DomainView`; a part that reads more adds it in
a Protocol of its own derived from it. Nothing here runs: the parts import this
module under ``TYPE_CHECKING`` only, and so does nothing else.
"""

from __future__ import annotations

from .._stdlib import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any, Protocol

    from .._call.proxy import CandidateInfo, Switchboard
    from .._engines.meta import EngineMeta

    class Copies(Protocol):
        """What the parts read of the copies of a library's domain.

        (A :class:`coheriq._library.registry.Lineage`, described here rather than
        imported: that module is above the parts, which it imports.)
        """

        current: Any  # the newest copy
        choice: Any  # the global choice the first copy to settle made
        copies: int
        open_scopes: int
        lock: Any

    class DomainView(Protocol):
        """A domain as its parts see it (a coheriq._library.domain.AccelerationDomain)."""

        @property
        def name(self) -> str: ...
        @property
        def module(self) -> str: ...
        @property
        def _candidates(self) -> dict[str, CandidateInfo]: ...
        @property
        def _lock(self) -> Any: ...
        @property
        def _lineage(self) -> Copies: ...
        @property
        def _switchboard(self) -> Switchboard: ...
        # The domain's parts are reached through it; typed Any here so that this
        # module needs nothing from the parts (a part that reads its own narrows it).
        @property
        def engines(self) -> Any: ...
        @property
        def choice(self) -> Any: ...
        @property
        def scopes(self) -> Any: ...

        def require_reference(self, action: str) -> EngineMeta: ...
        def _warn_once(self, key: object, message: str) -> None: ...
