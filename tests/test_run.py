"""``python -m coheriq run`` runs a program exactly as ``python`` does (docs/outside.rst).

Each test runs the same program with ``python`` and with ``python -m coheriq run
--engine shapes``, the library of ``test_outside`` declared by an engine package,
and compares what a user sees: output, tracebacks, exit status, the death by a
signal, ``__file__``, ``sys.path[0]`` and ``__main__``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import test_outside
from test_outside import lay_out

TIMEOUT = 60  # seconds; a program that never ends fails the test
RUN = ["-m", "coheriq", "run", "--engine", "shapes"]


def environment(where: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "COHERIQ_ACCELERATE" and "SHAPES" not in k}
    env["PYTHONPATH"] = os.pathsep.join([str(where), str(test_outside.ROOT)])
    return env


def both(where: Path, *program: str, **kw: Any) -> tuple[Any, Any]:
    """``program`` run by ``python`` and by ``python -m coheriq run``: (python's, the runner's)."""
    done = []
    for runner in ([], RUN):
        done.append(
            subprocess.run(
                [sys.executable, *runner, *program],
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
                env=environment(where),
                cwd=where,
                **kw,
            )
        )
    return done[0], done[1]


def script(where: Path, name: str, text: str) -> str:
    (where / name).parent.mkdir(parents=True, exist_ok=True)
    (where / name).write_text(textwrap.dedent(text))
    return name


@pytest.fixture
def where(tmp_path: Path) -> Path:
    return lay_out(tmp_path)


def test_the_program_runs_accelerated(where: Path) -> None:
    code = "import shapes, coheriq; print(coheriq.explain(shapes.area).engine)"
    done = subprocess.run(
        [sys.executable, "-m", "coheriq", "run", "--engine", "shapes:fast", "-c", code],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=environment(where),
        cwd=where,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "fast\n", "")


def endless_writer_status(where: Path, runner: list[str]) -> tuple[int, float]:
    """Run a program that prints until stopped into a reader that takes one line and
    leaves (``| head -1``): its exit status and how long it ran after the reader left.

    Each line is flushed: the status Python gives a buffered writer depends on where in
    its buffer the pipe broke (1 or 120 at random on a free-threaded 3.13)."""
    writer = script(where, "endless.py", "while True:\n    print('line', flush=True)\n")
    process = subprocess.Popen(
        [sys.executable, *runner, writer],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=environment(where),
        cwd=where,
    )
    assert process.stdout is not None
    assert process.stdout.readline() == b"line\n"
    process.stdout.close()  # the reader leaves
    left = time.monotonic()
    try:
        status = process.wait(timeout=20)
    finally:
        process.kill()
    return status, time.monotonic() - left


def test_a_writer_ends_when_its_reader_leaves_as_under_python(where: Path) -> None:
    python_status, _ = endless_writer_status(where, [])
    status, took = endless_writer_status(where, RUN)
    assert status == python_status
    assert took < 10


def test_an_uncaught_exception_prints_what_python_prints(where: Path) -> None:
    failing = script(
        where,
        "failing.py",
        """
        def inner():
            raise ValueError("no")

        inner()
        """,
    )
    python, runner = both(where, failing, "arg")
    assert runner.returncode == python.returncode == 1
    assert runner.stderr == python.stderr  # no coheriq or runpy frames
    hooked = script(
        where,
        "hooked.py",
        """
        import sys

        def hook(kind, error, tb):
            print("the program's hook:", kind.__name__, error)

        sys.excepthook = hook
        raise ValueError("no")
        """,
    )
    python, runner = both(where, hooked)
    assert python.stdout == "the program's hook: ValueError no\n"
    assert (runner.returncode, runner.stdout, runner.stderr) == (
        python.returncode,
        python.stdout,
        python.stderr,
    )


def _signals_as_at_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def statuses_after(where: Path, sleeper: str, sent: int) -> list[int]:
    """The exit status of ``sleeper`` (prints "ready", then sleeps) sent signal ``sent``
    once ready: under python, then under the runner."""
    statuses = []
    for runner in ([], RUN):
        process = subprocess.Popen(
            [sys.executable, *runner, sleeper],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=environment(where),
            cwd=where,
            # As at a terminal: a test run started in the background inherits SIGINT
            # ignored, and Python then keeps ignoring it.
            preexec_fn=_signals_as_at_a_terminal,
        )
        assert process.stdout is not None
        try:
            assert process.stdout.readline() == b"ready\n"
            process.send_signal(sent)
            process.wait(timeout=TIMEOUT)
        finally:
            process.kill()
            process.communicate()
        statuses.append(process.returncode)
    return statuses


@pytest.mark.skipif(sys.platform == "win32", reason="no signals to die by on Windows")
def test_ctrl_c_kills_the_program_by_sigint_as_under_python(where: Path) -> None:
    sleeper = script(
        where, "sleeper.py", "import time\nprint('ready', flush=True)\ntime.sleep(60)\n"
    )
    assert statuses_after(where, sleeper, signal.SIGINT) == [-signal.SIGINT, -signal.SIGINT]


SHOWS_WHERE = """
    import atexit, os, sys
    import shapes

    class Kept:
        pass

    def at_exit():
        main = sys.modules.get("__main__")
        print("at exit:", getattr(main, "Kept", None) is Kept)

    atexit.register(at_exit)
    print(__name__, __file__, sys.path[0] == os.getcwd(), sys.argv[1:])
    print("path[0]:", sys.path[0])
    """


@pytest.mark.slow
def test_file_path_argv_and_main_are_python_s(where: Path) -> None:
    script(where, "tool/shows.py", SHOWS_WHERE)
    script(where, "tool/__init__.py", "")
    script(where, "app/__main__.py", SHOWS_WHERE)
    for program in (["tool/shows.py", "a"], ["-m", "tool.shows", "-b"], ["app", "c"]):
        python, runner = both(where, *program)
        assert python.returncode == 0, python.stderr
        assert "at exit: True" in python.stdout
        assert (runner.returncode, runner.stdout, runner.stderr) == (
            0,
            python.stdout,
            python.stderr,
        ), program


@pytest.mark.parametrize(
    "program",
    [["-m", "missing_module"], ["-m", "shapes"], ["missing.py"], ["-m", "shapes.nothing"]],
)
def test_what_python_cannot_run_it_says_as_python(where: Path, program: list[str]) -> None:
    python, runner = both(where, *program)
    assert python.returncode != 0
    assert (runner.returncode, runner.stdout, runner.stderr) == (
        python.returncode,
        python.stdout,
        python.stderr,
    )


def test_interpreter_options_reach_the_program(where: Path) -> None:
    shows = script(where, "flags.py", "import sys\nprint(sys.flags.dev_mode, sys.warnoptions)\n")
    options = ["-X", "dev", "-W", "error"]
    python, runner = (
        subprocess.run(
            [sys.executable, *options, *runner, shows],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            env=environment(where),
            cwd=where,
        )
        for runner in ([], RUN)  # the options given to the interpreter that runs coheriq
    )
    assert python.stdout.startswith("True ")
    assert (runner.returncode, runner.stdout) == (0, python.stdout), runner.stderr


@pytest.mark.slow
def test_a_library_neither_declared_nor_adopting_gets_coheriq_accelerate_s_message(
    tmp_path: Path,
) -> None:
    # shapes installed, its engine package not: the message says what is missing.
    where = tmp_path
    for path, text in test_outside.SHAPES.items():
        script(where, path, text)
    test_outside.write_dist(where, "shapes", "1.0")
    for library in ("shapes", "shapse"):  # installed; misspelled
        said = []
        for command in (
            [*RUN[:-1], f"{library}:fast", "-c", "pass"],
            ["-c", "pass"],  # as COHERIQ_ACCELERATE says it
        ):
            env = environment(where)
            if command[0] == "-c":
                env["COHERIQ_ACCELERATE"] = f"{library}:fast"
            done = subprocess.run(
                [sys.executable, *command],
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
                env=env,
                cwd=where,
            )
            said.append(done.stderr)
        assert said[0].startswith("coheriq: error: ")
        assert "Known domains" not in said[0]
        message = said[0].removeprefix("coheriq: error: ")
        assert message in said[1]
        assert "no installed package declares its candidates" in message
