"""The notebooks under notebooks/ run from top to bottom and are stored without outputs.

Each notebook runs in a kernel of its own (a separate process), so the coheriq
world of this test process, isolated by conftest's autouse fixture, plays no part.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="executing the notebooks needs nbformat")
pytest.importorskip("nbclient", reason="executing the notebooks needs nbclient")
pytest.importorskip("ipykernel", reason="executing the notebooks needs ipykernel")
pytest.importorskip("matplotlib", reason="the notebooks draw with matplotlib")
from jupyter_client.manager import KernelManager  # noqa: E402 - after the skips above
from nbclient import NotebookClient  # noqa: E402

NOTEBOOKS_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))

# Appended to the executed copy only: which Python the kernel runs.
_PREFIX_PROBE = "import sys\nprint(sys.prefix, end='')"


class ThisPythonKernelManager(KernelManager):
    """Starts the "python3" kernel with the interpreter that runs the tests.

    A "python3" kernelspec found first elsewhere (in the user's Jupyter folder, say)
    could name another interpreter, one without coheriq and the example engines.
    """

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        return [
            sys.executable,
            "-m",
            "ipykernel_launcher",
            "-f",
            self.connection_file,
            *(extra_arguments or []),
        ]


def test_there_are_six_notebooks():
    assert [p.name for p in NOTEBOOKS] == [
        "01_quickstart.ipynb",
        "02_scoped_switching.ipynb",
        "03_diamond_inheritance.ipynb",
        "04_compiled_engine.ipynb",
        "05_class_candidates.ipynb",
        "06_laptop_cluster_gpu.ipynb",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_stored_without_outputs(path):
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code_cells
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "code":
            assert cell.outputs == [], f"cell {index} of {path.name} has outputs; clear them"
            assert cell.execution_count is None, f"cell {index} of {path.name} has a count"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path):
    notebook = nbformat.read(path, as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(_PREFIX_PROBE))
    client = NotebookClient(
        notebook,
        kernel_name="python3",
        kernel_manager_class=ThisPythonKernelManager,
        timeout=120,
        resources={"metadata": {"path": str(NOTEBOOKS_DIR)}},
    )
    client.execute()  # raises CellExecutionError, naming the cell, if any cell fails

    errors = [
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if output.output_type == "error"
    ]
    assert errors == []
    probe = notebook.cells[-1].outputs
    assert [o.get("text") for o in probe if o.output_type == "stream"] == [sys.prefix]
