"""Data that crosses implementations: the conversions an engine declares, applied at boundaries.

Each boundary (a decline, a fallback along the MRO or the user's list, ``super()``,
``verify``, an explicit request, a pickle, the result policy) converts an object once per
pair, through a cache that forgets what is freed or mutated; a failed conversion is
remembered; strict mode makes a conversion at a fallback an error; a domain whose engines
declare no conversion is unchanged.
"""

from __future__ import annotations

import gc
import logging
import pickle
import textwrap
import threading
import weakref

import pytest

import coheriq
from conftest import run_python


class Vec:
    """The library's type."""

    def __init__(self, xs):
        self.xs = list(xs)

    def __eq__(self, other):
        return type(other) is Vec and other.xs == self.xs

    def __repr__(self):
        return f"Vec({self.xs})"


class Dev:
    """The engine's type: reads like a Vec (``xs``), is not one."""

    def __init__(self, xs):
        self.data = tuple(xs)

    @property
    def xs(self):
        return list(self.data)

    def __eq__(self, other):
        return type(other) is Dev and other.data == self.data

    def __repr__(self):
        return f"Dev({self.data})"


class World:
    """A domain ``name`` with candidates total, double, scale, pair and fill (side effects),
    and what its conversions made (``made``: ("up"|"down", object))."""

    def __init__(self, name):
        self.name, self.made, self.seen = name, [], []
        self.domain = domain = coheriq.AccelerationDomain(name, env_prefix=name.upper())
        seen = self.seen

        @domain.acceleration_candidate
        def total(v):
            seen.append(("reference total", type(v)))
            return sum(v.xs)

        @domain.acceleration_candidate
        def double(v):
            return type(v)([2 * x for x in v.xs])

        @domain.acceleration_candidate
        def scale(v, k):
            seen.append(("reference scale", type(v)))
            return Vec([k * x for x in v.xs])

        @domain.acceleration_candidate
        def pair(v):
            return v, v

        @domain.acceleration_candidate(side_effects=True)
        def fill(v, value):
            v.xs[:] = [value] * len(v.xs)

        domain.materialize()
        self.total, self.double, self.scale, self.pair, self.fill = total, double, scale, pair, fill

    def up(self, v):
        self.made.append(("up", v))
        return Dev(v.xs)

    def down(self, d):
        self.made.append(("down", d))
        return Vec(d.data)

    def conversion(self, **options):
        return coheriq.Conversion(Vec, Dev, to_engine=self.up, to_library=self.down, **options)

    def using(self, engine):
        return coheriq.using_engine(self.name, engine)


@pytest.fixture
def world(unique, monkeypatch):
    """A World with engine "fast" (converts, caches; overrides double, scale (declines
    k > 10) and pair) and "plain" (converts nothing; overrides scale)."""
    made = World(unique("conv"))
    for variable in ("COHERIQ_FAIL_ON_CONVERT", f"{made.name.upper()}_FAIL_ON_CONVERT"):
        monkeypatch.delenv(variable, raising=False)
    seen = made.seen

    class Fast(
        coheriq.engine_class(made.name),
        name="fast",
        conversions=[made.conversion(cache=True, pickle_as_library=True)],
    ):
        def double(self, v):
            seen.append(("fast double", type(v)))
            return Dev([2 * x for x in v.data])

        @coheriq.may_decline(when=lambda self, v, k: "k above 10" if k > 10 else None)
        def scale(self, v, k):
            seen.append(("fast scale", type(v)))
            return Dev([k * x for x in v.data])

        def pair(self, v):
            return v, v

    class Plain(coheriq.engine_class(made.name), name="plain"):
        def scale(self, v, k):
            seen.append(("plain scale", type(v)))
            return Vec([k * x for x in v.xs])

    made.fast = Fast
    return made


def test_an_engines_implementation_gets_the_library_object_in_its_form_once(world):
    v = Vec([1, 2, 3])
    with world.using("fast"):
        first, second = world.double(v), world.double(v)
    assert first == second == Dev([2, 4, 6])
    assert world.seen == [("fast double", Dev), ("fast double", Dev)]
    assert world.made == [("up", v)]  # cached: the second call reused the conversion


