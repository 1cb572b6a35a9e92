"""How a library accelerated from the outside is loaded (docs/outside.rst: What happens at import).

A declared module must run as its real loader runs it: in its own globals as
its locals, with importlib's frames removed from its tracebacks and warnings, and
marked however it is run (an import, ``python -m``). Each test lays out the fake
library ``shapes`` of ``test_outside`` with the engine of ``test_outside_hostile``
that tells it ran, and compares a fresh interpreter's behaviour with and without
acceleration.
"""

from __future__ import annotations

import json
import textwrap

import pytest
from test_outside import SHAPES, lay_out, ok, python, write_dist
from test_outside_hostile import ACCELERATED, CORE, telling

HEAVY = textwrap.dedent(SHAPES["shapes/heavy.py"])


# -- item 11: a module body runs with its globals as its locals ------------------------------

# What zope.interface's moduleProvides checks, as any code that must run at module scope.
AT_MODULE_SCOPE = """
import sys as _sys

_frame = _sys._getframe()
if _frame.f_locals is not _frame.f_globals or "__name__" not in _frame.f_locals:
    raise TypeError("moduleProvides can only be used from a module definition.")
del _frame
"""


def test_a_declared_module_runs_with_its_globals_as_its_locals(tmp_path):
    where = telling(tmp_path, {"shapes/heavy.py": AT_MODULE_SCOPE + HEAVY})
    program = """
        import os, coheriq
        if os.environ.get("HOSTILE") == "accelerated":
            coheriq.accelerate("shapes")
        import shapes.heavy
        print(shapes.heavy.smooth([2]), coheriq.explain(shapes.heavy.smooth).engine)
        """
    assert ok(python(where, program, env=ACCELERATED)).strip() == "[1.0] reference"
    with_engine = program.replace('accelerate("shapes")', 'accelerate("shapes", "fast")')
    assert ok(python(where, with_engine, env=ACCELERATED)).strip() == "['fast'] fast"


# -- item 12: tracebacks and warnings as without coheriq -------------------------------------


def _both(where, program: str) -> tuple[str, str]:
    """stderr of ``program`` importing the library unmarked, then accelerated with no engine."""
    plain = python(where, program).stderr
    accelerated = python(where, "import coheriq; coheriq.accelerate('shapes')\n" + program).stderr
    return plain, accelerated


def test_an_exception_in_a_declared_module_body_has_the_traceback_of_an_unmarked_one(tmp_path):
    where = telling(tmp_path, {"shapes/heavy.py": HEAVY + "\nraise ValueError('broken')\n"})
    plain, accelerated = _both(where, "import shapes.heavy")
    assert "ValueError: broken" in plain and "importlib" not in plain
    # The program's code differs by its first line only (the accelerate call).
    assert accelerated.replace("line 2,", "line 1,") == plain
    assert "coheriq" not in accelerated


def test_an_import_time_warning_of_a_declared_module_names_the_importing_line(tmp_path):
    warns = (
        "import warnings\n"
        "warnings.warn('shapes.heavy is deprecated', DeprecationWarning, stacklevel=2)\n"
    )
    where = telling(tmp_path, {"shapes/heavy.py": warns + HEAVY})
    plain, accelerated = _both(where, "import shapes.heavy")
    # Shown by the default filters: the warning is the importing __main__'s.
    assert "<string>:1: DeprecationWarning: shapes.heavy is deprecated" in plain
    assert accelerated.replace("<string>:2:", "<string>:1:") == plain


# -- item 13: a declared module run with python -m ---------------------------------------------

RUN_AS_MAIN = HEAVY + textwrap.dedent(
    """
    def main():
        return smooth([2])

    if __name__ == "__main__":
        import os, coheriq
        accelerated = os.environ.get("COHERIQ_ACCELERATE")
        print(main(), coheriq.explain(smooth).engine if accelerated else "unmarked")
    """
)


def test_a_declared_module_run_with_python_m_is_marked_and_runs_the_engine(tmp_path):
    where = telling(tmp_path, {"shapes/heavy.py": RUN_AS_MAIN})
    plain = python(where, "", "-m", "shapes.heavy")
    assert ok(plain).strip() == "[1.0] unmarked"
    done = python(where, "", "-m", "shapes.heavy", env={"COHERIQ_ACCELERATE": "shapes:fast"})
    assert ok(done).strip() == "['fast'] fast"
    reference = python(where, "", "-m", "shapes.heavy", env={"COHERIQ_ACCELERATE": "shapes"})
    assert ok(reference).strip() == "[1.0] reference"


