"""Sphinx configuration of coheriq's documentation."""

import json
import os
import sys
import tempfile
from pathlib import Path

import coheriq

HERE = Path(__file__).parent
# The docs' own helpers (module_layers, the pictures) are importable from the pages'
# examples, and their Sphinx extensions from docs/_ext.
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "_ext"))

from python_inventory import write_inventory  # noqa: E402 - after the path is set

from coheriq.testing import isolated  # noqa: E402

project = "coheriq"
author = "coheriq developers"
copyright = "2026, coheriq developers"
release = coheriq.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",  # Google-style docstrings
    "sphinx.ext.doctest",  # `sphinx-build -b doctest` runs every Python example
    "sphinx.ext.viewcode",
    "sphinx.ext.intersphinx",
    "matplotlib.sphinxext.plot_directive",  # the pictures, drawn by code at build time
    "myst_nb",  # the notebooks, executed by the build and shown with their outputs
    "command_output",  # docs/_ext: the output of a command, run at build time
    "coheriq.sphinx",  # each candidate's entry (the ragbatch page) lists its engines
]

exclude_patterns = ["_build", "examples", "_ext", "pictures", "Thumbs.db", ".DS_Store"]

# Every cross-reference must resolve (the build runs with -n -W). The Python
# standard library's inventory is written from the running interpreter
# (docs/_ext/python_inventory.py): the build has no network to download it.
nitpicky = True
intersphinx_mapping = {
    "python": (
        "https://docs.python.org/3",
        str(write_inventory(Path(tempfile.mkdtemp(prefix="coheriq-docs-")) / "python.inv")),
    )
}
# The type variables of the typed decorators (``F``: the decorated function or class,
# returned as it is) are no objects a page can document.
# pytest's fixture request has no inventory the build can read offline.
nitpick_ignore = [
    ("py:class", "F"),
    ("py:class", "T"),
    ("py:class", "C"),
    ("py:class", "_pytest.fixtures.FixtureRequest"),
    # The Sphinx extension's setup(app): Sphinx has no inventory the build can read offline.
    ("py:class", "sphinx.application.Sphinx"),
    # importlib.metadata.EntryPoint, imported for the type checker only: autodoc
    # sees the bare name.
    ("py:class", "EntryPoint"),
    # coheriq._tools.calibration's alias of a call, (args, kwargs), and the type variable
    # of coheriq.crossover's decorator, for the type checker only.
    ("py:class", "Call"),
    ("py:class", "Implementation"),
]

# The notebooks are executed by the build, in a kernel running this very Python
# (see _kernel_for_this_python), and shown with their outputs. "cache" executes a
# notebook again only when its code changed since the last build.
nb_execution_mode = "cache"
nb_execution_raise_on_error = True  # a cell that raises fails the build
nb_execution_timeout = 300
nb_execution_show_tb = True
nb_output_stderr = "warn"  # a notebook that writes to stderr fails the -W build
nb_kernel_rgx_aliases = {".*": "python3"}
myst_heading_anchors = 2

# The pictures (.. plot::): drawn by docs/pictures/*.py at build time, so they cannot
# drift from the code; no source link or extra formats under them.
plot_include_source = False
plot_html_show_source_link = False
plot_html_show_formats = False
plot_formats = [("png", 144)]
plot_rcparams = {"font.size": 10, "savefig.bbox": "tight"}

html_theme = "furo"
html_title = f"coheriq {release}"
html_static_path = ["_static"]
html_css_files = ["coheriq.css"]  # output blocks look like output, not like code

autodoc_member_order = "bysource"
# Types in the signatures: the typed decorators show their overloads there, and a
# "Return type" line would show the implementation's Any under them.
autodoc_typehints = "signature"
# No "members" default: with it, Sphinx 9 documents every member and ignores the
# explicit :members: lists of api.rst (which leave private helpers out).
autodoc_default_options = {"show-inheritance": True}
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
    """Put the repository's notebooks where Sphinx looks for sources (docs/notebooks).

    A notebook is copied only when it changed (so the execution cache and Sphinx's
    own stay valid), and a copy whose notebook is gone is removed.
    """
    import filecmp
    import shutil

    source, target = HERE.parent / "notebooks", HERE / "notebooks"
    target.mkdir(exist_ok=True)
    wanted = {path.name: path for path in source.glob("*.ipynb")}
    for stale in target.glob("*.ipynb"):
        if stale.name not in wanted:
            stale.unlink()
    for name, notebook in sorted(wanted.items()):
        copy = target / name
        if not copy.exists() or not filecmp.cmp(notebook, copy, shallow=False):
            shutil.copyfile(notebook, copy)


def _kernel_for_this_python() -> None:
    """Make the "python3" kernel that runs the notebooks this interpreter.

    A "python3" kernelspec found first elsewhere (in the user's Jupyter folder, say)
    could name another interpreter, one without coheriq and the example engines.
    JUPYTER_PATH comes first in Jupyter's search path.
    """
    folder = Path(tempfile.mkdtemp(prefix="coheriq-kernel-"))
    spec = folder / "kernels" / "python3"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    kernel = {"argv": argv, "display_name": "Python 3", "language": "python"}
    (spec / "kernel.json").write_text(json.dumps(kernel))
    os.environ["JUPYTER_PATH"] = os.pathsep.join(
        [str(folder), *filter(None, [os.environ.get("JUPYTER_PATH")])]
    )


_kernel_for_this_python()

# The examples show what a user who has measured nothing sees: the crossovers
# their engines declare, whatever `coheriq calibrate` stored on this machine.
os.environ["COHERIQ_CACHE_DIR"] = tempfile.mkdtemp(prefix="coheriq-calibrations-")


def _mark_test_outputs(app: object, doctree: object) -> None:
    """Give every ``testoutput`` block the "output" class, so it looks like output.

    The doctest extension renders them as plain literal blocks, like code.
    """
    from docutils import nodes

    for block in doctree.findall(nodes.literal_block):  # type: ignore[attr-defined]
        if block.get("testnodetype") == "testoutput":
            block["classes"].append("output")


# What the pages import while they are read (autodoc imports ragbatch for its page)
# is imported in a coheriq world of its own, dropped once every page is read: a
# doctest group's world (doctest_global_setup) then imports ragbatch afresh, and
# its domain with it, instead of finding the module imported already and the
# domain outside its world.
_reading_world = isolated()


def _leave_the_reading_world(app: object, env: object) -> None:
    _reading_world.__exit__(None, None, None)


def setup(app: object) -> None:
    app.connect("config-inited", lambda app, config: _copy_notebooks(app))  # type: ignore[attr-defined]
    app.connect("doctree-read", _mark_test_outputs)  # type: ignore[attr-defined]
    app.connect("builder-inited", lambda app: _reading_world.__enter__())  # type: ignore[attr-defined]
    app.connect("env-updated", _leave_the_reading_world)  # type: ignore[attr-defined]
