"""A library that imports its heavy submodules lazily, as SPEC 1 and lazy_loader do.

The library declares the candidates of its lazily imported module; ``import
lib`` imports nothing more than the unmarked library would; engines override
the declared candidates before their module is imported; the candidates are
marked, and follow the engine, when the module is first used.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import coheriq

WAVES = Path(__file__).resolve().parent.parent / "docs" / "examples" / "waves" / "waves"

# A module __getattr__ that imports a submodule on first use, as lazy_loader's
# attach() writes it.
LAZY_ATTRIBUTES = """
_lazy = {{"fit": "{name}.heavy", "Model": "{name}.heavy", "heavy": "{name}.heavy"}}


def __getattr__(attr):
    if attr in _lazy:
        module = importlib.import_module(_lazy[attr])
        return module if attr == "heavy" else getattr(module, attr)
    raise AttributeError(f"module {{__name__!r}} has no attribute {{attr!r}}")
"""

INIT = (
    '''
"""{name}: light functions, and heavy ones imported on first use."""
import importlib

import coheriq

domain = coheriq.AccelerationDomain("{name}", env_prefix="{prefix}")
domain.declare("{name}.heavy", functions=["fit"], classes=["Model"])

from {name}.light import smooth

domain.materialize()
'''
    + LAZY_ATTRIBUTES
)

PLAIN_INIT = (
    '''
"""{name}: the same library, without coheriq."""
import importlib

from {name}.light import smooth
'''
    + LAZY_ATTRIBUTES
)

LIGHT = """
from {name} import domain


@domain.acceleration_candidate
def smooth(xs):
    return [round(x, 1) for x in xs]
"""

PLAIN_LIGHT = """
def smooth(xs):
    return [round(x, 1) for x in xs]
"""

# The heavy dependency: slow to import, and with a side effect on import.
SLOW = """
import time
time.sleep({delay})
IMPORTED = True
"""

HEAVY = """
import {slow}
from {name} import domain


@domain.acceleration_candidate
def fit(xs):
    return ("reference", sum(xs))


@domain.acceleration_candidate
class Model:
    def __init__(self, k):
        self.k = k

    @classmethod
    def default(cls):
        return cls(1)
"""

PLAIN_HEAVY = """
import {slow}


def fit(xs):
    return ("reference", sum(xs))
"""

ENGINE = """
import coheriq


class Fast(coheriq.engine_class("{name}"), name="fast"):
    def fit(self, xs):
        return ("fast", sum(xs))

    def smooth(self, xs):
        return ["fast", *xs]

    class Model:
        def __init__(self, k):
            self.k = -k


class Lean(coheriq.engine_class("{name}"), name="lean"):
    def smooth(self, xs):
        return ("lean", super().fit(xs))
"""


def write_package(root: Path, name: str, init: str, files: dict[str, str]) -> None:
    package = root / name
    package.mkdir()
    (package / "__init__.py").write_text(textwrap.dedent(init))
    for module, source in files.items():
        (package / f"{module}.py").write_text(textwrap.dedent(source))


@pytest.fixture
def lazylib(tmp_path, unique, monkeypatch, make_dist):
    """A lazily loading library with an engine "fast" advertised; its modules' names."""
    name, slow = unique("lazylib"), unique("slowdep")
    prefix = name.upper()
    monkeypatch.delenv(f"{prefix}_ENGINE", raising=False)
    fmt = {"name": name, "slow": slow, "prefix": prefix, "delay": 0}
    write_package(
        tmp_path,
        name,
        INIT.format(**fmt),
        {"light": LIGHT.format(**fmt), "heavy": HEAVY.format(**fmt)},
    )
    (tmp_path / f"{slow}.py").write_text(SLOW.format(**fmt))
    monkeypatch.syspath_prepend(str(tmp_path))
    make_dist(
        f"{name}-fast",
        {f"{name}_fast": ENGINE.format(**fmt)},
        {f"coheriq.engines.{name}": {"fast": f"{name}_fast", "lean": f"{name}_fast"}},
    )
    yield name, slow
    for module in list(sys.modules):
        if module.startswith((name, slow)):
            del sys.modules[module]


def test_import_lib_leaves_the_lazy_module_alone(lazylib):
    name, slow = lazylib
    lib = importlib.import_module(name)
    assert f"{name}.heavy" not in sys.modules and slow not in sys.modules
    assert dict(lib.domain.not_imported) == {"fit": f"{name}.heavy", "Model": f"{name}.heavy"}
    assert list(lib.domain.candidate_kinds) == ["fit", "Model", "smooth"]
    assert lib.smooth([1.04]) == [1.0]
    assert f"{name}.heavy" not in sys.modules


