"""Code written against coheriq 0.0.x runs unchanged (issue 16).

Each case is written as a 0.0.x library, engine or program would write it:
function candidates marked with ``@domain.acceleration_candidate``, engines made
with ``AccelerationEngine(domain, name)`` and ``@engine.override``, the user's
``enable_engine``, ``<PREFIX>_ENGINE``, ``available_engines``,
``active_implementation`` and ``resolve_impl``, and ``except`` clauses naming
the classes 0.0.x raised. Where this coheriq raises a clearer class today, the
case also checks that the error is still an instance of it.

The last cases run the before/after example of ``docs/migrating.rst`` (the files
under ``docs/examples/compat/``) in a fresh interpreter, and check that the
page's drawing of the exception tree is the tree of the live classes.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import textwrap
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import coheriq
import coheriq as cq

ROOT = Path(__file__).resolve().parent.parent
COMPAT_EXAMPLES = ROOT / "docs" / "examples" / "compat"
MIGRATING = ROOT / "docs" / "migrating.rst"


@dataclass
class OldLib:
    """A library written for 0.0.x: two function candidates and an env prefix."""

    name: str
    env_var: str
    domain: coheriq.AccelerationDomain
    mean: Any
    scale: Any


def build_old_lib(name: str) -> OldLib:
    domain = coheriq.AccelerationDomain(name, env_prefix=name.upper())

    @domain.acceleration_candidate
    def mean(xs):
        return ("reference", sum(xs) / len(xs))

    @domain.acceleration_candidate
    def scale(xs, factor):
        return ("reference", [x * factor for x in xs])

    domain.materialize()
    return OldLib(name, f"{name.upper()}_ENGINE", domain, mean, scale)


def old_engine(domain_name: str, engine_name: str) -> coheriq.AccelerationEngine:
    """An engine written for 0.0.x: decorated functions, then materialize()."""
    engine = coheriq.AccelerationEngine(domain_name, engine_name)

    @engine.override
    def mean(xs):
        return (engine_name, sum(xs) / len(xs))

    engine.materialize()
    return engine


# The module of an engine package written for 0.0.x, advertised by entry point.
OLD_ENGINE_MODULE = """
import coheriq

engine = coheriq.AccelerationEngine({domain!r}, {engine!r})


@engine.override
def mean(xs):
    return ({engine!r}, sum(xs) / len(xs))


