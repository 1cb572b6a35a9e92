"""Seeing what runs and why: :func:`explain` and :func:`coverage`. Neither chooses anything."""

from __future__ import annotations

from .._call.proxy import candidate_of
from .._call.swapped import not_swappable
from .._choice.ordered import after_chosen, describe_tried, parse_engine_list
from .._engines.conversions import would_convert
from .._engines.crossover import crossover_of
from .._engines.declines import chain_of
from .._engines.meta import EngineMeta, supplier
from .._library import observing
from .._library.domain import AccelerationDomain, lookup_domain
from .._library.late_candidates import not_imported_note
from .._names import REFERENCE
from .._stdlib import TYPE_CHECKING
from ..exceptions import CoheriqTypeError
from . import columns

if TYPE_CHECKING:
    from typing import Any


def _name(cls: EngineMeta) -> str:
    """An engine class as a reader knows it: its engine name, or the mixin's class."""
    return cls.__coheriq_name__ or f"mixin {cls.__module__}.{cls.__qualname__}"


class Explanation:
    """Which engine a call would run here and now, why, and who supplies each candidate.

    Attributes:
        domain: The domain's name.
        candidate: The candidate asked about, or ``None`` when asked about a domain.
        engine: The engine a call would run, or ``None`` if none can be named.
        reason: Why that engine, as a sentence.
        settled: Whether the domain's global choice is made.
        suppliers: Candidate name -> the engine (or ``"reference"``) whose class
            supplies it, along the engine's MRO; empty when the engine is not
            imported yet.
        tried: Where an ordered list of engines made the choice, what it tried:
            ``[(engine, outcome), ...]``, the last one ``"chosen"``, each other one
            why it was passed over; else empty.
        not_imported: Candidate name -> module, for the candidates explained
            whose module is not imported yet (see
            :meth:`~coheriq.AccelerationDomain.declare`).
        verification: Where a verification (:func:`coheriq.verify`) covers
            this context, what it does, as a sentence; else ``None``.
        shadow: Where a shadow verification (:func:`coheriq.shadow`) samples the
            domain's calls, what it does, as a sentence; else ``None``.
        answers: Asked with arguments: the engine whose implementation would
            answer a call with them (after the declines in ``declines``); else ``None``.
        declines: Asked with arguments: what the implementations before it
            would do, in order (``"gpu declines: 10 rows, below 512"``, or, for
            one that declines by raising, ``"gpu: may decline when it runs"``; for a
            soft check, ``"gpu should not run it: ..."``).
        crossovers: Asked with arguments: the crossover in force of each
            implementation on the way that declares one (see
            :func:`coheriq.crossover`), and where it comes from (``"gpu: 65,536
            values, declared by the engine"``, or measured on this machine on a date).
        conversions: Asked with arguments: what the call would convert where it
            crosses to the implementation that answers (``"ndarray -> Array by
            to_engine"``; see :class:`coheriq.Conversion`); else empty.
        bound_before: For a library accelerated from the outside after it was
            imported: candidate name -> the names (``"app.mean"``) bound to its
            unmarked function or class before, which run the library's own code
            whatever the engine; else empty.
        proxies: Function candidate name -> what stands at its call sites:
            ``"function"``, a function whose code is the candidate's own while
            it runs on the reference outside blocks (see the adoption guide);
            else the dispatcher, ``"compiled"`` or ``"python"`` (a generator or
            coroutine function, or a candidate that is not a plain function).
    """

    def __init__(
        self,
        domain: str,
        candidate: str | None,
        engine: str | None,
        reason: str,
        settled: bool,
        suppliers: dict[str, str],
        tried: list[tuple[str, str]] | None = None,
        not_imported: dict[str, str] | None = None,
        verification: str | None = None,
        answers: str | None = None,
        declines: list[str] | None = None,
    ) -> None:
        self.domain, self.candidate, self.engine, self.reason = domain, candidate, engine, reason
        self.settled, self.suppliers, self.tried = settled, suppliers, tried or []
        self.not_imported, self.verification = not_imported or {}, verification
        self.answers, self.declines = answers, declines or []
        self.bound_before: dict[str, list[str]] = {}
        self.proxies: dict[str, str] = {}
        self.conversions: list[str] = []
        self.crossovers: list[str] = []
        self.shadow: str | None = None
        # The candidates on a dispatcher because of what they are, not because
        # COHERIQ_SWAP_CODE=0 puts every candidate there: what str() names.
        self._set_aside: list[str] = []

    def _later(self, candidate: str) -> str:
        module = self.not_imported.get(candidate)
        return "" if module is None else f"  ({not_imported_note(module)})"

    def as_dict(self) -> dict[str, Any]:
        """The explanation as plain data (for JSON)."""
        return {key: value for key, value in vars(self).items() if not key.startswith("_")}

    def __repr__(self) -> str:
        return f"<Explanation of {self.candidate or self.domain!r}: engine {self.engine!r}>"

    def __str__(self) -> str:
        subject = f"candidate {self.candidate!r} of domain" if self.candidate else "domain"
        lines = [
            f"{subject} {self.domain!r} runs on engine {self.engine!r}"
            if self.engine is not None
            else f"{subject} {self.domain!r} has no engine it can run yet",
            f"  because: {self.reason}",
            f"  global choice: {'settled' if self.settled else 'not settled yet'}",
        ]
        if self.tried:
            lines.append(f"  tried: {describe_tried(tuple(self.tried))}")
        if self.verification:
            lines.append(f"  verification: {self.verification}")
        if self.shadow:
            lines.append(f"  shadow verification: {self.shadow}")
        if self._set_aside:
            lines.append(
                "  called through a dispatcher, not as their own code on the reference: "
                + ", ".join(f"{name} ({self.proxies[name]})" for name in self._set_aside)
            )
        if self.suppliers:
            lines.append("  supplied by:")
            width = max(map(len, self.suppliers))
            lines += [
                f"    {c:<{width}}  {who}{self._later(c)}" for c, who in self.suppliers.items()
            ]
        elif self.not_imported:
            lines.append("  not imported yet:")
            lines += [f"    {c}{self._later(c)}" for c in self.not_imported]
        lines += [
            f"  {name} was bound before it was marked, and stays unmarked as: {', '.join(names)}"
            for name, names in self.bound_before.items()
        ]
        if self.answers is not None:
            lines.append(f"  with these arguments: {self.answers} answers")
            lines += [f"    {step}" for step in self.declines]
            lines += [f"    crossover of {crossover}" for crossover in self.crossovers]
            lines += [f"    converts {conversion}" for conversion in self.conversions]
        return "\n".join(lines)


