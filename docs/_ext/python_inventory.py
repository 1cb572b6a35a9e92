"""An intersphinx inventory of the Python standard library, made from the library itself.

The docs build must run without a network (CI has none), so it cannot download
``https://docs.python.org/3/objects.inv``. The Python documentation puts every
object at a predictable address: ``library/<module>.html#<module>.<name>``, the
built-in functions at ``library/functions.html#<name>``, the built-in exceptions
at ``library/exceptions.html#<name>``. This module writes an inventory with those
addresses for the modules the pages refer to, read from the running interpreter,
so a cross-reference such as :func:`inspect.signature` becomes a link to the
Python documentation, and a misspelt one fails the ``-n`` build as it should.

A module whose objects live on other pages than its own is listed in
``PAGES_OF`` (asyncio spreads over several).
"""

from __future__ import annotations

import builtins
import importlib
import inspect
import zlib
from pathlib import Path

# The standard-library modules the documentation refers to, and the modules next
# to them that a reader may meet in a signature.
MODULES = [
    "asyncio",
    "atexit",
    "collections.abc",
    "concurrent.futures",
    "contextlib",
    "contextvars",
    "copy",
    "dataclasses",
    "doctest",
    "enum",
    "fractions",
    "functools",
    "importlib",
    "importlib.metadata",
    "inspect",
    "io",
    "json",
    "logging",
    "multiprocessing",
    "os",
    "pathlib",
    "pickle",
    "statistics",
    "subprocess",
    "sys",
    "threading",
    "timeit",
    "types",
    "typing",
    "unittest.mock",
    "warnings",
    "weakref",
]

# Objects documented on a page other than their module's own.
PAGES_OF = {
    "asyncio.to_thread": "asyncio-task",
    "asyncio.run": "asyncio-runner",
    "asyncio.create_task": "asyncio-task",
    "asyncio.gather": "asyncio-task",
    "asyncio.Task": "asyncio-task",
}

# Built-in types documented in library/stdtypes.html rather than functions.html.
STDTYPES = {"dict", "frozenset", "list", "memoryview", "range", "set", "str", "tuple", "bytes"}


def _entries() -> list[tuple[str, str, str]]:
    """(name, domain:role, uri) for every object the inventory lists."""
    entries: list[tuple[str, str, str]] = []
    for name, value in vars(builtins).items():
        if name.startswith("_"):
            continue
        if isinstance(value, type) and issubclass(value, BaseException):
            entries.append((name, "py:exception", f"library/exceptions.html#{name}"))
        elif isinstance(value, type):
            page = "stdtypes" if name in STDTYPES else "functions"
            entries.append((name, "py:class", f"library/{page}.html#{name}"))
        elif callable(value):
            entries.append((name, "py:function", f"library/functions.html#{name}"))
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        page = f"library/{module_name}.html"
        entries.append((module_name, "py:module", f"{page}#module-{module_name}"))
        for name, value in vars(module).items():
            if name.startswith("_"):
                continue
            full = f"{module_name}.{name}"
            where = f"library/{PAGES_OF[full]}.html" if full in PAGES_OF else page
            if inspect.isclass(value):
                role = "py:exception" if issubclass(value, BaseException) else "py:class"
            elif inspect.isroutine(value):
                role = "py:function"
            else:
                role = "py:data"
            entries.append((full, role, f"{where}#{full}"))
    return entries


def write_inventory(path: Path) -> Path:
    """Write the inventory (Sphinx's objects.inv format, version 2) to ``path``."""
    header = (
        "# Sphinx inventory version 2\n"
        "# Project: Python\n"
        "# Version: 3\n"
        "# The remainder of this file is compressed using zlib.\n"
    )
    body = "".join(f"{name} {role} 1 {uri} -\n" for name, role, uri in sorted(_entries()))
    path.write_bytes(header.encode() + zlib.compress(body.encode()))
    return path