# -- item 15: a library that calls its own candidates at import ------------------------------

CALLS_AT_IMPORT = {
    "shapes/core.py": SHAPES["shapes/core.py"].replace(
        "        class Square(Shape):",
        "        ONE = area(Shape(1))  # a call of a candidate while the library imports\n\n"
        "        class Square(Shape):",
    )
}

# An engine that subclasses a library class at its module level, as engines do.
SUBCLASSING = '''
    import coheriq
    import shapes.core

    class FastSquare(shapes.core.Square):
        """Needs the whole library."""

    class Fast(coheriq.engine_class("shapes"), name="fast"):
        def area(self, shape):
            return -shape.side
    '''


def test_a_call_while_the_library_imports_runs_the_reference_and_chooses_nothing(tmp_path):
    where = lay_out(tmp_path, engine=SUBCLASSING, files=CALLS_AT_IMPORT)
    program = """
        import coheriq
        coheriq.accelerate("shapes", "fast")
        import shapes.core as core
        print(core.ONE, core.area(core.Shape(3)), coheriq.explain(core.area).engine)
        """
    assert ok(python(where, program)).strip() == "1 -3 fast"
    later = """
        import coheriq
        coheriq.accelerate("shapes")
        import shapes.core as core
        assert not coheriq.explain("shapes").settled
        coheriq.enable_engine("shapes", "fast")
        print(core.ONE, core.area(core.Shape(3)))
        """
    assert ok(python(where, later)).strip() == "1 -3"


# -- item 16: a class imported before is never marked in place --------------------------------

NO_SUBCLASS = {
    "shapes/core.py": SHAPES["shapes/core.py"]
    .replace("class Square(Shape):", "class Square:")
    .replace("super().__init__(side)", "self.side = side")
}


def test_a_class_imported_before_stays_unmarked_and_its_objects_keep_working(tmp_path):
    out = ok(
        python(
            telling(tmp_path, NO_SUBCLASS),
            """
            import warnings
            import coheriq, shapes.core as core
            old = core.Shape(2)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                coheriq.accelerate("shapes", "fast")
            # Objects made before are still the class's objects, and equal to new ones.
            assert isinstance(old, core.Shape) and core.Shape(2) == old
            assert core.area(old) == -2  # the functions are marked in place all the same
            print(" ".join(str(w.message) for w in caught))
            """,
        )
    )
    assert "Class shapes.core.Shape was imported before the library was accelerated" in out
    assert "stays unmarked" in out and "Accelerate before importing 'shapes'" in out


# -- item 19: NumPy's __array_function__ protocol keeps seeing the library's functions --------

NUMPY_DECLARATION = {
    "coheriq_declaration": 1,
    "library": "numpy",
    "distribution": "numpy",
    "versions": ">=1.25",
    "modules": {"numpy.linalg._linalg": {"functions": ["det"]}},
}

NUMPY_ENGINE = '''
    import coheriq
    import numpy.linalg._linalg

    class Fast(coheriq.engine_class("numpy"), name="fast"):
        """Tells that it ran."""

        def det(self, a):
            return -1.0
    '''

# NEP 18's own example: an array type that looks its functions up by identity.
HANDLES_DET = """
    import os, numpy as np
    import coheriq

    class Handles:
        def __array_function__(self, func, types, args, kwargs):
            return func is np.linalg.det

    print(np.linalg.det(Handles()), hasattr(np.linalg.det, "_implementation"))
    if os.environ.get("COHERIQ_ACCELERATE"):
        print(np.linalg.det(np.eye(2)), coheriq.explain(np.linalg._linalg.det).engine)
    """


def numpy_engine(tmp_path):
    """An engine package declaring ``numpy.linalg._linalg.det``, as an engine author would."""
    pytest.importorskip("numpy")
    (tmp_path / "numpy_fast.py").write_text(textwrap.dedent(NUMPY_ENGINE))
    (tmp_path / "numpy_fast.numpy.json").write_text(json.dumps(NUMPY_DECLARATION))
    write_dist(
        tmp_path,
        "numpy_fast",
        "1.0",
        """
        [coheriq.engines.numpy]
        fast = numpy_fast

        [coheriq.declarations.numpy]
        fast = numpy_fast:numpy_fast.numpy.json
        """,
    )
    return tmp_path


# The code-swapped function is what marks NumPy's functions in place; each test says so.
SWAPS = {"COHERIQ_SWAP_CODE": "1"}


