"""The walkthroughs of docs/first_library.rst and docs/first_engine.rst, run.

Every file those pages show is in docs/examples/walkthrough/, and the pages show
it with ``literalinclude``. Most tests here install the library and the engine
package from those files with pip (offline: no build isolation, no dependencies,
no index) into a directory of their own, run the user's programs and the
library's test suite there in fresh interpreters, and compare what they print
with the output the pages show (also files there).

One test follows the pages as a newcomer does, command by command: a new virtual
environment, coheriq installed into it from this repository and pytest from the
package index, then the packages built by pip (which fetches their build backend
from the index). It needs the package index, and is skipped, saying so, where
pip cannot reach it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import NO_INDEX

pytestmark = pytest.mark.slow  # new venvs that follow the pages: tens of seconds

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
WALKTHROUGH = DOCS / "examples" / "walkthrough"
PAGES = ["first_library.rst", "first_engine.rst", "user_guide.rst"]
TIMEOUT = 120
PIP_TIMEOUT = 600  # a pip install that builds packages and downloads from the index


def _backend_missing() -> str | None:
    """Why pip cannot build the walkthrough's packages offline here, or None."""
    for project in ["mylib", "mylib-fast"]:
        text = (WALKTHROUGH / project / "pyproject.toml").read_text()
        backend = re.search(r'^build-backend = "([\w.]+)"', text, re.M)
        assert backend, f"{project}/pyproject.toml names no build backend"
        module = backend.group(1).split(".")[0]
        if importlib.util.find_spec(module) is None:
            return (
                f"{module}, the build backend of the walkthrough's pyproject.toml files, is not "
                f"installed here, and these tests build the packages offline with this "
                f"environment's own backend (pip install {module} to run them)"
            )
    return None


