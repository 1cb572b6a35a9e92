"""What each case of ``benchmarks/run.py`` should cost at most: its target.

A target says what the measurement shows a proxy can reach on the Python it runs
on, so most are stated in a *floor*: a case that is not coheriq, measured in the
same run, whose median the target multiplies.

``floor: functools.partial(impl)``
    The cheapest callable written in C that calls a Python function. On Python
    3.10 it costs about 1.3 direct calls; from 3.11 on, where a direct call of a
    Python function is inlined by the interpreter and a call through any object
    written in C enters it anew, about 2 (1.7 to 2.7, depending on the Python
    and the run). The compiled proxy does what it does (one C call that passes
    the arguments on) and reads two things more, so a call through a proxy on
    the global path, and constructing a class candidate, is held to 1.1 times
    it: the tenth is for those reads and for the spread between two medians on
    a shared machine (the recorded runs measure the proxy at 0.85 to 0.94 times
    the floor, and a run on a busy machine at 1.04). A call
    that looks at a ``using_engine`` block is held to 1.4 times it, as 1.8x was
    to 1.3x when the first targets were set, on 3.10.
``floor: a class with its own metaclass``
    Constructing a class whose metaclass is a subclass of ``type`` that adds
    nothing, against the same class without it. About 1 up to 3.12; more from
    3.13 on, the interpreter's inlined construction being for classes whose
    metaclass is ``type`` itself. A marked class on the reference is held to 1.2
    times it.

The floors are references, not targets: they have none. The other cases have
fixed targets (``isinstance``, and the absolute times). This module is read by
``run.py``, which records each row's target, rule and verdict (the docs' charts
draw them from the recorded files), and by ``proxies.py``, which applies them
again to every run it compares.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CALL_FLOOR = "floor: functools.partial(impl)"
CLASS_FLOOR = "floor: a class with its own metaclass"
FLOORS = (CALL_FLOOR, CLASS_FLOOR)
SHORT = {CALL_FLOOR: "floor", CLASS_FLOOR: "class floor"}

# Each case: a number (its target in its own unit), or (floor, factor).
RULES: dict[str, float | tuple[str, float]] = {
    # A plain function on the reference, where no block ever opened: the function
    # itself (its code is the candidate's own), with a twentieth for noise.
    "call, reference, no block ever": 1.05,
    "call, reference, keyword, no block ever": 1.05,
    "swap a function's code, per candidate": 1.0,
    # A crossover's check, generated with its size function's parameters, against a
    # when= check that calls the same function: the tenth is for reading the threshold
    # and for the spread between two medians.
    "crossover taken, against a when= check": 1.1,
    # Shadow verification (coheriq.shadow), against the same engine unshadowed: an
    # unsampled call pays a Python frame and a random draw (about 45 ns), which is all
    # there is of a trivial call, and within the noise of a call that does 10 us of work;
    # at 1%, the sampled calls' copies and the background comparing stay within a tenth.
    "unsampled call, shadow on": 2.0,
    "unsampled call, shadow on, a 10 us call": 1.05,
    "call, shadow on at 1%, a 10 us call": 1.1,
    "enter and leave a block, 1000 candidates": 5.0,
    "call, reference, after blocks opened": (CALL_FLOOR, 1.4),
    "call, global engine, positional": (CALL_FLOOR, 1.1),
    "call, global engine, keyword": (CALL_FLOOR, 1.1),
    "construct class candidate": (CALL_FLOOR, 1.1),
    "construct class candidate, reference": (CLASS_FLOOR, 1.2),
    "classmethod of a candidate, reference": (CLASS_FLOOR, 1.2),
    "construct a subclass of a candidate": (CLASS_FLOOR, 1.2),
    "isinstance(1, class candidate), false": 3.0,
    "call inside using_engine": (CALL_FLOOR, 1.4),
    "call inside using_engine, no global choice yet": (CALL_FLOOR, 1.4),
    "call inside using_engine, reference": (CALL_FLOOR, 1.4),
    "enter and leave the only using_engine": 5.0,
    "enter and leave a nested using_engine": 3.0,
    "construct inside using_engine": (CALL_FLOOR, 1.4),
    "call while another thread is scoped": (CALL_FLOOR, 1.4),
    "call after a verification ended": (CALL_FLOOR, 1.1),
    "conversion cache hit": 1.0,
    "resolve_impl": 2.0,
    "active_implementation": 2.0,
    "mark 1000 candidates + materialize": 0.25,
    "materialize engine, 500 overrides": 0.1,
    "import coheriq (-X importtime)": 5.0,
}


def rule(case: str) -> str:
    """How the case's target is set, in words: ``"1.4 x floor"``; ``""`` if it is fixed."""
    found = RULES.get(case)
    if not isinstance(found, tuple):
        return ""
    floor, factor = found
    return SHORT[floor] if factor == 1 else f"{factor:g} x {SHORT[floor]}"


def target(case: str, medians: Mapping[str, float]) -> float | None:
    """The case's target, given the medians of the run's floors; None for a floor.

    None too where the case's floor was not measured in that run.
    """
    found = RULES.get(case)
    if found is None:
        return None
    if isinstance(found, tuple):
        floor, factor = found
        return factor * medians[floor] if floor in medians else None
    return found


def verdict(case: str, median: float, goal: float | None) -> str:
    """``ok`` or ``MISSED``; ``floor`` for a floor (a reference); ``-`` with no target."""
    if case in FLOORS:
        return "floor"
    if goal is None:
        return "-"
    return "ok" if median <= goal else "MISSED"


def apply(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of one run (dicts with ``case`` and ``median``), with their targets.

    Sets each row's ``target``, ``rule`` and ``verdict`` from this module's rules and
    the run's own floors, whatever the rows held before.
    """
    medians = {row["case"]: row["median"] for row in rows if row["case"] in FLOORS}
    done = []
    for row in rows:
        goal = target(row["case"], medians)
        done.append(
            {
                **row,
                "target": goal,
                "rule": rule(row["case"]),
                "verdict": verdict(row["case"], row["median"], goal),
            }
        )
    return done