def test_numpy_accelerated_from_the_outside_keeps_its_array_function_protocol(tmp_path):
    tmp_path = numpy_engine(tmp_path)
    plain = ok(python(tmp_path, HANDLES_DET))
    assert plain.strip() == "True True"
    on_engine = ok(python(tmp_path, HANDLES_DET, env={"COHERIQ_ACCELERATE": "numpy:fast", **SWAPS}))
    assert on_engine.split() == ["True", "True", "-1.0", "fast"]
    marked = ok(python(tmp_path, HANDLES_DET, env={"COHERIQ_ACCELERATE": "numpy", **SWAPS}))
    assert marked.split() == ["True", "True", "1.0", "reference"]


# What a user of a NumPy accelerated from the outside does with it: blocks, resolve_impl,
# explain and verification on np.linalg.det itself, which stays NumPy's object.
ON_DET = """
    import numpy as np
    import coheriq

    class Handles:
        def __array_function__(self, func, types, args, kwargs):
            return func is np.linalg.det

    det = np.linalg.det
    with coheriq.using_engine("numpy", "fast"):
        print(det(np.eye(2)), det(Handles()), coheriq.resolve_impl(det).__name__)
    print(det(np.eye(2)), det(Handles()), coheriq.explain(det).engine, det is np.linalg.det)
    with coheriq.verify("numpy", "fast", on_mismatch="record") as check:
        det(np.eye(2))
    print(len(check.mismatches), det._implementation(np.eye(2)))
    """


def test_a_block_runs_the_engine_through_numpys_own_det(tmp_path):
    where = numpy_engine(tmp_path)
    out = ok(python(where, ON_DET, env={"COHERIQ_ACCELERATE": "numpy", **SWAPS}))
    in_block, after = ["-1.0", "True", "det"], ["1.0", "True", "reference", "True"]
    assert out.split() == [*in_block, *after, "1", "1.0"]


def test_numpy_accelerated_after_its_import_runs_the_engine_through_the_same_objects(tmp_path):
    where = numpy_engine(tmp_path)
    program = """
        import warnings
        warnings.simplefilter("error")  # nothing to say: nothing is left unmarked
        import numpy as np
        import coheriq

        class Handles:
            def __array_function__(self, func, types, args, kwargs):
                return func is np.linalg.det

        det, implementation = np.linalg.det, np.linalg.det._implementation
        coheriq.accelerate("numpy", "fast")
        assert np.linalg.det is det and det._implementation is implementation
        # numpy.linalg re-exports det: the same object, so no name was bound before.
        print(det(np.eye(2)), det(Handles()), coheriq.explain(det).bound_before)
        """
    assert ok(python(where, program, env=SWAPS)).split() == ["-1.0", "True", "{}"]


def test_a_declared_wrapper_that_cannot_be_marked_in_place_is_marked_with_a_warning(tmp_path):
    where = numpy_engine(tmp_path)
    env = {"COHERIQ_ACCELERATE": "numpy", "COHERIQ_SWAP_CODE": "0"}
    done = python(where, HANDLES_DET, env=env)
    said = " ".join(done.stderr.split())
    assert "numpy.linalg._linalg.det is a numpy._ArrayFunctionDispatcher" in said
    assert "COHERIQ_SWAP_CODE=0" in said
    assert "__array_function__" in said and "Drop it from the declaration of 'numpy'" in said
    assert ok(done).split() == ["False", "False", "1.0", "reference"]


# The same without NumPy: a library's own dispatcher that hands itself to a protocol, and a
# cache of functools' around a function; both bound to declared names.
WRAPPED = {
    "shapes/heavy.py": """
        import functools

        class Dispatcher:
            '''As NumPy's: an argument with the protocol gets the dispatcher itself.'''

            def __init__(self, function):
                self.__wrapped__ = function

            def __call__(self, values):
                handler = getattr(values, "__shapes_function__", None)
                if handler is not None:
                    return handler(self)
                return self.__wrapped__(values)

        @Dispatcher
        def smooth(values):
            return [v / 2 for v in values]

        SMOOTH = smooth  # the library hands the same object around
        """,
    "shapes/core.py": "import functools\n"
    + CORE.replace("def area(shape):", "@functools.lru_cache\ndef area(shape):"),
}


