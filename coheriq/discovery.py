"""Engines, statements and declarations that installed packages advertise through entry points.

An engine package declares, in its ``pyproject.toml``::

    [project.entry-points."coheriq.engines.mylib"]
    fast = "mylib_fast"            # or "mylib_fast.engine:Fast"

Listing reads package metadata (each group once per process) and imports nothing; loading
imports the one module named. A statement (:mod:`coheriq.statements`) or a declaration
(:mod:`coheriq._outside.declarations`) is a file beside a module (``MODULE:FILE``), read
without importing it.
"""

from __future__ import annotations

import sys
import time

from ._stdlib import INFO, TYPE_CHECKING, log
from .exceptions import CoheriqEngineLoadError, ended

if TYPE_CHECKING:
    from collections.abc import Iterator
    from importlib.metadata import EntryPoint
    from typing import Any

__all__ = [
    "DOMAINS_GROUP",
    "UnusableFileError",
    "advertised",
    "advertised_declarations",
    "advertised_domains",
    "advertised_statements",
    "clear_cache",
    "declaration_group_of",
    "describe",
    "engine_groups",
    "file_beside",
    "group_of",
    "load",
    "load_json",
    "module_of",
    "read_regular",
    "split_value",
    "statement_group_of",
]

DOMAINS_GROUP = "coheriq.domains"
"""Libraries may advertise the module that creates their domain here (name = domain)."""

_cache: dict[str, dict[str, EntryPoint]] = {}


def group_of(domain_name: str) -> str:
    """Return the entry-point group in which engines of ``domain_name`` advertise."""
    return f"coheriq.engines.{domain_name}"


def advertised(domain_name: str) -> dict[str, EntryPoint]:
    """Return the advertised engines of a domain by name, without importing any.

    Where two distributions advertise the same name, the one first on ``sys.path`` wins.
    """
    return _read(group_of(domain_name))


def statement_group_of(domain_name: str) -> str:
    """Return the entry-point group where engines of ``domain_name`` point to their statements."""
    return f"coheriq.statements.{domain_name}"


def advertised_statements(domain_name: str) -> dict[str, EntryPoint]:
    """Return the statements of a domain's engines by engine name (``MODULE:FILE`` values),
    reading metadata only; the first on ``sys.path`` wins."""
    return _read(statement_group_of(domain_name))


def declaration_group_of(library: str) -> str:
    """Return the entry-point group where packages declare candidates of ``library``."""
    return f"coheriq.declarations.{library}"


def advertised_declarations(library: str) -> dict[str, EntryPoint]:
    """Return the declarations of ``library``'s candidates by entry-point name (``MODULE:FILE``
    values; several packages may each declare it), importing nothing."""
    return _read(declaration_group_of(library))


def advertised_domains() -> dict[str, EntryPoint]:
    """Return the domains that libraries advertise in :data:`DOMAINS_GROUP`, importing none."""
    return _read(DOMAINS_GROUP)


def _read(group: str) -> dict[str, EntryPoint]:
    """The entry points of ``group`` by name, the first on ``sys.path`` winning; cached.
    Where :func:`importlib.metadata.entry_points` refuses, each distribution is read on its own."""
    found = _cache.get(group)
    if found is None:
        # Here, not at the top: a program that never looks for an engine never pays.
        from importlib.metadata import entry_points

        try:
            eps = list(entry_points(group=group))
        except Exception:  # a value or a distribution the reader refuses
            eps = list(_each_distribution(group, once=True))
        found = {}
        for ep in eps:
            found.setdefault(ep.name, ep)
        _cache[group] = found
    return found


def engine_groups() -> dict[str, list[EntryPoint]]:
    """Every ``coheriq.engines.<domain>`` group advertised: domain name -> its entry points,
    the first distribution on ``sys.path`` first; read leniently, as :func:`advertised` reads."""
    prefix = group_of("")
    groups: dict[str, list[EntryPoint]] = {}
    for ep in _each_distribution(None, once=False):
        if ep.group.startswith(prefix):
            groups.setdefault(ep.group[len(prefix) :], []).append(ep)
    return groups


