"""What the parts of one copy of a domain share: :class:`DomainState`.

A domain's engines, global choice and blocks are each made with its state and
read only that, never the domain; the records of a choice name the state of
the copy that made them.
"""

from __future__ import annotations

import sys

from .._stdlib import TYPE_CHECKING, outside_coheriq
from ..exceptions import CoheriqReloadWarning

if TYPE_CHECKING:
    from typing import Any, Protocol

    from .._call.proxy import CandidateInfo, Switchboard

    class CopiesView(Protocol):
        """What the parts read of a :class:`coheriq._library.registry.Copies` (a layer above)."""

        current: Any  # the newest copy: an AccelerationDomain
        choice: Any  # the global choice the first copy to settle made
        made: int
        open_scopes: int
        lock: Any


class DomainState:
    """The state one copy of a domain shares with its parts.

    Attributes:
        env_var: ``<env_prefix>_ENGINE``, or None.
        candidates: Candidate name -> its :class:`~coheriq._call.proxy.CandidateInfo`.
        class_candidates: The class candidates among them, in marking order.
        lock: Guards the domain's set-up, never held while an engine's code runs.
        copies: The copies of the library's module's domain this one belongs to.
        switchboard: What this copy's proxies read to find what a call runs.
        declines: (candidate, engine, reason) -> how many calls declined so.
        bound_before: For a library accelerated from the outside after its import:
            candidate name -> the names (``"module.name"``) bound to its unmarked object.
        engines, choice, scopes: The domain's three parts.
    """

    __slots__ = (
        "__weakref__",
        "_warned",
        "bound_before",
        "candidates",
        "choice",
        "class_candidates",
        "copies",
        "declines",
        "engines",
        "env_prefix",
        "env_var",
        "lock",
        "module",
        "name",
        "scopes",
        "strict",
        "switchboard",
    )

    copies: CopiesView
    switchboard: Switchboard
    # Typed Any: the parts import this module, and imports point one way.
    engines: Any  # an Engines (coheriq._engines.registry)
    choice: Any  # a GlobalChoice (coheriq._choice.global_choice)
    scopes: Any  # a Scopes (coheriq._choice.blocks)

    def __init__(self, name: str, module: str, lock: Any) -> None:
        self.name = name
        self.module = module
        self.env_prefix: str | None = None
        self.env_var: str | None = None
        self.strict = False
        self.lock = lock
        self.candidates: dict[str, CandidateInfo] = {}
        self.class_candidates: list[CandidateInfo] = []
        self._warned: set[object] = set()
        self.declines: dict[tuple[str, str, str], int] = {}
        self.bound_before: dict[str, list[str]] = {}

    def unmaterialized_fix(self) -> str:
        """The sentence that says what to do about the domain not being materialized yet."""
        spec = getattr(sys.modules.get(self.module), "__spec__", None)
        if getattr(spec, "_initializing", False):
            return (
                f"Module {self.module!r}, which creates it, is still being imported (a "
                "circular import reached it too early): import the library completely first."
            )
        return (
            f"Module {self.module!r}, which creates it, has not called materialize(): a "
            "library calls it once, after marking its last candidate."
        )

    def warn_once(self, key: object, message: str) -> None:
        """Warn about this copy of the domain (a CoheriqReloadWarning), once per key."""
        if key in self._warned:
            return
        self._warned.add(key)
        import warnings  # only when there is something to say

        warnings.warn(message, CoheriqReloadWarning, stacklevel=outside_coheriq()[1])
