"""An ordered choice of engines: the first of a list that is installed, loads and starts here."""

from __future__ import annotations

import importlib
import logging
import sys
import threading
import types

import pytest

import coheriq as cq
from coheriq.testing import isolated


@pytest.fixture
def engines(lib):
    """Engines of ``lib``: 'gpu' cannot start here, 'compiled' and 'numpy' can."""

    class Gpu(cq.engine_class(lib.name), name="gpu"):
        def __init__(self):
            raise RuntimeError("JAX finds no GPU")

        def total(self, xs):
            return ("gpu", sum(xs))

    class Compiled(cq.engine_class(lib.name), name="compiled"):
        def total(self, xs):
            return ("compiled", sum(xs))

    class Numpy(cq.engine_class(lib.name), name="numpy"):
        def total(self, xs):
            return ("numpy", sum(xs))

    return lib


BROKEN_MODULE = "import no_such_dependency_xyz\n"


def test_the_first_engine_is_chosen_when_it_starts(engines):
    cq.enable_engine(engines.name, ["compiled", "numpy"])
    assert engines.total([1, 2]) == ("compiled", 3)
    assert cq.explain(engines.name).tried == [("compiled", "chosen")]


def test_an_engine_that_cannot_start_is_passed_over_with_its_reason(engines):
    cq.enable_engine(engines.name, ["gpu", "compiled"])
    assert engines.total([1, 2]) == ("compiled", 3)
    explained = cq.explain(engines.total)
    assert explained.engine == "compiled"
    assert explained.tried[0][0] == "gpu"
    assert "failed to start: RuntimeError: JAX finds no GPU" in explained.tried[0][1]
    assert "gpu: skipped, failed to start" in str(explained)
    assert "compiled: chosen" in str(explained)


def test_engines_not_installed_or_failing_to_import_are_passed_over(engines, make_dist):
    make_dist("broken_dist", {"broken_engine": BROKEN_MODULE}, {
        f"coheriq.engines.{engines.name}": {"mpi": "broken_engine"},
    })  # fmt: skip
    cq.enable_engine(engines.name, ["tpu", "mpi", "numpy"])
    assert engines.total([1]) == ("numpy", 1)
    tried = dict(cq.explain(engines.name).tried)
    assert tried["tpu"] == "not installed"
    assert tried["mpi"].startswith("failed to import: ")
    assert "no_such_dependency_xyz" in tried["mpi"]
    assert tried["numpy"] == "chosen"


def test_when_none_can_run_the_error_gives_every_reason_and_nothing_is_chosen(engines):
    with pytest.raises(cq.CoheriqEngineNotFoundError) as raised:
        cq.enable_engine(engines.name, ["gpu", "tpu"])
    message = str(raised.value)
    assert "gpu: failed to start: RuntimeError: JAX finds no GPU" in message
    assert "tpu: not installed" in message
    assert "end the list with 'reference'" in message
    assert not cq.explain(engines.name).settled
    cq.enable_engine(engines.name, ["gpu", cq.REFERENCE])  # the reference always runs
    assert engines.total([2]) == ("reference", 2)


def test_a_single_name_behaves_as_before(engines):
    with pytest.raises(cq.CoheriqEngineStartError):
        cq.enable_engine(engines.name, "gpu")
    with pytest.raises(cq.CoheriqEngineNotFoundError):
        cq.enable_engine(engines.name, "tpu")
    cq.enable_engine(engines.name, ["compiled"])
    assert cq.explain(engines.name).tried == [("compiled", "chosen")]


@pytest.mark.parametrize(
    ("bad", "error", "text"),
    [
        ([], cq.CoheriqTypeError, "empty list"),
        (["numpy", "numpy"], cq.CoheriqTypeError, "more than once"),
        (["numpy", ""], cq.CoheriqEngineNameError, "''"),
        (["numpy", 3], cq.CoheriqTypeError, "3"),
    ],
)
def test_bad_lists_are_refused_and_change_nothing(engines, bad, error, text):
    with pytest.raises(error, match=text):
        cq.enable_engine(engines.name, bad)
    assert not cq.explain(engines.name).settled


