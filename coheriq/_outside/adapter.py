"""One library accelerated from the outside: its domain, made from its declaration, and its marking.

An :class:`Adapter` does for an unmodified library what its own decorators do
for a library that adopted coheriq, from the same machinery:

* **The domain** is made as the library's top-level module is created (or at
  activation, where it is imported already; or by its first declared module,
  for a namespace package): named as the library, belonging to its top-level
  module, with every declared candidate declared
  (:meth:`~coheriq.AccelerationDomain.declare`) and the reference class made, so
  engines can be checked and started before a module is imported.
* **A module imported after activation is marked as it executes.** Its body
  runs in the module's own globals with a local namespace that writes through
  to them (:class:`MarkingNamespace`): each time the body binds a declared name
  (``def mean``, ``class NormalDist``), the candidate is bound instead, at
  that moment, as a decorator would have done it. Classes defined later in the
  module subclass the marked class; aliases made later hold the candidate.
* **A module imported before** (or one whose loader runs it its own way: a C
  extension, Cython) is marked in place: each declared name of the module is
  rebound to the candidate. Names that other modules bound to the unmarked
  objects before stay so; they are reported (the domain's ``bound_before``, which
  :func:`coheriq.explain` shows), never rebound behind their owner's back.

A declaration that names what a module's code cannot define leaves that module
unmarked, as if undeclared, with a :class:`~coheriq.CoheriqDeclarationWarning`.
A library that requires coheriq marks its own candidates: its own marking wins.
"""

from __future__ import annotations

import _thread
import sys
import warnings
from collections.abc import MutableMapping

from .._call.proxy import candidate_of
from .._library import registry
from .._library.domain import AccelerationDomain
from .._stdlib import INFO, TYPE_CHECKING, log
from ..exceptions import CoheriqDeclarationError, CoheriqDeclarationWarning, CoheriqError, listing

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from types import CodeType, ModuleType
    from typing import Any

    from .declarations import LibraryDeclaration

__all__ = ["Adapter", "MarkingNamespace"]

# Run in the library's top-level module's globals, with locals of its own (the
# module's namespace gets no new name).
_CREATE_DOMAIN = compile(
    "domain = AccelerationDomain(library, env_prefix=env_prefix)", "<coheriq adapter>", "exec"
)


class MarkingNamespace(MutableMapping["str", "Any"]):
    """The local namespace a declared module's body runs in: bindings of declared names are marked.

    Every read and write goes to the module's globals (the functions the body
    defines see one namespace, as usual); only a binding of a declared name
    passes through ``mark(name, value)`` first.
    """

    __slots__ = ("_globals", "_mark", "_names")

    def __init__(
        self, namespace: dict[str, Any], names: Any, mark: Callable[[str, Any], Any]
    ) -> None:
        self._globals = namespace
        self._names = names
        self._mark = mark

    def __getitem__(self, name: str) -> Any:
        return self._globals[name]

    def __setitem__(self, name: str, value: Any) -> None:
        if name in self._names:
            value = self._mark(name, value)
        self._globals[name] = value

    def __delitem__(self, name: str) -> None:
        del self._globals[name]

    def __contains__(self, name: object) -> bool:
        return name in self._globals

    def __iter__(self) -> Iterator[str]:
        return iter(self._globals)

    def __len__(self) -> int:
        return len(self._globals)

    def keys(self) -> Any:
        """The module's names (what ``dir()`` in the module's body lists)."""
        return self._globals.keys()

    def items(self) -> Any:
        """The module's names and values."""
        return self._globals.items()

    def values(self) -> Any:
        """The module's values."""
        return self._globals.values()

    def get(self, name: str, default: Any = None) -> Any:
        """The value bound to ``name`` in the module, else ``default``."""
        return self._globals.get(name, default)


