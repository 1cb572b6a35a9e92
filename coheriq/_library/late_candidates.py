"""Candidates that arrive after a domain is materialized: modules run again, lazy modules.

A domain is materialized once, when its library has been imported; two things
mark candidates later, and this module lets them:

* **A module that runs again** (``importlib.reload(mylib.stats)``, IPython's
  ``%autoreload``, a retry after a failed import) marks its candidates again.
  Each is *redefined*: the domain keeps the candidate, with the new code as its
  reference implementation. A function candidate keeps its one proxy, which
  from then on runs the new code (as ``%autoreload`` makes old functions do);
  a class candidate is the newly marked class. The class marked before, where
  names still hold it, dispatches as the candidate: on an engine it constructs
  the engine's objects, on the reference the new class's (the newest code, as
  ``%autoreload`` makes old classes run), and ``isinstance`` with it is true
  for all of them. New candidates the module marks are added.
* **A lazily imported submodule** marks candidates the library declared with
  :meth:`~coheriq.AccelerationDomain.declare` before materializing. Until then
  the reference class holds a :class:`Declared` attribute for each, which
  imports the module when an engine's code reads it (``super().fit(...)``).

Either way the candidate is then *published*: the reference class gets its
attribute, engine classes that override it are checked against it, and every
engine started so far, the settled choice and the open blocks see it at once.
An override that does not fit is the engine's problem, not the module's: where
defining the engine now would fail (strict checks), the engine is refused and
the module imports (see :func:`coheriq._engines.overrides.check_late_overrides`).
"""

from __future__ import annotations

from .._stdlib import TYPE_CHECKING
from ..exceptions import CoheriqDomainError, CoheriqTypeError, did_you_mean, listing
from . import registry

if TYPE_CHECKING:
    from typing import Any

    from .._call.proxy import CandidateInfo

__all__ = [
    "Declared",
    "attribute_for",
    "check_may_mark",
    "import_declared",
    "not_imported_note",
    "publish",
    "publish_declared",
    "redefine",
    "runs_again",
]


def attribute_for(info: CandidateInfo) -> Any:
    """What the reference class holds for the candidate ``info``."""
    if not info.is_class:
        return staticmethod(info.reference)
    from .._engines.own_class import ClassCandidate  # imported with the class (see mark)

    return ClassCandidate(info)


class Declared:
    """A declared candidate whose module is not imported yet, on the reference class.

    Reading it (an engine's ``super().fit``, ``engine_class("lib").Model``)
    imports the module, which marks the candidate and replaces this attribute;
    the read then returns what replaced it.

    Args:
        domain: The domain.
        name: The candidate's name.
        module: The module that marks it.
        is_class: Whether it is declared as a class.
    """

    __slots__ = ("domain", "is_class", "module", "name")

    def __init__(self, domain: Any, name: str, module: str, is_class: bool) -> None:
        self.domain = domain
        self.name = name
        self.module = module
        self.is_class = is_class

    def __get__(self, engine: Any, owner: Any = None) -> Any:
        import importlib  # only when a declared candidate is first needed

        from ..exceptions import CoheriqError

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


def publish(domain: Any, info: CandidateInfo) -> None:
    """Make a candidate marked after materialize() part of the running domain.

    Call with the domain's lock held, once ``domain.state.candidates`` holds ``info``.
    """
    reference = domain.require_reference(f"publish candidate {info.name!r}")
    type.__setattr__(reference, info.name, attribute_for(info))
    domain.engines.candidate_changed(info.name)
    settled = domain.choice.settled
    if settled is not None:
        domain.state.switchboard.connect({info.name: settled.members[info.name]})
    domain.scopes.refresh_looking()


def publish_declared(domain: Any, name: str) -> None:
    """Put candidate ``name``, declared after materialize(), on the reference class.

    As :meth:`~coheriq.AccelerationDomain.materialize` puts the declared ones
    before it: no engine can override it yet (one that names it imports its
    subpackage first, which declares it). Call with the domain's lock held.
    """
    reference = domain.require_reference(f"declare candidate {name!r}")
    type.__setattr__(
        reference,
        name,
        Declared(domain, name, domain.not_imported[name], domain.candidate_kinds[name]),
    )


