"""The coheriq command line, run as a user runs it, on installed (throwaway) packages."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

LIBRARY = """
import coheriq

domain = coheriq.AccelerationDomain("clidom", env_prefix="CLIDOM")

@domain.acceleration_candidate
def scale(xs, factor=2.0):
    return [x * factor for x in xs]

@domain.acceleration_candidate
class Grid:
    def __init__(self, cells):
        self.cells = cells

domain.materialize()
"""

GOOD = """
import coheriq

class Good(coheriq.engine_class("clidom"), name="good"):
    def scale(self, xs, factor=2.0):
        return xs
"""

BAD = """
import coheriq

class Bad(coheriq.engine_class("clidom"), name="bad"):
    def scale(self, xs):  # lost the factor parameter
        return xs
"""


@pytest.fixture
def installed(make_dist, monkeypatch):
    monkeypatch.delenv("CLIDOM_ENGINE", raising=False)
    site = make_dist(
        "clidom_dist",
        {"clidom_lib": LIBRARY, "clidom_good": GOOD, "clidom_bad": BAD},
        {
            "coheriq.domains": {"clidom": "clidom_lib"},
            "coheriq.engines.clidom": {"good": "clidom_good", "bad": "clidom_bad"},
        },
    )
    return site


def coheriq(site, *args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "coheriq", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(site), **(env or {})},
        timeout=60,
        check=False,
    )


def coheriq_command(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -m coheriq ARGS`` with this environment plus ``env``."""
    return subprocess.run(
        [sys.executable, "-m", "coheriq", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )


def test_list_reads_metadata_only(installed):
    done = coheriq(installed, "list")
    assert done.returncode == 0, done.stderr
    assert "domain clidom (module clidom_lib, from clidom_dist 1.0)" in done.stdout
    assert "  engine bad: clidom_bad (clidom_dist 1.0)" in done.stdout
    data = json.loads(coheriq(installed, "list", "--json").stdout)
    assert sorted(data["domains"]["clidom"]["engines"]) == ["bad", "good"]


def test_show_imports_the_domain_and_tabulates(installed):
    done = coheriq(installed, "show", "clidom")
    assert done.returncode == 0, done.stderr
    assert "domain clidom: 2 candidates, environment variable CLIDOM_ENGINE" in done.stdout
    header, scale_row, grid_row = done.stdout.strip().splitlines()[-3:]
    assert header.split() == ["candidate", "reference", "bad", "good"]
    assert scale_row.split() == ["scale", "reference", "own", "own"]
    assert grid_row.split() == ["Grid", "reference", "reference", "reference"]
    data = json.loads(coheriq(installed, "show", "clidom", "--json").stdout)
    assert data["candidates"] == {"scale": "function", "Grid": "class"}
    assert data["domain"] == "clidom" and data["env_var"] == "CLIDOM_ENGINE"


def test_explain_follows_the_environment(installed):
    done = coheriq(installed, "explain", "clidom", env={"CLIDOM_ENGINE": "good"})
    assert done.returncode == 0, done.stderr
    assert "domain 'clidom' runs on engine 'good'" in done.stdout
    assert "CLIDOM_ENGINE='good'" in done.stdout
    data = json.loads(coheriq(installed, "explain", "clidom", "--json").stdout)
    assert data["engine"] == "reference" and data["settled"] is False


def test_explain_shows_what_an_ordered_choice_passes_over(installed):
    env = {"CLIDOM_ENGINE": "tpu,good,bad"}
    done = coheriq(installed, "explain", "clidom", env=env)
    assert done.returncode == 0, done.stderr
    assert "domain 'clidom' runs on engine 'good'" in done.stdout
    assert "tried: tpu: skipped, not installed; good: chosen" in done.stdout
    data = json.loads(coheriq(installed, "explain", "clidom", "--json", env=env).stdout)
    assert data["tried"] == [["tpu", "not installed"], ["good", "chosen"]]


@pytest.mark.slow
def test_check_fails_on_a_bad_override(installed):
    good = coheriq(installed, "check", "clidom", "good")
    assert good.returncode == 0 and "good: ok" in good.stdout
    every = coheriq(installed, "check", "clidom")
    assert every.returncode == 1
    assert "bad: error:" in every.stdout and "'factor' is missing" in every.stdout
    assert " ".join(every.stdout.split()).endswith(
        "Checked domain 'clidom': 1 module, 2 candidates, 2 engines, 0 statements. 1 problem: "
        "engine 'bad'."
    )
    data = json.loads(coheriq(installed, "check", "clidom", "--json").stdout)
    assert data["problems"] == 1 and data["engines"]["good"] == {"ok": True}
    assert data["engines"]["bad"]["ok"] is False and "'factor'" in data["engines"]["bad"]["error"]


def test_errors_are_one_line_with_exit_code_2(installed):
    done = coheriq(installed, "show", "nosuchdomain")
    assert done.returncode == 2
    assert done.stderr.startswith("coheriq: error: There is no coheriq domain named")
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    usage = coheriq(installed, "frobnicate")
    assert usage.returncode == 2 and "invalid choice" in usage.stderr


def test_version_is_one_number_everywhere(tmp_path):
    from importlib.metadata import version

    package = sys.modules["coheriq"].__version__  # the name `coheriq` is the helper above
    done = coheriq(tmp_path, "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"coheriq {package}"
    assert version("coheriq") == package


STARTLESS = """
import coheriq

class Gpu(coheriq.engine_class("clidom"), name="gpu"):
    def __init__(self):
        raise RuntimeError("no GPU found")
"""


def test_explain_says_when_the_variable_names_no_engine(installed):
    done = coheriq(installed, "explain", "clidom", env={"CLIDOM_ENGINE": "godo"})
    assert done.returncode == 2
    assert "no engine named 'godo'" in done.stderr and "Did you mean 'good'" in done.stderr
    assert "None" not in done.stdout


def test_explain_imports_the_engine_the_variable_names_and_tabulates_it(installed):
    done = coheriq(installed, "explain", "clidom", env={"CLIDOM_ENGINE": "good"})
    assert done.returncode == 0, done.stderr
    assert "supplied by:" in done.stdout and "scale  good" in done.stdout


def test_explain_and_check_start_say_when_an_engine_cannot_start_here(installed, make_dist):
    make_dist("clidom_gpu_dist", {"clidom_gpu": STARTLESS}, {
        "coheriq.engines.clidom": {"gpu": "clidom_gpu"},
    })  # fmt: skip
    done = coheriq(installed, "explain", "clidom", env={"CLIDOM_ENGINE": "gpu"})
    assert done.returncode == 2
    assert "failed to start" in done.stderr and "no GPU found" in done.stderr
    assert coheriq(installed, "check", "clidom", "gpu").returncode == 0  # loads fine
    started = coheriq(installed, "check", "clidom", "gpu", "good", "--start")
    assert started.returncode == 1
    assert "gpu: error: Engine 'gpu' of domain 'clidom' failed to start" in started.stdout
    assert "good: ok, started" in started.stdout
    assert "2 engines, 0 statements. 1 problem: engine 'gpu'." in " ".join(started.stdout.split())


def test_explain_takes_a_candidate_as_module_dot_name(installed):
    done = coheriq(installed, "explain", "clidom_lib.scale")
    assert done.returncode == 0, done.stderr
    assert "candidate 'scale' of domain 'clidom'" in done.stdout
    wrong = coheriq(installed, "explain", "clidom_lib.nothing")
    assert wrong.returncode == 2 and "neither a coheriq domain nor a candidate" in wrong.stderr


@pytest.mark.slow
def test_json_before_or_after_the_command_and_errors_as_json(installed):
    before = json.loads(coheriq(installed, "--json", "list").stdout)
    after = json.loads(coheriq(installed, "list", "--json").stdout)
    assert before == after and "clidom" in before["domains"]
    failed = coheriq(installed, "--json", "show", "nosuchdomain")
    assert failed.returncode == 2
    assert json.loads(failed.stdout)["kind"] == "CoheriqDomainNotFoundError"


def test_a_library_that_raises_at_import_is_one_line(make_dist, monkeypatch):
    site = make_dist("raising_dist", {"raising_lib": "raise RuntimeError('broken at import')\n"},
                     {"coheriq.domains": {"raising": "raising_lib"}})  # fmt: skip
    done = coheriq(site, "show", "raising")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "RuntimeError: broken at import" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_closed_pipe_is_no_traceback(installed):
    # As `coheriq list | head -1` once head has gone: the reading end is closed.
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "coheriq", "list"],
            stdout=write,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(installed)},
            timeout=60,
            check=False,
        )
    finally:
        os.close(write)
    assert done.stderr.decode() == ""
    assert done.returncode == 0  # as the command would have: a reader leaving is no failure


