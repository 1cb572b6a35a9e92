"""What an engine states it implements: read without importing it, checked against its class."""

import json
import os
import subprocess
import sys
import textwrap
from importlib.util import find_spec
from pathlib import Path

import pytest

import coheriq

LIBRARY = """
import coheriq

domain = coheriq.AccelerationDomain("stdom", env_prefix="STDOM")

@domain.acceleration_candidate
def scale(xs, factor=2.0):
    return [x * factor for x in xs]

@domain.acceleration_candidate
def shift(xs, by=1.0):
    return [x + by for x in xs]

@domain.acceleration_candidate
class Grid:
    def __init__(self, cells):
        self.cells = cells

domain.materialize()
"""

FAST = '''
import coheriq

class Fast(coheriq.engine_class("stdom"), name="fast"):
    """Scaling in one pass.

    More that the description leaves out.
    """

    def scale(self, xs, factor=2.0):
        return [x * factor for x in xs]
'''

TURBO = """
import coheriq

class Turbo(coheriq.engine_class("stdom", "fast"), name="turbo"):
    class Grid:
        def __init__(self, cells):
            self.cells = cells
"""

# An engine whose module cannot even be imported here (its extension is missing).
CRASHING = """
raise ImportError("libstdom_gpu.so: cannot open shared object file")
"""


def statement(engine, implements, *, domain="stdom", **more):
    said = {"coheriq_statement": 1, "domain": domain, "engine": engine}
    return {**said, "description": f"The {engine} engine.", "implements": implements, **more}


@pytest.fixture
def installed(make_dist, monkeypatch):
    """The library and engines fast, turbo and gpu (which cannot be imported), all stated."""
    monkeypatch.delenv("STDOM_ENGINE", raising=False)
    site = make_dist(
        "stdom_dist",
        {"stdom_lib": LIBRARY, "stdom_fast": FAST, "stdom_turbo": TURBO, "stdom_gpu": CRASHING},
        {
            "coheriq.domains": {"stdom": "stdom_lib"},
            "coheriq.engines.stdom": {
                "fast": "stdom_fast",
                "turbo": "stdom_turbo",
                "gpu": "stdom_gpu",
            },
            "coheriq.statements.stdom": {
                "fast": "stdom_fast:stdom_fast.coheriq.json",
                "turbo": "stdom_turbo:stdom_turbo.coheriq.json",
                "gpu": "stdom_gpu:stdom_gpu.coheriq.json",
            },
        },
    )
    write(site, "stdom_fast", statement("fast", ["scale"]))
    write(site, "stdom_turbo", statement("turbo", ["scale", "Grid"]))
    write(site, "stdom_gpu", statement("gpu", ["scale", "shift"], needs="an NVIDIA GPU"))
    return site


def write(site, module, data):
    """Write the statement file of a single-file module (``data``: JSON, or text as it is)."""
    text = data if isinstance(data, str) else json.dumps(data)
    (site / f"{module}.coheriq.json").write_text(text)


def coheriq_cli(site, *args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "coheriq", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(site), "COLUMNS": "1000", **(env or {})},
        timeout=60,
        check=False,
    )


# -- reading, without importing ----------------------------------------------------------------


def test_statements_are_read_without_importing_the_engines(installed):
    statements = coheriq.engine_statements("stdom")
    assert list(statements) == ["fast", "gpu", "turbo"]  # sorted by engine name
    gpu = statements["gpu"]
    assert gpu.problem is None
    assert (gpu.domain, gpu.engine, gpu.implements) == ("stdom", "gpu", ("scale", "shift"))
    assert (gpu.description, gpu.needs) == ("The gpu engine.", "an NVIDIA GPU")
    assert gpu.source == "stdom_gpu:stdom_gpu.coheriq.json"
    # Nothing was imported: not the engines (gpu's import raises), not the library.
    assert not {"stdom_lib", "stdom_fast", "stdom_gpu", "stdom_turbo"} & set(sys.modules)


def test_a_statement_is_read_only_and_takes_the_domain_object_too(installed):
    with pytest.raises(AttributeError, match="read-only"):
        coheriq.engine_statements("stdom")["fast"].implements = ()
    import stdom_lib

    assert coheriq.engine_statements(stdom_lib.domain) == coheriq.engine_statements("stdom")
    with pytest.raises(coheriq.CoheriqTypeError, match="not int"):
        coheriq.engine_statements(3)


