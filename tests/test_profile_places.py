"""A profile gathers the calls of the threads, process pools and dask workers a snapshot carries
it into, labelled with where they ran; its share line, its plain data and the plugin's summary."""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import textwrap
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

import coheriq
from coheriq.testing import isolated
from conftest import run_python


@pytest.fixture
def placed(unique, monkeypatch):
    """A domain with ``double`` and an engine "fast" that declines negative numbers."""
    name = unique("placed")
    monkeypatch.delenv(f"{name.upper()}_ENGINE", raising=False)
    domain = coheriq.AccelerationDomain(name)

    @domain.acceleration_candidate
    def double(x):
        return 2 * x

    domain.materialize()

    class Fast(coheriq.engine_class(name), name="fast"):
        @coheriq.may_decline(when=lambda self, x: "negative" if x < 0 else None)
        def double(self, x):
            return 2 * x

    domain.double = double
    return domain


def by_place(prof):
    """(engine, where) -> calls."""
    return {(r.engine, r.where[0]): r.count for r in prof.rows_by_place()}


# -- threads --------------------------------------------------------------------------------


def test_threads_that_enter_the_snapshot_record_into_the_profile_labelled_by_thread(placed):
    def work():
        return [placed.double(i) for i in range(-1, 2)]  # one declined, two on fast

    def entering(snap):
        with snap:
            placed.double(5)

    with coheriq.profile() as prof, coheriq.using_engine(placed.name, "fast"):
        placed.double(1)
        snap = coheriq.snapshot()
        assert snap.profiles == (prof,)
        with ThreadPoolExecutor(1, thread_name_prefix="pool") as pool:
            assert pool.submit(snap.wrap(work)).result(timeout=60) == [-2, 0, 2]
        thread = threading.Thread(target=entering, args=(snap,), name="entering")
        thread.start()
        thread.join(timeout=60)
    assert by_place(prof) == {
        ("fast", "thread MainThread"): 1,
        ("fast", "thread pool_0"): 2,
        ("reference", "thread pool_0"): 1,
        ("fast", "thread entering"): 1,
    }
    assert prof.places == ["thread MainThread", "thread pool_0", "thread entering"]
    merged = {r.engine: (r.count, r.where) for r in prof.rows}
    assert merged == {
        "fast": (4, ("thread MainThread", "thread pool_0", "thread entering")),
        "reference": (1, ("thread pool_0",)),
    }
    text = str(prof)
    assert text.splitlines()[0].split()[-1] == "where"
    assert "3 places" in text and "thread entering" in text
    assert f"{placed.name}.double: fast declined 1 call (negative) in thread pool_0" in text


def test_the_where_column_shows_only_once_calls_ran_in_two_places(placed):
    with coheriq.profile() as prof:
        placed.double(1)
    assert "where" not in str(prof) and "thread" not in str(prof)
    assert [r.where for r in prof.rows] == [("thread MainThread",)]


def test_nested_profiles_are_both_carried(placed):
    with coheriq.profile() as outer:
        with coheriq.profile() as inner:
            snap = coheriq.snapshot()
        thread = threading.Thread(target=snap.wrap(placed.double), args=(2,), name="t")
        thread.start()
        thread.join(timeout=60)
    assert by_place(outer) == by_place(inner) == {("reference", "thread t"): 1}


def test_a_snapshot_pickled_in_its_own_process_records_directly(placed):
    with coheriq.profile() as prof:
        snap = pickle.loads(pickle.dumps(coheriq.snapshot()))
    assert snap.profiles == (prof,)
    assert snap.wrap(placed.double)(4) == 8  # the result itself, nothing to unpickle
    assert by_place(prof) == {("reference", "thread MainThread"): 1}


def test_a_snapshot_without_profiles_pickles_as_before(placed):
    with coheriq.using_engine(placed.name, "fast"):
        snap = coheriq.snapshot()
    assert snap.__reduce__() == (coheriq.Snapshot, (snap.engines, snap.env_vars))
    assert pickle.loads(pickle.dumps(snap)).engines == {placed.name: "fast"}


# -- every thread ---------------------------------------------------------------------------


