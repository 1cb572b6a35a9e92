"""coheriq's benchmark suite: what dispatch, activation, import and set-up cost.

Run ``python benchmarks/run.py`` (``--quick`` for a smoke run that only checks the
suite works; ``--record DIR`` also writes the table to ``DIR/dispatch.txt`` and
every figure to ``DIR/dispatch.json``, which the docs' performance chart reads).
Speed figures are paired ratios: in each round a statement and its baseline (a
direct call of the same implementation, or constructing the implementing class
directly) are timed by :mod:`timeit` right after each other over the same number
of iterations, and the table shows the median, minimum and maximum of the
per-round ratios, and beside them the median nanoseconds per call of the
statement and of its baseline. Absolute figures (us, ms, s) are medians of
rounds. Nothing here asserts: each case's target (``benchmarks/targets.py``: most
are stated in a floor measured in the same run, what a callable written in C, or
a class with a metaclass, costs on this Python) is printed beside its numbers, and
a median over its target is marked MISSED. The floors are references: no target.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
import timeit
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import targets

import coheriq
import coheriq.testing


@dataclass
class Row:
    case: str
    median: float
    low: float
    high: float
    unit: str
    # None for a floor: a reference measured in the same run, not a target.
    target: float | None = None
    rule: str = ""  # how the target is set: "1.4 x floor"; "" for a fixed one
    # For a ratio: nanoseconds per call of the statement (median, min, max of the
    # rounds) and of its baseline (median).
    ns: float | None = None
    ns_low: float | None = None
    ns_high: float | None = None
    baseline_ns: float | None = None

    @property
    def verdict(self) -> str:
        return targets.verdict(self.case, self.median, self.target)


@dataclass
class Plan:
    rounds: int
    number: int
    setup_rounds: int
    import_rounds: int


@dataclass
class Paired:
    """Per-round timings of a statement and its baseline, in seconds per call."""

    case: list[float]
    baseline: list[float]

    def ratios(self) -> list[float]:
        return [c / b for c, b in zip(self.case, self.baseline, strict=True)]


def paired(case: str, baseline: str, names: dict[str, Any], plan: Plan) -> Paired:
    """Time ``case`` and ``baseline`` back to back in each round."""
    case_timer = timeit.Timer(case, globals=names)
    base_timer = timeit.Timer(baseline, globals=names)
    timings = Paired([], [])
    for _ in range(plan.rounds):
        timings.baseline.append(base_timer.timeit(plan.number) / plan.number)
        timings.case.append(case_timer.timeit(plan.number) / plan.number)
    return timings


def ratio_row(case: str, timings: Paired) -> Row:
    ratios = timings.ratios()
    return Row(
        case,
        statistics.median(ratios),
        min(ratios),
        max(ratios),
        "x",
        ns=statistics.median(timings.case) * 1e9,
        ns_low=min(timings.case) * 1e9,
        ns_high=max(timings.case) * 1e9,
        baseline_ns=statistics.median(timings.baseline) * 1e9,
    )


def micro_row(case: str, stmt: str, names: dict[str, Any], plan: Plan) -> Row:
    timer = timeit.Timer(stmt, globals=names)
    samples = [timer.timeit(plan.number) / plan.number * 1e6 for _ in range(plan.rounds)]
    return Row(case, statistics.median(samples), min(samples), max(samples), "us")


def with_targets(rows: list[Row]) -> list[Row]:
    """Each row's target (targets.py), from the floors measured in this run."""
    medians = {row.case: row.median for row in rows if row.case in targets.FLOORS}
    for row in rows:
        row.target = targets.target(row.case, medians)
        row.rule = targets.rule(row.case)
    return rows


def build_domain(name: str = "bench") -> tuple[coheriq.AccelerationDomain, dict[str, Any]]:
    """A domain with f(x) and Box(x), and an engine "fast" implementing both."""
    domain = coheriq.AccelerationDomain(name)

    @domain.acceleration_candidate
    def f(x):
        return x

    @domain.acceleration_candidate
    class Box:
        def __init__(self, x):
            self.x = x

    domain.materialize()
    engine = coheriq.AccelerationEngine(domain, "fast")

    @engine.override("f")
    def fast_f(x):
        return x

    @engine.override("Box")
    class FastBox:
        def __init__(self, x):
            self.x = x

    engine.materialize()
    names = {"f": f, "impl": fast_f, "Box": Box, "Impl": FastBox, "coheriq": coheriq}
    names["reference_f"] = f.__wrapped__
    names["block"] = coheriq.using_engine(domain, "fast")
    return domain, {**names, "domain": domain}


