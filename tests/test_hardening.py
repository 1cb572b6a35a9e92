"""Regression tests for what a hostile pass found: hangs, dead scopes, half-loaded engines.

Every scenario that used to hang runs where a hang fails the test instead of the
run: in a subprocess or a forked child with a timeout.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import sysconfig
import textwrap
import threading

import pytest

import coheriq as cq
from conftest import run_in_child

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


LIBRARY = """
import coheriq
domain = coheriq.AccelerationDomain("hard")

@domain.acceleration_candidate
def double(x):
    return 2 * x

domain.materialize()
"""


# -- 5: the same profile entered twice, nested ---------------------------------------


def test_a_profile_entered_twice_nested_counts_each_call_once():
    done = run_python(
        LIBRARY
        + """
prof = coheriq.profile()
with prof:
    double(1)
    with prof:
        double(2)
    double(3)
print([(r.candidate, r.count) for r in prof.rows])
"""
    )
    assert done.stdout.strip() == "[('double', 3)]", done.stderr


# -- 4: a signal handler calls a candidate while its thread records ------------------


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs signal.setitimer")
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


# -- 1: fork while another thread is inside a profile --------------------------------


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


# -- 2: an engine's __init__ imports a module another thread is importing -----------

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


def test_an_engines_init_importing_what_another_thread_imports_does_not_deadlock():
    done = run_python(LIBRARY + IMPORT_INVERSION)
    assert done.stdout.split()[:2] == ["both", "done"], done.stderr


# -- 3: blocks never wait for an engine's set-up -------------------------------------

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


# -- 6: one using_engine object shared by tasks and threads --------------------------


def test_a_using_engine_object_shared_by_tasks_keeps_each_tasks_block(lib, two_engines):
    import asyncio

    cq.enable_engine(lib.name, "slow")
    shared = cq.using_engine(lib.name, "fast")

    async def task(delay):
        with shared:
            await asyncio.sleep(delay)
            inside = lib.total([1])[0]
        await asyncio.sleep(0.002)  # while the other task's block is open
        return inside, lib.total([1])[0]

    async def main():
        for _ in range(300):
            results = await asyncio.gather(task(0), task(0.001))
            assert results == [("fast", "slow"), ("fast", "slow")], results

    asyncio.run(main())


@pytest.mark.xfail(
    bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
    reason="known race on a free-threaded build, not found yet: in about 3 runs of 100, one "
    "thread's exit ends another thread's block of the shared object",
    strict=False,
)
def test_a_using_engine_object_shared_by_threads_keeps_each_threads_block(lib, two_engines):
    cq.enable_engine(lib.name, "slow")
    shared = cq.using_engine(lib.name, "fast")
    barrier = threading.Barrier(4)
    wrong = []

    def worker():
        for _ in range(300):
            barrier.wait()
            with shared:
                barrier.wait()
                wrong.extend([] if lib.total([1])[0] == "fast" else ["inside"])
            wrong.extend([] if lib.total([1])[0] == "slow" else ["after"])

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []


# -- 7: a generator's block that ends inside its consumer's block --------------------


def test_a_generators_block_ending_inside_the_consumers_block_keeps_it(lib, two_engines):
    def numbers():
        with cq.using_engine(lib.name, "fast"):
            yield 1

    generator = numbers()
    next(generator)
    with cq.using_engine(lib.name, "slow"):  # the consumer's own block
        assert list(generator) == []  # the generator's block ends in here
        assert lib.total([1])[0] == "slow"
    assert lib.total([1])[0] == "reference"  # both blocks ended: the global choice


# -- 8: blocks that exit in another context do not pile up ---------------------------


def test_async_generators_left_with_break_leave_no_dead_blocks_behind(lib, two_engines):
    import asyncio

    async def numbers():
        with cq.using_engine(lib.name, "fast"):
            yield 1
            yield 2

    async def main():
        with cq.using_engine(lib.name, "slow"):  # a block open around, so calls look
            for _ in range(3000):  # each closed later, by the event loop, in another task
                async for _ in numbers():
                    assert lib.total([1])[0] == "fast"
                    break
                await asyncio.sleep(0)
            for _ in range(3):  # the last one is closed by the loop too
                await asyncio.sleep(0)
            return lib.total([1])[0]

    assert asyncio.run(main()) == "slow"


def test_blocks_entered_in_one_thread_and_left_in_another(lib, two_engines):
    from concurrent.futures import ThreadPoolExecutor

    block = cq.using_engine(lib.name, "fast")
    with cq.using_engine(lib.name, "slow"), ThreadPoolExecutor(1) as elsewhere:
        for _ in range(3000):
            block.__enter__()
            assert lib.total([1])[0] == "fast"
            elsewhere.submit(block.__exit__, None, None, None).result()
            assert lib.total([1])[0] == "slow"


def test_a_snapshot_shared_by_long_lived_tasks(lib, two_engines):
    import asyncio

    cq.enable_engine(lib.name, "slow")
    with cq.using_engine(lib.name, "fast"):
        snap = cq.snapshot()

    async def task(delay):
        wrong = 0
        with cq.using_engine(lib.name, cq.REFERENCE):  # each task's own block, around
            for _ in range(1500):
                with snap:
                    await asyncio.sleep(delay)
                    wrong += lib.total([1])[0] != "fast"
                await asyncio.sleep(0)
                wrong += lib.total([1])[0] != "reference"
        return wrong

    async def main():
        return await asyncio.gather(task(0), task(0))

    assert asyncio.run(main()) == [0, 0]


# -- 9: blocks left out of order, or twice -------------------------------------------


def test_blocks_left_out_of_order_or_twice(lib, two_engines):
    outer = cq.using_engine(lib.name, "fast")
    inner = cq.using_engine(lib.name, "slow")
    outer.__enter__()
    inner.__enter__()
    outer.__exit__(None, None, None)  # out of order: the inner block is still open
    assert lib.total([1])[0] == "slow"
    inner.__exit__(None, None, None)
    assert lib.total([1])[0] == "reference"
    with pytest.raises(cq.CoheriqScopeError, match="exited more often than it was entered"):
        inner.__exit__(None, None, None)


# -- 10: an engine first used inside a block, whose __init__ calls the library --------


def test_an_engines_init_calling_the_library_in_a_block_chooses_nothing(lib):
    class Warm(cq.engine_class(lib.name), name="warm"):
        def __init__(self):
            self.empty = lib.Batch([])  # through the domain, before the engine exists

    with pytest.raises(cq.CoheriqEngineError, match="from that engine's __init__"):
        with cq.using_engine(lib.name, "warm"):
            pass
    assert cq.active_implementation(lib.name) is None  # the global choice is still open
    cq.enable_engine(lib.name, cq.REFERENCE)


# -- 11: generators and blocks -------------------------------------------------------


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


# -- 12-14: a failed load takes back exactly what it registered ----------------------

TWO_ENGINES_ONE_MODULE = """
import os
import coheriq

