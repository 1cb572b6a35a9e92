"""The user's side: the one resolution rule, global and scoped."""

import asyncio
import threading

import pytest

import coheriq as cq


def test_default_is_the_reference(lib, two_engines):
    assert not cq.explain(lib.name).settled
    assert lib.total([1, 2]) == ("reference", 3)
    assert cq.active_implementation(lib.name) == cq.REFERENCE


def test_active_implementation_says_what_the_first_call_will_run_and_chooses_nothing(
    lib, two_engines, monkeypatch
):
    assert cq.active_implementation(lib.name) == cq.REFERENCE
    monkeypatch.setenv(lib.env_var, "fast")
    assert cq.active_implementation(lib.name) == "fast"
    assert not cq.explain(lib.name).settled
    monkeypatch.setenv(lib.env_var, "nosuchengine")
    assert cq.active_implementation(lib.name) is None  # the first call will fail
    cq.enable_engine(lib.name, "slow")  # nothing was chosen
    assert cq.active_implementation(lib.name) == "slow"


@pytest.mark.parametrize("how", ["name", "engine", "class", "domain object"])
def test_enable_engine_accepts_every_spelling(lib, two_engines, how):
    _, slow = two_engines
    domain, engine = {
        "name": (lib.name, "slow"),
        "engine": (lib.name, slow),
        "class": (lib.name, slow.engine_class),
        "domain object": (lib.domain, "slow"),
    }[how]
    cq.enable_engine(domain, engine)
    assert cq.active_implementation(lib.name) == "slow"
    assert lib.total([1]) == ("slow", 1)


def test_names_imported_earlier_follow(lib, two_engines):
    total = lib.total  # like `from mylib import total` before enabling
    cq.enable_engine(lib.name, "fast")
    assert total([1]) == ("fast", 1)


def test_enable_reference_settles(lib, two_engines):
    cq.enable_engine(lib.name, cq.REFERENCE)
    assert cq.active_implementation(lib.name) == cq.REFERENCE
    with pytest.raises(cq.CoheriqEngineSettledError):
        cq.enable_engine(lib.name, "fast")


def test_global_choice_is_one_way(lib, two_engines):
    cq.enable_engine(lib.name, "fast")
    cq.enable_engine(lib.name, "fast")  # the same again: nothing happens
    with pytest.raises(cq.CoheriqEngineSettledError, match="using_engine") as info:
        cq.enable_engine(lib.name, "slow")
    message = str(info.value)
    assert "'fast'" in message and "'slow'" in message and "enable_engine" in message
    assert lib.total([1]) == ("fast", 1)


def test_first_call_settles_then_enable_is_refused(lib, two_engines):
    lib.total([1])
    with pytest.raises(cq.CoheriqEngineSettledError, match="default, at its first use"):
        cq.enable_engine(lib.name, "fast")
    assert isinstance(cq.CoheriqEngineSettledError("x"), cq.CoheriqUserError)


def test_environment_variable(lib, two_engines, monkeypatch):
    monkeypatch.setenv(lib.env_var, "slow")
    assert not cq.explain(lib.name).settled  # reading it is not settling
    assert lib.total([1]) == ("slow", 1)
    assert cq.active_implementation(lib.name) == "slow"
    with pytest.raises(cq.CoheriqEngineSettledError, match=lib.env_var):
        cq.enable_engine(lib.name, "fast")


def test_explicit_enable_beats_environment(lib, two_engines, monkeypatch):
    monkeypatch.setenv(lib.env_var, "slow")
    cq.enable_engine(lib.name, "fast")
    assert lib.total([1]) == ("fast", 1)


@pytest.mark.parametrize("value", ["", "  ", "reference"])
def test_empty_or_reference_environment_means_reference(lib, two_engines, monkeypatch, value):
    monkeypatch.setenv(lib.env_var, value)
    assert lib.total([1]) == ("reference", 1)


def test_unknown_engine_in_environment(lib, two_engines, monkeypatch):
    monkeypatch.setenv(lib.env_var, "fats")
    with pytest.raises(cq.CoheriqEngineNotFoundError) as info:
        lib.total([1])
    message = str(info.value)
    assert (
        lib.env_var in message and "'fast', 'slow'" in message and "Did you mean 'fast'" in message
    )
    assert not cq.explain(lib.name).settled
    monkeypatch.setenv(lib.env_var, "fast")
    assert lib.total([1]) == ("fast", 1)


def test_domain_without_prefix_ignores_environment(unique, monkeypatch):
    name = unique()
    domain = cq.AccelerationDomain(name)

    @domain.acceleration_candidate
    def f():
        return "reference"

    domain.materialize()
    monkeypatch.setenv(f"{name.upper()}_ENGINE", "nope")
    assert f() == "reference"


def test_environment_error_in_engine_init_surfaces_at_first_call(lib, monkeypatch):
    class Broken(cq.engine_class(lib.name), name="broken"):
        def __init__(self):
            raise RuntimeError("driver missing")

    monkeypatch.setenv(lib.env_var, "broken")
    with pytest.raises(cq.CoheriqEngineError, match="driver missing"):
        lib.total([1])
    assert not cq.explain(lib.name).settled
    monkeypatch.delenv(lib.env_var)
    assert lib.total([1]) == ("reference", 1)


