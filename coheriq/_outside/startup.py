"""What ``COHERIQ_ACCELERATE`` and ``COHERIQ_PROFILE`` do as an interpreter starts (the
start-up ``.pth`` file loads it).

Standard library only, loaded without importing coheriq: :func:`start` checks the names against
the installed entry points and accelerates the libraries as the first of them is imported
(:class:`Deferred`), or at once where waiting is unsafe or unconfirmed; where
:data:`PROFILE_ENV` is set, it opens a profile of every thread, reported as the process
exits (:func:`profile_until_exit`)."""

# No `from __future__ import annotations`: every module imported here is one more in
# every process; annotations of names imported for type checkers are quoted.
import os
import sys
from _thread import RLock, get_ident

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType
    from typing import Any

ENV = "COHERIQ_ACCELERATE"
"""The variable naming the libraries to accelerate: ``"statistics:numpy,cachetools"``."""

PROFILE_ENV = "COHERIQ_PROFILE"
"""Profile the process, every thread, and report at its exit: ``1`` prints the profile on
standard error, a file path writes its JSON report there, ``1`` and a path joined by
:data:`os.pathsep` do both (``0`` or empty: nothing). Taken out of the environment at
start-up: a child process does not profile (a forked one does not report)."""

SAID_ENV = "_COHERIQ_ACCELERATE_SAID"
"""The libraries whose start-up message ``python -m coheriq run``'s own interpreter said
already (so the program's does not say it again); taken out of the environment at start-up."""

# How long an import waits for another thread's acceleration: two named libraries imported
# at once by two threads, where accelerating one imports the other, wait for each other in
# a way the import system's deadlock detection cannot see (this lock is not one of its own).
WAIT_SECONDS = 60.0

_lock = RLock()  # held while accelerating
_started = False  # site may read the .pth file twice
_activated = False
_deferred: "Deferred | None" = None  # on sys.meta_path until activated
_said: "set[str] | None" = None
_profile_request: "str | None" = None  # PROFILE_ENV's value, taken out of the environment


def parse_environment(value: str) -> list[tuple[str, str | None]]:
    """``"statistics:numpy,cachetools"`` -> ``[("statistics", "numpy"), ("cachetools", None)]``
    (one engine per library here; an ordered list goes in the library's own variable)."""
    items = [item.partition(":") for item in value.split(",") if item.strip()]
    return [(library.strip(), engine.strip() or None) for library, _, engine in items]


def start() -> None:
    """Accelerate what :data:`ENV` names: when one of its libraries is imported, or now.
    Never raises (an interpreter must start); runs once per process."""
    global _started, _deferred
    if _started:
        return
    _started = True
    said_before()
    profile_until_exit()  # first: coheriq is imported before any library waits for its import
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
    """The libraries :data:`SAID_ENV` names (taken out of the environment the first time)."""
    global _said
    if _said is None:
        _said = {name for name in os.environ.pop(SAID_ENV, "").split(",") if name}
    return _said


def take_profile_request() -> "str | None":
    """:data:`PROFILE_ENV`'s value, where the start-up file took it out of the environment;
    this process will not report its profile (``python -m coheriq run`` passes it on)."""
    if _profile_request is not None:
        import atexit

        atexit.unregister(_report)
    return _profile_request


def parse_profile(value: str) -> "tuple[bool, str | None]":
    """``"1"`` -> ``(True, None)``: print; ``"FILE"`` -> ``(False, "FILE")``: write the
    JSON report; ``"1" + os.pathsep + "FILE"`` -> ``(True, "FILE")``: both."""
    first, _, rest = value.partition(os.pathsep)
    if first == "1":
        return True, rest or None
    return False, value


def profile_file_problem(path: str) -> "str | None":
    """What stops a JSON report being written to ``path``, as a clause (``"is a
    directory"``), or None."""
    if os.path.isdir(path):
        return "is a directory"
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        return f"is in a directory that does not exist ({parent})"
    if not os.access(path if os.path.exists(path) else parent, os.W_OK):
        return "cannot be written: permission denied"
    return None