engine.materialize()
"""


@pytest.fixture
def old(unique, monkeypatch) -> OldLib:
    """A fresh 0.0.x-style library; its environment variable is unset."""
    made = build_old_lib(unique("oldlib"))
    monkeypatch.delenv(made.env_var, raising=False)
    return made


def advertise(make_dist, domain_name: str, engine_name: str, module: str) -> None:
    """Install a distribution whose module ``module`` defines a 0.0.x-style engine."""
    source = OLD_ENGINE_MODULE.format(domain=domain_name, engine=engine_name)
    make_dist(
        f"{module}_dist",
        {module: source},
        {f"coheriq.engines.{domain_name}": {engine_name: module}},
    )


# -- construction errors ------------------------------------------------------------


@pytest.mark.parametrize("bad", ["", None, 3, b"lib"])
def test_domain_name_empty_or_not_a_string_is_a_domain_error(bad):
    with pytest.raises(coheriq.CoheriqDomainError) as info:
        coheriq.AccelerationDomain(bad)
    # This project's clearer class, which it raises today, stays.
    assert isinstance(info.value, coheriq.CoheriqTypeError)
    assert isinstance(info.value, TypeError)


@pytest.mark.parametrize("bad", ["", None, 3])
def test_engine_name_empty_or_not_a_string_is_an_engine_error(old, bad):
    with pytest.raises(coheriq.CoheriqEngineError) as info:
        coheriq.AccelerationEngine(old.name, bad)
    assert isinstance(info.value, coheriq.CoheriqTypeError)
    assert isinstance(info.value, TypeError)
    assert coheriq.available_engines(old.name) == ()


def test_engine_of_unknown_domain_is_an_engine_error(old):
    with pytest.raises(coheriq.CoheriqEngineError) as info:
        coheriq.AccelerationEngine(old.name + "_nope", "fast")
    assert isinstance(info.value, coheriq.CoheriqDomainNotFoundError)
    assert old.name + "_nope" in str(info.value)


def test_engine_before_its_domain_is_materialized_is_an_engine_error(unique):
    name = unique("oldlib")
    domain = coheriq.AccelerationDomain(name)

    @domain.acceleration_candidate
    def mean(xs):
        return sum(xs) / len(xs)

    with pytest.raises(coheriq.CoheriqEngineError) as info:
        coheriq.AccelerationEngine(name, "fast")
    assert isinstance(info.value, coheriq.CoheriqDomainError)
    # Nothing was registered: once the domain is ready, the name is free.
    domain.materialize()
    old_engine(name, "fast")
    assert coheriq.available_engines(name) == ("fast",)


def test_domain_name_taken_by_another_library(old):
    another_library = {"__name__": "another_library", "coheriq": coheriq, "name": old.name}
    with pytest.raises(coheriq.CoheriqDomainError):
        exec("coheriq.AccelerationDomain(name)", another_library)


def test_engine_named_reference(old):
    with pytest.raises(coheriq.CoheriqEngineError):
        coheriq.AccelerationEngine(old.name, coheriq.REFERENCE)
    assert coheriq.REFERENCE == "reference"


def test_override_of_a_name_that_is_not_a_candidate(old):
    engine = coheriq.AccelerationEngine(old.name, "fast")
    with pytest.raises(coheriq.CoheriqEngineError):

        @engine.override
        def median(xs):
            return xs[len(xs) // 2]


# -- materialize ----------------------------------------------------------------------


def test_materialize_twice(old):
    with pytest.raises(coheriq.CoheriqDomainError):
        old.domain.materialize()
    assert old.mean([1, 3]) == ("reference", 2)


def test_engine_materialize_twice(old):
    engine = old_engine(old.name, "fast")
    with pytest.raises(coheriq.CoheriqEngineError):
        engine.materialize()


def test_override_after_engine_materialize(old):
    engine = old_engine(old.name, "fast")
    with pytest.raises(coheriq.CoheriqEngineError):

        @engine.override
        def scale(xs, factor):
            return ("fast", xs)

    coheriq.enable_engine(old.name, "fast")
    assert old.scale([1], 2) == ("reference", [2])


def test_marking_after_materialize(old):
    with pytest.raises(coheriq.CoheriqDomainError):

        @old.domain.acceleration_candidate
        def median(xs):
            return xs[len(xs) // 2]

    assert list(old.domain.candidate_kinds) == ["mean", "scale"]


def test_calling_before_materialize(unique):
    domain = coheriq.AccelerationDomain(unique("oldlib"))

    @domain.acceleration_candidate
    def mean(xs):
        return sum(xs) / len(xs)

    with pytest.raises(coheriq.CoheriqDomainError):
        mean([1, 3])
    domain.materialize()
    assert mean([1, 3]) == 2


# Messages that coheriq 0.0.x's own tests match: what is wrong first is said first.
def test_what_is_wrong_first_is_said_first(unique):
    with cq.testing.isolated():
        domain = cq.AccelerationDomain(unique())
        with pytest.raises(cq.CoheriqDomainError, match="must be materialized"):
            cq.AccelerationEngine(domain, "early")
        domain.materialize()
        with pytest.raises(cq.CoheriqDomainError, match="materialized already"):
            domain.acceleration_candidate(lambda x: x)  # "<lambda>" is no name either


# -- an engine is registered when it is constructed ---------------------------------


def test_engine_is_listed_from_construction(old):
    engine = coheriq.AccelerationEngine(old.name, "bar")
    assert coheriq.available_engines(old.name) == ("bar",)

    @engine.override
    def mean(xs):
        return ("bar", sum(xs) / len(xs))

    engine.materialize()
    assert coheriq.available_engines(old.name) == ("bar",)
    coheriq.enable_engine(old.name, "bar")
    assert old.mean([1, 3]) == ("bar", 2)


def test_second_engine_of_the_same_name_raises_at_construction(old):
    coheriq.AccelerationEngine(old.name, "bar")
    with pytest.raises(coheriq.CoheriqEngineError):
        coheriq.AccelerationEngine(old.name, "bar")
    assert coheriq.available_engines(old.name) == ("bar",)


def test_engine_name_taken_by_a_materialized_engine(old):
    old_engine(old.name, "bar")
    with pytest.raises(coheriq.CoheriqEngineError):
        coheriq.AccelerationEngine(old.name, "bar")


def test_a_reserved_name_is_refused_to_a_class_form_engine_too(old):
    coheriq.AccelerationEngine(old.name, "bar")
    with pytest.raises(coheriq.CoheriqEngineError, match="reserved the name"):

        class Bar(coheriq.engine_class(old.name), name="bar"):
            pass

    assert coheriq.available_engines(old.name) == ("bar",)


def test_an_engine_not_materialized_cannot_be_enabled_and_says_why(old):
    coheriq.AccelerationEngine(old.name, "bar")
    with pytest.raises(coheriq.CoheriqEngineNotFoundError, match="not materialized yet"):
        coheriq.enable_engine(old.name, "bar")
    assert not coheriq.explain(old.name).settled  # nothing was chosen
    assert "bar" not in coheriq.coverage(old.name, advertised=True).engines


def test_an_engine_module_that_fails_gives_back_the_name_it_reserved(
    old, make_dist, unique, tmp_path
):
    module = unique("old_engine_mod")
    flag = tmp_path / "broken"
    flag.write_text("")
    source = OLD_ENGINE_MODULE.format(domain=old.name, engine="bar").replace(
        "engine.materialize()",
        f"import os\nif os.path.exists({str(flag)!r}):\n    raise OSError('no device')\n"
        "engine.materialize()",
    )
    make_dist(f"{module}_dist", {module: source}, {f"coheriq.engines.{old.name}": {"bar": module}})
    with pytest.raises(coheriq.CoheriqEngineLoadError):
        coheriq.enable_engine(old.name, "bar")
    flag.unlink()  # the device is back: a retry imports the module afresh
    coheriq.enable_engine(old.name, "bar")
    assert old.mean([1, 3]) == ("bar", 2)


# -- enabling, before and after the first use ----------------------------------------


def test_enable_before_first_use(old):
    old_engine(old.name, "bar")
    coheriq.enable_engine(old.name, "bar")
    assert old.mean([1, 3]) == ("bar", 2)
    assert old.scale([1], 2) == ("reference", [2])  # not overridden: the reference
    assert coheriq.active_implementation(old.name) == "bar"


def test_enable_names_imported_earlier_follow(old):
    old_engine(old.name, "bar")
    mean = old.mean  # `from oldlib import mean`, before enabling
    coheriq.enable_engine(old.name, "bar")
    assert mean([1, 3]) == ("bar", 2)


def test_enable_the_same_engine_again_is_a_no_op(old):
    old_engine(old.name, "bar")
    coheriq.enable_engine(old.name, "bar")
    old.mean([1])
    coheriq.enable_engine(old.name, "bar")
    assert old.mean([1, 3]) == ("bar", 2)


def test_enable_the_reference_after_first_use_is_a_no_op(old):
    old_engine(old.name, "bar")
    old.mean([1])  # settles the reference
    coheriq.enable_engine(old.name, coheriq.REFERENCE)
    assert coheriq.active_implementation(old.name) == coheriq.REFERENCE


def test_enable_another_engine_after_first_use(old):
    old_engine(old.name, "bar")
    old.mean([1])
    with pytest.raises(coheriq.CoheriqDomainError) as info:
        coheriq.enable_engine(old.name, "bar")
    assert isinstance(info.value, coheriq.CoheriqEngineSettledError)
    assert isinstance(info.value, coheriq.CoheriqUserError)
    assert old.mean([1, 3]) == ("reference", 2)


def test_enable_another_engine_after_enable(old):
    old_engine(old.name, "bar")
    old_engine(old.name, "baz")
    coheriq.enable_engine(old.name, "bar")
    try:
        coheriq.enable_engine(old.name, "baz")
    except coheriq.CoheriqDomainError:  # as a 0.0.x program catches it
        pass
    else:
        pytest.fail("enabling a second engine did not raise CoheriqDomainError")
    assert old.mean([1, 3]) == ("bar", 2)


def test_enable_unknown_engine_or_domain(old):
    with pytest.raises(coheriq.CoheriqEngineNotFoundError):
        coheriq.enable_engine(old.name, "nope")
    with pytest.raises(coheriq.CoheriqDomainNotFoundError):
        coheriq.enable_engine(old.name + "_nope", "bar")
    assert not coheriq.explain(old.name).settled


# -- the environment variable ----------------------------------------------------------


def test_environment_variable_is_read_at_first_use(old, monkeypatch):
    old_engine(old.name, "bar")
    monkeypatch.setenv(old.env_var, "bar")  # set after the import of the library
    assert old.mean([1, 3]) == ("bar", 2)
    assert coheriq.active_implementation(old.name) == "bar"
    monkeypatch.delenv(old.env_var)  # too late to matter
    assert old.mean([1, 3]) == ("bar", 2)


def test_explicit_enable_beats_environment_variable(old, monkeypatch):
    old_engine(old.name, "bar")
    old_engine(old.name, "baz")
    monkeypatch.setenv(old.env_var, "baz")
    coheriq.enable_engine(old.name, "bar")
    assert old.mean([1, 3]) == ("bar", 2)


def test_enable_after_environment_variable_settled(old, monkeypatch):
    old_engine(old.name, "bar")
    old_engine(old.name, "baz")
    monkeypatch.setenv(old.env_var, "baz")
    assert old.mean([1, 3]) == ("baz", 2)
    with pytest.raises(coheriq.CoheriqDomainError) as info:
        coheriq.enable_engine(old.name, "bar")
    assert isinstance(info.value, coheriq.CoheriqEngineSettledError)


def test_environment_variable_loads_advertised_engine(old, make_dist, unique, monkeypatch):
    module = unique("old_engine_mod")
    advertise(make_dist, old.name, "bar", module)
    monkeypatch.setenv(old.env_var, "bar")
    assert module not in sys.modules
    assert old.mean([1, 3]) == ("bar", 2)
    assert module in sys.modules


# -- active_implementation never settles ------------------------------------------------


def test_active_implementation_never_settles(old):
    old_engine(old.name, "bar")
    assert not coheriq.explain(old.name).settled
    assert not coheriq.explain(old.domain).settled
    coheriq.enable_engine(old.name, "bar")  # still allowed: asking chose nothing
    assert coheriq.active_implementation(old.name) == "bar"


def test_active_implementation_does_not_read_the_environment(old, monkeypatch):
    old_engine(old.name, "bar")
    old_engine(old.name, "baz")
    monkeypatch.setenv(old.env_var, "baz")
    assert not coheriq.explain(old.name).settled
    coheriq.enable_engine(old.name, "bar")
    assert old.mean([1, 3]) == ("bar", 2)


def test_active_implementation_after_first_use(old):
    assert old.mean([1, 3]) == ("reference", 2)
    assert coheriq.active_implementation(old.name) == coheriq.REFERENCE


# -- resolve_impl freezes the choice -------------------------------------------------


def test_resolve_impl_freezes_the_choice(old):
    old_engine(old.name, "bar")
    impl = coheriq.resolve_impl(old.mean)
    assert impl is old.mean.__wrapped__
    assert impl([1, 3]) == ("reference", 2)
    with pytest.raises(coheriq.CoheriqDomainError) as info:
        coheriq.enable_engine(old.name, "bar")
    assert isinstance(info.value, coheriq.CoheriqEngineSettledError)
    assert coheriq.active_implementation(old.name) == coheriq.REFERENCE


def test_resolve_impl_returns_the_engine_function(old):
    engine = old_engine(old.name, "bar")
    coheriq.enable_engine(old.name, engine)
    impl = coheriq.resolve_impl(old.mean)
    assert impl([1, 3]) == ("bar", 2)
    assert impl is engine.engine_class.mean
    assert coheriq.resolve_impl(old.scale) is old.scale.__wrapped__


def test_resolve_impl_of_something_else(old):
    with pytest.raises(coheriq.CoheriqTypeError):
        coheriq.resolve_impl(old.mean.__wrapped__)


# -- available_engines ---------------------------------------------------------------


def test_available_engines_is_a_sorted_tuple(old):
    assert coheriq.available_engines(old.name) == ()
    old_engine(old.name, "baz")
    old_engine(old.name, "bar")
    engines = coheriq.available_engines(old.name)
    assert engines == ("bar", "baz")
    assert isinstance(engines, tuple)
    assert repr(engines) == "('bar', 'baz')"  # as 0.0.x's release note shows it
    assert coheriq.available_engines(old.domain) == ("bar", "baz")


def test_available_engines_does_not_settle(old):
    old_engine(old.name, "bar")
    coheriq.available_engines(old.name)
    assert not coheriq.explain(old.name).settled
    coheriq.enable_engine(old.name, "bar")
    assert old.mean([1, 3]) == ("bar", 2)


def test_available_engines_lists_advertised_engines_without_importing(old, make_dist, unique):
    gpu, mpi = unique("old_gpu_mod"), unique("old_mpi_mod")
    advertise(make_dist, old.name, "mpi", mpi)
    advertise(make_dist, old.name, "gpu", gpu)
    old_engine(old.name, "bar")
    assert coheriq.available_engines(old.name) == ("bar", "gpu", "mpi")
    assert gpu not in sys.modules and mpi not in sys.modules
    assert not coheriq.explain(old.name).settled


def test_available_engines_lists_each_engine_once(old, make_dist, unique):
    first, second = unique("old_first_mod"), unique("old_second_mod")
    advertise(make_dist, old.name, "gpu", first)
    advertise(make_dist, old.name, "gpu", second)  # two distributions, one name
    assert coheriq.available_engines(old.name) == ("gpu",)
    coheriq.enable_engine(old.name, "gpu")  # now imported and registered too
    assert coheriq.available_engines(old.name) == ("gpu",)
    assert old.mean([1, 3]) == ("gpu", 2)


def test_available_engines_ignores_other_domains_entry_points(old, make_dist, unique):
    other = unique("otherlib")
    advertise(make_dist, other, "gpu", unique("other_gpu_mod"))
    advertise(make_dist, old.name, "mpi", unique("old_mpi_mod"))
    assert coheriq.available_engines(old.name) == ("mpi",)


# -- the error tree ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "parent"),
    [
        (coheriq.CoheriqError, Exception),
        (coheriq.CoheriqLibraryError, coheriq.CoheriqError),
        (coheriq.CoheriqDomainError, coheriq.CoheriqLibraryError),
        (coheriq.CoheriqEngineError, coheriq.CoheriqLibraryError),
        (coheriq.CoheriqEngineInheritanceError, coheriq.CoheriqEngineError),
        (coheriq.CoheriqUserError, coheriq.CoheriqError),
        (coheriq.CoheriqDomainNotFoundError, coheriq.CoheriqUserError),
        (coheriq.CoheriqEngineNotFoundError, coheriq.CoheriqUserError),
        (coheriq.CoheriqTypeError, coheriq.CoheriqUserError),
        (coheriq.CoheriqTypeError, TypeError),
    ],
)
def test_error_tree_of_0_0(error, parent):
    assert issubclass(error, parent)


def test_the_two_branches_stay_apart():
    # Only a leaf may derive from both branches; the branches themselves do not.
    assert not issubclass(coheriq.CoheriqLibraryError, coheriq.CoheriqUserError)
    assert not issubclass(coheriq.CoheriqUserError, coheriq.CoheriqLibraryError)
    assert not issubclass(coheriq.CoheriqDomainError, coheriq.CoheriqEngineError)
    assert not issubclass(coheriq.CoheriqEngineError, coheriq.CoheriqDomainError)
    assert not issubclass(coheriq.CoheriqTypeError, coheriq.CoheriqLibraryError)


# -- the page docs/migrating.rst -----------------------------------------------------


@pytest.mark.parametrize("engine_module", ["tinystats_fast", "tinystats_fast_class"])
def test_page_example_runs_unchanged(make_dist, engine_module):
    """The 0.0.x library, engine and program of the page, in a fresh interpreter."""
    site = make_dist(
        "tinystats_fast_dist", {}, {"coheriq.engines.tinystats": {"fast": engine_module}}
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINYSTATS")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # nothing written into docs/examples
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(COMPAT_EXAMPLES), str(ROOT)])
    done = subprocess.run(
        [sys.executable, str(COMPAT_EXAMPLES / "app.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == (COMPAT_EXAMPLES / "app.txt").read_text()


def _tree_blocks() -> tuple[str, str]:
    """The hidden ``testcode`` and the ``testoutput`` of the page's group ``tree``."""
    text = MIGRATING.read_text()

    def block(directive: str) -> str:
        found = re.search(
            rf"^\.\. {directive}:: tree\n((?:[ \t]+:.*\n)*)\n((?:(?:[ \t]+.*)?\n)+)",
            text,
            re.M,
        )
        assert found, f"no `.. {directive}:: tree` block in {MIGRATING.name}"
        return textwrap.dedent(found.group(2)).strip("\n") + "\n"

    return block("testcode"), block("testoutput")


