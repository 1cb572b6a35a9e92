"""Every bad input answered, broken engine packages survived, the environment is data.

Each case checks the error class, that its message names the offending value and
says what to do, and that afterwards every domain is exactly as it was (as the
public introspection functions see it).
"""

import subprocess
import sys

import pytest

import coheriq as cq
from coheriq._library.domain import all_domains
from conftest import build_lib


def world_state():
    return [
        (d.name, d.materialized, cq.available_engines(d), cq.active_implementation(d))
        for d in all_domains()
    ]


class Plain:
    pass


def plain_function():
    return None


@pytest.fixture
def world(lib, two_engines, unique):
    other = build_lib(unique("other"))

    class OtherEngine(cq.engine_class(other.name), name="elsewhere"):
        pass

    # Constructing an AccelerationEngine reserves its name (as in coheriq 0.0.x),
    # so the engines that the cases misuse exist before the world is looked at.
    unready = {
        "x": cq.AccelerationEngine(lib.name, "x"),
        "x_bases_number": cq.AccelerationEngine(lib.name, "x_bases_number", bases=[3]),
        "x_bases_other": cq.AccelerationEngine(lib.name, "x_bases_other", bases=[OtherEngine]),
    }
    return {
        "lib": lib,
        "other": other,
        "other_engine": OtherEngine,
        "fast": two_engines[0],
        **unready,
    }


