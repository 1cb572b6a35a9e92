"""Annotations and signatures read the same marked as unmarked, on every Python.

From Python 3.14 annotations are computed when first asked for (PEP 649 and
749): a function may be annotated with a class defined further down its module,
or with a name imported only under ``TYPE_CHECKING``, and importing it works.
Marking must keep that so: a marked function, class or engine override is
annotated, and answers :mod:`annotationlib`'s formats, exactly as unmarked.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pydoc
import re
import sys
import textwrap
import warnings

import pytest

import coheriq as cq

DEFERRED = pytest.mark.skipif(
    sys.version_info < (3, 14), reason="deferred annotations (PEP 649) are new in Python 3.14"
)

# The head of every module below: `candidate` marks, or leaves the object as it is.
MARKING = """\
import coheriq
from typing import TYPE_CHECKING
domain = coheriq.AccelerationDomain({name!r})
candidate = domain.acceleration_candidate if {marked} else (lambda obj: obj)
"""


@pytest.fixture
def load(tmp_path, unique, monkeypatch):
    """``load(source, marked)``: the module ``source`` (after MARKING), under one name."""
    name = unique("annotated")
    monkeypatch.syspath_prepend(str(tmp_path))

    def load(source: str, marked: bool):
        head = MARKING.format(name=name, marked=marked)
        (tmp_path / f"{name}.py").write_text(head + textwrap.dedent(source))
        importlib.invalidate_caches()
        sys.modules.pop(name, None)
        return importlib.import_module(name)

    yield load
    sys.modules.pop(name, None)


def outcome(read, *args, **kwargs):
    """What ``read(*args, **kwargs)`` gives, as text to compare: its value, or its error."""
    try:
        text = repr(read(*args, **kwargs))
    except Exception as error:
        text = f"{type(error).__name__}: {error}"
    return re.sub(r" at 0x[0-9a-f]+", "", text)  # a forward reference names its owner


def formats():
    import annotationlib

    Format = annotationlib.Format
    return [Format.VALUE, Format.FORWARDREF, Format.STRING]


def annotations_of(obj, format):
    import annotationlib

    return annotationlib.get_annotations(obj, format=format)


def signature_text(obj, format):
    return str(inspect.signature(obj, annotation_format=format))


def views_of(obj):
    """What a reader of ``obj`` sees of its annotations, in each format, and its signature."""
    seen = {"__annotations__": outcome(getattr, obj, "__annotations__")}
    for format in formats():
        seen[f"get_annotations {format.name}"] = outcome(annotations_of, obj, format)
        seen[f"signature {format.name}"] = outcome(signature_text, obj, format)
    return seen


LATER_NAMES = """
if TYPE_CHECKING:
    from decimal import Decimal

@candidate
def scale(x: Later, factor: Decimal = 1) -> Later:
    return x

class Later:
    pass