def test_scope_nests_and_restores(lib, two_engines):
    cq.enable_engine(lib.name, "slow")
    with cq.using_engine(lib.name, "fast"):
        assert lib.total([1]) == ("fast", 1)
        assert cq.active_implementation(lib.name) == "fast"
        with cq.using_engine(lib.name, cq.REFERENCE):
            assert lib.total([1]) == ("reference", 1)
            assert cq.active_implementation(lib.name) == cq.REFERENCE
        assert lib.total([1]) == ("fast", 1)
    assert lib.total([1]) == ("slow", 1)


def test_scope_restores_on_exception(lib, two_engines):
    with pytest.raises(ZeroDivisionError):
        with cq.using_engine(lib.name, "fast"):
            1 / 0  # noqa: B018
    assert not cq.explain(lib.name).settled
    assert lib.total([1]) == ("reference", 1)


def test_scope_does_not_settle_or_change_global(lib, two_engines):
    with cq.using_engine(lib.name, "fast"):
        lib.total([1])
    assert not cq.explain(lib.name).settled
    cq.enable_engine(lib.name, "slow")  # still possible: nothing was settled
    with cq.using_engine(lib.name, "fast"):
        assert lib.total([1]) == ("fast", 1)
    assert lib.total([1]) == ("slow", 1)


def test_same_scope_object_reentered(lib, two_engines):
    scope = cq.using_engine(lib.name, "fast")
    with scope:
        with cq.using_engine(lib.name, "slow"):
            with scope:
                assert lib.total([1]) == ("fast", 1)
            assert lib.total([1]) == ("slow", 1)
        assert lib.total([1]) == ("fast", 1)
    assert not cq.explain(lib.name).settled
    assert "using_engine" in repr(scope)


def test_using_engine_as_decorator(lib, two_engines):
    @cq.using_engine(lib.name, "fast")
    def work(xs):
        """Work."""
        return lib.total(xs)

    assert work([1]) == ("fast", 1)
    assert work.__name__ == "work" and work.__doc__ == "Work."
    assert lib.total([1]) == ("reference", 1)


def test_using_engine_decorates_coroutines(lib, two_engines):
    @cq.using_engine(lib.name, "fast")
    async def work():
        await asyncio.sleep(0)
        return lib.total([1])

    assert asyncio.run(work()) == ("fast", 1)
    assert not cq.explain(lib.name).settled


def test_using_engine_validates_arguments(lib):
    with pytest.raises(cq.CoheriqTypeError):
        cq.using_engine(lib.name, 3)
    with pytest.raises(cq.CoheriqTypeError):
        cq.using_engine(3, "fast")
    with pytest.raises(cq.CoheriqEngineNotFoundError):
        with cq.using_engine(lib.name, "nope"):
            pass
    assert not cq.explain(lib.name).settled


def test_scope_is_per_thread(lib, two_engines):
    seen = {}
    inside = threading.Event()
    release = threading.Event()

    def other():
        inside.wait()
        seen["other"] = lib.total([1])
        release.set()

    thread = threading.Thread(target=other)
    thread.start()
    with cq.using_engine(lib.name, "fast"):
        inside.set()
        release.wait()
        seen["this"] = lib.total([1])
    thread.join()
    assert seen == {"this": ("fast", 1), "other": ("reference", 1)}


def test_scope_is_per_asyncio_task_and_inherited(lib, two_engines):
    async def call_in(engine, delay):
        with cq.using_engine(lib.name, engine):
            await asyncio.sleep(delay)
            return lib.total([1])[0]

    async def read():
        return lib.total([1])[0]

    async def child_sees_parent():
        with cq.using_engine(lib.name, "slow"):
            return await asyncio.create_task(read())

    async def main():
        results = await asyncio.gather(
            call_in("fast", 0.01), call_in("slow", 0), call_in(cq.REFERENCE, 0.005)
        )
        inherited = await child_sees_parent()
        return results, inherited, lib.total([1])[0]

    assert asyncio.run(main()) == (["fast", "slow", "reference"], "slow", "reference")


def test_task_outliving_its_scope_falls_back(lib, two_engines):
    async def main():
        gate = asyncio.Event()

        async def late():
            before = lib.total([1])[0]
            await gate.wait()
            return before, lib.total([1])[0]

        with cq.using_engine(lib.name, "fast"):
            task = asyncio.create_task(late())
            await asyncio.sleep(0)
        gate.set()
        return await task

    assert asyncio.run(main()) == ("fast", "reference")


def test_domains_are_independent(lib, two_engines, unique):
    from conftest import build_lib

    other = build_lib(unique())
    cq.enable_engine(lib.name, "fast")
    with cq.using_engine(lib.name, "slow"):
        assert other.total([1]) == ("reference", 1)
    assert cq.active_implementation(other.name) == cq.REFERENCE
    assert cq.active_implementation(lib.name) == "fast"