def test_a_statement_in_a_subpackage_is_found_without_importing_its_parents(make_dist, unique):
    domain = unique("stpkg")
    site = make_dist(
        "stpkg_dist", {}, {f"coheriq.statements.{domain}": {"fast": "stpkg_top.engine:s.json"}}
    )
    (site / "stpkg_top" / "engine").mkdir(parents=True)
    (site / "stpkg_top" / "__init__.py").write_text("raise RuntimeError('imported')\n")
    (site / "stpkg_top" / "engine" / "__init__.py").write_text("")
    (site / "stpkg_top" / "engine" / "s.json").write_text(
        json.dumps(statement("fast", ["scale"], domain=domain))
    )
    found = coheriq.engine_statements(domain)["fast"]
    assert found.problem is None and found.implements == ("scale",)
    assert "stpkg_top" not in sys.modules


# -- a statement that cannot be used ---------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "content", "said"),
    [
        ("stdom_fast:stdom_fast.coheriq.json", "{not json", "is not JSON"),
        ("stdom_fast:stdom_fast.coheriq.json", "[]", "holds a JSON list, not an object"),
        pytest.param(
            "stdom_fast:stdom_fast.coheriq.json",
            "[" * 10**5 + "]" * 10**5,
            "is not JSON",
            id="nested-too-deep",
        ),
        pytest.param(
            "stdom_fast:stdom_fast.coheriq.json",
            " " * (1 << 21) + "{}",
            "larger than 1048576",
            id="too-large",
        ),
        (
            "stdom_fast:stdom_fast.coheriq.json",
            statement("fast", ["scale"], coheriq_statement=2),
            "this coheriq reads format 1",
        ),
        (
            "stdom_fast:stdom_fast.coheriq.json",
            statement("fast", ["scale"], domain="other"),
            "it is a statement of domain 'other', not of 'stdom'",
        ),
        (
            "stdom_fast:stdom_fast.coheriq.json",
            statement("slow", ["scale"]),
            "it is a statement of engine 'slow', not of 'fast'",
        ),
        (
            "stdom_fast:stdom_fast.coheriq.json",
            statement("fast", ["scale", 3]),
            "holds 3, which is not a candidate name",
        ),
        (
            "stdom_fast:stdom_fast.coheriq.json",
            statement("fast", "scale"),
            "\"implements\" is 'scale', not a list",
        ),
        (
            "stdom_fast:stdom_fast.coheriq.json",
            statement("fast", ["scale"], needs=["a GPU"]),
            "\"needs\" is ['a GPU'], neither a string nor null",
        ),
        ("stdom_fast:missing.json", None, "there is no file 'missing.json'"),
        ("stdom_fast", None, "is not MODULE:FILE"),
        ("stdom_nowhere:s.json", None, "module 'stdom_nowhere' is not installed"),
        ("stdom_fast:/etc/s.json", None, "must be given relative to module 'stdom_fast'"),
        ("stdom_fast.sub:s.json", None, "module 'stdom_fast' is not a package"),
    ],
)
@pytest.mark.slow
def test_a_malformed_statement_is_a_problem_and_the_engine_states_nothing(
    make_dist, value, content, said
):
    site = make_dist(
        "stdom_dist",
        {"stdom_lib": LIBRARY, "stdom_fast": FAST},
        {
            "coheriq.engines.stdom": {"fast": "stdom_fast"},
            "coheriq.statements.stdom": {"fast": value},
        },
    )
    if content is not None:
        write(site, "stdom_fast", content)
    fast = coheriq.engine_statements("stdom")["fast"]
    assert fast.implements == () and fast.problem is not None
    problem = " ".join(fast.problem.split())
    assert said in problem
    # A sentence that names the engine, its entry point, and what to do.
    assert problem.startswith("The statement of engine 'fast' of domain 'stdom' (entry point")
    assert f"{value!r} in group 'coheriq.statements.stdom'" in problem
    assert "coheriq statement stdom fast -o FILE" in problem
    # The engine itself is untouched: listed, loaded, and check says what is wrong.
    listed = coheriq_cli(site, "list")
    assert listed.returncode == 0 and said in " ".join(listed.stdout.split())
    import stdom_lib  # noqa: F401 - the library, to load its engine

    assert coheriq.engine_class("stdom", "fast").__name__ == "Fast"
    checked = coheriq_cli(site, "check", "stdom", "--import", "stdom_lib")
    assert checked.returncode == 1 and said in " ".join(checked.stdout.split())
    shown = coheriq_cli(site, "--json", "show", "stdom", "--import", "stdom_lib")
    engine = json.loads(shown.stdout)["engines"]["fast"]
    assert shown.returncode == 0 and engine["source"] == "imported"  # as if it stated nothing
    assert said in " ".join(engine["statement_error"].split())