"""


@DEFERRED
def test_marking_evaluates_no_annotation_and_each_format_reads_as_unmarked(load):
    unmarked = views_of(load(LATER_NAMES, marked=False).scale)
    marked = load(LATER_NAMES, marked=True)  # importing it evaluates nothing
    assert views_of(marked.scale) == unmarked
    assert "NameError" in unmarked["__annotations__"]  # Decimal: for type checkers only
    marked.domain.materialize()
    assert marked.scale(3) == 3


@DEFERRED
def test_a_marked_class_signature_answers_the_format_asked_for(load):
    source = """
    from typing import Generic, TypeVar
    if TYPE_CHECKING:
        from decimal import Decimal
    T = TypeVar("T")

    @candidate
    class Box(Generic[T]):
        def __init__(self, value: T, scale: Decimal = 1) -> None:
            self.value = value

    @candidate
    class Made:
        def __new__(cls, size: Later):
            return super().__new__(cls)

    class Later:
        pass
    """
    unmarked = load(source, marked=False)
    expected = {name: views_of(getattr(unmarked, name)) for name in ("Box", "Made")}
    text = {name: pydoc.render_doc(getattr(unmarked, name)) for name in ("Box", "Made")}
    marked = load(source, marked=True)
    for name in ("Box", "Made"):
        assert views_of(getattr(marked, name)) == expected[name], name
        assert pydoc.render_doc(getattr(marked, name)) == text[name], name
    assert "value: 'T'" in str(inspect.signature(marked.Box, annotation_format=formats()[2]))


@DEFERRED
def test_a_constructor_a_decorator_above_the_marker_adds_reads_as_unmarked(load):
    source = """
    import dataclasses

    @dataclasses.dataclass
    @candidate
    class Point:
        x: Later
        y: int = 0

    class Later:
        pass
    """
    expected = views_of(load(source, marked=False).Point)
    assert views_of(load(source, marked=True).Point) == expected


def test_functools_wraps_over_a_marked_function_carries_its_annotations(load):
    source = """
    @candidate
    def scale(x: int, factor: float = 1.0) -> float:
        return x * factor
    """
    seen = []
    for marked in (False, True):

        @functools.wraps(load(source, marked).scale)
        def wrapper(*args, **kwargs):
            return None

        seen.append((wrapper.__annotations__, str(inspect.signature(wrapper))))
    assert seen[1] == seen[0]
    assert seen[0][0] == {"x": int, "factor": float, "return": float}


def test_a_marked_class_and_its_subclasses_report_their_own_annotations(load):
    source = """
    @candidate
    class Box:
        def __init__(self, value):
            self.value = value

    @candidate
    class Typed:
        size: int
        def __init__(self, size):
            self.size = size

    class Sub(Box):
        label: str

    class Plain(Typed):
        pass
    """
    names = ("Box", "Typed", "Sub", "Plain")

    def read(module):
        seen = {name: outcome(getattr, getattr(module, name), "__annotations__") for name in names}
        if sys.version_info >= (3, 14):
            for name in names:
                for format in formats():
                    seen[name, format] = outcome(annotations_of, getattr(module, name), format)
        return seen

    expected = read(load(source, marked=False))
    assert read(load(source, marked=True)) == expected
    assert expected["Typed"] == repr({"size": int}) and expected["Box"] == "{}"


def test_engine_classes_report_their_own_annotations(lib):
    class Fast(cq.engine_class(lib.name), name="fast"):
        def total(self, xs):
            return ("fast", sum(xs))

    class Typed(Fast, name="typed"):
        width: int

    assert Fast.__annotations__ == {} and cq.engine_class(lib.name).__annotations__ == {}
    assert Typed.__annotations__ == {"width": "int"}  # this module's future import


@DEFERRED
def test_an_override_annotated_with_a_type_checking_name_is_checked_not_evaluated(lib):
    namespace = {"cq": cq, "domain": lib.name, "TYPE_CHECKING": False}
    source = """
    if TYPE_CHECKING:
        from decimal import Decimal

    class Fast(cq.engine_class(domain), name="fast"):
        def normalize(self, xs: Decimal) -> list[Decimal]:  # no scale: incompatible
            return xs
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(textwrap.dedent(source), namespace)
    problems = [str(w.message) for w in caught if w.category is cq.CoheriqSignatureWarning]
    assert len(problems) == 1 and "scale" in problems[0]


@pytest.mark.skipif(sys.version_info < (3, 12), reason="type parameter syntax is new in 3.12")
def test_a_generic_function_keeps_its_type_parameters(load):
    source = """
    @candidate
    def first[T](xs: list[T]) -> T:
        return xs[0]
    """
    unmarked = load(source, marked=False).first
    expected = [p.__name__ for p in unmarked.__type_params__]
    module = load(source, marked=True)
    marked = module.first
    assert [p.__name__ for p in marked.__type_params__] == expected == ["T"]
    assert str(inspect.signature(marked)) == str(inspect.signature(unmarked))
    module.domain.materialize()
    assert marked([5]) == 5


# -- a marked class reports its own annotations, none of coheriq's -------------------------


def test_annotations_are_the_classs_own(unique):
    import dataclasses
    import typing

    with cq.testing.isolated():
        domain = cq.AccelerationDomain(unique())

        @domain.acceleration_candidate
        class Plain:
            def __init__(self, x):
                self.x = x

        @domain.acceleration_candidate
        @typing.runtime_checkable
        class Shape(typing.Protocol):
            def area(self) -> float: ...

        @domain.acceleration_candidate
        @dataclasses.dataclass
        class Point:
            x: int
            y: int = 0

        domain.materialize()

        class Sub(Plain):
            pass

        class Square:
            def area(self) -> float:
                return 1.0

        for cls in (Plain, Sub):
            assert getattr(cls, "__annotations__", {}) == {}
            assert typing.get_type_hints(cls) == {}
        assert isinstance(Square(), Shape)
        assert [f.name for f in dataclasses.fields(Point)] == ["x", "y"]
        assert typing.get_type_hints(Point) == {"x": int, "y": int}
