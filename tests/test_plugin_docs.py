"""The plugin's output that docs/testing.rst shows is what the plugin prints.

Each test runs pytest in a child process on the ragbatch example, as a reader
would, and matches the page's line against the output; counts and the list of
installed domains vary with what is installed, so they are wildcards.
"""

import importlib.util
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
EXAMPLES = DOCS / "examples" / "test_ragbatch_examples.py"

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("ragbatch") is None,
    reason="the ragbatch example is not installed (the README's test command installs it)",
)


def documented(start):
    """The line of testing.rst that starts with ``start``, as an fnmatch pattern."""
    text = (DOCS / "testing.rst").read_text()
    (line,) = [line.strip() for line in text.splitlines() if line.strip().startswith(start)]
    line = line.replace("[", "?").replace("]", "?")  # fnmatch's brackets are sets
    return re.sub(r"\b\d+\b", "*", line)  # counts vary with the engines installed


def pytest_in_child(pytester, *args):
    """pytest in a child process, in pytester's folder; Hypothesis's plugin left out."""
    return pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:hypothesispytest", *args
    )


def test_the_engine_authors_run_says_what_it_ran_and_left_out(pytester, monkeypatch):
    monkeypatch.delenv("COHERIQ_TEST_ENGINES", raising=False)
    monkeypatch.delenv("RAGBATCH_ENGINE", raising=False)
    result = pytest_in_child(pytester, str(EXAMPLES), "--coheriq-engine=ragbatch:numpy")
    assert result.ret == 0, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(
        [
            documented("coheriq: ragbatch on 'numpy' (--coheriq-engine)"),
            documented("coheriq: engine 'numpy' of ragbatch"),  # from its statement
            documented("coheriq: deselected"),
        ]
    )
    outcomes = result.parseoutcomes()  # on numpy only: one case of each test
    assert (outcomes["passed"], outcomes["xfailed"], outcomes["deselected"] > 0) == (3, 1, True)


def test_a_mistyped_domain_is_one_message_with_the_domains_that_exist(pytester, monkeypatch):
    monkeypatch.delenv("COHERIQ_TEST_ENGINES", raising=False)
    result = pytest_in_child(pytester, "--coheriq-engine=ragbacth:numpy")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    # Other installed packages may advertise more domains than the page's 'ragbatch'.
    pattern = documented("ERROR: --coheriq-engine=ragbacth").replace(
        "packages): 'ragbatch'.", "packages): *'ragbatch'*."
    )
    result.stderr.fnmatch_lines([pattern])


def test_the_run_says_what_the_librarys_variable_names(pytester, monkeypatch):
    monkeypatch.delenv("COHERIQ_TEST_ENGINES", raising=False)
    monkeypatch.setenv("RAGBATCH_ENGINE", "numpy")
    pytester.makepyfile(test_numpy="def test_it():\n    import ragbatch\n")
    result = pytest_in_child(pytester)
    assert result.ret == 0, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(
        [
            documented("coheriq: ragbatch on 'numpy' (RAGBATCH_ENGINE=numpy)"),
            documented("coheriq: engine 'numpy' of ragbatch"),
        ]
    )