def test_resolve_impl(lib, two_engines):
    fast, _ = two_engines
    assert not cq.explain(lib.name).settled
    with cq.using_engine(lib.name, "fast"):
        impl = cq.resolve_impl(lib.total)
        assert impl.__func__ is fast.total and impl([1]) == ("fast", 1)
        assert cq.resolve_impl(lib.Batch) is fast.Batch
    assert not cq.explain(lib.name).settled  # the scope settled nothing
    assert cq.resolve_impl(lib.total) is lib.total.__wrapped__  # this settles, like a call
    assert cq.active_implementation(lib.name) == cq.REFERENCE
    for bad in (len, "total", None, lib.total.__wrapped__):
        with pytest.raises(cq.CoheriqTypeError, match="not a coheriq candidate"):
            cq.resolve_impl(bad)


def test_available_engines_never_settles_or_lists_reference(lib, two_engines):
    assert cq.available_engines(lib.domain) == ("fast", "slow")
    assert not cq.explain(lib.name).settled


def test_enable_engine_of_another_domain(lib, two_engines, unique):
    from conftest import build_lib

    other = build_lib(unique())
    fast, _ = two_engines
    with pytest.raises(cq.CoheriqTypeError, match="belongs to domain"):
        cq.enable_engine(other.name, fast)
    with pytest.raises(cq.CoheriqTypeError):
        cq.enable_engine(other.name, 1.5)
    assert not cq.explain(other.name).settled


EAGER_LIBRARY = """
import coheriq

domain = coheriq.AccelerationDomain(__name__, env_prefix=__name__.upper())


@domain.acceleration_candidate
def scale(x):
    return 2 * x


domain.materialize()
TWO = scale(1)  # a call while the library is imported: it settles the domain
"""


def test_a_choice_made_at_import_points_at_the_call_and_the_fixes(tmp_path, unique, monkeypatch):
    import importlib

    name = unique("eager")
    (tmp_path / f"{name}.py").write_text(EAGER_LIBRARY)
    monkeypatch.syspath_prepend(str(tmp_path))
    eager = importlib.import_module(name)

    class Fast(cq.engine_class(name), name="fast"):
        def scale(self, x):
            return x

    with pytest.raises(cq.CoheriqEngineSettledError) as error:
        cq.enable_engine(name, "fast")
    message = str(error.value)
    assert f"a call at {eager.__file__}:13" in message
    assert "while module" in message and "being imported" in message
    assert f"set {name.upper()}_ENGINE=fast before the program starts" in message
    assert "__wrapped__" in message and "using_engine" in message


# -- generators and blocks -----------------------------------------------------------------


def test_a_decorated_generator_runs_each_step_on_the_engine_and_its_consumer_does_not(
    lib, two_engines
):
    import inspect

    @cq.using_engine(lib.name, "fast")
    def totals(count):
        received = []
        for _ in range(count):
            received.append((yield lib.total([1])[0]))
        return received

    assert inspect.isgeneratorfunction(totals)
    steps = totals(3)
    assert next(steps) == "fast"
    assert lib.total([1])[0] == "reference"  # between steps: the consumer's own choice
    assert steps.send("a") == "fast"
    with pytest.raises(ValueError):
        steps.throw(ValueError("passed on"))
    closed = totals(2)
    next(closed)
    closed.close()
    assert cq.active_implementation(lib.name) == "reference"


def test_a_decorated_async_generator_runs_each_step_on_the_engine(lib, two_engines):
    import asyncio
    import inspect

    @cq.using_engine(lib.name, "fast")
    async def totals(count):
        for _ in range(count):
            await asyncio.sleep(0)
            yield lib.total([1])[0]

    async def consume():
        seen = []
        async for engine in totals(3):
            seen.append((engine, lib.total([1])[0]))
        steps = totals(5)
        await steps.__anext__()
        await steps.aclose()  # closed early: its block ends with it
        return seen

    assert inspect.isasyncgenfunction(totals)
    assert asyncio.run(consume()) == [("fast", "reference")] * 3


# -- using_engine as a decorator on an async candidate scopes the coroutine ----------------


def test_using_engine_decorates_an_async_candidate(unique):
    with cq.testing.isolated():
        domain = cq.AccelerationDomain(unique())

        @domain.acceleration_candidate
        async def which():
            await asyncio.sleep(0)
            return "reference"

        domain.materialize()

        class Fast(cq.engine_class(domain), name="fast"):
            async def which(self):
                await asyncio.sleep(0)
                return cq.active_implementation(domain)

        scoped = cq.using_engine(domain, "fast")(which)
        assert asyncio.run(scoped()) == "fast"
        assert asyncio.run(which()) == "reference"


# -- leaving a block takes the domain's variable out of the context ------------------------


def test_blocks_leave_nothing_in_the_context(unique):
    import contextvars

    before = len(contextvars.copy_context())
    for _ in range(20):
        with cq.testing.isolated():
            domain = cq.AccelerationDomain(unique())

            @domain.acceleration_candidate
            def f(x):
                return x

            domain.materialize()
            with cq.using_engine(domain, cq.REFERENCE):
                with cq.using_engine(domain, cq.REFERENCE):
                    f(1)
            f(2)
    assert len(contextvars.copy_context()) <= before + 1  # not one per domain
