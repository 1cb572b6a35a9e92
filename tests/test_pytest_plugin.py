"""The pytest plugin, driven through pytester in a separate pytest process."""

import os
import textwrap

import pytest

from coheriq.testing import isolated

LIBRARY = """
import coheriq

domain = coheriq.AccelerationDomain("plugdom", env_prefix="PLUGDOM")

@domain.acceleration_candidate
def which():
    return "reference"

domain.materialize()

class Fast(coheriq.engine_class("plugdom"), name="fast"):
    def which(self):
        return "fast"

class Gpu(coheriq.engine_class("plugdom"), name="gpu"):
    def which(self):
        return "gpu"
"""


@pytest.fixture
def project(pytester, monkeypatch):
    monkeypatch.delenv("COHERIQ_TEST_ENGINES", raising=False)
    monkeypatch.delenv("PLUGDOM_ENGINE", raising=False)
    pytester.makepyfile(plugdom=LIBRARY)
    pytester.syspathinsert()  # as `python -m pytest` puts the current folder on sys.path
    return pytester


def advertise(pytester, dist, group, name, value):
    """Install metadata for distribution ``dist`` with one entry point, beside the tests."""
    info = pytester.path / f"{dist}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{group}]\n{name} = {value}\n")


def run(pytester, test_source, *args):
    """Run pytest in this process, in a coheriq world of its own.

    Hypothesis's plugin is left out: it costs a second per in-process session.
    """
    pytester.makepyfile(test_it=textwrap.dedent(test_source))
    with isolated():
        return pytester.runpytest_inprocess(
            "-p", "no:cacheprovider", "-p", "no:hypothesispytest", *args
        )


GLOBAL_TEST = """
    import coheriq, plugdom

    def test_runs_on_the_enabled_engine():
        assert plugdom.which() == "fast"
        assert coheriq.active_implementation("plugdom") == "fast"
"""


def test_option_enables_engine_before_collection_and_header_says_so(project):
    result = run(project, GLOBAL_TEST, "--coheriq-engine=plugdom:fast")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["coheriq: plugdom on 'fast' (--coheriq-engine)"])


def test_domain_advertised_under_another_module_name_is_imported(project):
    project.makepyfile(some_library=LIBRARY.replace('"plugdom"', '"advertised"'))
    advertise(project, "somelib", "coheriq.domains", "advertised", "some_library")
    source = """
        import coheriq

        def test_runs_on_the_enabled_engine():
            assert coheriq.active_implementation("advertised") == "fast"
    """
    result = run(project, source, "--coheriq-engine=advertised:fast")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["coheriq: advertised on 'fast' (--coheriq-engine)"])


def test_environment_variable_does_the_same(project, monkeypatch):
    monkeypatch.setenv("COHERIQ_TEST_ENGINES", " plugdom:fast ")
    result = run(project, GLOBAL_TEST)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["coheriq: plugdom on 'fast' (--coheriq-engine)"])


def test_an_ordered_choice_takes_the_first_that_starts_and_the_header_says_why(project):
    result = run(project, GLOBAL_TEST, "--coheriq-engine=plugdom:tpu,fast,gpu")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["coheriq: plugdom on 'fast' (--coheriq-engine; tried tpu: skipped, not installed; "
         "fast: chosen)"]
    )  # fmt: skip


