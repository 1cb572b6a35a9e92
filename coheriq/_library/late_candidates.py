"""Candidates marked after a domain is materialized: by a module that runs again, or lazily.

A module that runs again (a reload) *redefines* the candidates it marked; a lazily imported module
marks those its library declared (:class:`Declared` stands for them until then). Either way the
candidate is then *published*: the reference class, the engines, the settled choice and the open
blocks see it."""

from __future__ import annotations

import sys

from .._stdlib import TYPE_CHECKING
from ..exceptions import CoheriqDomainError, CoheriqError, CoheriqTypeError, did_you_mean, listing
from . import registry

if TYPE_CHECKING:
    from typing import Any

    from .._call.proxy import CandidateInfo


def attribute(domain: Any, name: str) -> Any:
    """What the reference class holds for candidate ``name``, marked or declared."""
    info = domain.state.candidates.get(name)
    if info is None:
        return Declared(domain, name, domain.not_imported[name], domain.candidate_kinds[name])
    if not info.is_class:
        if domain.engines.converting:  # imported with the engine that converts
            from .._engines.conversions import ReferenceReached

            return ReferenceReached(domain.state, name, info.reference)
        return staticmethod(info.reference)
    from .._engines.own_class import ClassCandidate  # imported with the first class

    return ClassCandidate(info)


class Declared:
    """On the reference class, a declared candidate whose ``module`` is not imported yet: reading
    it (an engine's ``super().fit``) imports the module, which marks the candidate and replaces
    this attribute; the read returns what replaced it."""

    __slots__ = ("domain", "is_class", "module", "name")

    def __init__(self, domain: Any, name: str, module: str, is_class: bool) -> None:
        self.domain, self.name, self.module, self.is_class = domain, name, module, is_class

    def __get__(self, engine: Any, owner: Any = None) -> Any:
        import importlib  # only when a declared candidate is first needed

        try:
            importlib.import_module(self.module)
        except CoheriqError as error:  # say which import failed, not only where
            raise type(error)(
                f"Importing module {self.module!r}, which marks candidate {self.name!r} of "
                f"domain {self.domain.name!r} (read by an engine's code before the module "
                f"was imported), failed: {error} Import the module before that code runs."
            ) from error
        marked = self.domain.require_reference("read a declared candidate").__dict__[self.name]
        if isinstance(marked, Declared):
            raise CoheriqDomainError(
                f"Domain {self.domain.name!r} declares candidate {self.name!r} in module "
                f"{self.module!r}, but importing that module did not mark it. Mark it there "
                "with acceleration_candidate, or correct the declaration."
            )
        return marked.__get__(engine, owner)

    def __repr__(self) -> str:
        kind = "class" if self.is_class else "function"
        return (
            f"<{kind} candidate {self.name!r} of domain {self.domain.name!r}, "
            f"declared in module {self.module!r}, not imported yet>"
        )


def publish(domain: Any, name: str) -> None:
    """Make candidate ``name``, marked or declared after materialize(), part of the domain
    (the domain's lock held, once the domain records the candidate)."""
    reference = domain.require_reference(f"publish candidate {name!r}")
    type.__setattr__(reference, name, attribute(domain, name))
    if name not in domain.state.candidates:
        return  # declared: no engine can override it yet
    domain.engines.candidate_changed(name)
    settled = domain.choice.settled
    if settled is not None:
        domain.state.switchboard.connect({name: settled.members[name]})
    domain.scopes.refresh_looking()


def redefine(domain: Any, info: CandidateInfo, target: Any, run: Any) -> Any:
    """Make ``target`` the reference of candidate ``info`` (the domain's lock held); return what
    stands at call sites. Raises CoheriqDomainError where the kind changes."""
    if isinstance(target, type) != info.is_class:
        was, now = ("class", "function") if info.is_class else ("function", "class")
        raise CoheriqDomainError(
            f"Module {info.module!r}, running again, marks a {now} as candidate {info.name!r} "
            f"of domain {domain.name!r}, which was a {was}: engines were checked against "
            "the old kind. Keep the kind, or restart the program."
        )
    domain.engines.check_overrides(info.name, target)
    earlier = info.reference
    info.reference = target
    try:
        domain._stand_in(info, again=True)
        if info.is_class:
            from .._call.marked import check_implementations, construct_directly

            # The class marked before stays at call sites that kept it: it
            # dispatches like the new one, for good.
            construct_directly(earlier, False)
            check_implementations(earlier, True)
    except BaseException:
        info.reference = earlier
        raise
    info.run = run
    if domain.materialized:
        publish(domain, info.name)
    return info.proxy


def check_may_mark(domain: Any, name: str, target: Any, module: str, run: Any) -> None:
    """Raise unless ``module`` may mark a new candidate ``name`` of ``domain`` now: any module
    before materialize(); after it, only as declared, or a module that marked before, again."""
    declared = domain.not_imported.get(name)
    if declared is not None:
        if declared != module:
            raise CoheriqDomainError(
                f"Module {module!r} marks candidate {name!r} of domain {domain.name!r}, "
                f"which the domain declares in module {declared!r}. Mark it there, or "
                "correct the declaration."
            )
        if isinstance(target, type) != domain.candidate_kinds[name]:
            kind = "class" if domain.candidate_kinds[name] else "function"
            raise CoheriqTypeError(
                f"Candidate {name!r} of domain {domain.name!r} is declared as a {kind}, but "
                f"module {module!r} marks {target!r}. Correct the declaration or the marking."
            )
        return
    # Candidates marked again since carry the new run: their first run tells.
    if not domain.materialized or any(
        info.module == module and registry.reran(info.first_run, run)
        for info in domain.state.candidates.values()
    ):
        return
    # A module imported lazily marks a name its declaration does not have: a typo?
    waiting = [other for other, where in domain.not_imported.items() if where == module]
    if waiting:
        raise CoheriqDomainError(
            f"Module {module!r} marks {name!r} as a candidate of domain {domain.name!r}, "
            f"but the domain's declaration of that module names {listing(waiting)}, not "
            f"{name!r}.{did_you_mean(name, waiting)} Correct the declaration "
            "(domain.declare) or the marking."
        )
    raise CoheriqDomainError(
        f"Cannot mark {name!r} as a candidate of domain {domain.name!r}: the domain is "
        "materialized already. Mark every candidate before calling materialize() (declare "
        "those of a module imported lazily with domain.declare())."
    )


def import_declared(domain: Any) -> dict[str, str | None]:
    """Import the declaring subpackages, then every module with declared candidates unmarked;
    return module name -> None, or what is wrong (its import failed, or it did not mark them)."""
    problems: dict[str, str | None] = domain.import_declaring_packages()
    for module in sorted(set(domain.not_imported.values())):
        problem = problems[module] = import_problem(module)
        missing = sorted(n for n, m in domain.not_imported.items() if m == module)
        if problem is None and missing:
            problems[module] = (
                f"it does not mark the candidates declared for it: {', '.join(missing)}"
            )
    return problems


def import_problem(module: str) -> str | None:
    """Import ``module``; return None, or what its import raised (for the caller to report)."""
    import importlib  # only where declared candidates are looked for

    try:
        importlib.import_module(module)
    except Exception as error:
        return f"importing it raised {type(error).__name__}: {error}"
    return None


def not_imported_note(module: str) -> str:
    """What ``explain`` and ``coheriq show`` say of a declared candidate not marked yet."""
    if module in sys.modules:
        return f"declared in module {module}, which did not mark it"
    return f"not imported yet: module {module}"
