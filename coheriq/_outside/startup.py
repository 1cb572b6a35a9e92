"""What ``COHERIQ_ACCELERATE`` does as an interpreter starts, for the price of a few file reads.

The start-up file ``coheriq-accelerate.pth`` loads this module on its own, without
importing coheriq (tens of milliseconds, in every process and child process),
and calls :func:`start` where the variable is set. :func:`start` checks what the
variable names against the entry points of the distributions in
:data:`sys.path`'s directories, read from their ``entry_points.txt`` directly,
and puts a :class:`Deferred` finder first on :data:`sys.meta_path`: the libraries
are accelerated (:func:`coheriq._outside.activation.from_environment`) when the
first of them is imported, and a process that never imports them pays about a
millisecond. A library that no entry point declares, or an engine that none
advertises, is said on standard error at once.

They are accelerated at once, as :func:`coheriq.accelerate` would, where
waiting is not safe or the quick look cannot tell: a library imported already,
or a name or an engine the entry points found here do not confirm (a package
found otherwise than in a directory of :data:`sys.path`). A module of the
standard library waits too: where coheriq imports it itself while accelerating,
the import that triggered the acceleration is given that module (run once).

Standard library only, and nothing of coheriq: this module is loaded on its own.
"""

# No `from __future__ import annotations`: every module imported here is one more
# in every process; the annotations of names imported for type checkers are quoted.
import os
import sys
from _thread import RLock, get_ident

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType
    from typing import Any

__all__ = [
    "ENV",
    "SAID_ENV",
    "Deferred",
    "activate",
    "has_started",
    "parse_environment",
    "said_before",
    "start",
]

ENV = "COHERIQ_ACCELERATE"
"""The variable naming the libraries to accelerate: ``"statistics:numpy,cachetools"``."""

SAID_ENV = "_COHERIQ_ACCELERATE_SAID"
"""Set by ``python -m coheriq run`` for the program's interpreter, which it becomes: the
libraries whose start-up message the runner's own interpreter said already (said once, as
under ``python``). Taken out of the environment at start-up: the program never sees it."""

_lock = RLock()  # held while accelerating
_started = False  # start has run (site may read the .pth file twice)
_activated = False  # the libraries are accelerated
_deferred: "Deferred | None" = None  # on sys.meta_path until then
_said: "set[str] | None" = None  # SAID_ENV's libraries, once read


def parse_environment(value: str) -> list[tuple[str, str | None]]:
    """``"statistics:numpy,cachetools"`` -> ``[("statistics", "numpy"), ("cachetools", None)]``.

    One engine per library here: an ordered list of engines goes in the
    library's own variable (``STATISTICS_ENGINE="gpu, numpy"``).
    """
    found: list[tuple[str, str | None]] = []
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        library, colon, engine = (part.strip() for part in item.partition(":"))
        found.append((library, engine if colon and engine else None))
    return found


def start() -> None:
    """Accelerate what :data:`ENV` names: when one of its libraries is imported, or now.

    Never raises: an interpreter must start. Runs once per process.
    """
    global _started, _deferred
    if _started:
        return
    _started = True
    said_before()
    try:
        named = parse_environment(os.environ.get(ENV, ""))
        if named and _can_wait(named):
            _deferred = Deferred({library for library, _ in named})
            sys.meta_path.insert(0, _deferred)
        elif named:
            activate()
    except Exception as error:  # a bug of coheriq's must not stop the interpreter
        print(f"coheriq: {ENV} could not be read: {type(error).__name__}: {error}", file=sys.stderr)


def has_started() -> bool:
    """Whether :func:`start` ran in this process (``site`` read the start-up file)."""
    return _started


def said_before() -> "set[str]":
    """The libraries whose start-up message the runner's interpreter said already
    (:data:`SAID_ENV`, taken out of the environment the first time)."""
    global _said
    if _said is None:
        _said = {name for name in os.environ.pop(SAID_ENV, "").split(",") if name}
    return _said


# How long an import waits for another thread's acceleration before it fails, saying
# why: two libraries the variable names, imported at once by two threads where
# accelerating one imports the other, wait for each other in a way the import
# system's deadlock detection cannot see (this lock is not one of its locks).
WAIT_SECONDS = 60.0


