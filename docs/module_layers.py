"""Read the layout of coheriq's own modules from their source, for the docs and tests.

The design FAQ draws the layers with :func:`print_layers`; the test suite checks
the house rule (no cycle; the parts of a domain never import it) with
:func:`import_graph`. Imports under ``if TYPE_CHECKING:`` are left out;
function-local imports count: hiding a cycle in a function does not remove it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import coheriq

PACKAGE = Path(coheriq.__file__).parent


def imports_of(path: Path, *, typing: bool = False) -> set[str]:
    """The coheriq modules that the module at ``path`` imports at run time.

    With ``typing``, also those it imports for the type checker only.
    """
    found: set[str] = set()

    class Visitor(ast.NodeVisitor):
        def visit_If(self, node: ast.If) -> None:
            if not typing and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
                for child in node.orelse:
                    self.visit(child)
                return
            self.generic_visit(node)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            module = node.module or ""
            if node.level == 1:
                found.update([module.split(".")[0]] if module else [a.name for a in node.names])
            elif module == "coheriq":
                found.update(a.name for a in node.names)
            elif module.startswith("coheriq."):
                found.add(module.split(".")[1])

        def visit_Import(self, node: ast.Import) -> None:
            for alias in node.names:
                if alias.name.startswith("coheriq."):
                    found.add(alias.name.split(".")[1])

    Visitor().visit(ast.parse(path.read_text(encoding="utf-8")))
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    return {name for name in found if name in modules and name != path.stem}


def import_graph(*, typing: bool = False) -> dict[str, set[str]]:
    """Module -> the coheriq modules it imports, for every module of the package."""
    return {path.stem: imports_of(path, typing=typing) for path in sorted(PACKAGE.glob("*.py"))}


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
