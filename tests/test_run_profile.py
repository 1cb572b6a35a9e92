"""``python -m coheriq run --profile`` and ``--profile-json FILE`` (docs/tools.rst).

Each test runs a real program in a fresh interpreter: ``minilib``, a small library
that adopted coheriq (written here, with its engine ``fast``), or the example
library ``ragbatch`` with its installed engines. The program's output, exit status
and ``__main__`` stay its own; the profile comes on standard error (or in the file)
as the process exits, also after ``sys.exit``, an uncaught exception or Ctrl-C.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from test_outside import write_dist

TIMEOUT = 60  # seconds; a program that never ends fails the test
RUN = [sys.executable, "-m", "coheriq", "run"]
HEADER = "coheriq: the profile of this process, every thread:"

MINILIB = '''
    """A library that adopted coheriq: one candidate, ``double``."""
    import coheriq

    domain = coheriq.AccelerationDomain("minilib", env_prefix="MINILIB")

    @domain.acceleration_candidate
    def double(x):
        return 2 * x

    domain.materialize()
    '''

MINILIB_FAST = """
    import coheriq

    class Fast(coheriq.engine_class("minilib"), name="fast"):
        def double(self, x):
            return x + x
    """


@pytest.fixture
def where(tmp_path: Path) -> Path:
    """``minilib`` and its engine package ``minilib_fast``, installed in ``tmp_path``."""
    script(tmp_path, "minilib.py", MINILIB)
    script(tmp_path, "minilib_fast.py", MINILIB_FAST)
    write_dist(tmp_path, "minilib", "1.0")
    write_dist(tmp_path, "minilib_fast", "1.0", "[coheriq.engines.minilib]\nfast = minilib_fast\n")
    return tmp_path


def script(where: Path, name: str, text: str) -> str:
    (where / name).write_text(textwrap.dedent(text))
    return name


def environment(where: Path, **more: str) -> dict[str, str]:
    """This environment, less coheriq's variables and the libraries' own, plus ``more``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("COHERIQ_ACCELERATE", "COHERIQ_PROFILE", "MINILIB", "RAGBATCH"))
    }
    env["PYTHONPATH"] = str(where)
    return {**env, **more}


def run(where: Path, *command: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(command),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=environment(where, **env),
        cwd=where,
    )


def profile_in(stderr: str) -> str:
    """The profile printed at the end of ``stderr`` (what follows the header line)."""
    assert stderr.count(HEADER) == 1, stderr
    return stderr.partition(HEADER + "\n")[2]


def rows(profile: str) -> dict[tuple[str, str], int]:
    """The table's rows: (candidate, engine) -> calls (not a row per place, nor a line
    under the table: ``"minilib: all 11 calls on the reference implementation"``)."""
    found = {}
    for line in profile.splitlines()[1:]:
        words = line.split()
        if len(words) >= 3 and words[2].isdigit() and not words[0].endswith(":"):
            found[words[0], words[1]] = int(words[2].replace(",", ""))
    return found


COUNTS = """
    import sys
    import minilib

    for i in range(10):
        minilib.double(i)
    print("the program's output", minilib.double(21))
    """


def test_the_profile_comes_after_the_program_which_runs_as_under_python(where: Path) -> None:
    program = script(where, "counts.py", COUNTS)
    python = run(where, sys.executable, program, MINILIB_ENGINE="fast")
    done = run(where, *RUN, "--profile", program, MINILIB_ENGINE="fast")
    assert (done.returncode, done.stdout) == (0, python.stdout) == (0, "the program's output 42\n")
    assert done.stderr.startswith(HEADER), done.stderr  # nothing else on stderr
    profile = profile_in(done.stderr)
    assert rows(profile) == {("minilib.double", "fast"): 11}
    assert "minilib: 100% of 11 calls on fast" in profile


def test_engine_chooses_the_engine_of_an_adopted_library(where: Path) -> None:
    program = script(where, "counts.py", COUNTS)
    done = run(where, *RUN, "--engine", "minilib:fast", "--profile", program)
    assert done.returncode == 0, done.stderr
    assert rows(profile_in(done.stderr)) == {("minilib.double", "fast"): 11}
    done = run(where, *RUN, "--profile", program)  # no engine: the reference
    assert rows(profile_in(done.stderr)) == {("minilib.double", "reference"): 11}


