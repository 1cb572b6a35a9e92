"""The documentation cannot rot: its Python examples run.

Examples on the pages are ``testcode``/``doctest`` blocks, run by
``sphinx-build -b doctest`` in CI, or files included from ``docs/examples/``,
run here. This test also refuses Python shown in a block that nothing runs.
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

UNRUN_PYTHON = re.compile(r"^\s*\.\. (code-block|code|sourcecode)::\s*(python|py|pycon)\s*$", re.M)


def test_no_page_shows_python_that_nothing_runs():
    pages = sorted(DOCS.glob("*.rst"))
    assert pages
    offenders = [p.name for p in pages if UNRUN_PYTHON.search(p.read_text())]
    assert offenders == [], "use testcode/doctest blocks or literalinclude of a tested file"


def _installed_ragbatch_engines() -> list[str] | None:
    """The ragbatch engines installed here, or None without the ragbatch example."""
    listed = subprocess.run(
        [
            sys.executable,
            "-c",
            "import coheriq, ragbatch; print(*coheriq.available_engines('ragbatch'))",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return listed.stdout.split() if listed.returncode == 0 else None


@pytest.mark.slow
def test_included_examples_pass():
    engines = _installed_ragbatch_engines()
    if engines is None:
        pytest.skip("the ragbatch example is not installed (the README's test command installs it)")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", str(DOCS / "examples")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        # The gpu engine on JAX's CPU backend, so that its cases run on any machine.
        env={**os.environ, "RAGBATCH_GPU_PLATFORM": "cpu"},
    )
    assert done.returncode == 0, done.stdout[-3000:]
    # Per engine (the reference included): two cases; test_row_sum_is_exact passes on
    # the reference and is an expected failure elsewhere; one case runs once.
    n = 1 + len(engines)
    assert f"{2 * n + 2} passed, {n - 1} xfailed" in done.stdout, done.stdout[-1000:]


def test_readme_python_runs():
    """The README's Python blocks run, in a coheriq world of their own (conftest)."""
    blocks = re.findall(r"^```python\n(.*?)^```", (ROOT / "README.md").read_text(), re.S | re.M)
    assert blocks
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {"__name__": "readme"})


def _readme_command_after(mark: str) -> str:
    """The README's command after the first line that starts with ``mark``, as .ci/run
    reads the test command: the lines up to a blank one or the block's end (a line ending
    in a backslash goes on), joined with ``&&``."""
    lines = (ROOT / "README.md").read_text().splitlines()
    found = [i for i, line in enumerate(lines) if line.startswith(mark)]
    assert found, f"README.md has no line {mark!r}"
    commands, line = [], ""
    for text in lines[found[0] + 1 :]:
        if not text.strip() or text.startswith("```"):
            break
        line += text
        if line.endswith("\\"):
            line = line[:-1]
            continue
        commands.append(line)
        line = ""
    return " && ".join(commands)


def _words(command: str) -> list[str]:
    """The words bash runs for ``command``: its quotes removed, ``a{b,c}d`` expanded."""
    words = []
    for word in shlex.split(command):
        group = re.fullmatch(r"([^{}]*)\{([^{}]*,[^{}]*)\}([^{}]*)", word)
        words += [group[1] + alt + group[3] for alt in group[2].split(",")] if group else [word]
    return words


def test_the_readme_first_check_is_a_part_of_the_tests_that_ci_runs_whole():
    first = _words(_readme_command_after("# a first check"))
    left_out = [word.removeprefix("--ignore=") for word in first if word.startswith("--ignore=")]
    # Each file it leaves out exists: a renamed file would otherwise run unnoticed.
    assert left_out and all((ROOT / path).is_file() for path in left_out), left_out
    assert "tests/test_docs_build.py" in left_out  # minutes, and a new venv
    assert "COHERIQ_EXPECT_PROXY=compiled" in first and "--forked" not in first
    assert "'.[core-test]'" in _readme_command_after("# a first check")
    # The tests marked slow (a download, a soak) are left out.
    assert any(first[i : i + 2] == ["-m", "not slow"] for i in range(len(first)))
    # The test command (what .ci/run reads, after "# the tests") leaves out nothing.
    whole = _readme_command_after("# the tests")
    assert "'.[test]'" in whole and "--forked" in whole
    assert "--ignore" not in whole and "--hypothesis-profile" not in whole
    assert "not slow" not in whole  # the slow tests too


def test_ci_runs_the_readme_test_command():
    """.ci/run finds the same test command in the README as the checks above."""
    if shutil.which("bash") is None or shutil.which("awk") is None:
        pytest.skip("reading the command as .ci/run does takes bash and awk")
    if not (ROOT / ".ci" / "run").is_file():
        pytest.skip("no .ci/run here (an sdist carries no CI script): nothing to compare")
    run = (ROOT / ".ci" / "run").read_text()
    reads = re.search(r"^test_command=\$\(awk .*?README\.md\)$", run, re.S | re.M)
    assert reads, ".ci/run no longer reads its test command from the README"
    read = subprocess.run(
        ["bash", "-c", reads[0] + '\nprintf %s "$test_command"'],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert read.stdout == _readme_command_after("# the tests")


def test_the_readme_commands_install_the_example_packages_they_say():
    """The demo installs ragbatch and every engine but gpu; the tests every one."""
    engines = {path.name for path in (ROOT / "example").glob("ragbatch*") if path.is_dir()}
    assert {"ragbatch", "ragbatch-gpu"} <= engines

    def installed(mark: str) -> set[str]:
        paths = [w for w in _words(_readme_command_after(mark)) if w.startswith("./example/")]
        assert all((ROOT / path / "pyproject.toml").is_file() for path in paths), paths
        return {Path(path).name for path in paths}

    assert installed("# the demo") == engines - {"ragbatch-gpu"}
    assert installed("# the tests") == engines


def test_the_readme_links_lead_to_files_of_this_repository():
    readme = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#:]+)\)", readme)
    assert "docs/contributing.rst" in targets and "LICENSE" in targets
    assert [target for target in targets if not (ROOT / target).exists()] == []
