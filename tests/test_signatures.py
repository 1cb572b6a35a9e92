"""Overrides are checked against their candidates' signatures when an engine is created."""

import functools
import itertools
import sys
import warnings

import pytest

import coheriq as cq


@pytest.fixture
def domain(unique, monkeypatch):
    monkeypatch.delenv("COHERIQ_STRICT", raising=False)
    made = cq.AccelerationDomain(unique())

    @made.acceleration_candidate
    def f(a, b=1, /, c=2, *, d, e=3):
        return "reference"

    @made.acceleration_candidate
    def g(x, *args, **kwargs):
        return "reference"

    @made.acceleration_candidate
    class Box:
        def __init__(self, size, *, fill=0):
            self.size = size

    made.materialize()
    return made


_engines = itertools.count()


def problems_of(domain, name, override, *, form="class"):
    """Define an engine overriding ``name`` and return the warnings it raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if form == "class":
            type(cq.engine_class(domain))(
                "E", (cq.engine_class(domain),), {name: override}, name=f"e{next(_engines)}"
            )
        else:
            engine = cq.AccelerationEngine(domain, f"decorated{next(_engines)}")
            engine.override(name)(override)
            engine.materialize()
    return [str(w.message) for w in caught if issubclass(w.category, cq.CoheriqSignatureWarning)]


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        (lambda self, a, b=1, /, c=2, *, d, e=3: 0, None),
        (lambda self, a, b=1, /, c=2, *, d, e=3, extra=None: 0, None),  # extra optional
        (lambda self, *args, **kwargs: 0, None),  # catch-alls
        (lambda self, a, b=1, /, *args, d, **kwargs: 0, None),
        (lambda self, a, b, /, c=2, *, d, e=3: 0, "parameter 'b' lost its default"),
        (lambda self, a, b=1, /, *, c=2, d, e=3: 0, "'c' is keyword-only in the override"),
        (lambda self, a, b=1, c=2, /, *, d, e=3: 0, "'c' is positional-only in the override"),
        (lambda self, a, b=1, /, c=2, *, e=3: 0, "keyword-only parameter 'd' is missing"),
        (lambda self, a, /, c=2, *, d, e=3: 0, "positional parameter 2 ('b') is missing"),
        (lambda self, a, b=1, /, c=2, *, d, e=3, z: 0, "the override requires 'z'"),
        (lambda self, a, b=1: 0, "parameter 'c' is missing"),
        (lambda self, a, b=1, /, c=2, *, d, e=4: 0, "'e' defaults to 4 in the override but to 3"),
        (lambda self, a, b=1, /, x=0, c=2, *, d, e=3: 0, "'c' is at position 4 in the override"),
    ],
)
def test_function_overrides(domain, override, expected):
    found = problems_of(domain, "f", override)
    if expected is None:
        assert found == []
    else:
        assert len(found) == 1 and expected in found[0]
        assert repr(domain.name) in found[0] and "'f'" in found[0]


def test_variadic_candidates_need_variadic_overrides(domain):
    (message,) = problems_of(domain, "g", lambda self, x: 0)
    assert "(*args)" in message and "(**kwargs)" in message


def test_static_and_class_methods_and_decorator_form(domain):
    assert problems_of(domain, "f", staticmethod(lambda a, b=1, /, c=2, *, d, e=3: 0)) == []
    assert problems_of(domain, "f", classmethod(lambda cls, a, b=1, /, c=2, *, d, e=3: 0)) == []
    (message,) = problems_of(domain, "f", lambda a, b=1, /, *, d, e=3: 0, form="decorator")
    assert "'decorated" in message and "'c' is missing" in message


def test_builtins_without_signature_are_accepted(domain):
    assert problems_of(domain, "g", staticmethod(min)) == []  # min has no signature


def test_class_candidate_constructors_are_compared(domain):
    class Good:
        def __init__(self, size, *, fill=0, device=None):
            pass

    class Bad:
        def __init__(self, length, fill=0):
            pass

    assert problems_of(domain, "Box", Good) == []
    (message,) = problems_of(domain, "Box", Bad)
    assert "constructor of class candidate 'Box'" in message
    assert "'size' is missing" in message and "the override requires 'length'" in message
    assert "Candidate: Box(size, *, fill=0); override: Box(length, fill=0)" in message


def test_warning_points_at_the_engine_definition(domain):
    with pytest.warns(cq.CoheriqSignatureWarning) as record:

        class Engine(cq.engine_class(domain), name="pointed"):
            def f(self, a):
                return a

    assert record[0].filename == __file__


def logged(fn):
    """An ordinary decorator: its wrapper takes any arguments and passes them on."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    return wrapper


@pytest.mark.parametrize("strict", ["0", "1"])
def test_a_method_behind_an_args_kwargs_decorator_is_accepted(unique, monkeypatch, strict):
    """The wrapper's *args takes the instance along with the caller's arguments: it is
    not the instance's parameter, and nothing is missing."""
    monkeypatch.setenv("COHERIQ_STRICT", strict)
    domain = cq.AccelerationDomain(unique())

    @domain.acceleration_candidate
    def f(a, b=1, /, c=2, *, d, e=3):
        return "reference"

    @domain.acceleration_candidate
    def g(x, *args, **kwargs):
        return "reference"

    domain.materialize()
    with warnings.catch_warnings():
        warnings.simplefilter("error", cq.CoheriqSignatureWarning)

        class Logged(cq.engine_class(domain), name="logged"):
            @logged
            def f(self, a, b=1, /, c=2, *, d, e=3):
                return ("logged", a, b, c, d, e)

            @classmethod
            @logged
            def g(cls, x, *args, **kwargs):
                return ("logged", x)

    with cq.using_engine(domain, "logged"):
        assert f(0, d=4) == ("logged", 0, 1, 2, 4, 3)
        assert g(5) == ("logged", 5)


