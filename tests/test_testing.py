"""coheriq.testing.isolated: a clean world per block, the previous one restored."""

import subprocess
import sys

import pytest

import coheriq as cq
from coheriq.testing import isolated


def make(name, *, env_prefix=None):
    domain = cq.AccelerationDomain(name, env_prefix=env_prefix)

    @domain.acceleration_candidate
    def f():
        return "reference"

    domain.materialize()
    return domain, f


def test_inner_world_is_clean_and_outer_world_returns():
    outer, f = make("shared")
    cq.enable_engine(outer, cq.REFERENCE)
    with isolated():
        with pytest.raises(cq.CoheriqDomainNotFoundError):
            cq.available_engines("shared")
        inner, g = make("shared")  # the name is free in here
        engine = cq.AccelerationEngine(inner, "fast")
        engine.override("f")(lambda: "fast")
        engine.materialize()
        cq.enable_engine("shared", "fast")
        assert g() == "fast"
    assert cq.engine_class("shared") is cq.engine_class(outer)
    assert cq.available_engines("shared") == ()
    assert cq.active_implementation("shared") == cq.REFERENCE
    assert f() == "reference"


def test_isolation_restores_on_error():
    with pytest.raises(RuntimeError), isolated():
        make("doomed")
        raise RuntimeError("boom")
    with pytest.raises(cq.CoheriqDomainNotFoundError):
        cq.available_engines("doomed")


def test_modules_that_defined_domains_are_imported_afresh(make_dist, unique):
    module = unique("libmod")
    source = (
        f"import coheriq\ndomain = coheriq.AccelerationDomain({module!r})\ndomain.materialize()\n"
    )
    make_dist(module + "_dist", {module: source}, {})
    for _ in range(2):
        with isolated():
            __import__(module)
            assert cq.engine_class(module) is not None
        assert module not in sys.modules


def test_entry_point_cache_is_per_world(make_dist, lib):
    make_dist("adv_dist", {}, {f"coheriq.engines.{lib.name}": {"gpu": "gpu_mod"}})
    assert cq.available_engines(lib.name) == ("gpu",)
    with isolated():
        again = make(lib.name)[0]
        assert cq.available_engines(again) == ("gpu",)  # read anew, same metadata
    assert cq.available_engines(lib.name) == ("gpu",)


# -- a dropped domain is freed -------------------------------------------------------------


WORLDS = """
import gc, sys, tracemalloc
import coheriq
from coheriq.testing import isolated

def world(i):
    with isolated():
        d = coheriq.AccelerationDomain(f"world{i}")

        @d.acceleration_candidate
        def f(x):
            return x

        @d.acceleration_candidate
        class A:
            def __init__(self, x):
                self.x = x

        @d.acceleration_candidate
        class B(A):
            pass

        d.materialize()

        class Fast(coheriq.engine_class(d), name="fast"):
            def f(self, x):
                return -x

        with coheriq.using_engine(d, "fast"):
            f(1), A(1), B(2)

for i in range(50):
    world(i)
gc.collect()
tracemalloc.start()
before = tracemalloc.get_traced_memory()[0]
for i in range(50, 350):
    world(i)
gc.collect()
print(tracemalloc.get_traced_memory()[0] - before)
"""


def test_isolated_worlds_leave_nothing_behind():
    # 300 worlds kept 16 MB before (the line of metaclasses held every one, and
    # grew with the square of their number); now a few kB.
    done = subprocess.run(
        [sys.executable, "-c", WORLDS], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) < 1_000_000