class Simd(coheriq.engine_class({lib!r}), name="simd"):
    class Batch:  # an engine's own container
        def __init__(self, rows):
            self.rows = rows

if os.environ.get("HAS_TPU"):  # only on machines with a TPU
    class Tpu(coheriq.engine_class({lib!r}), name="tpu"):
        pass
"""


def test_a_failed_load_keeps_the_engines_loaded_before_from_the_same_module(lib, make_dist):
    module = f"{lib.name}_accel"
    make_dist(
        module,
        {module: TWO_ENGINES_ONE_MODULE.format(lib=lib.name)},
        {f"coheriq.engines.{lib.name}": {"simd": f"{module}:Simd", "tpu": f"{module}:Tpu"}},
    )
    cq.enable_engine(lib.name, "simd")
    batch = lib.Batch([1])
    with pytest.raises(cq.CoheriqEngineLoadError, match="tpu"):
        with cq.using_engine(lib.name, "tpu"):
            pass
    assert isinstance(batch, lib.Batch) and cq.engine_of(batch) == "simd"
    with cq.using_engine(lib.name, "simd"):
        assert type(lib.Batch([1])) is type(batch)
    assert module in sys.modules  # imported before the failed load: left in place


INTERRUPTED = """
import os
import coheriq

class Kb(coheriq.engine_class({lib!r}), name="kb"):
    def total(self, xs):
        return helper(xs)

if os.environ.get("INTERRUPT_IMPORT"):
    raise KeyboardInterrupt  # Ctrl-C while the module is imported