def _cases():
    """(id, action taking the world, expected error, text the message must contain)."""
    T, N, E, D = (
        cq.CoheriqTypeError,
        cq.CoheriqEngineNotFoundError,
        cq.CoheriqEngineError,
        cq.CoheriqDomainError,
    )
    DN = cq.CoheriqDomainNotFoundError
    # Bad names raise classes that are also what coheriq 0.0.x raised there.
    DName, EName = cq.CoheriqDomainNameError, cq.CoheriqEngineNameError
    cases = []
    for value, text in [(None, "None"), (3, "3"), (2.5, "2.5"), (Plain, "Plain"), (b"x", "b'x'")]:
        cases += [
            (
                f"AccelerationDomain({text})",
                lambda w, v=value: cq.AccelerationDomain(v),
                DName,
                text,
            ),
            (f"engine_class({text})", lambda w, v=value: cq.engine_class(v), T, text),
            (f"enable_engine({text}, e)", lambda w, v=value: cq.enable_engine(v, "fast"), T, text),
            (
                f"enable_engine(d, {text})",
                lambda w, v=value: cq.enable_engine(w["lib"].name, v),
                T,
                text,
            ),
            (f"using_engine({text}, e)", lambda w, v=value: cq.using_engine(v, "fast"), T, text),
            (
                f"using_engine(d, {text})",
                lambda w, v=value: cq.using_engine(w["lib"].name, v),
                T,
                text,
            ),
            (f"available_engines({text})", lambda w, v=value: cq.available_engines(v), T, text),
            (
                f"active_implementation({text})",
                lambda w, v=value: cq.active_implementation(v),
                T,
                text,
            ),
            (f"resolve_impl({text})", lambda w, v=value: cq.resolve_impl(v), T, text),
            (f"engine_of({text})", lambda w, v=value: cq.engine_of(v), T, text),
            (
                f"AccelerationEngine({text}, e)",
                lambda w, v=value: cq.AccelerationEngine(v, "x"),
                T,
                text,
            ),
            (
                f"AccelerationEngine(d, {text})",
                lambda w, v=value: cq.AccelerationEngine(w["lib"].name, v),
                EName,
                text,
            ),
            *(
                []
                if value is None  # engine_class(d, None) is the reference class, by design
                else [
                    (
                        f"engine_class(d, {text})",
                        lambda w, v=value: cq.engine_class(w["lib"].name, v),
                        EName,
                        text,
                    )
                ]
            ),
        ]
    for name in ["", " ", "\t", "a b", "x:y"]:
        cases += [
            (
                f"AccelerationDomain({name!r})",
                lambda w, n=name: cq.AccelerationDomain(n),
                DName,
                repr(name),
            ),
            (
                f"enable_engine(d, {name!r})",
                lambda w, n=name: cq.enable_engine(w["lib"].name, n),
                EName,
                repr(name),
            ),
            (
                f"engine_class(d, {name!r})",
                lambda w, n=name: cq.engine_class(w["lib"].name, n),
                EName,
                repr(name),
            ),
            (
                f"candidate name {name!r}",
                lambda w, n=name: w["lib"].domain.acceleration_candidate(name=n),
                T,
                repr(name),
            ),
        ]
    cases += [
        (
            "domain of another's name",
            lambda w: cq.AccelerationDomain(w["lib"].name),
            D,
            "exists already",
        ),
        ("env_prefix 3", lambda w: cq.AccelerationDomain("fresh", env_prefix=3), T, "3"),
        ("env_prefix '1X'", lambda w: cq.AccelerationDomain("fresh", env_prefix="1X"), T, "'1X'"),
        ("strict 'yes'", lambda w: cq.AccelerationDomain("fresh", strict="yes"), T, "'yes'"),
        (
            "unknown domain",
            lambda w: cq.enable_engine("nosuchdomain", "fast"),
            DN,
            "'nosuchdomain'",
        ),
        (
            "unknown engine",
            lambda w: cq.enable_engine(w["lib"].name, "fsat"),
            N,
            "Did you mean 'fast'",
        ),
        (
            "another domain's engine name",
            lambda w: cq.enable_engine(w["lib"].name, "elsewhere"),
            N,
            "'elsewhere'",
        ),
        (
            "another domain's engine class",
            lambda w: cq.enable_engine(w["lib"].name, w["other_engine"]),
            T,
            "belongs to domain",
        ),
        (
            "a function as engine",
            lambda w: cq.enable_engine(w["lib"].name, plain_function),
            T,
            "plain_function",
        ),
        ("a plain class as engine", lambda w: cq.enable_engine(w["lib"].name, Plain), T, "Plain"),
        (
            "scope on unknown engine",
            lambda w: cq.using_engine(w["lib"].name, "fsat").__enter__(),
            N,
            "'fsat'",
        ),
        ("mark a number", lambda w: w["lib"].domain.acceleration_candidate(3), T, "3"),
        (
            "mark after materialize",
            lambda w: w["lib"].domain.acceleration_candidate(plain_function),
            D,
            "'plain_function'",
        ),
        ("materialize twice", lambda w: w["lib"].domain.materialize(), D, "materialized already"),
        (
            "resolve a plain function",
            lambda w: cq.resolve_impl(plain_function),
            T,
            "plain_function",
        ),
        (
            "resolve the reference itself",
            lambda w: cq.resolve_impl(w["lib"].normalize.__wrapped__),
            T,
            "normalize",
        ),
        ("engine_of a class candidate", lambda w: cq.engine_of(w["lib"].Batch), T, "Batch"),
        (
            "override a non-candidate",
            lambda w: w["x"].override(name="normalise")(plain_function),
            E,
            "Did you mean 'normalize'",
        ),
        (
            "override with a number",
            lambda w: w["x"].override(3),
            T,
            "3",
        ),
        (
            "bases a string",
            lambda w: cq.AccelerationEngine(w["lib"].name, "x", bases="fast"),
            T,
            "'fast'",
        ),
        (
            "bases with a number",
            lambda w: w["x_bases_number"].materialize(),
            T,
            "3",
        ),
        (
            "bases of another domain",
            lambda w: w["x_bases_other"].materialize(),
            T,
            "belongs to domain",
        ),
        (
            "unmaterialized engine",
            lambda w: cq.enable_engine(w["lib"].name, w["x"]),
            E,
            "'x'",
        ),
    ]
    return cases


CASES = _cases()


