"""Reloading a library split over several modules, as a notebook user edits it.

The walkthrough's own library (docs/examples/walkthrough/mylib: the domain in
``_domain``, candidates in ``stats`` and ``histogram``, ``__init__``
materializing) and a variant that creates the domain in ``__init__`` are edited
and reloaded module by module, with an engine chosen. Each check runs in a
fresh interpreter: the domain's name is fixed by the walkthrough.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import coheriq

WALKTHROUGH = Path(__file__).parent.parent / "docs" / "examples" / "walkthrough"


EDIT = """
import importlib, pathlib, warnings
warnings.simplefilter("error")
import coheriq
import mylib

def edit(module, old, new):
    path = pathlib.Path(module.__file__)
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new))
    importlib.reload(module)
"""


def install(site: Path) -> None:
    """Copy the walkthrough's library and engine to ``site``, the engine advertised."""
    shutil.copytree(WALKTHROUGH / "mylib" / "mylib", site / "mylib")
    shutil.rmtree(site / "mylib" / "tests")
    shutil.copy(WALKTHROUGH / "mylib-fast" / "mylib_fast.py", site)
    info = site / "mylib_fast-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mylib-fast\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[coheriq.engines.mylib]\nfast = mylib_fast\n")


def run(site: Path, script: str, *, editing: bool = True) -> str:
    """Run ``script`` with ``site`` first on sys.path; return its output (fail on error).

    ``editing``: after :data:`EDIT`, which imports mylib and defines ``edit``.
    """
    done = subprocess.run(
        [sys.executable, "-c", (EDIT if editing else "") + textwrap.dedent(script)],
        cwd=site,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(site), "PATH": "", "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def site(tmp_path):
    install(tmp_path)
    return tmp_path


def test_reloading_each_module_of_the_walkthrough_library(site):
    out = run(
        site,
        """
        coheriq.enable_engine("mylib", "fast")
        mean, Histogram = mylib.mean, mylib.Histogram
        old = Histogram([0.1, 0.6])

        # A candidate the engine does not override: the newest code runs, through
        # every name, on the engine chosen.
        edit(mylib.stats, "return math.fsum(xs) / len(xs)", "return -1.0")
        assert mylib.stats.mean([1, 3]) == mean([1, 3]) == mylib.mean([1, 3]) == -1.0
        assert coheriq.active_implementation("mylib") == "fast"
        assert mylib.normalize([1, 3]) == [0.25, 0.75]
        assert coheriq.engine_class("mylib", "fast")().mean([1, 3]) == -1.0

        # A class candidate: the new class is the candidate; the old one, which
        # the package's namespace still holds, follows the engine too, and builds
        # the new class on the reference.
        counts = "self.counts = [0] * bins"
        edit(mylib.histogram, counts, counts + "\\n        self.edited = True")
        new = mylib.histogram.Histogram
        assert new is not Histogram
        assert type(new([0.1])).__module__ == "mylib_fast"  # still the engine's
        with coheriq.using_engine("mylib", "reference"):
            assert new([0.1]).edited and type(new([0.1])) is new
        assert type(Histogram([0.1])).__module__ == "mylib_fast"
        with coheriq.using_engine("mylib", "reference"):
            assert type(Histogram([0.1])) is new
            assert isinstance(Histogram([0.1]), Histogram) and isinstance(old, new)
        assert old.counts == [1, 0, 1, 0] and isinstance(old, Histogram)
        assert mylib.density(new([0.1, 0.6])) == [0.5, 0.0, 0.5, 0.0]

        # The package and the domain's own module.
        importlib.reload(mylib)
        importlib.reload(mylib._domain)
        assert mylib._domain.domain is mylib.domain
        assert mylib.mean([2]) == -1.0 and mylib.Histogram is new
        print(coheriq.explain("mylib"))
        """,
    )
    assert "runs on engine 'fast'" in out
    assert "mean       reference" in out and "Histogram  fast" in out


def test_a_failed_reload_is_followed_by_the_fixed_file(site):
    run(
        site,
        """
        import pathlib
        path = pathlib.Path(mylib.stats.__file__)
        good = path.read_text()
        path.write_text(good + "\\nraise RuntimeError('typo')\\n")
        try:
            importlib.reload(mylib.stats)
        except RuntimeError:
            pass
        path.write_text(good.replace("math.fsum(xs) / len(xs)", "42.0"))
        importlib.reload(mylib.stats)
        assert mylib.mean([1]) == 42.0
        """,
    )


def test_a_reloaded_module_adds_a_candidate(site):
    run(
        site,
        """
        edit(mylib.stats, "@domain.acceleration_candidate\\ndef mean",
             "@domain.acceleration_candidate\\ndef total(xs):\\n    return sum(xs)\\n\\n\\n"
             "@domain.acceleration_candidate\\ndef mean")
        coheriq.enable_engine("mylib", "fast")
        assert mylib.stats.total([1, 2]) == 3
        assert "total" in mylib.domain.candidate_kinds
        assert coheriq.engine_class("mylib").total([4]) == 4
        """,
    )


def test_a_second_domain_or_candidate_in_one_run_is_still_an_error(site):
    out = run(
        site,
        editing=False,
        script="""
        import coheriq, mylib
        from mylib._domain import domain
        try:
            @domain.acceleration_candidate
            def mean(xs):
                return 0
        except coheriq.CoheriqDomainError as error:
            print(error)
        try:
            coheriq.AccelerationDomain("mylib")
        except coheriq.CoheriqDomainError as error:
            print(error)
        """,
    )
    assert "has a candidate named 'mean' already" in out
    assert "A coheriq domain named 'mylib' exists already" in out


@pytest.mark.parametrize("filename", ["<doctest default[{}]>", "<doctest default[0]>"])
def test_the_next_cell_or_doctest_example_does_not_run_the_module_again(filename):
    # Each example of a doctest, like each notebook cell, runs as a module body
    # in the module's globals, from a file name of its own or, as Sphinx's
    # testcode blocks do, all from one; only an import running the module again
    # (a reload, a retry) may add candidates or materialize again.
    namespace = {"__name__": "__main__"}

    def run_example(number, source):
        exec(compile(textwrap.dedent(source), filename.format(number), "exec"), namespace)

    run_example(
        0,
        """
        import coheriq
        domain = coheriq.AccelerationDomain("cells")

        @domain.acceleration_candidate
        def first(xs):
            return xs

        domain.materialize()
        """,
    )
    with pytest.raises(coheriq.CoheriqDomainError, match="materialized already"):
        run_example(1, "@domain.acceleration_candidate\ndef late(xs):\n    return xs\n")
    with pytest.raises(coheriq.CoheriqDomainError, match="materialized already"):
        run_example(2, "domain.materialize()\n")
    assert sorted(namespace["domain"].candidate_kinds) == ["first"]


INIT_DOMAIN = '''
"""mylib with its domain created in __init__."""
import coheriq

domain = coheriq.AccelerationDomain("mylib", env_prefix="MYLIB")

from mylib.histogram import Histogram, density
from mylib.stats import mean, normalize

domain.materialize()
'''


def test_reloading_a_package_whose_init_creates_the_domain(site):
    (site / "mylib" / "_domain.py").write_text("from mylib import domain\n")
    (site / "mylib" / "__init__.py").write_text(INIT_DOMAIN)
    out = run(
        site,
        """
        coheriq.enable_engine("mylib", "fast")
        before = mylib.domain
        edit(mylib, "created in __init__", "created in __init__, edited")
        assert mylib.domain is before  # not an empty copy: the candidates are elsewhere
        assert sorted(mylib.domain.candidate_kinds) == ["Histogram", "density", "mean", "normalize"]
        assert mylib.normalize([1, 3]) == [0.25, 0.75]
        assert type(mylib.Histogram([0.1])).__module__ == "mylib_fast"
        edit(mylib.stats, "return math.fsum(xs) / len(xs)", "return 7.0")
        assert mylib.stats.mean([1]) == mylib.mean([1]) == 7.0
        print(coheriq.explain("mylib"))
        """,
    )
    assert "runs on engine 'fast'" in out


def test_an_engine_loaded_after_the_reload_runs_the_new_code(site):
    out = run(
        site,
        """
        edit(mylib.stats, "return math.fsum(xs) / len(xs)", "return 5.0")
        edit(mylib.histogram, "self.counts = [0] * bins", "self.counts = [9] * bins")
        with coheriq.using_engine("mylib", "fast"):
            print(mylib.mean([1]), type(mylib.histogram.Histogram([0.1])).__module__)
        """,
    )
    assert out.split() == ["5.0", "mylib_fast"]


def test_the_package_namespace_follows_the_engine_after_a_reload(site):
    out = run(
        site,
        """
        edit(mylib.histogram, "self.counts = [0] * bins", "self.counts = [9] * bins")
        with coheriq.using_engine("mylib", "fast"):
            print(type(mylib.Histogram([0.1])).__module__)
        built = mylib.Histogram([0.1])
        print(built.counts, type(built) is mylib.histogram.Histogram)
        """,
    )
    assert out.split("\n")[:2] == ["mylib_fast", "[10, 9, 9, 9] True"]


def test_ipython_autoreload_sees_every_edit_through_every_name(site):
    pytest.importorskip("IPython")  # in the README's test environment (ipykernel)
    out = run(
        site,
        """
        import time
        from IPython.extensions.autoreload import ModuleReloader
        from mylib import Histogram, mean

        coheriq.enable_engine("mylib", "fast")
        reloader = ModuleReloader()
        reloader.enabled = reloader.check_all = True
        reloader.check()  # what %autoreload 2 does before each cell
        time.sleep(1.1)  # a new modification time
        for module, old, new in [
            (mylib.stats, "return math.fsum(xs) / len(xs)", "return 99.0"),
            (mylib.histogram, "self.counts = [0] * bins", "self.counts = [0] * bins; self.tag = 1"),
        ]:
            path = pathlib.Path(module.__file__)
            path.write_text(path.read_text().replace(old, new))
        reloader.check()
        print(mean([1]), mylib.mean([1]), type(Histogram([0.1])).__module__)
        with coheriq.using_engine("mylib", "reference"):
            print(Histogram([0.1]).tag)
        """,
    )
    assert out.split() == ["99.0", "99.0", "mylib_fast", "1"]


def test_a_reload_adds_candidates_after_the_modules_last_one(site):
    run(
        site,
        """
        path = pathlib.Path(mylib.stats.__file__)
        path.write_text(
            path.read_text()
            + "\\n\\n@domain.acceleration_candidate\\ndef total(xs):\\n    return sum(xs)\\n"
        )
        importlib.reload(mylib.stats)
        assert mylib.stats.total([1, 2]) == 3
        importlib.reload(mylib.stats)  # and again: now a redefinition
        assert list(mylib.domain.candidate_kinds)[-1] == "total"
        """,
    )


def test_a_name_marked_by_two_modules_fails_the_same_way_on_a_retry(site):
    (site / "mylib" / "extra.py").write_text(
        "from mylib._domain import domain\n\n\n"
        "@domain.acceleration_candidate\ndef mean(xs):\n    return 0\n"
    )
    init = site / "mylib" / "__init__.py"
    init.write_text(init.read_text().replace("domain.materialize()", "import mylib.extra\n"
                                             "domain.materialize()"))  # fmt: skip
    out = run(
        site,
        editing=False,
        script="""
        import coheriq
        for attempt in (1, 2):
            try:
                import mylib
            except coheriq.CoheriqDomainError as error:
                print(error)
        """,
    )
    lines = out.splitlines()
    assert len(lines) == 2 and lines[0] == lines[1]
    assert "marked by module 'mylib.stats' (module 'mylib.extra' marks it now)" in lines[0]


LAZY_INIT = """
import coheriq

domain = coheriq.AccelerationDomain("mylib", env_prefix="MYLIB")
domain.declare("mylib.stats", functions=["mean", "normalize"])

from mylib.histogram import Histogram, density

domain.materialize()


def __getattr__(name):
    if name in ("mean", "normalize"):
        import mylib.stats

        return getattr(mylib.stats, name)
    raise AttributeError(name)
"""


def test_reloading_a_package_that_declares_lazy_candidates(site):
    (site / "mylib" / "__init__.py").write_text(LAZY_INIT)
    (site / "mylib" / "_domain.py").write_text("from mylib import domain\n")
    run(
        site,
        """
        coheriq.enable_engine("mylib", "fast")
        importlib.reload(mylib)  # before the lazy module is imported
        assert mylib.normalize([1, 3]) == [0.25, 0.75] and "mylib.stats" in sys.modules
        importlib.reload(mylib)  # and after
        edit(mylib.stats, "return math.fsum(xs) / len(xs)", "return 3.0")
        assert mylib.mean([1]) == 3.0
        """.replace("sys.modules", "__import__('sys').modules"),
    )


def test_reloading_an_engines_module_says_to_restart(site):
    out = run(
        site,
        """
        import mylib_fast
        try:
            importlib.reload(mylib_fast)
        except coheriq.CoheriqEngineError as error:
            print(error)
        """,
    )
    assert "module 'mylib_fast' defines it again" in out and "restart the program" in out
