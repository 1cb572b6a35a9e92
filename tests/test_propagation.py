"""Snapshots carry the engine choice into thread pools, spawned processes and children."""

import importlib
import multiprocessing
import os
import pickle
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import pytest

import coheriq as cq

LIBRARY = """
import coheriq

domain = coheriq.AccelerationDomain({name!r}, env_prefix={prefix!r})

@domain.acceleration_candidate
def which():
    return "reference"

domain.materialize()

class Fast(coheriq.engine_class({name!r}), name="fast"):
    def which(self):
        return "fast"

def work(x):
    # run in a worker: what the library does there, and what coheriq says
    return which(), coheriq.active_implementation({name!r}), x
"""


@pytest.fixture
def library(make_dist, unique, monkeypatch):
    """An importable library (a real module on sys.path, as workers need)."""
    name = unique("proplib")
    prefix = name.upper()
    monkeypatch.delenv(f"{prefix}_ENGINE", raising=False)
    site = make_dist(name + "_dist", {name: LIBRARY.format(name=name, prefix=prefix)}, {})
    module = importlib.import_module(name)
    return module, site


def test_snapshot_records_the_context_and_pickles(library):
    module, _ = library
    assert cq.snapshot().engines == {}  # nothing chosen yet: nothing recorded
    with cq.using_engine(module.domain, "fast"):
        snap = cq.snapshot()
    assert snap.engines == {module.domain.name: "fast"}
    again = pickle.loads(pickle.dumps(snap))
    assert again.engines == snap.engines
    assert snap.environ() == {f"{module.domain.name.upper()}_ENGINE": "fast"}
    assert not cq.explain(module.domain).settled  # taking it chose nothing


def test_thread_pool_workers_run_the_callers_engine(library):
    module, _ = library
    with cq.using_engine(module.domain, "fast"):
        snap = cq.snapshot()
        with ThreadPoolExecutor(4) as pool:
            plain = list(pool.map(module.work, range(4)))
            carried = list(pool.map(snap.wrap(module.work), range(4)))
    assert {r[0] for r in plain} == {"reference"}  # a worker does not see the scope
    assert carried == [("fast", "fast", i) for i in range(4)]
    with snap:  # re-entering the scopes in this thread
        assert module.which() == "fast"
    assert cq.active_implementation(module.domain) == "reference"


def test_spawned_process_pool_runs_the_callers_engine(library):
    module, _ = library
    with cq.using_engine(module.domain, "fast"):
        snap = cq.snapshot()
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(2, mp_context=context) as pool:
        plain = pool.submit(module.work, 1).result(timeout=120)
        carried = pool.submit(snap.wrap(module.work), 2).result(timeout=120)
    assert plain == ("reference", "reference", 1)
    assert carried == ("fast", "fast", 2)


def test_subprocess_with_snapshot_environment(library):
    module, site = library
    cq.enable_engine(module.domain, "fast")
    env = {**os.environ, **cq.snapshot().environ(), "PYTHONPATH": str(site)}
    code = f"import {module.__name__} as m; print(m.work(0))"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "('fast', 'fast', 0)"


def test_apply_in_a_fresh_process_and_conflicts(library):
    module, site = library
    with cq.using_engine(module.domain, "fast"):
        snap = cq.snapshot()
    code = (
        "import pickle, sys, coheriq\n"
        "snap = pickle.loads(sys.stdin.buffer.read())\n"
        "snap.apply()\n"  # imports the library (named like its domain) and enables
        f"import {module.__name__} as m; print(m.work(0))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        input=pickle.dumps(snap),
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(site)},
        check=True,
    )
    assert done.stdout.decode().strip() == "('fast', 'fast', 0)"
    module.which()  # this process settles on the reference
    with pytest.raises(cq.CoheriqEngineSettledError, match="Cannot apply the snapshot here"):
        snap.apply()
