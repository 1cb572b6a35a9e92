"""A library that never adopted coheriq, accelerated from the outside (coheriq.accelerate).

Each test lays out, in a directory of its own, an installed library ``shapes``
that knows nothing of coheriq, and an engine package that declares its
candidates (``coheriq.declarations.shapes``) and implements them
(``coheriq.engines.shapes``), each with its ``.dist-info``; then runs a program
against them in a fresh interpreter, as a user would.
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 120  # seconds; a hang fails the test

SHAPES = {
    "shapes/__init__.py": '''
        """A library of shapes that never heard of coheriq."""
        from shapes.core import Shape, Square, area, total_area

        def __getattr__(name):
            # A submodule loaded on first use, as many libraries do.
            if name == "heavy":
                import importlib
                return importlib.import_module("shapes.heavy")
            raise AttributeError(name)
        ''',
    "shapes/core.py": '''
        def area(shape):
            """The area of ``shape``."""
            return shape.side * shape.side

        def total_area(shapes):
            # A call inside the library: it follows the engine too.
            return sum(area(s) for s in shapes)

        class Shape:
            """A shape with a side."""

            def __init__(self, side):
                self.side = side

            def __repr__(self):
                return f"{type(self).__name__}({self.side})"

            def __eq__(self, other):
                return type(other) is type(self) and other.side == self.side

        class Square(Shape):
            """Defined after Shape, in the same module: it derives from the marked class."""

            def __init__(self, side):
                super().__init__(side)

        ALIAS = area  # bound while the module runs: the candidate, as with a decorator
        ''',
    "shapes/heavy.py": """
        def smooth(values):
            return [v / 2 for v in values]
        """,
    "shapes/run_me.py": """
        import sys
        import coheriq
        import shapes
        print(coheriq.explain(shapes.area).engine, shapes.area(shapes.Shape(3)), sys.argv[1:])
        """,
}

ENGINE = '''
    import coheriq

    calls = []

    class Fast(coheriq.engine_class("shapes"), name="fast"):
        """Areas computed fast (and counted)."""

        def area(self, shape):
            calls.append("area")
            return shape.side ** 2

        def smooth(self, values):
            calls.append("smooth")
            return [v * 0.5 for v in values]
    '''

DECLARATION = {
    "coheriq_declaration": 1,
    "library": "shapes",
    "distribution": "shapes",
    "versions": ">=1.0,<2",
    "modules": {
        "shapes.core": {"functions": ["area", "total_area"], "classes": ["Shape"]},
        "shapes.heavy": {"functions": ["smooth"]},
    },
}


def write_dist(where: Path, name: str, version: str, entry_points: str = "", requires=()) -> None:
    info = where / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    lines += [f"Requires-Dist: {r}" for r in requires]
    (info / "METADATA").write_text("\n".join(lines) + "\n")
    if entry_points:
        (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))


def lay_out(
    where: Path,
    *,
    declaration: dict[str, Any] | None = None,
    version: str = "1.0",
    engine: str = ENGINE,
    engine_name: str = "shapes_fast",
    files: dict[str, str] | None = None,
    requires: tuple[str, ...] = (),
) -> Path:
    """The library, its distribution's metadata, and one engine package with a declaration."""
    where.mkdir(parents=True, exist_ok=True)
    for path, text in {**SHAPES, **(files or {})}.items():
        (where / path).parent.mkdir(parents=True, exist_ok=True)
        (where / path).write_text(textwrap.dedent(text))
    write_dist(where, "shapes", version, requires=requires)
    add_engine(where, engine_name, engine, DECLARATION if declaration is None else declaration)
    return where


def add_engine(where: Path, module: str, engine: str, declaration: dict[str, Any]) -> None:
    (where / f"{module}.py").write_text(textwrap.dedent(engine))
    (where / f"{module}.shapes.json").write_text(json.dumps(declaration))
    name = module.split("_", 1)[1]
    write_dist(
        where,
        module,
        "1.0",
        f"""
        [coheriq.engines.shapes]
        {name} = {module}

        [coheriq.declarations.shapes]
        {name} = {module}:{module}.shapes.json
        """,
    )


def python(where: Path, code: str, *args: str, env: dict[str, str] | None = None, **kw: Any):
    """Run ``code`` in a fresh interpreter with ``where`` (and coheriq) importable."""
    environment = {
        k: v for k, v in os.environ.items() if k != "COHERIQ_ACCELERATE" and "SHAPES" not in k
    }
    environment["PYTHONPATH"] = os.pathsep.join([str(where), str(ROOT)])
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, *args, "-c", textwrap.dedent(code)] if code else [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=environment,
        cwd=where,
        **kw,
    )


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_accelerated_before_import_it_runs_the_engine_and_stays_the_library(tmp_path):
    out = ok(
        python(
            lay_out(tmp_path),
            """
            import pickle, inspect, sys
            import coheriq
            assert coheriq.accelerate("shapes", "fast") is None  # not imported yet
            import shapes, shapes.core
            import shapes_fast
            s = shapes.Shape(3)
            assert shapes.area(s) == 9 and shapes.total_area([s, shapes.Square(2)]) == 13
            assert shapes_fast.calls == ["area", "area", "area"], shapes_fast.calls
            # The marked class is the class; the subclass defined after it derives from it.
            assert type(s) is shapes.Shape and isinstance(shapes.Square(1), shapes.Shape)
            assert shapes.core.ALIAS is shapes.area  # bound while the module ran
            assert inspect.signature(shapes.area) == inspect.signature(lambda shape: 0)
            assert shapes.area.__doc__ == "The area of ``shape``."
            assert pickle.loads(pickle.dumps(s)) == s
            assert pickle.loads(pickle.dumps(shapes.area)) is shapes.area
            assert shapes.__loader__.__class__.__name__ == "SourceFileLoader"
            e = coheriq.explain(shapes.area)
            print(e.engine, e.bound_before)
            """,
        )
    )
    assert out.split() == ["fast", "{}"]