def helper(xs):
    return ("kb", sum(xs))
"""


def test_an_import_interrupted_after_the_class_statement_leaves_nothing(
    lib, make_dist, monkeypatch
):
    module = f"{lib.name}_kb"
    make_dist(
        module,
        {module: INTERRUPTED.format(lib=lib.name)},
        {f"coheriq.engines.{lib.name}": {"kb": module}},
    )
    monkeypatch.setenv("INTERRUPT_IMPORT", "1")
    with pytest.raises(KeyboardInterrupt):
        cq.enable_engine(lib.name, "kb")
    assert cq.active_implementation(lib.name) is None and module not in sys.modules
    monkeypatch.delenv("INTERRUPT_IMPORT")
    cq.enable_engine(lib.name, "kb")  # the retry imports the module afresh
    assert lib.total([1, 2]) == ("kb", 3)


CROSS_DOMAIN = """
import coheriq

class Stray(coheriq.engine_class({other!r}), name="stray"):  # another domain's engine
    pass
{body}
"""


def test_a_failed_load_takes_back_what_it_registered_in_other_domains(
    lib, make_dist, unique, tmp_path
):
    from conftest import build_lib

    other = build_lib(unique("other"))
    module = f"{lib.name}_cross"
    site = make_dist(
        module,
        {module: CROSS_DOMAIN.format(other=other.name, body="")},
        {f"coheriq.engines.{lib.name}": {"cross": module}},
    )
    with pytest.raises(cq.CoheriqEngineLoadError, match="did not define an engine"):
        cq.enable_engine(lib.name, "cross")
    assert "stray" not in cq.available_engines(other.name)
    fixed = CROSS_DOMAIN.format(
        other=other.name,
        body=f"class Cross(coheriq.engine_class({lib.name!r}), name='cross'):\n    pass\n",
    )
    (site / f"{module}.py").write_text(fixed)
    cq.enable_engine(lib.name, "cross")  # a retry imports the fixed module: no clash
    assert "stray" in cq.available_engines(other.name)


def test_one_rule_for_engine_names_everywhere(lib, make_dist, monkeypatch):
    module = f"{lib.name}_names"
    make_dist(
        module,
        {module: "raise AssertionError('never imported')\n"},
        {f"coheriq.engines.{lib.name}": {"reference": module, "bad name": module}},
    )
    assert cq.available_engines(lib.name) == ()  # neither name can be an engine
    monkeypatch.setenv(lib.env_var, "bad name")
    with pytest.raises(cq.CoheriqEngineNotFoundError, match="not a valid engine name"):
        lib.total([1])
    assert module not in sys.modules


# -- 15: a distribution whose metadata cannot be read --------------------------------


def test_a_distribution_with_unreadable_entry_points_does_not_stop_discovery(lib):
    import importlib.metadata as metadata

    from coheriq import discovery

    class Broken(metadata.Distribution):  # as the importlib_metadata backport reads one
        def read_text(self, filename):  # with a malformed entry point
            return (
                "Metadata-Version: 2.1\nName: broken\nVersion: 1\n"
                if filename == "METADATA"
                else None
            )

        def locate_file(self, path):
            return path

        @property
        def entry_points(self):
            raise ValueError("Invalid object reference")

    class Finder:
        @staticmethod
        def find_distributions(context=None):
            return iter([Broken()])

        @staticmethod
        def find_spec(*args, **kwargs):
            return None

    sys.meta_path.insert(0, Finder)
    discovery.clear_cache()
    try:
        assert cq.available_engines(lib.name) == ()
        cq.enable_engine(lib.name, cq.REFERENCE)
    finally:
        sys.meta_path.remove(Finder)
        discovery.clear_cache()


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs signal.setitimer")
def test_a_signal_handler_that_calls_a_candidate_while_the_domain_chooses():
    done = run_python(
        """
import signal
import coheriq

failures = []
for i in range(2000):  # fresh domains: each first call makes the global choice
    domain = coheriq.AccelerationDomain(f"first{i}")
    double = domain.acceleration_candidate(name="double")(lambda x: 2 * x)
    domain.materialize()

    def handler(signum, frame, double=double):
        try:
            double(1)
        except Exception as error:
            failures.append(repr(error))

    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, 0.0001, 0.0001)
    for x in range(50):
        double(x)
    signal.setitimer(signal.ITIMER_REAL, 0, 0)
