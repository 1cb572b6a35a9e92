"""The pytest plugin, driven through pytester in a separate pytest process."""

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
        ("nodom:fast", "*no coheriq domain named 'nodom'*Importing a module named 'nodom'*"),
        ("plugdom", "*'plugdom' is not DOMAIN:ENGINE*"),
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
