"""The IPython extension's ``%%coheriq_profile`` cell magic, in a real IPython shell.

``%load_ext coheriq.ipython`` registers it (beside ``%coheriq_accelerate``); the
cell runs inside a profile of every thread, printed after the cell, also where the
cell raises (then IPython shows the error, and the cell fails).
"""

from __future__ import annotations

import builtins
import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import coheriq

pytest.importorskip("IPython")


@pytest.fixture
def shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """An IPython shell with coheriq's extension loaded (its history in memory, its
    profile directory in ``tmp_path``); what IPython changes in the process is put back."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    config.InteractiveShell.colors = "nocolor"
    kept = (sys.displayhook, sys.excepthook, sys.modules.get("__main__"), set(vars(builtins)))
    shell = InteractiveShell.instance(config=config)
    try:
        shell.run_line_magic("load_ext", "coheriq.ipython")
        yield shell
    finally:
        shell.history_manager.end_session()
        InteractiveShell.clear_instance()
        sys.displayhook, sys.excepthook = kept[:2]
        if kept[2] is not None:
            sys.modules["__main__"] = kept[2]
        for name in set(vars(builtins)) - kept[3]:
            delattr(builtins, name)


def cell(shell: Any, capsys: pytest.CaptureFixture[str], source: str) -> tuple[Any, str]:
    """Run ``source`` as a cell: IPython's result, and what it printed (standard output,
    then standard error)."""
    result = shell.run_cell(source, store_history=True)
    captured = capsys.readouterr()
    return result, captured.out + captured.err


def test_the_magics_are_registered(shell: Any) -> None:
    magics = shell.magics_manager.magics
    assert "coheriq_profile" in magics["cell"]
    assert "coheriq_accelerate" in magics["line"]


def test_a_cell_runs_inside_a_profile_printed_after_it(
    shell: Any, capsys: pytest.CaptureFixture[str], lib: Any, two_engines: Any
) -> None:
    shell.user_ns["lib"] = lib
    coheriq.enable_engine(lib.name, "fast")
    result, out = cell(
        shell,
        capsys,
        "%%coheriq_profile -o prof\n"
        "for i in range(3):\n"
        "    lib.total([i])\n"
        "print('the cell prints')\n"
        "x = 5\n"
        "x * 2\n",
    )
    assert result.success, out
    assert result.result == 10  # the cell's value, shown as Out[...]
    assert shell.user_ns["x"] == 5  # the cell ran in the user's namespace
    printed, _, shown = out.partition("Out[")
    assert printed.startswith("the cell prints\n")  # the cell's output, then the profile
    assert f"{lib.name}.total" in printed and "fast" in printed
    recorded = shell.user_ns["prof"]
    assert isinstance(recorded, coheriq.Profile)
    assert [(r.candidate, r.engine, r.count) for r in recorded.rows] == [("total", "fast", 3)]
    assert str(recorded) in printed
    assert "10" in shown


def test_calls_in_threads_the_cell_starts_are_counted(
    shell: Any, capsys: pytest.CaptureFixture[str], lib: Any
) -> None:
    def work() -> None:
        for i in range(4):
            lib.total([i])

    shell.user_ns.update(work=work, threading=threading)
    cell(
        shell,
        capsys,
        "%%coheriq_profile -o prof\n"
        "threads = [threading.Thread(target=work) for _ in range(3)]\n"
        "for t in threads: t.start()\n"
        "for t in threads: t.join()\n",
    )
    assert [(r.candidate, r.count) for r in shell.user_ns["prof"].rows] == [("total", 12)]


def test_a_cell_that_raises_prints_the_profile_then_the_error(
    shell: Any, capsys: pytest.CaptureFixture[str], lib: Any
) -> None:
    shell.user_ns["lib"] = lib
    result, out = cell(
        shell,
        capsys,
        "%%coheriq_profile -o prof\nlib.total([1])\nraise ValueError('the cell failed')\n",
    )
    assert not result.success  # a notebook's "run all" stops here
    assert isinstance(result.error_in_exec, ValueError)
    profile, _, error = out.partition("Traceback")
    assert f"{lib.name}.total" in profile
    assert "ValueError: the cell failed" in error
    assert "raise ValueError('the cell failed')" in error  # the cell's own line
    assert "_run_cell" not in error  # the magic's frames are hidden
    assert [(r.candidate, r.count) for r in shell.user_ns["prof"].rows] == [("total", 1)]


def test_json_writes_the_report(
    shell: Any, capsys: pytest.CaptureFixture[str], lib: Any, tmp_path: Path
) -> None:
    shell.user_ns["lib"] = lib
    target = tmp_path / "p.json"
    result, _ = cell(shell, capsys, f"%%coheriq_profile --json {target}\nlib.total([1])\n")
    assert result.success
    report = json.loads(target.read_text(encoding="utf-8"))
    assert "schema" in report and lib.name in json.dumps(report)


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("--json {tmp}", "is a directory"),
        ("--json {tmp}/missing/p.json", "is in a directory that does not exist"),
        ("-o 1x", "-o '1x' is not a variable's name"),
        ("-o", "-o needs a value"),
        ("--quiet", "'--quiet' is not one of its options"),
        ("--json 'p.json", "No closing quotation"),
    ],
)
def test_bad_options_are_said_before_the_cell_runs(
    shell: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path, line: str, said: str
) -> None:
    result, out = cell(
        shell, capsys, f"%%coheriq_profile {line.format(tmp=tmp_path)}\nran = True\n"
    )
    assert not result.success
    assert "ran" not in shell.user_ns
    assert "UsageError" in out and said in out, out