def test_page_exception_tree_is_the_live_one():
    """The drawn tree is what its (hidden) code prints for the live classes."""
    code, drawn = _tree_blocks()
    printed = io.StringIO()
    with redirect_stdout(printed):
        exec(compile(code, str(MIGRATING), "exec"), {"__name__": "migrating"})
    assert printed.getvalue() == drawn, "the live tree is:\n" + printed.getvalue()


def test_the_modules_of_0_0_import_as_they_did(unique):
    """0.0.x's own suite imports ``from coheriq import activation`` and the class modules."""
    from coheriq import activation, domain, engine

    name = unique("oldmods")
    lib = domain.AccelerationDomain(name)

    def f():
        return 42

    def g():
        return 7

    wrapped = lib.acceleration_candidate(f)
    lib.materialize()
    fast = engine.AccelerationEngine(name, "fast")
    fast.override(name="f")(g)
    fast.materialize()
    assert activation.available_engines(name) == ("fast",)
    activation.enable_engine(lib, "fast")
    assert wrapped() == 7
    assert activation.active_implementation(name) == "fast"
    assert domain.REFERENCE == coheriq.REFERENCE == "reference"
    # The same objects as coheriq's own names: isinstance and except clauses agree.
    assert activation.enable_engine is coheriq.enable_engine
    assert activation.resolve_impl is coheriq.resolve_impl
    assert domain.AccelerationDomain is coheriq.AccelerationDomain
    assert engine.AccelerationEngine is coheriq.AccelerationEngine


def test_the_modules_of_0_0_are_not_imported_by_import_coheriq():
    """Kept for old code only: a program that never names them does not load them."""
    old_modules = ("coheriq.activation", "coheriq.domain", "coheriq.engine")
    code = f"import sys, coheriq; print([m for m in {old_modules!r} if m in sys.modules])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