@pytest.mark.parametrize(
    ("ending", "status"),
    [("sys.exit(3)", 3), ("raise SystemExit('stopped')", 1), ("raise ValueError('no')", 1)],
)
def test_the_exit_status_and_traceback_are_the_programs_own(
    where: Path, ending: str, status: int
) -> None:
    program = script(where, "ends.py", textwrap.dedent(COUNTS) + ending + "\n")
    python = run(where, sys.executable, program)
    done = run(where, *RUN, "--profile", program)
    assert (python.returncode, python.stdout) == (done.returncode, done.stdout)
    assert done.returncode == status
    said, _, _ = done.stderr.partition(HEADER)
    assert said == python.stderr  # the traceback, then the profile
    assert rows(profile_in(done.stderr)) == {("minilib.double", "reference"): 11}


def test_calls_in_threads_the_program_starts_are_counted(where: Path) -> None:
    program = script(
        where,
        "threads.py",
        """
        import threading
        from concurrent.futures import ThreadPoolExecutor
        import minilib

        def work():
            for i in range(5):
                minilib.double(i)

        threads = [threading.Thread(target=work) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        with ThreadPoolExecutor(3) as pool:
            list(pool.map(minilib.double, range(7)))
        """,
    )
    done = run(where, *RUN, "--profile", program, MINILIB_ENGINE="fast")
    assert done.returncode == 0, done.stderr
    assert rows(profile_in(done.stderr)) == {("minilib.double", "fast"): 4 * 5 + 7}


def test_calls_at_exit_are_counted_and_main_lasts_until_the_end(where: Path) -> None:
    program = script(
        where,
        "at_exit.py",
        """
        import atexit, sys
        import minilib

        class Kept:
            pass

        def at_exit():
            minilib.double(1)
            print("at exit:", getattr(sys.modules["__main__"], "Kept", None) is Kept)

        atexit.register(at_exit)
        print(__name__)
        """,
    )
    python = run(where, sys.executable, program)
    done = run(where, *RUN, "--profile", program)
    assert done.stdout == python.stdout == "__main__\nat exit: True\n"
    assert rows(profile_in(done.stderr)) == {("minilib.double", "reference"): 1}


def test_profile_json_writes_the_report_and_leaves_stderr_alone(where: Path) -> None:
    program = script(where, "counts.py", COUNTS)
    (where / "out").mkdir()
    for options, printed in ((["--profile-json", "out/p.json"], False),
                             (["--profile", "--profile-json=out/p.json"], True)):  # fmt: skip
        (where / "out" / "p.json").unlink(missing_ok=True)
        done = run(where, *RUN, *options, program, MINILIB_ENGINE="fast")
        assert (done.returncode, done.stdout) == (0, "the program's output 42\n")
        assert (HEADER in done.stderr) is printed
        if not printed:
            assert done.stderr == ""
        report = json.loads((where / "out" / "p.json").read_text(encoding="utf-8"))
        assert "schema" in report
        assert "minilib" in json.dumps(report) and "fast" in json.dumps(report)


def test_the_file_is_where_it_was_named_when_the_program_changes_directory(
    where: Path,
) -> None:
    (where / "elsewhere").mkdir()
    program = script(where, "moves.py", "import os, minilib\nos.chdir('elsewhere')\n")
    done = run(where, *RUN, "--profile-json", "p.json", program)
    assert done.returncode == 0, done.stderr
    assert (where / "p.json").is_file() and not (where / "elsewhere" / "p.json").exists()


@pytest.mark.parametrize(
    ("name", "said"),
    [("out", "is a directory"), ("missing/p.json", "is in a directory that does not exist")],
)
def test_a_file_that_cannot_be_written_is_said_before_the_program_runs(
    where: Path, name: str, said: str
) -> None:
    (where / "out").mkdir()
    program = script(where, "says.py", "print('it ran')\n")
    done = run(where, *RUN, "--profile-json", name, program)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"coheriq: error: run: --profile-json {name!r} {said}")
    assert "Give a file in a directory that exists" in done.stderr


@pytest.mark.skipif(sys.platform == "win32" or os.geteuid() == 0, reason="root may write anywhere")
def test_a_file_in_a_directory_that_cannot_be_written_is_said(where: Path) -> None:
    locked = where / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        done = run(where, *RUN, "--profile-json", "locked/p.json", "-c", "pass")
    finally:
        locked.chmod(0o700)
    assert done.returncode == 2
    assert "cannot be written: permission denied" in done.stderr


