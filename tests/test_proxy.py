"""Proxies call the active implementation exactly as a direct call would."""

import asyncio
import inspect
import sys
import traceback

import pytest

import coheriq as cq


@pytest.fixture
def domain(unique, monkeypatch):
    return cq.AccelerationDomain(unique())


def mark_and_materialize(domain, *functions):
    proxies = [domain.acceleration_candidate(f) for f in functions]
    domain.materialize()
    return proxies


def test_exact_signatures_pass_arguments_through(domain):
    def posonly(a, b=2, /, c=3, *, d, e=5):
        return (a, b, c, d, e)

    def varargs(a, *rest, key=None, **extra):
        return (a, rest, key, extra)

    def clash(args, kwargs, self, name):
        return (args, kwargs, self, name)

    def reserved(_coheriq_scoped, x=1):
        return (_coheriq_scoped, x)

    p, v, c, r = mark_and_materialize(domain, posonly, varargs, clash, reserved)
    assert p(1, d=4) == (1, 2, 3, 4, 5)
    assert p(1, 9, c=8, d=7, e=6) == (1, 9, 8, 7, 6)
    with pytest.raises(TypeError):
        p(a=1, d=4)
    assert v(1, 2, 3, key="k", z=0) == (1, (2, 3), "k", {"z": 0})
    assert c(1, 2, self=3, name=4) == (1, 2, 3, 4)
    assert r(0) == (0, 1) and r(_coheriq_scoped=5, x=2) == (5, 2)
    for proxy, fn in zip((p, v, c, r), (posonly, varargs, clash, reserved), strict=True):
        assert inspect.signature(proxy) == inspect.signature(fn)


def test_mutable_defaults_are_the_same_objects(domain):
    marker = []

    def f(x=marker):
        return x

    (proxy,) = mark_and_materialize(domain, f)
    assert proxy() is marker


def test_non_python_callables_get_a_generic_proxy(domain):
    proxy = domain.acceleration_candidate(name="length")(len)
    domain.materialize()
    assert proxy([1, 2, 3]) == 3


def test_generators_and_coroutines(domain):
    def count(n):
        yield from range(n)

    async def fetch(x):
        await asyncio.sleep(0)
        return x * 2

    g, c = mark_and_materialize(domain, count, fetch)
    assert list(g(3)) == [0, 1, 2]
    assert asyncio.run(c(21)) == 42


@pytest.mark.skipif(sys.version_info < (3, 12), reason="inspect.markcoroutinefunction is 3.12+")
def test_async_candidates_read_as_coroutine_functions(domain):
    async def fetch():
        return 1

    (proxy,) = mark_and_materialize(domain, fetch)
    assert inspect.iscoroutinefunction(proxy)


def test_recursion_through_the_proxy(domain):
    @domain.acceleration_candidate
    def fact(n):
        return 1 if n <= 1 else n * fact(n - 1)

    domain.materialize()
    assert fact(10) == 3628800


def test_traceback_shows_the_implementation(domain):
    def explode(x):
        raise ValueError(f"bad {x}")

    (proxy,) = mark_and_materialize(domain, explode)
    with pytest.raises(ValueError, match="bad 3") as info:
        proxy(3)
    names = [frame.name for frame in traceback.extract_tb(info.value.__traceback__)]
    assert names[-1] == "explode"


def test_keyword_only_and_defaults_under_engine(domain):
    @domain.acceleration_candidate
    def f(a, b=2, *, c=3):
        return ("ref", a, b, c)

    domain.materialize()

    class E(cq.engine_class(domain), name="e"):
        def f(self, a, b=2, *, c=3):
            return ("e", a, b, c)

    with cq.using_engine(domain, "e"):
        assert f(1) == ("e", 1, 2, 3)
        assert f(1, c=9) == ("e", 1, 2, 9)
    assert f(1, 5) == ("ref", 1, 5, 3)


def test_class_proxy_reads_like_the_class(lib):
    assert lib.Batch.__name__ == "Batch"
    assert lib.Batch.__doc__ == "Rows of numbers."
    assert lib.Batch.__module__ == "conftest"
    assert repr(lib.Batch) == repr(lib.Batch.__wrapped__)
    assert lib.Batch.KIND == "reference"
    assert lib.Batch.describe() == "reference batch"
    assert isinstance(lib.Batch.empty(), lib.Batch)


def test_class_proxy_introspection_does_not_settle(lib):
    assert not hasattr(lib.Batch, "__signature__")
    assert cq.active_implementation(lib.name) is None
    with pytest.raises(AttributeError):
        lib.Batch.__no_such_dunder__  # noqa: B018


def test_class_proxy_follows_the_active_engine(lib, two_engines):
    fast, _ = two_engines
    ref_batch = lib.Batch([1])
    with cq.using_engine(lib.name, "fast"):
        fast_batch = lib.Batch([1])
        assert type(fast_batch) is fast.Batch
        assert lib.Batch.KIND == "fast"
        assert type(lib.Batch.empty()) is fast.Batch
    for obj in (ref_batch, fast_batch):
        assert isinstance(obj, lib.Batch)
    assert issubclass(fast.Batch, lib.Batch) and issubclass(lib.Batch, lib.Batch)
    assert not isinstance([1], lib.Batch) and not issubclass(list, lib.Batch)
    with pytest.raises(TypeError):
        issubclass(3, lib.Batch)


def test_subclass_of_an_engine_implementation_is_an_instance(lib, two_engines):
    fast, _ = two_engines

    class Mine(fast.Batch):
        pass

    assert isinstance(Mine([1]), lib.Batch)


def test_subclassing_the_proxy_is_refused(lib):
    with pytest.raises(cq.CoheriqTypeError, match="resolve_impl"):

        class Mine(lib.Batch):
            pass
