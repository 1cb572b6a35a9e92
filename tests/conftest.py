"""Shared fixtures: a small domain per test, under names no other test uses."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

import coheriq
from coheriq import discovery

# 300 examples per property by default (CI); `--hypothesis-profile=soak` for 20,000,
# or for COHERIQ_SOAK_EXAMPLES (a soak split over several processes, each with its
# own --hypothesis-seed, covers as many examples without one process growing: see
# what the adoption guide says of memory).
settings.register_profile("coheriq", max_examples=300, deadline=None)
settings.register_profile(
    "soak", max_examples=int(os.environ.get("COHERIQ_SOAK_EXAMPLES", "20000")), deadline=None
)
settings.load_profile("coheriq")

_counter = itertools.count()
pytest_plugins = ["pytester"]


def compiled_proxy_built() -> bool:
    """Whether this interpreter can run coheriq's compiled proxy (COHERIQ_PURE_PYTHON aside):
    the extension is built here, from the source coheriq._call.compiled drives."""
    from coheriq._call import compiled

    try:
        from coheriq import _cproxy
    except ImportError:
        return False
    return getattr(_cproxy, "VERSION", None) == compiled.COMPILED_VERSION


def swapped_functions_dispatch_in_c(compiled: bool | None = None) -> bool:
    """Whether a code-swapped function that must look at the context (before its domain
    settles, in a block) does so from C, with no trampoline frame: wherever the compiled
    part runs and has ``set_dispatcher`` (not on CPython 3.11, whose interpreter runs a
    function's code whatever its vectorcall). ``compiled``: whether the compiled part
    runs (default: in this process).
    """
    from coheriq import proxy_implementation

    if compiled is None:
        compiled = proxy_implementation() == "compiled"
    if not compiled:
        return False
    from coheriq import _cproxy

    return hasattr(_cproxy, "set_dispatcher")


def functions_swapped() -> bool:
    """Whether plain-function candidates get the code-swapped proxy in this process
    (unless ``COHERIQ_SWAP_CODE=0``): a function that runs as its own code on the
    reference, and through a trampoline frame otherwise."""
    from coheriq._call import proxy

    return proxy._SWAP_CODE


def classes_are_freed() -> bool:
    """Whether a class that nothing refers to any more is freed here.

    Not on a free-threaded CPython 3.13 once any thread has started: it makes
    classes (and what they hold) immortal then. Tests that watch a class being
    freed check, there, what holds instead.
    """
    import gc
    import weakref

    probe = type("Probe", (), {})
    freed = weakref.ref(probe)
    del probe
    gc.collect()
    return freed() is None


@pytest.fixture(autouse=True)
def _clean_world(coheriq_isolated):
    """Every test runs in a coheriq world of its own, forked or not."""


@pytest.fixture
def unique() -> Callable[[str], str]:
    """Return a maker of names that no other test in this process uses."""
    return lambda stem="lib": f"{stem}{next(_counter)}"


@dataclass
class Lib:
    """A materialized domain with a function candidate and a class candidate."""

    name: str
    env_var: str
    domain: coheriq.AccelerationDomain
    normalize: Any
    total: Any
    Batch: Any


def build_lib(name: str) -> Lib:
    domain = coheriq.AccelerationDomain(name, env_prefix=name.upper())

    @domain.acceleration_candidate
    def normalize(xs, *, scale=1.0):
        """Scale ``xs`` so that it sums to ``scale``."""
        s = sum(xs)
        return [scale * x / s for x in xs]

    @domain.acceleration_candidate("total")
    def reference_total(xs):
        return ("reference", sum(xs))

    @domain.acceleration_candidate
    class Batch:
        """Rows of numbers."""

        KIND = "reference"

        def __init__(self, rows):
            self.rows = rows

        @classmethod
        def empty(cls):
            return cls([])

        @staticmethod
        def describe():
            return "reference batch"

    domain.materialize()
    return Lib(name, f"{name.upper()}_ENGINE", domain, normalize, reference_total, Batch)


@pytest.fixture
def lib(unique, monkeypatch) -> Lib:
    """A fresh domain; its environment variable is unset."""
    made = build_lib(unique())
    monkeypatch.delenv(made.env_var, raising=False)
    return made


@pytest.fixture
def two_engines(lib):
    """Engines 'fast' (class form, stateful) and 'slow' (decorator form) of ``lib``."""

    class Fast(coheriq.engine_class(lib.name), name="fast"):
        _instances = 0

        def __init__(self):
            type(self)._instances += 1
            self.calls = 0

        def total(self, xs):
            self.calls += 1
            return ("fast", sum(xs))

        class Batch:
            KIND = "fast"

            def __init__(self, rows):
                self.rows = rows

            @classmethod
            def empty(cls):
                return cls([])

    slow = coheriq.AccelerationEngine(lib.name, "slow")

    @slow.override("total")
    def slow_total(xs):
        return ("slow", sum(xs))

    slow.materialize()
    return Fast, slow


@pytest.fixture
def write_module(tmp_path, monkeypatch) -> Callable[[str, str], None]:
    """``write_module(name, source)``: a module file that the next ``import name`` reads.

    The file is written to ``tmp_path``, which goes first on ``sys.path``, and any
    module of that name imported before is forgotten (until the test ends).
    """
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(name: str, source: str) -> None:
        (tmp_path / f"{name}.py").write_text(source)
        monkeypatch.delitem(sys.modules, name, raising=False)

    return write


@pytest.fixture
def make_dist(tmp_path, monkeypatch) -> Callable[..., Path]:
    """Install a throwaway distribution: modules plus entry points, on ``sys.path``.

    ``make_dist("pkgname", {"module_name": "source"}, {"group": {"ep": "value"}})``
    writes real ``.py`` files and a ``.dist-info`` directory, so that
    :mod:`importlib.metadata` finds the entry points as it would after ``pip install``.
    """
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    discovery.clear_cache()

    def make(dist: str, modules: dict[str, str], entry_points: dict[str, dict[str, str]]) -> Path:
        for module, source in modules.items():
            (site / f"{module}.py").write_text(textwrap.dedent(source))
        info = site / f"{dist}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
        lines = []
        for group, eps in entry_points.items():
            lines.append(f"[{group}]")
            lines.extend(f"{k} = {v}" for k, v in eps.items())
        (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
        discovery.clear_cache()
        return site

    yield make
    discovery.clear_cache()


def memory_grown(work: Callable[[int], object], warm: int = 50, times: int = 1000) -> int:
    """Bytes that ``work(times)`` leaves allocated (traced), once ``work(warm)`` has run."""
    import tracemalloc

    tracemalloc.start()
    try:
        work(warm)
        before = tracemalloc.get_traced_memory()[0]
        work(times)
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def run_in_child(body, timeout=10.0):
    """Fork, run ``body()`` in the child, and return its exit code (fail the test on a hang)."""
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


# A scenario that used to hang runs in a fresh interpreter (run_python) or a forked
# child (run_in_child) with a timeout: a hang fails the test instead of the run.
TIMEOUT = 30  # seconds; far above what any of these takes when it works


def run_python(code: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter; a hang is a failure, not a stalled run."""
    try:
        return subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the program hung (no answer in {timeout} s)")


# A small library for the programs that run_python runs: domain "hard", candidate double.
LIBRARY = """
import coheriq
domain = coheriq.AccelerationDomain("hard")

@domain.acceleration_candidate
def double(x):
    return 2 * x

domain.materialize()
"""


# What pip says when it cannot reach the package index (or finds nothing there).
NO_INDEX = (
    "from versions: none",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "Connection refused",
    "ProxyError",
    "ConnectTimeoutError",
    "ReadTimeoutError",
)