def test_with_no_engine_chosen_the_library_behaves_as_unmarked(tmp_path):
    out = ok(
        python(
            lay_out(tmp_path),
            """
            import coheriq
            coheriq.accelerate("shapes")
            import shapes, shapes_fast
            print(shapes.area(shapes.Shape(2)), coheriq.explain(shapes.area).engine)
            with coheriq.using_engine("shapes", "fast"):
                print(shapes.area(shapes.Shape(2)))
            print(shapes_fast.calls)
            """,
        )
    )
    assert out.split("\n")[:3] == ["4 reference", "4", "['area']"]


def test_accelerated_after_import_it_marks_in_place_and_reports_names_bound_before(tmp_path):
    out = ok(
        python(
            lay_out(tmp_path),
            """
            import warnings
            import coheriq, shapes
            from shapes.core import area as early
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                domain = coheriq.accelerate("shapes", "fast")
            import shapes_fast
            assert domain is not None and coheriq.explain(shapes.core.area).engine == "fast"
            assert shapes.core.total_area([shapes.Shape(2)]) == 4 and shapes_fast.calls == ["area"]
            early(shapes.Shape(2))  # bound before: the library's own code, not the engine
            shapes.area(shapes.Shape(2))  # the package's own name, bound before too
            assert shapes_fast.calls == ["area"]
            print(sorted(coheriq.explain(shapes.core.area).bound_before["area"]))
            # Shape has a subclass already: marking it in place would break it.
            print(" ".join(str(w.message) for w in caught))
            """,
        )
    )
    bound, warned = out.splitlines()
    assert "__main__.early" in bound and "'shapes.area'" in bound
    assert "'shapes.core.ALIAS'" in bound and "'shapes.core.area'" not in bound
    assert "Class shapes.core.Shape was imported before" in warned and "'Square'" in warned


def test_a_lazily_loaded_submodule_stays_lazy_and_is_marked_when_loaded(tmp_path):
    out = ok(
        python(
            lay_out(tmp_path),
            """
            import sys, coheriq
            coheriq.accelerate("shapes", "fast")
            import shapes
            assert "shapes.heavy" not in sys.modules
            assert shapes.heavy.smooth([2, 4]) == [1.0, 2.0]
            import shapes_fast
            print(shapes_fast.calls)
            """,
        )
    )
    assert out.strip() == "['smooth']"


def test_importlib_import_module_and_a_lazy_loader_are_marked(tmp_path):
    out = ok(
        python(
            lay_out(tmp_path),
            """
            import importlib, importlib.util, sys, coheriq
            coheriq.accelerate("shapes", "fast")
            core = importlib.import_module("shapes.core")
            spec = importlib.util.find_spec("shapes.heavy")
            spec.loader = importlib.util.LazyLoader(spec.loader)
            heavy = importlib.util.module_from_spec(spec)
            sys.modules["shapes.heavy"] = heavy
            spec.loader.exec_module(heavy)
            heavy.smooth([2])
            core.area(core.Shape(1))
            import shapes_fast
            print(shapes_fast.calls)
            """,
        )
    )
    assert out.strip() == "['smooth', 'area']"


@pytest.mark.slow
def test_the_runner_runs_a_module_a_script_and_code_with_the_engine(tmp_path):
    where = lay_out(tmp_path)
    run = [sys.executable, "-m", "coheriq", "run", "--engine", "shapes:fast"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(where), str(ROOT)])}
    env.pop("COHERIQ_ACCELERATE", None)
    for program in (["-m", "shapes.run_me"], [str(where / "shapes" / "run_me.py")]):
        done = subprocess.run(
            [*run, *program, "a", "-b"],
            capture_output=True,
            text=True,
            env=env,
            cwd=where,
            timeout=TIMEOUT,
        )
        assert ok(done).strip() == "fast 9 ['a', '-b']", program
    code = "import shapes, coheriq; print(coheriq.explain(shapes.area).engine)"
    done = subprocess.run(
        [*run, "-c", code], capture_output=True, text=True, env=env, cwd=where, timeout=TIMEOUT
    )
    assert ok(done).strip() == "fast"
    failing = subprocess.run(
        [*run, "-c", "raise SystemExit(3)"],
        capture_output=True,
        text=True,
        env=env,
        timeout=TIMEOUT,
    )
    assert failing.returncode == 3