def _each_distribution(group: str | None, *, once: bool) -> Iterator[EntryPoint]:
    """The entry points of ``group`` (None: of every group), one distribution at a time;
    with ``once``, a distribution found again further down ``sys.path`` is skipped.

    One whose entry points the reader refuses (a malformed value: Python 3.15 and the
    ``importlib_metadata`` backport refuse it) is read from its ``entry_points.txt``, so that
    its engines are listed and fail, when named, with a clear load error; one whose metadata
    cannot be read is skipped.
    """
    import re
    from importlib.metadata import distributions

    seen = set()
    for dist in distributions():
        try:
            if once:
                # Normalized as importlib.metadata does.
                name = re.sub(r"[-_.]+", "-", dist.metadata["Name"]).lower()
                if name in seen:
                    continue
                seen.add(name)
            try:
                found = [ep for ep in dist.entry_points if group in (None, ep.group)]
            except Exception:  # a value the reader refuses
                found = _read_leniently(dist, group)
        except Exception:  # unreadable metadata: not ours to fail on
            continue
        yield from found


def _read_leniently(dist: Any, group: str | None) -> list[EntryPoint]:
    """The entry points of ``group`` (None: of every group) in ``dist``'s ``entry_points.txt``,
    their values unchecked, so that loading a malformed one raises a clear error of coheriq's
    while the others still count; a line the format does not allow is left out."""
    from importlib.metadata import EntryPoint

    found, section = [], None
    for line in (dist.read_text("entry_points.txt") or "").splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
        elif section is not None and group in (None, section) and "=" in line:
            name, _, value = (part.strip() for part in line.partition("="))
            try:
                ep = EntryPoint(name, value, section)
            except ValueError:  # Python 3.15 checks the value: made as earlier versions make it
                ep = object.__new__(EntryPoint)
                vars(ep).update(name=name, value=value, group=section)
            attach = getattr(ep, "_for", None)  # how importlib.metadata ties it to dist
            found.append(attach(dist) if attach is not None else ep)
    return found


def clear_cache() -> None:
    """Forget what was read from package metadata (after installing a package)."""
    _cache.clear()


def _replace_cache(cache: dict[str, dict[str, EntryPoint]]) -> dict[str, dict[str, EntryPoint]]:
    """Install ``cache`` as what was read from metadata; return the one replaced."""
    global _cache
    replaced, _cache = _cache, dict(cache)
    return replaced


def module_of(ep: EntryPoint) -> str:
    """The module an entry point names (its whole value when that is malformed)."""
    try:
        return str(ep.module)
    except Exception:  # a malformed value has no module part
        return str(ep.value)


def describe(ep: EntryPoint) -> str:
    """Return ``ep`` as a reader would look for it: group, name, value, distribution."""
    dist = getattr(ep, "dist", None)
    where = f" of distribution {dist.name!r} {dist.version}" if dist is not None else ""
    return f"entry point {ep.name!r} = {ep.value!r} in group {ep.group!r}{where}"


def load(domain_name: str, engine_name: str, ep: EntryPoint, *, again: bool = False) -> Any:
    """Import what ``ep`` names and return it; with ``again``, reload its module first (its
    engine was defined for another copy of the domain). Raise a
    :class:`~coheriq.CoheriqEngineLoadError` where that fails."""
    start = time.perf_counter()
    try:
        if again:
            import importlib

            importlib.reload(sys.modules[module_of(ep)])
        loaded = ep.load()
    except Exception as exc:
        raise CoheriqEngineLoadError(
            f"Engine {engine_name!r} of domain {domain_name!r} could not be loaded from "
            f"{describe(ep)}: {type(exc).__name__}: {ended(exc)} The domain is unchanged; fix "
            "or reinstall that package, or choose another engine."
        ) from exc
    log(
        INFO,
        "loaded engine %r of domain %r from %s in %.1f ms",
        engine_name,
        domain_name,
        describe(ep),
        (time.perf_counter() - start) * 1e3,
    )
    return loaded


# -- files that entry points point to (MODULE:FILE) ------------------------------------