def activate(wait: bool = True) -> None:
    """Accelerate what :data:`ENV` names now (once; what cannot be done is said on stderr).

    Where another thread is accelerating them, waits until it is done; or, with
    ``wait`` False, returns at once.

    Raises:
        ImportError: Another thread's acceleration did not end within
            :data:`WAIT_SECONDS` (it waits for this thread's import).
    """
    global _activated
    if not _lock.acquire(wait, WAIT_SECONDS if wait else -1):
        if not wait:
            return
        raise ImportError(
            f"coheriq waited {WAIT_SECONDS:.0f} s for another thread to accelerate what "
            f"{ENV}={os.environ.get(ENV, '')!r} names, and gave up: that thread is most "
            "likely waiting for this thread's import (two of the libraries it names, "
            "imported at once by two threads, where accelerating one imports the "
            "other). Import the libraries it names in one thread first, at start-up."
        )
    try:
        if _activated:
            return
        _activated = True
        if _deferred is not None and _deferred in sys.meta_path:
            sys.meta_path.remove(_deferred)
        # By name, as the start-up file did before this module: this module stands
        # outside coheriq's layers (loaded on its own, it imports nothing of coheriq's),
        # and activation imports it, for the variable's syntax.
        __import__("coheriq._outside.activation", fromlist=["*"]).from_environment()
    finally:
        _lock.release()


class Deferred:
    """A meta path finder that accelerates the named libraries as the first of them is imported.

    For any other module it answers ``None`` at once. For a module of a named
    library it answers the spec the finders after it answer, with an
    :class:`_Accelerating` loader around theirs: the libraries are accelerated
    when the import system loads the module, not here. The import system calls
    finders holding its global lock, which no other thread's import can do
    without; it loads a module holding that module's lock only, which it can tell
    a deadlock by. So another thread importing a module that accelerating imports
    finishes, and accelerating waits for it.

    Where coheriq itself is being imported in this thread, and imports the
    module, it cannot accelerate then: the module is imported as without it, and
    the libraries are accelerated at the next import once coheriq is imported
    (the module is then marked in place, as a library imported before
    :func:`coheriq.accelerate`).
    """

    def __init__(self, libraries: set[str]) -> None:
        self.libraries = libraries
        self.waiting = False  # a named module was imported while coheriq was

    def __repr__(self) -> str:
        return f"<coheriq finder accelerating {sorted(self.libraries)} at their first import>"

    def find_spec(
        self,
        fullname: str,
        path: "Sequence[str] | None" = None,
        target: "ModuleType | None" = None,
    ) -> "ModuleSpec | None":
        """None, or, for a module of a named library, its spec with an accelerating loader.

        Imports nothing: the import system's global lock is held.
        """
        named = fullname.partition(".")[0] in self.libraries
        if not (named or self.waiting) or _activated:
            return None
        if _coheriq_importing():
            self.waiting = True
            return None
        finders = list(sys.meta_path)
        for finder in finders[finders.index(self) + 1 :] if self in finders else finders:
            find_spec = getattr(finder, "find_spec", None)
            spec: ModuleSpec | None = find_spec and find_spec(fullname, path, target)
            if spec is None:
                continue
            if hasattr(spec.loader, "exec_module") and hasattr(spec.loader, "create_module"):
                accelerating = _Accelerating(fullname, spec.loader, named, path, target)
                spec.loader = accelerating  # type: ignore[assignment]  # a loader by protocol
            return spec
        return None

    def invalidate_caches(self) -> None:
        """Nothing is cached here (:func:`importlib.invalidate_caches` asks every finder)."""


class _Accelerating:
    """The loader of a module imported while the libraries wait: accelerates them as it
    creates the module, then loads the module as coheriq's finder says.

    Its ``create_module`` (run under the module's own lock) accelerates, puts the
    loader coheriq's finder gives the module (a marking loader) in the spec, in its
    place, and returns what that loader creates. Where accelerating imported the
    module itself (coheriq uses it), it returns that module, and loading it runs
    nothing again. For a module of no named library (the next import after
    coheriq's own), the real loader, once the libraries are accelerated (by this
    thread, or being so by another).
    """

    def __init__(
        self,
        name: str,
        loader: "Any",
        named: bool,
        path: "Sequence[str] | None",
        target: "ModuleType | None",
    ) -> None:
        self.name = name
        self.loader = loader
        self.named = named
        self.path = path
        self.target = target
        self.found: Any = None  # the loader this one stands for, once accelerated
        self.spec: ModuleSpec | None = None  # the spec it came with, if found again

    def __repr__(self) -> str:
        return f"<coheriq loader accelerating before {self.loader!r}>"

    def __getattr__(self, name: str) -> "Any":
        # get_code (runpy, for python -m), get_source, is_package, ...: the loader's own.
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.loader if self.found is None and not self.named else self._find(), name)

    def _find(self, spec: "ModuleSpec | None" = None) -> "Any":
        """Accelerate (once), and the loader that loads the module from then on; ``spec``,
        where its loader is this one, takes that loader and what comes with it."""
        if self.found is None:
            there = self.name in sys.modules  # a reload
            activate(wait=self.named)
            module = sys.modules.get(self.name)
            if module is not None and not there:
                # Accelerating imported it (this thread holds its lock: no other did).
                self.found = _Imported(module)
            else:
                self.found = self._found_again() if self.named else self.loader
        if spec is not None and getattr(spec, "loader", None) is self:
            spec.loader = self.found
            if self.spec is not None:
                for attribute in ("loader_state", "origin", "submodule_search_locations"):
                    setattr(spec, attribute, getattr(self.spec, attribute))
                spec.has_location = self.spec.has_location
                spec.cached = self.spec.cached
        return self.found

    def _found_again(self) -> "Any":
        """The loader the finders give the module now (coheriq's: a marking one)."""
        for finder in list(sys.meta_path):
            find_spec = getattr(finder, "find_spec", None)
            found = None if find_spec is None else find_spec(self.name, self.path, self.target)
            if found is None:
                continue
            if found.loader is None:
                break
            self.spec = found
            return found.loader
        return self.loader

    def create_module(self, spec: "ModuleSpec") -> "ModuleType | None":
        """Accelerate, then what the loader found then creates (the module already
        imported, where accelerating imported it)."""
        loader = self._find(spec)
        create = getattr(loader, "create_module", None)
        module: ModuleType | None = None if create is None else create(spec)
        return module

    def exec_module(self, module: "ModuleType") -> None:
        """Run ``module`` with the loader found (where nothing created it here: a reload,
        a lazy loader)."""
        loader = self._find(getattr(module, "__spec__", None))
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = loader
        loader.exec_module(module)