@dataclass
class Installed:
    """The walkthrough's packages, installed in ``target``."""

    target: Path
    work: Path

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a program that finds the packages in ``target``."""
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("COHERIQ_", "MYLIB_", "PYTEST_")) and k != "PYTHONPATH"
        }
        outer = os.environ.get("PYTHONPATH")
        env["PYTHONPATH"] = os.pathsep.join([str(self.target), *([outer] if outer else [])])
        env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        return {**env, **extra}

    def run(self, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        """Run this Python with ``args`` in the working directory, the packages on its path."""
        return subprocess.run(
            [sys.executable, *args],
            cwd=self.work,
            env=self.env(**extra),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )


def pip_install(installed: Installed, *projects: str) -> None:
    """``pip install`` the walkthrough's ``projects`` into the target, offline."""
    sources = []
    for project in projects:
        source = installed.work / "src" / project
        if not source.exists():  # a copy: building leaves nothing in the repository
            shutil.copytree(
                WALKTHROUGH / project, source, ignore=shutil.ignore_patterns("__pycache__")
            )
        sources.append(str(source))
    done = installed.run(
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-build-isolation",
        "--no-deps",
        "--no-index",
        "--upgrade",
        "--target",
        str(installed.target),
        *sources,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _fresh(tmp_path_factory) -> Installed:
    missing = _backend_missing()
    if missing:
        pytest.skip(missing)
    base = tmp_path_factory.mktemp("walkthrough")
    (base / "target").mkdir()
    (base / "work").mkdir()
    return Installed(base / "target", base / "work")


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    """The library and the engine package, installed as the pages say."""
    found = _fresh(tmp_path_factory)
    pip_install(found, "mylib", "mylib-fast")
    return found


@pytest.fixture
def nothing_installed(tmp_path_factory) -> Installed:
    """An empty target directory and a working directory for the programs."""
    return _fresh(tmp_path_factory)


def expected(name: str) -> str:
    return (WALKTHROUGH / name).read_text()


def succeeded(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


# -- the pages show what runs ---------------------------------------------------------


def _included() -> set[Path]:
    included = set()
    for page in PAGES:
        for path in re.findall(r"^\s*\.\. literalinclude:: (\S+)", (DOCS / page).read_text(), re.M):
            included.add((DOCS / path).resolve())
    return included


def test_the_pages_show_every_file_of_the_walkthrough():
    included = _included()
    shown = {p for p in included if WALKTHROUGH in p.parents}
    assert shown, "the pages include no file of docs/examples/walkthrough"
    assert all(p.is_file() for p in shown), sorted(p for p in shown if not p.is_file())
    files = {
        p.resolve()
        for p in WALKTHROUGH.rglob("*")
        if p.is_file()
        and "__pycache__" not in p.parts
        and p.name != "conftest.py"  # keeps the source tree's tests from being collected
        and p.stat().st_size > 0  # an empty __init__.py shows nothing
    }
    assert sorted(files - shown) == [], "files the pages do not show"


# -- the user's path -------------------------------------------------------------------


def test_the_library_alone(nothing_installed):
    """first_library.rst: the library installed by itself, its program and its suite."""
    pip_install(nothing_installed, "mylib")
    done = nothing_installed.run(str(WALKTHROUGH / "user" / "app.py"))
    assert succeeded(done) == expected("user/app.out")
    done = nothing_installed.run(
        "-m", "pytest", "-p", "no:cacheprovider", "-q", "--pyargs", "mylib.tests"
    )
    assert "5 passed" in succeeded(done)


def test_an_installed_engine_changes_nothing_until_it_is_chosen(installed):
    done = installed.run(str(WALKTHROUGH / "user" / "app.py"))
    assert succeeded(done) == expected("user/app.out")


def test_the_environment_variable_moves_the_whole_program(installed):
    done = installed.run(str(WALKTHROUGH / "user" / "app.py"), MYLIB_ENGINE="fast")
    assert succeeded(done) == expected("user/app-fast.out")


def test_blocks_enable_engine_and_coverage(installed):
    assert succeeded(installed.run(str(WALKTHROUGH / "user" / "switch.py"))) == expected(
        "user/switch.out"
    )


# -- the engine author's path --------------------------------------------------------


def _matches(output: str, shown: str) -> bool:
    """Whether ``output`` has the lines of ``shown`` in order; ``...`` stands for any lines.

    Durations and the ``=`` that pad pytest's lines to the terminal's width differ
    from run to run, and so do blank lines: they are left out of the comparison.
    """

    def norm(line: str) -> str:
        return re.sub(r" in [0-9.]+s\b", " in (time)", line.strip("= \n"))

    lines = iter(norm(line) for line in output.splitlines() if line.strip())
    want = [norm(line) for line in shown.splitlines() if line.strip()]
    for i, line in enumerate(want):
        if line == "...":
            continue
        if want[i - 1 : i] == ["..."]:
            if not any(got == line for got in lines):
                return False
        elif next(lines, None) != line:
            return False
    return True


def test_the_library_suite_passes_on_the_engine(installed):
    done = installed.run(
        "-m", "pytest", "-p", "no:cacheprovider", "--pyargs", "mylib.tests",
        "--coheriq-engine=mylib:fast",
    )  # fmt: skip
    output = succeeded(done)
    assert _matches(output, expected("mylib-fast/pytest.out")), output


PICKLE = """
import pickle, sys
import coheriq, mylib
with coheriq.using_engine("mylib", "fast"):
    sys.stdout.buffer.write(pickle.dumps(mylib.Histogram([0.1, 0.6])))
"""
UNPICKLE = """
import pickle, sys
histogram = pickle.loads(sys.stdin.buffer.read())  # imports mylib_fast, and nothing else
print(type(histogram).__qualname__, histogram.counts)
"""


def test_the_engine_module_imports_the_library_first(installed, tmp_path):
    """What the page says of ``import mylib``: without it, importing the engine first fails."""
    made = subprocess.run(
        [sys.executable, "-c", PICKLE],
        cwd=installed.work,
        env=installed.env(),
        capture_output=True,
        timeout=TIMEOUT,
        check=True,
    ).stdout
    unpickled = subprocess.run(
        [sys.executable, "-c", UNPICKLE],
        input=made,
        cwd=installed.work,
        env=installed.env(),
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert unpickled.returncode == 0, unpickled.stderr.decode()
    assert unpickled.stdout.decode() == "Fast.Histogram [1, 0, 1, 0]\n"

    # The same module without the line, found before the installed one, fails with
    # the error the page shows.
    page = (DOCS / "first_engine.rst").read_text()
    shown_error = next(
        line.strip() for line in page.splitlines() if "CoheriqEngineDomainNotFoundError:" in line
    )
    source = (WALKTHROUGH / "mylib-fast" / "mylib_fast.py").read_text()
    assert "\nimport mylib\n" in source
    (tmp_path / "mylib_fast.py").write_text(source.replace("\nimport mylib\n", "\n"))
    env = installed.env()
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env["PYTHONPATH"]])
    for code in ["import mylib_fast", UNPICKLE]:
        failed = subprocess.run(
            [sys.executable, "-c", code],
            input=made,
            cwd=installed.work,
            env=env,
            capture_output=True,
            timeout=TIMEOUT,
            check=False,
        )
        assert failed.returncode != 0
        assert shown_error.encode() in failed.stderr.splitlines(), failed.stderr.decode()


# -- the user guide's recipe for an engine installed while a program runs ---------------

LATE = """
import importlib, subprocess, sys
import coheriq, coheriq.discovery, mylib

print(coheriq.available_engines("mylib"))
pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-build-isolation", "--no-deps",
       "--no-index", "--upgrade", "--target", sys.argv[1], sys.argv[2]]
subprocess.run(pip, check=True)  # as if in another terminal, while this program runs
print(coheriq.available_engines("mylib"))  # read once per process: not yet

importlib.invalidate_caches()      # the import system looks at the directories again
coheriq.discovery.clear_cache()    # coheriq reads the package metadata again
print(coheriq.available_engines("mylib"))
coheriq.enable_engine("mylib", "fast")
print(mylib.normalize([1.0, 3.0]), coheriq.active_implementation("mylib"))
"""


def test_an_engine_installed_while_the_program_runs_is_found(nothing_installed):
    work = nothing_installed
    pip_install(work, "mylib")
    engine = work.work / "src" / "mylib-fast"
    shutil.copytree(WALKTHROUGH / "mylib-fast", engine)
    done = work.run("-c", LATE, str(work.target), str(engine))
    assert succeeded(done).splitlines() == [
        "()",
        "()",
        "('fast',)",
        "[0.25, 0.75] fast",
    ]


# -- the pages, followed in a new virtual environment -----------------------------------

# The commands of the pages' ``bash`` blocks, in the order a reader runs them, and
# what each prints: a file of docs/examples/walkthrough (``.out``), a line of its
# output, or nothing checked. Each is also looked for on its page, so that the page
# and this list cannot drift apart.
READER = [
    ("first_library.rst", "python -m venv .venv", None),
    ("first_library.rst", "source .venv/bin/activate", None),
    ("first_library.rst", "pip install /path/to/coheriq pytest", None),
    ("first_library.rst", "pip install ./mylib", None),
    ("first_library.rst", "python app.py", "user/app.out"),
    ("first_library.rst", "pytest --pyargs mylib.tests", "5 passed"),
    ("first_engine.rst", "pip install ./mylib ./mylib-fast", None),
    ("first_engine.rst", "MYLIB_ENGINE=fast python app.py", "user/app-fast.out"),
    ("first_engine.rst", "python switch.py", "user/switch.out"),
    (
        "first_engine.rst",
        "pytest --pyargs mylib.tests --coheriq-engine=mylib:fast",
        "mylib-fast/pytest.out",
    ),
]
CLONE = "/path/to/coheriq"  # what the pages write for the clone of this repository


def _bash_commands(page: str) -> list[str]:
    """The command lines of the ``.. code-block:: bash`` blocks of ``page``, comments cut."""
    commands, in_block = [], False
    for line in (DOCS / page).read_text().splitlines():
        if line.startswith(".. code-block:: bash"):
            in_block = True
        elif in_block and line and not line.startswith(" "):
            in_block = False
        elif in_block and line.strip():
            commands.append(re.sub(r"\s+#.*$", "", line.strip()))
    return commands


def test_the_pages_show_the_commands_the_reader_runs():
    for page in {page for page, _, _ in READER}:
        shown = _bash_commands(page)
        wanted = [command for where, command, _ in READER if where == page]
        assert [c for c in shown if c in wanted] == wanted, f"{page} shows {shown}"


def test_the_packages_require_the_first_coheriq_with_this_api():
    """Without the bound, pip may meet ``coheriq`` with an older coheriq from the index."""
    for project in ("mylib", "mylib-fast"):
        text = (WALKTHROUGH / project / "pyproject.toml").read_text()
        dependencies = re.search(r"^dependencies = \[(.*)\]$", text, re.M)
        assert dependencies, f"{project}/pyproject.toml has no one-line dependencies"
        coheriq = [d for d in re.findall(r'"([^"]+)"', dependencies.group(1)) if "coheriq" in d]
        assert coheriq == ["coheriq>=0.1"], f"{project}/pyproject.toml requires {coheriq}"


@dataclass
class Reader:
    """A reader of the pages: a directory, and the virtual environment made in it."""

    work: Path
    activated: bool = False

    @property
    def bin(self) -> Path:
        return self.work / ".venv" / ("Scripts" if os.name == "nt" else "bin")

    def env(self, **extra: str) -> dict[str, str]:
        """The reader's environment: nothing of this test run's, the venv once activated.

        A venv made without ``--system-site-packages`` reads neither the system's nor
        the user's site directory: what it has, the reader installed into it.
        """
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("COHERIQ_", "MYLIB_", "PYTEST_"))
            and k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")
        }
        env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        env["PIP_NO_INPUT"] = "1"
        if self.activated:  # what `source .venv/bin/activate` does
            env["VIRTUAL_ENV"] = str(self.work / ".venv")
            env["PATH"] = os.pathsep.join([str(self.bin), env.get("PATH", "")])
        return {**env, **extra}

    def run(self, command: str) -> subprocess.CompletedProcess[str]:
        """Run a command line of the pages, as a shell would in the reader's directory."""
        words = shlex.split(command.replace(CLONE, shlex.quote(str(ROOT))))
        assignments = {}
        while "=" in words[0]:
            name, value = words.pop(0).split("=", 1)
            assignments[name] = value
        env = self.env(**assignments)
        if words[0] == "python" and not self.activated:
            words[0] = sys.executable  # the reader's own Python makes the venv
        else:
            found = shutil.which(words[0], path=env["PATH"])
            assert found, f"{words[0]} is not on the PATH of: {command}"
            assert Path(found).parent == self.bin, f"{command} runs {found}, not the venv's"
            words[0] = found
        return subprocess.run(
            words,
            cwd=self.work,
            env=env,
            capture_output=True,
            text=True,
            timeout=PIP_TIMEOUT if words[0].endswith(("pip", "pip.exe")) else TIMEOUT,
            check=False,
        )

    def python(self, code: str) -> str:
        """What the venv's Python prints for ``code``."""
        return succeeded(
            subprocess.run(
                [str(self.bin / "python"), "-c", code],
                cwd=self.work,
                env=self.env(),
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
                check=False,
            )
        ).strip()


