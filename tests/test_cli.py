"""The coheriq command line, run as a user runs it, on installed (throwaway) packages."""

import json
import os
import subprocess
import sys

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


def test_check_fails_on_a_bad_override(installed):
    good = coheriq(installed, "check", "clidom", "good")
    assert good.returncode == 0 and "good: ok" in good.stdout
    every = coheriq(installed, "check", "clidom")
    assert every.returncode == 1
    assert "bad: error:" in every.stdout and "'factor' is missing" in every.stdout
    assert "2 engines checked, 1 with a problem" in every.stdout
    data = json.loads(coheriq(installed, "check", "clidom", "--json").stdout)
    assert data["problems"] == 1 and data["engines"]["good"] == "ok"


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
    assert "2 engines checked, 1 with a problem" in started.stdout


def test_explain_takes_a_candidate_as_module_dot_name(installed):
    done = coheriq(installed, "explain", "clidom_lib.scale")
    assert done.returncode == 0, done.stderr
    assert "candidate 'scale' of domain 'clidom'" in done.stdout
    wrong = coheriq(installed, "explain", "clidom_lib.nothing")
    assert wrong.returncode == 2 and "neither a coheriq domain nor a candidate" in wrong.stderr


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
    assert done.returncode == 1


def test_a_mistyped_domain_gets_a_did_you_mean_from_what_is_installed(installed):
    done = coheriq(installed, "show", "clidmo")
    assert done.returncode == 2
    assert "Installed packages advertise 'clidom'" in done.stderr
    assert "Did you mean 'clidom'?" in done.stderr