def test_everywhere_records_the_calls_of_plain_threads(placed):
    def call():
        placed.double(3)

    def in_thread():
        thread = threading.Thread(target=call, name="plain")
        thread.start()
        thread.join(timeout=60)

    with coheriq.profile() as mine, coheriq.profile(everywhere=True) as every:
        assert every.everywhere and not mine.everywhere
        placed.double(1)
        in_thread()
    in_thread()  # after the block: not recorded
    assert by_place(every) == {
        ("reference", "thread MainThread"): 1,
        ("reference", "thread plain"): 1,
    }
    assert by_place(mine) == {("reference", "thread MainThread"): 1}


# -- the share line and the data ------------------------------------------------------------


def test_the_share_line_says_what_ran_on_the_engine_and_what_declined(placed):
    with coheriq.profile() as prof:
        with coheriq.using_engine(placed.name, "fast"):
            for i in range(-2, 3):
                placed.double(i)
        placed.double(1)  # the global choice: the reference
    share = prof.share()[placed.name]
    assert (share.calls, share.declined) == (6, 2)
    assert share.sent == {"fast": 5, "reference": 1} and share.ran == {"fast": 3, "reference": 1}
    line = (
        f"{placed.name}: 50% of 6 calls on fast; 33% declined: 2 by fast (negative); "
        "17% on the reference"
    )
    assert str(share) == line
    assert line in str(prof).splitlines()


def test_a_domain_on_its_reference_alone_says_so(placed):
    with coheriq.profile() as prof:
        for i in range(3):
            placed.double(i)
    assert str(prof.share()[placed.name]) == (
        f"{placed.name}: all 3 calls on the reference implementation"
    )


def test_shares_round_and_use_thousands_separators(placed):
    with coheriq.profile() as prof, coheriq.using_engine(placed.name, "fast"):
        placed.double(-1)
        for i in range(1999):
            placed.double(i)
    assert str(prof.share()[placed.name]) == (
        f"{placed.name}: >99% of 2,000 calls on fast; <1% declined: 1 by fast (negative)"
    )


def test_as_dict_is_plain_data_in_a_named_schema(placed):
    with coheriq.profile() as prof, coheriq.using_engine(placed.name, "fast"):
        placed.double(-1)
        placed.double(1)
    report = prof.as_dict()
    assert report["schema"] == "coheriq.profile/1"
    assert json.loads(prof.to_json()) == report
    assert report["places"] == ["thread MainThread"]
    calls = {(c["engine"], c["count"]) for c in report["calls"]}
    assert calls == {("fast", 1), ("reference", 1)}
    assert all(
        set(c) == {"domain", "candidate", "engine", "where", "count", "total_seconds"}
        and c["total_seconds"] > 0
        for c in report["calls"]
    )
    assert report["declines"] == [
        {
            "domain": placed.name,
            "candidate": "double",
            "engine": "fast",
            "reason": "negative",
            "where": "thread MainThread",
            "count": 1,
        }
    ]
    assert report["conversions"] == []
    (share,) = report["share"]
    assert share["text"] == str(prof.share()[placed.name])
    assert (share["calls"], share["declined"], share["sent"]) == (2, 1, {"fast": 2})


# -- other processes ------------------------------------------------------------------------

LIBRARY = """
import coheriq

domain = coheriq.AccelerationDomain("placedlib")

@domain.acceleration_candidate
def double(x):
    return 2 * x

domain.materialize()

class Fast(coheriq.engine_class("placedlib"), name="fast"):
    @coheriq.may_decline(when=lambda self, x: "negative" if x < 0 else None)
    def double(self, x):
        return 2 * x

def work(n):
    return [double(i) for i in range(-1, n)]

def fail(n):
    double(n)
    raise ValueError("bad", n)
"""

POOLS = """
import json, multiprocessing, os, sys
from concurrent.futures import ProcessPoolExecutor
sys.path.insert(0, {where!r})
import coheriq, placedlib

context = multiprocessing.get_context({method!r})
with coheriq.profile() as prof, coheriq.using_engine("placedlib", "fast"):
    placedlib.work(1)
    snap = coheriq.snapshot()
    with ProcessPoolExecutor(1, mp_context=context) as pool:
        got = pool.submit(snap.wrap(placedlib.work), 3).result(timeout=60)
        try:
            pool.submit(snap.wrap(placedlib.fail), 5).result(timeout=60)
        except ValueError as error:
            raised = [type(error).__name__, list(error.args)]
    with context.Pool(1) as pool:
        mapped = pool.map_async(snap.wrap(placedlib.work), [1, 2]).get(timeout=60)
print(json.dumps({{
    "pid": os.getpid(), "got": got, "raised": raised, "mapped": mapped,
    "rows": [[r.engine, r.count, r.where[0]] for r in prof.rows_by_place()],
    "places": prof.places, "share": str(prof.share()["placedlib"]), "text": str(prof),
}}))
"""