def explain(subject: Any, /, *args: Any, **kwargs: Any) -> Explanation:
    """Explain which engine a call would run here and now, and why; choose nothing.

    Args:
        subject: A candidate (as the library exports it), a domain or a domain's name.
        args, kwargs: For a candidate, the arguments of a call: the explanation
            then says which implementation would answer it, asking the checks of
            the implementations that may decline (see :func:`coheriq.may_decline`).
            Nothing runs but those checks (the engine is started if need be, as
            the first call would start it).

    Raises:
        CoheriqTypeError: ``subject`` is none of these, or arguments were given
            for a domain.
        CoheriqDomainNotFoundError: No domain of that name.
    """
    info = candidate_of(subject)
    if info is not None:
        domain, candidate = info.domain, info.name
    elif isinstance(subject, (AccelerationDomain, str)):
        domain, candidate = lookup_domain(subject), None
    else:
        raise CoheriqTypeError(
            f"explain takes a coheriq candidate, a domain or a domain's name, not "
            f"{type(subject).__name__} ({subject!r})."
        )
    now = domain.choice.prospect()
    engine, reason, cls, tried = now.engine, now.reason, now.engine_class, now.tried
    names = [candidate] if candidate else list(domain.candidate_kinds)
    suppliers = {} if cls is None else {c: _name(supplier(cls, c)) for c in names}
    settled = domain.choice.settled is not None
    later = {c: m for c, m in domain.not_imported.items() if c in names}
    verifying = observing.describe("verification", domain)
    explained = Explanation(
        domain.name, candidate, engine, reason, settled, suppliers, list(tried), later, verifying
    )
    explained.shadow = observing.describe("shadow", domain)
    explained.bound_before = {
        c: list(where) for c, where in domain.state.bound_before.items() if c in names
    }
    marked, kind_of = domain.state.candidates, domain.state.switchboard.kind_of
    explained.proxies = {c: kind_of(c) for c in names if c in marked and not marked[c].is_class}
    explained._set_aside = [
        c
        for c, kind in explained.proxies.items()
        if kind != "function" and not_swappable(marked[c].reference) is not None
    ]
    if args or kwargs:
        if candidate is None or cls is None:
            raise CoheriqTypeError(
                f"explain takes the arguments of a call with a candidate (explain(lib.f, x, "
                f"k=2)) whose engine is imported, not with domain {domain.name!r}: pass the "
                "candidate itself."
                if candidate is None
                else f"explain cannot say what a call of {candidate!r} would run before its "
                f"engine {engine!r} is imported; import it (or call once) first."
            )
        explained.answers, explained.declines, explained.crossovers = _answering(
            domain, cls, candidate, tried, args, kwargs
        )
        answering = domain.engines.by_name.get(explained.answers)
        owner = None if answering is None else supplier(answering, candidate)
        values = [*args, *kwargs.values()]
        explained.conversions = would_convert(candidate, cls, owner, values)
    return explained