print("failures", failures[:1])
"""
    )
    assert done.stdout.strip() == "failures []", done.stdout + done.stderr


# -- 16-18: checks that let wrong code through ---------------------------------------


def test_an_engine_that_sets_a_candidate_to_itself_is_refused(lib):
    for body in ({"total": lib.total}, {"Batch": lib.Batch}, {"total": staticmethod(lib.total)}):
        with pytest.raises(cq.CoheriqEngineError, match="itself, whose calls would come back"):
            type(cq.engine_class(lib.name))("Loop", (cq.engine_class(lib.name),), body, name="loop")
    assert cq.available_engines(lib.name) == ()


def test_sync_and_async_mismatches_are_signature_problems(unique):
    import warnings

    domain = cq.AccelerationDomain(unique())

    @domain.acceleration_candidate
    async def fetch(x):
        return x

    @domain.acceleration_candidate
    def compute(x):
        return x

    domain.materialize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        class Mixed(cq.engine_class(domain), name="mixed"):
            def fetch(self, x):  # callers await it: this returns no awaitable
                return x

            async def compute(self, x):  # callers do not await it
                return x

    messages = sorted(str(w.message) for w in caught)
    assert len(messages) == 2
    assert "the candidate is an async def function" in messages[1]
    assert "the override is an async def function" in messages[0]


def test_raw_errors_are_coheriq_errors_that_say_what_to_do(unique, monkeypatch):
    import warnings

    with pytest.raises(cq.CoheriqTypeError, match="domain name '' is not a valid name"):
        cq.import_domain("")
    done = subprocess.run(
        [sys.executable, "-m", "coheriq", "show", ""], capture_output=True, text=True
    )
    assert done.returncode == 2 and done.stderr.startswith("coheriq: error:"), done.stderr

    domain = cq.AccelerationDomain(unique())
    total = domain.acceleration_candidate(lambda xs: sum(xs), name="ﬁlter")  # a ligature
    assert total.__coheriq_candidate__.name == "filter"  # as Python reads identifiers
    domain.materialize()

    with pytest.raises(cq.CoheriqEngineError, match="slot named 'filter'"):

        class Slotted(cq.engine_class(domain), name="slotted"):
            __slots__ = ("filter",)

    class Ligature(cq.engine_class(domain), name="ligature"):
        def ﬁlter(self, xs):
            return "engine"

    with cq.using_engine(domain, "ligature"):
        assert total([1]) == "engine"

    for value, strict in [("false", False), ("no", False), ("OFF", False), ("yes", True)]:
        monkeypatch.setenv("COHERIQ_STRICT", value)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:

                class Loose(cq.engine_class(domain)):  # a mixin: its name may repeat
                    def ﬁlter(self):  # takes no xs: a signature problem
                        return None

                refused = False
            except cq.CoheriqEngineError:
                refused = True
        assert refused is strict, value
    monkeypatch.setenv("COHERIQ_STRICT", "perhaps")
    with pytest.raises(cq.CoheriqTypeError, match="COHERIQ_STRICT is 'perhaps'"):

        class Unsure(cq.engine_class(domain)):
            def ﬁlter(self):
                return None


def test_the_importlib_metadata_backport_and_a_malformed_entry_point(lib, make_dist):
    # Python 3.10 with dask: the backport is imported, and coheriq's discovery must
    # survive an entry point it cannot parse, as it does with the standard library.
    pytest.importorskip("importlib_metadata", reason="the importlib_metadata backport is absent")
    make_dist("malformed_dist", {}, {f"coheriq.engines.{lib.name}": {"bad": "not valid!:"}})
    make_dist(
        "good_dist",
        {"good_mod": "import coheriq\n"},
        {"coheriq.engines.unrelated_domain": {"good": "good_mod"}},
    )
    cq.available_engines(lib.name)  # listed or skipped, as the metadata reader can
    with pytest.raises(cq.CoheriqError):  # a clear error, never a bare ValueError
        cq.using_engine(lib.name, "bad").__enter__()
    cq.enable_engine(lib.name, cq.REFERENCE)
