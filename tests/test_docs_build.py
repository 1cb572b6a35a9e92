"""The site builds as the contributing page says, from the ``docs`` extra and the examples alone.

Its documentation command makes a new virtual environment, installs the
``docs`` extra and the example packages into it (nothing of the ``test`` extra:
no pytest-forked, hypothesis or mypy), and builds the site with ``-W -n``, so
that a page that needs more (autodoc importing a module whose dependency is not
installed, a reference that does not resolve) fails it. One test runs that
command in a copy of this tree. It needs the package index, and is skipped,
saying so, where pip cannot reach it. It takes a few minutes, and runs where the
``test`` extra is installed (the README's test command, as CI runs it): the core
suite, installed with ``core-test`` on the other Pythons CI tests, skips it, and
the README's first check leaves this file out.
"""

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import NO_INDEX

pytestmark = pytest.mark.slow  # a new venv and the whole site built: minutes

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
DOCS_MARK = "# the documentation"  # the line before the command that builds the site

# Not source: what installs, builds and tools leave in the tree (see .gitignore).
NOT_COPIED_AT_THE_TOP = {".git", ".venv", ".ci", "build", "dist"}
NOT_COPIED = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis"}


def documented_command(mark: str) -> str:
    """The contributing page's command after the line ``mark``: its lines up to a blank
    one, joined with ``&&`` (as .ci/run reads the README's test command)."""
    lines = [line.strip() for line in (DOCS / "contributing.rst").read_text().splitlines()]
    assert mark in lines, f"docs/contributing.rst has no line {mark!r}"
    block = lines[lines.index(mark) + 1 :]
    return " && ".join(block[: block.index("")] if "" in block else block)


def _not_source(folder: str, names: list[str]) -> set[str]:
    where = Path(folder).resolve()
    ignored = {n for n in names if n in NOT_COPIED or n.endswith((".egg-info", ".so", ".pyd"))}
    if where == ROOT:
        ignored |= NOT_COPIED_AT_THE_TOP & set(names)
    elif where == DOCS:
        ignored |= {"_build", "notebooks"} & set(names)  # the build's, and its copies
    elif where.parent == ROOT / "example":
        ignored |= {"build", "dist"} & set(names)
    return ignored


def test_the_documentation_command_needs_only_the_docs_extra():
    command = documented_command(DOCS_MARK)
    assert command.startswith("python3 -m venv .venv && "), command
    assert "'.[docs]'" in command and "[test]" not in command and "[dev" not in command
    assert re.search(r"sphinx-build -W -n docs docs/_build/html$", command), command


def test_the_docs_build_from_the_docs_extra_and_the_examples_alone(tmp_path):
    """The documentation command, run in a copy of this tree: no warning.

    The environment is new and has what the command installs, nothing of the tests'
    (pytest-forked, hypothesis, mypy); the build runs with ``-W -n``, so a page that
    needs more (autodoc importing a module whose dependency is missing, a reference
    that does not resolve) fails it.
    """
    if os.environ.get("COHERIQ_PURE_PYTHON"):
        pytest.skip(
            "the site does not depend on the proxy: the README's first pytest run (the "
            "compiled proxy) builds it, and the second one does not again"
        )
    if importlib.util.find_spec("sphinx") is None:
        pytest.skip(
            "the site is built where the test extra is installed (the README's test "
            "command); the core suite (core-test) leaves it out"
        )
    clone = tmp_path / "coheriq"
    shutil.copytree(ROOT, clone, ignore=_not_source, symlinks=True)
    command = documented_command(DOCS_MARK).replace(
        "python3 -m venv", f"{shlex.quote(sys.executable)} -m venv", 1
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("COHERIQ_", "RAGBATCH_", "PYTEST_", "PIP_"))
        and k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "JUPYTER_PATH", "JAX_PLATFORMS")
    }
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    output = done.stdout + done.stderr
    no_index = [line for line in output.splitlines() if any(s in line for s in NO_INDEX)]
    if done.returncode != 0 and no_index:
        pytest.skip(f"pip cannot reach the package index here: {no_index[0].strip()}")
    if done.returncode != 0 and "ensurepip" in output:
        pytest.skip(f"python -m venv fails here (no ensurepip?): {output[-500:]}")
    assert done.returncode == 0, output[-5000:]  # -W: a warning is an error

    # The environment had only what the command installed: none of the test tools.
    python = clone / ".venv" / "bin" / "python"
    for module in ("hypothesis", "pytest_forked", "mypy"):
        probe = subprocess.run(
            [str(python), "-c", f"import {module}"], env=env, capture_output=True, check=False
        )
        assert probe.returncode != 0, f"{module} is installed in the docs environment"
    # ... and the pytest plugin's page is there, from its source.
    api = (clone / "docs" / "_build" / "html" / "api.html").read_text(encoding="utf-8")
    assert 'id="coheriq.pytest_plugin.coheriq_engine"' in api
