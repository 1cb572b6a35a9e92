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
from _thread import allocate_lock, get_ident

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType

__all__ = ["ENV", "Deferred", "parse_environment", "start"]

ENV = "COHERIQ_ACCELERATE"
"""The variable naming the libraries to accelerate: ``"statistics:numpy,cachetools"``."""

_lock = allocate_lock()
_started = False  # start has run (site may read the .pth file twice)
_activated = False  # the libraries are accelerated


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
    global _started
    if _started:
        return
    _started = True
    try:
        named = parse_environment(os.environ.get(ENV, ""))
        if named and _can_wait(named):
            sys.meta_path.insert(0, Deferred({library for library, _ in named}))
        elif named:
            activate()
    except Exception as error:  # a bug of coheriq's must not stop the interpreter
        print(f"coheriq: {ENV} could not be read: {type(error).__name__}: {error}", file=sys.stderr)


def activate() -> None:
    """Accelerate what :data:`ENV` names now (once; what cannot be done is said on stderr)."""
    global _activated
    with _lock:
        if _activated:
            return
        _activated = True
        # By name, as the start-up file did before this module: this module stands
        # outside coheriq's layers (loaded on its own, it imports nothing of coheriq's),
        # and activation imports it, for the variable's syntax.
        __import__("coheriq._outside.activation", fromlist=["*"]).from_environment()


class Deferred:
    """A meta path finder that accelerates the named libraries as the first of them is imported.

    For any other module it answers ``None`` at once. For a module of a named
    library it takes itself off :data:`sys.meta_path`, accelerates them (which
    puts coheriq's finder first), and answers what the finders after it answer;
    or, where accelerating imported that very module (coheriq uses it), a spec
    that gives the import that module instead of running it again.

    Where coheriq itself is being imported in this thread, and imports the
    module, it cannot accelerate then: the module is
    imported as without it, and the libraries are accelerated at the next import
    once coheriq is imported (the module is then marked in place, as a library
    imported before :func:`coheriq.accelerate`).
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
        """None, or, for a module of a named library, its spec once they are accelerated."""
        named = fullname.partition(".")[0] in self.libraries
        if not (named or self.waiting):
            return None
        if _coheriq_importing():
            self.waiting = True
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        before = fullname in sys.modules  # a reload, or a module put there by hand
        # The import system calls finders holding its global lock (fork waits for it),
        # so no other thread imports, nor forks, while coheriq is imported here.
        activate()
        if not named:
            return None
        if not before and fullname in sys.modules and _importing(fullname):
            # Accelerating imported it (coheriq or a module it uses imports it), and
            # marked it in place. Left in sys.modules, the import system would run it
            # again from its spec: it is taken out, and the spec's loader gives the
            # import system this module (the module's own spec is restored as it does).
            module = sys.modules.pop(fullname)
            return _spec_of_imported(module)
        for finder in list(sys.meta_path):
            find_spec = getattr(finder, "find_spec", None)
            if find_spec is None:
                continue
            spec: ModuleSpec | None = find_spec(fullname, path, target)
            if spec is not None:
                return spec
        return None

    def invalidate_caches(self) -> None:
        """Nothing is cached here (:func:`importlib.invalidate_caches` asks every finder)."""


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


def _spec_of_imported(module: "ModuleType") -> "ModuleSpec":
    """A spec whose loading gives ``module`` (imported already) back, unchanged."""
    from importlib.machinery import ModuleSpec  # imported with the import system

    own = getattr(module, "__spec__", None)
    return ModuleSpec(
        module.__name__,
        _Imported(module),  # type: ignore[arg-type]  # a loader by protocol
        origin=getattr(own, "origin", None),
        is_package=getattr(own, "submodule_search_locations", None) is not None,
    )


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