def report_of(code: str, timeout: float) -> dict:
    done = run_python(code, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def per_place(report: dict) -> dict[str, dict[str, int]]:
    """where -> engine -> calls."""
    found: dict[str, dict[str, int]] = {}
    for engine, count, where in report["rows"]:
        found.setdefault(where, {})[engine] = count
    return found


@pytest.mark.slow
@pytest.mark.parametrize("method", ["spawn", "fork", "forkserver"])
def test_process_pools_send_their_calls_back_with_the_results(tmp_path, method):
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {method!r} start method here")
    (tmp_path / "placedlib.py").write_text(LIBRARY)
    report = report_of(POOLS.format(where=str(tmp_path), method=method), timeout=240)
    # The results are the functions' own; the exception is the one raised, as it was.
    assert report["got"] == [-2, 0, 2, 4]
    assert report["mapped"] == [[-2, 0], [-2, 0, 2]]
    assert report["raised"] == ["ValueError", ["bad", 5]]
    places = per_place(report)
    assert places.pop("thread MainThread") == {"fast": 1, "reference": 1}
    children = {where: calls for where, calls in places.items()}
    assert all(where.startswith("process ") for where in children), children
    assert f"process {report['pid']}" not in children
    # The executor's worker: work(3) and the call fail made before it raised.
    assert sorted(children.values(), key=lambda calls: calls["fast"]) == [
        {"fast": 3, "reference": 2},  # the Pool's worker: work(1), work(2)
        {"fast": 4, "reference": 1},
    ]
    assert report["places"][0] == "thread MainThread" and len(report["places"]) == 3
    assert report["share"] == (
        "placedlib: 67% of 12 calls on fast; 33% declined: 4 by fast (negative)"
    )
    assert report["text"].splitlines()[0].split()[-1] == "where"


DASK = """
import json, os, sys
sys.path.insert(0, {where!r})
os.environ["PYTHONPATH"] = {where!r}  # for the worker processes
import dask, coheriq, placedlib
from distributed import Client, LocalCluster

cluster = LocalCluster(
    n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
)
with cluster, Client(cluster, timeout=60) as client:
    with coheriq.profile() as prof, coheriq.using_engine("placedlib", "fast"):
        snap = coheriq.snapshot()
        first = client.submit(snap.wrap(placedlib.work), 3)
        got = [first.result(timeout=60), first.result(timeout=60)]  # fetched twice
        total = client.submit(snap.wrap(sum), first).result(timeout=60)  # on the same worker
        try:
            client.submit(snap.wrap(placedlib.fail), 5).result(timeout=60)
        except ValueError as error:
            raised = [type(error).__name__, list(error.args)]
        work = dask.delayed(snap.wrap(placedlib.work))
        processes = dask.compute(work(2), scheduler="processes")[0]
        threads = dask.compute(work(1), scheduler="threads")[0]
print(json.dumps({{
    "got": got, "total": total, "raised": raised, "processes": processes, "threads": threads,
    "rows": [[r.engine, r.count, r.where[0]] for r in prof.rows_by_place()],
}}))
"""


@pytest.mark.slow
def test_dask_workers_and_schedulers_send_their_calls_back(tmp_path):
    pytest.importorskip("distributed", reason="needs dask.distributed")
    (tmp_path / "placedlib.py").write_text(LIBRARY)
    report = report_of(DASK.format(where=str(tmp_path)), timeout=300)
    assert report["got"] == [[-2, 0, 2, 4]] * 2
    assert report["total"] == 4  # the wrapped task got the first one's result itself
    assert report["raised"] == ["ValueError", ["bad", 5]]
    assert (report["processes"], report["threads"]) == ([-2, 0, 2], [-2, 0])
    places = per_place(report)
    (worker,) = [where for where in places if where.startswith("dask worker tcp://127.0.0.1:")]
    # work(3) once, though its result was fetched twice and given to another task; fail's call.
    assert places.pop(worker) == {"fast": 4, "reference": 1}
    (process,) = [where for where in places if where.startswith("process ")]
    assert places.pop(process) == {"fast": 2, "reference": 1}  # the processes scheduler
    (thread,) = places  # the threads scheduler: this process, another thread
    assert thread.startswith("thread ") and places[thread] == {"fast": 1, "reference": 1}


# -- the pytest plugin's summary ------------------------------------------------------------

SHARED = """
import coheriq

domain = coheriq.AccelerationDomain("sharedom", env_prefix="SHAREDOM")

@domain.acceleration_candidate
def which(n):
    return "reference"

domain.materialize()

class Picky(coheriq.engine_class("sharedom"), name="picky"):
    @coheriq.may_decline(when=lambda self, n: "too small" if n < 10 else None)
    def which(self, n):
        return "picky"
"""

SHARED_TESTS = """
import threading
import sharedom

def test_calls():
    assert [sharedom.which(n) for n in (1, 20, 30)] == ["reference", "picky", "picky"]

def test_in_a_thread():
    thread = threading.Thread(target=sharedom.which, args=(50,))
    thread.start()
    thread.join()
"""


def test_the_plugin_summary_gives_the_share_of_the_chosen_engine(pytester, monkeypatch):
    monkeypatch.delenv("COHERIQ_TEST_ENGINES", raising=False)
    monkeypatch.delenv("SHAREDOM_ENGINE", raising=False)
    pytester.makepyfile(sharedom=SHARED, test_shared=textwrap.dedent(SHARED_TESTS))
    pytester.syspathinsert()
    common = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest")
    with isolated():
        result = pytester.runpytest_inprocess(
            *common, "--coheriq-engine=sharedom:picky", "--coheriq-share"
        )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*- coheriq share of the calls -*",
            "sharedom: 75% of 4 calls on picky; 25% declined: 1 by picky (too small)",
        ]
    )
    with isolated():  # without the option: no profile, no share
        plain = pytester.runpytest_inprocess(*common, "--coheriq-engine=sharedom:picky")
    plain.assert_outcomes(passed=2)
    assert "coheriq share" not in plain.stdout.str()