def test_the_runner_says_what_is_wrong_with_a_library_nobody_declares(tmp_path):
    where = lay_out(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(where), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-m", "coheriq", "run", "--engine", "circles:fast", "-c", "pass"],
        capture_output=True,
        text=True,
        env=env,
        timeout=TIMEOUT,
    )
    assert done.returncode == 2
    assert "circles" in done.stderr and "coheriq: error:" in done.stderr


def startup_hook_installed() -> bool:
    """Whether this interpreter's site-packages has coheriq's start-up .pth file."""
    places = [*site.getsitepackages(), site.getusersitepackages(), sysconfig.get_path("purelib")]
    return any(Path(p, "coheriq-accelerate.pth").is_file() for p in places)


@pytest.mark.skipif(
    not startup_hook_installed(),
    reason="coheriq is not installed here (imported from a source tree): no start-up .pth file",
)
def test_a_spawned_child_process_inherits_the_acceleration(tmp_path):
    (tmp_path / "pool.py").write_text(
        textwrap.dedent(
            """
            import multiprocessing as mp

            def engine_in_child(_):
                import coheriq, shapes, shapes_fast
                shapes.area(shapes.Shape(2))
                assert shapes_fast.calls  # the engine ran, in the child
                return coheriq.explain(shapes.area).engine

            if __name__ == "__main__":
                import coheriq
                coheriq.accelerate("shapes", "fast")
                with mp.get_context("spawn").Pool(2) as pool:
                    print(sorted(set(pool.map(engine_in_child, range(4)))))
            """
        )
    )
    out = ok(python(lay_out(tmp_path), "", str(tmp_path / "pool.py")))
    assert out.strip() == "['fast']"


def test_pickles_written_accelerated_load_in_a_plain_interpreter(tmp_path):
    where = lay_out(tmp_path)
    ok(
        python(
            where,
            """
            import pickle, coheriq
            coheriq.accelerate("shapes", "fast")
            import shapes
            with open("shapes.pickle", "wb") as f:
                pickle.dump([shapes.Shape(2), shapes.Square(3), shapes.area], f)
            """,
        )
    )
    plain = {"PYTHONPATH": str(where)}  # no coheriq on the path at all
    out = ok(
        python(
            where,
            """
            import pickle, sys
            items = pickle.load(open("shapes.pickle", "rb"))
            print(items, "coheriq" in sys.modules)
            """,
            env=plain,
        )
    )
    assert out.startswith("[Shape(2), Square(3), <function area") and out.strip().endswith("False")


def test_a_declaration_naming_a_missing_function_leaves_the_library_untouched(tmp_path):
    wrong = json.loads(json.dumps(DECLARATION))
    wrong["modules"]["shapes.core"]["functions"].append("perimeter")
    where = lay_out(tmp_path, declaration=wrong)
    before = python(
        where,
        """
        import warnings, coheriq
        coheriq.accelerate("shapes", "fast")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import shapes
        from coheriq._call.proxy import candidate_of
        print(type(shapes.area).__name__, shapes.area.__module__, candidate_of(shapes.area))
        kind = coheriq.CoheriqDeclarationWarning
        print(" ".join(str(w.message) for w in caught if w.category is kind))
        """,
    )
    lines = ok(before).splitlines()
    assert lines[0] == "function shapes.core None"
    assert "'perimeter'" in lines[1] and "imported unmarked" in lines[1]
    after = python(
        where,
        """
        import coheriq, shapes
        try:
            coheriq.accelerate("shapes", "fast")
        except coheriq.CoheriqDeclarationError as error:
            print(error)
        from coheriq._call.proxy import candidate_of
        print(candidate_of(shapes.core.area))
        """,
    )
    lines = ok(after).splitlines()
    assert "does not define 'perimeter'" in lines[0] and lines[1] == "None"


def test_a_version_outside_the_declared_range_warns(tmp_path):
    out = ok(
        python(
            lay_out(tmp_path, version="2.1"),
            """
            import warnings, coheriq
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                coheriq.accelerate("shapes")
            print([str(w.message) for w in caught])
            import shapes
            print(coheriq.explain(shapes.area).engine)
            """,
        )
    )
    assert "is distribution 'shapes' 2.1" in out and ">=1.0,<2" in out
    assert out.strip().endswith("reference")  # a warning: the library is accelerated still


SLOW_SHAPE = '''
    import coheriq

    class Other(coheriq.engine_class("shapes"), name="other"):
        """Another engine, which brings its own declaration of Shape's module."""

        def scale(self, shape, by):
            return type(shape)(shape.side * by)
    '''


