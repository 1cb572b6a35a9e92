"""Regression tests for the second hostile pass (issue 29), one per item, numbered as there.

Each fails on the code before its fix. A scenario that could hang runs in a
subprocess or forked child with a timeout.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
from contextlib import nullcontext

import pytest

import coheriq as cq

# -- 12: a marked class taking **options receives any option name ---------------------------


def test_12_a_dispatched_construction_passes_every_keyword_on(unique):
    with cq.testing.isolated():
        domain = cq.AccelerationDomain(unique())

        @domain.acceleration_candidate
        class Options:
            def __init__(self, **options):
                self.options = options

        domain.materialize()
        library = Options

        class Fast(cq.engine_class(domain), name="fast"):
            class Options(library):
                pass

        for engine in ("fast", cq.REFERENCE):
            with cq.using_engine(domain, engine):
                made = Options(_coheriq_cls=1, cls=2)
            assert made.options == {"_coheriq_cls": 1, "cls": 2}


# -- 13: an async candidate's proxy is a coroutine function for asyncio -------------------


def test_13_an_async_candidates_proxy_is_a_coroutine_function(unique):
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


# -- 17: an extra Profile.__exit__ is refused ----------------------------------------------


def test_17_a_profile_exited_twice_raises_and_later_profiles_still_record(unique):
    with cq.testing.isolated():
        domain = cq.AccelerationDomain(unique())

        @domain.acceleration_candidate
        def double(x):
            return 2 * x

        domain.materialize()
        profile = cq.profile()
        with profile:
            double(1)
        with pytest.raises(cq.CoheriqScopeError, match="exited more often than it was entered"):
            profile.__exit__(None, None, None)
        with cq.profile() as later:
            double(2)
        assert [row.count for row in later.rows] == [1]


# -- 22: messages that name what is wrong ---------------------------------------------------


def test_22_an_engine_of_an_earlier_copy_is_named_as_such(unique):
    import collections
    import functools

    with cq.testing.isolated():
        name = unique()

        def make():
            domain = cq.AccelerationDomain(name)

            @domain.acceleration_candidate
            def f(x):
                return x

            domain.materialize()
            return domain

        first = make()

        class Fast(cq.engine_class(first), name="fast"):
            def f(self, x):
                return -x

        second = make()  # the same function runs again: a copy of the domain
        with pytest.raises(cq.CoheriqTypeError, match="earlier copy of domain"):
            cq.using_engine(second, Fast).__enter__()

        with pytest.raises(cq.CoheriqTypeError, match=r"partial has no __name__.*name='\.\.\.'"):
            second_domain = cq.AccelerationDomain(unique())
            second_domain.acceleration_candidate(functools.partial(print))
        engine = cq.AccelerationEngine(second, "decorated")
        with pytest.raises(cq.CoheriqTypeError, match=r"'decorated'.*override\(name="):
            engine.override(functools.partial(print))
        with cq.using_engine(second, collections.deque(["nosuch", cq.REFERENCE])):
            assert cq.active_implementation(second) == cq.REFERENCE


# -- 23: the messages coheriq 0.0.x's tests match ------------------------------------------


def test_23_what_is_wrong_first_is_said_first(unique):
    with cq.testing.isolated():
        domain = cq.AccelerationDomain(unique())
        with pytest.raises(cq.CoheriqDomainError, match="must be materialized"):
            cq.AccelerationEngine(domain, "early")
        domain.materialize()
        with pytest.raises(cq.CoheriqDomainError, match="materialized already"):
            domain.acceleration_candidate(lambda x: x)  # "<lambda>" is no name either


# -- 20: coheriq explain reads a list in <PREFIX>_ENGINE as the first call does ---------------


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("nosuch,other", "None of the engines 'nosuch', 'other'"),
        ("numpy,numpy", "names 'numpy' more than once"),
        ("fast,,reference", "has an empty item"),
        (" ", "RAGBATCH_ENGINE is set to ' ', which names"),
    ],
)
def test_20_explain_reads_the_variable_as_the_first_call_does(value, said):
    import os
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "coheriq", "explain", "ragbatch"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "RAGBATCH_ENGINE": value},
    )
    out = " ".join((done.stdout + done.stderr).split())
    assert said in out, out
    assert "that is not a valid engine name" not in out and ".." not in out
    assert "Traceback" not in out


# -- 24: a reader that leaves early does not change the exit status ------------------------


@pytest.mark.parametrize(("command", "status"), [(["list"], 0), (["show", "nosuchdomain"], 2)])
def test_24_a_closed_pipe_is_not_a_failure(command, status):
    import os
    import subprocess

    for _ in range(5):  # early or late, as the timing falls
        process = subprocess.Popen(
            [sys.executable, "-m", "coheriq", *command],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=os.environ.copy(),
        )
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()  # the reader is gone before the first line
        errors = process.stderr.read().decode()
        assert process.wait(timeout=120) == status, errors
        assert "Traceback" not in errors and "BrokenPipe" not in errors