def runs_again(info: CandidateInfo, module: str, run: Any) -> bool:
    """Whether ``run`` of ``module`` marking ``info``'s name again is that module running again.

    It is when the same module's body marked it in a run that has ended (a
    reload, a retry after a failed import, a notebook cell run again); not when
    one run marks two candidates of one name, a function marks it twice, or
    another module takes the name.
    """
    return info.module == module and registry.ran_before(info.run, run)


def redefine(domain: Any, info: CandidateInfo, target: Any, run: Any) -> Any:
    """Make ``target``, from a module that runs again, candidate ``info`` (see the module doc).

    Call with the domain's lock held. Returns what stands at call sites.

    Raises:
        CoheriqDomainError: The candidate was a function and is now a class, or
            the other way round.
    """
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
        if info.is_class:
            from .._call.marked import check_implementations, construct_directly, mark_class

            implementations = domain.engines.implementations[info.name]
            marked = mark_class(info, domain.state.switchboard, implementations)
            implementations[marked] = None
            info.proxy = info.reference = marked
            # The class marked before stays at call sites that kept it (the
            # package's own "from .histogram import Histogram"): it dispatches
            # like the new one, for good, and owns every implementation.
            construct_directly(earlier, False)
            check_implementations(earlier, True)
        else:
            domain.state.switchboard.stand_in_again(info)
    except BaseException:
        info.reference = earlier
        raise
    info.run = run
    if domain.materialized:
        publish(domain, info)
    return info.proxy


def check_may_mark(domain: Any, name: str, target: Any, module: str, run: Any) -> None:
    """Raise unless ``module`` may mark a new candidate ``name`` of ``domain`` now.

    Before materialize() any module may. After it, a candidate declared for
    ``module`` may be marked (as declared), and so may a new candidate of a
    module that marked candidates before and runs again.

    Raises:
        CoheriqDomainError: None of these holds, or the declaration names another
            module.
        CoheriqTypeError: The candidate was declared as the other kind.
    """
    declared = domain._declared.get(name)
    if declared is not None:
        if declared != module:
            raise CoheriqDomainError(
                f"Module {module!r} marks candidate {name!r} of domain {domain.name!r}, "
                f"which the domain declares in module {declared!r}. Mark it there, or "
                "correct the declaration."
            )
        if isinstance(target, type) != domain._kinds[name]:
            kind = "class" if domain._kinds[name] else "function"
            raise CoheriqTypeError(
                f"Candidate {name!r} of domain {domain.name!r} is declared as a {kind}, but "
                f"module {module!r} marks {target!r}. Correct the declaration or the marking."
            )
        return
    # The module runs again if a run of its source that marked candidates has
    # ended (those it marked again since carry this run: their first run tells).
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
    """Import every module whose declared candidates are not marked yet.

    The subpackages that declare their own candidates are imported first (see
    :meth:`~coheriq.AccelerationDomain.declare_package`), so that theirs count.

    Returns:
        Module name -> ``None``, or what is wrong: its import failed, or it did
        not mark every candidate declared for it.
    """
    import importlib

    problems: dict[str, str | None] = domain.import_declaring_packages()
    for module in sorted(set(domain.not_imported.values())):
        try:
            importlib.import_module(module)
        except Exception as error:  # reported, with the others, by the caller
            problems[module] = f"importing it raised {type(error).__name__}: {error}"
            continue
        missing = sorted(n for n, m in domain.not_imported.items() if m == module)
        problems[module] = (
            None
            if not missing
            else f"it does not mark the candidates declared for it: {', '.join(missing)}"
        )
    return problems


def not_imported_note(module: str) -> str:
    """What ``explain`` and ``coheriq show`` say of a declared candidate not marked yet."""
    import sys

    if module in sys.modules:
        return f"declared in module {module}, which did not mark it"
    return f"not imported yet: module {module}"
