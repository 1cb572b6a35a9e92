"""The library's side: marking candidates, proxies, materialize, and their errors."""

import inspect
import os
import subprocess
import sys

import pytest

import coheriq as cq


def test_marking_forms(unique):
    domain = cq.AccelerationDomain(unique())

    @domain.acceleration_candidate
    def bare(x):
        return x

    @domain.acceleration_candidate("positional")
    def f1(x):
        return x

    @domain.acceleration_candidate(name="keyword")
    def f2(x):
        return x

    assert list(domain.candidate_kinds) == ["bare", "positional", "keyword"]
    ref = domain.materialize()
    assert ref.positional(1) == 1 and ref.keyword(2) == 2


def test_function_proxy_keeps_identity(lib):
    proxy = lib.normalize
    assert proxy.__name__ == "normalize"
    assert proxy.__qualname__.endswith("normalize")
    assert proxy.__module__ == "conftest"  # where the library defined it
    assert proxy.__doc__ == "Scale ``xs`` so that it sums to ``scale``."
    assert str(inspect.signature(proxy)) == "(xs, *, scale=1.0)"
    assert proxy.__wrapped__([1, 3]) == [0.25, 0.75]
    assert proxy([1, 3]) == [0.25, 0.75]


def test_reference_class_reads_back_candidates(lib):
    ref = cq.engine_class(lib.name)
    assert ref.normalize is lib.normalize.__wrapped__  # a plain function, no self
    assert ref.normalize([1, 1]) == [0.5, 0.5]
    assert ref.Batch is lib.Batch  # the marked class is the class
    assert isinstance(ref.Batch, type)
    assert ref().total([1, 2]) == ("reference", 3)  # through an instance, still no self
    assert "reference" in repr(ref) and lib.name in repr(ref)


def test_domain_repr_and_properties(lib):
    assert lib.name in repr(lib.domain)
    assert lib.domain.materialized
    assert lib.domain.env_var == lib.env_var


def test_duplicate_domain_name(lib):
    with pytest.raises(cq.CoheriqDomainError, match=lib.name):
        cq.AccelerationDomain(lib.name)


@pytest.mark.parametrize("bad", ["", " ", "a b", "x:y", "a,b", None, 3, "-x", "ünï"])
def test_bad_domain_names(bad):
    with pytest.raises(cq.CoheriqTypeError, match="name"):
        cq.AccelerationDomain(bad)


@pytest.mark.parametrize("bad", ["", "1X", "A-B", 3])
def test_bad_env_prefix(unique, bad):
    name = unique()
    with pytest.raises(cq.CoheriqTypeError, match="env_prefix"):
        cq.AccelerationDomain(name, env_prefix=bad)
    cq.AccelerationDomain(name)  # the failed attempt registered nothing


def test_mark_after_materialize(lib):
    with pytest.raises(cq.CoheriqDomainError, match="materialized already"):

        @lib.domain.acceleration_candidate
        def late(x):
            return x


def test_materialize_twice(lib):
    with pytest.raises(cq.CoheriqDomainError, match="materialized already"):
        lib.domain.materialize()


def test_duplicate_candidate(unique):
    domain = cq.AccelerationDomain(unique())

    @domain.acceleration_candidate
    def f(x):
        return x

    with pytest.raises(cq.CoheriqDomainError, match="'f' already"):
        domain.acceleration_candidate(name="f")(lambda x: x)
    assert list(domain.candidate_kinds) == ["f"]


@pytest.mark.parametrize("bad", ["", "_private", "not valid", "class", 3])
def test_bad_candidate_names(unique, bad):
    domain = cq.AccelerationDomain(unique())
    with pytest.raises(cq.CoheriqTypeError, match="candidate name"):
        domain.acceleration_candidate(name=bad)(lambda x: x)


def test_lambda_needs_a_name(unique):
    domain = cq.AccelerationDomain(unique())
    with pytest.raises(cq.CoheriqTypeError, match="<lambda>"):
        domain.acceleration_candidate(lambda x: x)


def test_non_callable_candidate(unique):
    domain = cq.AccelerationDomain(unique())
    with pytest.raises(cq.CoheriqTypeError, match="functions and classes"):
        domain.acceleration_candidate(42)


def test_name_given_twice(unique):
    domain = cq.AccelerationDomain(unique())
    with pytest.raises(cq.CoheriqTypeError, match="once"):
        domain.acceleration_candidate("a", name="b")


