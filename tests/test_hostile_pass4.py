"""Hostile pass on the mechanisms issue 50 added: the runner that replaces itself with the
interpreter, declared modules run from source with marking calls, ``COHERIQ_ACCELERATE``'s
deferred finder, and declines and verification.

Each test does what a hostile user would and asserts what that user sees, mostly by
running the same program with ``python`` and with coheriq (the runner, the variable,
``coheriq.accelerate``) in fresh interpreters with a timeout. Where coheriq misbehaves
today, the test asserts what a careful user would expect and is marked
``xfail(strict=True)`` with the misbehaviour as its reason; the others are guards.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from test_outside import SHAPES, ok, python, startup_hook_installed
from test_outside_hostile import ACCELERATED, telling
from test_outside_loading import TRACED
from test_run import RUN, environment, statuses_after

TIMEOUT = 60  # seconds; a program that never ends fails the test

CORE = textwrap.dedent(SHAPES["shapes/core.py"])

needs_startup_file = pytest.mark.skipif(
    not startup_hook_installed(),
    reason="coheriq is not installed here (imported from a source tree): no start-up .pth file",
)


def run(where: Path, *command: str, env: dict[str, str] | None = None, **kw: Any):
    """``python *command`` in ``where``, with ``where`` and coheriq importable; a hang fails."""
    environment_ = environment(where)
    environment_.update(env or {})
    try:
        return subprocess.run(
            [sys.executable, *command],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            env=environment_,
            cwd=where,
            **kw,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the program hung (no answer in {TIMEOUT} s)")


def same(a: subprocess.CompletedProcess[str], b: subprocess.CompletedProcess[str]) -> None:
    assert (b.returncode, b.stdout, b.stderr) == (a.returncode, a.stdout, a.stderr)


def write(where: Path, name: str, text: str) -> str:
    (where / name).parent.mkdir(parents=True, exist_ok=True)
    (where / name).write_text(textwrap.dedent(text))
    return name


# -- 1. python -m coheriq run: exactly python --------------------------------------------------

# Prints, from the program, a re-exec'd copy of it, a forked child and a child process,
# what shapes.area gives (the telling engine answers -side) and the variables they see.
FORKS_AND_REEXECS = """
    import os, subprocess, sys
    import shapes

    def say(who):
        print(who, shapes.area(shapes.Shape(3)), os.environ.get("SHAPES_ENGINE"), flush=True)

    say("program" if len(sys.argv) < 3 else "re-exec'd")
    if len(sys.argv) < 3:
        os.execv(sys.executable, [sys.executable, *sys.argv, "again"])
    pid = os.fork()
    if pid == 0:
        say("forked")
        os._exit(0)
    os.waitpid(pid, 0)
    code = "import shapes; print('child process', shapes.area(shapes.Shape(3)), flush=True)"
    subprocess.run([sys.executable, "-c", code], check=True)
    """


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
@pytest.mark.slow
def test_the_runner_s_program_forks_re_execs_and_starts_children_all_accelerated(tmp_path):
    where = telling(tmp_path)
    program = write(where, "dir with spaces/my program.py", FORKS_AND_REEXECS)
    done = run(where, *RUN[:-1], "shapes:fast", program, "x")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "program -3 fast",
        "re-exec'd -3 fast",
        "forked -3 fast",
        "child process -3",
    ]


SHOWS_ARGV = "import sys; print(sys.argv, sys.flags.dev_mode, sys.warnoptions)"


@pytest.mark.parametrize(
    "program",
    [
        ["-c", SHOWS_ARGV, "--engine", "x", "-m", "y"],
        ["-m", "shows", "--json", "-c", "--engine=shapes"],
        ["shows.py", "-h", "--version"],
        ["-X", "dev", "-W", "error", "-c", SHOWS_ARGV, "-c"],
        ["-", "from stdin"],
    ],
)
def test_words_that_look_like_options_reach_the_program_as_under_python(tmp_path, program):
    where = telling(tmp_path)
    write(where, "shows.py", SHOWS_ARGV)
    stdin = SHOWS_ARGV if program[0] == "-" else ""
    plain = run(where, *program, input=stdin)
    assert plain.returncode == 0, plain.stderr
    same(plain, run(where, *RUN, *program, input=stdin))


@pytest.mark.parametrize(
    "program",
    [
        ["-c", "print(input())"],  # reads its standard input
        ["-c", "import sys; sys.exit(42)"],
        ["-c", "import sys; sys.exit('the message')"],
        ["-c", "raise SystemExit(300)"],  # exit status 300 & 255
        ["-Q", "-c", "pass"],  # an option python does not have
        ["no such script.py"],
    ],
)
def test_stdin_exit_statuses_and_messages_are_python_s(tmp_path, program):
    where = telling(tmp_path)
    plain = run(where, *program, input="hi\n")
    same(plain, run(where, *RUN, *program, input="hi\n"))


def test_interpreter_options_written_joined_reach_the_program(tmp_path):
    where = telling(tmp_path)
    shows = "import sys; print(sys.flags.dev_mode, sys.flags.bytes_warning, sys.warnoptions)"
    plain = run(where, "-Xdev", "-bb", "-Werror", "-c", shows)
    runner = run(where, "-Xdev", "-bb", "-Werror", "-mcoheriq", *RUN[2:], "-c", shows)
    assert plain.stdout.startswith("True 2 ['default', 'error'")
    same(plain, runner)


@pytest.mark.skipif(sys.platform == "win32", reason="no signals to die by on Windows")
def test_sigterm_kills_the_program_as_under_python(tmp_path):
    where = telling(tmp_path)
    write(where, "sleeper.py", "import time, shapes\nprint('ready', flush=True)\ntime.sleep(60)\n")
    assert statuses_after(where, "sleeper.py", signal.SIGTERM) == [-signal.SIGTERM] * 2


@needs_startup_file
def test_a_start_up_message_is_said_once_under_the_runner_as_under_python(tmp_path):
    where = telling(tmp_path)
    said = {"COHERIQ_ACCELERATE": "nosuchlib"}
    plain = run(where, "-c", "print('ran')", env=said)
    assert plain.stderr.count("nosuchlib") >= 1
    same(plain, run(where, *RUN, "-c", "print('ran')", env=said))


# -- 2. a declared module run from source, with its marking calls -----------------------------

# Compared under python and accelerated with no engine chosen: what its own tools see.
FUTURE_AND_DOCSTRING = '''
    """The core of shapes."""
    from __future__ import annotations

    import dataclasses
    import typing

    __all__ = ["area", "total_area"]
    __all__ += ["Shape", "Square"]

    if typing.TYPE_CHECKING:
        def area(shape: Shape) -> int: ...
    else:
        def area(shape: Shape) -> int:
            """The area."""
            return shape.side * shape.side

    def total_area(shapes: list[Shape]) -> int:
        return sum(area(s) for s in shapes)

    @dataclasses.dataclass
    class Shape:
        side: int
        kind: typing.ClassVar[str] = "shape"

    class Square(Shape):
        pass
    '''

SEES_ITSELF = """
    import inspect, linecache, os, sys, typing
    import coheriq
    if os.environ.get("HOSTILE"):
        coheriq.accelerate("shapes")
    import shapes.core as core
    print(core.__doc__, core.__all__)
    print(typing.get_type_hints(core.area), inspect.signature(core.area, eval_str=True))
    print(typing.get_type_hints(core.Shape), core.Shape(2), core.area(core.Shape(3)))
    print(inspect.getsource(core) == core.__loader__.get_source("shapes.core"))
    print(len(linecache.getlines(core.__file__)), type(core.__loader__).__name__)
    print(inspect.getsource(core.area).splitlines()[0], inspect.getsourcelines(core.Shape)[1])
    """


def test_a_declared_module_s_future_import_docstring_and_own_source_are_as_unmarked(tmp_path):
    where = telling(tmp_path, {"shapes/core.py": FUTURE_AND_DOCSTRING})
    plain = ok(python(where, SEES_ITSELF))
    assert "The core of shapes. ['area', 'total_area', 'Shape', 'Square']" in plain
    assert ok(python(where, SEES_ITSELF, env=ACCELERATED)) == plain


# Ways a module's body binds a declared name (to a function under another name) before an
# alias of it: with the engine chosen, the name and the alias run the engine (both are the
# candidate), as with a decorator; with no engine, the module behaves as unmarked.
BINDINGS = {
    "for": "for area in (_first, _area):\n    pass\n",
    "with": "import contextlib\nwith contextlib.nullcontext(_area) as area:\n    pass\n",
    "match": "match [_area]:\n    case [area]:\n        pass\n",
    "del": "area = _first\ndel area\ndef area(shape):\n    return shape.side * shape.side\n",
    "type-checking": (
        "import typing\nif typing.TYPE_CHECKING:\n    def area(shape): ...\n"
        "else:\n    area = _area\n"
    ),
    "global": "def _bind():\n    global area\n    area = _area\n_bind()\n",
}

BOUND = """
    import os, coheriq
    if os.environ.get("HOSTILE"):
        coheriq.accelerate("shapes", "fast")
    import shapes.core as c
    s = c.Shape(3)
    print(c.area(s), c.ALIAS(s), c.ALIAS is c.area, c.total_area([s]))
    """


def bound_by(binding: str) -> str:
    """``shapes.core`` whose ``area`` is bound by ``binding``, then aliased."""
    defined = CORE.replace("def area(shape):", "def _area(shape):").replace("ALIAS = area", "")
    return defined + "\ndef _first(shape):\n    return 'first'\n\n" + binding + "ALIAS = area\n"


@pytest.mark.parametrize("binding", [b for b in BINDINGS if b != "global"])
def test_a_declared_name_bound_by_for_with_match_or_def_after_del_is_marked_where_bound(
    tmp_path, binding
):
    where = telling(tmp_path, {"shapes/core.py": bound_by(BINDINGS[binding])})
    assert ok(python(where, BOUND)).split() == ["9", "9", "True", "9"]
    assert ok(python(where, BOUND, env=ACCELERATED)).split() == ["-3", "-3", "True", "-3"]


def test_a_declared_name_a_function_binds_through_global_is_marked_when_the_body_ends(tmp_path):
    # Documented: bound another way, it is marked when the body has run; an alias made
    # in between holds the library's function (and runs it on every engine).
    where = telling(tmp_path, {"shapes/core.py": bound_by(BINDINGS["global"])})
    assert ok(python(where, BOUND)).split() == ["9", "9", "True", "9"]
    assert ok(python(where, BOUND, env=ACCELERATED)).split() == ["-3", "9", "False", "-3"]


SAME_AGAIN = CORE.replace("def area(shape):", "def _area(shape):").replace(
    "ALIAS = area", "area = _area\nALIAS = area\narea = _area  # bound again, to the same\n"
)


def test_an_alias_stays_the_candidate_when_its_name_is_bound_again_to_the_same_function(
    tmp_path,
):
    where = telling(tmp_path, {"shapes/core.py": SAME_AGAIN})
    assert ok(python(where, BOUND)).split() == ["9", "9", "True", "9"]
    assert ok(python(where, BOUND, env=ACCELERATED)).split() == ["-3", "-3", "True", "-3"]


WALRUS = CORE.replace("def area(shape):", "def _area(shape):").replace(
    "ALIAS = area", "if (area := _area):\n    pass\nALIAS = area\n"
)


def test_a_declared_name_bound_by_a_walrus_in_an_if_test_is_marked_before_its_alias(tmp_path):
    where = telling(tmp_path, {"shapes/core.py": WALRUS})
    program = """
        import os, coheriq
        if os.environ.get("HOSTILE"):
            coheriq.accelerate("shapes", "fast")
        import shapes.core as c
        print(c.area(c.Shape(3)), c.ALIAS(c.Shape(3)), c.ALIAS is c.area)
        """
    assert ok(python(where, program)).split() == ["9", "9", "True"]
    assert ok(python(where, program, env=ACCELERATED)).split() == ["-3", "-3", "True"]


def test_a_tracer_sees_a_declared_module_s_lines_as_unmarked(tmp_path):
    ends_with_if = CORE + "\nif Shape:\n    DONE = True\nelse:\n    DONE = False\n"
    where = telling(tmp_path, {"shapes/core.py": ends_with_if})
    plain = ok(python(where, TRACED))
    assert plain.count(",") > 5
    assert ok(python(where, TRACED, env=ACCELERATED)) == plain


def test_a_tracer_sees_a_declared_module_s_lines_as_unmarked_where_it_ends_simply(tmp_path):
    where = telling(tmp_path, {"shapes/core.py": "'''Doc.'''\n" + CORE})
    plain = ok(python(where, TRACED))
    assert ok(python(where, TRACED, env=ACCELERATED)) == plain


RAISES_INSIDE = CORE.replace(
    "return shape.side * shape.side",
    "if shape.side < 0:\n        raise ValueError('negative')\n    return shape.side * shape.side",
)


def test_a_traceback_from_a_declared_function_names_the_file_s_lines(tmp_path):
    where = telling(tmp_path, {"shapes/core.py": RAISES_INSIDE})
    program = """
        import os, traceback, coheriq
        if os.environ.get("HOSTILE"):
            coheriq.accelerate("shapes")
        import shapes.core as c
        try:
            c.total_area([c.Shape(-1)])
        except ValueError as error:
            print([(f.name, f.lineno, f.line) for f in traceback.extract_tb(error.__traceback__)
                   if f.filename.endswith("core.py")])
        """
    plain = eval(ok(python(where, program)))
    assert plain[-1] == ("area", 5, "raise ValueError('negative')")
    accelerated = eval(ok(python(where, program, env=ACCELERATED)))
    # Each of python's frames, at its line; a wrapper proxy (COHERIQ_SWAP_CODE=0) adds a
    # frame of its own per call, at the candidate's def line.
    rest = iter(accelerated)
    assert all(frame in rest for frame in plain), accelerated
    assert accelerated[-1] == plain[-1]


def test_a_declared_module_left_as_a_pyc_without_its_source_runs_the_engine(tmp_path):
    program = """
        import os, py_compile, coheriq
        if os.path.exists("shapes/core.py"):
            py_compile.compile("shapes/core.py", cfile="shapes/core.pyc", doraise=True)
            os.remove("shapes/core.py")
        if os.environ.get("HOSTILE"):
            coheriq.accelerate("shapes", "fast")
        import shapes.core as c
        print(type(c.__loader__).__name__, c.area(c.Shape(3)), c.total_area([c.Shape(2)]))
        """
    plain = python(telling(tmp_path / "plain"), program)
    assert ok(plain).split() == ["SourcelessFileLoader", "9", "4"]
    assert ok(python(telling(tmp_path / "accelerated"), program, env=ACCELERATED)).split() == [
        "SourcelessFileLoader",
        "-3",
        "-2",
    ]


def test_reloading_a_declared_module_after_its_source_changed_runs_the_new_source(tmp_path):
    # Each run changes its library's source: each gets a library of its own.
    program = """
        import importlib, os, time, coheriq
        if os.environ.get("HOSTILE"):
            coheriq.accelerate("shapes")
        import shapes.core as c
        old = c.Shape(2)
        with open(c.__file__) as file:
            source = file.read()
        with open(c.__file__, "w") as file:
            file.write(source.replace("self.side = side", "self.side = side * 10")
                       .replace("return shape.side * shape.side", "return shape.side + 1000"))
        later = time.time() + 5
        os.utime(c.__file__, (later, later))
        c = importlib.reload(c)
        print(c.Shape(2).side, c.area(c.Shape(2)), c.Square(1).side, c.area(old))
        """
    plain = ok(python(telling(tmp_path / "plain"), program))
    assert plain.split() == ["20", "1020", "10", "1002"]
    assert ok(python(telling(tmp_path / "accelerated"), program, env=ACCELERATED)) == plain


FOUR_THREADS = """
    import os, threading, importlib, coheriq
    coheriq.accelerate("shapes", "fast")
    barrier, found = threading.Barrier(4), []

    def work(name):
        barrier.wait()
        module = importlib.import_module(name)
        found.append(module.smooth([2]) if name == "shapes.heavy" else module.area(
            module.Shape(3)))

    names = ["shapes.heavy", "shapes.core", "shapes.heavy", "shapes.core"]
    threads = [threading.Thread(target=work, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    print(sorted(map(str, found)))
    """


# A package whose __init__ leaves its submodules to be imported: CPython's own import
# locks (a submodule's taken before its parent is imported) make threads importing a
# package and a submodule that its __init__ imports raise _DeadlockError at random, with
# no coheriq in the process (a third of the runs on a free-threaded 3.13).
LAZY_PACKAGE = {"shapes/__init__.py": '"""Shapes, each submodule imported where it is needed."""'}


def test_four_threads_importing_declared_modules_at_once_all_run_the_engine(tmp_path):
    out = ok(python(telling(tmp_path, LAZY_PACKAGE), FOUR_THREADS))
    assert out.strip() == "['-3', '-3', \"['fast']\", \"['fast']\"]"


# -- 3. COHERIQ_ACCELERATE at start-up -------------------------------------------------------


def broken_distributions(where: Path) -> None:
    """Three broken distributions beside the library: entry points that are not UTF-8 (and
    advertise an engine of shapes), an entry_points.txt that is a directory, a dist-info
    that is a file."""
    bad = where / "bad_bytes-1.0.dist-info"
    bad.mkdir()
    (bad / "METADATA").write_text("Metadata-Version: 2.1\nName: bad_bytes\nVersion: 1.0\n")
    (bad / "entry_points.txt").write_bytes(
        b"[console_scripts]\nx = y\xff\xfe\n[coheriq.engines.shapes]\nbad = \xff\n"
    )
    folder = where / "folder-1.0.dist-info"
    (folder / "entry_points.txt").mkdir(parents=True)
    (folder / "METADATA").write_text("Metadata-Version: 2.1\nName: folder\nVersion: 1.0\n")
    (where / "file-1.0.dist-info").write_text("not a directory")


@needs_startup_file
def test_broken_distributions_on_the_path_do_not_stop_the_acceleration(tmp_path):
    where = telling(tmp_path)
    broken_distributions(where)
    program = "import shapes, coheriq; print(shapes.area(shapes.Shape(3)))"
    assert ok(python(where, program)).strip() == "9"
    done = python(where, program, env={"COHERIQ_ACCELERATE": "shapes:fast"})
    assert (ok(done).strip(), done.stderr) == ("-3", "")


@needs_startup_file
@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_process_forked_before_the_library_is_imported_accelerates_it_too(tmp_path):
    program = """
        import os, sys
        pid = os.fork()
        import shapes, coheriq
        said = f"{shapes.area(shapes.Shape(3))} {coheriq.explain(shapes.area).engine}"
        if pid == 0:
            print("child", said, flush=True)
            os._exit(0)
        os.waitpid(pid, 0)
        print("parent", said, flush=True)
        """
    done = python(telling(tmp_path), program, env={"COHERIQ_ACCELERATE": "shapes:fast"})
    assert ok(done).splitlines() == ["child -3 fast", "parent -3 fast"]


@needs_startup_file
def test_a_library_first_imported_in_a_thread_while_coheriq_is_imported_runs_the_engine(
    tmp_path,
):
    program = """
        import sys, threading
        found = {}

        def work():
            import shapes
            found["area"] = shapes.area(shapes.Shape(3))

        thread = threading.Thread(target=work)
        thread.start()
        import coheriq, json, fractions  # at the same time as the thread accelerates
        thread.join(30)
        print(found, thread.is_alive(), coheriq.explain(sys.modules["shapes"].area).engine)
        """
    where = telling(tmp_path)
    for _ in range(3):
        done = python(where, program, env={"COHERIQ_ACCELERATE": "shapes:fast"})
        assert ok(done).strip() == "{'area': -3} False fast"


def test_coheriq_accelerate_under_python_s_accelerates_or_says_why_not(tmp_path):
    program = """
        import coheriq, shapes
        print(shapes.area(shapes.Shape(3)))
        """
    done = python(telling(tmp_path), program, "-S", env={"COHERIQ_ACCELERATE": "shapes:fast"})
    assert done.returncode == 0, done.stderr
    # Accelerated as coheriq is imported, as a late coheriq.accelerate would.
    assert (done.stdout.strip(), done.stderr) == ("-3", "")


# -- 4. declines and verification ---------------------------------------------------------------

DECLINING_LIBRARY = """
    import coheriq

    domain = coheriq.AccelerationDomain("declining")

    @domain.acceleration_candidate
    def first(x):
        return ("reference", x)

    @domain.acceleration_candidate
    class Box:
        def __init__(self, v):
            self.v = v

    @domain.acceleration_candidate
    def make(v):
        return Box(v).v

    domain.materialize()

    class Fast(coheriq.engine_class("declining"), name="fast"):
        def __init__(self):
            self.kernel = {"scale": 10}

        @coheriq.may_decline(when=lambda self, x: "negative" if x < 0 else None)
        def first(self, x):
            return ("fast", x * self.kernel["scale"])

        @coheriq.may_decline
        class Box:
            def __init__(self, v):
                if v < 0:
                    raise coheriq.Decline("a negative box")
                self.v = v * 10

        def make(self, v):
            return self.Box(v).v  # the engine's own class, reached through self
    """

POOLED = """
    import concurrent.futures as cf, multiprocessing as mp, pickle, sys
    import declining

    def call(method, x):
        return method(x)

    if __name__ == "__main__":
        engine = declining.Fast()
        for method in ("fork", "spawn"):
            if method not in mp.get_all_start_methods():
                continue
            context = mp.get_context(method)
            with cf.ProcessPoolExecutor(1, mp_context=context) as pool:
                answers = [pool.submit(call, engine.first, x).result(timeout=60) for x in (3, -3)]
                copy = pool.submit(pickle.loads, pickle.dumps(engine)).result(timeout=60)
                print(method, answers, copy.first(-1), copy.kernel)
    """


def test_an_engine_whose_methods_may_decline_goes_to_a_process_pool(tmp_path):
    write(tmp_path, "declining.py", DECLINING_LIBRARY)
    write(tmp_path, "pooled.py", POOLED)
    out = ok(python(tmp_path, "", "pooled.py"))
    for line in out.splitlines():
        assert line.split(" ", 1)[1] == (
            "[('fast', 30), ('reference', -3)] ('reference', -1) {'scale': 10}"
        )
    assert out.count("\n") >= 1


BOX_THROUGH_SELF = """
    import coheriq, declining
    with coheriq.using_engine("declining", "fast"):
        print(declining.Box(-3).v, declining.make(2))
        try:
            print(declining.make(-3))
        except Exception as error:
            print(type(error).__name__, error)
    """


def test_a_declining_class_reached_through_self_goes_on_to_the_reference(tmp_path):
    write(tmp_path, "declining.py", DECLINING_LIBRARY)
    out = ok(python(tmp_path, BOX_THROUGH_SELF))
    assert out.splitlines() == ["-3 20", "-3"]


CHECK_RAISES = """
    import coheriq

    domain = coheriq.AccelerationDomain("checked")

    @domain.acceleration_candidate
    def first(x):
        return ("reference", x)

    domain.materialize()

    def broken_check(self, x):
        raise ZeroDivisionError("the check broke")

    class Fast(coheriq.engine_class("checked"), name="fast"):
        @coheriq.may_decline(when=broken_check)
        def first(self, x):
            return ("fast", x)

    with coheriq.using_engine("checked", "fast"):
        for ask in (lambda: first(1), lambda: coheriq.explain(first, 1)):
            try:
                print(ask())
            except ZeroDivisionError as error:
                print("raised:", error)
    """


def test_a_check_that_raises_reaches_the_caller_instead_of_running_the_reference(tmp_path):
    out = ok(python(tmp_path, CHECK_RAISES))
    assert out.splitlines() == ["raised: the check broke", "raised: the check broke"]


VERIFIED_ITERATORS = """
    import itertools, sys, warnings
    import coheriq

    domain = coheriq.AccelerationDomain("iterated")

    @domain.acceleration_candidate
    def first(xs):
        return next(iter(xs))

    @domain.acceleration_candidate
    def total(xs):
        return sum(xs)

    domain.materialize()

    class Fast(coheriq.engine_class("iterated"), name="fast"):
        def first(self, xs):
            return next(iter(xs))

        def total(self, xs):
            return sum(xs)

    def numbers():
        yield from (1, 2, 3)

    warnings.simplefilter("error")  # a false mismatch fails the program
    for make in (numbers, lambda: iter([1, 2, 3]), lambda: map(int, "123")):
        with coheriq.verify("iterated", "fast") as verification:
            given = make()
            print(first(given), list(given), total(make()), verification.ok)
    huge = (itertools.count, lambda: iter(range(10**15)), lambda: itertools.repeat(1))
    for make in huge:  # never listed: each would hang or exhaust memory
        with coheriq.verify("iterated", "fast") as verification:
            given = make()
            print(first(given), next(given), verification.ok)
    """


def test_verified_calls_never_read_an_iterator_argument_twice_nor_list_a_huge_one(tmp_path):
    out = ok(python(tmp_path, VERIFIED_ITERATORS))
    assert out.splitlines() == ["1 [2, 3] 6 True"] * 3 + ["0 1 True", "0 1 True", "1 1 True"]


SHARED_SOURCE = """
    import collections
    import coheriq

    domain = coheriq.AccelerationDomain("fed")

    @domain.acceleration_candidate
    def first(xs):
        return next(iter(xs))

    domain.materialize()

    class Fast(coheriq.engine_class("fed"), name="fast"):
        def first(self, xs):
            return next(iter(xs))

    queue = collections.deque([1, 2, 3, 4])

    def take():
        return queue.popleft() if queue else None

    given = iter(take, None)  # an iterator fed by a function: iter(file.readline, "")
    with coheriq.verify("fed", "fast", on_mismatch="record") as verification:
        answer = first(given)
    print(answer, list(given), verification.ok)
    """


def test_verifying_a_call_given_a_function_fed_iterator_leaves_the_program_s_items(tmp_path):
    out = ok(python(tmp_path, SHARED_SOURCE))
    assert out.split(None, 1)[0] == "1"
    assert out.strip() == "1 [2, 3, 4] True"