def test_a_library_wrapper_keeps_its_identity_and_its_calls_reach_the_engine(tmp_path):
    where = telling(tmp_path, WRAPPED)
    program = """
        import os, coheriq
        if os.environ.get("HOSTILE") == "accelerated":
            coheriq.accelerate("shapes", "fast")
        import shapes.heavy as heavy, shapes.core as core

        class Handles:
            def __shapes_function__(self, func):
                return func is heavy.smooth and func is heavy.SMOOTH

        print(heavy.smooth(Handles()), heavy.smooth([2]), type(heavy.smooth).__name__)
        class Side:  # hashable, as the cache needs
            side = 3

        side = Side()
        print(core.area(side), core.area(side), core.area.cache_info().misses)
        """
    plain = ok(python(where, program, env=SWAPS)).split()
    assert plain == ["True", "[1.0]", "Dispatcher", "9", "9", "1"]
    accelerated = ok(python(where, program, env={**ACCELERATED, **SWAPS})).split()
    # The cache stays the library's, before the engine: its second call is a hit.
    assert accelerated == ["True", "['fast']", "Dispatcher", "-3", "-3", "1"]


def test_a_library_wrapper_reloaded_is_marked_as_before_with_a_warning(tmp_path):
    program = """
        import importlib, warnings
        import coheriq
        coheriq.accelerate("shapes", "fast")
        import shapes.heavy as heavy

        first = heavy.smooth
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            importlib.reload(heavy)  # a new Dispatcher around a new function
        assert "cannot be marked in place" in str(caught[0].message), caught
        print(first([2]), heavy.smooth([2]), coheriq.explain(heavy.smooth).engine)
        with coheriq.using_engine("shapes", "reference"):
            print(first([2]), heavy.smooth([2]))
        """
    out = ok(python(telling(tmp_path, WRAPPED), program, env=SWAPS))
    assert out.split() == ["['fast']", "['fast']", "fast", "[1.0]", "[1.0]"]


# Ways a declared name is bound by a walrus in the module's scope, then aliased: the walrus
# marks it where it binds, so the alias (and the walrus's own value) is the candidate.
WALRUSES = {
    "while": "found = iter([_area])\nwhile (area := next(found, None)) is not None:\n    pass\n"
    "area = _area\n",
    "call": "repr(area := _area)\n",
    "comprehension": "[area := f for f in (_area,)]\n",
    "elif": "if False:\n    pass\nelif (area := _area):\n    pass\n",
    "one line": "if (area := _area): pass\n",
}


@pytest.mark.parametrize("where_bound", WALRUSES)
def test_a_walrus_anywhere_in_module_scope_marks_the_name_before_its_alias(tmp_path, where_bound):
    core = CORE.replace("def area(shape):", "def _area(shape):").replace(
        "ALIAS = area", WALRUSES[where_bound] + "ALIAS = area"
    )
    where = telling(tmp_path, {"shapes/core.py": core})
    program = """
        import os, coheriq
        if os.environ.get("HOSTILE"):
            coheriq.accelerate("shapes", "fast")
        import shapes.core as c
        print(c.area(c.Shape(3)), c.ALIAS(c.Shape(3)), c.ALIAS is c.area)
        """
    assert ok(python(where, program)).split()[-3:] == ["9", "9", "True"]
    assert ok(python(where, program, env=ACCELERATED)).split()[-3:] == ["-3", "-3", "True"]


TRACED = """
    import os, sys, coheriq
    if os.environ.get("HOSTILE"):
        coheriq.accelerate("shapes")
    lines = []

    def tracer(frame, event, arg):
        if frame.f_code.co_name == "<module>" and frame.f_code.co_filename.endswith("core.py"):
            if event == "line":
                lines.append(frame.f_lineno)
            return tracer
        return None

    sys.settrace(tracer)
    import shapes.core
    sys.settrace(None)
    print(lines)
    """

# Module endings, and a first statement whose first instruction is not on its first line.
TRACED_ENDINGS = {
    "try whose handler runs": "try:\n    DONE = 1 / 0\nexcept ZeroDivisionError:\n    DONE = 2\n",
    "if without else, false": "if not Shape:\n    DONE = True\n",
    "loop": "for DONE in range(2):\n    pass\n",
    "while": "DONE = 2\nwhile DONE:\n    DONE -= 1\n",
    "decorated first": None,
}


@pytest.mark.parametrize("ending", TRACED_ENDINGS)
def test_a_tracer_sees_a_declared_module_s_lines_as_unmarked_however_it_ends(tmp_path, ending):
    tail = TRACED_ENDINGS[ending]
    core = (
        "import functools\n@functools.lru_cache\ndef _helper():\n    pass\n" + CORE
        if tail is None
        else CORE + "\n" + tail
    )
    where = telling(tmp_path, {"shapes/core.py": core})
    plain = ok(python(where, TRACED))
    assert ok(python(where, TRACED, env=ACCELERATED)) == plain