class _Imported:
    """The loader of a module imported already: ``create_module`` gives it, as it is."""

    def __init__(self, module: "ModuleType") -> None:
        self.module = module
        self.spec = getattr(module, "__spec__", None)

    def create_module(self, spec: "ModuleSpec") -> "ModuleType":
        return self.module

    def exec_module(self, module: "ModuleType") -> None:
        # The import system set the module's __spec__ to the one given it: its own again.
        module.__spec__ = self.spec

    def __getattr__(self, name: str) -> "Any":
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(getattr(self.spec, "loader", None), name)  # the module's own loader's


def _coheriq_importing() -> bool:
    """Whether this thread is importing a module of coheriq (its body has not finished):
    accelerating would import coheriq half made. Another thread's import is waited for."""
    return any(
        getattr(getattr(module, "__spec__", None), "_initializing", False) and _importing(name)
        for name, module in list(sys.modules.items())
        if name == "coheriq" or name.startswith("coheriq.")
    )


def _importing(fullname: str) -> bool:
    """Whether this thread is importing ``fullname`` (holds the import system's lock of
    that module), rather than asking its spec (:func:`importlib.util.find_spec`).

    True where the import system's private records cannot tell: an import is the case
    this module's finder is called for.
    """
    locks = getattr(sys.modules.get("_frozen_importlib"), "_module_locks", None)
    if not isinstance(locks, dict):
        return True
    reference = locks.get(fullname)  # a weak reference, while someone holds the lock
    lock = reference() if callable(reference) else None
    return lock is not None and getattr(lock, "owner", get_ident()) == get_ident()


def _can_wait(named: list[tuple[str, str | None]]) -> bool:
    """Whether the acceleration of ``named`` can wait for their import: see the module's doc."""
    groups = set()
    for library, engine in named:
        if not library.isidentifier() or library in sys.modules:
            return False
        groups.add(f"coheriq.declarations.{library}")
        if engine is not None:
            groups.add(f"coheriq.engines.{library}")
    found = advertised_names(groups)
    return all(
        found.get(f"coheriq.declarations.{library}")
        and engine in (None, "reference", *found.get(f"coheriq.engines.{library}", ()))
        for library, engine in named
    )


def advertised_names(groups: set[str]) -> dict[str, set[str]]:
    """The entry-point names in each of ``groups`` (those that have any) of the distributions
    in :data:`sys.path`'s directories, read from their ``entry_points.txt``.

    A quick look, not :mod:`importlib.metadata`'s reading (several times slower): a
    distribution it cannot see (in a zip file, found by another finder) is missing.
    """
    found: dict[str, set[str]] = {}
    for entry in sys.path:
        directory = entry or os.curdir
        try:
            names = os.listdir(directory)
        except (OSError, TypeError, ValueError):  # a zip file, a missing directory
            continue
        for name in names:
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            try:
                with open(os.path.join(directory, name, "entry_points.txt"), "rb") as file:
                    text = file.read().decode("utf-8")
            except (OSError, ValueError):
                continue
            if "coheriq." not in text:
                continue
            section = None
            for line in text.splitlines():
                line = line.strip()
                if line.startswith("[") and line.endswith("]"):
                    section = line[1:-1].strip()
                elif section in groups and "=" in line and not line.startswith(("#", ";")):
                    found.setdefault(section, set()).add(line.partition("=")[0].strip())
    return found
