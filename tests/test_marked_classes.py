"""A marked class is the library's class: what users do with classes keeps working.

Each test loads one small library, ``shapes``, twice from the same source: once
unmarked (as it was before adopting coheriq) and once marked (every class a
candidate), under the same module name, and compares what a user sees.
"""

from __future__ import annotations

import copy
import dataclasses
import doctest
import gc
import importlib.util
import inspect
import pickle
import pydoc
import subprocess
import sys
import typing

import pytest

import coheriq as cq
from conftest import classes_are_freed

SHAPES = '''
"""A small library of shapes, marked with coheriq when MARKED is true."""

import abc
import collections
import dataclasses
import typing

import coheriq

MARKED = {marked}
if MARKED:
    domain = coheriq.AccelerationDomain(__name__)
    mark = domain.acceleration_candidate
else:

    def mark(cls):
        return cls


T = typing.TypeVar("T")
registry = {{}}


class Registered:
    """Remembers every subclass by name."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        registry[cls.__name__] = cls


@mark
class Interval(Registered):
    """A closed interval of numbers."""

    __slots__ = {{"lo": "The lower end.", "hi": "The upper end."}}

    def __init__(self, lo, hi=None):
        self.lo, self.hi = lo, lo if hi is None else hi

    def __repr__(self):
        return f"Interval({{self.lo}}, {{self.hi}})"

    def __eq__(self, other):
        if not isinstance(other, Interval):
            return NotImplemented
        return (self.lo, self.hi) == (other.lo, other.hi)

    def __hash__(self):
        return hash((self.lo, self.hi))

    def __add__(self, other):
        return Interval(self.lo + other.lo, self.hi + other.hi)

    def __getstate__(self):
        return (self.lo, self.hi)

    def __setstate__(self, state):
        self.lo, self.hi = state

    @classmethod
    def point(cls, x):
        """The interval holding only ``x``."""
        return cls(x, x)

    def width(self):
        """The length of the interval.

        >>> Interval(1, 4).width()
        3
        """
        return super().__getattribute__("hi") - self.lo


Interval.EMPTY = Interval(0, 0)  # built at import, before materialize()


class Shape(abc.ABC):
    @abc.abstractmethod
    def area(self): ...


@mark
class Square(Shape):
    def __init__(self, side):
        self.side = side

    def area(self):
        return self.side**2

    def __eq__(self, other):
        return type(other) is type(self) and other.side == self.side


@mark
class Ratio(tuple):
    """Built in __new__, as immutable types are."""

    def __new__(cls, num, den=1):
        return super().__new__(cls, (num, den))

    def __getnewargs__(self):
        return tuple(self)


@mark
class Box(typing.Generic[T]):
    def __init__(self, item: T):
        self.item = item

    def __eq__(self, other):
        return isinstance(other, Box) and other.item == self.item


@mark
@dataclasses.dataclass(frozen=True)
class Point:
    x: float
    y: float = 0.0

    def moved(self, dx):
        return dataclasses.replace(self, x=self.x + dx)


@mark
class Pair:
    def __init__(self, a, b):
        self.a, self.b = a, b

    def __reduce__(self):
        return (Pair, (self.a, self.b))

    def __eq__(self, other):
        return isinstance(other, Pair) and (other.a, other.b) == (self.a, self.b)


@mark
class Counts(collections.OrderedDict):
    pass


if MARKED:
    domain.materialize()
'''

CLASSES = ["Interval", "Square", "Ratio", "Box", "Point", "Pair", "Counts"]


def signature(cls) -> str:
    try:
        return str(inspect.signature(cls))
    except ValueError as error:  # a class deriving from a C type may have none
        return f"ValueError: {error}"


def examples(m):
    """One object of each class of module ``m``."""
    return [
        m.Interval(1, 3),
        m.Square(2),
        m.Ratio(3, 4),
        m.Box("x"),
        m.Point(1.5),
        m.Pair(1, [2]),
        m.Counts(a=1, b=2),
    ]


@pytest.fixture
def shapes(tmp_path, unique, monkeypatch):
    """``load(marked)`` imports the library, unmarked or marked, as module ``name``."""
    name = unique("shapes")
    monkeypatch.syspath_prepend(str(tmp_path))

    def load(marked: bool):
        (tmp_path / f"{name}.py").write_text(SHAPES.format(marked=marked))
        importlib.invalidate_caches()
        sys.modules.pop(name, None)
        sys.modules.pop(f"{name}_fast", None)
        return importlib.import_module(name)

    load.name = name
    yield load
    sys.modules.pop(name, None)