def profile_until_exit() -> None:
    """Where :data:`PROFILE_ENV` asks for it, profile every thread from now on and report at
    this process's exit (after the program's own ``atexit`` functions). Never raises."""
    global _profile_request
    value = os.environ.pop(PROFILE_ENV, "")
    if value in ("", "0"):
        return
    _profile_request = value
    try:
        to_stderr, path = parse_profile(value)
        if path is not None:
            path = os.path.abspath(path)  # the program may change its directory
            problem = profile_file_problem(path)
            if problem is not None:
                print(
                    f"coheriq: {PROFILE_ENV} names {path!r} for the profile's JSON report, "
                    f"which {problem}; the profile is printed on standard error instead. Name "
                    "a file in a directory that exists and can be written.",
                    file=sys.stderr,
                )
                to_stderr, path = True, None
        import atexit

        # By name, as activate imports: this module stands outside coheriq's layers.
        profile = __import__("coheriq._tools.profiling", fromlist=["*"]).profile(everywhere=True)
        profile.__enter__()
        atexit.register(_report, profile, to_stderr, path, os.getpid())
    except Exception as error:  # a bug of coheriq's must not stop the interpreter
        print(
            f"coheriq: {PROFILE_ENV} could not start a profile: {type(error).__name__}: {error}",
            file=sys.stderr,
        )


def _report(profile: "Any", to_stderr: bool, path: "str | None", pid: int) -> None:
    """Write ``profile``'s JSON report to ``path``, print it where ``to_stderr``: in the
    process that opened it only (a child made by ``os.fork`` exits through here too)."""
    stream = sys.stderr if sys.stderr is not None else sys.__stderr__
    if os.getpid() != pid or stream is None:
        return
    try:
        if path is not None:
            try:
                with open(path, "w", encoding="utf-8") as file:
                    file.write(profile.to_json() + "\n")
            except OSError as error:
                print(
                    f"coheriq: the profile could not be written to {path!r} ({error}); it is "
                    "printed here instead.",
                    file=stream,
                )
                to_stderr = True
        if to_stderr:
            print(f"coheriq: the profile of this process, every thread:\n{profile}", file=stream)
            stream.flush()
    except Exception as error:  # at exit: the program's status stays its own
        message = f"coheriq: the profile could not be reported: {type(error).__name__}: {error}"
        print(message, file=stream)


def activate(wait: bool = True) -> None:
    """Accelerate what :data:`ENV` names now, once (what cannot be done is said on stderr).
    Waits for another thread accelerating them (raising ImportError where it does not finish
    within :data:`WAIT_SECONDS`), or, with ``wait`` False, returns at once."""
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
        # By name: this module stands outside coheriq's layers (activation imports it).
        __import__("coheriq._outside.activation", fromlist=["*"]).from_environment()
    finally:
        _lock.release()


def spec_after(
    finder: object, fullname: str, path: "Sequence[str] | None", target: "ModuleType | None"
) -> "ModuleSpec | None":
    """The spec the finders after ``finder`` on :data:`sys.meta_path` find (all, if not on it)."""
    finders = list(sys.meta_path)
    for other in finders[finders.index(finder) + 1 :] if finder in finders else finders:
        find_spec = getattr(other, "find_spec", None)
        spec: ModuleSpec | None = None if find_spec is None else find_spec(fullname, path, target)
        if spec is not None:
            return spec
    return None


class Deferred:
    """A meta path finder that accelerates the named libraries as the first of them is imported,
    under that module's lock (its :class:`_Accelerating` loader), not the import system's global
    one. Where this thread is importing coheriq, the module imports unaccelerated, and the next
    import after it accelerates (marking that module in place)."""

    def __init__(self, libraries: set[str]) -> None:
        self.libraries = libraries
        self.waiting = False  # a named module was imported while coheriq was

    def __repr__(self) -> str:
        return f"<coheriq finder accelerating {sorted(self.libraries)} at their first import>"

    def find_spec(
        self, fullname: str, path: "Sequence[str] | None" = None, target: "ModuleType | None" = None
    ) -> "ModuleSpec | None":
        """None, or, for a module of a named library, its spec with an accelerating loader."""
        named = fullname.partition(".")[0] in self.libraries
        if not (named or self.waiting) or _activated:
            return None
        if _coheriq_importing():
            self.waiting = True
            return None
        spec = spec_after(self, fullname, path, target)
        loader = getattr(spec, "loader", None)
        if spec is not None and hasattr(loader, "exec_module") and hasattr(loader, "create_module"):
            spec.loader = _Accelerating(fullname, loader, named, (path, target))  # type: ignore[assignment]
        return spec