def test_two_engines_declarations_of_one_library_combine(tmp_path):
    where = lay_out(tmp_path)
    other = {
        "coheriq_declaration": 1,
        "library": "shapes",
        "distribution": "shapes",
        "modules": {"shapes.core": {"functions": ["area", "scale"], "classes": ["Shape"]}},
    }
    core = textwrap.dedent(SHAPES["shapes/core.py"]) + "\ndef scale(shape, by):\n    return shape\n"
    (where / "shapes" / "core.py").write_text(core)
    add_engine(where, "shapes_other", SLOW_SHAPE, other)
    out = ok(
        python(
            where,
            """
            import coheriq
            coheriq.accelerate("shapes", "other")
            import shapes.core as core
            known = coheriq.engine_class("shapes").__dict__.keys()
            names = known & {"area", "scale", "smooth", "Shape", "total_area"}
            print(core.scale(core.Shape(2), 3), sorted(names))
            with coheriq.using_engine("shapes", "fast"):
                print(core.area(core.Shape(2)))
            """,
        )
    )
    assert out.splitlines() == [
        "Shape(6) ['Shape', 'area', 'scale', 'smooth', 'total_area']",
        "4",
    ]


def test_two_declarations_that_disagree_are_an_error_naming_both(tmp_path):
    where = lay_out(tmp_path)
    other = {
        "coheriq_declaration": 1,
        "library": "shapes",
        "modules": {"shapes.core": {"classes": ["area"]}},
    }
    add_engine(where, "shapes_other", SLOW_SHAPE, other)
    out = python(
        where,
        """
        import coheriq
        try:
            coheriq.accelerate("shapes")
        except coheriq.CoheriqDeclarationError as error:
            print(error)
        """,
    )
    text = ok(out)
    assert "disagree" in text and "shapes_fast" in text and "shapes_other" in text


ADOPTED = {
    "shapes/core.py": """
        import coheriq

        domain = coheriq.AccelerationDomain("shapes", env_prefix="SHAPES")

        @domain.acceleration_candidate
        def area(shape):
            return shape.side * shape.side

        def total_area(shapes):
            return sum(area(s) for s in shapes)

        @domain.acceleration_candidate
        def smooth(values):
            return [v / 2 for v in values]

        @domain.acceleration_candidate
        class Shape:
            def __init__(self, side):
                self.side = side

        class Square(Shape):
            pass

        domain.materialize()
        """,
}


def test_a_library_that_adopts_coheriq_later_keeps_its_own_marking(tmp_path):
    where = lay_out(tmp_path, version="1.5", files=ADOPTED, requires=("coheriq>=0.1",))
    out = ok(
        python(
            where,
            """
            import coheriq
            coheriq.accelerate("shapes", "fast")
            import shapes, shapes.core, shapes_fast
            from coheriq._outside.activation import adapter_of
            print(shapes.area(shapes.Shape(3)), shapes_fast.calls)
            print(shapes.core.domain.module)
            print(adapter_of("shapes").stepped_back)
            """,
        )
    )
    lines = out.splitlines()
    assert lines[0] == "9 ['area']" and lines[1] == "shapes.core"
    assert "its own marking wins" in lines[2]


def test_an_interpreter_with_nothing_declared_imports_as_without(tmp_path):
    # The finder answers None at once for a module no activated library declares.
    out = ok(
        python(
            lay_out(tmp_path),
            """
            import sys, coheriq
            coheriq.accelerate("shapes")
            finder = sys.meta_path[0]
            found = finder.find_spec("json", None), finder.find_spec("shapesx", None)
            print(type(finder).__name__, *found)
            import json
            print(type(json.__loader__).__name__)
            """,
        )
    )
    assert out.splitlines() == ["DeclaredModules None None", "SourceFileLoader"]


def plugin_options() -> list[str]:
    """``-p coheriq.pytest_plugin`` where coheriq's plugin is not installed (a source tree)."""
    from importlib.metadata import entry_points

    installed = any(ep.value == "coheriq.pytest_plugin" for ep in entry_points(group="pytest11"))
    return [] if installed else ["-p", "coheriq.pytest_plugin"]


@pytest.mark.slow
def test_the_librarys_own_suite_runs_on_the_engine_with_the_pytest_plugin(tmp_path):
    where = lay_out(tmp_path)
    (where / "suite").mkdir()
    # The suite's conftest imports the library first: it must be marked already.
    (where / "suite" / "conftest.py").write_text("import shapes\nSHAPE = shapes.Shape\n")
    (where / "suite" / "test_shapes.py").write_text(
        textwrap.dedent(
            """
            import conftest, shapes, shapes_fast

            def test_area():
                assert shapes.total_area([shapes.Shape(2), conftest.SHAPE(1)]) == 5

            def test_the_engine_ran():
                assert shapes_fast.calls
            """
        )
    )
    done = python(
        where,
        "",
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        *plugin_options(),
        "--coheriq-engine=shapes:fast",
        "suite",
    )
    out = ok(done)
    assert "2 passed" in out and "shapes on 'fast' (--coheriq-engine)" in out


PICKY = '''
    import coheriq

    class Picky(coheriq.engine_class("shapes"), name="picky"):
        """Small shapes only: larger ones are declined, with the reason."""

        @coheriq.may_decline
        def area(self, shape):
            if shape.side > 10:
                raise coheriq.Decline("larger than 10")
            return shape.side * shape.side
    '''