def test_an_ordered_choice_in_the_environment_variable(project, monkeypatch):
    project.makepyfile(otherdom=LIBRARY.replace('"plugdom"', '"otherdom"'))
    monkeypatch.setenv("COHERIQ_TEST_ENGINES", "plugdom:tpu,fast,otherdom:gpu")
    source = (
        GLOBAL_TEST
        + """
    def test_the_other_domain_too():
        import otherdom
        assert coheriq.active_implementation("otherdom") == "gpu"
    """
    )
    result = run(project, source)
    result.assert_outcomes(passed=2)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("plugdom:tpu,npu", "*None of the engines 'tpu', 'npu'*tpu: not installed*"),
        ("plugdom:fast,,gpu", "*is malformed: it has an empty item*"),
        ("plugdom:fsat", "*no engine named 'fsat'*Did you mean 'fast'*"),
        ("nodom:fast", "*domain 'nodom'*importing the module 'nodom' failed*"),
        ("plugdom", "*'plugdom' names no engine, and no installed package declares*"),
        (":fast", "*':fast' is not DOMAIN:ENGINE*"),
    ],
)
def test_bad_specs_stop_the_run_with_one_clear_message(project, spec, message):
    result = run(project, GLOBAL_TEST, f"--coheriq-engine={spec}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in result.stderr.str()


PER_ENGINE_TEST = """
    import pytest, coheriq, plugdom

    @pytest.mark.coheriq_engines("plugdom")
    def test_each(coheriq_engine):
        assert plugdom.which() == coheriq_engine

    @pytest.mark.coheriq_engines("plugdom")
    def test_without_fixture():
        assert plugdom.which() == coheriq.active_implementation("plugdom")

    @pytest.mark.coheriq_engines("plugdom")
    @pytest.mark.coheriq_xfail("plugdom", "gpu", reason="gpu rounds differently")
    def test_known_difference():
        assert plugdom.which() != "gpu"

    def test_outside_is_untouched():
        assert coheriq.active_implementation("plugdom") in (None, "reference")
"""


def test_marker_runs_every_engine_with_readable_ids(project):
    result = run(project, PER_ENGINE_TEST, "-v")
    result.stdout.fnmatch_lines(
        [
            "*test_each?reference? PASSED*",
            "*test_each?fast? PASSED*",
            "*test_each?gpu? PASSED*",
            "*test_without_fixture?gpu? PASSED*",
            "*test_known_difference?fast? PASSED*",
            "*test_known_difference?gpu? XFAIL*gpu rounds differently*",
        ]
    )
    result.assert_outcomes(passed=9, xfailed=1)


def test_xfail_follows_the_global_engine(project):
    source = """
        import pytest, plugdom

        @pytest.mark.coheriq_xfail("plugdom", ["fast", "gpu"], strict=True)
        def test_fails_on_fast():
            assert plugdom.which() == "reference"
    """
    run(project, source, "--coheriq-engine=plugdom:fast").assert_outcomes(xfailed=1)
    run(project, source).assert_outcomes(passed=1)


def test_xfail_of_a_domain_that_does_not_exist_does_nothing(project):
    # As a plugin adds it by test id to a suite it does not own, whichever
    # library that suite happens to import.
    source = """
        import pytest

        @pytest.mark.coheriq_xfail("no_such_library", "fast", strict=True)
        def test_unrelated():
            assert True
    """
    run(project, source).assert_outcomes(passed=1)


EACH_ENGINE_TEST = """
    import pytest, plugdom

    @pytest.mark.coheriq_engines("plugdom")
    def test_each(coheriq_engine):
        assert plugdom.which() == coheriq_engine
"""


def test_engine_that_fails_to_load_fails_its_own_case_only(project):
    advertise(project, "brokeneng", "coheriq.engines.plugdom", "broken", "no_such_module")
    result = run(project, EACH_ENGINE_TEST, "-v")
    result.stdout.fnmatch_lines(["*test_each?broken? ERROR*", "*no_such_module*"])
    result.assert_outcomes(passed=3, errors=1)


def test_engine_that_cannot_start_here_skips_its_own_case_with_the_reason(project):
    project.makepyfile(
        plugdom_mpi="""
        import coheriq, plugdom

        class Mpi(coheriq.engine_class("plugdom"), name="mpi"):
            def __init__(self):
                raise RuntimeError("no MPI launcher found; run under mpiexec")

            def which(self):
                return "mpi"
        """
    )
    advertise(project, "plugdom_mpi", "coheriq.engines.plugdom", "mpi", "plugdom_mpi")
    result = run(project, EACH_ENGINE_TEST, "-v", "-rs")
    result.stdout.fnmatch_lines(
        [
            "*test_each?mpi? SKIPPED*",
            "SKIPPED*Engine 'mpi' of domain 'plugdom' failed to start*no MPI launcher found*",
        ]
    )
    result.assert_outcomes(passed=3, skipped=1)
    # Named for the whole run, the same engine stops the run: it was asked for.
    result = run(project, EACH_ENGINE_TEST, "--coheriq-engine=plugdom:mpi")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*plugdom:mpi*failed to start*no MPI launcher found*"])


def test_isolated_fixture_keeps_tests_apart(project):
    source = """
        import coheriq, pytest

        def make():
            domain = coheriq.AccelerationDomain("scratch")
            domain.materialize()

        def test_one(coheriq_isolated):
            make()

        def test_two(coheriq_isolated):
            make()  # would raise "exists already" if test_one had leaked

        def test_outer_world_is_back():
            import plugdom
            assert coheriq.engine_class("plugdom") is not None
            with pytest.raises(coheriq.CoheriqDomainNotFoundError):
                coheriq.engine_class("scratch")
    """
    run(project, source).assert_outcomes(passed=3)


def test_plugin_is_inert_when_unused(pytester):
    pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:hypothesispytest")
    result.assert_outcomes(passed=1)
    assert "coheriq:" not in result.stdout.str()  # no header line (the plugin list names it)


# One workflow: without --coheriq-engine, marked tests run on every engine (the
# library's CI); with it, on the chosen engine only (an engine author's run).


def test_option_runs_the_marked_cases_on_the_chosen_engine_only(project):
    # Another team's broken engine is installed: the run never loads it.
    advertise(project, "brokeneng", "coheriq.engines.plugdom", "broken", "no_such_module")
    result = run(project, EACH_ENGINE_TEST, "-v", "--coheriq-engine=plugdom:fast")
    result.assert_outcomes(passed=1, deselected=3)
    result.stdout.fnmatch_lines(
        [
            "coheriq: deselected 3 coheriq_engines cases of plugdom: --coheriq-engine chose "
            "'fast', so they run on that engine only (without it, on every installed engine)",
            "*test_each?fast? PASSED*",
        ]
    )
    assert "no_such_module" not in result.stdout.str()


def test_an_ordered_choice_keeps_the_cases_of_the_engine_it_chose(project):
    result = run(project, EACH_ENGINE_TEST, "-v", "--coheriq-engine=plugdom:tpu,gpu,fast")
    result.assert_outcomes(passed=1, deselected=2)
    result.stdout.fnmatch_lines(["*--coheriq-engine chose 'gpu'*", "*test_each?gpu? PASSED*"])


def test_the_environment_variable_chooses_the_cases_too(project, monkeypatch):
    monkeypatch.setenv("COHERIQ_TEST_ENGINES", "plugdom:gpu")
    result = run(project, EACH_ENGINE_TEST, "-v")
    result.assert_outcomes(passed=1, deselected=2)
    result.stdout.fnmatch_lines(["*COHERIQ_TEST_ENGINES chose 'gpu'*", "*test_each?gpu? PASSED*"])


def test_the_cases_of_another_domain_still_run_on_every_engine(project):
    project.makepyfile(otherdom=LIBRARY.replace('"plugdom"', '"otherdom"'))
    result = run(project, EACH_ENGINE_TEST, "--coheriq-engine=otherdom:fast")
    result.assert_outcomes(passed=3)
    assert "deselected" not in result.stdout.str()


# The line of each domain: in the header, after collection, or at the end of the run,
# where the domain is first there; the plugin never imports a library to write it.

IMPORTED_BY_THE_TEST_ONLY = """
    import sys

    def test_the_variable_applies_once_imported():
        assert "plugdom" not in sys.modules  # the header did not import the library
        import plugdom
        assert plugdom.which() == "gpu"
"""

IMPORTED_BY_THE_TEST_MODULE = "import plugdom\n\ndef test_nothing():\n    pass\n"


def test_the_run_says_what_the_domains_variable_chose_for_a_library_a_test_imports(
    project, monkeypatch
):
    advertise(project, "plugdom", "coheriq.domains", "plugdom", "plugdom")
    monkeypatch.setenv("PLUGDOM_ENGINE", "gpu")
    result = run(project, IMPORTED_BY_THE_TEST_ONLY)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*- coheriq domains -*",
            "coheriq: plugdom on 'gpu' (PLUGDOM_ENGINE=gpu); its coheriq_engines cases still "
            "run on every engine (--coheriq-engine=plugdom:gpu runs them on it only)",
        ]
    )


