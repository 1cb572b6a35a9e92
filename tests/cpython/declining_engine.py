"""An engine of a marked standard-library module that declines every other call.

``install(domain)`` defines engine ``"halving"`` for the domain: each function
candidate's implementation, marked with ``coheriq.may_decline``, declines every
other call (the next implementation, the reference, answers it) and runs the
reference itself on the others. A suite run on it must pass test for test, and
a profile must count the declines (``run_suite.py MODULE --declining``).
"""

from __future__ import annotations

import itertools
from typing import Any

import coheriq


def _declining(name: str) -> Any:
    calls = itertools.count()

    @coheriq.may_decline
    def implementation(self: Any, *args: Any, **kwargs: Any) -> Any:
        if next(calls) % 2 == 0:
            raise coheriq.Decline("every other call")
        return getattr(super(type(self), self), name)(*args, **kwargs)

    implementation.__name__ = implementation.__qualname__ = name
    return implementation


def install(domain: str) -> None:
    """Define engine ``"halving"`` of ``domain`` (its function candidates only)."""
    reference = coheriq.engine_class(domain)
    kinds = coheriq.import_domain(domain).candidate_kinds
    namespace = {name: _declining(name) for name, is_class in kinds.items() if not is_class}
    type(reference)("Halving", (reference,), namespace, name="halving")