def test_a_mistyped_domain_gets_a_did_you_mean_from_what_is_installed(installed):
    done = coheriq(installed, "show", "clidmo")
    assert done.returncode == 2
    assert "Installed packages advertise 'clidom'" in done.stderr
    assert "Did you mean 'clidom'?" in done.stderr


# -- coheriq explain reads a list in <PREFIX>_ENGINE as the first call does -----------------


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("nosuch,other", "None of the engines 'nosuch', 'other'"),
        ("good,good", "names 'good' more than once"),
        ("good,,reference", "has an empty item"),
        (" ", "CLIDOM_ENGINE is set to ' ', which names"),
    ],
)
def test_explain_reads_the_variable_as_the_first_call_does(installed, value, said):
    # The domain installed here, not the example's ragbatch: a fresh clone has not
    # installed the example.
    done = coheriq(installed, "explain", "clidom", env={"CLIDOM_ENGINE": value})
    out = " ".join((done.stdout + done.stderr).split())
    assert said in out, out
    assert "that is not a valid engine name" not in out and ".." not in out
    assert "Traceback" not in out


# -- coheriq explain MODULE.NAME says what went wrong in one line, JSON too -----------------


@pytest.mark.parametrize(
    ("subject", "said"),
    [
        ("raising_lib.f", "Importing module 'raising_lib', to find candidate 'f', raised"),
        (".x", "is neither a coheriq domain nor a candidate"),
        ("..x", "is neither a coheriq domain nor a candidate"),
    ],
)
def test_explain_of_a_bad_subject_is_one_line_and_json(make_dist, subject, said):
    site = make_dist("raising_dist", {"raising_lib": "raise RuntimeError('boom')\n"}, {})
    for json_flag in ([], ["--json"]):
        done = coheriq_command(*json_flag, "explain", subject, PYTHONPATH=str(site))
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr
        if json_flag:
            assert said in json.loads(done.stdout or done.stderr)["error"]
        else:
            assert said in done.stderr and len(done.stderr.strip().splitlines()) == 1