def test_the_marked_class_is_the_class(shapes):
    plain = shapes(marked=False)
    plain_view = {
        name: (
            sorted(vars(getattr(plain, name))),
            dir(getattr(plain, name)),
            signature(getattr(plain, name)),
            inspect.getsource(getattr(plain, name)),
        )
        for name in CLASSES
    }
    marked = shapes(marked=True)
    for name in CLASSES:
        cls = getattr(marked, name)
        assert cq.resolve_impl(cls) is cls
        view = (sorted(vars(cls)), dir(cls), signature(cls), inspect.getsource(cls))
        assert view == plain_view[name], name
    for obj in examples(marked):
        assert type(obj) is getattr(marked, type(obj).__name__)
    interval = marked.Interval
    assert interval.__slots__ == {"lo": "The lower end.", "hi": "The upper end."}
    assert interval.__eq__(interval(1, 2), interval(1, 2)) is True
    assert interval.__hash__(interval(1, 2)) == hash((1, 2))
    assert interval.__repr__(interval(1, 2)) == "Interval(1, 2)"
    assert interval.__add__(interval(1, 2), interval(1, 1)) == interval(2, 3)
    state = interval(0, 0)
    interval.__setstate__(state, (5, 6))
    assert state == interval(5, 6)
    assert str(inspect.signature(interval.__init__)) == "(self, lo, hi=None)"
    assert interval.point(2) == interval(2, 2) and interval(1, 4).width() == 3
    assert marked.registry["Interval"] is interval  # the base's __init_subclass__ saw it
    gc.collect()  # the unmarked classes are gone: nothing of coheriq's keeps them
    if classes_are_freed():
        assert marked.Registered.__subclasses__() == [interval]
        assert marked.Shape.__subclasses__() == [marked.Square]
    else:  # a free-threaded 3.13 keeps every class: the unmarked ones stay, unmarked
        for base, cls in ((marked.Registered, interval), (marked.Shape, marked.Square)):
            subclasses = base.__subclasses__()
            assert subclasses[-1] is cls
            assert [c.__qualname__ for c in subclasses] == [cls.__qualname__] * len(subclasses)
            for unmarked in subclasses[:-1]:
                with pytest.raises(cq.CoheriqTypeError, match="is not a coheriq candidate"):
                    cq.resolve_impl(unmarked)


def test_help_reads_the_same_and_chooses_nothing(shapes):
    plain = {name: pydoc.render_doc(getattr(shapes(marked=False), name)) for name in CLASSES}
    marked = shapes(marked=True)
    for name in CLASSES:
        assert pydoc.render_doc(getattr(marked, name)) == plain[name], name
    inspect.getmembers(marked.Box)
    assert not cq.explain(shapes.name).settled
    cq.enable_engine(shapes.name, cq.REFERENCE)  # still free to choose


def test_user_code_subclasses_the_marked_class(shapes):
    m = shapes(marked=True)

    class Fast(cq.engine_class(m.domain), name="fast"):
        class Interval(m.Interval):
            pass

    class Closed(m.Interval):  # as a user of the library would
        def __init__(self, lo, hi, label):
            super().__init__(lo, hi)
            self.label = label

    class Tagged(m.Point):
        pass

    with cq.using_engine(m.domain, "fast"):
        closed = Closed(1, 2, "c")  # a subclass is never dispatched
        assert type(m.Interval(1, 2)) is Fast.Interval  # the marked class is
    assert type(closed) is Closed and closed.label == "c" and closed.width() == 1
    assert isinstance(closed, m.Interval) and not isinstance(m.Interval(1), Closed)
    assert type(Tagged(1)) is Tagged and Tagged(1) != m.Point(1)  # dataclass eq by class
    assert m.registry["Closed"] is Closed


