"""Proxies call the active implementation exactly as a direct call would."""

import asyncio
import inspect
import sys
import traceback
from contextlib import nullcontext

import pytest

import coheriq as cq
from conftest import functions_swapped, swapped_functions_dispatch_in_c

COMPILED = cq.proxy_implementation() == "compiled"


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


def test_an_async_candidates_proxy_is_a_coroutine_function(unique):
    with cq.testing.isolated():
        domain = cq.AccelerationDomain(unique())

        @domain.acceleration_candidate
        async def fetch(x):
            return x

        domain.materialize()
        with pytest.warns(DeprecationWarning) if sys.version_info >= (3, 14) else nullcontext():
            assert asyncio.iscoroutinefunction(fetch)
        if sys.version_info >= (3, 12):  # older inspect reads the code's flags alone
            assert inspect.iscoroutinefunction(fetch)
        assert asyncio.run(fetch(3)) == 3


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


def test_marked_class_reads_like_the_class(lib):
    assert lib.Batch.__name__ == "Batch"
    assert lib.Batch.__doc__ == "Rows of numbers."
    assert lib.Batch.__module__ == "conftest"
    assert repr(lib.Batch) == "<class 'conftest.build_lib.<locals>.Batch'>"
    assert lib.Batch.KIND == "reference"
    assert lib.Batch.describe() == "reference batch"
    assert isinstance(lib.Batch.empty(), lib.Batch)


def test_marked_class_introspection_does_not_settle(lib):
    import inspect
    import pydoc

    assert str(inspect.signature(lib.Batch)) == "(rows)"
    assert "class Batch" in pydoc.render_doc(lib.Batch)
    assert "empty" in dir(lib.Batch)
    assert not cq.explain(lib.name).settled
    with pytest.raises(AttributeError):
        lib.Batch.__no_such_dunder__  # noqa: B018


def test_construction_follows_the_active_engine(lib, two_engines):
    fast, _ = two_engines
    ref_batch = lib.Batch([1])
    with cq.using_engine(lib.name, "fast"):
        fast_batch = lib.Batch([1])
        assert type(fast_batch) is fast.Batch
        assert lib.Batch.KIND == "reference"  # the class's own attributes, always
        assert type(lib.Batch.empty()) is fast.Batch  # cls([]) calls the marked class
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


def test_a_subclass_of_the_marked_class_is_an_ordinary_class(lib, two_engines):
    class Mine(lib.Batch):
        def __init__(self, rows, extra):
            super().__init__(rows)
            self.extra = extra

    with cq.using_engine(lib.name, "fast"):
        mine = Mine([1], "x")  # never dispatched: the user asked for Mine
    assert not cq.explain(lib.name).settled  # and it chose nothing
    assert type(mine) is Mine and mine.extra == "x" and isinstance(mine, lib.Batch)
    assert not isinstance(lib.Batch([1]), Mine)


LIBRARY = '''
"""A library whose functions are candidates."""

import coheriq

domain = coheriq.AccelerationDomain(__name__)


@domain.acceleration_candidate
def ratio(a, b):
    """The ratio of ``a`` to ``b``.

    >>> ratio(6, 3)
    2.0
    """
    return a / b


EARLY = ratio.__wrapped__(1, 2)  # the library's own code, before materialize()

domain.materialize()
'''


@pytest.fixture
def library(tmp_path, unique, monkeypatch):
    import importlib

    name = unique("library")
    (tmp_path / f"{name}.py").write_text(LIBRARY)
    monkeypatch.syspath_prepend(str(tmp_path))
    return importlib.import_module(name)


def test_source_tools_see_the_librarys_function(library):
    import doctest
    import inspect

    # inspect.getsource unwraps; getsourcefile does not, and takes only a function
    # (the pure-Python proxy) of the two proxies (the adoption guide says so).
    assert inspect.getsourcefile(inspect.unwrap(library.ratio)) == library.__file__
    if COMPILED and not functions_swapped():
        with pytest.raises(TypeError):
            inspect.getsourcefile(library.ratio)
    else:
        assert inspect.getsourcefile(library.ratio) == library.__file__
    assert inspect.getsource(library.ratio).startswith("@domain.acceleration_candidate\ndef ratio")
    assert inspect.getmodule(library.ratio) is library
    tests = doctest.DocTestFinder().find(library)
    assert [t.name for t in tests if t.examples] == [f"{library.__name__}.ratio"]
    assert library.EARLY == 0.5


def frames_of(error: BaseException) -> list[tuple[str, str]]:
    import traceback

    return [(f.name, f.line) for f in traceback.extract_tb(error.__traceback__)]


@pytest.mark.parametrize("first_call", [True, False])
def test_a_traceback_shows_the_librarys_frames(library, first_call):
    if not first_call:
        library.ratio(1, 1)  # settles the domain
    with pytest.raises(ZeroDivisionError) as error:
        library.ratio(1, 0)
    # The pure-Python proxy is one frame, at the candidate's own line; the compiled
    # proxy has none; the code-swapped one has none on the reference, once the
    # first call (the one that chooses) has settled the domain, and none on the
    # first call where it dispatches from C.
    if functions_swapped():
        frameless = not first_call or swapped_functions_dispatch_in_c()
    else:
        frameless = COMPILED
    proxy = [] if frameless else [("ratio", "@domain.acceleration_candidate")]
    assert frames_of(error.value)[1:] == [*proxy, ("ratio", "return a / b")]
    if first_call:  # the choice was made by this call, and coheriq says where it was
        call_site = error.tb.tb_lineno
        assert cq.explain(library.ratio).reason.endswith(f"test_proxy.py:{call_site}")


def test_calling_a_function_before_materialize_says_how_to_reach_the_library(unique):
    domain = cq.AccelerationDomain(unique())

    @domain.acceleration_candidate
    def early(x):
        return x

    with pytest.raises(cq.CoheriqDomainError, match=r"early.__wrapped__\(...\)"):
        early(1)
    domain.materialize()
    assert early(1) == 1