def test_ordered_lists_declines_profile_and_snapshot_work_as_for_an_adopted_library(tmp_path):
    where = lay_out(tmp_path)
    add_engine(where, "shapes_picky", PICKY, DECLARATION)
    out = ok(
        python(
            where,
            """
            import threading, coheriq
            coheriq.accelerate("shapes", "picky, fast")
            import shapes, shapes_fast
            with coheriq.profile() as prof:
                small, large = shapes.area(shapes.Shape(2)), shapes.area(shapes.Shape(20))
            print(small, large, shapes_fast.calls, coheriq.active_implementation("shapes"))
            print([(row.candidate, row.engine, row.reason, row.count) for row in prof.declines])
            seen = []
            with coheriq.using_engine("shapes", "reference"):
                taken = coheriq.snapshot()
            thread = threading.Thread(target=taken.wrap(lambda: seen.append(
                coheriq.explain(shapes.core.area).engine)))
            thread.start(); thread.join()
            print(seen)
            """,
        )
    )
    lines = out.splitlines()
    assert lines[0] == "4 400 ['area'] picky"
    assert lines[1] == "[('area', 'picky', 'larger than 10', 1)]"
    assert lines[2] == "['reference']"


def test_the_ipython_extension_accelerates_from_a_magic(tmp_path):
    out = ok(
        python(
            lay_out(tmp_path),
            """
            import coheriq.ipython as extension

            class Shell:  # what load_ipython_extension uses of IPython's shell
                def register_magic_function(self, function, kind):
                    self.magic = (function, kind)

            shell = Shell()
            extension.load_ipython_extension(shell)
            magic, kind = shell.magic
            magic("shapes:fast")
            import coheriq, shapes
            print(kind, coheriq.explain(shapes.area).engine)
            """,
        )
    )
    assert out.splitlines() == [
        "coheriq: library 'shapes' is accelerated from the outside, on engine 'fast'.",
        "line fast",
    ]


def test_reloading_the_library_and_its_modules_keeps_them_marked(tmp_path):
    out = ok(
        python(
            lay_out(tmp_path),
            """
            import importlib, coheriq
            coheriq.accelerate("shapes", "fast")
            import shapes, shapes.core, shapes_fast
            importlib.reload(shapes.core)
            importlib.reload(shapes)
            shapes.core.area(shapes.core.Shape(2))
            shapes.area(shapes.Shape(3))
            print(shapes_fast.calls, coheriq.explain(shapes.area).engine)
            print(isinstance(shapes.Square(1), shapes.Shape))
            """,
        )
    )
    assert out.splitlines() == ["['area', 'area'] fast", "True"]


def test_coheriq_check_compares_the_declaration_and_the_overrides_with_the_library(tmp_path):
    good = lay_out(tmp_path / "good")
    wide = {"COLUMNS": "1000"}  # a line each, unwrapped
    fine = python(good, "", "-m", "coheriq", "check", "shapes", env=wide)
    assert fine.returncode == 0 and "No problems" in fine.stdout, fine.stdout + fine.stderr
    wrong = json.loads(json.dumps(DECLARATION))
    wrong["modules"]["shapes.core"]["functions"].append("perimeter")
    bad = lay_out(tmp_path / "bad", declaration=wrong, version="3.0")
    found = python(bad, "", "-m", "coheriq", "check", "shapes", env=wide)
    assert found.returncode == 1, found.stdout + found.stderr
    assert "does not define 'perimeter'" in found.stdout
    assert "was written against >=1.0,<2" in found.stdout


def test_runners_stack(tmp_path):
    # Another runner after this one (python -m coheriq run ... -m other.runner ...): here,
    # a second coheriq runner, which chooses the engine of the library the first marked.
    where = lay_out(tmp_path)
    first = ["-m", "coheriq", "run", "--engine", "shapes"]
    second = ["-m", "coheriq", "run", "--engine", "shapes:fast", "-m", "shapes.run_me", "x"]
    out = ok(python(where, "", *first, *second))
    assert out.strip() == "fast 9 ['x']"


def test_a_misspelled_engine_is_an_error_before_anything_is_imported(tmp_path):
    out = ok(
        python(
            lay_out(tmp_path),
            """
            import os, sys, coheriq
            try:
                coheriq.accelerate("shapes", "fsat")
            except coheriq.CoheriqEngineNotFoundError as error:
                print(error)
            print("shapes" in sys.modules, os.environ.get("SHAPES_ENGINE"))
            """,
        )
    )
    said, state = out.splitlines()
    assert "'fsat'" in said and "Did you mean 'fast'?" in said
    assert state == "False None"  # nothing imported, no engine named for child processes


CIRCLES = {
    "circles/__init__.py": """
        def area(radius):
            return 3 * radius * radius
        """,
    "circles_fast.py": """
        import coheriq

        class Fast(coheriq.engine_class("circles"), name="fast"):
            def area(self, radius):
                return "circles' engine"
        """,
}


def lay_out_two_libraries(where: Path, shapes_prefix: str) -> Path:
    """``shapes``, whose declaration gives ``env_prefix`` ``shapes_prefix``, and ``circles``:
    two libraries declared from the outside, each with an engine named "fast"."""
    lay_out(where, declaration={**DECLARATION, "env_prefix": shapes_prefix}, files=CIRCLES)
    write_dist(where, "circles", "1.0")
    circles = {
        "coheriq_declaration": 1,
        "library": "circles",
        "distribution": "circles",
        "modules": {"circles": {"functions": ["area"]}},
    }
    (where / "circles_fast.circles.json").write_text(json.dumps(circles))
    write_dist(
        where,
        "circles_fast",
        "1.0",
        """
        [coheriq.engines.circles]
        fast = circles_fast

        [coheriq.declarations.circles]
        fast = circles_fast:circles_fast.circles.json
        """,
    )
    return where