_MAX_BYTES = 1 << 20  # a statement or declaration is a few hundred bytes


class UnusableFileError(Exception):
    """What is wrong with a file an entry point names, as the end of a sentence."""


def split_value(value: str) -> tuple[str, str]:
    """``"MODULE:FILE"`` (an entry point's value) as its two parts, FILE relative, else raise
    :class:`UnusableFileError`."""
    module, colon, path = (part.strip() for part in value.partition(":"))
    if not colon or not path or not all(p.isidentifier() for p in module.split(".")):
        raise UnusableFileError(
            "its value is not MODULE:FILE (a module, and a file in the directory that "
            "holds it, such as 'mylib_fast:mylib_fast.coheriq.json')"
        )
    if path.startswith(("/", "\\")) or (len(path) > 1 and path[1] == ":"):
        raise UnusableFileError(f"its file {path!r} must be given relative to module {module!r}")
    return module, path


def _directories_of(module: str) -> list[str]:
    """The directories that hold ``module``, found by the import system without importing it
    or its parents (``find_spec`` takes the top-level name only; ``PathFinder`` the rest)."""
    import importlib.machinery
    import importlib.util
    import os

    parts = module.split(".")
    try:
        spec = importlib.util.find_spec(parts[0])
        for depth in range(1, len(parts)):
            if spec is None:
                break
            if not spec.submodule_search_locations:
                raise UnusableFileError(f"module {'.'.join(parts[:depth])!r} is not a package")
            inside = list(spec.submodule_search_locations)
            spec = importlib.machinery.PathFinder.find_spec(".".join(parts[: depth + 1]), inside)
    except UnusableFileError:
        raise
    except Exception as error:  # a finder that fails, a __spec__ of None: never ours to raise
        raise UnusableFileError(
            f"module {module!r} could not be found: {type(error).__name__}: {error}"
        ) from None
    if spec is None:
        raise UnusableFileError(f"module {module!r} is not installed")
    if spec.submodule_search_locations:  # a package: its own directory (or several)
        return list(spec.submodule_search_locations)
    if spec.has_location and spec.origin:
        return [os.path.dirname(spec.origin)]
    raise UnusableFileError(f"module {module!r} is not in a directory that could hold a file")


def file_beside(module: str, path: str) -> bytes:
    """The bytes of ``path`` beside ``module``."""
    import os

    for directory in _directories_of(module):
        try:
            return read_regular(os.path.join(directory, path), path)
        except FileNotFoundError:
            continue
    raise UnusableFileError(
        f"there is no file {path!r} in the directory of module {module!r} (is it in the "
        "package's data, so that it is installed?)"
    )


def read_regular(where: str, path: str) -> bytes:
    """The first ``_MAX_BYTES + 1`` bytes of file ``where`` (``path``, as a message names it),
    opened without waiting and read only if it is a regular file (a pipe or a device could
    make a read wait, or go on, for ever). Raise :class:`FileNotFoundError` where there is no
    such file, and :class:`UnusableFileError` where it cannot be read."""
    import os
    import stat

    try:
        descriptor = os.open(where, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        try:
            if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                raise UnusableFileError(f"its file {path!r} is not a regular file")
            with open(descriptor, "rb", closefd=False) as file:
                return file.read(_MAX_BYTES + 1)
        finally:
            os.close(descriptor)
    except FileNotFoundError:
        raise
    except IsADirectoryError:  # where a directory cannot be opened at all
        raise UnusableFileError(f"its file {path!r} is not a regular file") from None
    except OSError as error:
        raise UnusableFileError(f"its file {path!r} could not be read: {error.strerror}") from None


def load_json(data: bytes, path: str) -> object:
    """The JSON value of ``data``, read from file ``path`` (as a message names it); raise
    :class:`UnusableFileError` where it is larger than 1 MiB, or not JSON."""
    import json

    if len(data) > _MAX_BYTES:
        raise UnusableFileError(f"its file {path!r} is larger than {_MAX_BYTES} bytes")
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        raise UnusableFileError(f"its file {path!r} is not JSON ({error})") from None
