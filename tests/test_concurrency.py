"""Threads, tasks and fork: set-up is safe, dispatch takes no lock."""

import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import coheriq as cq


def test_concurrent_first_calls_settle_once(lib, monkeypatch):
    starts = []

    class Slow(cq.engine_class(lib.name), name="slowstart"):
        def __init__(self):
            starts.append(threading.get_ident())
            time.sleep(0.05)

        def total(self, xs):
            return ("slowstart", sum(xs))

    monkeypatch.setenv(lib.env_var, "slowstart")
    barrier = threading.Barrier(32)

    def first_call(_):
        barrier.wait()
        return lib.total([1])

    with ThreadPoolExecutor(32) as pool:
        results = list(pool.map(first_call, range(32)))
    assert results == [("slowstart", 1)] * 32
    assert len(starts) == 1


def test_enable_races_first_calls(lib, two_engines):
    barrier = threading.Barrier(17)
    outcome = {}

    def caller(_):
        barrier.wait()
        return lib.total([1])[0]

    def enabler():
        barrier.wait()
        try:
            cq.enable_engine(lib.name, "fast")
            outcome["enable"] = "won"
        except cq.CoheriqEngineSettledError:
            outcome["enable"] = "lost"

    thread = threading.Thread(target=enabler)
    thread.start()
    with ThreadPoolExecutor(16) as pool:
        results = set(pool.map(caller, range(16)))
    thread.join()
    settled = cq.active_implementation(lib.name)
    assert settled in ("fast", cq.REFERENCE)
    assert results == {settled}  # every call ran the engine that settled, whichever won
    assert outcome["enable"] == ("won" if settled == "fast" else "lost")


def test_scopes_switching_under_many_threads(lib, two_engines):
    cq.enable_engine(lib.name, "slow")
    errors = []
    stop = threading.Event()

    def scoped(engine):
        while not stop.is_set():
            with cq.using_engine(lib.name, engine):
                got = lib.total([1])[0]
                if got != engine:
                    errors.append((engine, got))

    def unscoped():
        while not stop.is_set():
            got = lib.total([1])[0]
            if got != "slow":
                errors.append(("global", got))

    threads = [threading.Thread(target=scoped, args=(e,)) for e in ("fast", "reference") * 3]
    threads += [threading.Thread(target=unscoped) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    stop.set()
    for t in threads:
        t.join()
    assert errors == []
    assert lib.total([1]) == ("slow", 1)


fork_only = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
# Forking with threads alive is what these tests are about; Python 3.12+ warns of it.
forks_with_threads = pytest.mark.filterwarnings("ignore:This process .* is multi-threaded")


def run_in_child(body, timeout=10.0):
    """Fork, run ``body()`` in the child, and return its exit code (or fail on a hang)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            code = 0 if body() else 2
        finally:
            os._exit(code)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail("the forked child hung")


@fork_only
@forks_with_threads
def test_fork_while_another_thread_sets_up_an_engine(lib, two_engines):
    entered, release = threading.Event(), threading.Event()

    class Stuck(cq.engine_class(lib.name), name="stuck"):
        def __init__(self):
            entered.set()
            release.wait()

    thread = threading.Thread(target=lambda: cq.enable_engine(lib.name, "stuck"))
    thread.start()
    entered.wait()  # the other thread is inside the domain's set-up now

    def child():
        cq.enable_engine(lib.name, "fast")
        with cq.using_engine(lib.name, "slow"):
            inner = lib.total([1])
        return lib.total([1]) == ("fast", 1) and inner == ("slow", 1)

    try:
        assert run_in_child(child) == 0
    finally:
        release.set()
        thread.join()
    assert cq.active_implementation(lib.name) == "stuck"


@fork_only
def test_child_inherits_settled_choice(lib, two_engines):
    cq.enable_engine(lib.name, "fast")
    assert run_in_child(lambda: lib.total([1]) == ("fast", 1)) == 0