WHERE_COHERIQ_IS = """
import importlib.util, json
from importlib.metadata import PackageNotFoundError, distribution
if importlib.util.find_spec("coheriq") is None:
    print("none")
else:
    import coheriq
    try:
        url = json.loads(distribution("coheriq").read_text("direct_url.json") or "{}")
    except PackageNotFoundError:
        url = {}
    print(json.dumps([coheriq.__file__, coheriq.__version__, url.get("url")]))
"""


def test_a_newcomer_follows_the_pages_in_a_new_virtual_environment(tmp_path):
    """Both pages, in order, as written: a new venv, coheriq from the clone, pip builds."""
    import coheriq

    reader = Reader(tmp_path)
    # The files the reader writes (the pages show each of them).
    for project in ("mylib", "mylib-fast"):
        shutil.copytree(
            WALKTHROUGH / project,
            reader.work / project,
            ignore=shutil.ignore_patterns("__pycache__", "*.out"),
        )
    for program in ("app.py", "switch.py"):
        shutil.copy(WALKTHROUGH / "user" / program, reader.work / program)

    for page, command, shows in READER:
        if command.startswith("source "):
            reader.activated = True
            # A new environment: no coheriq in it, from anywhere, before the reader installs it.
            config = (reader.work / ".venv" / "pyvenv.cfg").read_text()
            assert "include-system-site-packages = false" in config, config
            assert reader.python(WHERE_COHERIQ_IS) == "none"
            continue
        done = reader.run(command)
        output = done.stdout + done.stderr
        if done.returncode != 0 and command.startswith("python -m venv"):
            pytest.skip(f"{command} failed here (no ensurepip?): {output[-500:]}")
        no_index = [line for line in output.splitlines() if any(s in line for s in NO_INDEX)]
        if done.returncode != 0 and command.startswith("pip ") and no_index:
            pytest.skip(
                f"pip cannot reach the package index here ({command}): {no_index[0].strip()}"
            )
        assert done.returncode == 0, f"{page}: {command}\n{output}"
        if command.startswith("pip "):
            # coheriq is the clone's, installed from it: pip met the packages'
            # coheriq>=0.1 with it, and took nothing from the index instead.
            where, version, url = json.loads(reader.python(WHERE_COHERIQ_IS))
            assert Path(where).resolve().is_relative_to((reader.work / ".venv").resolve()), where
            assert version == coheriq.__version__
            assert url == ROOT.as_uri(), url
        if shows is None:
            continue
        if not shows.endswith(".out"):
            assert shows in done.stdout, f"{page}: {command}\n{output}"
        elif command.startswith("pytest"):
            assert _matches(done.stdout, expected(shows)), f"{page}: {command}\n{output}"
        else:
            assert done.stdout == expected(shows), f"{page}: {command}\n{output}"