@pytest.mark.slow
def test_an_engine_that_states_nothing_works_as_before(make_dist):
    site = make_dist(
        "stdom_dist",
        {"stdom_lib": LIBRARY, "stdom_fast": FAST},
        {
            "coheriq.domains": {"stdom": "stdom_lib"},
            "coheriq.engines.stdom": {"fast": "stdom_fast"},
        },
    )
    assert coheriq.engine_statements("stdom") == {}
    listed = json.loads(coheriq_cli(site, "--json", "list").stdout)
    assert listed["domains"]["stdom"]["engines"]["fast"]["statement"] is None
    shown = coheriq_cli(site, "show", "stdom")
    assert shown.returncode == 0 and "stated" not in shown.stdout
    assert shown.stdout.splitlines()[-3].split() == ["scale", "reference", "own"]
    checked = coheriq_cli(site, "--json", "check", "stdom")
    assert json.loads(checked.stdout)["engines"]["fast"] == {"ok": True}


# -- list and show -------------------------------------------------------------------------


def test_list_shows_what_each_engine_states(installed):
    done = coheriq_cli(installed, "list")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    at = lines.index("  engine gpu: stdom_gpu (stdom_dist 1.0)")
    assert lines[at + 1 : at + 3] == [
        "    The gpu engine.",
        "    implements 2 candidates (stated); needs an NVIDIA GPU",
    ]
    data = json.loads(coheriq_cli(installed, "--json", "list").stdout)
    assert data["domains"]["stdom"]["engines"]["gpu"]["statement"] == {
        "ok": True,
        "source": "stdom_gpu:stdom_gpu.coheriq.json",
        "description": "The gpu engine.",
        "needs": "an NVIDIA GPU",
        "implements": ["scale", "shift"],
    }


def test_show_uses_statements_instead_of_importing(installed):
    done = coheriq_cli(installed, "show", "stdom")
    assert done.returncode == 0, done.stderr  # gpu cannot be imported, and is not
    lines = done.stdout.splitlines()
    at = lines.index(next(line for line in lines if line.startswith("candidate")))
    assert [row.split() for row in lines[at : at + 4]] == [
        ["candidate", "reference", "fast", "gpu", "turbo"],
        ["scale", "reference", "stated", "stated", "stated"],
        ["shift", "reference", "reference", "stated", "reference"],
        ["Grid", "reference", "reference", "reference", "stated"],
    ]
    assert "gpu: stated. The gpu engine. Needs an NVIDIA GPU." in lines
    data = json.loads(coheriq_cli(installed, "--json", "show", "stdom").stdout)
    assert data["engines"]["gpu"] == {"ok": True, "source": "stated"}
    assert data["coverage"]["shift"] == {
        "reference": "reference",
        "fast": "reference",
        "gpu": "stated",
        "turbo": "reference",
    }


def test_show_imports_an_engine_imported_already_rather_than_read_it(installed):
    # A library that imports an engine itself: its class is at hand, and show says so.
    (installed / "stdom_eager.py").write_text("import stdom_lib, stdom_fast\n")
    done = coheriq_cli(installed, "--json", "show", "stdom", "--import", "stdom_eager")
    data = json.loads(done.stdout)
    assert data["engines"]["fast"] == {"ok": True, "source": "imported"}
    assert data["engines"]["turbo"] == {"ok": True, "source": "stated"}
    assert data["coverage"]["scale"]["fast"] == "own"


# -- check: the statement and the class ----------------------------------------------------


def test_check_passes_where_statements_agree_and_fails_where_one_drifted(installed):
    agreed = coheriq_cli(installed, "check", "stdom", "fast", "turbo")
    assert agreed.returncode == 0, agreed.stdout
    assert "fast: ok (its statement agrees)" in agreed.stdout
    write(installed, "stdom_turbo", statement("turbo", ["scale", "shift", "Gird"]))
    drifted = coheriq_cli(installed, "check", "stdom", "fast", "turbo")
    assert drifted.returncode == 1
    text = " ".join(drifted.stdout.split())
    assert (
        "turbo: error: The statement of engine 'turbo' of domain 'stdom' "
        "(stdom_turbo:stdom_turbo.coheriq.json) disagrees with the engine's class: it states "
        "'shift', which the class takes from the reference; the class implements 'Grid', "
        "which it does not state. It names 'Gird', which is no candidate of domain 'stdom'. "
        "Did you mean 'Grid'? Write it again from the class with `coheriq statement stdom "
        "turbo -o FILE`, or fix the engine."
    ) in text
    assert text.endswith(
        "Checked domain 'stdom': 1 module, 3 candidates, 2 engines, 2 statements. 1 problem: "
        "engine 'turbo'."
    )