def build_reference_classes() -> dict[str, Any]:
    """A class candidate on the reference, an unmarked twin, and a subclass of each.

    And the twin again with a metaclass of its own that adds nothing: what any
    metaclass costs construction on this Python, the floor of a marked class.
    """
    domain = coheriq.AccelerationDomain("bench_classes")

    class Twin:
        def __init__(self, x):
            self.x = x

        @classmethod
        def make(cls, x):
            return cls(x)

    class Meta(type):
        pass

    class WithMeta(metaclass=Meta):
        def __init__(self, x):
            self.x = x

    @domain.acceleration_candidate
    class Marked:
        def __init__(self, x):
            self.x = x

        @classmethod
        def make(cls, x):
            return cls(x)

    domain.materialize()

    class TwinSub(Twin):
        pass

    class MarkedSub(Marked):
        pass

    Marked(1)  # settles the domain on the reference
    return {
        "Marked": Marked,
        "Twin": Twin,
        "MarkedSub": MarkedSub,
        "TwinSub": TwinSub,
        "WithMeta": WithMeta,
        "x": 1,
    }


def bench_dispatch(plan: Plan) -> list[Row]:
    domain, names = build_domain()
    coheriq.enable_engine(domain, "fast")
    # What any callable written in C costs in front of a Python function: on Python
    # 3.11 and later a direct call is inlined by the interpreter, a call through a C
    # object enters it anew. functools.partial(impl) is that floor, measured here so
    # that the targets of the calls can be stated in it (targets.py).
    names["floor"] = functools.partial(names["impl"])
    rows = [
        ratio_row("call, global engine, positional", paired("f(1)", "impl(1)", names, plan)),
        ratio_row("call, global engine, keyword", paired("f(x=1)", "impl(x=1)", names, plan)),
        ratio_row(targets.CALL_FLOOR, paired("floor(1)", "impl(1)", names, plan)),
        ratio_row("construct class candidate", paired("Box(1)", "Impl(1)", names, plan)),
    ]
    classes = build_reference_classes()
    rows.append(ratio_row(targets.CLASS_FLOOR, paired("WithMeta(1)", "Twin(1)", classes, plan)))
    rows.append(
        ratio_row(
            "construct class candidate, reference", paired("Marked(1)", "Twin(1)", classes, plan)
        )
    )
    rows.append(
        ratio_row(
            "classmethod of a candidate, reference",
            paired("Marked.make(1)", "Twin.make(1)", classes, plan),
        )
    )
    rows.append(
        ratio_row(
            "construct a subclass of a candidate",
            paired("MarkedSub(1)", "TwinSub(1)", classes, plan),
        )
    )
    rows.append(
        ratio_row(
            "isinstance(1, class candidate), false",
            paired("isinstance(x, Marked)", "isinstance(x, Twin)", classes, plan),
        )
    )
    with coheriq.using_engine(domain, "fast"):
        rows.append(ratio_row("call inside using_engine", paired("f(1)", "impl(1)", names, plan)))
    # A domain whose global engine is not chosen yet: its calls outside blocks would
    # choose it; a block's calls run the block's engine, as once it is chosen.
    unchosen, unchosen_names = build_domain("bench_unchosen")
    with coheriq.using_engine(unchosen, "fast"):
        rows.append(
            ratio_row(
                "call inside using_engine, no global choice yet",
                paired("f(1)", "impl(1)", unchosen_names, plan),
            )
        )
    assert unchosen.choice.settled is None, "the benchmark chose the global engine"
    with coheriq.using_engine(domain, coheriq.REFERENCE):
        rows.append(
            ratio_row(
                "call inside using_engine, reference",
                paired("f(1)", "reference_f(1)", names, plan),
            )
        )
    rows.append(micro_row("enter and leave the only using_engine", "with block: pass", names, plan))
    with coheriq.using_engine(domain, "fast"):
        rows.append(
            micro_row("enter and leave a nested using_engine", "with block: pass", names, plan)
        )
        rows.append(
            ratio_row("construct inside using_engine", paired("Box(1)", "Impl(1)", names, plan))
        )

    entered, leave = threading.Event(), threading.Event()

    def hold_scope() -> None:
        with coheriq.using_engine(domain, "fast"):
            entered.set()
            leave.wait()

    holder = threading.Thread(target=hold_scope)
    holder.start()
    entered.wait()
    rows.append(
        ratio_row("call while another thread is scoped", paired("f(1)", "impl(1)", names, plan))
    )
    leave.set()
    holder.join()
    with coheriq.verify(domain, "fast", on_mismatch="record"):
        names["f"](1)  # verified: run on "fast" and on the reference, and compared
    rows.append(
        ratio_row("call after a verification ended", paired("f(1)", "impl(1)", names, plan))
    )
    rows.append(micro_row("resolve_impl", "coheriq.resolve_impl(f)", names, plan))
    rows.append(
        micro_row("active_implementation", "coheriq.active_implementation(domain)", names, plan)
    )
    return rows