class Adapter:
    """The library that ``declaration`` declares, accelerated from the outside.

    Attributes:
        declaration: What the installed packages declare of the library.
        domain: Its domain, once made (see the module's doc); else None.
        stepped_back: Why the adapter leaves the library alone (it marks its own
            candidates), as a sentence; else None.
        problems: A sentence for each module the declaration did not match
            (imported unmarked) and each candidate that could not be marked.
        created: The top-level module whose domain the finder made as it created
            the module, until the module's body runs; else None.
    """

    def __init__(self, declaration: LibraryDeclaration) -> None:
        self.declaration = declaration
        self.domain: AccelerationDomain | None = None
        self.stepped_back: str | None = None
        self.problems: list[str] = []
        self._copies: Any = None  # the registry's copies of the domain this adapter made
        # A later run of the top-level module's body is a reload: the domain is made again.
        self.created: ModuleType | None = None
        self._lock = _thread.RLock()

    def __repr__(self) -> str:
        state = "stepped back" if self.stepped_back else ("made" if self.domain else "waiting")
        return f"<Adapter of library {self.declaration.library!r}: domain {state}>"

    # -- the domain --------------------------------------------------------------------

    def make_domain(self, top: ModuleType) -> None:
        """Make the library's domain for this run of its top-level module ``top``.

        As a library that adopted coheriq makes its domain when its top module
        runs, so each run of it (a reload, a fresh import in a test suite) makes a
        new copy of the domain (see :mod:`coheriq._library.registry`), with the
        declared candidates declared and the reference class made.
        """
        library = self.declaration.library
        with self._lock:
            if self.stepped_back is not None:
                return
            if self.declaration.adopts_coheriq:
                self._step_back(
                    f"distribution {self.declaration.distribution!r} requires coheriq: it "
                    "marks its own candidates"
                )
                return
            copies = registry.copies_of(library)
            if copies is not None and copies is not self._copies:
                self._step_back(f"a domain named {library!r} exists already (the library's own)")
                return
            # Created by code that runs in the module's globals: the domain belongs to
            # the library's module, as if its own body had created it.
            scratch: dict[str, Any] = {
                "AccelerationDomain": AccelerationDomain,
                "library": library,
                "env_prefix": self.declaration.env_prefix,
            }
            exec(_CREATE_DOMAIN, vars(top), scratch)
            domain: AccelerationDomain = scratch["domain"]
            # Ours from now on, even if what follows is interrupted (Ctrl-C): the
            # next import carries it on (a retry) instead of taking it for the library's.
            self._copies = registry.copies_of(library)
            self.domain = domain
            if domain.materialized:  # the module reloaded: the domain carries on, as declared
                return
            for module, names in self.declaration.modules.items():
                domain.declare(
                    module,
                    functions=[n for n, is_class in names.items() if not is_class],
                    classes=[n for n, is_class in names.items() if is_class],
                )
            domain.materialize()

    def domain_for(self, module: ModuleType) -> AccelerationDomain | None:
        """The domain that marks ``module`` (None where the library marks its own).

        The library's top-level module makes it as it is created (see
        :class:`~coheriq._outside.finder.MarkingLoader`), before any other
        thread can see the module, and again each time its body runs again; a
        top-level namespace package has no loader of its own, and its first
        declared module makes it.
        """
        with self._lock:
            if self.domain is None and self.stepped_back is None:
                self.make_domain(sys.modules[self.declaration.library])
            return self.domain if self.stepped_back is None else None

    def _step_back(self, why: str) -> None:
        self.stepped_back = (
            f"Library {self.declaration.library!r} is not accelerated from the outside: {why}, "
            f"and its own marking wins over the declaration "
            f"({listing(self.declaration.sources)}). Its engines work as for any library "
            "that adopted coheriq; the declaration can be dropped."
        )
        log(INFO, "%s", self.stepped_back)

    # -- marking -----------------------------------------------------------------------

    def execute(self, module: ModuleType, loader: Any) -> None:
        """Run ``module``'s body with ``loader``, marking its declared names.

        ``module`` is a declared module, or the library's top-level module
        (whose run makes the domain: see :meth:`make_domain`).
        """
        if module.__name__ == self.declaration.library and self.created is not module:
            self.make_domain(module)  # its body runs again: a reload
        self.created = None
        domain = self.domain_for(module)
        names = self.declaration.modules.get(module.__name__, {})
        code = _code_of(loader, module.__name__) if domain is not None and names else None
        if domain is None or code is None:  # stepped back, or a loader that runs it itself
            loader.exec_module(module)
            if domain is not None and names:
                self.mark_in_place(module, imported_before=False)
            return
        missing = [name for name in names if name not in _names_in(code)]
        if missing:  # certainly not defined: the module is left as it is
            self._not_matching(module.__name__, missing)
            exec(code, module.__dict__)
            return
        marked: dict[str, tuple[Any, Any]] = {}  # name -> (its function, the candidate)

        def mark(name: str, value: Any) -> Any:
            earlier = marked.get(name)
            if earlier is not None and value is not earlier[1]:
                _unalias(module.__dict__, name, *earlier)  # bound again: see _unalias
            # The run is the module body's frame, as for a decorator in it.
            candidate = self._mark_one(domain, module.__name__, name, value, registry.caller_run())
            if not isinstance(value, type):
                marked[name] = (value, candidate)
            return candidate

        exec(code, module.__dict__, MarkingNamespace(module.__dict__, names, mark))
        # Bound another way (globals()[name] = ..., a global statement): marked now.
        self.mark_in_place(module, imported_before=False)

    def mark_in_place(self, module: ModuleType, *, imported_before: bool) -> None:
        """Rebind each declared name of ``module`` (executed already) to its candidate.

        With ``imported_before``, the names other modules bound to the unmarked
        objects are recorded in the domain's ``bound_before``.

        Raises:
            CoheriqDeclarationError: With ``imported_before``, the module does not
                define every name its declaration gives; nothing is changed.
        """
        domain = self.domain if self.stepped_back is None else None
        if domain is None:
            return
        if imported_before:
            self.check_defines(module)
        names = self.declaration.modules[module.__name__]
        namespace = vars(module)
        missing = [name for name in names if name not in namespace]
        if missing:  # named in its code, yet not bound by its body: defined later, if ever
            self._problem(
                self._mismatch(module.__name__, missing).replace(
                    "does not define", "has not defined, when its body has run,"
                )
                + f" {listing(missing)} stay unmarked, also if defined later (by a module "
                "__getattr__, say); the module's other declared names are marked."
            )
            names = {name: kind for name, kind in names.items() if name not in missing}
        originals = {}
        for name in names:
            value = namespace[name]
            if candidate_of(value) is not None:
                continue  # marked as it executed, or by the library itself
            if imported_before and isinstance(value, type):
                why = _why_not_in_place(value)
                if why is not None:
                    self._problem(
                        f"Class {module.__name__}.{name} was imported before the library was "
                        f"accelerated, and {why}: it stays unmarked. Accelerate before "
                        f"importing {self.declaration.library!r} (the runner, "
                        "COHERIQ_ACCELERATE, or coheriq.accelerate first)."
                    )
                    continue
            marked = self._mark_one(domain, module.__name__, name, value, run=None)
            if marked is not value:
                namespace[name] = marked
                originals[name] = value
        if imported_before and originals:
            self._find_bound_before(module, originals)

    def _mark_one(
        self, domain: AccelerationDomain, module: str, name: str, value: Any, run: Any
    ) -> Any:
        """The candidate for ``value`` bound to declared ``name``; ``value`` where it cannot be."""
        if not callable(value) or candidate_of(value) is not None:
            return value  # a placeholder (name = None), or a candidate already
        try:
            return domain._mark_for(value, name, module, run)
        except CoheriqError as error:
            self._problem(
                f"{module}.{name} stays unmarked: {error} (declared by "
                f"{listing(self.declaration.sources)})"
            )
            return value

    def _find_bound_before(self, module: ModuleType, originals: dict[str, Any]) -> None:
        """Record where the unmarked objects of ``originals`` are bound still.

        In the domain's state (``bound_before``), which :func:`coheriq.explain`
        reports: calls through those names run the library's own code on every
        engine, and coheriq never rebinds another module's names.
        """
        assert self.domain is not None
        bound_before = self.domain.state.bound_before
        by_id = {id(value): name for name, value in originals.items()}
        for holder_name, holder in list(sys.modules.items()):
            namespace = getattr(holder, "__dict__", None)
            if not isinstance(namespace, dict):
                continue
            for attribute, value in list(namespace.items()):
                candidate = by_id.get(id(value))
                if candidate is not None and originals[candidate] is value:
                    where = f"{holder_name}.{attribute}"
                    bound_before.setdefault(candidate, []).append(where)

    def _not_matching(self, module: str, missing: list[str]) -> None:
        self._problem(self._mismatch(module, missing) + " The module is imported unmarked.")

    def check_defines(self, module: ModuleType) -> None:
        """Raise unless ``module`` (run already) defines every name declared for it.

        Raises:
            CoheriqDeclarationError: Names declared for it are missing; the message
                names them, the module, the version and the declaration.
        """
        names = self.declaration.modules[module.__name__]
        missing = [name for name in names if name not in vars(module)]
        if missing:
            raise CoheriqDeclarationError(self._mismatch(module.__name__, missing))

    def _mismatch(self, module: str, missing: list[str]) -> str:
        installed = self.declaration.installed_version()
        return (
            f"Module {module!r} of library {self.declaration.library!r} (version "
            f"{installed}) does not define {listing(missing)}, which "
            f"{listing(self.declaration.sources)} declares. Correct the declaration for "
            "this version (`coheriq check` lists every difference)."
        )

    def _problem(self, sentence: str) -> None:
        self.problems.append(sentence)
        warnings.warn(sentence, CoheriqDeclarationWarning, stacklevel=2)


