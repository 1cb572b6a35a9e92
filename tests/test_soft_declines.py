"""A soft decline: an implementation that should not run a call, rather than cannot.

``may_decline(when=check, soft=True)``: the call goes on to the next implementation
that takes it, along the engine's MRO and the user's list, and comes back to the
soft-declining one (which then runs it without asking) only where every engine
implementation after it declines, before the reference.
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
def test_a_soft_decline_goes_on_and_comes_back_only_where_every_other_engine_declines(
    sized, engines
):
    with coheriq.using_engine(sized.name, engines):
        assert sized.topk(MANY) == ("gpu", [4, 5])  # no objection
        assert sized.topk(FEW) == ("compiled", [2, 3])  # gpu should not: compiled takes it
        assert sized.topk(MANY, k=5) == ("gpu", MANY)
        # gpu should not, compiled cannot: gpu runs it after all, not the reference.
        assert sized.topk(FEW, k=5) == ("gpu", FEW)
    assert dict(sized.state.declines) == {
        ("topk", "gpu", "3 rows: the transfer costs more"): 2,
        ("topk", "compiled", "k=5 is beyond the kernel's 3"): 1,
    }


def test_a_soft_declines_engine_comes_back_before_the_reference_after_a_raised_decline(sized):
    with coheriq.using_engine(sized.name, ["gpu", "checked"]):
        assert sized.topk(FEW) == ("gpu", [2, 3])
    with coheriq.using_engine(sized.name, ["gpu", "plain"]):
        assert sized.topk(FEW) == ("plain", [2, 3])
    with coheriq.using_engine(sized.name, ["compiled", "gpu"]):  # the soft one later
        assert sized.topk(FEW, k=5) == ("gpu", FEW)
        assert sized.topk(MANY, k=5) == ("gpu", MANY)


def test_a_soft_decline_through_self_comes_back_along_the_mro(sized):
    # The hybrid's own method, as its code reaches it (self.topk): along its MRO only.
    hybrid = coheriq.engine_class(sized.name, "hybrid")()
    assert hybrid.topk(FEW, k=5) == ("gpu", FEW)
    assert hybrid.topk(FEW) == ("compiled", [2, 3])


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
        "gpu",
        [
            "gpu should not run it: 3 rows: the transfer costs more",
            "compiled declines: k=5 is beyond the kernel's 3",
            "gpu runs it after all: every other engine declines",
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