@pytest.mark.parametrize(
    ("action", "error", "text"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_input_is_answered_and_changes_nothing(world, action, error, text):
    before = world_state()
    with pytest.raises(cq.CoheriqError) as raised:
        action(world)
    assert type(raised.value) is error
    message = str(raised.value)
    assert text in message
    assert len(message) > 40 and message.rstrip()[-1] in ".?)", message  # a sentence with advice
    assert world_state() == before


# -- broken engine packages ---------------------------------------------------------

GOOD = """
import coheriq

class Good(coheriq.engine_class({domain!r}), name="good"):
    def total(self, xs):
        return ("good", sum(xs))
"""

BROKEN = {
    "raises ImportError": (
        "import no_such_dependency_xyz\n",
        ImportError,
        "no_such_dependency_xyz",
    ),
    "has a syntax error": ("def broken(:\n", SyntaxError, "SyntaxError"),
    "defines nothing": ("VALUE = 1\n", None, "did not define an engine of that name"),
    "defines another name": (
        "import coheriq\nclass X(coheriq.engine_class({domain!r}), name='renamed'):\n    pass\n",
        None,
        "It defined 'renamed' instead",
    ),
    "fails in __init__": (
        "import coheriq\nclass X(coheriq.engine_class({domain!r}), name='broken'):\n"
        "    def __init__(self):\n        raise OSError('no device here')\n",
        OSError,
        "no device here",
    ),
}


@pytest.mark.parametrize("how", [*BROKEN, "has a malformed entry point"])
def test_broken_engine_package_is_survived(lib, make_dist, unique, how):
    module = unique("broken_mod")
    group = f"coheriq.engines.{lib.name}"
    good_module = unique("good_mod")
    make_dist(
        unique("good_dist"),
        {good_module: GOOD.format(domain=lib.name)},
        {group: {"good": good_module}},
    )
    if how == "has a malformed entry point":
        source, cause, text = "", None, "'broken'"
        value = f"{module}:not a valid:value"
    else:
        source, cause, text = BROKEN[how]
        value = module
    dist = unique("broken_dist")
    make_dist(dist, {module: source.format(domain=lib.name)}, {group: {"broken": value}})
    before = world_state()
    with pytest.raises(cq.CoheriqEngineError) as raised:
        cq.enable_engine(lib.name, "broken")
    message = str(raised.value)
    assert "'broken'" in message and lib.name in message and text in message
    if how != "fails in __init__":
        assert isinstance(raised.value, cq.CoheriqEngineLoadError) and dist in message
    if cause is not None:
        assert isinstance(raised.value.__cause__, cause)
    assert not cq.explain(lib.name).settled
    assert world_state() == before  # the domain is exactly as it was
    cq.enable_engine(lib.name, "good")
    assert lib.total([1]) == ("good", 1)


# -- the environment variable is data, not code ---------------------------------------

SENTINEL = """
import sys
sys.modules.setdefault("coheriq_sentinel_log", type(sys)("coheriq_sentinel_log"))
sys.modules["coheriq_sentinel_log"].imported = True
"""


def _in_stdlib(module_name):
    return module_name.partition(".")[0] in sys.stdlib_module_names


@pytest.mark.parametrize(
    "value",
    [
        "os",
        "os:system",
        "../x",
        "mod.attr",
        "sentinel_mod",
        "sentinel_mod:attr",
        "good_mod",
        "x" * 10_000,
        "ünïcödé",
        "reference ; rm -rf /",
        "__import__('os')",
    ],
    ids=lambda v: v[:20],
)
def test_environment_variable_never_imports_a_module(lib, make_dist, monkeypatch, value):
    group = f"coheriq.engines.{lib.name}"
    make_dist(
        "envdata_dist",
        {"sentinel_mod": SENTINEL, "good_mod": GOOD.format(domain=lib.name)},
        {group: {"good": "good_mod"}},
    )
    for name in ("sentinel_mod", "good_mod", "coheriq_sentinel_log"):
        sys.modules.pop(name, None)
    monkeypatch.setenv(lib.env_var, value)
    modules_before = set(sys.modules)
    with pytest.raises(cq.CoheriqEngineNotFoundError) as raised:
        lib.total([1])
    assert lib.env_var in str(raised.value)
    # Nothing outside the standard library was imported. Reading the metadata may
    # import the standard library's parts (from 3.15 importlib.metadata imports
    # ``email`` only when a distribution's METADATA is first read).
    imported = {m for m in set(sys.modules) - modules_before if not _in_stdlib(m)}
    assert imported == set()
    assert not cq.explain(lib.name).settled
    monkeypatch.setenv(lib.env_var, "good")  # the advertised name is what loads the module
    assert lib.total([1]) == ("good", 1)
    assert "good_mod" in sys.modules and "sentinel_mod" not in sys.modules


# -- raw errors are coheriq errors that say what to do ------------------------------


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


# -- messages that name what is wrong -----------------------------------------------


def test_an_engine_of_an_earlier_copy_is_named_as_such(unique):
    import collections
    import functools

    with cq.testing.isolated():
        name = unique()
        source = (
            "import coheriq\n"
            f"domain = coheriq.AccelerationDomain({name!r})\n"
            "@domain.acceleration_candidate\n"
            "def f(x):\n"
            "    return x\n"
            "domain.materialize()\n"
        )

        def make():  # a module's body, run again in a new module object: a copy
            namespace = {"__name__": "copied_module"}
            exec(compile(source, "copied_module.py", "exec"), namespace)
            return namespace["domain"]

        first = make()

        class Fast(cq.engine_class(first), name="fast"):
            def f(self, x):
                return -x

        second = make()  # the module runs again: a copy of the domain
        with pytest.raises(cq.CoheriqTypeError, match="earlier copy of domain"):
            cq.using_engine(second, Fast).__enter__()

        with pytest.raises(cq.CoheriqTypeError, match=r"partial has no __name__.*name='\.\.\.'"):
            second_domain = cq.AccelerationDomain(unique())
            second_domain.acceleration_candidate(functools.partial(print))
        engine = cq.AccelerationEngine(second, "decorated")
        with pytest.raises(cq.CoheriqTypeError, match=r"'decorated'.*override\(name="):
            engine.override(functools.partial(print))
        with cq.using_engine(second, collections.deque(["nosuch", cq.REFERENCE])):
            assert cq.active_implementation(second) == cq.REFERENCE


# -- a mistake of the library's or the engine's, named with its fix -------------------------


def test_a_library_that_never_materializes_is_told_to_call_materialize(unique):
    domain = cq.AccelerationDomain(unique())

    @domain.acceleration_candidate
    def f(x):
        return x

    for attempt in (lambda: f(1), lambda: cq.enable_engine(domain.name, "fast")):
        with pytest.raises(cq.CoheriqDomainError) as caught:
            attempt()
        message = str(caught.value)
        assert f"Module {__name__!r}, which creates it, has not called materialize()" in message
        assert "import the library completely" not in message


def test_an_engine_defined_before_its_library_is_imported_is_told_to_import_it(unique):
    name = unique()
    with pytest.raises(cq.CoheriqEngineDomainNotFoundError) as caught:

        class Early(cq.engine_class(name), name="early"):
            pass

    message = str(caught.value)
    assert (
        f"(by convention, the module named {name!r}) at the top of the engine's module" in message
    )


def test_an_engines_message_ending_in_a_question_keeps_it_without_a_full_stop(lib):
    class Asking(cq.engine_class(lib.name), name="asking"):
        def __init__(self):
            raise RuntimeError("no kernel 'fastt'. Did you mean 'fast'?")

    with pytest.raises(cq.CoheriqEngineStartError) as caught:
        cq.enable_engine(lib.name, "asking")
    assert "Did you mean 'fast'? Nothing was changed" in str(caught.value)
