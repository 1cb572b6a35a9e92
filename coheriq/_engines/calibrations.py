"""The user's calibrations: the crossovers ``coheriq calibrate`` measured, kept between runs.

One readable JSON file, ``crossovers.json``, in the user's cache folder (:func:`folder`): an
entry per library, engine and candidate, measured on this machine with this Python. An entry
holds the engine's version and coheriq's version it was measured with; under another version
it is *stale* and the engine's declared default holds until ``coheriq calibrate`` runs again.
Delete an entry, or the file, to forget a calibration. Nothing here measures anything.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
import sysconfig
import threading
from pathlib import Path

from .._stdlib import TYPE_CHECKING, after_fork_in_child
from ..exceptions import CoheriqCalibrationError

if TYPE_CHECKING:
    from typing import Any

FILE_NAME = "crossovers.json"
FOLDER_ENV = "COHERIQ_CACHE_DIR"
_ABOUT = (
    "Crossovers measured by `coheriq calibrate`, read by the engines that declare "
    "coheriq.crossover: below an entry's crossover, its engine passes a call on. An entry "
    "holds for the engine's and coheriq's versions it names, on this machine and Python. "
    "Delete an entry, or this file, to forget it."
)

_lock = threading.Lock()
_read: dict[Path, list[dict[str, Any]]] = {}  # path -> its entries, read once per process


def folder() -> Path:
    """Where the calibrations file lives: ``$COHERIQ_CACHE_DIR``, else the user's cache
    folder (``$XDG_CACHE_HOME/coheriq`` or ``~/.cache/coheriq``; ``~/Library/Caches/coheriq``
    on macOS; ``%LOCALAPPDATA%\\coheriq\\Cache`` on Windows)."""
    given = os.environ.get(FOLDER_ENV, "").strip()
    if given:
        return Path(given)
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / "coheriq" / "Cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "coheriq"
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(base) / "coheriq"


def path() -> Path:
    """The calibrations file (it may not exist yet)."""
    return folder() / FILE_NAME


def machine() -> str:
    """This machine, as an entry names it: its architecture, CPU count, and a digest of
    its host name (which the file does not hold)."""
    host = hashlib.sha256(platform.node().encode()).hexdigest()[:10]
    return f"{platform.machine() or 'unknown'}, {os.cpu_count() or 1} CPUs, host {host}"


def python_build() -> str:
    """This Python, as an entry names it (a free-threaded build times apart)."""
    free = " free-threaded" if sysconfig.get_config_var("Py_GIL_DISABLED") else ""
    return f"{platform.python_implementation()} {platform.python_version()}{free}"


def coheriq_version() -> str:
    """coheriq's version (read from the package, which every part of it is imported under)."""
    return str(sys.modules[__name__.partition(".")[0]].__version__)


def engine_version(module: str) -> tuple[str | None, str]:
    """The version of the code in ``module`` (an engine's), and the distribution it is read
    from: the installed distribution that holds the package, else None and the package's
    ``__version__``, else ``"unversioned"`` (then only coheriq's version and the machine
    make a calibration of it stale). Scans the installed distributions: calibration only."""
    from importlib import metadata

    top = module.partition(".")[0]
    for distribution in metadata.packages_distributions().get(top, ()):
        try:
            return distribution, f"{distribution} {metadata.version(distribution)}"
        except metadata.PackageNotFoundError:  # pragma: no cover - a half-removed install
            continue
    return None, _package_version(top)


def _package_version(top: str) -> str:
    version = getattr(sys.modules.get(top), "__version__", None)
    return f"{top} {version}" if isinstance(version, str) else "unversioned"


def still_current(entry: dict[str, Any], module: str) -> str | None:
    """Why ``entry`` no longer holds for the engine in ``module`` (another version of the
    engine or of coheriq), or None where it holds. Reads one distribution's version at most."""
    if entry.get("coheriq_version") != coheriq_version():
        return f"measured with coheriq {entry.get('coheriq_version')}, not {coheriq_version()}"
    distribution = entry.get("engine_distribution")
    if isinstance(distribution, str):
        from importlib import metadata

        try:
            current = f"{distribution} {metadata.version(distribution)}"
        except metadata.PackageNotFoundError:
            current = f"{distribution} not installed"
    else:
        current = _package_version(module.partition(".")[0])
    recorded = entry.get("engine_version")
    return None if recorded == current else f"measured with {recorded}, not {current}"


def entries() -> list[dict[str, Any]]:
    """The calibrations in the file, read once per process (an unreadable file raises
    :class:`CoheriqCalibrationError`; a missing one has none)."""
    where = path()
    with _lock:
        found = _read.get(where)
        if found is None:
            found = _read[where] = _load(where)
        return found


def _load(where: Path) -> list[dict[str, Any]]:
    try:
        text = where.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except OSError as error:
        raise CoheriqCalibrationError(
            f"coheriq cannot read the calibrations file {where}: {error}. Fix its "
            f"permissions, delete it, or point {FOLDER_ENV} at another folder."
        ) from None
    try:
        data = json.loads(text)
        found = data["crossovers"]
        if not isinstance(found, list) or not all(isinstance(e, dict) for e in found):
            raise TypeError("crossovers is not a list of entries")
    except (ValueError, KeyError, TypeError) as error:
        raise CoheriqCalibrationError(
            f"The calibrations file {where} is not one coheriq wrote ({error}). Delete it "
            f"(coheriq calibrate writes it again), or point {FOLDER_ENV} at another folder."
        ) from None
    return found


def find(library: str, engine: str, candidate: str) -> dict[str, Any] | None:
    """The calibration of ``engine``'s implementation of ``candidate`` measured on this
    machine with this Python, stale or not; else None."""
    key = {"library": library, "engine": engine, "candidate": candidate}
    here = {"machine": machine(), "python": python_build()}
    for entry in entries():
        if all(entry.get(k) == v for k, v in (key | here).items()):
            return entry
    return None


def store(new: list[dict[str, Any]]) -> Path:
    """Add ``new`` entries to the file, each replacing the one of its library, engine,
    candidate, machine and Python; write it whole (a reader never sees half a file)."""
    where = path()
    keys = ("library", "engine", "candidate", "machine", "python")
    with _lock:
        _read.pop(where, None)
        kept = [e for e in _load(where) if all(any(e.get(k) != n[k] for k in keys) for n in new)]
        text = json.dumps({"about": _ABOUT, "crossovers": kept + new}, indent=1) + "\n"
        try:
            where.parent.mkdir(parents=True, exist_ok=True)
            part = where.with_name(f".{FILE_NAME}.{os.getpid()}.{threading.get_ident()}")
            part.write_text(text, encoding="utf-8")
            os.replace(part, where)
        except OSError as error:
            raise CoheriqCalibrationError(
                f"coheriq cannot write the calibrations file {where}: {error}. Point "
                f"{FOLDER_ENV} at a folder you can write to."
            ) from None
    return where


def forget_read() -> None:
    """Read the file again at its next use (after it was written, or moved)."""
    with _lock:
        _read.clear()


@after_fork_in_child
def _reinit_lock_in_child() -> None:
    # A thread of the parent may have held the lock when it forked.
    global _lock
    _lock = threading.Lock()