@pytest.mark.parametrize("create", ['"plugdom", env_prefix="PD"', '__name__, env_prefix="PD"'])
def test_the_line_names_the_domains_own_variable(project, monkeypatch, create):
    # The library's variable is PD_ENGINE, not the conventional PLUGDOM_ENGINE.
    project.makepyfile(plugdom=LIBRARY.replace('"plugdom", env_prefix="PLUGDOM"', create))
    advertise(project, "plugdom", "coheriq.domains", "plugdom", "plugdom")
    monkeypatch.setenv("PD_ENGINE", "gpu")
    result = run(project, IMPORTED_BY_THE_TEST_ONLY)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "coheriq: plugdom on 'gpu' (PD_ENGINE=gpu); its coheriq_engines cases still run on "
            "every engine (--coheriq-engine=plugdom:gpu runs them on it only)"
        ]
    )


@pytest.mark.parametrize(
    ("create", "said"),
    [
        # No env_prefix: the library has no variable, and PLUGDOM_ENGINE is not it.
        ('"plugdom"', "coheriq: plugdom on 'reference' (at first use)"),
        # A prefix computed as the library runs: the domain knows it.
        (
            '"plugdom", env_prefix="PLUG" + "DOM"',
            "coheriq: plugdom on 'gpu' (PLUGDOM_ENGINE=gpu), chosen at its first call; its "
            "coheriq_engines cases still run on every engine (--coheriq-engine=plugdom:gpu "
            "runs them on it only)",
        ),
    ],
)
def test_the_line_after_collection_says_what_the_domains_variable_names(
    project, monkeypatch, create, said
):
    project.makepyfile(plugdom=LIBRARY.replace('"plugdom", env_prefix="PLUGDOM"', create))
    advertise(project, "plugdom", "coheriq.domains", "plugdom", "plugdom")
    monkeypatch.setenv("PLUGDOM_ENGINE", "gpu")
    result = run(project, IMPORTED_BY_THE_TEST_MODULE)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["collected 1 item", said, "test_it.py .*"])
    assert result.stdout.str().count("coheriq: ") == 1