def test_after_the_choice_a_list_is_the_engine_it_would_choose_now(engines):
    cq.enable_engine(engines.name, ["gpu", "compiled"])
    cq.enable_engine(engines.name, ["gpu", "compiled", "numpy"])  # would choose compiled: no-op
    with pytest.raises(cq.CoheriqEngineSettledError, match="cannot switch to 'numpy'"):
        cq.enable_engine(engines.name, ["numpy", "compiled"])
    assert engines.total([1]) == ("compiled", 1)


# -- the environment variable ---------------------------------------------------------


@pytest.mark.parametrize("value", ["gpu,compiled", " gpu , compiled ", "tpu,gpu,compiled"])
def test_the_environment_variable_takes_a_list(engines, monkeypatch, value):
    monkeypatch.setenv(engines.env_var, value)
    before = cq.explain(engines.name)  # tries the list as the first call will, choosing nothing
    assert before.engine == "compiled" and not before.settled
    assert "gpu: skipped, failed to start" in str(before)
    assert not cq.explain(engines.name).settled
    assert engines.total([1]) == ("compiled", 1)
    assert cq.explain(engines.name).tried[-1] == ("compiled", "chosen")
    assert "environment variable" in cq.explain(engines.name).reason


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("gpu,,compiled", "empty item"),
        ("gpu,compiled,", "empty item"),
        ("compiled,gpu,compiled", "'compiled' more than once"),
        ("gpu,com piled", "cannot name an engine"),
    ],
)
def test_a_malformed_environment_list_is_a_clear_error(engines, monkeypatch, value, text):
    monkeypatch.setenv(engines.env_var, value)
    with pytest.raises(cq.CoheriqTypeError, match=text) as raised:
        engines.total([1])
    assert engines.env_var in str(raised.value)
    assert not cq.explain(engines.name).settled


def test_an_explicit_list_wins_over_the_environment_variable(engines, monkeypatch):
    monkeypatch.setenv(engines.env_var, "numpy")
    cq.enable_engine(engines.name, ["gpu", "compiled"])
    assert engines.total([1]) == ("compiled", 1)


# -- scopes, threads, snapshots, logging ------------------------------------------------


def test_a_block_takes_a_list_and_resolves_it_once(engines):
    block = cq.using_engine(engines.name, ["gpu", "numpy", "compiled"])
    with block:
        assert engines.total([1]) == ("numpy", 1)
        explained = cq.explain(engines.name)
        assert explained.engine == "numpy" and explained.tried[-1] == ("numpy", "chosen")
    assert not cq.explain(engines.name).settled  # a block chooses nothing global
    with block, cq.using_engine(engines.name, ["gpu", cq.REFERENCE]):
        assert engines.total([1]) == ("reference", 1)


def test_threads_choosing_by_list_at_once_agree(engines):
    barrier, seen = threading.Barrier(8), []

    def worker():
        barrier.wait()
        try:
            cq.enable_engine(engines.name, ["gpu", "compiled"])
        except cq.CoheriqError as error:  # pragma: no cover - would be the bug
            seen.append(repr(error))
        seen.append(engines.total([1]))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert seen == [("compiled", 1)] * 8


