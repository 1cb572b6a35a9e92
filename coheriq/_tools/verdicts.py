"""What a verification found (:func:`coheriq.verify`): its rows, its mismatches, its table."""

from __future__ import annotations

from .._stdlib import TYPE_CHECKING
from ..exceptions import CoheriqError
from . import columns

if TYPE_CHECKING:
    from typing import Any


class CoheriqVerificationWarning(UserWarning):
    """An engine and the implementation it is verified against disagreed on a call."""


class CoheriqVerificationError(CoheriqError, AssertionError):
    """Raised by a call whose two implementations disagreed, under ``on_mismatch="raise"``."""


class Mismatch:
    """One call on which the two implementations disagreed.

    Attributes:
        domain: The domain's name.
        candidate: The candidate's name.
        call: Which call of the candidate it was (1 for the first, counting every call).
        arguments: The call's arguments, each cut short.
        difference: Where and how the results differ, or which side raised what.
        kind: ``"result"``, or ``"exception"`` where one side raised (or the two
            raised different exceptions).
    """

    __slots__ = ("arguments", "call", "candidate", "difference", "domain", "kind")

    def __init__(
        self, domain: str, candidate: str, call: int, arguments: str, difference: str, kind: str
    ) -> None:
        self.domain, self.candidate, self.call = domain, candidate, call
        self.arguments, self.difference, self.kind = arguments, difference, kind

    def __str__(self) -> str:
        return (
            f"{self.domain}.{self.candidate}{self.arguments} (call {self.call}): {self.difference}"
        )

    def __repr__(self) -> str:
        return f"<Mismatch {self}>"

    def as_dict(self) -> dict[str, Any]:
        """The mismatch as plain data."""
        return {name: getattr(self, name) for name in sorted(self.__slots__)}


class VerificationRow:
    """What a verification saw of one candidate.

    Attributes:
        domain: The domain's name.
        candidate: The candidate's name.
        engine: The engine verified.
        against: The implementation it was compared with.
        calls: Calls made on the engine while the verification was on.
        compared: Calls run on both sides and compared.
        not_comparable: Calls run on both sides whose results (or a part of
            them: an iterator, a function, an object without ``__eq__``)
            compare by identity only, and were not compared: neither agreed
            nor differed (see ``notes``). Not counted in ``compared``; a
            comparison registered for the type
            (:func:`coheriq.register_comparison`) makes them compared.
        mismatches: Compared calls whose results differed.
        one_sided: Compared calls on which only one side raised, or the two
            raised different exceptions (counted in ``mismatches`` too).
        not_compared: Calls run on the engine alone: sampled out (``every``),
            past the time ``budget``, a candidate with side effects (or one
            whose run on the other side reached one, and was stopped there), or
            arguments that could not be copied (see ``notes``).
        engine_time: Seconds the engine took on the calls run on both sides
            (compared, or not comparable).
        other_time: Seconds the other implementation took on them.
        examples: The first few mismatches.
        notes: Why calls were not compared, once each.
        answered: For the calls the engine declined (see
            :func:`coheriq.may_decline`), which implementation answered them
            (and was compared): implementation -> calls.
    """

    def __init__(self, domain: str, candidate: str, engine: str, against: str) -> None:
        self.domain, self.candidate, self.engine, self.against = domain, candidate, engine, against
        self.calls = self.compared = self.mismatches = self.one_sided = self.not_compared = 0
        self.not_comparable = 0
        self.engine_time = self.other_time = 0.0
        self.examples: list[Mismatch] = []
        self.notes: list[str] = []
        self.answered: dict[str, int] = {}

    def __repr__(self) -> str:
        return (
            f"VerificationRow({self.domain}.{self.candidate}, {self.engine!r} against "
            f"{self.against!r}: {self.compared} of {self.calls} calls compared, "
            f"{self.mismatches} mismatches)"
        )

    def as_dict(self) -> dict[str, Any]:
        """The row as plain data (its examples as dicts)."""
        data = dict(sorted(vars(self).items()))
        data["examples"] = [m.as_dict() for m in self.examples]
        data["notes"] = list(self.notes)
        data["answered"] = dict(self.answered)
        return data


def table(title: str, engine: str, rows: list[VerificationRow]) -> str:
    """The report as text: ``title``, a line per row, then each mismatch and note kept."""
    if not rows:
        return f"{title}: no calls of its candidates on {engine!r} were made"
    header = ["candidate", "calls", "compared", "mismatches", "one-sided", "not comparable"]
    cells = [[*header, "engine", "other"]] + [
        [
            f"{r.domain}.{r.candidate}",
            *map(str, (r.calls, r.compared, r.mismatches, r.one_sided, r.not_comparable)),
            f"{r.engine_time * 1e3:.3f} ms",
            f"{r.other_time * 1e3:.3f} ms",
        ]
        for r in rows
    ]
    lines = [title, columns(cells, 1)]
    lines += [f"mismatch: {m}" for r in rows for m in r.examples]
    lines += [f"note: {r.domain}.{r.candidate}: {note}" for r in rows for note in r.notes]
    lines += [
        f"declined: {r.domain}.{r.candidate}: {r.answered[who]} of the calls on {engine!r} "
        f"were declined and answered by {who!r}, which was compared with {r.against!r}"
        for r in rows
        for who in sorted(r.answered)
    ]
    return "\n".join(lines)