# -- one malformed entry_points.txt does not break coheriq list -----------------------------


def test_list_copes_with_a_malformed_entry_points_file(make_dist):

    site = make_dist(
        "fine_dist", {"fine_engine": "pass\n"}, {"coheriq.engines.fine": {"fast": "fine_engine"}}
    )
    broken = make_dist("broken_dist", {}, {})
    (broken / "broken_dist-1.0.dist-info" / "entry_points.txt").write_text(
        "[coheriq.engines.fine]\nthis line has no equals sign\nslow = broken_engine\n[oops\n"
    )
    for json_first in ([], ["--json"]):
        done = coheriq_command(*json_first, "list", PYTHONPATH=str(site))
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
    engines = json.loads(done.stdout)["domains"]["fine"]["engines"]
    assert engines["fast"]["module"] == "fine_engine"


# -- a reader that leaves early does not change the exit status -----------------------------


@pytest.mark.parametrize(("command", "status"), [(["list"], 0), (["show", "nosuchdomain"], 2)])
@pytest.mark.slow
def test_a_closed_pipe_is_not_a_failure(command, status):

    for _ in range(5):  # early or late, as the timing falls
        process = subprocess.Popen(
            [sys.executable, "-m", "coheriq", *command],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=os.environ.copy(),
        )
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()  # the reader is gone before the first line
        errors = process.stderr.read().decode()
        assert process.wait(timeout=120) == status, errors
        assert "Traceback" not in errors and "BrokenPipe" not in errors


# -- a broken engine in show ----------------------------------------------------------------

CRASHING = """
raise RuntimeError("libclidom.so.1 is missing")
"""