def test_blocks_with_lists_in_threads_stay_in_their_thread(engines):
    results = {}

    def worker(preference, key):
        with cq.using_engine(engines.name, preference):
            results[key] = engines.total([1])

    threads = [
        threading.Thread(target=worker, args=(["gpu", "numpy"], "a")),
        threading.Thread(target=worker, args=(["gpu", "compiled"], "b")),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert results == {"a": ("numpy", 1), "b": ("compiled", 1)}
    assert not cq.explain(engines.name).settled


def test_a_snapshot_carries_the_engine_chosen_not_the_list(engines):
    with cq.using_engine(engines.name, ["gpu", "compiled"]):
        taken = cq.snapshot()
    assert taken.engines[engines.name] == "compiled"
    with taken:
        assert engines.total([1]) == ("compiled", 1)


def test_the_choice_and_what_it_passed_over_are_logged(engines, caplog):
    with caplog.at_level(logging.INFO, logger="coheriq"):
        cq.enable_engine(engines.name, ["gpu", "compiled"])
    (record,) = [r for r in caplog.records if "runs on engine" in r.getMessage()]
    assert "'compiled'" in record.getMessage()
    assert "gpu: skipped, failed to start" in record.getMessage()


def test_in_a_world_of_its_own_nothing_leaks(engines):
    with isolated():
        pass
    cq.enable_engine(engines.name, ["gpu", "compiled"])
    assert engines.total([1]) == ("compiled", 1)


def test_an_explanation_with_no_engine_says_so_in_words(engines, monkeypatch):
    monkeypatch.setenv(engines.env_var, "gpu,tpu")  # neither can run here
    explained = cq.explain(engines.name)
    assert explained.engine is None
    assert "has no engine it can run yet" in str(explained)
    assert "engine None" not in str(explained)


LATE_MODULE = """
from {holder} import domain


@domain.acceleration_candidate
def fit(xs):
    return ("reference", len(xs))
"""


@pytest.mark.parametrize("how", ["enable_engine", "using_engine", "variable"])
def test_a_candidate_marked_after_a_list_was_chosen_follows_the_list(
    unique, tmp_path, monkeypatch, how
):
    # A lazily imported module marks a declared candidate once the choice is made.
    name = unique("latelib")
    domain = cq.AccelerationDomain(name, env_prefix=name.upper())
    monkeypatch.delenv(f"{name.upper()}_ENGINE", raising=False)

    @domain.acceleration_candidate
    def total(xs):
        return ("reference", sum(xs))

    domain.declare(f"{name}_late", functions=["fit"])
    domain.materialize()
    monkeypatch.setitem(sys.modules, f"{name}_holder", types.SimpleNamespace(domain=domain))
    (tmp_path / f"{name}_late.py").write_text(LATE_MODULE.format(holder=f"{name}_holder"))
    monkeypatch.syspath_prepend(str(tmp_path))

    def too_few(self, xs):
        return "fewer than 3 values" if len(xs) < 3 else None

    class Picky(cq.engine_class(name), name="picky"):
        def total(self, xs):
            return ("picky", sum(xs))

        @cq.may_decline(when=too_few)
        def fit(self, xs):
            return ("picky", len(xs))

    class Steady(cq.engine_class(name), name="steady"):
        def fit(self, xs):
            return ("steady", len(xs))

    def import_and_fit():
        assert total([1]) == ("picky", 1)  # the first call makes the choice
        late = importlib.import_module(f"{name}_late")
        return late.fit([1, 2, 3]), late.fit([1]), cq.explain(late.fit, [1]).answers

    if how == "using_engine":
        with cq.using_engine(name, ["picky", "steady"]):
            found = import_and_fit()
    else:
        if how == "enable_engine":
            cq.enable_engine(name, ["picky", "steady"])
        else:
            monkeypatch.setenv(f"{name.upper()}_ENGINE", "picky, steady")
        found = import_and_fit()
    monkeypatch.delitem(sys.modules, f"{name}_late")
    assert found == (("picky", 3), ("steady", 1), "steady")


def test_a_declared_submodule_of_an_outside_library_imports_under_a_list(tmp_path):
    from test_outside import lay_out, ok, python

    out = ok(
        python(
            lay_out(tmp_path),
            """
            import coheriq
            coheriq.accelerate("shapes", "fast, reference")
            import shapes, shapes_fast
            print(shapes.area(shapes.Shape(3)))
            import shapes.heavy
            print(shapes.heavy.smooth([2.0]), shapes_fast.calls)
            """,
        )
    )
    assert out.splitlines() == ["9", "[1.0] ['area', 'smooth']"]
