"""Carrying the engine choice into other threads and processes: :func:`snapshot`."""

from __future__ import annotations

import functools
import sys

from .._api.verbs import enable_engine, import_domain, using_engine
from .._library.domain import all_domains
from .._stdlib import TYPE_CHECKING
from ..exceptions import CoheriqEngineSettledError
from . import take_entry

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import ExitStack
    from typing import Any, TypeVar

    from .verification import Verification

    T = TypeVar("T")


class Snapshot:
    """The engines active in one context, for every domain: picklable and re-applicable.

    Attributes:
        engines: Domain name -> the engine its calls ran on where the snapshot was
            taken (domains that had not chosen yet are left out).
        env_vars: Domain name -> its ``<PREFIX>_ENGINE`` variable, where it has one.
        verifications: The verifications (:func:`coheriq.verify`) that covered
            the context: entering the snapshot carries them, so that calls there
            are verified and reported in the same :class:`~coheriq.Verification`.
            A snapshot pickled to another process leaves them out; its
            :meth:`environ` turns them on there instead.
    """

    def __init__(
        self,
        engines: dict[str, str],
        env_vars: dict[str, str],
        verifications: tuple[Verification, ...] = (),
    ) -> None:
        self.engines, self.env_vars, self.verifications = engines, env_vars, verifications
        self._stacks: list[tuple[ExitStack, list[using_engine]]] = []  # entries not exited

    def __repr__(self) -> str:
        return f"Snapshot({self.engines!r})"

    def __reduce__(self) -> tuple[type[Snapshot], tuple[dict[str, str], dict[str, str]]]:
        return type(self), (self.engines, self.env_vars)  # no verifications: see environ()

    def apply(self) -> None:
        """Make each recorded engine its domain's global choice in this process.

        Meant for a fresh process (a worker, an MPI rank): domains not imported
        yet are imported first (see :func:`coheriq.import_domain`).

        Raises:
            CoheriqEngineSettledError: A domain here already runs on another engine;
                the message names the domain and both engines.
        """
        for domain, engine in self.engines.items():
            import_domain(domain)
            try:
                enable_engine(domain, engine)
            except CoheriqEngineSettledError as error:
                raise CoheriqEngineSettledError(
                    f"Cannot apply the snapshot here: {error}"
                ) from None

    def __enter__(self) -> Snapshot:
        """Enter a ``using_engine`` block for every recorded domain (in this thread)."""
        from contextlib import ExitStack

        blocks: list[using_engine] = []
        with ExitStack() as stack:  # what was entered is left again if one raises
            for domain, engine in self.engines.items():
                import_domain(domain)
                blocks.append(using_engine(domain, engine))
                stack.enter_context(blocks[-1])
            for verification in self.verifications:
                verification.carry_in()
                stack.callback(verification.carry_out)
            self._stacks.append((stack.pop_all(), blocks))
        return self

    def __exit__(self, *exc: object) -> None:
        take_entry(self._stacks, lambda e: not e[1] or e[1][0]._open_here(), self)[0].close()

    def wrap(self, fn: Callable[..., T]) -> Callable[..., T]:
        """Return a callable that runs ``fn`` inside this snapshot's scopes.

        The result pickles when ``fn`` does, so it can go to a process pool:
        ``executor.submit(snap.wrap(work), item)``.
        """
        return functools.partial(_run_in, self, fn)

    def environ(self) -> dict[str, str]:
        """The environment variables that make a child process choose the same engines.

        And verify them as the snapshot's verifications do (``<PREFIX>_VERIFY``;
        the child prints its own report). Only domains created with an
        ``env_prefix`` can be reached this way.
        """
        variables = {
            self.env_vars[domain]: engine
            for domain, engine in self.engines.items()
            if domain in self.env_vars
        }
        for verification in self.verifications:
            variables.update(verification.environ)
        return variables


def _run_in(snap: Snapshot, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    # A fresh Snapshot per call: the same wrapped callable may run in many threads.
    with Snapshot(snap.engines, snap.env_vars, snap.verifications):
        return fn(*args, **kwargs)


def snapshot() -> Snapshot:
    """Record the engine each domain runs on in the current context (scope or global).

    Choosing nothing: a domain that has not chosen its engine yet is left out.
    """
    chosen = [(d, e) for d in all_domains() if (e := d.scopes.active_engine()) is not None]
    engines = {domain.name: engine for domain, engine in chosen}
    env_vars = {d.name: d.env_var for d, _ in chosen if d.env_var is not None}
    verification = sys.modules.get("coheriq._tools.verification")  # none if never imported
    return Snapshot(engines, env_vars, verification.covering.get() if verification else ())
