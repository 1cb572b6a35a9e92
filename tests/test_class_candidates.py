"""Class candidates behave like classes, whichever engine implements them."""

import functools
import inspect
import pickle
import typing

import pytest

import coheriq as cq


def test_construction_follows_scope_then_global(lib, two_engines):
    fast, _ = two_engines
    cq.enable_engine(lib.name, "slow")  # slow keeps the reference Batch
    assert type(lib.Batch([1])) is lib.Batch
    with cq.using_engine(lib.name, "fast"):
        made_inside = lib.Batch([1])
        assert type(made_inside) is fast.Batch
    assert isinstance(made_inside, lib.Batch)  # still a Batch after the block
    assert type(lib.Batch([1])) is lib.Batch


def test_class_members_are_the_classs_own_and_constructors_dispatch(unique):
    domain = cq.AccelerationDomain(unique())

    @domain.acceleration_candidate
    class Batch:
        DTYPE = "float64"

        def __init__(self, rows):
            self.rows = rows

        @classmethod
        def from_flat(cls, values):
            return cls([values])

        @staticmethod
        def version():
            return 1

        @property
        def size(self):
            return len(self.rows)

    domain.materialize()
    reference = Batch

    class Fast(cq.engine_class(domain), name="fast"):
        class Batch(reference):
            DTYPE = "float32"

            @staticmethod
            def version():
                return 2

    assert Batch.DTYPE == "float64" and Batch.version() == 1
    assert isinstance(Batch.size, property)
    with cq.using_engine(domain, "fast"):
        # The marked class is the library's class: its data attributes are its own...
        assert Batch.DTYPE == "float64"
        # ...its construction entry points the engine's class's, where it has them...
        assert Batch.version() == 2
        # ...and an alternate constructor that calls cls(...) follows the engine.
        made = Batch.from_flat([1, 2])
        assert type(made) is Fast.Batch and made.size == 1 and made.DTYPE == "float32"


def test_marked_class_identity_and_signature(lib):
    assert repr(lib.Batch) == "<class 'conftest.build_lib.<locals>.Batch'>"
    assert (lib.Batch.__name__, lib.Batch.__qualname__) == ("Batch", "build_lib.<locals>.Batch")
    assert str(inspect.signature(lib.Batch)) == "(rows)"
    # Its metaclass derives from its own, reads like it, and says what it is when asked.
    assert repr(type(lib.Batch)) == "<class 'type'>" and issubclass(type(lib.Batch), type)
    assert "coheriq candidate" in type(lib.Batch).__qualname__
    assert not cq.explain(lib.name).settled  # none of this chose an engine


PICKLED_MODULE = """
import dataclasses
import coheriq

domain = coheriq.AccelerationDomain({name!r})

@domain.acceleration_candidate
@dataclasses.dataclass
class Point:
    x: int
    y: int = 0

@domain.acceleration_candidate
class Slots:
    __slots__ = ("a",)

    def __init__(self, a):
        self.a = a

domain.materialize()

class Fast(coheriq.engine_class({name!r}), name="fast"):
    @dataclasses.dataclass
    class Point:
        x: int
        y: int = 0
"""


@pytest.fixture
def pickled_module(make_dist, unique):
    import importlib

    module = unique("pickled")
    make_dist(module + "_dist", {module: PICKLED_MODULE.format(name=module)}, {})
    return importlib.import_module(module)


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_instances_pickle(pickled_module, protocol):
    import copy

    mod = pickled_module
    point, slots = mod.Point(1, 2), mod.Slots(7)
    with cq.using_engine(mod.domain, "fast"):
        fast_point = mod.Point(3)
    for obj in (point, fast_point, copy.copy(point), copy.deepcopy(fast_point)):
        again = pickle.loads(pickle.dumps(obj, protocol))
        assert type(again) is type(obj) and again == obj
        assert cq.engine_of(again) == cq.engine_of(obj)
    if protocol >= 2:  # Python pickles __slots__ classes from protocol 2 on
        assert pickle.loads(pickle.dumps(slots, protocol)).a == 7
    assert repr(point) == "Point(x=1, y=2)"  # the reference class keeps its own name