def test_check_json_gives_each_statement_its_state(installed):
    write(installed, "stdom_turbo", statement("turbo", ["scale", "shift", "Gird"]))
    done = coheriq_cli(installed, "--json", "check", "stdom", "fast", "turbo")
    data = json.loads(done.stdout)
    assert done.returncode == 1 and data["problems"] == 1
    assert data["engines"]["fast"] == {"ok": True, "statement": {"ok": True}}
    turbo = data["engines"]["turbo"]
    assert turbo["ok"] is False and "disagrees" in turbo["error"]
    assert turbo["statement"] == {
        "ok": False,
        "not_implemented": ["shift"],
        "not_stated": ["Grid"],
        "unknown": ["Gird"],
        "error": turbo["error"],
    }


def test_check_reports_an_engine_whose_import_fails_and_a_statement_of_no_engine(installed):
    write(installed, "stdom_ghost", statement("fsat", ["scale"]))
    with (installed / "stdom_dist-1.0.dist-info" / "entry_points.txt").open("a") as file:
        file.write("fsat = stdom_ghost:stdom_ghost.coheriq.json\n")  # coheriq.statements.stdom
    done = coheriq_cli(installed, "check", "stdom")
    assert done.returncode == 1
    text = " ".join(done.stdout.split())
    assert "gpu: error: Engine 'gpu' of domain 'stdom' could not be loaded" in text
    assert "statement fsat: error: Package metadata has a statement of engine 'fsat'" in text
    assert "Did you mean 'fast'?" in text
    # The statement of no engine is a problem of its own, not an engine's.
    assert text.endswith(
        "Checked domain 'stdom': 1 module, 3 candidates, 3 engines, 3 statements. 2 problems: "
        "engine 'gpu'; statement 'fsat'."
    )
    data = json.loads(coheriq_cli(installed, "--json", "check", "stdom").stdout)
    assert sorted(data["engines"]) == ["fast", "gpu", "turbo"]
    assert data["orphan_statements"]["fsat"]["ok"] is False
    assert data["checked"] == {"modules": 1, "candidates": 3, "engines": 3, "statements": 3}
    assert data["problems"] == 2


# -- writing a statement -------------------------------------------------------------------


def test_the_generator_writes_what_check_then_accepts(installed, tmp_path):
    target = installed / "stdom_turbo.coheriq.json"
    target.unlink()
    given = ["--description", "Fast, with a grid.", "--needs", "a fast disk"]
    done = coheriq_cli(installed, "statement", "stdom", "turbo", *given, "-o", str(target))
    assert done.returncode == 0, done.stderr
    assert "implements 2 candidates" in done.stdout
    assert 'turbo = "stdom_turbo:stdom_turbo.coheriq.json"' in done.stdout  # the entry point
    assert json.loads(target.read_text()) == {
        "coheriq_statement": 1,
        "domain": "stdom",
        "engine": "turbo",
        "description": "Fast, with a grid.",
        "needs": "a fast disk",
        "implements": ["scale", "Grid"],  # its own Grid, and scale from fast, in domain order
    }
    checked = coheriq_cli(installed, "check", "stdom", "turbo")
    assert checked.returncode == 0 and "turbo: ok (its statement agrees)" in checked.stdout


@pytest.mark.slow
def test_the_generator_takes_the_docstring_and_keeps_needs(installed, tmp_path):
    # Printed (no -o): what it needs is what the installed statement says.
    write(installed, "stdom_fast", statement("fast", ["scale"], needs="AVX2"))
    printed = coheriq_cli(installed, "statement", "stdom", "fast")
    assert printed.returncode == 0, printed.stderr
    assert json.loads(printed.stdout) == {
        "coheriq_statement": 1,
        "domain": "stdom",
        "engine": "fast",
        "description": "Scaling in one pass.",  # the first line of the class's docstring
        "needs": "AVX2",
        "implements": ["scale"],
    }
    # Written over a statement of the engine: what it needs is kept from that file.
    target = tmp_path / "fast.json"
    command = ["statement", "stdom", "fast", "-o", str(target)]
    assert coheriq_cli(installed, *command, "--needs", "AVX-512").returncode == 0
    assert coheriq_cli(installed, *command).returncode == 0
    assert json.loads(target.read_text())["needs"] == "AVX-512"
    # '' for nothing.
    cleared = coheriq_cli(installed, "statement", "stdom", "fast", "--needs", "")
    assert json.loads(cleared.stdout)["needs"] is None


