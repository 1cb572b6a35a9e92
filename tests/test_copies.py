"""A library's module that runs again: reload, fresh imports, a second module object.

Each run makes a new copy of the library's domain. Every copy's
candidates keep running; they follow the program's engine choice, or warn once
and say why they cannot.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import warnings

import pytest

import coheriq as cq
from coheriq._library.domain import lookup_domain
from conftest import classes_are_freed

LIBRARY = """
import coheriq

domain = coheriq.AccelerationDomain(__name__, env_prefix={prefix!r})


@domain.acceleration_candidate
def which():
    return "reference"


@domain.acceleration_candidate
class Box:
    def __init__(self, x):
        self.x = x


domain.materialize()
"""

ENGINE = """
import coheriq


class Fast(coheriq.engine_class({lib!r}), name="fast"):
    def which(self):
        return "fast"

    class Box(coheriq.engine_class({lib!r}).Box):
        pass
"""


@pytest.fixture
def library(tmp_path, unique, monkeypatch, make_dist):
    """A library module with an engine "fast" advertised by an entry point."""
    name = unique("copied")
    monkeypatch.delenv(f"{name.upper()}_ENGINE", raising=False)
    (tmp_path / f"{name}.py").write_text(LIBRARY.format(prefix=name.upper()))
    monkeypatch.syspath_prepend(str(tmp_path))
    make_dist(
        f"{name}-fast",
        {f"{name}_fast": ENGINE.format(lib=name)},
        {f"coheriq.engines.{name}": {"fast": f"{name}_fast"}},
    )
    module = importlib.import_module(name)
    yield module
    for copy in (name, f"{name}_fast"):
        sys.modules.pop(copy, None)


def fresh_copy(module):
    """A second module object from the same file, as test.support's import_fresh_module."""
    spec = importlib.util.spec_from_file_location(module.__name__, module.__file__)
    copy = importlib.util.module_from_spec(spec)
    saved = sys.modules[module.__name__]
    sys.modules[module.__name__] = copy
    try:
        spec.loader.exec_module(copy)
    finally:
        sys.modules[module.__name__] = saved
    return copy


def test_reload_makes_a_new_copy_and_the_old_one_keeps_working(library):
    old_which, OldBox = library.which, library.Box
    assert old_which() == "reference"
    reloaded = importlib.reload(library)
    assert reloaded is library and library.which is not old_which
    assert library.which() == "reference" and old_which() == "reference"
    assert type(library.Box(1)) is library.Box and type(OldBox(1)) is OldBox
    assert lookup_domain(library.__name__) is library.domain  # the name means the new copy
    assert cq.available_engines(library.__name__) == ("fast",)


def test_a_new_copy_follows_the_engine_chosen_before(library):
    cq.enable_engine(library.__name__, "fast")
    old_which = library.which
    importlib.reload(library)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # following the choice is silent
        assert library.which() == "fast" and old_which() == "fast"
        box = library.Box(1)
    assert isinstance(box, library.Box) and cq.engine_of(box) == "fast"
    assert cq.active_implementation(library.__name__) == "fast"
    cq.enable_engine(library.__name__, "fast")  # the same engine again: no-op
    with pytest.raises(cq.CoheriqEngineSettledError, match="already runs on engine 'fast'"):
        cq.enable_engine(library.__name__, cq.REFERENCE)


def test_a_fresh_module_object_follows_the_environment_variable(library, monkeypatch):
    monkeypatch.setenv(f"{library.__name__.upper()}_ENGINE", "fast")
    copy = fresh_copy(library)
    assert copy is not library and copy.domain is not library.domain
    assert copy.which() == "fast" and library.which() == "fast"
    assert lookup_domain(library.__name__) is library.domain  # the copy in sys.modules


def test_a_copy_that_cannot_run_the_chosen_engine_warns_once(library, tmp_path):
    class Inline(cq.engine_class(library.__name__), name="inline"):
        def which(self):
            return "inline"

    cq.enable_engine(library.__name__, "inline")
    importlib.reload(library)  # code that defined "inline" ran for the old copy only
    with pytest.warns(cq.CoheriqReloadWarning, match="cannot run engine 'inline'") as caught:
        assert library.which() == "reference"
    assert "ran again" in str(caught[0].message) and caught[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert library.which() == "reference"  # said once
    assert "not available to this copy" in cq.explain(library.domain).reason


def test_a_scope_covers_every_copy(library):
    old_which = library.which
    importlib.reload(library)
    with cq.using_engine(library.__name__, "fast"):
        assert library.which() == "fast" and old_which() == "fast"
    assert library.which() == "reference" and old_which() == "reference"


def test_a_module_that_creates_its_domain_twice_in_one_run_is_refused(unique):
    name = unique()
    cq.AccelerationDomain(name)
    with pytest.raises(cq.CoheriqDomainError, match="not materialized yet"):
        cq.AccelerationDomain(name)


def test_an_import_that_failed_can_be_retried(tmp_path, unique, monkeypatch):
    name = unique("flaky")
    broken = LIBRARY.format(prefix=name.upper()).replace(
        "domain.materialize()", "raise ImportError('a dependency is missing')"
    )
    (tmp_path / f"{name}.py").write_text(broken)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ImportError, match="dependency"):
        importlib.import_module(name)
    (tmp_path / f"{name}.py").write_text(LIBRARY.format(prefix=name.upper()))
    importlib.invalidate_caches()
    fixed = importlib.import_module(name)
    assert fixed.which() == "reference"
    sys.modules.pop(name, None)