def test_an_mro_fallback_to_the_reference_converts_the_engines_object_once(world):
    d = Dev([1, 2])
    with world.using("fast"):
        assert world.total(d) == 3
        assert world.total(d) == 3
    assert world.seen == [("reference total", Vec)] * 2
    assert world.made == [("down", d)]


def test_a_declined_call_converts_for_the_next_implementation(world):
    d = Dev([1, 2])
    with world.using("fast"):
        assert world.scale(d, 2) == Dev([2, 4])  # the engine's own: no conversion
        assert world.scale(d, 20) == Vec([20, 40])  # declined: the reference reads a Vec
    assert world.seen == [("fast scale", Dev), ("reference scale", Vec)]
    assert world.made == [("down", d)]


def test_a_list_fallback_converts_for_the_next_engine(world):
    d = Dev([3])
    with world.using(["fast", "plain"]):
        assert world.scale(d, 20) == Vec([60])
        assert world.scale(d, 30) == Vec([90])
    assert world.seen == [("plain scale", Vec)] * 2
    assert world.made == [("down", d)]


def test_super_to_the_reference_converts(world):
    seen = world.seen

    class Up(world.fast, name="up"):
        def total(self, v):
            seen.append(("up total", type(v)))
            return super().total(v) + 1000

    d = Dev([1, 2])
    with world.using("up"):
        assert world.total(d) == 1003
    assert seen == [("up total", Dev), ("reference total", Vec)]
    assert world.made == [("down", d)]


def test_a_hybrid_converts_where_its_mro_reaches_an_engine_that_does_not_read_the_type(world):
    seen = world.seen

    class Counting(coheriq.engine_class(world.name)):  # a mixin: no conversions
        def total(self, v):
            seen.append(("counting total", type(v)))
            return len(v.xs)

    class Hybrid(world.fast, Counting, name="hybrid"):
        pass

    d = Dev([5, 6, 7])
    with world.using("hybrid"):
        assert world.total(d) == 3
        assert world.double(Vec([1])) == Dev([2])  # Fast's own, in its form
    assert seen == [("counting total", Vec), ("fast double", Dev)]


def test_results_input_gives_back_the_form_the_caller_passed(world):
    class Inp(world.fast, name="inp", results="input"):
        pass

    v, d = Vec([1, 2]), Dev([1, 2])
    with world.using("inp"):
        assert world.double(v) == Vec([2, 4])
        assert world.double(d) == Dev([2, 4])  # the caller passed the engine's form
        assert world.pair(v) == (v, v)  # the items of a tuple too, one object each
    assert [obj for kind, obj in world.made if kind == "up"] == [v]  # cached: converted once


def test_explicit_requests_convert_and_leave_other_objects_alone(world):
    v = Vec([4])
    on_engine = coheriq.to_engine(v, world.name, "fast")
    assert on_engine == Dev([4])
    assert coheriq.to_engine(v, world.domain, world.fast) is on_engine  # cached
    assert coheriq.to_library(on_engine) == v
    assert coheriq.to_library(on_engine, world.name) == v
    assert coheriq.to_library(42) == 42 and coheriq.to_engine(42, world.name, "fast") == 42
    assert coheriq.to_engine(v, world.name, "plain") is v  # plain declares nothing
    with pytest.raises(coheriq.CoheriqEngineNotFoundError):
        coheriq.to_engine(v, world.name, "nosuch")


def test_mutated_drops_the_cached_conversion_both_ways(world):
    v = Vec([1])
    with world.using("fast"):
        world.double(v)
        coheriq.mutated(v)
        world.double(v)
        converted = coheriq.to_engine(v, world.name, "fast")
        coheriq.mutated(converted)  # the engine's copy changed: the library's entry goes
        world.double(v)
    assert [kind for kind, _ in world.made] == ["up", "up", "up"]


def test_a_candidate_with_side_effects_drops_what_it_received(world):
    seen = world.seen

    class Filling(world.fast, name="filling"):
        def fill(self, v, value):
            seen.append(("filling fill", type(v)))
            v.data = (value,) * len(v.data)

    v = Vec([1, 2])
    with world.using("filling"):
        world.double(v)
        world.fill(v, 7)
        world.double(v)
    assert [kind for kind, _ in world.made] == ["up", "up"]