def test_a_declaration_cannot_choose_an_engine_for_another_library(tmp_path):
    # shapes' declaration names circles' variable: accelerating shapes on its engine
    # "fast" must not choose circles' engine "fast", here or in a child process.
    where = lay_out_two_libraries(tmp_path, "CIRCLES")
    out = ok(
        python(
            where,
            """
            import os, coheriq
            try:
                coheriq.accelerate("shapes", "fast")
            except coheriq.CoheriqDeclarationError as error:
                print(error)
            coheriq.accelerate("circles")  # marked, its engine not chosen
            import circles
            print(circles.area(1), os.environ.get("CIRCLES_ENGINE"))
            """,
        )
    )
    said, circles = out.splitlines()
    assert circles == "3 None"
    assert "'shapes_fast'" in said  # the distribution that ships the declaration
    assert "library 'shapes'" in said and "'CIRCLES'" in said
    assert "'SHAPES'" in said  # the fix: its own name in capitals, or no env_prefix
    # The start-up variable says the same, and chooses nothing for circles.
    started = python(
        where,
        "import circles, os; print(circles.area(1), os.environ.get('CIRCLES_ENGINE'))",
        env={"COHERIQ_ACCELERATE": "shapes:fast,circles"},
    )
    if startup_hook_installed():
        assert ok(started).strip() == "3 None"
        assert "'shapes_fast'" in started.stderr and "'CIRCLES'" in started.stderr


def test_a_declaration_may_spell_out_its_own_librarys_prefix(tmp_path):
    where = lay_out_two_libraries(tmp_path, "SHAPES")
    out = python(
        where,
        """
        import os, coheriq
        coheriq.accelerate("shapes", "fast")
        import shapes
        print(shapes.area(shapes.Shape(3)), os.environ.get("SHAPES_ENGINE"))
        """,
    )
    assert ok(out).strip() == "9 fast"


# -- COHERIQ_ACCELERATE at start-up ------------------------------------------------------------

STARTUP_FILE = ROOT / "coheriq" / "_outside" / "coheriq-accelerate.pth"


def started(
    where: Path, code: str, accelerate: str, *also: str
) -> subprocess.CompletedProcess[str]:
    """``code`` run as the start-up file would start it, where ``COHERIQ_ACCELERATE`` is
    ``accelerate``: ``site`` is left out (``-S``), and the file's line of this source tree
    runs as ``site`` runs it, so that an installed copy of another version stays out.
    ``also``: more directories to import from (those of NumPy, say)."""
    line = next(x for x in STARTUP_FILE.read_text().splitlines() if x.startswith("import "))
    path = os.pathsep.join([str(where), str(ROOT), *also])
    env = {"COHERIQ_ACCELERATE": accelerate, "PYTHONPATH": path}
    return python(where, f"{line}\n{textwrap.dedent(code)}", "-S", env=env)


LOADED = """
    import sys
    heavy = ("coheriq", "importlib.metadata", "importlib.resources", "importlib.abc", "json")
    print(sorted(m for m in sys.modules if m.startswith(heavy)))
    """


def test_coheriq_accelerate_imports_nothing_of_coheriq_until_the_library_is_imported(tmp_path):
    # Every process started with the variable (child processes too) pays for what the
    # start-up file imports: only its own small module, until the library is imported.
    where = lay_out(tmp_path)
    out = ok(started(where, LOADED, "shapes:fast"))
    assert out.strip() == "['coheriq._outside.startup']"
    out = ok(
        started(
            where,
            """
            import os, shapes, shapes_fast, coheriq
            print(shapes.area(shapes.Shape(3)), shapes_fast.calls)
            print(coheriq.explain(shapes.area).engine, os.environ["SHAPES_ENGINE"])
            """,
            "shapes:fast",
        )
    )
    assert out.splitlines() == ["9 ['area']", "fast fast"]


def test_coheriq_accelerate_says_at_start_up_what_it_cannot_accelerate(tmp_path):
    done = started(lay_out(tmp_path), "print('started')", "shapes:fsat,circles")
    assert ok(done) == "started\n"
    said = "coheriq: COHERIQ_ACCELERATE names library {!r}, which cannot be accelerated: "
    lines = done.stderr.splitlines()
    assert len(lines) == 2, done.stderr
    assert lines[0].startswith(said.format("shapes")) and "Did you mean 'fast'?" in lines[0]
    assert lines[1].startswith(said.format("circles")) and "no installed package" in lines[1]