def test_marking_a_proxy_again(lib, unique):
    other = cq.AccelerationDomain(unique())
    with pytest.raises(cq.CoheriqDomainError, match="already candidate"):
        other.acceleration_candidate(lib.normalize)


def test_call_before_materialize(unique):
    domain = cq.AccelerationDomain(unique())

    @domain.acceleration_candidate
    def f(x):
        return x

    with pytest.raises(cq.CoheriqDomainError, match="not materialized"):
        f(1)
    with pytest.raises(cq.CoheriqDomainError, match="not materialized"):
        cq.engine_class(domain)
    with pytest.raises(cq.CoheriqDomainError, match="not materialized"):
        cq.AccelerationEngine(domain, "fast")
    domain.materialize()
    assert f(1) == 1


def test_unknown_domain_suggests(lib):
    with pytest.raises(cq.CoheriqDomainNotFoundError, match=f"Did you mean '{lib.name}'"):
        cq.available_engines(lib.name + "x")
    with pytest.raises(cq.CoheriqTypeError, match="AccelerationDomain or its name"):
        cq.available_engines(None)


# -- objects marked in another module than their own ---------------------------------------


IMPL = """
def normalize(xs):
    total = sum(xs)
    return [x / total for x in xs]


class Batch:
    def __init__(self, xs):
        self.xs = xs
"""


def test_a_function_marked_from_another_module_pickles_as_the_marking_modules(tmp_path):
    (tmp_path / "picklib").mkdir()
    (tmp_path / "picklib" / "_impl.py").write_text(IMPL)
    (tmp_path / "picklib" / "__init__.py").write_text(
        "import coheriq\n"
        "from . import _impl\n"
        'domain = coheriq.AccelerationDomain("picklib")\n'
        "normalize = domain.acceleration_candidate(_impl.normalize)\n"
        'scaled = domain.acceleration_candidate(_impl.normalize, name="scaled")\n'
        # Held in its own module under another name; nameless callables; a class body.
        "def _half(xs):\n    return [x / 2 for x in xs]\n"
        'half = domain.acceleration_candidate(_half, name="half")\n'
        "import functools\n"
        'third = domain.acceleration_candidate(functools.partial(_half), name="third")\n'
        'same = domain.acceleration_candidate(lambda xs: xs, name="same")\n'
        "class Api:\n"
        '    norm = staticmethod(domain.acceleration_candidate(_impl.normalize, name="norm"))\n'
        "domain.materialize()\n"
    )
    program = """
import pickle, subprocess, sys
import picklib
for proxy in (picklib.normalize, picklib.scaled, picklib.half, picklib.third, picklib.same,
              picklib.Api.norm):
    print(proxy.__module__, proxy.__qualname__, pickle.loads(pickle.dumps(proxy)) is proxy,
          pickle.loads(pickle.dumps(proxy, protocol=2)) is proxy)
# and in another process, as a pool sends it
check = "import pickle, sys; f = pickle.loads(sys.stdin.buffer.read()); print(f([1, 3]))"
sent = subprocess.run([sys.executable, "-c", check], input=pickle.dumps(picklib.normalize),
                      capture_output=True, check=True)
print(sent.stdout.decode().strip())
"""
    done = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:7] == [
        "picklib normalize True True",
        "picklib scaled True True",
        "picklib half True True",
        "picklib third True True",
        "picklib same True True",
        "picklib Api.norm True True",
        "[0.25, 0.75]",
    ]


def test_a_class_marked_from_another_module_is_refused_with_the_fix(write_module):
    write_module("refusedimpl", IMPL)
    import refusedimpl

    with cq.testing.isolated():
        domain = cq.AccelerationDomain("refusing")
        with pytest.raises(cq.CoheriqTypeError) as refused:
            domain.acceleration_candidate(refusedimpl.Batch)
        assert (
            "it is defined in module 'refusedimpl', which holds it, and module "
            f"{__name__!r} marks it" in str(refused.value)
        )
        assert "above its class statement in module 'refusedimpl'" in str(refused.value)
        assert domain.candidate_kinds == {}  # nothing was marked

        # A decorator written in another module marks a class bound nowhere yet: fine.
        exec("@mark\nclass Later:\n    pass\n", {"mark": domain.acceleration_candidate})
        assert list(domain.candidate_kinds) == ["Later"]
