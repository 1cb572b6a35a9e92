"""A soft decline: an implementation that should not run a call, rather than cannot.

``may_decline(when=check, soft=True)`` (NetworkX's ``should_run``): the call goes on
to the next implementation that has no objection, along the engine's MRO and the
user's list, the reference at the latest; ``coheriq.crossover`` declares such a check
from the size of a call.
"""

from __future__ import annotations

import pytest

import coheriq


@pytest.fixture
def sized(unique, monkeypatch):
    """A domain with candidate ``topk`` and engines "gpu" (should not run fewer than 4
    rows: soft), "compiled" (cannot run k > 3: a check), "checked" (cannot: raises),
    "hybrid" (Gpu, Compiled) and "plain" (takes every call)."""
    name = unique("sized")
    monkeypatch.delenv(f"{name.upper()}_ENGINE", raising=False)
    monkeypatch.delenv("COHERIQ_FAIL_ON_DECLINE", raising=False)
    domain = coheriq.AccelerationDomain(name, env_prefix=name.upper())

    @domain.acceleration_candidate
    def topk(xs, k=2):
        return ("reference", sorted(xs)[-k:])

    domain.materialize()
    reference = coheriq.engine_class(name)

    def small(self, xs, k=2):
        return f"{len(xs)} rows: the transfer costs more" if len(xs) < 4 else None

    def beyond(self, xs, k=2):
        return f"k={k} is beyond the kernel's 3" if k > 3 else None

    class Gpu(reference, name="gpu"):
        @coheriq.may_decline(when=small, soft=True)
        def topk(self, xs, k=2):
            return ("gpu", sorted(xs)[-k:])

    class Compiled(reference, name="compiled"):
        @coheriq.may_decline(when=beyond)
        def topk(self, xs, k=2):
            return ("compiled", sorted(xs)[-k:])

    class Checked(reference, name="checked"):
        @coheriq.may_decline
        def topk(self, xs, k=2):
            raise coheriq.Decline("never")

    class Hybrid(Gpu, Compiled, name="hybrid"):
        pass

    class Plain(reference, name="plain"):
        def topk(self, xs, k=2):
            return ("plain", sorted(xs)[-k:])

    domain.topk = topk
    return domain


FEW, MANY = [1, 2, 3], [1, 2, 3, 4, 5]


@pytest.mark.parametrize("engines", ["hybrid", ["gpu", "compiled"]], ids=["hybrid", "list"])
def test_a_soft_decline_goes_to_the_next_implementation_without_objection(sized, engines):
    with coheriq.using_engine(sized.name, engines):
        assert sized.topk(MANY) == ("gpu", [4, 5])  # no objection
        assert sized.topk(FEW) == ("compiled", [2, 3])  # gpu should not: compiled takes it
        assert sized.topk(MANY, k=5) == ("gpu", MANY)
        # gpu should not, compiled cannot: the reference, which takes every call.
        assert sized.topk(FEW, k=5) == ("reference", FEW)
    assert dict(sized.state.declines) == {
        ("topk", "gpu", "3 rows: the transfer costs more"): 2,
        ("topk", "compiled", "k=5 is beyond the kernel's 3"): 1,
    }


def test_a_soft_decline_alone_or_before_a_raised_one_ends_on_the_reference(sized):
    with coheriq.using_engine(sized.name, "gpu"):
        assert sized.topk(FEW) == ("reference", [2, 3])
    with coheriq.using_engine(sized.name, ["gpu", "checked", "plain"]):
        assert sized.topk(FEW) == ("plain", [2, 3])
    with coheriq.using_engine(sized.name, ["compiled", "gpu"]):  # the soft one later
        assert sized.topk(FEW, k=5) == ("reference", FEW)
        assert sized.topk(MANY, k=5) == ("gpu", MANY)


def test_a_soft_decline_through_self_goes_on_along_the_mro(sized):
    # The hybrid's own method, as its code reaches it (self.topk): along its MRO only.
    hybrid = coheriq.engine_class(sized.name, "hybrid")()
    assert hybrid.topk(FEW) == ("compiled", [2, 3])
    assert hybrid.topk(FEW, k=5) == ("reference", FEW)


def test_explain_and_profile_say_a_soft_decline_as_a_decline(sized):
    with coheriq.using_engine(sized.name, ["gpu", "compiled"]):
        few = coheriq.explain(sized.topk, FEW)
        stuck = coheriq.explain(sized.topk, FEW, k=5)
        with coheriq.profile() as prof:
            sized.topk(FEW)
    assert (few.answers, few.declines) == (
        "compiled",
        ["gpu should not run it: 3 rows: the transfer costs more"],
    )
    assert (stuck.answers, stuck.declines) == (
        "reference",
        [
            "gpu should not run it: 3 rows: the transfer costs more",
            "compiled declines: k=5 is beyond the kernel's 3",
        ],
    )
    rows = {(r.candidate, r.engine, r.reason): r.count for r in prof.declines}
    assert rows == {("topk", "gpu", "3 rows: the transfer costs more"): 1}


def test_a_soft_decline_needs_a_check():
    with pytest.raises(coheriq.CoheriqTypeError, match=r"soft=True\) needs a check"):
        coheriq.may_decline(soft=True)
    with pytest.raises(coheriq.CoheriqTypeError, match=r"soft=True\) needs a check"):
        coheriq.may_decline(lambda self: None, soft=True)
    with pytest.raises(coheriq.CoheriqTypeError, match=r"soft=True\) needs a check"):
        coheriq.may_decline(when=lambda self: None, soft="yes")


# -- a declared crossover: the size below which an engine should not run a call -----------


def test_a_declared_crossover_declines_smaller_calls_softly_and_says_so(sized):
    rows = coheriq.crossover(size=lambda self, xs, k=2: len(xs), default=4, unit="rows")

    class Sized(coheriq.engine_class(sized.name), name="declared"):
        @rows
        def topk(self, xs, k=2):
            return ("declared", sorted(xs)[-k:])

    reason = "fewer than 4 rows: below the crossover declared by the engine, not measured here"
    with coheriq.using_engine(sized.name, ["declared", "compiled"]):
        assert sized.topk(MANY) == ("declared", [4, 5])
        assert sized.topk(FEW) == ("compiled", [2, 3])
        assert sized.topk(FEW, k=5) == ("reference", FEW)  # compiled cannot
        assert coheriq.explain(sized.topk, FEW).declines == [
            f"declared should not run it: {reason}"
        ]
    assert sized.state.declines[("topk", "declared", reason)] == 2


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"size": 3, "default": 4}, r"crossover\(size=...\) takes a function"),
        ({"size": len, "default": -1}, r"crossover\(default=...\) takes the size"),
        ({"size": len, "default": True}, r"crossover\(default=...\) takes the size"),
        ({"size": len, "default": 4, "unit": " "}, r"crossover\(unit=...\) takes what"),
    ],
)
def test_a_crossover_is_declared_with_a_size_function_a_count_and_a_unit(options, message):
    with pytest.raises(coheriq.CoheriqTypeError, match=message):
        coheriq.crossover(**options)