def test_the_line_keeps_the_order_of_an_ordered_choice_in_the_variable(project, monkeypatch):
    monkeypatch.setenv("PLUGDOM_ENGINE", "tpu, gpu")
    result = run(project, IMPORTED_BY_THE_TEST_MODULE)
    result.stdout.fnmatch_lines(
        ["coheriq: plugdom on the first of 'tpu', 'gpu' that starts here (PLUGDOM_ENGINE=tpu, "
         "gpu), chosen at its first call; its coheriq_engines cases still run on every engine "
         "(--coheriq-engine=plugdom:tpu,gpu runs them on it only)"]
    )  # fmt: skip


def test_each_domain_gets_one_line_where_it_is_first_there(project):
    project.makeconftest("import plugdom")  # in the header
    project.makepyfile(otherdom=LIBRARY.replace('"plugdom"', '"otherdom"'))
    source = """
        import coheriq, otherdom

        def test_makes_a_third():
            import thirddom
            coheriq.enable_engine("thirddom", "fast")
    """
    project.makepyfile(thirddom=LIBRARY.replace('"plugdom"', '"thirddom"'))
    result = run(project, source)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "coheriq: plugdom on 'reference' (at first use)",
            "collected 1 item",
            "coheriq: otherdom on 'reference' (at first use)",
            "test_it.py .*",
            "*- coheriq domains -*",
            "coheriq: thirddom on 'fast' (chosen during the run)",
        ]
    )
    assert result.stdout.str().count("coheriq: ") == 3
    quiet = run(project, source, "-q")
    quiet.assert_outcomes(passed=1)
    assert "coheriq" not in quiet.stdout.str()


def test_no_header_for_a_variable_of_a_domain_no_package_advertises(project, monkeypatch):
    monkeypatch.setenv("PLUGDOM_ENGINE", "gpu")
    result = run(project, "def test_nothing():\n    pass\n")
    assert "coheriq:" not in result.stdout.str()


# A mistyped domain: what exists, and the closest.


def test_a_mistyped_advertised_domain_gets_a_did_you_mean(project):
    advertise(project, "plugdom", "coheriq.domains", "plugdom", "plugdom")
    result = run(project, GLOBAL_TEST, "--coheriq-engine=plugdmo:fast")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --coheriq-engine=plugdmo:fast names the coheriq domain 'plugdmo', which no "
            "imported library created and no installed package advertises, and importing the "
            "module 'plugdmo' failed (No module named 'plugdmo'). Did you mean "
            "'plugdom'? Domains here (imported, or advertised by installed packages): "
            "*'plugdom'*. Correct the domain's name, or install the library that creates it."
        ]
    )
    assert "Traceback" not in result.stderr.str()


def test_a_mistyped_imported_domain_gets_a_did_you_mean(project, monkeypatch):
    # Not advertised: a conftest imports the library, before the option is read.
    project.makeconftest("import plugdom")
    monkeypatch.setenv("COHERIQ_TEST_ENGINES", "plugdmo:fast")
    result = run(project, GLOBAL_TEST)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: COHERIQ_TEST_ENGINES item plugdmo:fast names the coheriq domain 'plugdmo'*"
         "Did you mean 'plugdom'? Domains here*'plugdom'*"]
    )  # fmt: skip