def test_objects_freed_leave_the_cache(world):
    with world.using("fast"):
        for _ in range(3):
            world.double(Vec([1]))  # each freed before the next, its id maybe reused
    gc.collect()
    assert [kind for kind, _ in world.made] == ["up"] * 3


def test_a_failed_conversion_is_remembered_and_says_what_failed(world, unique):
    calls = []

    def refuse(v):
        calls.append(v)
        raise ValueError("no room on the device")

    conversion = coheriq.Conversion(Vec, Dev, to_engine=refuse, to_library=world.down, cache=True)

    class Full(coheriq.engine_class(world.name), name="full", conversions=[conversion]):
        def double(self, v):
            return v

    v = Vec([1])
    with world.using("full"):
        with pytest.raises(coheriq.CoheriqConversionError, match="no room on the device") as e:
            world.double(v)
        with pytest.raises(coheriq.CoheriqConversionError, match="not tried again"):
            world.double(v)
    assert len(calls) == 1
    assert "'double'" in str(e.value) and world.name in str(e.value)
    assert isinstance(e.value.__cause__, ValueError)
    calls.clear()
    held = weakref.ref(v)
    del e, v
    gc.collect()
    assert held() is None  # what remembers the failure does not keep the object


def test_uncached_pairs_convert_every_time(world):
    class Fresh(coheriq.engine_class(world.name), name="fresh", conversions=[world.conversion()]):
        def double(self, v):
            return v

    v = Vec([1])
    with world.using("fresh"):
        world.double(v)
        world.double(v)
    assert world.made == [("up", v), ("up", v)]


def test_strict_mode_makes_a_conversion_at_a_fallback_an_error(world, monkeypatch):
    monkeypatch.setenv(f"{world.name.upper()}_FAIL_ON_CONVERT", "1")
    d = Dev([1])
    with world.using("fast"):
        assert world.double(Vec([1])) == Dev([2])  # into the engine: not a fallback
        with pytest.raises(coheriq.CoheriqConversionError, match="FAIL_ON_CONVERT=1"):
            world.total(d)
        with pytest.raises(coheriq.CoheriqConversionError, match="falls back"):
            world.scale(d, 20)
    monkeypatch.setenv("COHERIQ_FAIL_ON_CONVERT", "maybe")
    monkeypatch.delenv(f"{world.name.upper()}_FAIL_ON_CONVERT")
    with world.using("fast"), pytest.raises(coheriq.CoheriqTypeError, match="maybe"):
        world.total(d)


def test_verify_compares_the_engines_result_in_the_librarys_form(world):
    v = Vec([1, 2])
    with coheriq.verify(world.name, "fast", on_mismatch="raise") as checked:
        world.double(v)
        world.scale(Dev([3]), 2)  # the reference's copy of the argument: a Vec
    assert checked.ok and [r.compared for r in checked.rows] == [1, 1]

    class Sloppy(world.fast, name="sloppy"):
        def double(self, v):
            return Dev([3 * x for x in v.data])

    with pytest.raises(coheriq.CoheriqVerificationError, match="double"):
        with coheriq.verify(world.name, "sloppy", on_mismatch="raise"):
            world.double(v)


def test_profile_counts_conversions_and_explain_names_them(world, caplog):
    v, d = Vec([1]), Dev([2])
    with caplog.at_level(logging.INFO, logger="coheriq"), world.using("fast"):
        with coheriq.profile() as profiled:
            world.double(v)
            world.double(v)
            world.total(d)
        explained = coheriq.explain(world.total, Dev([9]))
        into = coheriq.explain(world.double, Vec([9]))
    rows = {(r.candidate, r.pair, r.direction): r.count for r in profiled.conversions}
    assert rows == {
        ("double", "Vec -> Dev", "to_engine"): 1,
        ("total", "Dev -> Vec", "to_library"): 1,
    }
    assert "converted 1 (Dev -> Vec)" in str(profiled)
    assert explained.conversions == ["Dev -> Vec by to_library (a fallback)"]
    assert into.conversions == ["Vec -> Dev by to_engine"]
    assert "converts Dev -> Vec by to_library" in str(explained)
    logged = [r.getMessage() for r in caplog.records if "converts" in r.getMessage()]
    assert len(logged) == 2  # once per candidate and pair, however many calls