@pytest.fixture
def with_broken(installed, make_dist):
    """Two more engines of clidom: one whose module raises, one whose entry point names nothing."""
    make_dist("clidom_broken_dist", {"clidom_crashing": CRASHING}, {
        "coheriq.engines.clidom": {"crashing": "clidom_crashing", "misnamed": "clidom_nowhere"},
    })  # fmt: skip
    return installed


def test_show_marks_a_broken_engine_and_tabulates_the_rest(with_broken):
    done = coheriq(with_broken, "show", "clidom", env={"COLUMNS": "1000"})
    assert done.returncode == 1, done.stderr  # as check with a problem: the report, then 1
    assert "Traceback" not in done.stderr
    lines = done.stdout.splitlines()
    header = next(line for line in lines if line.startswith("candidate"))
    table = lines[lines.index(header) : lines.index(header) + 3]
    assert [row.split() for row in table] == [
        ["candidate", "reference", "bad", "crashing", "good", "misnamed"],
        ["scale", "reference", "own", "broken", "own", "broken"],
        ["Grid", "reference", "reference", "broken", "reference", "broken"],
    ]
    crashing, misnamed = lines[-2:]  # one line each, sorted, after the table
    assert crashing.startswith("crashing: broken: Engine 'crashing' of domain 'clidom' could not")
    assert "RuntimeError: libclidom.so.1 is missing" in crashing
    assert misnamed.startswith("misnamed: broken: ") and "'clidom_nowhere'" in misnamed
    assert "choose another engine" in misnamed  # what to do, not only what went wrong


def test_show_json_gives_each_engine_its_state(with_broken):
    done = coheriq(with_broken, "show", "clidom", "--json")
    assert done.returncode == 1
    data = json.loads(done.stdout)
    assert data["engines"]["good"] == {"ok": True, "source": "imported"}
    crashing = data["engines"]["crashing"]
    assert crashing["ok"] is False and "libclidom.so.1 is missing" in crashing["error"]
    assert "\n" not in crashing["error"]
    assert data["coverage"]["scale"]["crashing"] == "broken"
    assert data["coverage"]["scale"]["good"] == "own"
    assert data["problems"] == 2


# -- JSON: the same conventions in every command --------------------------------------------


def _engine_lists(data):
    """Every list of engines in a command's JSON (keys of engine maps and coverage rows)."""
    for domain in data.get("domains", {}).values():
        yield list(domain["engines"])
    if isinstance(data.get("engines"), dict):
        yield list(data["engines"])
    for row in data.get("coverage", {}).values():
        assert next(iter(row)) == "reference"  # the reference first, as in the table
        yield list(row)[1:]


@pytest.mark.parametrize(
    ("args", "status"),
    [
        (["list"], 0),
        (["show", "clidom"], 1),
        (["explain", "clidom"], 0),
        (["explain", "clidom_lib.scale"], 0),
        (["check", "clidom", "good", "crashing", "bad"], 1),
        (["check", "clidom", "--start"], 1),
        (["show", "nosuchdomain"], 2),
        (["frobnicate"], 2),
    ],
)
def test_every_command_prints_json_the_same_way(with_broken, args, status):
    done = coheriq(with_broken, "--json", *args, env={"CLIDOM_ENGINE": "good"})
    assert done.returncode == status, done.stderr
    data = json.loads(done.stdout)  # one JSON document, whatever the outcome
    assert done.stdout == json.dumps(data, indent=2) + "\n"  # indented alike everywhere
    lists = list(_engine_lists(data))
    assert all(names == sorted(names) for names in lists), lists
    if status == 2:
        assert set(data) == {"error", "kind"} and data["error"].endswith(".")
    elif args[0] != "explain":
        assert lists and ["bad", "crashing", "good"] in [n[:3] for n in lists]
    if args[0] in ("show", "check") and status != 2:
        # show says where each engine's column came from (its class or its statement).
        keys = {"ok", "error", "started", "source"}
        assert all(set(state) <= keys for state in data["engines"].values())