def publish_stdlib_declaration(where: Path, library: str, modules: dict[str, Any]) -> None:
    """An (empty) engine package ``<library>_fast`` declaring standard-library ``library``."""
    declaration = {
        "coheriq_declaration": 1,
        "library": library,
        "distribution": None,
        "modules": modules,
    }
    (where / f"{library}_fast.py").write_text("")
    (where / f"{library}_fast.json").write_text(json.dumps(declaration))
    write_dist(
        where,
        f"{library}_fast",
        "1.0",
        f"[coheriq.declarations.{library}]\nfast = {library}_fast:{library}_fast.json\n",
    )


def test_coheriq_accelerate_naming_a_module_of_the_standard_library_waits_for_its_import(
    tmp_path,
):
    # statistics:numpy, the guide's own case: a process that never imports statistics
    # does not import coheriq either; the first import accelerates it, on the engine.
    sys.path.insert(0, str(ROOT / "tests" / "cpython"))
    try:
        from published import publish_numpy_engine
    finally:
        sys.path.remove(str(ROOT / "tests" / "cpython"))
    where = lay_out(tmp_path)
    publish_numpy_engine(where, declaration=True)
    out = ok(started(where, LOADED, "statistics:numpy"))
    assert out.strip() == "['coheriq._outside.startup']"
    code = """
        import statistics, coheriq
        print(statistics.fmean([1.0, 2.0, 6.0]), coheriq.explain(statistics.fmean).engine)
        print(sys.modules["statistics"] is statistics, statistics.__spec__.name)
        """
    numpy = str(Path(pytest.importorskip("numpy").__file__).parent.parent)
    out = ok(
        started(where, textwrap.dedent(LOADED) + textwrap.dedent(code), "statistics:numpy", numpy)
    )
    assert out.splitlines()[1:] == ["3.0 numpy", "True statistics"]


THREADS_AND_FORK = """
    import os, sys, threading
    barrier = threading.Barrier(4)
    found = []

    def load():
        barrier.wait()
        import {library}
        found.append({library})

    threads = [threading.Thread(target=load) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    import {library}, coheriq._outside.declarations as declarations
    print(len(found), all(m is {library} for m in found), sys.modules["{library}"] is {library})
    print(declarations.re is re, {library}.__spec__.loader is not None)
    print(coheriq.explain({library}.{name}).candidate == "{name}")
    sys.stdout.flush()
    pid = os.fork() if hasattr(os, "fork") else None
    if not pid:
        import {library}
        marked = coheriq.explain({library}.{name}).candidate == "{name}"
        print("child" if pid == 0 else "no fork", sys.modules["{library}"] is {library}, marked)
        sys.stdout.flush()
        os._exit(0)
    os.waitpid(pid, 0)
    """


@pytest.mark.parametrize(
    ("library", "name"),
    [("fractions", "Fraction"), ("re", "escape")],
    ids=["not-imported-by-coheriq", "imported-by-coheriq-while-accelerating"],
)
def test_a_standard_library_module_accelerated_at_its_import_runs_once_under_threads_and_fork(
    tmp_path, library, name
):
    # coheriq's own modules import re: accelerating it at its import imports it, and
    # that import's module is the one the triggering import gets (its body ran once).
    where = lay_out(tmp_path)
    kind = "classes" if name[0].isupper() else "functions"
    publish_stdlib_declaration(where, library, {library: {kind: [name]}})
    code = "import coheriq, re\n" if library == "fractions" else "import coheriq\n"
    body = textwrap.dedent(THREADS_AND_FORK).format(library=library, name=name)
    out = ok(started(where, textwrap.dedent(LOADED) + code + body, library))
    lines = out.splitlines()
    assert lines[0] == "['coheriq._outside.startup']" or library == "re", out
    assert lines[-4:-1] == ["4 True True", "True True", "True"], out
    assert lines[-1] in ("child True True", "no fork True True"), out


def test_a_standard_library_module_that_importing_coheriq_imports_is_marked_after_it(tmp_path):
    # `import coheriq` imports types: it cannot accelerate types while it is being
    # imported itself; it does at the next import, marking types in place.
    where = lay_out(tmp_path)
    publish_stdlib_declaration(where, "types", {"types": {"functions": ["resolve_bases"]}})
    code = """
        import coheriq, types
        print(coheriq.explain(types.resolve_bases).candidate)
        """
    assert ok(started(where, code, "types")) == "resolve_bases\n"


# Thread B imports re (which coheriq's modules import) through a finder after the deferred
# one whose loader waits, then imports a module it has not yet; meanwhile thread A imports
# the library, which accelerates it: A's acceleration needs re, which B is importing, and B
# needs the import system's global lock. faulthandler ends a hang after 30 s, with the stacks.
IMPORTING_WHILE_ACCELERATING = """
    import faulthandler, importlib.machinery, sys, threading, time
    faulthandler.dump_traceback_later(30, exit=True)
    print("re" in sys.modules)
    b_runs_re = threading.Event()

    class SlowLoader:
        def __init__(self, loader):
            self.loader = loader

        def create_module(self, spec):
            return self.loader.create_module(spec)

        def exec_module(self, module):
            b_runs_re.set()
            time.sleep(1)  # while A starts accelerating
            import colorsys  # a module not imported yet: the import system's global lock
            self.loader.exec_module(module)

    class Slow:
        def find_spec(self, name, path=None, target=None):
            if name != "re":
                return None
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            spec.loader = SlowLoader(spec.loader)
            return spec

    sys.meta_path.append(Slow())
    sys.meta_path.remove(importlib.machinery.PathFinder)
    sys.meta_path.append(importlib.machinery.PathFinder)
    found = []
    b = threading.Thread(target=lambda: found.append(__import__("re")))
    b.start()
    b_runs_re.wait()
    import shapes, shapes_fast, coheriq
    b.join()
    print(shapes.area(shapes.Shape(3)), shapes_fast.calls, coheriq.explain(shapes.area).engine)
    print(found == [sys.modules["re"]], type(sys.modules["re"].__loader__).__name__)
    """