def test_an_engine_overrides_candidates_not_imported_yet(lazylib):
    name, slow = lazylib
    lib = importlib.import_module(name)
    coheriq.enable_engine(name, "fast")
    assert lib.smooth([1]) == ["fast", 1]  # the engine started without the heavy module
    assert slow not in sys.modules
    # First use: the module is imported, its candidates marked, on the engine chosen.
    assert lib.fit([1, 2]) == ("fast", 3)
    assert lib.Model(2).k == -2 and isinstance(lib.Model(2), lib.Model)
    assert isinstance(lib.Model.default(), lib.Model)  # alternate constructor follows
    assert not lib.domain.not_imported
    with coheriq.using_engine(name, "reference"):
        assert lib.fit([1, 2]) == ("reference", 3)
        assert type(lib.Model(2)) is lib.Model


def test_an_engines_code_reaching_a_declared_candidate_imports_its_module(lazylib):
    name, slow = lazylib
    lib = importlib.import_module(name)
    with coheriq.using_engine(name, "lean"):
        assert slow not in sys.modules
        assert lib.smooth([1, 2]) == ("lean", ("reference", 3))  # super().fit imports it
    assert slow in sys.modules
    assert coheriq.engine_class(name).fit([4]) == ("reference", 4)


def test_a_misspelled_override_of_a_declared_candidate_is_refused(lazylib):
    name, _ = lazylib
    importlib.import_module(name)
    with pytest.raises(coheriq.CoheriqEngineError, match=r"'fitt'.*Did you mean 'fit'"):

        class Typo(coheriq.engine_class(name)):
            def fitt(self, xs):
                return 0

    with pytest.raises(coheriq.CoheriqEngineError, match="must be overridden by a class"):

        class Kind(coheriq.engine_class(name)):
            def Model(self, k):  # noqa: N802 - the candidate's name
                return k


def test_a_bad_signature_is_reported_when_the_module_is_imported(lazylib):
    name, _ = lazylib
    lib = importlib.import_module(name)

    class Narrow(coheriq.engine_class(name), name="narrow"):
        def fit(self):  # the library's fit takes xs
            return 0

    with pytest.warns(coheriq.CoheriqSignatureWarning, match="'narrow'.*'fit'"):
        lib.heavy  # noqa: B018 - imports the module


def test_in_strict_mode_a_bad_override_refuses_the_engine_not_the_module(lazylib, monkeypatch):
    """An installed engine, never chosen, must not make the library's module fail to
    import: the engine is refused, and choosing it says why."""
    name, _ = lazylib
    monkeypatch.setenv("COHERIQ_STRICT", "1")
    lib = importlib.import_module(name)

    class Narrow(coheriq.engine_class(name), name="narrow"):
        def fit(self):  # the library's fit takes xs
            return 0

    class Derived(Narrow, name="derived"):  # takes Narrow's fit
        pass

    class Fixed(Narrow, name="fixed"):
        def fit(self, xs):
            return ("fixed", sum(xs))

    with pytest.warns(
        coheriq.CoheriqSignatureWarning,
        match=r"'narrow'.*'fit'.*'xs' is missing.*COHERIQ_STRICT is set.*the engine is "
        r"refused, not the module",
    ):
        assert lib.fit([1, 2]) == ("reference", 3)  # imports the module: on the reference
    for engine in ("narrow", "derived"):
        with (
            pytest.raises(
                coheriq.CoheriqEngineStartError,
                match=rf"Engine '{engine}' of domain '{name}' cannot start: it was refused "
                r"when candidate 'fit' was marked.*'narrow'.*'xs' is missing.*Fix the override",
            ),
            coheriq.using_engine(name, engine),
        ):
            pass
    with coheriq.using_engine(name, "fixed"):
        assert lib.fit([1, 2]) == ("fixed", 3)
    with coheriq.using_engine(name, ["narrow", "fast"]):  # an ordered list passes it over
        assert lib.fit([1, 2]) == ("fast", 3)
        assert "narrow: skipped, failed to start" in str(coheriq.explain(name))
    assert lib.fit([1, 2]) == ("reference", 3)