def test_an_advertised_domain_whose_library_fails_to_import_says_which_package(project):
    advertise(project, "brokenlib", "coheriq.domains", "brokendom", "no_such_library")
    result = run(project, GLOBAL_TEST, "--coheriq-engine=brokendom:fast")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --coheriq-engine=brokendom:fast: an installed package advertises the "
         "coheriq domain 'brokendom' (entry point 'brokendom' = 'no_such_library' in group "
         "'coheriq.domains' of distribution 'brokenlib' 1.0), but importing the module "
         "'no_such_library' failed (No module named 'no_such_library'). Fix or reinstall "
         "that package, or name another domain."]
    )  # fmt: skip


def test_a_module_that_creates_no_such_domain_says_so(project):
    result = run(project, GLOBAL_TEST, "--coheriq-engine=test_it:fast")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*domain 'test_it'*importing the module 'test_it' did not create it. Domains here*"]
    )


# -- the plugin's coheriq_xfail as pytest's xfail, and usage errors ------------------------


@pytest.mark.slow
def test_coheriq_xfail_by_keyword_and_under_xfail_strict(pytester, unique):
    name = unique("xfaildom")
    pytester.makeini("[pytest]\nxfail_strict = true\n")
    pytester.makepyfile(
        f"""
        import pytest, coheriq

        domain = coheriq.AccelerationDomain({name!r})

        @domain.acceleration_candidate
        def f():
            return 1

        domain.materialize()

        @pytest.mark.coheriq_xfail(domain={name!r}, engine="reference", reason="known")
        def test_keyword():
            assert f() == 2

        @pytest.mark.coheriq_xfail({name!r}, "reference")
        def test_passes_unexpectedly():
            assert f() == 1  # strict by the project's xfail_strict: a failure

        @pytest.mark.coheriq_xfail({name!r})
        def test_malformed():
            pass
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(xfailed=1, failed=1, errors=1)
    result.stdout.fnmatch_lines(["*XPASS(strict)*"])
    result.stdout.fnmatch_lines(["*coheriq_xfail names a domain and an engine*"])
    assert "IndexError" not in result.stdout.str()


@pytest.mark.slow
def test_two_engines_for_a_domain_and_a_raising_library_are_usage_errors(pytester, unique):
    name = unique("twoeng")
    pytester.makepyfile(
        **{
            name: """
                import coheriq
                domain = coheriq.AccelerationDomain(__name__)
                domain.materialize()
                """,
            "raising_library": "raise RuntimeError('boom at import')\n",
            "test_nothing": "def test_nothing():\n    pass\n",
        }
    )
    twice = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--coheriq-engine={name}:a", f"--coheriq-engine={name}:b"
    )
    assert twice.ret == pytest.ExitCode.USAGE_ERROR
    twice.stderr.fnmatch_lines([f"*names engine 'a' of domain '{name}'*names 'b'*"])
    raising = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--coheriq-engine=raising_library:fast"
    )
    assert raising.ret == pytest.ExitCode.USAGE_ERROR
    raising.stderr.fnmatch_lines(["*raised RuntimeError: boom at import*"])
    assert "INTERNALERROR" not in raising.stdout.str() + raising.stderr.str()


def test_the_summary_lists_the_calls_engines_declined(project):
    source = """
        import coheriq, plugdom

        class Picky(coheriq.engine_class("plugdom"), name="picky"):
            @coheriq.may_decline(when=lambda self: "not today")
            def which(self):
                return "picky"

        def test_declined_twice():
            with coheriq.using_engine("plugdom", ["picky", "fast"]):
                assert plugdom.which() == "fast"
                assert plugdom.which() == "fast"
    """
    result = run(project, source)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*- coheriq declines -*", "plugdom.which: picky declined 2 calls (not today)"]
    )


# A declaration of a module of the standard library: COHERIQ_ACCELERATE naming it
# accelerates it as the interpreter starts (coheriq is imported then), not later.
COLORSYS = {
    "coheriq_declaration": 1,
    "library": "colorsys",
    "distribution": None,
    "versions": ">=3.10",
    "modules": {"colorsys": {"functions": ["rgb_to_hsv"]}},
}


@pytest.mark.parametrize(
    "how",
    ["COHERIQ_ACCELERATE=colorsys", "COHERIQ_ACCELERATE=shapes", "run", "--coheriq-engine"],
)
@pytest.mark.slow
def test_a_project_that_makes_warnings_errors_starts_accelerated(tmp_path, how):
    # pytest marks the packages of every distribution with a pytest11 entry point
    # for assertion rewriting (coheriq, from a wheel's RECORD) and warns of one
    # imported before: an error where the project sets filterwarnings = error.
    # An editable install lists no package files, so the metadata of coheriq as a
    # wheel installs it is laid out beside the project.
    import json
    import subprocess
    import sys

    import test_outside

    where = test_outside.lay_out(tmp_path)
    (where / "colorsys_probe.json").write_text(json.dumps(COLORSYS))
    declares = "[coheriq.declarations.colorsys]\nprobe = colorsys_probe:colorsys_probe.json\n"
    test_outside.write_dist(where, "colorsys_probe", "1.0", declares)
    (where / "colorsys_probe.py").write_text("")
    installed = where / "coheriq_as_installed-1.0.dist-info"
    installed.mkdir()
    (installed / "METADATA").write_text("Metadata-Version: 2.1\nName: coheriq-as-installed\n")
    (installed / "entry_points.txt").write_text("[pytest11]\ncoheriq = coheriq.pytest_plugin\n")
    (installed / "RECORD").write_text("coheriq/__init__.py,,\ncoheriq/pytest_plugin.py,,\n")
    (where / "pytest.ini").write_text("[pytest]\nfilterwarnings = error\n")
    (where / "test_it.py").write_text(
        "import colorsys, shapes, coheriq\n"
        "def test_marked():\n"
        "    assert coheriq.explain(shapes.area).engine == 'fast'\n"
        if how != "COHERIQ_ACCELERATE=colorsys"
        else "import colorsys, coheriq\n"
        "def test_marked():\n"
        "    assert coheriq.explain(colorsys.rgb_to_hsv).engine == 'reference'\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "COHERIQ_ACCELERATE" and "SHAPES" not in k}
    env["PYTHONPATH"] = os.pathsep.join([str(where), str(test_outside.ROOT)])
    pytest_run = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "test_it.py"]
    if how.startswith("COHERIQ_ACCELERATE="):
        env["COHERIQ_ACCELERATE"] = how.partition("=")[2]
        env["SHAPES_ENGINE"] = "fast"
        command = pytest_run
    elif how == "run":
        command = ["-m", "coheriq", "run", "--engine", "shapes:fast", *pytest_run]
    else:
        command = [*pytest_run, "--coheriq-engine=shapes:fast"]
    done = subprocess.run(
        [sys.executable, *command],
        capture_output=True,
        text=True,
        env=env,
        cwd=where,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    assert "Warning" not in done.stdout + done.stderr


def shapes_project(tmp_path, *, engine_package=True):
    """The library ``shapes`` of test_outside, with (or without) its engine package."""
    import test_outside

    if engine_package:
        return test_outside.lay_out(tmp_path)
    for path, text in test_outside.SHAPES.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(textwrap.dedent(text))
    test_outside.write_dist(tmp_path, "shapes", "1.0")
    return tmp_path


def run_pytest(where, *options):
    import subprocess
    import sys

    import test_outside

    env = {k: v for k, v in os.environ.items() if k != "COHERIQ_ACCELERATE" and "SHAPES" not in k}
    env["PYTHONPATH"] = os.pathsep.join([str(where), str(test_outside.ROOT)])
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *options],
        capture_output=True,
        text=True,
        env=env,
        cwd=where,
        timeout=120,
    )


@pytest.mark.slow
def test_a_declared_library_named_without_an_engine_is_marked_and_runs_its_own_code(tmp_path):
    where = shapes_project(tmp_path)
    (where / "test_it.py").write_text(
        "import shapes, coheriq\n"
        "def test_marked():\n"
        "    assert coheriq.explain(shapes.area).engine == 'reference'\n"
        "    with coheriq.using_engine('shapes', 'fast'):\n"
        "        assert shapes.area(shapes.Shape(2)) == 4\n"
        "    import shapes_fast\n"
        "    assert shapes_fast.calls == ['area']\n"
    )
    done = run_pytest(where, "test_it.py", "--coheriq-engine=shapes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_an_installed_library_no_package_declares_gets_coheriq_accelerate_s_message(tmp_path):
    # Its engine package is missing: installing the library again would not help.
    where = shapes_project(tmp_path, engine_package=False)
    (where / "test_it.py").write_text("def test_x():\n    pass\n")
    done = run_pytest(where, "test_it.py", "--coheriq-engine=shapes:fast")
    assert done.returncode != 0
    assert "no installed package declares its candidates" in done.stderr, done.stderr
    assert "coheriq.declarations.shapes" in done.stderr
    assert "install the library that creates it" not in done.stderr