@pytest.mark.slow
def test_a_library_accelerated_while_another_thread_imports_what_coheriq_needs_does_not_hang(
    tmp_path,
):
    # The libraries are accelerated at their first import, in the loader's step (under the
    # library's own module lock), not in the finder's, which the import system calls
    # holding its global lock: the other thread's import goes on, and both finish.
    out = ok(started(lay_out(tmp_path), IMPORTING_WHILE_ACCELERATING, "shapes:fast"))
    assert out.splitlines() == ["False", "9 ['area'] fast", "True SlowLoader"], out


# Two libraries the variable names, imported at once by two threads, where accelerating
# the first (shapes, in A) imports the second (re, which B is importing): B found re
# before A's acceleration began, and waits for it holding re's module lock, while A's
# acceleration needs re. The import system cannot see that wait; B gives up after
# startup.WAIT_SECONDS (2 here), saying why, and A goes on. (The test holds B between
# finding re and loading it, where a thread switch can leave it, until A accelerates.)
TWO_LIBRARIES_AT_ONCE = """
    import faulthandler, importlib.machinery, sys, threading, time
    faulthandler.dump_traceback_later(60, exit=True)
    startup = sys.modules["coheriq._outside.startup"]
    startup.WAIT_SECONDS = 2
    b_found_re, a_accelerates = threading.Event(), threading.Event()
    create_module = startup._Accelerating.create_module

    def b_waits_for_a(self, spec):
        if spec.name == "re":
            b_found_re.set()
            a_accelerates.wait()
            time.sleep(0.2)  # while A goes on into coheriq's package
        return create_module(self, spec)

    startup._Accelerating.create_module = b_waits_for_a

    class SlowLoader:
        def __init__(self, loader):
            self.loader = loader

        def create_module(self, spec):
            return self.loader.create_module(spec)

        def exec_module(self, module):
            a_accelerates.set()
            time.sleep(1)  # while B waits for A's acceleration
            self.loader.exec_module(module)

    class Slow:  # coheriq's package body, as A's acceleration imports it, takes a second
        def find_spec(self, name, path=None, target=None):
            if name != "coheriq":
                return None
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            spec.loader = SlowLoader(spec.loader)
            return spec

    sys.meta_path.insert(1, Slow())  # after the deferred finder
    errors = []

    def import_re():
        try:
            __import__("re")
        except ImportError as error:
            errors.append(str(error))

    b = threading.Thread(target=import_re)
    b.start()
    b_found_re.wait()
    a = threading.Thread(target=lambda: __import__("shapes"))
    a.start()
    a.join()
    b.join()
    import shapes, shapes_fast
    print(shapes.area(shapes.Shape(3)), shapes_fast.calls)
    print(errors)
    """


@pytest.mark.slow
def test_two_named_libraries_imported_at_once_that_wait_for_each_other_fail_saying_why(
    tmp_path,
):
    where = lay_out(tmp_path)
    publish_stdlib_declaration(where, "re", {"re": {"functions": ["escape"]}})
    out = ok(started(where, TWO_LIBRARIES_AT_ONCE, "re,shapes:fast"))
    lines = out.splitlines()
    assert lines[0] == "9 ['area']", out
    assert "gave up" in lines[1] and "Import the libraries it names in one thread" in lines[1], out


def test_a_late_accelerate_that_leaves_every_name_of_the_package_unmarked_warns(tmp_path):
    # The package star-imports its declared module: every public name was bound before
    # the call, so accelerating marks nothing a user reaches through the package.
    files = {"shapes/__init__.py": "from shapes.core import *\n"}
    code = """
        import warnings
        import coheriq
        {before}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            coheriq.accelerate("shapes", "fast")
        import shapes
        print(shapes.area(shapes.Shape(3)))
        for warning in caught:
            print(warning.category.__name__, warning.message)
        """
    where = lay_out(tmp_path, files=files)
    out = ok(python(where, code.format(before="import shapes")))
    said = [line for line in out.splitlines()[1:] if "Class shapes.core.Shape" not in line]
    assert out.splitlines()[0] == "9" and len(said) == 1, out
    assert said[0].startswith("CoheriqDeclarationWarning Library 'shapes' was imported"), out
    assert "'area', 'total_area'" in said[0] and "COHERIQ_ACCELERATE" in said[0], out
    assert "coheriq.accelerate('shapes') first" in said[0], out
    assert ok(python(where, code.format(before=""))) == "9\n"  # accelerated before: silent