def test_ipythons_autoreload_brings_names_imported_earlier_to_the_new_code(library, tmp_path):
    autoreload = pytest.importorskip("IPython.extensions.autoreload")
    which, Box = library.which, library.Box  # as `from library import which, Box` would
    boxed = Box(1)
    source = tmp_path / f"{library.__name__}.py"
    source.write_text(
        source.read_text()
        .replace('return "reference"', 'return "edited"')
        .replace("self.x = x", "self.x = 2 * x")
    )
    importlib.invalidate_caches()
    autoreload.superreload(library)  # what %autoreload does after an edit
    assert library.which() == "edited"
    assert which() == "edited"  # its code was swapped in place: it reaches the new copy
    assert Box(3).x == 6 and boxed.x == 1
    with cq.using_engine(library.__name__, "fast"):  # and the engine choice still applies
        assert which() == "fast" and library.which() == "fast"


def test_a_copy_that_cannot_run_a_scopes_engine_warns_once_and_keeps_its_own(library):
    old_which = library.which
    importlib.reload(library)

    class Late(cq.engine_class(library.__name__), name="late"):  # for the new copy only
        def which(self):
            return "late"

    with pytest.warns(cq.CoheriqReloadWarning, match="cannot run engine 'late' in a using_engine"):
        with cq.using_engine(library.__name__, "late"):
            assert library.which() == "late" and old_which() == "reference"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once
        with cq.using_engine(library.__name__, "late"):
            assert old_which() == "reference"


def test_a_reload_that_failed_can_be_retried_once_fixed(library, tmp_path):
    source = tmp_path / f"{library.__name__}.py"
    good = source.read_text()
    source.write_text(good.replace("domain.materialize()", "raise SyntaxError('a typo')"))
    importlib.invalidate_caches()
    with pytest.raises(SyntaxError, match="typo"):
        importlib.reload(library)  # fails between AccelerationDomain(...) and materialize()
    source.write_text(good.replace('return "reference"', 'return "fixed"'))
    importlib.invalidate_caches()
    assert importlib.reload(library).which() == "fixed"


def test_a_copy_made_inside_a_block_is_covered_by_it(library):
    with cq.using_engine(library.__name__, "fast"):
        copy = fresh_copy(library)  # as a test suite importing a fresh module would
        assert copy.which() == "fast" and library.which() == "fast"
    assert copy.which() == "reference" and library.which() == "reference"


def test_each_copy_that_cannot_follow_warns(library):
    class Inline(cq.engine_class(library.__name__), name="inline"):
        def which(self):
            return "inline"

    cq.enable_engine(library.__name__, "inline")
    for _ in range(2):
        importlib.reload(library)
        with pytest.warns(cq.CoheriqReloadWarning, match="cannot run engine 'inline'"):
            assert library.which() == "reference"


# -- a second domain of a taken name, made by a function, is refused -----------------------


def test_a_helper_function_making_a_taken_domain_is_refused_not_copied(unique):
    with cq.testing.isolated():
        name = unique()
        source = (
            "import coheriq\n"
            "def make(name):\n"
            "    return coheriq.AccelerationDomain(name)\n"
            "first = make(" + repr(name) + ")\n"
            "first.materialize()\n"
        )
        namespace = {"__name__": "helper_module"}
        exec(compile(source, "helper_module.py", "exec"), namespace)
        with pytest.raises(cq.CoheriqDomainError, match="exists already"):
            namespace["make"](name)  # after the import: not a re-run of the module
        assert cq.explain(name).domain == name
        assert namespace["first"].materialized


# -- a copy nobody refers to is freed ------------------------------------------------------


RELOADED = """
import coheriq

domain = coheriq.AccelerationDomain("reloaded")


@domain.acceleration_candidate
def f(x):
    return x


@domain.acceleration_candidate
class A:
    def __init__(self, x):
        self.x = x


@domain.acceleration_candidate
class B:
    pass


domain.materialize()


class Fast(coheriq.engine_class(domain), name="fast"):
    def f(self, x):
        return -x
"""