def test_threads_and_blocks_convert_correctly(world):
    shared = Vec(range(50))
    results, errors = [], []

    def work(engine):
        try:
            with world.using(engine):
                for _ in range(200):
                    results.append((engine, world.double(shared), world.total(Dev([1, 2]))))
        except Exception as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(e,)) for e in ["fast", "plain"] * 4]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors and not any(t.is_alive() for t in threads)
    doubled = {e: {repr(r) for n, r, _ in results if n == e} for e in ("fast", "plain")}
    assert doubled == {
        "fast": {repr(Dev([2 * x for x in range(50)]))},
        "plain": {repr(Vec([2 * x for x in range(50)]))},
    }
    assert {t for _, _, t in results} == {3}
    ups = [obj for kind, obj in world.made if kind == "up"]
    assert 1 <= len(ups) <= 4  # one per thread at most, racing on a first conversion


def test_an_engines_objects_pickle_as_the_librarys(world):
    d = Dev([1, 2])
    assert pickle.loads(pickle.dumps(d)) == Vec([1, 2])


def test_a_pickle_loads_where_the_engine_is_not_installed(tmp_path):
    (tmp_path / "vecs.py").write_text(
        "class Vec:\n    def __init__(self, xs):\n        self.xs = list(xs)\n"
    )
    (tmp_path / "vecs_engine.py").write_text(
        textwrap.dedent(
            """
            import coheriq, vecs
            class Dev:
                def __init__(self, xs):
                    self.data = tuple(xs)
            domain = coheriq.AccelerationDomain("vecs")
            @domain.acceleration_candidate
            def make(xs):
                return vecs.Vec(xs)
            domain.materialize()
            class Fast(coheriq.engine_class("vecs"), name="fast", conversions=[coheriq.Conversion(
                vecs.Vec, Dev, to_engine=lambda v: Dev(v.xs), to_library=lambda d: vecs.Vec(d.data),
                pickle_as_library=True)]):
                def make(self, xs):
                    return Dev(xs)
            """
        )
    )
    written = tmp_path / "made.pickle"
    code = (
        f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import pickle, coheriq, vecs_engine\n"
        "with coheriq.using_engine('vecs', 'fast'):\n"
        "    made = vecs_engine.make([1, 2])\n"
        "assert type(made).__name__ == 'Dev'\n"
        f"open({str(written)!r}, 'wb').write(pickle.dumps(made))\n"
    )
    done = run_python(code)
    assert done.returncode == 0, done.stderr
    load = (
        f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import pickle\n"
        f"loaded = pickle.loads(open({str(written)!r}, 'rb').read())\n"
        "assert 'coheriq' not in sys.modules and 'vecs_engine' not in sys.modules\n"
        "print(type(loaded).__module__, type(loaded).__name__, loaded.xs)\n"
    )
    done = run_python(load)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["vecs", "Vec", "[1,", "2]"]


def test_a_conversion_engine_runs_the_librarys_code_on_converted_data(world):
    engine = coheriq.conversion_engine(world.name, "mirror", [world.conversion()], ["double"])
    assert engine is coheriq.engine_class(world.name, "mirror")
    v = Vec([1, 2])
    with world.using("mirror"):
        assert world.double(v) == Vec([2, 4])  # ran on a Dev, came back as the caller's form
        assert world.double(Dev([1])) == Dev([2])  # the caller's form: the engine's
        assert world.total(v) == 3  # not listed: the reference, unconverted
    assert [kind for kind, _ in world.made] == ["up", "down"]
    assert ("reference total", Vec) in world.seen


def test_a_domain_whose_engines_convert_nothing_is_unchanged(lib):
    class Quiet(coheriq.engine_class(lib.name), name="quiet"):
        pass

    reference = coheriq.engine_class(lib.name)
    assert reference.normalize is lib.normalize.__wrapped__
    assert super(Quiet, Quiet()).normalize is lib.normalize.__wrapped__  # no converting layer
    with coheriq.profile() as profiled, coheriq.using_engine(lib.name, "quiet"):
        lib.normalize([1.0, 1.0])
        explained = coheriq.explain(lib.normalize, [1.0])
    assert profiled.conversions == [] and explained.conversions == []


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: coheriq.Conversion(3, Dev, to_engine=str, to_library=str), "library_type"),
        (lambda: coheriq.Conversion(Vec, Dev, to_engine=3, to_library=str), "to_engine"),
    ],
)
def test_a_malformed_conversion_is_refused(make, message):
    with pytest.raises(coheriq.CoheriqTypeError, match=message):
        make()


