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
    assert "domain clidom: 2 candidates, env variable CLIDOM_ENGINE" in done.stdout
    header, scale_row, grid_row = done.stdout.strip().splitlines()[-3:]
    assert header.split() == ["candidate", "reference", "bad", "good"]
    assert scale_row.split() == ["scale", "reference", "own", "own"]
    assert grid_row.split() == ["Grid", "reference", "reference", "reference"]
    data = json.loads(coheriq(installed, "show", "clidom", "--json").stdout)
    assert data["candidates"] == {"scale": "function", "Grid": "class"}


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
    assert "2 engines checked, 1 with problems" in every.stdout
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
