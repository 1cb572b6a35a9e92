"""The notebooks under notebooks/ run from top to bottom and are stored without outputs.

Each notebook runs in a kernel of its own (a separate process), so the coheriq
world of this test process, isolated by conftest's autouse fixture, plays no part.
The docs build executes them too, and shows every output: so no output may be
written to stderr (a site shows it as an error) or name a path of this machine,
and a notebook that draws shows its chart as an image.
"""

from __future__ import annotations

import importlib.metadata
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="executing the notebooks needs nbformat")
pytest.importorskip("nbclient", reason="executing the notebooks needs nbclient")
pytest.importorskip("ipykernel", reason="executing the notebooks needs ipykernel")
pytest.importorskip("matplotlib", reason="the notebooks draw with matplotlib")
from jupyter_client.manager import KernelManager  # noqa: E402 - after the skips above
from nbclient import NotebookClient  # noqa: E402

pytestmark = pytest.mark.slow  # every notebook executed in a kernel: tens of seconds

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
NOTEBOOK_6 = NOTEBOOKS_DIR / "06_laptop_cluster_gpu.ipynb"

# Appended to the executed copy only: which Python the kernel runs.
_PREFIX_PROBE = "import sys\nprint(sys.prefix, end='')"


class ThisPythonKernelManager(KernelManager):
    """Starts the "python3" kernel with the interpreter that runs the tests.

    A "python3" kernelspec found first elsewhere (in the user's Jupyter folder, say)
    could name another interpreter, one without coheriq and the example engines.
    """

    python = sys.executable

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        return [
            self.python,
            "-m",
            "ipykernel_launcher",
            "-f",
            self.connection_file,
            *(extra_arguments or []),
        ]


def execute(path: Path, probe: str, python: str = sys.executable) -> nbformat.NotebookNode:
    """The notebook at ``path``, executed by ``python``, with a last cell ``probe`` added.

    Raises:
        CellExecutionError: A cell failed (the error names it).
    """
    notebook = nbformat.read(path, as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(probe))
    manager = type("KernelManager", (ThisPythonKernelManager,), {"python": python})
    client = NotebookClient(
        notebook,
        kernel_name="python3",
        kernel_manager_class=manager,
        timeout=120,
        resources={"metadata": {"path": str(NOTEBOOKS_DIR)}},
    )
    client.execute()
    return notebook


def outputs(notebook: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    """The outputs of the notebook's own cells (not of the probe, its last cell)."""
    cells = [cell for cell in notebook.cells[:-1] if cell.cell_type == "code"]
    return [output for cell in cells for output in cell.outputs]


def printed(notebook: nbformat.NotebookNode) -> str:
    """What the notebook's own cells printed, joined."""
    return "".join(o.text for o in outputs(notebook) if o.output_type == "stream")


def probed(notebook: nbformat.NotebookNode) -> list[str]:
    """What the probe (the last cell) printed."""
    return [o.get("text") for o in notebook.cells[-1].outputs if o.output_type == "stream"]


def python_without(distributions: list[str], directory: Path) -> Path:
    """The Python of a new virtual environment: this one's packages less ``distributions``.

    "Not installed" means, for coheriq's discovery, that no distribution on
    ``sys.path`` advertises the engine (an entry point in its metadata), and for
    Python that its modules cannot be imported. So the new environment's
    site-packages holds a link to each entry of this one's, except the files the
    distributions' RECORDs list (their modules and their ``.dist-info``): there is
    nothing to find, as after ``pip uninstall``, and no import is blocked or faked.
    Their dependencies (dask, JAX) stay, as they would after an uninstall.
    """
    site_packages = Path(sysconfig.get_path("purelib"))
    hidden: set[str] = set()
    for name in distributions:
        try:
            distribution = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue  # not installed here: nothing to hide
        if Path(distribution.locate_file("")) != site_packages:
            pytest.skip(f"{name} is installed outside {site_packages.name}; cannot hide it")
        hidden |= {file.parts[0] for file in distribution.files or () if file.parts[0] != ".."}
    venv.create(directory, symlinks=True, with_pip=False)
    scheme = {"base": str(directory), "platbase": str(directory)}
    target = Path(sysconfig.get_path("purelib", vars=scheme))
    for entry in site_packages.iterdir():
        if entry.name not in hidden and entry.name != "__pycache__":
            (target / entry.name).symlink_to(entry)
    return Path(sysconfig.get_path("scripts", vars=scheme)) / "python"


def test_there_are_seven_notebooks():
    assert [p.name for p in NOTEBOOKS] == [
        "01_quickstart.ipynb",
        "02_scoped_switching.ipynb",
        "03_diamond_inheritance.ipynb",
        "04_compiled_engine.ipynb",
        "05_class_candidates.ipynb",
        "06_laptop_cluster_gpu.ipynb",
        "07_outside.ipynb",
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
    notebook = execute(path, _PREFIX_PROBE)
    assert probed(notebook) == [sys.prefix]

    shown = outputs(notebook)
    assert [o for o in shown if o.output_type == "error"] == []
    stderr = [o.text for o in shown if o.output_type == "stream" and o.name == "stderr"]
    assert stderr == [], f"{path.name} writes to stderr, which the docs show as an error"
    text = printed(notebook) + "".join(
        o.get("data", {}).get("text/plain", "") for o in shown if o.output_type != "stream"
    )
    for local in {str(ROOT), sys.prefix, str(Path.home())}:
        assert local not in text, f"{path.name} shows a path of this machine"
    if "plt.show()" in "".join(cell.source for cell in notebook.cells):
        images = [o for o in shown if "image/png" in o.get("data", {})]
        assert images, f"{path.name} draws a chart, but shows no image"
    if path == NOTEBOOK_6:  # each engine gets a line: it runs here, or why it was skipped
        lines = printed(notebook).splitlines()
        for engine in ["compiled", "dask", "gpu"]:
            said = [line for line in lines if line.startswith(f"{engine:<9} ")]
            assert said, f"notebook 6 says nothing of {engine}"
            assert said[0].split(None, 1)[1].startswith(("runs here", "skipped: ")), said


def test_notebook_6_runs_without_dask_or_gpu(tmp_path):
    """Notebook 6 runs, and says why, where the dask and gpu engines are not installed.

    The kernel runs in a virtual environment made of this one's packages less the
    ragbatch-dask and ragbatch-gpu distributions (see :func:`python_without`):
    for coheriq and Python alike, they are simply not there.
    """
    python = python_without(["ragbatch-dask", "ragbatch-gpu"], tmp_path / "env")
    probe = (
        "import sys, coheriq\n"
        "from importlib.util import find_spec\n"
        "print(sys.prefix)\n"
        "print(find_spec('ragbatch_dask'), find_spec('ragbatch_gpu'))\n"
        "print(coheriq.available_engines('ragbatch'))"
    )
    notebook = execute(NOTEBOOK_6, probe, python=str(python))

    prefix, specs, engines = "".join(probed(notebook)).splitlines()
    assert Path(prefix).resolve() == (tmp_path / "env").resolve()  # the kernel ran there
    assert specs == "None None"
    assert "dask" not in engines and "gpu" not in engines and "compiled" in engines
    shown = outputs(notebook)
    assert [o for o in shown if o.output_type == "stream" and o.name == "stderr"] == []
    lines = printed(notebook).splitlines()
    assert "dask      skipped: not installed" in lines
    assert "gpu       skipped: not installed" in lines
    assert "engines in this notebook: reference, compiled" in lines
    assert [o for o in shown if "image/png" in o.get("data", {})], "no timing chart"