def test_malformed_class_keywords_are_refused_and_register_nothing(world):
    base = coheriq.engine_class(world.name)
    for keywords, message in [
        ({"conversions": ["x"]}, "coheriq.Conversion"),
        ({"results": "caller"}, "results='input'"),
        ({"accepts_library_types": "double"}, "accepts_library_types"),
        ({"conversion": []}, "Did you mean 'conversions'"),
    ]:
        with pytest.raises(coheriq.CoheriqTypeError, match=message):
            type(base)("Bad", (base,), {}, name="bad", **keywords)
    assert "bad" not in coheriq.available_engines(world.name)


def test_a_conversion_named_by_a_string_is_imported_when_first_needed(world):
    named = coheriq.Conversion(
        f"{__name__}:Vec", f"{__name__}:Dev", to_engine=world.up, to_library=world.down
    )
    broken = coheriq.Conversion(Vec, Dev, to_engine="nosuch.module:up", to_library=world.down)

    class Named(coheriq.engine_class(world.name), name="named", conversions=[named]):
        def double(self, v):
            return v

    class Broken(coheriq.engine_class(world.name), name="broken", conversions=[broken]):
        def double(self, v):
            return v

    with world.using("named"):
        assert world.double(Vec([1])) == Dev([1])
        assert world.total(Dev([1])) == 1
    with world.using("broken"), pytest.raises(coheriq.CoheriqConversionError, match="nosuch"):
        world.double(Vec([1]))


def test_a_conversion_engine_refuses_class_candidates_and_empty_lists(lib):
    with pytest.raises(coheriq.CoheriqEngineError, match="class candidates"):
        coheriq.conversion_engine(lib.name, "x", [], [lib.Batch.__name__])
    with pytest.raises(coheriq.CoheriqEngineError, match="no candidate"):
        coheriq.conversion_engine(lib.name, "x", [], [])
    assert "x" not in coheriq.available_engines(lib.name)


def test_the_library_form_is_not_imported_by_a_program_that_declares_none():
    done = run_python(
        "import sys, coheriq\n"
        "d = coheriq.AccelerationDomain('nc')\n"
        "@d.acceleration_candidate\n"
        "def f(x):\n    return x\n"
        "d.materialize()\n"
        "class E(coheriq.engine_class('nc'), name='e'):\n    def f(self, x):\n        return x\n"
        "with coheriq.using_engine('nc', 'e'):\n    f(1)\n"
        "print('coheriq._engines.conversions' in sys.modules)\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_a_fallback_into_another_converting_engine_gives_it_its_own_form(world):
    class Box:
        def __init__(self, xs):
            self.items = list(xs)

    into_box = coheriq.Conversion(
        Vec, Box, to_engine=lambda v: Box(v.xs), to_library=lambda b: Vec(b.items)
    )
    seen = world.seen

    class Boxes(coheriq.engine_class(world.name), name="boxes", conversions=[into_box]):
        def scale(self, v, k):
            seen.append(("boxes scale", type(v)))
            return Box([k * x for x in v.items])

    with world.using(["fast", "boxes"]):
        assert world.scale(Dev([1, 2]), 20).items == [20, 40]
    assert seen == [("boxes scale", Box)]


def test_copies_of_an_engines_objects_stay_the_engines(world):
    import copy

    d = Dev([1, 2])
    assert copy.copy(d) == d and copy.deepcopy(d) == d
    assert pickle.loads(pickle.dumps(d)) == Vec([1, 2])


def test_the_decorator_form_declares_conversions_too(world):
    engine = coheriq.AccelerationEngine(
        world.name, "decorated", conversions=[world.conversion()], results="input"
    )

    @engine.override
    def double(v):
        return Dev([2 * x for x in v.data])

    engine.materialize()
    with world.using("decorated"):
        assert world.double(Vec([1])) == Vec([2])
