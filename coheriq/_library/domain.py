"""AccelerationDomain: a library's candidates, and the parts that dispatch them.

A library creates its domain once, marks its candidates, then calls ``materialize()``. The
domain owns ``engines``, ``choice`` and ``scopes``, each made with its
:class:`~coheriq._choice.state.DomainState`; its lock guards setup only, and is never held while
an engine is imported or started."""

from __future__ import annotations

# _thread rather than threading: the same locks, without importing threading.
import _thread
import os
import sys

from .._call.proxy import CandidateInfo, Switchboard, candidate_of
from .._choice.blocks import Scope, Scopes
from .._choice.global_choice import GlobalChoice
from .._choice.state import DomainState
from .._engines.meta import EngineMeta
from .._engines.registry import Engines
from .._names import check_candidate_name, check_name, name_given_once
from .._stdlib import TYPE_CHECKING, MappingProxyType
from ..exceptions import (
    CoheriqDomainError,
    CoheriqDomainNameError,
    CoheriqDomainNotFoundError,
    CoheriqTypeError,
    did_you_mean,
    listing,
)
from . import late_candidates, observing, registry

# typing.overload for type checkers and Sphinx (which shows overloads from typing only).
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from typing import Any, TypeVar, overload

    from .comparing import Comparisons

    F = TypeVar("F", bound=Callable[..., Any])
else:
    from .._stdlib import overload


if TYPE_CHECKING:  # the registry's functions, typed here where the domain class is

    def all_domains() -> list[AccelerationDomain]: ...
    def lookup_domain(
        domain: AccelerationDomain | str,
        missing: type[CoheriqDomainNotFoundError] = CoheriqDomainNotFoundError,
    ) -> AccelerationDomain: ...

else:
    all_domains, lookup_domain = registry.named_domains, registry.lookup_domain