class _Accelerating:
    """The loader of a module imported while the libraries wait: its ``create_module``
    accelerates, then hands the module to the loader coheriq's finder gives it (or, for a
    module of no named library, the real one); where accelerating imported the module
    itself, that module is returned, run once."""

    def __init__(self, name: str, loader: "Any", named: bool, where: "tuple[Any, Any]") -> None:
        # where: the path and target that the finder was given, to find the module again
        self.name, self.loader, self.named, self.where = name, loader, named, where
        self.found: Any = None  # the loader this one stands for, once accelerated
        self.spec: ModuleSpec | None = None  # the spec found again, if any

    def __repr__(self) -> str:
        return f"<coheriq loader accelerating before {self.loader!r}>"

    def __getattr__(self, name: str) -> "Any":
        # get_code (runpy, for python -m), get_source, is_package, ...: the loader's own.
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.loader if self.found is None and not self.named else self._find(), name)

    def _find(self, spec: "ModuleSpec | None" = None) -> "Any":
        """Accelerate (once); the loader that loads the module from then on, put in ``spec``
        (with what comes with it) where ``spec``'s loader is this one."""
        if self.found is None:
            there = self.name in sys.modules  # a reload
            activate(wait=self.named)
            module = sys.modules.get(self.name)
            if module is not None and not there:  # accelerating imported it
                self.found = _Imported(module)
            else:
                if self.named:  # what coheriq's finder gives it now: a marking loader
                    again = spec_after(None, self.name, *self.where)
                    self.spec = again if getattr(again, "loader", None) is not None else None
                self.found = self.loader if self.spec is None else self.spec.loader
        if spec is not None and getattr(spec, "loader", None) is self:
            spec.loader = self.found
            if self.spec is not None:
                for attribute in _SPEC_PARTS:
                    setattr(spec, attribute, getattr(self.spec, attribute))
        return self.found

    def create_module(self, spec: "ModuleSpec") -> "ModuleType | None":
        """Accelerate, then what the loader found creates."""
        create = getattr(self._find(spec), "create_module", None)
        module: ModuleType | None = None if create is None else create(spec)
        return module

    def exec_module(self, module: "ModuleType") -> None:
        """Run ``module`` with the loader found (reached where nothing created it here)."""
        loader = self._find(getattr(module, "__spec__", None))
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = loader
        loader.exec_module(module)


_SPEC_PARTS = ("loader_state", "origin", "submodule_search_locations", "has_location", "cached")


class _Imported:
    """The loader of a module imported already: ``create_module`` gives it, as it is."""

    def __init__(self, module: "ModuleType") -> None:
        self.module, self.spec = module, getattr(module, "__spec__", None)

    def create_module(self, spec: "ModuleSpec") -> "ModuleType":
        return self.module

    def exec_module(self, module: "ModuleType") -> None:
        module.__spec__ = self.spec  # the import system set it to the one given it

    def __getattr__(self, name: str) -> "Any":
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(getattr(self.spec, "loader", None), name)


def _coheriq_importing() -> bool:
    """Whether this thread is running the body of a module of coheriq (accelerating now
    would use coheriq half made); another thread's import is waited for instead."""
    locks = getattr(sys.modules.get("_frozen_importlib"), "_module_locks", None)
    for name, module in list(sys.modules.items()):
        spec = getattr(module, "__spec__", None)
        if name.partition(".")[0] != "coheriq" or not getattr(spec, "_initializing", False):
            continue
        if not isinstance(locks, dict):  # the import system's private records cannot tell
            return True
        reference = locks.get(name)  # a weak reference to its lock, while someone holds it
        lock = reference() if callable(reference) else None
        if lock is not None and getattr(lock, "owner", get_ident()) == get_ident():
            return True
    return False


def _can_wait(named: list[tuple[str, str | None]]) -> bool:
    """Whether accelerating ``named`` can wait for their import: none is imported already,
    and the entry points seen here declare each library and advertise each engine."""
    if any(not library.isidentifier() or library in sys.modules for library, _ in named):
        return False
    found = advertised_names()
    return all(
        found.get(f"coheriq.declarations.{library}")
        and engine in (None, "reference", *found.get(f"coheriq.engines.{library}", ()))
        for library, engine in named
    )


def advertised_names() -> dict[str, set[str]]:
    """The entry-point names in each group ``coheriq.*`` of the distributions in :data:`sys.path`'s
    directories: several times faster than :mod:`importlib.metadata`, but misses a zip file's."""
    found: dict[str, set[str]] = {}
    for entry in sys.path:
        directory = entry or os.curdir
        try:
            names = [n for n in os.listdir(directory) if n.endswith((".dist-info", ".egg-info"))]
        except (OSError, TypeError, ValueError):  # a zip file, a missing directory
            continue
        for name in names:
            try:
                with open(os.path.join(directory, name, "entry_points.txt"), "rb") as file:
                    text = file.read().decode("utf-8")
            except (OSError, ValueError):
                continue
            section = ""
            for line in text.splitlines() if "coheriq." in text else ():
                line = line.strip()
                if line.startswith("[") and line.endswith("]"):
                    section = line[1:-1].strip()
                elif section.startswith("coheriq.") and "=" in line and line[0] not in "#;":
                    found.setdefault(section, set()).add(line.partition("=")[0].strip())
    return found