@pytest.mark.parametrize(
    ("words", "said"),
    [
        (["--profile"], "run needs a program to run"),
        (["--profile=yes", "-c", "pass"], "run: --profile takes no value"),
        (["--profile-json"], "run: --profile-json needs a value"),
        (["--profile-json", "a.json", "--profile-json", "b.json", "-c", "pass"], "given twice"),
        (["-c", "pass"], "run needs --engine LIB[:ENGINE] (repeatable), --profile or"),
    ],
)
def test_usage_errors_say_what_to_give(where: Path, words: list[str], said: str) -> None:
    done = run(where, *RUN, *words)
    assert done.returncode == 2
    assert done.stderr.startswith("coheriq: error: ") and said in done.stderr, done.stderr


def test_a_child_process_does_not_report_a_second_profile(where: Path) -> None:
    program = script(
        where,
        "children.py",
        """
        import os, subprocess, sys
        import minilib

        minilib.double(1)
        print("seen by the program:", os.environ.get("COHERIQ_PROFILE"), flush=True)
        subprocess.run([sys.executable, "-c", "import minilib; minilib.double(2)"], check=True)
        if hasattr(os, "fork"):
            child = os.fork()
            if child == 0:  # exits through sys.exit: its atexit functions run
                minilib.double(3)
                sys.exit(0)
            os.waitpid(child, 0)
        """,
    )
    done = run(where, *RUN, "--profile", program)
    assert (done.returncode, done.stdout) == (0, "seen by the program: None\n"), done.stderr
    assert rows(profile_in(done.stderr)) == {("minilib.double", "reference"): 1}


def test_the_variable_alone_profiles_python(where: Path) -> None:
    program = script(where, "counts.py", COUNTS)
    done = run(where, sys.executable, program, COHERIQ_PROFILE="1")
    assert rows(profile_in(done.stderr)) == {("minilib.double", "reference"): 11}
    done = run(where, sys.executable, program, COHERIQ_PROFILE=str(where / "missing" / "p.json"))
    assert "is in a directory that does not exist" in done.stderr  # and printed instead
    assert rows(profile_in(done.stderr)) == {("minilib.double", "reference"): 11}
    done = run(where, sys.executable, program, COHERIQ_PROFILE="0")
    assert (done.returncode, done.stderr) == (0, "")


def test_the_variable_passes_through_the_runner(where: Path) -> None:
    program = script(where, "counts.py", COUNTS)
    done = run(where, *RUN, "--engine", "minilib:fast", program, COHERIQ_PROFILE="1")
    assert done.returncode == 0, done.stderr
    assert rows(profile_in(done.stderr)) == {("minilib.double", "fast"): 11}


def _signals_as_at_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.skipif(sys.platform == "win32", reason="no signals to die by on Windows")
def test_ctrl_c_reports_the_profile_and_dies_by_sigint(where: Path) -> None:
    program = script(
        where,
        "sleeper.py",
        """
        import time
        import minilib

        minilib.double(1)
        print("ready", flush=True)
        time.sleep(60)
        """,
    )
    process = subprocess.Popen(
        [*RUN, "--profile", program],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(where),
        cwd=where,
        preexec_fn=_signals_as_at_a_terminal,  # a test run in the background ignores SIGINT
    )
    assert process.stdout is not None
    try:
        assert process.stdout.readline() == "ready\n"
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=TIMEOUT)
    finally:
        process.kill()
    assert process.returncode == -signal.SIGINT
    assert "KeyboardInterrupt" in stderr.partition(HEADER)[0]
    assert rows(profile_in(stderr)) == {("minilib.double", "reference"): 1}


RAGBATCH = """
    import ragbatch

    batch = ragbatch.from_flat([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [0, 2, 6])
    for _ in range(4):
        ragbatch.softmax(batch)
    print("done")
    """


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["numpy", "compiled"])
def test_ragbatch_on_its_installed_engines(where: Path, engine: str) -> None:
    if importlib.util.find_spec(f"ragbatch_{engine}") is None:  # found, not imported here
        pytest.skip(f"ragbatch's {engine} engine is not installed")
    program = script(where, "rag.py", RAGBATCH)
    chosen: list[tuple[list[str], dict[str, Any]]] = [
        (["--engine", f"ragbatch:{engine}"], {}),
        ([], {"RAGBATCH_ENGINE": engine}),  # the library's own variable
    ]
    for options, env in chosen:
        done = run(where, *RUN, *options, "--profile", program, **env)
        assert (done.returncode, done.stdout) == (0, "done\n"), done.stderr
        profile = profile_in(done.stderr)
        assert rows(profile)[("ragbatch.softmax", engine)] == 4
        assert f"ragbatch: 100% of 5 calls on {engine}" in profile