def test_generic_abc_dataclass_new_and_mapping_classes(shapes):
    m = shapes(marked=True)
    assert m.Box[int](3) == m.Box(3) and type(m.Box[int](3)) is m.Box
    assert typing.get_args(m.Box[int]) == (int,)
    assert isinstance(m.Square(1), m.Shape) and issubclass(m.Square, m.Shape)
    with pytest.raises(TypeError):
        m.Shape()  # still abstract
    assert m.Ratio(3, 4) == (3, 4) and type(m.Ratio(1)) is m.Ratio
    assert m.Point(1).moved(2) == m.Point(3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.Point(1).x = 2
    assert [f.name for f in dataclasses.fields(m.Point)] == ["x", "y"]
    assert list(m.Counts(a=1, b=2)) == ["a", "b"]


def test_objects_built_before_materialize_are_the_librarys(shapes):
    m = shapes(marked=True)
    assert type(m.Interval.EMPTY) is m.Interval
    assert pickle.loads(pickle.dumps(m.Interval.EMPTY)) == m.Interval.EMPTY
    assert not cq.explain(shapes.name).settled  # building it chose nothing


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickles_interchange_with_the_unmarked_library(shapes, protocol):
    plain = shapes(marked=False)
    written_before = [pickle.dumps(obj, protocol) for obj in examples(plain)]
    marked = shapes(marked=True)
    written_after = [pickle.dumps(obj, protocol) for obj in examples(marked)]
    for data, expected in zip(written_before, examples(marked), strict=True):
        loaded = pickle.loads(data)  # an old pickle, read by the marked library
        assert type(loaded) is type(expected) and loaded == expected
    assert b"coheriq" not in b"".join(written_after)
    plain = shapes(marked=False)
    for data, expected in zip(written_after, examples(plain), strict=True):
        loaded = pickle.loads(data)  # a new pickle, read by the unmarked library
        assert type(loaded) is type(expected) and loaded == expected


def test_classes_pickle_by_reference_and_copies_stay_what_they_are(shapes):
    m = shapes(marked=True)

    class Fast(cq.engine_class(m.domain), name="fast"):
        class Interval(m.Interval):
            pass

        class Pair:
            def __init__(self, a, b):
                self.a, self.b = a, b

    for cls in (m.Interval, m.Point, m.Counts):
        assert pickle.loads(pickle.dumps(cls)) is cls
    reference_objects = examples(m)
    pair = m.Pair(1, 2)
    with cq.using_engine(m.domain, "fast"):  # copies are not constructions: not dispatched
        for obj in reference_objects:
            if isinstance(obj, m.Pair):
                continue  # its __reduce__ rebuilds it by calling the class (see below)
            assert type(copy.copy(obj)) is type(obj) and copy.deepcopy(obj) == obj
            assert type(pickle.loads(pickle.dumps(obj))) is type(obj)
        assert type(copy.deepcopy(m.Interval(1, 2))) is Fast.Interval
        # A __reduce__ that returns the class itself rebuilds by calling it.
        assert type(copy.copy(pair)) is Fast.Pair


ENGINE = """
import coheriq
import {lib}

class Fast(coheriq.engine_class({lib!r}), name="fast"):
    class Interval(coheriq.engine_class({lib!r}).Interval):
        pass
"""

LOAD = """
import pickle, sys
sys.path[:0] = {path!r}
try:
    print(type(pickle.loads(bytes.fromhex({data!r}))).__qualname__)
except Exception as error:
    print(type(error).__name__, error)
"""


def test_an_engines_object_pickles_as_the_engines_class(shapes, make_dist, tmp_path):
    m = shapes(marked=True)
    site = make_dist(
        f"{shapes.name}-fast",
        {f"{shapes.name}_fast": ENGINE.format(lib=shapes.name)},
        {f"coheriq.engines.{shapes.name}": {"fast": f"{shapes.name}_fast"}},
    )
    with cq.using_engine(m.domain, "fast"):
        data = pickle.dumps(m.Interval(1, 2)).hex()

    def load_elsewhere(path: str) -> str:
        code = LOAD.format(path=[path, str(tmp_path)], data=data)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        return done.stdout.strip() + done.stderr

    assert load_elsewhere(str(site)) == "Fast.Interval"  # imports the engine's module
    (site / f"{shapes.name}_fast.py").unlink()
    missing = load_elsewhere(str(site))
    assert missing == f"ModuleNotFoundError No module named '{shapes.name}_fast'", missing


def test_doctests_of_marked_classes_keep_their_names(shapes):
    plain = shapes(marked=False)
    plain_tests = sorted(t.name for t in doctest.DocTestFinder().find(plain))
    marked = shapes(marked=True)
    marked_tests = sorted(t.name for t in doctest.DocTestFinder().find(marked))
    assert marked_tests == plain_tests and f"{shapes.name}.Interval.width" in marked_tests
    runner = doctest.DocTestRunner()
    for test in doctest.DocTestFinder().find(marked):
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0


def refused(domain, target) -> str:
    before = dict(domain.candidate_kinds)
    with pytest.raises(cq.CoheriqTypeError) as error:
        domain.acceleration_candidate(target)
    assert dict(domain.candidate_kinds) == before  # nothing was marked
    return str(error.value)


def test_classes_that_cannot_be_marked_are_refused_with_the_reason(unique):
    import enum

    domain = cq.AccelerationDomain(unique())

    class Color(enum.Enum):
        RED = 1

    class Base:
        pass

    class Derived(Base):
        pass

    class Meta(type):
        pass

    class Keyed:
        def __init_subclass__(cls, *, flavour):
            cls.flavour = flavour

    class Flavoured(Keyed, flavour="sweet"):
        pass

    assert "Enum" in refused(domain, Color)
    assert "implemented in C" in refused(domain, dict)
    assert "subclasses already (" in refused(domain, Base)
    assert "metaclass" in refused(domain, Meta)
    assert "without the class statement's keywords" in refused(domain, Flavoured)

    @domain.acceleration_candidate  # and the domain goes on as before
    class Fine:
        pass

    domain.materialize()
    assert type(Fine()) is Fine


def test_a_metaclass_conflict_is_pythons_usual_one(unique):
    import abc

    domain = cq.AccelerationDomain(unique())

    @domain.acceleration_candidate
    class Plain:
        pass

    domain.materialize()

    class Combined(type(Plain), abc.ABCMeta):  # what the adoption guide recommends
        pass

    class Both(Plain, abc.ABC, metaclass=Combined):
        pass

    assert isinstance(Both(), Plain)


def test_more_class_shapes(unique):
    import functools
    import weakref

    domain = cq.AccelerationDomain(unique())

    class Singleton(type):  # a metaclass with a __call__ of its own
        made: typing.ClassVar[dict] = {}

        def __call__(cls, *args, **kwargs):
            if cls not in Singleton.made:
                Singleton.made[cls] = super().__call__(*args, **kwargs)
            return Singleton.made[cls]

    @domain.acceleration_candidate
    class Config(metaclass=Singleton):
        def __init__(self, level=1):
            self.level = level

    @domain.acceleration_candidate
    class Point(typing.NamedTuple):
        x: int
        y: int = 0

    @domain.acceleration_candidate
    @dataclasses.dataclass(slots=True, frozen=True)
    class Slot:
        a: int

        def double(self):
            return dataclasses.replace(self, a=2 * self.a)

    def logged(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return fn(*args, **kwargs)

        return wrapper

    class Base:
        __slots__ = ()

        def hello(self):
            return "base"

    @domain.acceleration_candidate
    class Weak(Base):
        __slots__ = ("__weakref__", "v")

        def __init__(self, v):
            self.v = v

        @logged
        def hello(self):  # zero-argument super() inside a decorated method
            return "weak+" + super().hello()

    domain.materialize()
    assert Config() is Config() and Config().level == 1
    point = Point(1)
    assert point == (1, 0) and type(point._replace(x=5)) is Point
    assert copy.deepcopy(point) == point and type(copy.copy(point)) is Point
    assert Slot(2).double() == Slot(4) and not hasattr(Slot(2), "__dict__")
    with pytest.raises(dataclasses.FrozenInstanceError):
        Slot(2).a = 3
    weak = Weak(1)
    assert weakref.ref(weak)() is weak and weak.hello() == "weak+base"


@pytest.mark.skipif(sys.version_info < (3, 12), reason="type parameter syntax is 3.12+")
def test_a_class_with_type_parameters(unique):
    namespace = {"domain": cq.AccelerationDomain(unique())}
    exec(
        "@domain.acceleration_candidate\n"
        "class Box[T]:\n"
        "    def __init__(self, item: T):\n"
        "        self.item = item\n",
        namespace,
    )
    box = namespace["Box"]
    namespace["domain"].materialize()
    assert box[int](3).item == 3 and type(box(1)) is box
    assert [p.__name__ for p in box.__type_params__] == ["T"]


def test_marked_classes_combine_as_bases_and_in_hierarchies(unique):
    domain = cq.AccelerationDomain(unique())

    @domain.acceleration_candidate
    class Distribution:
        def __init__(self, loc=0.0):
            self.loc = loc

    @domain.acceleration_candidate  # a marked subclass of a marked class
    class Normal(Distribution):
        def __init__(self, loc=0.0, scale=1.0):
            super().__init__(loc)
            self.scale = scale

    @domain.acceleration_candidate
    class Labelled:
        def __init__(self, label=""):
            self.label = label

    domain.materialize()
    library_distribution = Distribution

    class Fast(cq.engine_class(domain), name="fast"):
        class Distribution(library_distribution):
            pass

    class Both(Normal, Labelled):  # a user's class on two marked classes
        def __init__(self):
            Normal.__init__(self, 1.0, 2.0)
            Labelled.__init__(self, "both")

    class Deeper(Both, Fast.Distribution):
        pass

    with cq.using_engine(domain, "fast"):
        assert type(Distribution()) is Fast.Distribution and type(Normal()) is Normal
        both = Both()
    assert (both.loc, both.scale, both.label) == (1.0, 2.0, "both")
    assert (
        isinstance(both, Distribution) and isinstance(both, Labelled) and type(Deeper()) is Deeper
    )
    assert (
        isinstance(Normal(), Distribution)
        and str(inspect.signature(Normal)) == "(loc=0.0, scale=1.0)"
    )


def test_rebuilding_keeps_what_the_class_statement_made(unique):
    domain = cq.AccelerationDomain(unique())
    calls = []

    class Flavoured:
        def __init_subclass__(cls, flavor="plain", **kwargs):
            super().__init_subclass__(**kwargs)
            cls.flavor = flavor

    class Tracing(type):  # a metaclass that wraps methods, and takes a keyword
        def __new__(mcls, name, bases, namespace, option=None):
            for key, value in list(namespace.items()):
                if callable(value) and not key.startswith("__"):
                    namespace[key] = lambda *a, _v=value, _k=key: calls.append(_k) or _v(*a)
            cls = super().__new__(mcls, name, bases, namespace)
            cls.option = option
            return cls

    def logged(fn):  # a decorator without functools.wraps
        def inner(self):
            return fn(self)

        return inner

    class Base:
        def hello(self):
            return "base"

    @domain.acceleration_candidate
    class Spicy(Flavoured, flavor="spicy"):
        pass

    @domain.acceleration_candidate
    class Traced(metaclass=Tracing, option="on"):
        def run(self):
            return 1

    @domain.acceleration_candidate
    class Greeter(Base):
        @logged
        def hello(self):
            return "greeter+" + super().hello()

    domain.materialize()
    assert Spicy.flavor == "spicy" and Traced.option == "on"
    assert Traced().run() == 1 and calls == ["run"]  # wrapped once, not twice
    assert Greeter().hello() == "greeter+base"


def test_decorators_above_the_marker(unique):
    domain = cq.AccelerationDomain(unique())
    with pytest.raises(cq.CoheriqTypeError, match="Put @acceleration_candidate above"):

        @dataclasses.dataclass(slots=True)  # builds a new class from the marked one
        @domain.acceleration_candidate
        class Slotted:
            x: int

    @dataclasses.dataclass  # adds __init__ to the marked class itself: fine
    @domain.acceleration_candidate
    class Point:
        x: int
        y: int = 2

    @dataclasses.dataclass
    class Unmarked:
        x: int
        y: int = 2

    @domain.acceleration_candidate
    class Signed:
        __signature__ = inspect.Signature([inspect.Parameter("magic", 1)])

    domain.materialize()
    assert Point(1) == Point(1, 2) and inspect.signature(Point) == inspect.signature(Unmarked)
    assert str(inspect.signature(Signed)) == "(magic)"


def test_static_and_class_methods_as_targets(unique):
    domain = cq.AccelerationDomain(unique())

    class Lib:
        @domain.acceleration_candidate
        @staticmethod
        def double(x):
            return 2 * x

    with pytest.raises(cq.CoheriqTypeError, match="cannot mark classmethod"):

        class Other:
            @domain.acceleration_candidate
            @classmethod
            def make(cls):
                return cls()

    domain.materialize()
    assert Lib().double(3) == 6 and Lib.double(3) == 6


def test_isinstance_before_and_after_engines_of_either_kind(lib):
    batch = lib.Batch([1])
    assert isinstance(batch, lib.Batch) and not isinstance(1, lib.Batch)

    class Derived(cq.engine_class(lib.name), name="derived"):
        class Batch(lib.Batch):  # derives from the marked class
            pass

    class Foreign(cq.engine_class(lib.name), name="foreign"):
        class Batch:  # does not
            def __init__(self, rows):
                self.rows = rows

    for engine in ("derived", "foreign"):
        with cq.using_engine(lib.name, engine):
            made = lib.Batch([1])
        assert isinstance(made, lib.Batch) and issubclass(type(made), lib.Batch)
    assert isinstance(batch, lib.Batch) and not isinstance(1, lib.Batch)
    assert not issubclass(int, lib.Batch)


USER_SCRIPT = """
import sys
import cloudpickle
sys.path.insert(0, {path!r})
import {lib}

class Mine({lib}.Interval):  # a user's class, in __main__: cloudpickle sends it by value
    def width(self):
        return 10 * super().width()

print(cloudpickle.dumps(Mine(1, 3)).hex())
"""

WORKER_SCRIPT = """
import pickle, sys
sys.path.insert(0, {path!r})
mine = pickle.loads(bytes.fromhex(sys.stdin.read()))
print(type(mine).__name__, mine.width(), type(mine).__mro__[1].__module__)
"""


def test_a_users_subclass_in_main_travels_with_cloudpickle(shapes, tmp_path):
    pytest.importorskip("cloudpickle", reason="cloudpickle (dask, joblib) is not installed")
    shapes(marked=True)
    path = str(tmp_path)
    made = subprocess.run(
        [sys.executable, "-c", USER_SCRIPT.format(path=path, lib=shapes.name)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    loaded = subprocess.run(  # a fresh process, as a worker: it imports the library
        [sys.executable, "-c", WORKER_SCRIPT.format(path=path)],
        input=made.stdout,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert loaded.stdout.split() == ["Mine", "20", shapes.name], loaded.stderr


# -- zero-argument super() in methods behind any wrapper -----------------------------------


def test_super_works_behind_wrappers_that_are_not_functools(unique):
    class cached:
        def __init__(self, function):
            self.function = function  # kept under a name of its own

        def __set_name__(self, owner, name):
            self.name = name

        def __get__(self, obj, owner=None):
            if obj is None:
                return self
            value = obj.__dict__[self.name] = self.function(obj)
            return value

    def traced(function):
        class Wrapper:
            def __init__(self):
                self.__wrapped__ = function

            def __get__(self, obj, owner=None):
                return function.__get__(obj, owner)

        return Wrapper()

    with cq.testing.isolated():
        domain = cq.AccelerationDomain(unique())

        class Base:
            def size(self):
                return 1

            def name(self):
                return "base"

        @domain.acceleration_candidate
        class Thing(Base):
            @cached
            def size(self):
                return super().size() + 1

            @traced
            def name(self):
                return "thing of " + super().name()

        domain.materialize()
        assert Thing().size == 2
        assert Thing().name() == "thing of base"


# -- a registry that appends each subclass holds the marked class once ---------------------


PLUGINS: list[type] = []  # a module-level registry, as plugin systems keep one


def test_registries_of_the_bases_hold_the_marked_class_only(unique):
    class Plugin:
        registry: list[type] = []
        names: set[type] = set()

        def __init_subclass__(cls, **kwargs):
            super().__init_subclass__(**kwargs)
            Plugin.registry.append(cls)
            Plugin.names.add(cls)
            PLUGINS.append(cls)

    with cq.testing.isolated():
        domain = cq.AccelerationDomain(unique())

        @domain.acceleration_candidate
        class Csv(Plugin):
            pass

        domain.materialize()
        assert Plugin.registry == [Csv] and Plugin.registry[0] is Csv
        assert Plugin.names == {Csv}
        assert [p for p in PLUGINS if p.__name__ == "Csv"] == [Csv]