def _answering(
    domain: AccelerationDomain, cls: EngineMeta, candidate: str, tried: Any, args: Any, kwargs: Any
) -> tuple[str, list[str], list[str]]:
    """Which engine would answer a call of ``candidate`` with these arguments, the
    declines before it (see :meth:`coheriq._engines.declines.Chain.would_run`), and the
    crossovers on the way."""
    chosen = domain.scopes.live() or domain.choice.settled
    if chosen is not None:
        members = chosen.members
    else:
        # Before the choice, the engines of the variable's list after the one that starts
        # here run what it declines, as they will once chosen.
        variable, value = domain.choice.env_choice()
        then = ()
        if "," in value and tried:
            then = after_chosen(parse_engine_list(value, f" (named by {variable})"), tried)
        members = domain.engines.members_of(cls, then)  # starts it, as the first call would
    chain = chain_of(members[candidate])
    if chain is not None:  # some implementation may decline
        return (*chain.would_run(args, kwargs), _crossovers(chain))
    return _name(supplier(cls, candidate)), [], []


def _crossovers(chain: Any) -> list[str]:
    """The crossovers in force along ``chain`` (settled now, as a call would), described."""
    described = []
    for step in chain.all_steps():
        declared = crossover_of(step.check)
        if declared is not None:
            threshold = declared.threshold
            if threshold is None:
                threshold = declared.settle()
            described.append(f"{step.engine}: {threshold:,} {declared.unit}, {declared.origin}")
    return described


class Coverage:
    """Which engine class supplies each candidate, for each engine of a domain.

    Attributes:
        domain: The domain's name.
        engines: The engines covered, ``"reference"`` first.
        rows: Candidate name -> {engine: ``"own"``, ``"from <engine>"`` or
            ``"reference"``}.
    """

    def __init__(self, domain: str, engines: list[str], rows: dict[str, dict[str, str]]):
        self.domain, self.engines, self.rows = domain, engines, rows

    def as_dict(self) -> dict[str, Any]:
        """The table as plain data (for JSON)."""
        return {"domain": self.domain, "engines": self.engines, "rows": self.rows}

    def __str__(self) -> str:
        table = [["candidate", *self.engines]]
        table += [[c, *(row[e] for e in self.engines)] for c, row in self.rows.items()]
        return columns(table, len(table[0]))


def coverage(domain: AccelerationDomain | str, *, advertised: bool = False) -> Coverage:
    """Tabulate, for every candidate and engine, which class supplies the candidate.

    Args:
        domain: The domain or its name.
        advertised: Also load the engines that installed packages advertise (this
            imports them); by default only registered engines are covered.
    """
    found = lookup_domain(domain)
    reference = found.require_reference("tabulate its coverage")
    engines = found.engines
    # An AccelerationEngine not materialized yet has no class to tabulate.
    names = (
        [n for n in engines.names() if n not in engines.reserved]
        if advertised
        else sorted(engines.by_name)
    )
    classes = {REFERENCE: reference, **{n: engines.engine_class(n) for n in names}}

    def supplied(cls: EngineMeta, candidate: str) -> str:
        source = supplier(cls, candidate)
        if source is reference:
            return REFERENCE
        return "own" if source is cls else f"from {_name(source)}"

    rows = {c: {e: supplied(cls, c) for e, cls in classes.items()} for c in found.candidate_kinds}
    return Coverage(found.name, list(classes), rows)
