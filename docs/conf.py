"""Sphinx configuration of coheriq's documentation."""

import sys
from pathlib import Path

import coheriq

# The docs' own helpers (module_layers) are importable from the pages' examples.
sys.path.insert(0, str(Path(__file__).parent))

project = "coheriq"
author = "coheriq developers"
copyright = "2026, coheriq developers"
release = coheriq.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",  # Google-style docstrings
    "sphinx.ext.doctest",  # `sphinx-build -b doctest` runs every Python example
    "sphinx.ext.viewcode",
    "myst_nb",  # the notebooks, rendered as stored (the test suite executes them)
]

exclude_patterns = ["_build", "examples", "Thumbs.db", ".DS_Store"]
nb_execution_mode = "off"
myst_heading_anchors = 2

html_theme = "furo"
html_title = f"coheriq {release}"

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_description_target = "documented"
autodoc_default_options = {"members": True, "show-inheritance": True}
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# Every doctest group of every page runs in a coheriq world of its own, so pages
# can each create "mylib" without meeting the others' domains.
doctest_global_setup = """
import coheriq
from coheriq.testing import isolated as _isolated
_world = _isolated()
_world.__enter__()
"""
doctest_global_cleanup = """
_world.__exit__(None, None, None)
"""


def _copy_notebooks(app: object) -> None:
    """Put the repository's notebooks where Sphinx looks for sources (docs/notebooks)."""
    import shutil
    from pathlib import Path

    here = Path(__file__).parent
    target = here / "notebooks"
    target.mkdir(exist_ok=True)
    for notebook in sorted((here.parent / "notebooks").glob("*.ipynb")):
        shutil.copyfile(notebook, target / notebook.name)


def setup(app: object) -> None:
    app.connect("config-inited", lambda app, config: _copy_notebooks(app))  # type: ignore[attr-defined]