def test_a_usage_error_is_json_under_json_and_suggests_help(installed):
    done = coheriq(installed, "--json", "show")
    assert done.returncode == 2
    error = json.loads(done.stdout)
    assert error["kind"] == "UsageError" and "DOMAIN" in error["error"]
    assert "coheriq show --help" in error["error"]
    assert "usage: coheriq show" in done.stderr


def test_an_import_option_naming_no_module_is_a_sentence(installed):
    done = coheriq(installed, "show", "clidom", "--import", "clidom_typo")
    assert done.returncode == 2
    assert "The module 'clidom_typo' that --import names could not be imported" in done.stderr
    assert "Check its name, or install the package" in done.stderr


@pytest.mark.parametrize(
    ("module", "said"),
    [
        (
            "clidom_missing",
            "verify: there is no module 'clidom_missing' to run with -m (No module named "
            "'clidom_missing'). Check its name, or install the package that provides it.",
        ),
        (
            "clidom_pkg",
            "verify: 'clidom_pkg' is a package without a __main__ module, so -m cannot run it. "
            "Name the module of it to run (-m clidom_pkg.NAME), or give the package a "
            "__main__.py.",
        ),
        (
            "clidom_nowhere.tool",
            "verify: module 'clidom_nowhere.tool' could not be found (ModuleNotFoundError: No "
            "module named 'clidom_nowhere'). Check its name, or install the package that "
            "provides it.",
        ),
    ],
)
def test_verify_of_a_module_that_cannot_run_is_one_line(installed, module, said):
    # Where `python -m MODULE` prints one line, so does verify: no traceback of its own.
    (installed / "clidom_pkg").mkdir()
    (installed / "clidom_pkg" / "__init__.py").write_text("")
    done = coheriq(installed, "verify", "clidom", "good", "-m", module, env={"COLUMNS": "1000"})
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"coheriq: error: {said}\n"
    as_json = coheriq(installed, "--json", "verify", "clidom", "good", "-m", module)
    assert json.loads(as_json.stdout) == {"error": said, "kind": "UsageError"}


# -- wrapping text to the terminal's width --------------------------------------------------


def _fits(lines, width):
    """Each line is at most ``width`` columns, unless it is a single unbreakable word."""
    return all(len(line) <= width or " " not in line.strip() for line in lines)


def test_text_is_wrapped_to_columns_with_a_hanging_indent(installed):
    wide = coheriq(installed, "check", "clidom", env={"COLUMNS": "1000"}).stdout.splitlines()
    narrow = coheriq(installed, "check", "clidom", env={"COLUMNS": "50"}).stdout.splitlines()
    message = next(line for line in wide if line.startswith("bad: error:"))
    assert len(message) > 100 and len(narrow) > len(wide)
    assert _fits(narrow, 50)
    start = narrow.index(next(line for line in narrow if line.startswith("bad: error:")))
    continued = narrow[start + 1 : narrow.index("good: ok")]
    assert continued and all(line.startswith("  ") for line in continued)
    assert " ".join(line.strip() for line in narrow[start : start + 1 + len(continued)]) == message


def test_without_a_terminal_or_columns_text_is_wrapped_to_80(installed, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    done = coheriq(installed, "explain", "clidom", env={"CLIDOM_ENGINE": "tpu,good"})
    lines = done.stdout.splitlines()
    assert _fits(lines, 80) and max(map(len, lines)) > 60
    assert any(line.startswith("    ") for line in lines[:4])  # "because:" continued


@pytest.mark.slow
def test_tables_and_json_are_never_wrapped(with_broken):
    table = coheriq(with_broken, "show", "clidom").stdout.splitlines()
    narrow = coheriq(with_broken, "show", "clidom", env={"COLUMNS": "40"}).stdout.splitlines()
    header, again = (
        t.index(next(x for x in t if x.startswith("candidate"))) for t in (table, narrow)
    )
    assert narrow[again : again + 3] == table[header : header + 3]  # the columns as they were
    assert len(table[header]) > 40 and again > header  # the prose above was wrapped
    data = coheriq(with_broken, "--json", "show", "clidom", env={"COLUMNS": "40"}).stdout
    assert max(map(len, data.splitlines())) > 40 and json.loads(data)["problems"] == 2


def test_an_error_is_wrapped_only_when_a_person_reads_it_at_a_terminal(installed):
    pty = pytest.importorskip("pty")
    piped = coheriq(installed, "show", "clidmo", env={"COLUMNS": "50"})
    assert piped.returncode == 2 and piped.stderr.count("\n") == 1  # a log keeps one line
    master, terminal = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "coheriq", "show", "clidmo"],
            stdout=subprocess.PIPE,
            stderr=terminal,
            env={**os.environ, "PYTHONPATH": str(installed), "COLUMNS": "50"},
            timeout=60,
            check=False,
        )
    finally:
        os.close(terminal)
    seen = b""
    try:
        while chunk := os.read(master, 65536):
            seen += chunk
    except OSError:  # the terminal's other end is closed: all is read
        pass
    finally:
        os.close(master)
    lines = seen.decode().splitlines()
    assert done.returncode == 2 and len(lines) > 3 and _fits(lines, 50)
    assert lines[0].startswith("coheriq: error:") and lines[1].startswith("  ")
    assert " ".join(line.strip() for line in lines) == piped.stderr.strip()