def test_children_of_the_test_process_are_not_the_profiles_process():
    # A forked child's copy of a parent's profile is not the parent's: its tokens are
    # forgotten there, so what a task records there goes back to the parent.
    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork here")
    from coheriq._tools import profiling

    with coheriq.profile() as prof:
        token = coheriq.snapshot().profiles[0]._carry_token()
        reader, writer = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            found = profiling.resolve_tokens((token,))
            os.write(writer, b"unknown" if found == ((), (token,)) else b"known")
            os._exit(0)
        os.waitpid(pid, 0)
        assert os.read(reader, 16) == b"unknown"
        os.close(reader)
        os.close(writer)
    assert profiling.resolve_tokens((token,)) == ((prof,), ())


OFF = """
import coheriq, placedlib

class Off(coheriq.engine_class("placedlib"), name="off"):
    def double(self, x):
        return 2 * x + (x == 2)  # wrong for 2 only
"""

VERIFIED = """
import json, multiprocessing, sys
from concurrent.futures import ProcessPoolExecutor
sys.path.insert(0, {where!r})
import coheriq, placedlib, placedoff

context = multiprocessing.get_context({method!r})
with coheriq.verify("placedlib", "off", on_mismatch="record") as check:
    placedlib.work(1)
    snap = coheriq.snapshot()
    engine = {{"initializer": __import__, "initargs": ("placedoff",)}}  # in each worker
    with ProcessPoolExecutor(1, mp_context=context, **engine) as pool:
        got = pool.submit(snap.wrap(placedlib.work), 3).result(timeout=60)
        try:
            pool.submit(snap.wrap(placedlib.fail), 2).result(timeout=60)
        except ValueError:
            pass
(row,) = check.rows
print(json.dumps({{
    "got": got, "calls": row.calls, "compared": row.compared, "mismatches": row.mismatches,
    "examples": [m.arguments for m in row.examples],
}}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_a_verification_gathers_what_process_pools_compared(tmp_path, method):
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {method!r} start method here")
    (tmp_path / "placedlib.py").write_text(LIBRARY)
    (tmp_path / "placedoff.py").write_text(OFF)  # the engine, imported by each worker
    report = report_of(VERIFIED.format(where=str(tmp_path), method=method), timeout=240)
    assert report["got"] == [-2, 0, 2, 5]  # the engine's results, 2 -> 5 included
    # work(1) here: double(-1), double(0); work(3) there: four calls; fail(2) there: one.
    assert (report["calls"], report["compared"]) == (7, 7)
    assert report["mismatches"] == 2 and report["examples"] == ["(2)", "(2)"]