def test_engine_of(lib, two_engines):
    fast, _ = two_engines

    class Hybrid(fast, cq.engine_class(lib.name, "slow"), name="hybrid"):
        pass

    class Mine(fast.Batch):
        pass

    assert cq.engine_of(lib.Batch([1])) == cq.REFERENCE
    with cq.using_engine(lib.name, "fast"):
        assert cq.engine_of(lib.Batch([1])) == "fast"
    with cq.using_engine(lib.name, "hybrid"):
        assert cq.engine_of(lib.Batch([1])) == "fast"  # the engine that defines the class
    assert cq.engine_of(Mine([1])) == "fast"
    for obj in (1, "x", [lib.Batch([1])], lib.Batch):
        with pytest.raises(cq.CoheriqTypeError, match="not an instance of any coheriq class"):
            cq.engine_of(obj)


def test_engine_of_a_mixin_implementation(lib):
    class Mixin(cq.engine_class(lib.name)):
        class Batch:
            def __init__(self, rows):
                self.rows = rows

    class Named(Mixin, name="named"):
        pass

    with cq.using_engine(lib.name, "named"):
        assert cq.engine_of(lib.Batch([])) == "named"


def test_annotations_match_and_singledispatch(lib, two_engines):
    def rows_of(batch: lib.Batch) -> int:
        return len(batch.rows)

    assert typing.get_type_hints(rows_of)["batch"] is lib.Batch

    def kind(obj):
        match obj:
            case lib.Batch(rows=rows):
                return f"batch of {len(rows)}"
            case _:
                return "other"

    @functools.singledispatch
    def describe(obj):
        return "object"

    @describe.register
    def _(obj: lib.Batch):
        return "a Batch"

    with cq.using_engine(lib.name, "fast"):
        fast_batch = lib.Batch([1, 2])
    for obj in (lib.Batch([1, 2]), fast_batch):
        assert kind(obj) == "batch of 2"
        assert describe(obj) == "a Batch"
    assert kind(3) == "other" and describe(3) == "object"


# -- a marked class taking **options receives any option name ------------------------------


def test_a_dispatched_construction_passes_every_keyword_on(unique):
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


# -- a constructor replaced after marking is dispatched with its own parameters ------------


def test_a_patched_init_constructs_inside_blocks_and_profiles(unique):
    from unittest import mock

    with cq.testing.isolated():
        domain = cq.AccelerationDomain(unique())

        @domain.acceleration_candidate
        class Box:
            def __init__(self, x):
                self.x = x

        domain.materialize()

        def patched(self, *values, scale=1):
            self.x = sum(values) * scale

        with mock.patch.object(Box, "__init__", patched):
            assert Box(1, 2, scale=2).x == 6
            with cq.using_engine(domain, cq.REFERENCE):
                assert Box(1, 2, scale=2).x == 6
            with cq.profile():
                assert Box(4).x == 4
        with cq.using_engine(domain, cq.REFERENCE):
            assert Box(5).x == 5  # the original again, once the patch is undone
            with pytest.raises(TypeError):
                Box(1, 2)


# -- an engine's class for an exception candidate derives from it --------------------------


def test_an_exception_candidate_needs_a_derived_engine_class(unique):
    with cq.testing.isolated():
        domain = cq.AccelerationDomain(unique())

        @domain.acceleration_candidate
        class ParseError(ValueError):
            pass

        domain.materialize()
        library = ParseError
        with pytest.raises(cq.CoheriqEngineError, match=r"except ParseError.*Derive"):

            class Loose(cq.engine_class(domain), name="loose"):
                class ParseError(Exception):
                    pass

        class Tight(cq.engine_class(domain), name="tight"):
            class ParseError(library):
                pass

        with cq.using_engine(domain, "tight"):
            try:
                raise ParseError("x")
            except library as error:
                assert type(error).__qualname__.endswith("Tight.ParseError")