# -- the reason keeps the environment variable's value ----------------------------------------


def test_the_reason_names_the_variable_with_its_value_before_and_after_the_choice(installed):
    script = (
        "import clidom_lib, coheriq\n"
        "print(coheriq.explain('clidom').reason)\n"
        "clidom_lib.scale([1.0])\n"
        "print(coheriq.explain('clidom').reason.split(' at ')[0])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(installed), "CLIDOM_ENGINE": "good"},
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    before, after = done.stdout.splitlines()
    assert before.startswith("the environment variable CLIDOM_ENGINE='good'; not settled")
    assert after == "the environment variable CLIDOM_ENGINE='good', settled by a call"


# -- the docs' command-output directive -------------------------------------------------------

EXT = Path(__file__).resolve().parent.parent / "docs" / "_ext"

PAGE = """
Sample
======

.. command-output:: coheriq check clidom good

.. command-output:: coheriq explain clidom

.. command-output:: coheriq explain clidom
   :env: CLIDOM_ENGINE=good

.. command-output:: coheriq check clidom
   :returncode: 1
   :ellipsis: 1
"""


def _build(tmp_path, page, site, env=None):
    """Build ``page`` with the command_output extension; return the process and the HTML."""
    source = tmp_path / "docs"
    source.mkdir()
    (source / "conf.py").write_text(f"import sys\nsys.path.insert(0, {str(EXT)!r})\n"
                                    'extensions = ["command_output"]\n')  # fmt: skip
    (source / "index.rst").write_text(page)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-q",
            "-W",
            "-b",
            "html",
            str(source),
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(site), **(env or {})},
        timeout=300,
        check=False,
    )
    html = tmp_path / "out" / "index.html"
    return done, html.read_text() if html.exists() else ""


def test_command_output_shows_what_the_command_prints(installed, tmp_path):
    pytest.importorskip("sphinx")
    # A variable of the builder's that chooses an engine does not reach the commands.
    done, html = _build(tmp_path, PAGE, installed, env={"CLIDOM_ENGINE": "bad"})
    assert done.returncode == 0, done.stderr
    assert html.count('class="output highlight-text') == 4  # styled as output
    assert '>coheriq</span> <span class="pre">check</span>' in html  # the caption
    assert '<span class="pre">CLIDOM_ENGINE=good</span>' in html  # with the page's :env:
    assert "1 module, 2 candidates, 1 engine, 0 statements. No" in html
    assert "runs on engine 'reference'" in html
    assert "runs on engine 'good'" in html
    assert "bad: error:" in html and "2 engines" not in html  # cut by :ellipsis:


def test_command_output_fails_the_build_on_an_undeclared_status(installed, tmp_path):
    pytest.importorskip("sphinx")
    done, _ = _build(tmp_path, ".. command-output:: coheriq check clidom\n", installed)
    assert done.returncode != 0
    assert "exited with status 1, not the 0 expected" in done.stderr
    assert ":returncode: 1" in done.stderr


