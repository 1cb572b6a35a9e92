"""Carrying the engine choice into other threads and processes: :func:`snapshot`.

With it the verifications and profiles open where it was taken: a profile records the
calls of a thread that enters the snapshot, and those of ``snap.wrap(fn)`` in another
process, whose records come back with ``fn``'s result (:mod:`.profiling`).
"""

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

    from .profiling import Profile
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
            Pickled to another process, it carries their settings: there,
            ``wrap(fn)`` verifies ``fn``'s calls (recording the mismatches, never
            warning or raising there), and what it compared comes back into the
            same verifications with ``fn``'s result. A child process started
            otherwise gets them from :meth:`environ`, and reports on its own.
        profiles: The profiles (:func:`coheriq.profile`) that recorded the context:
            entering the snapshot in another thread records its calls in them too,
            labelled ``'thread NAME'``. Pickled to another process, it carries their
            names instead: there, ``wrap(fn)`` records ``fn``'s calls, and they come
            back into the same profiles with ``fn``'s result (see :meth:`wrap`);
            ``with snap:`` there records nothing, having nothing to carry them back.
    """

    def __init__(
        self,
        engines: dict[str, str],
        env_vars: dict[str, str],
        verifications: tuple[Verification, ...] = (),
        profiles: tuple[Profile, ...] = (),
    ) -> None:
        self.engines, self.env_vars, self.verifications = engines, env_vars, verifications
        self.profiles = profiles
        self._tokens: tuple[str, ...] = ()  # the profiles it carries of other processes
        self._specs: tuple[dict[str, Any], ...] = ()  # and the verifications (Verification.spec)
        self._stacks: list[tuple[ExitStack, list[using_engine]]] = []  # entries not exited

    def __repr__(self) -> str:
        return f"Snapshot({self.engines!r})"

    def __reduce__(self) -> tuple[Callable[..., Snapshot], tuple[Any, ...]]:
        # The profiles and verifications by name, where there are any.
        tokens = (*self._tokens, *(profile._carry_token() for profile in self.profiles))
        specs = (*self._specs, *(verification.spec() for verification in self.verifications))
        if not tokens and not specs:  # as a snapshot was always pickled: earlier coheriq loads it
            return type(self), (self.engines, self.env_vars)
        return _unpickled, (self.engines, self.env_vars, tuple(dict.fromkeys(tokens)), specs)

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
            for profile in self.profiles:
                profile.carry_in()
                stack.callback(profile.carry_out)
            self._stacks.append((stack.pop_all(), blocks))
        return self

    def __exit__(self, *exc: object) -> None:
        take_entry(self._stacks, lambda e: not e[1] or e[1][0]._open_here(), self)[0].close()

    def wrap(self, fn: Callable[..., T]) -> Callable[..., T]:
        """Return a callable that runs ``fn`` inside this snapshot's scopes.

        The result pickles when ``fn`` does, so it can go to a process pool:
        ``executor.submit(snap.wrap(work), item)``. Where the snapshot carries
        profiles there, ``fn``'s calls are recorded in that process and go back with
        its result, which the pool pickles: unpickled in the process of the profiles,
        it is ``fn``'s result again, and they hold the calls, labelled
        ``'process PID'`` (``'dask worker ADDRESS'`` on a dask cluster). An exception
        ``fn`` raises propagates as it is, and carries them too where its class
        pickles its attributes (most do). A dask result given to another task is the
        result again when it crosses to another worker; a task on the same worker
        gets it as it was returned, which a task wrapped by the snapshot takes apart
        (wrap every task that takes a wrapped task's result, or gather it first).
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
    if snap._specs:  # in another process, under verifications of the one it was taken in
        from . import verification

        args, kwargs = verification.unwrapped(args, kwargs)
        run = functools.partial(_run_carrying, snap, fn, args, kwargs)
        return verification.call_verified(snap._specs, run)
    return _run_carrying(snap, fn, args, kwargs)


def _run_carrying(snap: Snapshot, fn: Callable[..., T], args: Any, kwargs: Any) -> T:
    # A fresh Snapshot per call: the same wrapped callable may run in many threads.
    scope = Snapshot(snap.engines, snap.env_vars, snap.verifications, snap.profiles)
    if not snap._tokens:
        with scope:
            return fn(*args, **kwargs)
    from . import profiling

    # In another process: fn's result goes back wrapped with the records (see _Carried).
    result: T = profiling.call_carrying(snap._tokens, scope, fn, args, kwargs)
    return result


def _unpickled(
    engines: dict[str, str],
    env_vars: dict[str, str],
    tokens: tuple[str, ...],
    specs: tuple[dict[str, Any], ...] = (),
) -> Snapshot:
    """A snapshot unpickled with the names of the profiles and verifications it carries:
    those open in this process are recorded in directly, the others through ``wrap`` (see
    call_carrying and call_verified)."""
    snap = Snapshot(engines, env_vars)
    if tokens:
        from . import profiling

        snap.profiles, snap._tokens = profiling.resolve_tokens(tokens)
    if specs:
        from . import verification

        snap.verifications, snap._specs = verification.resolve_specs(specs)
    return snap


def snapshot() -> Snapshot:
    """Record the engine each domain runs on in the current context (scope or global).

    Choosing nothing: a domain that has not chosen its engine yet is left out. The
    verifications and profiles that cover the context go with it (see :class:`Snapshot`).
    """
    chosen = [(d, e) for d in all_domains() if (e := d.scopes.active_engine()) is not None]
    engines = {domain.name: engine for domain, engine in chosen}
    env_vars = {d.name: d.env_var for d, _ in chosen if d.env_var is not None}
    # None if never imported: then none is open.
    verification = sys.modules.get("coheriq._tools.verification")
    profiling = sys.modules.get("coheriq._tools.profiling")
    return Snapshot(
        engines,
        env_vars,
        verification.covering.get() if verification else (),
        profiling.profiles_here() if profiling else (),
    )