def test_the_generator_needs_a_description_from_somewhere(installed):
    done = coheriq_cli(installed, "statement", "stdom", "turbo")
    assert done.returncode == 2
    assert "has no docstring" in done.stderr and "--description TEXT" in done.stderr
    given = coheriq_cli(installed, "statement", "stdom", "turbo", "--description", "Turbo.")
    assert json.loads(given.stdout)["description"] == "Turbo."
    reference = coheriq_cli(installed, "statement", "stdom", "reference")
    assert reference.returncode == 2 and "not an engine: it states nothing" in reference.stderr


# -- the pytest plugin's header ------------------------------------------------------------


def test_the_run_shows_what_a_named_engine_states_without_importing_it(installed, pytester):
    pytester.makepyfile(
        test_it="""
        import sys
        import stdom_lib

        def test_no_engine_imported():
            assert "stdom_gpu" not in sys.modules and "stdom_fast" not in sys.modules
        """
    )
    # The library's variable names the engines: the domain's line, written after
    # collection (the test module imports the library), reads their statements only.
    plugins = ["-p", "no:cacheprovider", "-p", "no:hypothesispytest"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *plugins, str(pytester.path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": str(installed), "STDOM_ENGINE": "gpu,fast"},
    )
    assert done.returncode == 0, done.stdout[-3000:]
    lines = done.stdout.splitlines()
    assert "coheriq: engine 'gpu' of stdom: The gpu engine. Needs an NVIDIA GPU." in lines
    assert "coheriq: engine 'fast' of stdom: The fast engine." in lines


# -- the example's engines -------------------------------------------------------------------


ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_STATEMENTS = {
    "compiled": "ragbatch-compiled/ragbatch_compiled/coheriq.json",
    "dask": "ragbatch-dask/ragbatch_dask/coheriq.json",
    "gpu": "ragbatch-gpu/ragbatch_gpu/coheriq.json",
    "hybrid": "ragbatch-hybrid/ragbatch_hybrid.coheriq.json",
    "numpy": "ragbatch-numpy/ragbatch_numpy.coheriq.json",
}


@pytest.mark.skipif(find_spec("ragbatch") is None, reason="the ragbatch example is not installed")
def test_the_example_engines_state_what_their_classes_implement():
    import ragbatch  # noqa: F401 - the domain, to list its engines (importing none)

    statements = coheriq.engine_statements("ragbatch")
    installed = set(coheriq.available_engines("ragbatch"))
    assert installed <= set(statements)
    assert all(statements[e].problem is None for e in installed), statements
    done = subprocess.run(
        [sys.executable, "-m", "coheriq", "check", "ragbatch"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("(its statement agrees)") == len(installed)
    # What is installed is what the repository holds (the files generated and checked in).
    for engine in sorted(installed & set(EXAMPLE_STATEMENTS)):
        path = EXAMPLE_STATEMENTS[engine]
        checked_in = json.loads((ROOT / "example" / path).read_text())
        assert statements[engine].as_dict() == checked_in, f"reinstall example/{path}"


def test_a_statement_file_reads_back_as_written():
    text = textwrap.dedent(
        """\
        {
          "coheriq_statement": 1,
          "domain": "d",
          "engine": "e",
          "description": "An engine.",
          "needs": null,
          "implements": [
            "f"
          ]
        }
        """
    )
    from coheriq.statements import dumps, parse_statement

    read = parse_statement(json.loads(text), domain="d", engine="e")
    assert read.problem is None and dumps(read) == text


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo")
@pytest.mark.parametrize("kind", ["a pipe", "a directory"])
def test_a_statement_that_is_no_regular_file_is_a_problem_not_a_hang(make_dist, kind):
    site = make_dist(
        "stdom_dist",
        {"stdom_lib": LIBRARY, "stdom_fast": FAST},
        {"coheriq.statements.stdom": {"fast": "stdom_fast:stdom_fast.coheriq.json"}},
    )
    where = site / "stdom_fast.coheriq.json"
    os.mkfifo(where) if kind == "a pipe" else where.mkdir()  # opening a pipe waits for a writer
    fast = coheriq.engine_statements("stdom")["fast"]
    assert "is not a regular file" in fast.problem


def test_writing_a_statement_where_no_file_can_be_is_one_clear_line(installed, tmp_path):
    done = coheriq_cli(installed, "statement", "stdom", "fast", "-o", str(tmp_path))
    assert done.returncode == 2
    assert "could not be written to" in done.stderr and "Traceback" not in done.stderr


def _limited_memory():  # pragma: no cover - runs in the child, before it execs
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/stdout and /dev/full")
def test_writing_a_statement_to_a_pipe_or_a_device_reads_nothing_back(installed):
    # Over an installed statement that says what the engine needs: that is kept.
    write(installed, "stdom_fast", statement("fast", ["scale"], needs="AVX2"))
    command = [sys.executable, "-m", "coheriq", "statement", "stdom", "fast", "-o"]
    env = {**os.environ, "PYTHONPATH": str(installed), "COLUMNS": "1000"}
    # Standard output is a pipe that the command itself writes to: reading it back
    # waited for the end of the command's own output, for ever.
    piped = subprocess.run(
        [*command, "/dev/stdout"], capture_output=True, text=True, env=env, timeout=60
    )
    assert piped.returncode == 0, piped.stderr
    written, end = json.JSONDecoder().raw_decode(piped.stdout)
    assert written["engine"] == "fast" and written["needs"] == "AVX2"
    said = piped.stdout[end:]
    assert "Wrote the statement of engine 'fast' of domain 'stdom' to /dev/stdout" in said
    # /dev/full reads zeros for ever (the memory limit stops a reader that tries)
    # and refuses every write.
    full = subprocess.run(
        [*command, "/dev/full"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        preexec_fn=_limited_memory,
    )
    assert full.returncode == 2
    assert full.stderr == (
        "coheriq: error: The statement of engine 'fast' of domain 'stdom' could not be "
        "written to '/dev/full': No space left on device. Give -o a file that can be "
        "written, in a directory that exists.\n"
    )


CONVERTING = """
import coheriq

class Cells:
    def __init__(self, cells):
        self.cells = cells

class Conv(coheriq.engine_class("stdom"), name="conv", results="input", conversions=[
    coheriq.Conversion("stdom_lib:Grid", Cells, to_engine=lambda g: Cells(g.cells),
                       to_library="stdom_lib:Grid"),
    coheriq.Conversion(list, "nosuch_module:Array", to_engine=list, to_library=list),
]):
    def shift(self, xs, by=1.0):
        return xs
"""


def test_a_statement_states_the_conversions_and_check_resolves_them(make_dist, tmp_path):
    site = make_dist(
        "stdom_conv_dist",
        {"stdom_lib": LIBRARY, "stdom_conv": CONVERTING},
        {
            "coheriq.domains": {"stdom": "stdom_lib"},
            "coheriq.engines.stdom": {"conv": "stdom_conv"},
            "coheriq.statements.stdom": {"conv": "stdom_conv:stdom_conv.coheriq.json"},
        },
    )
    target = site / "stdom_conv.coheriq.json"
    made = coheriq_cli(site, "statement", "stdom", "conv", "--description", "c", "-o", str(target))
    assert made.returncode == 0, made.stderr
    written = json.loads(target.read_text())
    assert written["conversions"] == [
        {"library": "stdom_lib:Grid", "engine": "stdom_conv:Cells"},
        {"library": "builtins:list", "engine": "nosuch_module:Array"},
    ]
    assert written["results"] == "input"
    assert coheriq.statements.parse_statement(written, domain="stdom").conversions == (
        ("stdom_lib:Grid", "stdom_conv:Cells"),
        ("builtins:list", "nosuch_module:Array"),
    )
    checked = coheriq_cli(site, "check", "stdom", "conv")
    assert checked.returncode == 1
    text = " ".join(checked.stdout.split())
    assert "A conversion names 'nosuch_module:Array', which cannot be imported" in text
    written["conversions"] = written["conversions"][:1]
    written["results"] = "engine"
    write(site, "stdom_conv", written)
    drifted = " ".join(coheriq_cli(site, "check", "stdom", "conv").stdout.split())
    assert "the class declares" in drifted and "builtins:list <-> nosuch_module:Array" in drifted
    assert "it states results='engine', the class has 'input'" in drifted
    write(site, "stdom_conv", {**written, "conversions": [{"library": "x"}]})
    broken = coheriq.engine_statements("stdom")["conv"]
    assert broken.problem and '"conversions" holds' in broken.problem