def test_command_output_refuses_output_with_a_path_of_this_machine(make_dist, tmp_path):
    pytest.importorskip("sphinx")
    site = make_dist("leaky_dist", {"leaky_lib": "import sys\nraise RuntimeError(sys.prefix)\n"},
                     {"coheriq.domains": {"leaky": "leaky_lib"}})  # fmt: skip
    page = ".. command-output:: coheriq show leaky\n   :returncode: 2\n"
    done, _ = _build(tmp_path, page, site)
    assert done.returncode != 0 and "a path of this machine" in done.stderr


SHAPES = """
import coheriq

domain = coheriq.AccelerationDomain("clishapes")


@domain.acceleration_candidate
class Shape:
    def __new__(cls, kind="circle"):
        # The library builds its own subclass, bypassing any dispatch.
        return object.__new__(Circle if cls is Shape and kind == "circle" else cls)


@domain.acceleration_candidate
class Circle(Shape):
    pass


domain.materialize()
"""

SHAPES_FAST = """
import coheriq


class Fast(coheriq.engine_class("clishapes"), name="fast"):
    class Circle:
        def __new__(cls, kind="circle"):
            return object.__new__(cls)
"""


def test_check_warns_of_an_engine_class_the_librarys_new_bypasses(make_dist):
    site = make_dist(
        "clishapes_dist",
        {"clishapes_lib": SHAPES, "clishapes_fast": SHAPES_FAST},
        {
            "coheriq.domains": {"clishapes": "clishapes_lib"},
            "coheriq.engines.clishapes": {"fast": "clishapes_fast"},
        },
    )
    done = coheriq(site, "check", "clishapes")
    assert done.returncode == 0, done.stderr  # a warning, not an error
    assert "fast: ok" in done.stdout
    assert "fast: warning: Engine 'fast' of domain 'clishapes' overrides class candidate" in (
        " ".join(done.stdout.split())
    )
    assert "Override 'Shape' too" in " ".join(done.stdout.split())
    data = json.loads(coheriq(site, "check", "clishapes", "--json").stdout)
    assert "bypassing the engine's class" in data["engines"]["fast"]["warnings"][0]


# -- check: engines, the library's modules and statements, each reported as what it is ----------

LAZY_LIB = """
import coheriq

domain = coheriq.AccelerationDomain("clilazy")
domain.declare("clilazy_grid", classes=["Grid"])

@domain.acceleration_candidate
def scale(xs):
    return xs

domain.materialize()
"""

LAZY_GRID = """
from clilazy_lib import domain

@domain.acceleration_candidate
class Grid:
    def __init__(self, cells):
        self.cells = cells

    @classmethod
    def from_list(cls, cells):
        return cls(cells)
"""

LAZY_TYPO = """
import coheriq

class Typo(coheriq.engine_class("clilazy"), name="typo"):
    class Grid:
        def __init__(self, cells):
            self.cells = cells

        @classmethod
        def from_lsit(cls, cells):  # meant from_list: no call of Grid.from_list reaches it
            return cls(cells)
"""


def lazy_library(make_dist, grid=LAZY_GRID, engines=None):
    """Library clilazy, whose class candidate Grid is marked by a module imported lazily."""
    return make_dist(
        "clilazy_dist",
        {
            "clilazy_lib": LAZY_LIB,
            "clilazy_grid": grid,
            **{f"clilazy_{name}": source for name, source in (engines or {}).items()},
        },
        {
            "coheriq.domains": {"clilazy": "clilazy_lib"},
            "coheriq.engines.clilazy": {name: f"clilazy_{name}" for name in engines or {}},
        },
    )


def test_check_reports_an_engines_misspelled_classmethod_as_the_engines(make_dist):
    site = lazy_library(make_dist, engines={"typo": LAZY_TYPO})
    done = coheriq(site, "check", "clilazy", env={"COLUMNS": "1000"})
    assert done.returncode == 1
    typo, *rest = done.stdout.splitlines()
    assert typo.startswith("typo: error: Engine 'typo' of domain 'clilazy' could not be loaded")
    assert "a classmethod 'from_lsit'" in typo and "Did you mean 'from_list'?" in typo
    # The library's module is fine: it is not blamed.
    assert rest == [
        "Checked domain 'clilazy': 2 modules, 2 candidates, 1 engine, 0 statements. 1 problem: "
        "engine 'typo'."
    ]
    data = json.loads(coheriq(site, "--json", "check", "clilazy").stdout)
    assert list(data["engines"]) == ["typo"] and data["engines"]["typo"]["ok"] is False
    assert data["modules"] == {"clilazy_grid": {"ok": True}, "clilazy_lib": {"ok": True}}


