"""Read the layout of coheriq's own modules from their source, for the docs and tests.

coheriq's modules sit in private packages, one for each step of a call
(:data:`PACKAGES`, bottom to top), above a few base modules and below the
public entry points. The design FAQ draws the packages with
:func:`print_packages` and the modules' layers with :func:`print_layers`; the
test suite checks the house rules (no cycle; no package imports one above it;
the parts of a domain never import it) with :func:`import_graph` and
:func:`upward_imports`. Imports under ``if TYPE_CHECKING:`` are left out;
function-local imports count: hiding a cycle in a function does not remove it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import coheriq

PACKAGE = Path(coheriq.__file__).parent


def modules() -> dict[str, Path]:
    """Every module of the package by its name below ``coheriq``: ``discovery``,
    ``_call.proxy``; the package's own ``__init__`` too (a subpackage's, which only
    says what its modules are, is left out)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__" and len(parts) > 1:
            continue
        found[".".join(parts)] = path
    return found


def package_of(module: str) -> str:
    """The private package ``module`` belongs to (``_call``), or ``""`` for a top-level one."""
    return module.rpartition(".")[0]


def imports_of(module: str, *, typing: bool = False) -> set[str]:
    """The coheriq modules that ``module`` imports at run time (names as :func:`modules`).

    With ``typing``, also those it imports for the type checker only.
    """
    known = modules()
    here = package_of(module).split(".") if package_of(module) else []
    found: set[str] = set()

    def add(target: str, names: list[str]) -> None:
        for name in names:  # `from .pkg import module`
            if f"{target}.{name}".strip(".") in known:
                found.add(f"{target}.{name}".strip("."))
        if target in known:
            found.add(target)

    class Visitor(ast.NodeVisitor):
        def visit_If(self, node: ast.If) -> None:
            if not typing and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
                for child in node.orelse:
                    self.visit(child)
                return
            self.generic_visit(node)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            names = [alias.name for alias in node.names]
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                add(".".join([*base, *(node.module.split(".") if node.module else [])]), names)
            elif node.module == "coheriq":
                add("", names)
            elif node.module and node.module.startswith("coheriq."):
                add(node.module.removeprefix("coheriq."), names)

        def visit_Import(self, node: ast.Import) -> None:
            for alias in node.names:
                if alias.name.startswith("coheriq."):
                    add(alias.name.removeprefix("coheriq."), [])

    Visitor().visit(ast.parse(known[module].read_text(encoding="utf-8")))
    return found - {module}


def import_graph(*, typing: bool = False) -> dict[str, set[str]]:
    """Module -> the coheriq modules it imports, for every module of the package."""
    return {module: imports_of(module, typing=typing) for module in modules()}


def layers(graph: dict[str, set[str]]) -> list[list[str]]:
    """The modules in layers: each imports only modules of the layers below it."""
    placed: dict[str, int] = {}

    def level(module: str) -> int:
        if module not in placed:
            placed[module] = 1 + max((level(m) for m in graph[module]), default=-1)
        return placed[module]

    for module in graph:
        level(module)
    rows: list[list[str]] = [[] for _ in range(max(placed.values()) + 1)]
    for module, row in sorted(placed.items()):
        rows[row].append(module)
    return rows


def print_layers() -> None:
    """Print the layers, top (what a user imports) to bottom (what needs nothing)."""
    rows = layers(import_graph())
    for number, row in reversed(list(enumerate(rows))):
        print(f"{number:>2}  {'  '.join(m for m in row if not m.startswith('__'))}")


# What every module may import: the standard library's stand-ins, the error tree,
# names and entry points.
BASE = ("_stdlib", "exceptions", "_names", "discovery")
# The steps of a call, bottom to top: each package imports only those before it.
PACKAGES = ("_call", "_choice", "_engines", "_library", "_api", "_tools", "_outside")


def rank(module: str) -> int:
    """0 for a base module, 1... for the packages in order, then the public entry points."""
    if module in BASE:
        return 0
    package = package_of(module)
    return 1 + PACKAGES.index(package) if package else len(PACKAGES) + 1


def upward_imports(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """The imports (module, imported) that reach a package above the importer's."""
    return {(m, i) for m, imported in graph.items() for i in imported if rank(i) > rank(m)}


def print_packages() -> None:
    """Print the packages, top (the public entry points) to bottom (the base)."""
    by_rank: dict[int, list[str]] = {}
    for module in modules():
        by_rank.setdefault(rank(module), []).append(module.rpartition(".")[2])
    names = ["base", *PACKAGES, "public"]
    for number in sorted(by_rank, reverse=True):
        shown = "  ".join(m for m in sorted(by_rank[number]) if not m.startswith("__"))
        print(f"{names[number]:<9} {shown}")