def bench_reference(plan: Plan) -> list[Row]:
    """What a marked function costs on the reference, against the unmarked function.

    Where no block of its domain ever opened (its code is the function's own), and
    after blocks opened often (its code then stays a trampoline that looks); what
    a block costs to enter and leave, and a function's code to swap, in a domain
    of 1000 function candidates.
    """
    domain = coheriq.AccelerationDomain("bench_reference")

    @domain.acceleration_candidate
    def f(x):
        return x

    domain.materialize()
    f(1)  # settles the domain on the reference
    names: dict[str, Any] = {"f": f, "unmarked": f.__wrapped__}
    rows = [
        ratio_row("call, reference, no block ever", paired("f(1)", "unmarked(1)", names, plan)),
        ratio_row(
            "call, reference, keyword, no block ever",
            paired("f(x=1)", "unmarked(x=1)", names, plan),
        ),
    ]

    many = coheriq.AccelerationDomain("bench_many")
    for k in range(1000):

        def candidate(x):
            return x

        last = many.acceleration_candidate(name=f"c{k}")(candidate)
    many.materialize()
    last(1)  # settles the domain on the reference
    switchboard = many.state.switchboard
    # Each swap twice a round: every code looks, then runs its candidate's own.
    swap = timeit.Timer("s.run_directly(False); s.run_directly(True)", globals={"s": switchboard})
    number = max(1, plan.number // 30_000)
    per_swap = [swap.timeit(number) / number / 2000 * 1e6 for _ in range(plan.rounds)]
    rows.append(
        Row(
            "swap a function's code, per candidate",
            statistics.median(per_swap),
            min(per_swap),
            max(per_swap),
            "us",
        )
    )
    names["block"] = coheriq.using_engine(many, coheriq.REFERENCE)
    rows.append(
        micro_row("enter and leave a block, 1000 candidates", "with block: pass", names, plan)
    )
    names["c"], names["unmarked_c"] = last, last.__wrapped__
    rows.append(
        ratio_row(
            "call, reference, after blocks opened",
            paired("c(1)", "unmarked_c(1)", names, plan),
        )
    )
    return rows


def bench_declines(plan: Plan) -> list[Row]:
    """What a call costs on an engine whose implementation may decline it: taken (its
    check passes), or declined (by the check, or by raising), then run by the reference;
    against a direct call of the reference function."""
    domain = coheriq.AccelerationDomain("bench_declines")

    @domain.acceleration_candidate
    def g(x):
        return x

    domain.materialize()
    reference = coheriq.engine_class(domain)

    def never(self, x):
        return None

    def always(self, x):
        return "always"

    class Accepts(reference, name="accepts"):
        @coheriq.may_decline(when=never)
        def g(self, x):
            return x

    class Checks(reference, name="checks"):
        @coheriq.may_decline(when=always)
        def g(self, x):
            return x

    class Raises(reference, name="raises"):
        @coheriq.may_decline
        def g(self, x):
            raise coheriq.Decline("always")

    names = {"g": g, "impl": g.__wrapped__}
    rows = []
    for engine, case in (
        ("accepts", "call a may_decline implementation takes"),
        ("checks", "call declined by a check"),
        ("raises", "call declined by raising Decline"),
    ):
        with coheriq.using_engine(domain, engine):
            rows.append(ratio_row(case, paired("g(1)", "impl(1)", names, plan)))
    return rows + bench_crossover(plan)


def bench_crossover(plan: Plan) -> list[Row]:
    """A call whose engine declares a crossover (``coheriq.crossover``) and has no
    calibration, against the same call on an engine whose ``when=`` check sizes the
    call with the same function and compares it with the same threshold."""

    def library(name: str) -> tuple[coheriq.AccelerationDomain, Any]:
        domain = coheriq.AccelerationDomain(name)

        @domain.acceleration_candidate
        def h(x):
            return x

        domain.materialize()
        return domain, h

    declared, declared_h = library("bench_crossover")
    checked, checked_h = library("bench_when_check")

    def values(self, x):
        return x

    def below_threshold(self, x):
        return "fewer than 0 values" if values(self, x) < 0 else None

    class Declared(coheriq.engine_class(declared), name="declared"):
        @coheriq.crossover(size=values, default=0)
        def h(self, x):
            return x

    class Checked(coheriq.engine_class(checked), name="checked"):
        @coheriq.may_decline(when=below_threshold)
        def h(self, x):
            return x

    names = {"crossover": declared_h, "check": checked_h}
    case = "crossover taken, against a when= check"
    with (
        coheriq.testing.frozen_crossovers("declared"),
        coheriq.using_engine(declared, "declared"),
        coheriq.using_engine(checked, "checked"),
    ):
        return [ratio_row(case, paired("crossover(1)", "check(1)", names, plan))]


def bench_shadow(plan: Plan) -> list[Row]:
    """What shadow verification costs the caller (``coheriq.shadow``): a call on an engine
    whose domain is shadowed, against the same call on an engine of a domain that is not.
    At 1%, the median round includes the sampled calls (each copies its argument and
    result and queues them; the comparing runs in a background thread, whose share of the
    interpreter is part of the cost); the unsampled call is the draw alone (a rate so small
    that no call is sampled). The engine's work is a trivial function (the worst case: the
    whole cost is overhead) and a sum over 1,000 numbers (about 10 us)."""

    def library(name: str) -> tuple[Any, Any]:
        domain = coheriq.AccelerationDomain(name)

        @domain.acceleration_candidate
        def g(xs):
            return xs

        @domain.acceleration_candidate
        def total(xs):
            return sum(xs)

        domain.materialize()

        class Fast(coheriq.engine_class(domain), name="fast"):
            def g(self, xs):
                return xs

            def total(self, xs):
                return sum(xs)

        coheriq.enable_engine(domain, "fast")
        return g, total

    rows = []
    for rate, label in ((1e-12, "unsampled call, shadow on"), (0.01, "call, shadow on at 1%")):
        shadowed_g, shadowed_total = library(f"bench_shadow_{len(rows)}")
        plain_g, plain_total = library(f"bench_unshadowed_{len(rows)}")
        watcher = coheriq.shadow(shadowed_g.__coheriq_candidate__.domain, rate, queue=10_000)
        names = {"g": shadowed_g, "plain_g": plain_g, "total": shadowed_total}
        names.update(plain_total=plain_total, xs=list(range(1_000)))
        rows.append(ratio_row(label, paired("g(1)", "plain_g(1)", names, plan)))
        work_plan = Plan(plan.rounds, max(plan.number // 100, 200), 0, 0)
        case = f"{label}, a 10 us call"
        rows.append(ratio_row(case, paired("total(xs)", "plain_total(xs)", names, work_plan)))
        watcher.stop(timeout=30)
    return rows


def bench_conversions(plan: Plan) -> list[Row]:
    """What an engine's declared conversions cost once an object's conversion is cached:
    the cache hit alone, a call on the engine whose argument it converts, and a declined
    call whose argument goes back to the library's form; against a direct call."""
    from coheriq._engines import conversions

    class Vec:  # the library's type
        def __init__(self, x: int) -> None:
            self.x = x

    class Dev:  # the engine's
        def __init__(self, x: int) -> None:
            self.x = x

    domain = coheriq.AccelerationDomain("bench_conversions")

    @domain.acceleration_candidate
    def h(v):  # type: ignore[no-untyped-def]
        return v

    domain.materialize()
    pair = coheriq.Conversion(
        Vec, Dev, to_engine=lambda v: Dev(v.x), to_library=lambda d: Vec(d.x), cache=True
    )

    class Converts(coheriq.engine_class(domain), name="converts", conversions=[pair]):
        def h(self, v):  # type: ignore[no-untyped-def]
            return v

    class Declines(coheriq.engine_class(domain), name="declines", conversions=[pair]):
        @coheriq.may_decline(when=lambda self, v: "always")
        def h(self, v):  # type: ignore[no-untyped-def]
            return v

    v, d = Vec(1), Dev(1)
    names = {
        "h": h,
        "impl": h.__wrapped__,
        "v": v,
        "d": d,
        "convert": conversions.convert,
        "pair": pair,
        "state": domain.state,
    }
    conversions.convert(v, pair, conversions.TO_ENGINE, domain.state, "h")
    rows = [
        micro_row(
            "conversion cache hit",
            "convert(v, pair, 'to_engine', state, 'h')",
            names,
            plan,
        )
    ]
    with coheriq.using_engine(domain, "converts"):
        h(v)
        rows.append(
            ratio_row("call that converts (cached)", paired("h(v)", "impl(v)", names, plan))
        )
    with coheriq.using_engine(domain, "declines"):
        h(d)
        rows.append(
            ratio_row(
                "declined call that converts (cached)", paired("h(d)", "impl(d)", names, plan)
            )
        )
    return rows


def bench_setup(plan: Plan) -> list[Row]:
    marking, engines = [], []
    for i in range(plan.setup_rounds):
        start = time.perf_counter()
        domain = coheriq.AccelerationDomain(f"setup{i}")
        for k in range(1000):

            def candidate(x, y=1, *, z=None):
                return x

            domain.acceleration_candidate(name=f"c{k}")(candidate)
        domain.materialize()
        marking.append(time.perf_counter() - start)

        start = time.perf_counter()
        fast = coheriq.AccelerationEngine(domain, "fast")
        for k in range(500):

            def override(x, y=1, *, z=None):
                return x

            fast.override(name=f"c{k}")(override)
        fast.materialize()
        engines.append(time.perf_counter() - start)
    return [
        Row(
            "mark 1000 candidates + materialize",
            statistics.median(marking),
            min(marking),
            max(marking),
            "s",
        ),
        Row(
            "materialize engine, 500 overrides",
            statistics.median(engines),
            min(engines),
            max(engines),
            "s",
        ),
    ]


PROBE = "import sys, coheriq; print(' '.join(sorted(sys.modules)))"


def bench_import(plan: Plan) -> tuple[Row, list[str]]:
    """``-X importtime`` cumulative of coheriq, and what ``import coheriq`` adds.

    Bytecode is written by a first import and read afterwards, as for an
    installed package (so a ``PYTHONDONTWRITEBYTECODE`` of the caller is dropped).
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

    def python(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, *args], capture_output=True, text=True, check=True, env=env
        )

    bare = set(python("-c", "import sys; print(' '.join(sys.modules))").stdout.split())
    python("-c", "import coheriq")  # writes the bytecode caches
    samples: list[float] = []
    added: list[str] = []
    for _ in range(plan.import_rounds):
        done = python("-X", "importtime", "-c", PROBE)
        added = sorted(set(done.stdout.split()) - bare)
        for line in done.stderr.splitlines():
            parts = [p.strip() for p in line.split("|")]
            if len(parts) == 3 and parts[2] == "coheriq":
                samples.append(int(parts[1]) / 1000)
    row = Row(
        "import coheriq (-X importtime)",
        statistics.median(samples),
        min(samples),
        max(samples),
        "ms",
    )
    return row, added


TARGETS_LINE = (
    "targets (benchmarks/targets.py): a call <= 1.1 x floor, one that looks at a block"
    " <= 1.4 x floor; a marked class on the reference <= 1.2 x class floor"
)


def render(rows: list[Row]) -> str:
    head = f"{'case':<38} {'median':>9} {'min':>9} {'max':>9}  {'target':<16}"
    head += f"{'ns/call':>8} {'baseline':>8}"
    lines = [head, "-" * len(head)]
    for r in rows:
        goal = "" if r.target is None else f"<={r.target:.3g}{r.unit}"
        figures = (
            f"{r.case:<38} {r.median:>7.3g}{r.unit:<2} {r.low:>7.3g}{r.unit:<2} "
            f"{r.high:>7.3g}{r.unit:<2}  {goal:<9} {r.verdict:<6}"
        )
        if r.ns is not None and r.baseline_ns is not None:
            figures += f"{r.ns:>6.0f}ns {r.baseline_ns:>6.0f}ns"
        lines.append(figures.rstrip())
    lines.append(TARGETS_LINE)
    return "\n".join(lines)


def record(folder: Path, heading: str, table: str, rows: list[Row], added: list[str]) -> None:
    """Write the run where the docs read it: the table as printed, and the figures."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dispatch.txt").write_text(table + "\n", encoding="utf-8")
    figures = {
        "machine": heading,
        "proxy": coheriq.proxy_implementation(),
        # Whether plain functions stood on the code-swapped proxy (COHERIQ_SWAP_CODE).
        "swap_code": os.environ.get("COHERIQ_SWAP_CODE", "1") != "0",
        "date": time.strftime("%Y-%m-%d"),
        "rows": [{**asdict(r), "verdict": r.verdict} for r in rows],
        "import_adds": added,
    }
    (folder / "dispatch.json").write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="coheriq's benchmark suite")
    parser.add_argument("--quick", action="store_true", help="few short rounds: a smoke run")
    parser.add_argument(
        "--record", type=Path, metavar="DIR", help="also write dispatch.txt and dispatch.json here"
    )
    parser.add_argument(
        "--only",
        choices=["dispatch", "reference", "declines", "shadow"],
        help="run the dispatch (or reference, declines or shadow) cases only "
        "(benchmarks/proxies.py compares the first two)",
    )
    parser.add_argument("--rounds", type=int, help="rounds of each case (default 31)")
    parser.add_argument("--number", type=int, help="calls in each round (default 300,000)")
    args = parser.parse_args(argv)
    plan = Plan(3, 2_000, 1, 2) if args.quick else Plan(31, 300_000, 5, 10)
    plan.rounds = args.rounds or plan.rounds
    plan.number = args.number or plan.number
    swapped = "code-swapped functions, " if os.environ.get("COHERIQ_SWAP_CODE") != "0" else ""
    heading = (
        f"coheriq {coheriq.__version__} ({swapped}{coheriq.proxy_implementation()} proxy), "
        f"Python {platform.python_version()} "
        f"({platform.python_implementation()}), {platform.machine()}, "
        f"{os.cpu_count()} CPUs{', --quick' if args.quick else ''}, "
        f"{plan.rounds} rounds of {plan.number:,} calls"
    )
    print(heading)
    rows: list[Row] = []
    steps = [
        ("reference", bench_reference),
        ("dispatch", bench_dispatch),
        ("declines", bench_declines),
        ("shadow", bench_shadow),
        ("conversions", bench_conversions),
        ("set-up", bench_setup),
    ]
    if args.only:
        # The dispatch cases include the reference's (benchmarks/proxies.py compares both).
        wanted = ("reference", "dispatch") if args.only == "dispatch" else (args.only,)
        steps = [step for step in steps if step[0] in wanted]
    total = len(steps) + (not args.only)
    for i, (label, step) in enumerate(steps, 1):
        print(f"[{i}/{total}] {label} ...", file=sys.stderr, flush=True)
        rows += step(plan)
    added: list[str] = []
    table = render(with_targets(rows))
    if not args.only:
        print(f"[{total}/{total}] import ...", file=sys.stderr, flush=True)
        row, added = bench_import(plan)
        rows.append(row)
        table = (
            f"{render(with_targets(rows))}\nmodules that `import coheriq` adds: {' '.join(added)}"
        )
    print(table)
    if args.record:
        record(args.record, heading, f"{heading}\n{table}", rows, added)
    return 0


if __name__ == "__main__":
    sys.exit(main())