def test_check_counts_the_librarys_modules_apart_from_engines(make_dist):
    site = lazy_library(make_dist, grid="raise ImportError('no libgrid.so')\n")
    done = coheriq(site, "check", "clilazy", env={"COLUMNS": "1000"})
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        "module clilazy_grid: error: importing it raised ImportError: no libgrid.so",
        "Checked domain 'clilazy': 2 modules, 2 candidates, 0 engines, 0 statements. 1 problem: "
        "module 'clilazy_grid'.",
    ]
    data = json.loads(coheriq(site, "--json", "check", "clilazy").stdout)
    assert data["engines"] == {} and data["problems"] == 1
    assert data["modules"]["clilazy_grid"] == {
        "ok": False,
        "error": "importing it raised ImportError: no libgrid.so",
    }
    assert data["checked"] == {"modules": 2, "candidates": 2, "engines": 0, "statements": 0}


def test_check_says_what_it_checked_when_all_is_well(installed):
    done = coheriq(installed, "check", "clidom", "good", env={"COLUMNS": "1000"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "good: ok",
        "Checked domain 'clidom': 1 module, 2 candidates, 1 engine, 0 statements. No problems.",
    ]
    data = json.loads(coheriq(installed, "--json", "check", "clidom", "good").stdout)
    assert data["checked"] == {"modules": 1, "candidates": 2, "engines": 1, "statements": 0}
    assert data["modules"] == {"clidom_lib": {"ok": True}} and data["problems"] == 0


DEVICE_LIB = """
import coheriq

domain = coheriq.AccelerationDomain("devlib")


@domain.acceleration_candidate
def f(x):
    return x


domain.materialize()
"""

DEVICE_ENGINE = """
import os

import coheriq


class Device(coheriq.engine_class("devlib"), name="device"):
    def __init__(self):
        if os.environ.get("DEVLIB_PLATFORM") != "device":
            raise RuntimeError("no device here")

    def f(self, x):
        return x
"""


def test_command_output_is_the_same_wherever_the_docs_are_built(make_dist, tmp_path):
    pytest.importorskip("sphinx")
    site = make_dist(
        "devlib_dist",
        {"devlib_lib": DEVICE_LIB, "devlib_device": DEVICE_ENGINE},
        {
            "coheriq.domains": {"devlib": "devlib_lib"},
            "coheriq.engines.devlib": {"device": "devlib_device"},
        },
    )
    page = ".. command-output:: coheriq check devlib --start\n   :returncode: 1\n"
    # A builder whose environment would let the engine start: the page still shows
    # it failing, as on every other machine.
    done, html = _build(tmp_path, page, site, env={"DEVLIB_PLATFORM": "device"})
    assert done.returncode == 0, done.stderr
    assert "no device here" in html


@pytest.mark.slow
def test_explain_names_a_candidate_of_a_library_accelerated_from_the_outside(tmp_path):
    import test_outside

    where = test_outside.lay_out(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "COHERIQ_ACCELERATE" and "SHAPES" not in k}
    env["PYTHONPATH"] = os.pathsep.join([str(where), str(test_outside.ROOT)])
    said = {}
    for subject in ("shapes", "shapes.area", "shapes.core.area"):
        done = subprocess.run(
            [sys.executable, "-m", "coheriq", "--json", "explain", subject],
            capture_output=True,
            text=True,
            env={**env, "SHAPES_ENGINE": "fast"},
            cwd=where,
            timeout=120,
        )
        assert done.returncode == 0, subject + ": " + done.stdout + done.stderr
        said[subject] = json.loads(done.stdout)
    assert said["shapes.area"]["domain"] == "shapes"
    assert said["shapes.area"]["engine"] == said["shapes"]["engine"] == "fast"
    assert said["shapes.core.area"] == said["shapes.area"]