class AccelerationDomain:
    """A library's set of acceleration candidates and the engines that implement them.

    Args:
        name: The domain's name, conventionally the library's import name. Engines
            advertise themselves in the entry-point group ``coheriq.engines.<name>``.
        env_prefix: If given, the environment variable ``<env_prefix>_ENGINE`` names
            the engine to use when the program does not call ``enable_engine``;
            an empty value means the reference implementation.
        strict: If true, an engine override whose signature cannot accept every
            call its candidate accepts is an error instead of a
            :class:`~coheriq.CoheriqSignatureWarning` (``COHERIQ_STRICT=1`` does the
            same for every domain).

    Raises:
        CoheriqTypeError: ``name`` or ``env_prefix`` is not a valid name.
        CoheriqDomainError: A domain of that name exists already, created by
            another module. (The same module running again, by a reload or a
            fresh import, makes a new copy of the domain.)

    Attributes:
        name: The domain's name.
        module: The name of the module that created the domain (the library's).
        engines: Its engine classes and their instances
            (:class:`coheriq._engines.registry.Engines`).
        choice: Its process-global choice (:class:`coheriq._choice.global_choice.GlobalChoice`).
        scopes: Its ``using_engine`` blocks (:class:`coheriq._choice.blocks.Scopes`).

    A program uses the functions of :mod:`coheriq` (``enable_engine``,
    ``using_engine``, ``explain``, ...), not these parts.
    """

    def __new__(
        cls, name: str, *, env_prefix: str | None = None, strict: bool = False
    ) -> AccelerationDomain:
        # A package's module that runs again may carry on its domain: see registry.continuing.
        if isinstance(name, str):
            continued: AccelerationDomain | None = registry.continuing(name, sys._getframe(1))
            if continued is not None:
                return continued
        return super().__new__(cls)

    def __init__(self, name: str, *, env_prefix: str | None = None, strict: bool = False) -> None:
        if "state" in self.__dict__:  # continued by a module that runs again
            self._check_settings(env_prefix, strict)
            return
        check_name(name, "domain name", CoheriqDomainNameError)
        creator = sys._getframe(1)
        self.name = name
        self.module: str = creator.f_globals.get("__name__", "__main__")
        self.state = state = DomainState(name, self.module, _thread.RLock())
        self._check_settings(env_prefix, strict)
        self._globals = creator.f_globals  # tells copies of the library's module apart
        # A domain of the same name made while this run still runs is a second
        # domain, not a copy.
        self._run = registry.run_of(creator)
        self._comparisons: Comparisons | None = None
        # name -> is a class, for every name an engine may override (marked or declared).
        self._kinds: dict[str, bool] = {}
        self._declared: dict[str, str] = {}  # declared, not marked yet: name -> module
        self._packages: list[str] = []  # see declare_package
        self._materialized_by: Any = None  # the run that called materialize()
        self.engines = state.engines = Engines(state)
        self.choice = state.choice = GlobalChoice(state)
        # Under the lock: a thread that finds the new domain by name waits until it is whole.
        with state.lock:
            registered = registry.register(self)
            if registered is None:
                existing = lookup_domain(name)
                raise CoheriqDomainError(
                    f"A coheriq domain named {name!r} exists already, created by module "
                    f"{existing.module!r}"
                    f"{'' if existing.materialized else ', not materialized yet'}; each library "
                    "creates its domain once, at import (a module that runs again, by a reload "
                    "or a fresh import, makes a new copy of its domain). Reuse it "
                    "(coheriq.engine_class(name) reaches it) or choose another name."
                )
            state.copies, copy = registered
            self.scopes = state.scopes = Scopes(state, state.copies.scope)
            tag = "" if copy == 1 else str(copy)
            state.switchboard = Switchboard(
                self.scopes.here, state.copies.namespace, tag, Scope, self.choice.unchosen
            )
            watching = observing.finder_for(self)
            if watching is not None:
                self.scopes.set_watching(watching)
            else:  # the flag stays on until the choice is made (or a block opens)
                self.scopes.refresh_finder()
        if copy > 1:
            # The older copies now look at the context on every call, through every
            # copy, and are freed once nothing but their Copies holds them.
            for other in state.copies.alive():
                if other is not self and not other.state.switchboard.retired:
                    with other.state.lock:
                        other.scopes.retire()
                    if other.state.class_candidates:
                        from .._call.marked import release

                        release(info.reference for info in other.state.class_candidates)

    def _declared_as(self, name: str, module: str, is_class: bool) -> bool:
        """Whether ``name`` is declared (or marked, once declared) so already."""
        info = self.state.candidates.get(name)
        where = self._declared.get(name) if info is None else info.module
        return where == module and self._kinds.get(name) == is_class

    def _check_settings(self, env_prefix: Any, strict: Any) -> None:
        """Validate the settings and take them (again, for a domain continued)."""
        if env_prefix is not None and not (
            isinstance(env_prefix, str) and env_prefix.isidentifier() and env_prefix.isascii()
        ):
            raise CoheriqTypeError(
                f"The env_prefix of domain {self.name!r} must be a string of letters, digits "
                f"and '_' that can start an environment variable name, not {env_prefix!r}."
            )
        if not isinstance(strict, bool):
            raise CoheriqTypeError(
                f"The strict option of domain {self.name!r} is True or False, not {strict!r}."
            )
        self.state.env_prefix, self.state.strict = env_prefix, strict
        self.state.env_var = None if env_prefix is None else f"{env_prefix}_ENGINE"

    def __repr__(self) -> str:
        made = "materialized" if self.materialized else "collecting candidates"
        return (
            f"<AccelerationDomain {self.name!r}: {len(self.state.candidates)} candidates, {made}>"
        )

    @property
    def env_prefix(self) -> str | None:
        """The prefix of the environment variable that can name the engine (see :attr:`env_var`)."""
        return self.state.env_prefix

    @property
    def strict(self) -> bool:
        """Whether an engine override that cannot accept every call of its candidate is an error."""
        return self.state.strict

    @property
    def env_var(self) -> str | None:
        """The environment variable that can name this domain's engine, if any."""
        return self.state.env_var

    @property
    def candidate_kinds(self) -> Mapping[str, bool]:
        """Candidate name -> whether it is a class (read-only), for every candidate an
        engine may override, declared ones included, in the order they were marked or declared.
        """
        return MappingProxyType(self._kinds)

    @property
    def not_imported(self) -> Mapping[str, str]:
        """Declared candidate name -> the module, not imported yet, that marks it (read-only)."""
        return MappingProxyType(self._declared)

    def declare(
        self, module: str, *, functions: Iterable[str] = (), classes: Iterable[str] = ()
    ) -> None:
        """Declare the ``functions`` and ``classes`` that ``module`` (``"mylib.heavy"``) will mark.

        A library that imports some submodules only when first used (a module
        ``__getattr__``, ``lazy_loader``) declares their candidates before
        :meth:`materialize`, so that nothing has to import them: engines may
        override a declared candidate at once (a misspelled name is still an
        error), and it is marked, and dispatched, when its module is imported.
        An engine's code that reads it before then (``super().fit(...)``)
        imports the module. After :meth:`materialize`, only the modules of a
        subpackage named by :meth:`declare_package` may be declared, from that
        subpackage's ``__init__``.

        Raises:
            CoheriqTypeError: A name is not usable, or given twice.
            CoheriqDomainError: The domain is materialized (and the module is in
                no subpackage named by :meth:`declare_package`), or a name is taken.
        """
        _check_module_name(self.name, module, "declares candidates of a module")
        kinds: dict[str, bool] = {}
        for is_class, names in ((False, functions), (True, classes)):
            for given in [names] if isinstance(names, str) else names:
                name = check_candidate_name(given)
                if name in kinds:
                    raise CoheriqTypeError(
                        f"Domain {self.name!r} declares candidate {name!r} twice."
                    )
                kinds[name] = is_class
        with self.state.lock:
            late = self.engines.reference is not None
            if late and all(self._declared_as(name, module, kind) for name, kind in kinds.items()):
                return  # the same declaration, from a module that runs again
            if late and not any(module == p or module.startswith(p + ".") for p in self._packages):
                raise CoheriqDomainError(
                    f"Domain {self.name!r} cannot declare candidates of module {module!r}: "
                    "it is materialized already. Declare them before calling materialize(), "
                    "or, for a subpackage that declares its own modules, name it with "
                    "declare_package() before materialize()."
                )
            for name, is_class in kinds.items():
                info = self.state.candidates.get(name)
                if info is not None and info.module == module and info.is_class == is_class:
                    continue  # imported already, and marked as declared
                if name in self._kinds:
                    raise CoheriqDomainError(
                        f"Domain {self.name!r} cannot declare {name!r} in module {module!r}: "
                        "it has a candidate of that name already. Give one of them another "
                        "name."
                    )
            for name, is_class in kinds.items():
                if name not in self.state.candidates:
                    self._declared[name] = module
                    self._kinds[name] = is_class
                    if late:
                        late_candidates.publish(self, name)

    def declare_package(self, package: str) -> None:
        """Let the subpackage ``package`` (``"mylib.signal"``) declare its own modules, later.

        Call before :meth:`materialize`. For subpackages imported lazily too
        (lazy_loader's ``attach_stub``): the subpackage's ``__init__`` calls
        :meth:`declare` when it is imported, next to the stub that loads each
        name. An engine class that overrides a name the domain does not know
        yet imports these subpackages before it calls the name a misspelling.

        Raises:
            CoheriqTypeError: The name is not a dotted module name.
            CoheriqDomainError: The domain is materialized already.
        """
        _check_module_name(self.name, package, "names a subpackage")
        with self.state.lock:
            if package in self._packages:
                return  # named already (or by the module that runs again)
            if self.engines.reference is not None:
                raise CoheriqDomainError(
                    f"Domain {self.name!r} cannot name subpackage {package!r} with "
                    "declare_package(): it is materialized already. Name it before calling "
                    "materialize()."
                )
            self._packages.append(package)

    @property
    def declaring_packages(self) -> tuple[str, ...]:
        """The subpackages named by :meth:`declare_package`, in order."""
        return tuple(self._packages)

    def import_declaring_packages(self) -> dict[str, str | None]:
        """Import the subpackages named by :meth:`declare_package`: they declare.

        Returns, for each subpackage, None, or why its import failed (the exception
        is caught, and the caller reports it with what it looked for).
        """
        return {p: late_candidates.import_problem(p) for p in self.declaring_packages}

    @property
    def comparisons(self) -> Comparisons:
        """How a verification compares this library's values (see :meth:`register_comparison`)."""
        if self._comparisons is None:
            from .comparing import Comparisons  # only where a library or verification asks

            self._comparisons = Comparisons(self.name)
        return self._comparisons

    @property
    def materialized(self) -> bool:
        """Whether :meth:`materialize` has run."""
        return self.engines.reference is not None

    @overload
    def acceleration_candidate(self, obj: F, /) -> F: ...
    @overload
    def acceleration_candidate(
        self, name: str, /, *, side_effects: bool = False
    ) -> Callable[[F], F]: ...
    @overload
    def acceleration_candidate(
        self, obj: None = None, /, *, name: str | None = None, side_effects: bool = False
    ) -> Callable[[F], F]: ...

    def acceleration_candidate(
        self, obj: Any = None, /, *, name: str | None = None, side_effects: bool = False
    ) -> Any:
        """Mark a function or class as a candidate that engines may re-implement.

        Use it bare (``@domain.acceleration_candidate``), with a name
        (``@domain.acceleration_candidate("name")``) or with ``name=``. The
        decorated object becomes the reference implementation. A function is
        replaced by a proxy whose call runs the active engine's implementation.
        A class is returned itself, rebuilt with a metaclass whose ``__call__``
        constructs the active engine's implementation; nothing else about it
        changes, and constructing its subclasses is never dispatched. A function
        with ``side_effects=True`` (it writes files, draws unseeded random
        numbers) is never run twice by :func:`coheriq.verify`. A module that
        runs again (a reload) and marks a name it marked before redefines it.

        Raises:
            CoheriqTypeError: The target is not a function or class, the name is
                not usable, or the class cannot be marked (an Enum, a class written
                in C, one with subclasses already; the message says why).
            CoheriqDomainError: The domain is materialized (unless the name is
                declared with :meth:`declare`, or its module runs again), or the
                name is taken.
        """
        if not isinstance(side_effects, bool):
            raise CoheriqTypeError(
                f"Domain {self.name!r}: side_effects is True or False, not {side_effects!r}."
            )
        if obj is None or isinstance(obj, str):
            given = name_given_once(
                obj,
                name,
                f"Domain {self.name!r}: give the candidate's name once, either as "
                "acceleration_candidate('name') or as acceleration_candidate(name='name').",
            )
            if given is not None:
                check_candidate_name(given)
            return lambda target: self._mark(target, given, side_effects)
        return self._mark(obj, name, side_effects)

    def register_comparison(
        self,
        target: type | Callable[..., Any] | str,
        *,
        convert: Callable[[Any], Any] | None = None,
        compare: Callable[[Any, Any], bool | str] | None = None,
        copy: Callable[[Any], Any] | None = None,
        rtol: float | None = None,
        atol: float | None = None,
    ) -> None:
        """Say how a verification (:func:`coheriq.verify`) compares this library's values.

        A later rule for the same target replaces the earlier one; among types,
        the newest rule that matches a value applies.

        Args:
            target: A type: the rule applies to every value of it (``isinstance``,
                so a marked class covers every engine's objects), in results and
                arguments alike. Or a candidate (its proxy, or its name): the
                rule applies to that candidate's results.
            convert: Turns a value, on both sides, into what the default
                comparison reads: numbers, lists, tuples, dicts.
            compare: ``compare(engine's, other's)`` returns True where the two
                agree, and False or a sentence saying how they differ where not.
            copy: For a type: makes the other implementation's own copy of an
                argument, where :func:`copy.deepcopy` does not fit (a device
                array, a handle). It runs in a ``using_engine`` block of the
                other implementation, so the library's classes make its objects.
            rtol: The relative tolerance for numbers in these values.
            atol: The absolute tolerance for numbers in these values.

        Raises:
            CoheriqTypeError: ``target`` is neither a type nor a candidate of this
                domain, an option is not callable, a tolerance is negative, or
                ``copy`` is given for a candidate.
        """
        for option, value in (("convert", convert), ("compare", compare), ("copy", copy)):
            if value is not None and not callable(value):
                raise CoheriqTypeError(
                    f"Domain {self.name!r}: {option}= takes a function, not "
                    f"{type(value).__name__} ({value!r})."
                )
        for option, tolerance in (("rtol", rtol), ("atol", atol)):
            if tolerance is not None and (
                isinstance(tolerance, bool)
                or not isinstance(tolerance, (int, float))
                or not tolerance >= 0
            ):
                raise CoheriqTypeError(
                    f"Domain {self.name!r}: {option}= is a number of at least 0, not {tolerance!r}."
                )
        key = self._comparison_target(target)
        from .comparing import ComparisonRule

        self.comparisons.register(ComparisonRule(key, convert, compare, copy, rtol, atol))

    def _comparison_target(self, target: object) -> type | str:
        """The type, or the candidate's name, that a rule registered for ``target`` covers."""
        info = candidate_of(target)
        if info is not None and info.is_class:
            marked: type = info.reference  # a marked class: its objects, every engine's
            return marked
        if info is not None:
            if info.domain.name != self.name:
                raise CoheriqTypeError(
                    f"{info.name!r} is a candidate of domain {info.domain.name!r}, not of "
                    f"{self.name!r}; register its comparison with that domain."
                )
            return info.name
        if isinstance(target, type) or (isinstance(target, str) and target in self._kinds):
            return target
        known = sorted(self._kinds)
        raise CoheriqTypeError(
            f"Domain {self.name!r} compares values of a type or the results of one of its "
            f"candidates, not {target!r}.{did_you_mean(str(target), known)} Candidates: "
            f"{listing(known)}."
        )

    def _mark(self, target: Any, name: str | None, side_effects: bool) -> Any:
        if isinstance(target, staticmethod):  # a function marked inside a class body
            return staticmethod(self._mark(target.__func__, name, side_effects))
        if isinstance(target, classmethod):
            raise CoheriqTypeError(
                f"Domain {self.name!r} cannot mark classmethod "
                f"{getattr(target.__func__, '__qualname__', target)!r}: a candidate is called "
                "the same way whichever engine runs it, and a classmethod's first argument "
                "depends on the class it is read from. Mark a module-level function that "
                "the classmethod calls, or the class itself."
            )
        if not callable(target):
            raise CoheriqTypeError(
                f"Domain {self.name!r} can only mark functions and classes as candidates, "
                f"not {type(target).__name__} {target!r}."
            )
        other = candidate_of(target)
        if other is not None:
            raise CoheriqDomainError(
                f"{other.name!r} is already candidate {other.name!r} of domain "
                f"{other.domain.name!r}; mark the original function or class only once."
            )
        if name is None:
            name = getattr(target, "__name__", None)
        try:
            name = check_candidate_name(name)
        except CoheriqTypeError:
            if self.materialized:  # what is wrong first: no name would do now
                raise CoheriqDomainError(
                    f"Cannot mark {target!r} as a candidate of domain {self.name!r}: the "
                    "domain is materialized already. Mark every candidate before calling "
                    "materialize()."
                ) from None
            if name is None:
                raise CoheriqTypeError(
                    f"Domain {self.name!r} cannot tell the name of candidate {target!r}: a "
                    f"{type(target).__name__} has no __name__. Give it one with "
                    "acceleration_candidate(name='...')."
                ) from None
            raise
        run = registry.caller_run()
        module = "?" if run is None else run.f_globals.get("__name__", "?")
        marked = self._mark_for(target, name, module, run, always_redefine=False)
        if side_effects:
            self.comparisons.side_effects.add(name)
        elif self._comparisons is not None:  # marked again (a reload), now without
            self._comparisons.side_effects.discard(name)
        return marked

    def _mark_for(
        self, target: Any, name: str, module: str, run: Any, *, always_redefine: bool = True
    ) -> Any:
        """Mark ``target`` as candidate ``name``, bound in ``module`` by ``run`` (or None). A name
        marked before is redefined: always (:mod:`coheriq._outside` binds the names itself), else
        when its module runs again."""
        with self.state.lock:
            earlier = self.state.candidates.get(name)
            if earlier is not None:
                moved = earlier.module != module
                if always_redefine or (not moved and registry.ran_before(earlier.run, run)):
                    return late_candidates.redefine(self, earlier, target, run)
                raise CoheriqDomainError(
                    f"Domain {self.name!r} has a candidate named {name!r} already, marked by "
                    f"module {earlier.module!r}"
                    + (f" (module {module!r} marks it now)" if moved else "")
                    + "; give the new one another name with acceleration_candidate(name=...)."
                    + (" A candidate moved to another module needs a restart." if moved else "")
                )
            late_candidates.check_may_mark(self, name, target, module, run)
            self.engines.check_overrides(name, target)  # engines written before it
            info = CandidateInfo(self, name, target, module, run)
            self._stand_in(info, again=False)
            self.state.candidates[name] = info
            self._kinds[name] = info.is_class
            self._declared.pop(name, None)
            if self.engines.reference is not None:
                late_candidates.publish(self, name)
            return info.proxy

    def _stand_in(self, info: CandidateInfo, *, again: bool) -> None:
        """Make ``info.proxy`` stand for ``info.reference``: a function's proxy, or the class
        rebuilt to dispatch construction; ``again`` for a candidate marked again."""
        switchboard = self.state.switchboard
        if not info.is_class:
            if again:
                switchboard.stand_in_again(info)
            else:
                info.proxy = switchboard.function_proxy(info)
            return
        # The machinery of marked classes, and what engines reach as self.<Class>,
        # are imported with a library's first class, before anything changes: a
        # signal handler that calls a candidate meanwhile finds no half-imported module.
        from .._call.marked import mark_class
        from .._engines import own_class  # noqa: F401 - see late_candidates.attribute

        implementations = self.engines.implementations.setdefault(info.name, {})
        info.reference = info.proxy = mark_class(info, switchboard, implementations)
        implementations[info.reference] = None
        if not again:
            self.state.class_candidates.append(info)

    def materialize(self) -> EngineMeta:
        """Build and return the domain's reference class; call once, after the last candidate.

        The reference class, also reached as ``coheriq.engine_class(name)``, is
        what every engine subclasses. It has each candidate as an attribute:
        functions as static methods, classes as classes (read from an engine's
        instance, a class candidate the engine does not override is the
        library's class, constructed as it is). A declared candidate not
        imported yet (:meth:`declare`) imports its module when read.

        Raises:
            CoheriqDomainError: The domain is materialized already. (The module
                that materialized it, running again, gets the reference class,
                kept up to date with the candidates redefined since.)
        """
        run = registry.caller_run()
        with self.state.lock:
            if registry.reran(self._materialized_by, run):  # a reload: kept up to date
                self._materialized_by = run
                return self.engines.reference  # type: ignore[return-value]
            if self.engines.reference is not None:
                raise CoheriqDomainError(
                    f"Domain {self.name!r} is materialized already; materialize() is called "
                    "once, after the last candidate is marked."
                )
            namespace: dict[str, Any] = {
                "__module__": self.module,
                "__qualname__": f"{self.name}.reference",
                "__doc__": f"The reference implementations of coheriq domain {self.name!r}.",
                "__coheriq_reference_of__": self,
                **{name: late_candidates.attribute(self, name) for name in self._kinds},
            }
            reference = self.engines.reference = EngineMeta("reference", (), namespace)
            self._materialized_by = run
        verified = self.env_prefix and os.environ.get(f"{self.env_prefix}_VERIFY", "").strip()
        if verified or os.environ.get("COHERIQ_SHADOW", "").strip():
            for hook in list(observing.on_materialized):  # a watcher of the whole process
                hook(self)
        return reference

    def require_reference(
        self, action: str, error: type[CoheriqDomainError] = CoheriqDomainError
    ) -> EngineMeta:
        """The reference class, or ``error`` saying it is not made yet, before ``action``."""
        return self.engines.require_reference(action, error)


def _check_module_name(domain: str, module: object, what: str) -> None:
    """Raise :class:`~coheriq.CoheriqTypeError` unless ``module`` is a dotted module name."""
    if not (isinstance(module, str) and all(p.isidentifier() for p in module.split("."))):
        raise CoheriqTypeError(
            f"Domain {domain!r} {what} given by its full dotted name (like 'mylib.heavy'), "
            f"not {module!r}."
        )