def test_a_method_with_no_parameter_for_the_instance_is_reported(domain):
    (message,) = problems_of(domain, "g", lambda *, x, **kwargs: 0)
    assert "takes no positional parameter for it" in message and "staticmethod" in message


@pytest.fixture
def other(unique):
    """Another library, whose candidates an engine of ``domain`` delegates to."""
    made = cq.AccelerationDomain(unique())

    @made.acceleration_candidate
    def narrow(a, b=1, /, *, d):  # lacks c and e
        return "narrow"

    @made.acceleration_candidate
    def wide(a, b=1, /, c=2, *, d, e=3):
        return "wide"

    made.materialize()
    return {"narrow": narrow, "wide": wide}


def test_a_delegation_is_checked_through_the_candidates_proxy(domain, other):
    """On either proxy: the compiled one has no signature of its own but its candidate's."""
    (message,) = problems_of(domain, "f", other["narrow"])
    assert "parameter 'c' is missing" in message and "override: f(a, b=1, /, *, d)" in message
    assert problems_of(domain, "f", other["wide"]) == []
    assert problems_of(domain, "f", staticmethod(other["wide"])) == []


def test_a_partial_is_checked_through_the_candidates_proxy(domain, other):
    # staticmethod: from Python 3.14 a partial in a class body binds the instance,
    # as a function does (and the check then says so, truthfully).
    def partial(*args, **kwargs):
        return staticmethod(functools.partial(*args, **kwargs))

    (message,) = problems_of(domain, "f", partial(other["narrow"], d=4))
    assert "parameter 'c' is missing" in message
    assert problems_of(domain, "f", partial(other["wide"], e=3)) == []
    (message,) = problems_of(domain, "f", partial(other["wide"], 0))
    assert "positional parameter 2 ('b') is missing" in message


@pytest.mark.skipif(sys.version_info < (3, 14), reason="a partial binds the instance from 3.14")
def test_a_partial_in_a_class_body_binds_the_instance_from_3_14(domain, other):
    (message,) = problems_of(domain, "f", functools.partial(other["wide"], e=3))
    assert "cannot accept every call" in message


def test_a_partialmethod_is_checked(domain):
    def _f(self, a, b, /, c=2, *, d, e=3):  # b lost its default
        return "engine"

    def _scaled(self, a, b=1, /, c=2, *, d, e=3, scale):
        return "engine"

    (message,) = problems_of(domain, "f", functools.partialmethod(_f))
    assert "parameter 'b' lost its default (1)" in message
    assert "override: f(a, b, /, c=2, *, d, e=3)" in message
    assert problems_of(domain, "f", functools.partialmethod(_scaled, scale=2)) == []
    (message,) = problems_of(domain, "f", functools.partialmethod(_scaled))
    assert "the override requires 'scale'" in message


def test_an_async_candidate_may_delegate_to_another(unique):
    libs = [cq.AccelerationDomain(unique()) for _ in range(2)]
    fetchers = []
    for lib in libs:

        async def fetch(x):
            return x

        fetchers.append(lib.acceleration_candidate(fetch))
        lib.materialize()
    with warnings.catch_warnings():
        warnings.simplefilter("error", cq.CoheriqSignatureWarning)

        class Delegating(cq.engine_class(libs[0]), name="delegating"):
            fetch = fetchers[1]


@pytest.mark.parametrize("how", ["domain", "environment"])
def test_strict_mode_raises_and_registers_nothing(unique, monkeypatch, how):
    if how == "environment":
        monkeypatch.setenv("COHERIQ_STRICT", "1")
    domain = cq.AccelerationDomain(unique(), strict=(how == "domain"))

    @domain.acceleration_candidate
    def f(a, b):
        return "reference"

    domain.materialize()
    with pytest.raises(cq.CoheriqEngineError, match="'b' is missing"):

        class Strict(cq.engine_class(domain), name="strict"):
            def f(self, a):
                return a

    engine = cq.AccelerationEngine(domain, "decorated")
    engine.override("f")(lambda a: a)
    with pytest.raises(cq.CoheriqEngineError, match="'b' is missing"):
        engine.materialize()
    # No engine class was registered; the decorated engine keeps the name it
    # reserved when it was constructed (as in 0.0.x), and cannot run.
    assert cq.available_engines(domain) == ("decorated",)
    assert cq.coverage(domain).engines == [cq.REFERENCE]


def test_checked_once_at_definition_not_per_call(domain):
    with pytest.warns(cq.CoheriqSignatureWarning):

        class Loose(cq.engine_class(domain), name="loose"):
            def g(self, x, *args, **kwargs):
                return "loose"

            def f(self, *args, **kwargs):
                return "loose"

            class Box:
                pass

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with cq.using_engine(domain, "loose"):
            pass


# -- sync and async mismatches -------------------------------------------------------------


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
