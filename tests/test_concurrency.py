"""Threads, tasks and fork: set-up is safe, dispatch takes no lock."""

import asyncio
import builtins
import gc
import os
import signal
import subprocess
import sys
import sysconfig
import textwrap
import threading
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor

import pytest

import coheriq as cq
from conftest import LIBRARY, TIMEOUT, memory_grown, run_in_child, run_python


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
    barrier = threading.Barrier(33)
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
    with ThreadPoolExecutor(32) as pool:
        results = set(pool.map(caller, range(32)))
    thread.join()
    settled = cq.active_implementation(lib.name)
    assert settled in ("fast", cq.REFERENCE)
    assert results == {settled}  # every call ran the engine that settled, whichever won
    assert outcome["enable"] == ("won" if settled == "fast" else "lost")


@pytest.mark.slow
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


@pytest.mark.slow
def test_class_construction_while_scopes_open_and_close_under_many_threads(lib, two_engines):
    # While no scope is open, the marked class constructs itself directly; the
    # first scope to open makes it dispatch again, the last to close undoes it.
    fast, _ = two_engines
    cq.enable_engine(lib.name, "slow")  # slow keeps the library's Batch

    class Mine(lib.Batch):
        pass

    expected = {"fast": fast.Batch, "reference": lib.Batch, None: lib.Batch, "mine": Mine}
    errors = []
    stop = threading.Event()

    def construct(engine):
        make = Mine if engine == "mine" else lib.Batch
        while not stop.is_set():
            if engine in (None, "mine"):
                got = type(make([1]))
            else:
                with cq.using_engine(lib.name, engine):
                    got = type(make([1]))
            if got is not expected[engine]:
                errors.append((engine, got))

    def flicker():  # opens and closes the only scope, again and again
        while not stop.is_set():
            with cq.using_engine(lib.name, "fast"):
                pass

    threads = [threading.Thread(target=construct, args=(e,)) for e in expected]
    threads += [threading.Thread(target=construct, args=(None,)), threading.Thread(target=flicker)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    stop.set()
    for t in threads:
        t.join()
    assert errors == []
    assert type(lib.Batch([1])) is lib.Batch and type(Mine([1])) is Mine


fork_only = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
# Forking with threads alive is what these tests are about; Python 3.12+ warns of it.
forks_with_threads = pytest.mark.filterwarnings("ignore:This process .* is multi-threaded")


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


def test_many_tasks_and_threads_each_see_their_own_scope(lib, two_engines):
    cq.enable_engine(lib.name, "slow")
    engines = ["fast", "slow", cq.REFERENCE]
    wrong = []

    async def task(i):
        engine = engines[i % 3]
        with cq.using_engine(lib.name, engine):
            for _ in range(20):
                await asyncio.sleep(0)
                if lib.total([1])[0] != engine:
                    wrong.append(("task", i))

    async def outside():
        for _ in range(40):
            await asyncio.sleep(0)
            if lib.total([1])[0] != "slow":
                wrong.append(("outside task", 0))

    def thread(i):
        engine = engines[i % 3]
        with cq.using_engine(lib.name, engine):
            for _ in range(200):
                time.sleep(0)
                if lib.total([1])[0] != engine:
                    wrong.append(("thread", i))

    async def main():
        await asyncio.gather(outside(), *(task(i) for i in range(64)))

    threads = [threading.Thread(target=thread, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    asyncio.run(main())
    for t in threads:
        t.join()
    assert wrong == []
    assert lib.total([1]) == ("slow", 1)


@pytest.mark.slow
def test_a_million_scopes_leave_memory_flat(lib, two_engines):
    scope = cq.using_engine(lib.name, "fast")
    for _ in range(10_000):  # warm up: the engine instance, caches
        with scope:
            pass
    tracemalloc.start()
    try:
        for _ in range(20_000):
            with scope:
                lib.total([1])
        traced_before, _ = tracemalloc.get_traced_memory()
        for _ in range(20_000):
            with scope:
                lib.total([1])
        traced_after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert traced_after - traced_before < 10_000  # bytes, for 20,000 more scopes
    gc.collect()
    blocks = sys.getallocatedblocks()
    for _ in range(1_000_000):
        with scope:
            pass
    gc.collect()
    assert sys.getallocatedblocks() - blocks < 1_000  # a leak would be a million objects
    assert not cq.explain(lib.name).settled


def test_no_scope_is_left_behind(lib, two_engines):
    def in_generator():
        with cq.using_engine(lib.name, "fast"):
            yield lib.total([1])[0]
            yield "never reached"

    generator = in_generator()
    assert next(generator) == "fast"
    assert cq.active_implementation(lib.name) == "fast"  # a suspended generator holds it
    generator.close()  # the generator returns: its block exits
    assert not cq.explain(lib.name).settled

    def returns_early():
        with cq.using_engine(lib.name, "fast"):
            return lib.total([1])[0]

    assert returns_early() == "fast"
    assert not cq.explain(lib.name).settled

    async def cancelled():
        started = asyncio.Event()

        async def body():
            with cq.using_engine(lib.name, "fast"):
                started.set()
                await asyncio.sleep(3600)

        task = asyncio.create_task(body())
        await started.wait()
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        return cq.active_implementation(lib.name)

    assert asyncio.run(cancelled()) == cq.REFERENCE  # not the block's "fast"
    with cq.using_engine(lib.name, "slow"):  # scopes still work, and nest normally
        assert lib.total([1])[0] == "slow"
    assert lib.total([1]) == ("reference", 1)


def test_engine_module_calling_its_own_domain_at_import(lib, make_dist, unique, monkeypatch):
    # The engine modules reach the library through a builtin set here, as they
    # would through `import mylib`.
    monkeypatch.setattr(builtins, "SELFCALL_LIB", lib, raising=False)
    early, late = unique("early_mod"), unique("late_mod")
    engine = (
        "import coheriq\n"
        f"class Engine(coheriq.engine_class({lib.name!r}), name=NAME):\n"
        "    def total(self, xs):\n"
        "        return (NAME, sum(xs))\n"
    )
    call = "WARM = SELFCALL_LIB.total([1])\n"
    make_dist(
        unique("selfcall"),
        {early: "NAME = 'early'\n" + call + engine, late: "NAME = 'late'\n" + engine + call},
        {f"coheriq.engines.{lib.name}": {"early": early, "late": late}},
    )
    monkeypatch.setenv(lib.env_var, "early")  # calls its domain before defining itself
    with pytest.raises(cq.CoheriqEngineLoadError, match="'early'"):
        lib.total([1])  # a clear error, not a deadlock
    assert not cq.explain(lib.name).settled
    monkeypatch.setenv(lib.env_var, "late")  # defines itself first: the call finds it
    assert lib.total([1]) == ("late", 1)


@fork_only
@forks_with_threads
def test_fork_during_a_slow_engine_import(lib, two_engines, make_dist, unique):
    module = unique("slow_import")
    gate = unique("gate")
    make_dist(
        unique("slowdist"),
        {
            module: (
                "import sys, time\n"
                f"sys.modules[{gate!r}].entered.set()\n"
                f"sys.modules[{gate!r}].release.wait(30)\n"
                "import coheriq\n"
                f"class Slow(coheriq.engine_class({lib.name!r}), name='slowimport'):\n"
                "    pass\n"
            )
        },
        {f"coheriq.engines.{lib.name}": {"slowimport": module}},
    )
    signals = type(sys)(gate)
    signals.entered, signals.release = threading.Event(), threading.Event()
    sys.modules[gate] = signals
    thread = threading.Thread(target=lambda: cq.enable_engine(lib.name, "slowimport"))
    thread.start()
    signals.entered.wait(10)  # the other thread is importing the engine now

    def child():  # everything the engine guide promises a forked child
        with cq.using_engine(lib.name, "slow"):
            scoped = lib.total([1])
        cq.enable_engine(lib.name, "fast")
        with cq.profile() as prof:
            lib.total([1])
        listed = cq.available_engines(lib.name)
        return (
            scoped == ("slow", 1)
            and lib.total([1]) == ("fast", 1)
            and [r.engine for r in prof.rows] == ["fast"]
            and "slowimport" in listed
            and cq.explain(lib.name).engine == "fast"
        )

    try:
        assert run_in_child(child) == 0
    finally:
        signals.release.set()
        thread.join()
        del sys.modules[gate]
    assert cq.active_implementation(lib.name) == "slowimport"


@pytest.mark.skipif(
    not sysconfig.get_config_var("Py_GIL_DISABLED"),
    reason="only a free-threaded build runs without the GIL",
)
def test_the_gil_stays_off_through_coheriq_and_every_example_engine():
    # A free-threaded build turns the GIL back on, with a warning, when it imports an
    # extension that does not declare itself safe without it: coheriq's compiled part,
    # an engine's own, or what an engine imports (NumPy).
    pytest.importorskip("ragbatch_compiled", reason="the compiled example engine is absent")
    code = textwrap.dedent(
        """
        import sys, threading, warnings
        from importlib.metadata import entry_points
        from importlib.util import find_spec
        warnings.simplefilter("error")  # the warning that the GIL came back fails the run
        import coheriq, ragbatch
        batch = ragbatch.from_flat([1.0, 2.0, 3.0, 4.0], [0, 1, 4])
        wrong, ran = [], []

        def work(engine):
            with coheriq.using_engine("ragbatch", engine):
                for _ in range(2000):
                    if list(ragbatch.row_sum(batch)) != [1.0, 9.0]:
                        wrong.append(1)

        points = [p for p in entry_points() if p.group.startswith("coheriq.engines.")]
        for point in points:
            try:
                point.load()
            except ImportError as error:  # what the engine needs is not installed here
                if error.name is None or find_spec(error.name.partition(".")[0]) is not None:
                    raise
                continue
            if point.group != "coheriq.engines.ragbatch" or point.name in ("dask", "gpu"):
                continue  # another example's library; a cluster, a device: imported only
            threads = [threading.Thread(target=work, args=(point.name,)) for _ in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            ran.append(point.name)
        print(coheriq.proxy_implementation().split()[0], len(wrong), sys._is_gil_enabled())
        print(*sorted(ran))
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    assert first.split()[1:] == ["0", "False"], done.stdout
    assert {"numpy", "compiled", "hybrid"} <= set(second.split()), done.stdout
    if os.environ.get("COHERIQ_EXPECT_PROXY") == "compiled":
        assert first.split()[0] == "compiled", done.stdout


def test_blocks_and_profiles_opened_for_ever_leave_memory_flat(lib, two_engines):
    # On a free-threaded build the compiled proxies' board and cells keep what they held
    # before (a call on another thread may still read it without a reference): each
    # object once, so that a program that opens blocks and profiles in a loop keeps a
    # flat memory, whatever the build.

    def blocks(times):
        for _ in range(times):
            with cq.using_engine(lib.name, "fast"):
                assert lib.total([1])[0] == "fast"
            with cq.profile():
                lib.total([1])

    # A finder kept per block and profile would be about 200 kB.
    assert memory_grown(blocks) < 50_000


# -- an engine's __init__ imports a module another thread is importing ---------------------


IMPORT_INVERSION = """
import sys, threading, time, pathlib, tempfile, importlib
import coheriq

folder = pathlib.Path(tempfile.mkdtemp())
(folder / "other_engine.py").write_text(
    "import time, coheriq\\n"
    "time.sleep(0.4)  # holds this module's import lock meanwhile\\n"
    "class Other(coheriq.engine_class('hard'), name='other'):\\n"
    "    pass\\n"
)
sys.path.insert(0, str(folder))

class Slow(coheriq.engine_class("hard"), name="slow"):
    def __init__(self):
        time.sleep(0.2)
        import other_engine  # waits for the other thread's import of it

importer = threading.Thread(target=lambda: importlib.import_module("other_engine"))
starter = threading.Thread(target=lambda: coheriq.enable_engine("hard", "slow"))
starter.start()
time.sleep(0.1)
importer.start()
starter.join(); importer.join()
print("both done", coheriq.available_engines("hard"))
"""


@pytest.mark.slow
def test_an_engines_init_importing_what_another_thread_imports_does_not_deadlock():
    done = run_python(LIBRARY + IMPORT_INVERSION)
    assert done.stdout.split()[:2] == ["both", "done"], done.stderr


# -- blocks never wait for an engine's set-up ----------------------------------------------


POOL_IN_INIT = """
from concurrent.futures import ThreadPoolExecutor
import coheriq

pool = ThreadPoolExecutor(1)

def job():
    with coheriq.using_engine("hard", "reference"):
        return double(2)

class Pooled(coheriq.engine_class("hard"), name="pooled"):
    def __init__(self):
        # set-up that waits for a pool job which enters and leaves a block
        self.ready = pool.submit(job).result(timeout=20)

with coheriq.using_engine("hard", "pooled"):
    pass
print("started", Pooled.__name__)
"""


def test_an_engines_init_may_wait_for_a_job_that_enters_a_block():
    done = run_python(LIBRARY + POOL_IN_INIT)
    assert done.stdout.split() == ["started", "Pooled"], done.stderr


def test_a_block_is_entered_and_left_while_another_engine_starts(lib):
    release = threading.Event()
    started = threading.Event()

    class Gpu(cq.engine_class(lib.name), name="gpu"):
        def __init__(self):
            started.set()
            release.wait(TIMEOUT)  # seconds of set-up, say a device

    starter = threading.Thread(target=lambda: cq.enable_engine(lib.name, "gpu"))
    starter.start()
    started.wait(TIMEOUT)

    def block():
        with cq.using_engine(lib.name, cq.REFERENCE):
            lib.total([1])

    other = threading.Thread(target=block)
    other.start()
    other.join(10)
    entered_meanwhile = not other.is_alive()
    release.set()
    starter.join()
    other.join()
    assert entered_meanwhile, "the block waited for another engine's set-up"


# -- an engine whose __init__ waits for a thread that calls the library --------------------


WARMING_LIBRARY = """
import os, sys, threading, time
from concurrent.futures import ThreadPoolExecutor
import coheriq

domain = coheriq.AccelerationDomain("warmlib", env_prefix="WARMLIB")

@domain.acceleration_candidate
def f(x):
    return x + 1

domain.materialize()
refused = []

def calling_the_library():
    try:
        f(1)
    except coheriq.CoheriqEngineError as error:
        refused.append(str(error))

class Warm(coheriq.engine_class("warmlib"), name="warm"):
    def __init__(self):
        how = os.environ["HOW"]
        if how == "join":
            worker = threading.Thread(target=calling_the_library)
            worker.start()
            worker.join()
        elif how == "method":  # the thread runs the engine's method; __init__ waits on an event
            self._done = threading.Event()
            threading.Thread(target=self._warm).start()
            self._done.wait()
        elif how == "pool":
            with ThreadPoolExecutor(2) as pool:
                list(pool.map(lambda x: calling_the_library(), range(3)))
        elif how == "result":
            with ThreadPoolExecutor(1) as pool:
                pool.submit(f, 1).result()
        elif how == "unrelated":  # a slow start, waiting on an event; a thread of the program's
            ready = threading.Event()
            threading.Timer(0.5, ready.set).start()
            ready.wait()

    def _warm(self):
        calling_the_library()
        self._done.set()

    def f(self, x):
        return x + 100
"""


WARMING_MAIN = """
import os, threading, time
import warmlib

if os.environ["HOW"] == "unrelated":
    results = []
    starter = threading.Thread(target=lambda: results.append(warmlib.f(1)))
    starter.start()
    time.sleep(0.2)  # the start is under way: a thread made now waits for it
    other = threading.Thread(target=lambda: results.append(warmlib.f(2)))
    other.start()
    starter.join()
    other.join()
    print(sorted(results), len(warmlib.refused))
else:
    try:
        print(warmlib.f(1), len(warmlib.refused), *warmlib.refused)
    except coheriq.CoheriqEngineStartError as error:
        print("start failed:", error.__cause__)
"""


@pytest.mark.parametrize(
    ("how", "printed"),
    [
        ("join", "101 1"),
        ("method", "101 1"),
        ("pool", "101 3"),
        ("result", "start failed: Engine 'warm' of domain 'warmlib' was asked for from a thread"),
        ("unrelated", "[101, 102] 0"),
    ],
)
@pytest.mark.slow
def test_an_engine_waiting_for_a_thread_that_calls_the_library_never_hangs(tmp_path, how, printed):
    (tmp_path / "warmlib.py").write_text(WARMING_LIBRARY)
    main = WARMING_MAIN.replace("import warmlib", "import coheriq, warmlib")
    try:
        done = subprocess.run(
            [sys.executable, "-c", main],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(tmp_path), "WARMLIB_ENGINE": "warm", "HOW": how},
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the program hung ({how})")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(printed), done.stdout
    if how in ("join", "method", "pool"):  # each refusal said why, and what to do
        assert done.stdout.count("In that thread, call the engine's own implementations") == int(
            printed[-1]
        )


def test_two_engines_whose_starts_wait_for_each_others_warm_up_never_hang():
    program = """
import threading, time, coheriq
d = coheriq.AccelerationDomain("crossed")

@d.acceleration_candidate
def f(x):
    return ("reference", x)

d.materialize()

def warm(engine, out):
    try:
        with coheriq.using_engine("crossed", engine):
            out.append(f(0))
    except coheriq.CoheriqEngineError as error:
        out.append("refused")

class A(coheriq.engine_class("crossed"), name="a"):
    def __init__(self):
        time.sleep(0.2)
        worker = threading.Thread(target=warm, args=("b", []))
        worker.start()
        worker.join()

    def f(self, x):
        return ("a", x)

class B(coheriq.engine_class("crossed"), name="b"):
    def __init__(self):
        time.sleep(0.2)
        worker = threading.Thread(target=warm, args=("a", []))
        worker.start()
        worker.join()

    def f(self, x):
        return ("b", x)

results = []
starters = [threading.Thread(target=warm, args=(e, results)) for e in "ab"]
for t in starters:
    t.start()
for t in starters:
    t.join()
print(sorted(results))
"""
    try:
        done = subprocess.run(
            [sys.executable, "-c", program], capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the two starts deadlocked")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[('a', 0), ('b', 0)]"


# -- a task created by an engine's __init__ does not keep the start's block ----------------


def test_a_task_made_while_an_engine_starts_later_runs_on_the_programs_choice(unique):
    with cq.testing.isolated():
        domain = cq.AccelerationDomain(unique())

        @domain.acceleration_candidate
        def f(x):
            return ("reference", x)

        domain.materialize()
        tasks = []

        class Live(cq.engine_class(domain), name="live"):
            def __init__(self):
                async def refresh():
                    await asyncio.sleep(0.01)  # long after the start
                    return f(1)

                tasks.append(asyncio.get_running_loop().create_task(refresh()))

            def f(self, x):
                return ("live", x)

        async def main():
            with cq.using_engine(domain, "live"):
                assert f(2) == ("live", 2)
            return await tasks[0]

        assert asyncio.run(main()) == ("reference", 1)


# -- fork while another thread is inside a profile -----------------------------------------


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded")
def test_a_child_forked_while_another_thread_is_in_a_profile_can_profile(lib):
    from coheriq._library import observing

    prof = cq.profile()
    inside = threading.Event()
    leave = threading.Event()

    def hold(lock):
        with lock:  # another thread of the parent, caught inside the profiler
            inside.set()
            leave.wait()

    for lock in (observing._lock, prof._lock):  # entering a profile; recording into one
        inside.clear()
        leave.clear()
        holder = threading.Thread(target=hold, args=(lock,))
        holder.start()
        inside.wait()

        def child():
            with prof, cq.profile() as fresh:
                lib.total([1])
            return [r.count for r in fresh.rows] == [1]

        try:
            assert run_in_child(child) == 0
        finally:
            leave.set()
            holder.join()


# -- signal handlers that call candidates: while the thread records, while the domain chooses ---


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs signal.setitimer")
@pytest.mark.slow
def test_a_signal_handler_that_calls_a_candidate_while_recording_does_not_deadlock():
    done = run_python(
        LIBRARY
        + """
import signal
seen = []
signal.signal(signal.SIGALRM, lambda signum, frame: seen.append(double(1)))
signal.setitimer(signal.ITIMER_REAL, 0.0005, 0.0005)  # many signals, landing anywhere
with coheriq.profile() as prof:
    for i in range(200_000):
        double(i)
signal.setitimer(signal.ITIMER_REAL, 0, 0)
print("done", len(seen) > 0)
"""
    )
    assert done.stdout.split() == ["done", "True"], done.stderr


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs signal.setitimer")
@pytest.mark.slow
def test_a_signal_handler_that_calls_a_candidate_while_the_domain_chooses():
    done = run_python(
        """
import signal
import coheriq

failures, busy = [], []
for i in range(2000):  # fresh domains: each first call makes the global choice
    domain = coheriq.AccelerationDomain(f"first{i}")
    double = domain.acceleration_candidate(name="double")(lambda x: 2 * x)
    domain.materialize()

    def handler(signum, frame, double=double):
        # Not within itself: a handler slower than the timer (a first call on a slow
        # interpreter, free-threaded 3.13's) would nest without end, coheriq or not.
        if busy:
            return
        busy.append(signum)
        try:
            double(1)
        except Exception as error:
            failures.append(repr(error))
        finally:
            busy.pop()

    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, 0.0001, 0.0001)
    for x in range(50):
        double(x)
    signal.setitimer(signal.ITIMER_REAL, 0, 0)
print("failures", failures[:1])
"""
    )
    assert done.stdout.strip() == "failures []", done.stdout + done.stderr


# -- a signal handler entering a block while this thread enters or leaves one --------------


@pytest.mark.slow
def test_a_signal_handler_that_enters_a_block_never_deadlocks():

    program = """
import signal, coheriq

domain = coheriq.AccelerationDomain("sig")

@domain.acceleration_candidate
def f(x):
    return x

domain.materialize()

class Fast(coheriq.engine_class("sig"), name="fast"):
    def f(self, x):
        return -x

handled, busy = 0, False

def handler(signum, frame):
    global handled, busy
    if busy:  # a signal during the handler itself: not the case under test
        return
    busy = True
    with coheriq.using_engine("sig", "fast"):
        assert f(1) == -1
    handled += 1
    busy = False

signal.signal(signal.SIGALRM, handler)
signal.setitimer(signal.ITIMER_REAL, 0.0005, 0.0005)
while handled < 3000:
    with coheriq.using_engine("sig", "reference"):
        f(1)
signal.setitimer(signal.ITIMER_REAL, 0)
signal.signal(signal.SIGALRM, signal.SIG_IGN)
print("done", handled)
"""
    try:
        done = subprocess.run(
            [sys.executable, "-c", program], capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the program deadlocked")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("done")


def test_a_block_entered_at_any_line_of_another_blocks_entry_or_exit_runs_its_engine(
    lib, two_engines
):
    # What a signal handler does when it interrupts this thread: here it "interrupts"
    # at every line coheriq runs while a block is entered and left (a trace function
    # runs it there), so that no point in between is left to chance. The handler's
    # own block must run its own engine, whatever the interrupted entry had done.
    cq.enable_engine(lib.name, "slow")
    package = os.path.dirname(cq.__file__)
    handling = False
    wrong = []

    def handler(where):
        with cq.using_engine(lib.name, "fast"):
            ran = lib.total([1])[0]
        if ran != "fast":
            wrong.append(f"{ran} at {where}")

    def on_line(frame, event, arg):
        nonlocal handling
        if event == "line" and not handling:
            handling = True
            try:
                handler(f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}")
            finally:
                handling = False
        return on_line

    def on_call(frame, event, arg):
        return on_line if frame.f_code.co_filename.startswith(package) else None

    sys.settrace(on_call)
    try:
        with cq.using_engine(lib.name, cq.REFERENCE):
            inside = lib.total([1])[0]
    finally:
        sys.settrace(None)
    assert (inside, lib.total([1])[0]) == ("reference", "slow")
    assert wrong == []


# -- the first call in another thread while enable_engine starts the engine ----------------


def test_a_warm_up_thread_of_an_engine_enable_engine_starts_is_refused(lib):
    # As under <PREFIX>_ENGINE: the warm-up thread's call must not make the choice
    # (the reference) while enable_engine starts the engine that waits for it.
    seen = []

    class Warm(cq.engine_class(lib.name), name="warm"):
        def __init__(self):
            worker = threading.Thread(target=self._warm_up)
            worker.start()
            worker.join(TIMEOUT)

        def _warm_up(self):
            try:
                seen.append(lib.total([1]))
            except cq.CoheriqError as error:
                seen.append(type(error).__name__)

        def total(self, xs):
            return ("warm", sum(xs))

    cq.enable_engine(lib.name, "warm")
    assert seen == ["CoheriqEngineError"]
    assert lib.total([1]) == ("warm", 1)
    assert cq.explain(lib.total).engine == "warm"


def test_a_call_in_another_thread_while_enable_engine_starts_waits_and_runs_on_it(lib):
    starting, go_on = threading.Event(), threading.Event()

    class Slow(cq.engine_class(lib.name), name="slowstart"):
        def __init__(self):
            starting.set()
            go_on.wait(TIMEOUT)

        def total(self, xs):
            return ("slowstart", sum(xs))

    results = []

    def program_thread():
        starting.wait(TIMEOUT)
        results.append(lib.total([1]))

    thread = threading.Thread(target=program_thread)
    thread.start()
    enabling = threading.Thread(target=cq.enable_engine, args=(lib.name, "slowstart"))
    enabling.start()
    starting.wait(TIMEOUT)
    time.sleep(0.2)  # the program thread's call is made while the engine starts
    go_on.set()
    enabling.join(TIMEOUT)
    thread.join(TIMEOUT)
    assert results == [("slowstart", 1)]
    cq.enable_engine(lib.name, "slowstart")  # the choice enable_engine made stands


# -- a start that waits for a pool of the standard library's --------------------------------

MULTIPROCESSING_POOL_IN_INIT = """
from multiprocessing.pool import ThreadPool
import coheriq

class Warm(coheriq.engine_class("hard"), name="warm"):
    def __init__(self):
        with ThreadPool(2) as pool:
            try:
                pool.apply(double, (1,))  # the library, from a worker the start waits for
            except coheriq.CoheriqEngineError:
                print("refused")

    def double(self, x):
        return 20 * x

coheriq.enable_engine("hard", "warm")
print(double(1))
"""


def test_an_engine_warming_up_in_a_multiprocessing_thread_pool_is_refused_not_hung():
    done = run_python(LIBRARY + MULTIPROCESSING_POOL_IN_INIT)
    assert done.stdout.split() == ["refused", "20"], done.stderr


# -- a signal handler that waits for the start this thread waits for ----------------------

HANDLER_WAITING_TOO = """
import signal, threading, time

started = threading.Event()
main = threading.get_ident()

class Slow(coheriq.engine_class("hard"), name="slowstart"):
    def __init__(self):
        started.set()
        time.sleep(0.3)  # the main thread waits for this start now
        signal.pthread_kill(main, signal.SIGUSR1)
        time.sleep(0.3)

    def double(self, x):
        return 10 * x

def handler(signum, frame):
    with coheriq.using_engine("hard", "slowstart"):  # waits for the same start
        seen.append(double(1))

seen = []
signal.signal(signal.SIGUSR1, handler)
starter = threading.Thread(target=lambda: coheriq.using_engine("hard", "slowstart").__enter__())
starter.start()
started.wait()
with coheriq.using_engine("hard", "slowstart"):
    seen.append(double(1))
starter.join()
print(seen)
"""


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="needs signal.pthread_kill")
@pytest.mark.slow
def test_a_signal_handler_waiting_for_the_start_this_thread_waits_for():
    done = run_python(LIBRARY + HANDLER_WAITING_TOO)
    assert done.stdout.strip() == "[10, 10]", done.stderr