def _names_in(code: CodeType) -> set[str]:
    """Every name the code could bind: its names and strings (``globals()["f"]``), nested too."""
    found: set[str] = set()
    pending = [code]
    while pending:
        current = pending.pop()
        found.update(current.co_names)
        for constant in current.co_consts:
            if isinstance(constant, str):
                found.add(constant)
            elif hasattr(constant, "co_names"):
                pending.append(constant)
    return found


def _unalias(namespace: dict[str, Any], name: str, function: Any, candidate: Any) -> None:
    """A declared function bound again in the module's body: its earlier aliases keep it.

    ``_py_mean = mean`` before ``from _speedups import mean`` is the library's own
    pure-Python version, kept under another name: the candidate is the name's
    last binding, and the alias goes back to the function it was bound to, as
    without coheriq (marking redefines the one candidate's proxy).
    """
    for other, value in list(namespace.items()):
        if value is candidate and other != name:
            namespace[other] = function


def _code_of(loader: Any, name: str) -> CodeType | None:
    """The module's code where ``loader`` runs modules as the standard file loaders do, else None.

    Those (``SourceFileLoader``, ``SourcelessFileLoader`` and subclasses that keep
    their ``exec_module``) run ``exec(loader.get_code(name), module.__dict__)``:
    the same code, run with a marking namespace, is the same import. Any other
    loader (an extension module's, a zip file's, pytest's assertion rewriter)
    runs the module itself, and the module is marked when it has run.
    """
    from importlib.machinery import SourceFileLoader

    if getattr(type(loader), "exec_module", None) is not SourceFileLoader.exec_module:
        return None
    code: CodeType | None = loader.get_code(name)
    if code is None:
        raise ImportError(f"cannot load module {name!r} when get_code() returns None", name=name)
    return code


def _why_not_in_place(cls: type) -> str | None:
    """Why class ``cls``, imported already, cannot be marked in place; None if it can.

    Marking rebuilds a class and points its methods' ``__class__`` cells (zero-
    argument ``super()``) at the rebuilt one: objects made before, and classes
    derived before, would then fail there.
    """
    subclasses: list[type] = cls.__subclasses__()
    if subclasses:
        return f"classes derive from it already ({listing(c.__qualname__ for c in subclasses)})"
    for value in vars(cls).values():
        function = getattr(value, "__func__", value)
        if "__class__" in getattr(getattr(function, "__code__", None), "co_freevars", ()):
            return "its methods use super(), which objects made before would break"
    return None