def test_a_copy_nobody_refers_to_is_freed_and_one_still_held_works(write_module):
    import gc
    import importlib
    import weakref

    write_module("reloaded", RELOADED)
    with cq.testing.isolated():
        import reloaded

        first_f, FirstA, FirstB = reloaded.f, reloaded.A, reloaded.B  # held: must work on
        with cq.using_engine("reloaded", "fast"):
            assert first_f(1) == -1
        importlib.reload(reloaded)
        dropped = weakref.ref(reloaded.domain)
        with cq.using_engine("reloaded", "fast"):
            reloaded.f(1), reloaded.A(1)
        for _ in range(3):
            importlib.reload(reloaded)
        gc.collect()
        if classes_are_freed():
            assert dropped() is None
        else:  # a free-threaded 3.13 keeps every class, and so the copy its classes hold
            assert dropped() is not reloaded.domain

        # The copy still held runs, follows blocks and the choice, and subclasses.
        with cq.using_engine("reloaded", "fast"):
            assert first_f(2) == -2
        assert first_f(2) == 2
        assert isinstance(FirstA(1), FirstA)

        class Mine(FirstA):
            pass

        class OldBoth(FirstA, FirstB):  # classes of one copy combine, as ever
            pass

        assert Mine(3).x == 3 and OldBoth(5).x == 5

        # The newest copy's classes combine as bases, as ever.
        class Both(reloaded.A, reloaded.B):
            pass

        assert isinstance(Both(4), reloaded.A)


def test_a_finalizer_calls_a_freed_copys_function(write_module):
    # The collector clears weak references before it runs the finalizers of the
    # same garbage: the copy's function must still run from a __del__.
    import gc
    import importlib

    write_module("finalized", RELOADED.replace('"reloaded"', '"finalized"'))
    ran = []

    class Buffer:
        def __init__(self, function):
            self.function = function
            self.me = self  # a cycle: freed by the collector

        def __del__(self):
            ran.append(self.function(7))

    with cq.testing.isolated():
        import finalized

        gc.collect()
        gc.disable()
        try:
            Buffer(finalized.f)
            importlib.reload(finalized)
            gc.collect()
        finally:
            gc.enable()
    assert ran == [7]


@pytest.mark.slow
def test_a_call_racing_a_reload_never_finds_an_empty_slot(write_module):
    import importlib
    import threading

    # Many candidates: a reload then takes long enough for the race to show.
    source = 'import coheriq\n\ndomain = coheriq.AccelerationDomain("racing")\n' + "".join(
        f"\n\n@domain.acceleration_candidate\ndef g{i}(x):\n    return x\n" for i in range(300)
    )
    source += "\n\ndomain.materialize()\n"
    write_module("racing", source)
    errors, current, stop = [], [], threading.Event()
    interval = sys.getswitchinterval()
    with cq.testing.isolated():
        import racing

        current.append(racing.g0)

        def caller():
            while not stop.is_set():
                try:
                    current[-1](1)
                except Exception as error:  # what a caller would see
                    errors.append(repr(error))

        thread = threading.Thread(target=caller)
        sys.setswitchinterval(1e-6)
        thread.start()
        try:
            for _ in range(5):
                current.append(racing.g0)
                racing.g0(1)
                importlib.reload(racing)
        finally:
            stop.set()
            thread.join(60)
            sys.setswitchinterval(interval)
    assert errors == []


# -- a block costs the same after many reloads ---------------------------------------------


def test_a_block_does_the_same_work_after_a_hundred_reloads(write_module):
    import importlib

    write_module("reloadedblocks", RELOADED.replace('"reloaded"', '"blocks"'))

    def calls_made_by_a_block(module):
        """How many Python calls entering and leaving a block makes (not timed: counted)."""
        with cq.using_engine("blocks", "fast"):  # the engine started, outside the count
            module.f(1)
        calls = 0

        def count(frame, event, arg):
            nonlocal calls
            calls += event == "call"

        sys.setprofile(count)
        try:
            with cq.using_engine("blocks", "fast"):
                pass
        finally:
            sys.setprofile(None)
        return calls

    with cq.testing.isolated():
        import reloadedblocks

        held = [reloadedblocks.f]  # older copies still in use, as after real reloads
        one_copy = calls_made_by_a_block(reloadedblocks)
        for _ in range(100):
            importlib.reload(reloadedblocks)
            held.append(reloadedblocks.f)
        assert calls_made_by_a_block(reloadedblocks) == one_copy
        with cq.using_engine("blocks", "fast"):
            assert [f(1) for f in held] == [-1] * 101