def test_in_strict_mode_an_engine_running_already_cannot_be_refused(lazylib, monkeypatch):
    name, _ = lazylib
    monkeypatch.setenv("COHERIQ_STRICT", "1")
    lib = importlib.import_module(name)

    class Narrow(coheriq.engine_class(name), name="narrow"):
        def fit(self):
            return 0

    with (
        coheriq.using_engine(name, "narrow"),
        pytest.raises(
            coheriq.CoheriqEngineError,
            match=r"'xs' is missing.*engine 'narrow', which runs this override, has started "
            r"already.*Fix the override, or do not choose that engine",
        ),
    ):
        lib.heavy  # noqa: B018 - imports the module


ERRORS_INIT = """
import coheriq

domain = coheriq.AccelerationDomain("{name}")
domain.declare("{name}.errors", classes=["ParseError"])
domain.materialize()
"""

ERRORS = """
from {name} import domain


@domain.acceleration_candidate
class ParseError(ValueError):
    pass
"""


def test_an_error_class_that_does_not_derive_refuses_the_engine_not_the_module(
    tmp_path, unique, monkeypatch
):
    """Not only in strict mode: an engine whose error class ``except ParseError`` would
    not catch cannot run, whichever mode."""
    name = unique("lazyerrors")
    write_package(
        tmp_path,
        name,
        ERRORS_INIT.format(name=name),
        {"errors": ERRORS.format(name=name)},
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("COHERIQ_STRICT", raising=False)
    try:
        importlib.import_module(name)

        class Loose(coheriq.engine_class(name), name="loose"):
            class ParseError(Exception):  # not the library's ParseError
                pass

        with pytest.warns(coheriq.CoheriqSignatureWarning, match="the engine is refused"):
            errors = importlib.import_module(f"{name}.errors")
        assert issubclass(errors.ParseError, ValueError)
        with (
            pytest.raises(
                coheriq.CoheriqEngineStartError,
                match=r"Engine 'loose' .* cannot start.*does not derive from it",
            ),
            coheriq.using_engine(name, "loose"),
        ):
            pass
    finally:
        for module in list(sys.modules):
            if module.startswith(name):
                del sys.modules[module]


def test_explain_coverage_and_the_cli_show_candidates_not_imported(lazylib, capsys, monkeypatch):
    name, _ = lazylib
    monkeypatch.setenv("COHERIQ_STRICT", "0")  # check sets it: restored afterwards
    importlib.import_module(name)
    text = str(coheriq.explain(name))
    assert f"fit     reference  (not imported yet: module {name}.heavy)" in text
    assert "smooth  reference\n" in text + "\n"
    assert coheriq.explain(name).as_dict()["not_imported"]["Model"] == f"{name}.heavy"
    assert set(coheriq.coverage(name).rows) == {"fit", "Model", "smooth"}
    from coheriq.cli import main

    assert main(["show", name]) == 0
    assert f"function fit (not imported yet: module {name}.heavy)" in capsys.readouterr().out
    assert main(["check", name]) == 0  # imports the lazy module: its candidates are checked
    assert f"{name}.heavy" in sys.modules


def test_declaration_mistakes_are_clear(tmp_path, unique, monkeypatch):
    name = unique("lazybad")
    fmt = {"name": name, "slow": "math", "prefix": name.upper(), "delay": 0}
    write_package(
        tmp_path,
        name,
        INIT.format(**fmt).replace('functions=["fit"]', 'functions=["fit", "predict"]'),
        {"light": LIGHT.format(**fmt), "heavy": HEAVY.format(**fmt)},
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        lib = importlib.import_module(name)
        with pytest.raises(coheriq.CoheriqDomainError, match="did not mark it"):
            coheriq.engine_class(name).predict  # noqa: B018
        from coheriq._library.late_candidates import import_declared

        problems = import_declared(lib.domain)
        assert "predict" in problems[f"{name}.heavy"]
        assert f"(declared in module {name}.heavy, which did not mark it)" in str(
            coheriq.explain(name)
        )
        domain = lib.domain
        with pytest.raises(coheriq.CoheriqDomainError, match="materialized already"):
            domain.declare(f"{name}.more", functions=["g"])
        with pytest.raises(coheriq.CoheriqDomainError, match=r"declare\(\)"):
            domain.acceleration_candidate(lambda: 0, name="late")
    finally:
        for module in list(sys.modules):
            if module.startswith(name):
                del sys.modules[module]


def test_a_lazy_module_marking_a_name_its_declaration_misspells_says_did_you_mean(
    tmp_path, unique, monkeypatch
):
    name = unique("lazytypo")
    fmt = {"name": name, "slow": "math", "prefix": name.upper(), "delay": 0}
    write_package(
        tmp_path,
        name,
        INIT.format(**fmt).replace('functions=["fit"]', 'functions=["fitt"]'),
        {"light": LIGHT.format(**fmt), "heavy": HEAVY.format(**fmt)},
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        importlib.import_module(name)
        with pytest.raises(coheriq.CoheriqDomainError) as caught:
            importlib.import_module(f"{name}.heavy")
        message = str(caught.value)
        assert f"Module '{name}.heavy' marks 'fit'" in message
        assert "'fitt', not 'fit'. Did you mean 'fitt'?" in message
    finally:
        for module in list(sys.modules):
            if module.startswith(name):
                del sys.modules[module]


def test_declare_refuses_bad_input(unique):
    with coheriq.testing.isolated():
        domain = coheriq.AccelerationDomain(unique("decl"))
        with pytest.raises(coheriq.CoheriqTypeError, match="full dotted name"):
            domain.declare("not a module", functions=["f"])
        with pytest.raises(coheriq.CoheriqTypeError, match="twice"):
            domain.declare("m", functions=["f"], classes=["f"])
        domain.declare("m", functions=["f"])
        with pytest.raises(coheriq.CoheriqDomainError, match="has a candidate of that name"):
            domain.declare("n", functions=["f"])

        @domain.acceleration_candidate
        def g():
            return 0

        with pytest.raises(coheriq.CoheriqDomainError, match="declares in module 'm'"):
            domain.acceleration_candidate(lambda: 0, name="f")
        assert dict(domain.not_imported) == {"f": "m"}


MEASURE = """
import sys, time
before = set(sys.modules)
start = time.perf_counter()
import {module}
took = time.perf_counter() - start
new = set(sys.modules) - before
known = sys.stdlib_module_names | {{"coheriq", "{lib}"}}
ours = sorted(m for m in new if m.split(".")[0] not in known)
stdlib = sorted(m for m in new if m.split(".")[0] in sys.stdlib_module_names)
print(round(took, 3), ours, stdlib, sep="|")
"""


@pytest.mark.parametrize("submodule", ["", ".light"])
def test_import_lib_imports_nothing_more_than_unmarked(tmp_path, submodule):
    delay = 0.5  # the heavy dependency's import time
    for lib, init, light, heavy in (
        ("marked", INIT, LIGHT, HEAVY),
        ("plain", PLAIN_INIT, PLAIN_LIGHT, PLAIN_HEAVY),
    ):
        fmt = {"name": lib, "slow": f"{lib}_dep", "prefix": lib.upper(), "delay": delay}
        write_package(
            tmp_path,
            lib,
            init.format(**fmt),
            {"light": light.format(**fmt), "heavy": heavy.format(**fmt)},
        )
        (tmp_path / f"{lib}_dep.py").write_text(SLOW.format(**fmt))
    imported = {}
    for lib in ("marked", "plain"):
        done = subprocess.run(
            [sys.executable, "-c", MEASURE.format(module=lib + submodule, lib=lib)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        took, others, stdlib = done.stdout.strip().split("|")
        imported[lib] = others, set(ast.literal_eval(stdlib))
        assert float(took) < delay  # the slow dependency was not imported
    # The same modules as the library without coheriq, besides coheriq itself and
    # the three small standard modules it uses.
    assert imported["marked"][0] == imported["plain"][0] == "[]"
    extra = imported["marked"][1] - imported["plain"][1]
    assert extra <= {"__future__", "_contextvars", "keyword"}
    assert not {"functools", "collections"} & extra


def test_import_time_of_the_slow_module_is_paid_on_first_use(tmp_path):
    fmt = {"name": "timed", "slow": "timed_dep", "prefix": "TIMED", "delay": 0.3}
    write_package(
        tmp_path,
        "timed",
        INIT.format(**fmt),
        {"light": LIGHT.format(**fmt), "heavy": HEAVY.format(**fmt)},
    )
    (tmp_path / "timed_dep.py").write_text(SLOW.format(**fmt))
    script = (
        "import time, timed\n"
        "start = time.perf_counter(); timed.fit([1]); print(time.perf_counter() - start)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) >= 0.3


def test_the_adoption_guides_example_on_an_engine():
    # docs/examples/lazylib, as adopting.rst shows it, with an engine defined before
    # its lazy module is imported.
    example = Path(__file__).parent.parent / "docs" / "examples" / "lazylib"
    script = textwrap.dedent(
        """
        import sys, coheriq, lazylib

        class Fast(coheriq.engine_class("lazylib"), name="fast"):
            def fit(self, xs, ys):
                return ("fast", len(xs))

        coheriq.enable_engine("lazylib", "fast")
        assert lazylib.spread([1, 4]) == 3 and "lazylib.fitting" not in sys.modules
        print(lazylib.fit([0, 1], [1, 3]), lazylib.Model(1, 0)(2))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={"PYTHONPATH": str(example)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["('fast',", "2)", "2"]


# -- subpackages that declare their own modules (lazy_loader's attach_stub) ----------------

STUB_ENGINE = """
import coheriq


class Fast(coheriq.engine_class("{name}"), name="fast"):
    def convolve(self, xs, kernel):
        return ("fast", super().convolve(xs, kernel))
"""


@pytest.fixture
def stublib(tmp_path, unique, monkeypatch):
    """A library laid out as lazy_loader's attach_stub users lay theirs out; its name."""
    pytest.importorskip("lazy_loader")
    name = unique("stublib")
    # The adopting guide's example, under a name of this test's own.
    for source in WAVES.rglob("*.py*"):
        if "__pycache__" not in source.parts:
            copy = tmp_path / name / source.relative_to(WAVES)
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_text(source.read_text().replace("waves", name))
    (tmp_path / f"{name}_fast.py").write_text(STUB_ENGINE.format(name=name))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    for module in list(sys.modules):
        if module.startswith(name):
            del sys.modules[module]


def test_a_lazily_imported_subpackage_declares_its_own_modules(stublib):
    lib = importlib.import_module(stublib)
    assert f"{stublib}.signal" not in sys.modules
    assert lib.domain.declaring_packages == (f"{stublib}.signal",)
    assert "convolve" not in lib.domain.candidate_kinds  # not declared until it loads
    signal = lib.signal  # the subpackage's __init__ runs: it declares, imports nothing more
    assert f"{stublib}.signal._filters" not in sys.modules
    assert dict(lib.domain.not_imported) == {
        "mean": f"{stublib}._core",
        "convolve": f"{stublib}.signal._filters",
        "Kernel": f"{stublib}.signal._filters",
    }
    assert signal.convolve([1, 2, 3], signal.Kernel(1, 1)) == [3, 5]
    assert dict(lib.domain.not_imported) == {"mean": f"{stublib}._core"}  # marked on use
    assert coheriq.engine_class(stublib).convolve([1, 2], signal.Kernel(2)) == [2, 4]


def test_an_engine_for_a_subpackage_not_imported_yet_is_checked_by_name(stublib):
    lib = importlib.import_module(stublib)
    fast = importlib.import_module(f"{stublib}_fast")  # imports the subpackage's __init__
    assert f"{stublib}.signal" in sys.modules
    assert f"{stublib}.signal._filters" not in sys.modules
    with coheriq.using_engine(stublib, fast.Fast):
        assert lib.signal.convolve([1, 2], lib.signal.Kernel(1)) == ("fast", [1, 2])
        assert lib.mean([1, 2]) == 1.5
    with pytest.raises(coheriq.CoheriqEngineError, match=r"'convolv'.*Did you mean 'convolve'"):

        class Typo(coheriq.engine_class(stublib)):
            def convolv(self, xs, kernel):
                return xs


def test_a_declaration_after_materialize_needs_a_named_subpackage(stublib):
    lib = importlib.import_module(stublib)
    with pytest.raises(coheriq.CoheriqDomainError, match=r"materialized already.*declare_package"):
        lib.domain.declare(f"{stublib}.other", functions=["f"])
    with pytest.raises(coheriq.CoheriqDomainError, match=r"declare_package\(\).*materialized"):
        lib.domain.declare_package(f"{stublib}.other")
    with pytest.raises(coheriq.CoheriqTypeError, match="full dotted name"):
        lib.domain.declare_package("not a module")
    assert lib.domain.declaring_packages == (f"{stublib}.signal",)
    assert "f" not in lib.domain.candidate_kinds  # nothing half-done


def test_a_subpackage_that_fails_to_import_is_named_in_the_engines_error(stublib, tmp_path):
    (tmp_path / stublib / "signal" / "__init__.py").write_text("raise ImportError('no scipy')\n")
    importlib.import_module(stublib)
    with pytest.raises(coheriq.CoheriqEngineError) as caught:

        class Early(coheriq.engine_class(stublib)):
            def convolve(self, xs, kernel):
                return xs

    message = str(caught.value)
    assert "'convolve', which is not a candidate" in message
    assert f"Subpackage '{stublib}.signal' declares candidates of its own" in message
    assert "ImportError: no scipy" in message
