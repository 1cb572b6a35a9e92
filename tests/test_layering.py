"""The house rule of coheriq's layout: imports point one way, and no module reaches up.

The graph is read from the source by ``docs/module_layers.py``, the same code
that draws the layers in the design FAQ (imports under ``if TYPE_CHECKING:``
left out; function-local imports count).
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from typing import Any

import pytest

import coheriq

DOCS = Path(__file__).resolve().parent.parent / "docs"
PACKAGE = Path(coheriq.__file__).parent


def _layers() -> Any:
    spec = importlib.util.spec_from_file_location("module_layers", DOCS / "module_layers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _graph(*, typing: bool = False) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = _layers().import_graph(typing=typing)
    return graph


@pytest.mark.parametrize("typing", [False, True], ids=["at run time", "for types too"])
def test_the_imports_of_coheriq_have_no_cycle(typing: bool) -> None:
    # Imports for the type checker count too: a part of a domain describes what it
    # reads of its domain with a Protocol instead of importing coheriq.domain.
    graph = _graph(typing=typing)
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            cycle = [*path[path.index(module) :], module]
            raise AssertionError("import cycle: " + " -> ".join(cycle))
        if module in done:
            return
        for imported in sorted(graph[module]):
            visit(imported, [*path, module])
        done.add(module)

    for module in graph:
        visit(module, [])


def test_the_parts_of_a_domain_never_import_the_domain() -> None:
    # A domain owns its engines, its global choice and its scopes; they reach it
    # through the object that owns them, never by importing its module.
    graph = _graph(typing=True)
    parts = ("_engines.registry", "_choice.global_choice", "_choice.blocks")
    for part in (*parts, "_engines.meta", "_call.proxy", "_call.marked"):
        assert "_library.domain" not in graph[part], f"coheriq.{part} imports the domain"


def test_each_package_imports_only_the_packages_below_it() -> None:
    layers = _layers()
    assert sorted({layers.package_of(m) for m in layers.modules()} - {""}) == sorted(
        layers.PACKAGES
    )
    assert layers.upward_imports(_graph()) == set()


def test_an_engine_class_reaches_its_domain_through_a_narrow_seam() -> None:
    # meta.py reads no private attribute of a domain or of its engine registry.
    tree = ast.parse((PACKAGE / "_engines" / "meta.py").read_text(encoding="utf-8"))
    private = {
        ast.unparse(node)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and "domain" in ast.unparse(node.value)
    }
    assert not private, f"meta.py reaches into the domain: {sorted(private)}"
