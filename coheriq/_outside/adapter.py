"""One library accelerated from the outside: its domain, made from its declaration, and its marking.

An :class:`Adapter` makes the domain as the top-level module is created, and marks each declared
module: as its body binds the declared names, where its loader runs source as the standard ones
do (:meth:`Adapter.marking_code`); else, and if imported before, in place once it has run."""

from __future__ import annotations

import _thread
import sys
import warnings

from .._call.proxy import candidate_of, innermost_function, mark_in_place, not_in_place
from .._library import registry
from .._library.domain import AccelerationDomain
from .._stdlib import INFO, TYPE_CHECKING, FunctionType, log
from ..exceptions import CoheriqDeclarationError, CoheriqDeclarationWarning, CoheriqError, listing

if TYPE_CHECKING:
    import ast
    from types import CodeType, ModuleType
    from typing import Any

    from .declarations import LibraryDeclaration

# Evaluated in the library's top-level module's globals (the domain belongs to that module,
# as if its own body had made it), with locals of its own (its namespace gets no new name).
_CREATE_DOMAIN = compile(
    "AccelerationDomain(library, env_prefix=env_prefix)", "<coheriq adapter>", "eval"
)


class Adapter:
    """The library that ``declaration`` declares, accelerated from the outside: its ``domain``,
    once made; ``stepped_back``, why the adapter leaves the library alone (it marks its own
    candidates), as a sentence; ``created``, the top-level module whose domain the finder made
    as it created the module, until the module's body runs (a later run is a reload)."""

    def __init__(self, declaration: LibraryDeclaration) -> None:
        self.declaration = declaration
        self.domain: AccelerationDomain | None = None
        self.stepped_back: str | None = None
        self.created: ModuleType | None = None
        self._copies: Any = None  # the registry's copies of the domain this adapter made
        self._lock = _thread.RLock()

    def __repr__(self) -> str:
        state = "stepped back" if self.stepped_back else ("made" if self.domain else "waiting")
        return f"<Adapter of library {self.declaration.library!r}: domain {state}>"

    def make_domain(self, top: dict[str, Any]) -> None:
        """Make the library's domain, its candidates declared, for this run of its top-level
        module, whose globals are ``top``: each run (a reload, a fresh import) makes a new
        copy of it, as for an adopted library (see :mod:`coheriq._library.registry`)."""
        declaration = self.declaration
        library = declaration.library
        with self._lock:
            if self.stepped_back is not None:
                return
            copies = registry.copies_of(library)
            why = ""
            if declaration.adopts_coheriq:
                why = (
                    f"distribution {declaration.distribution!r} requires coheriq: it marks "
                    "its own candidates"
                )
            elif copies is not None and copies is not self._copies:
                why = f"a domain named {library!r} exists already (the library's own)"
            if why:
                self.stepped_back = (
                    f"Library {library!r} is not accelerated from the outside: {why}, and its "
                    f"own marking wins over the declaration ({listing(declaration.sources)}). "
                    "Its engines work as for any library that adopted coheriq; the declaration "
                    "can be dropped."
                )
                log(INFO, "%s", self.stepped_back)
                return
            scratch = {"AccelerationDomain": AccelerationDomain, "library": library}
            scratch["env_prefix"] = declaration.env_prefix
            domain: AccelerationDomain = eval(_CREATE_DOMAIN, top, scratch)
            # Ours from now on, even if what follows is interrupted (Ctrl-C): the next
            # import carries it on instead of taking it for the library's own.
            self._copies, self.domain = registry.copies_of(library), domain
            # The library's own calls at import choose nothing (see GlobalChoice.member).
            domain.choice.importing = self.importing
            if domain.materialized:  # the module reloaded: the domain carries on, as declared
                return
            for module, kinds in declaration.modules.items():
                classes = [name for name, is_class in kinds.items() if is_class]
                functions = [name for name in kinds if name not in classes]
                domain.declare(module, functions=functions, classes=classes)
            domain.materialize()

    def importing(self) -> bool:
        """Whether this thread is running the body of one of the library's modules (importing
        it); another thread's import does not count: its calls are the program's."""
        return any(
            frame.f_code.co_name == "<module>"
            and isinstance(name := frame.f_globals.get("__name__"), str)
            and name.partition(".")[0] == self.declaration.library
            for frame in registry.stack(sys._getframe(1))
        )

    def execute(self, module: ModuleType, loader: Any) -> None:
        """Run ``module`` with ``loader``, which runs it its own way; then mark it in place."""
        domain = self._starting(module.__name__, vars(module))
        loader.exec_module(module)
        if domain is not None and module.__name__ in self.declaration.modules:
            self.mark_in_place(module.__name__, vars(module), imported_before=False)

    def marking_code(self, loader: Any, name: str) -> CodeType:
        """The code of declared module ``name``, from ``loader``'s source (see
        :func:`runs_from_source`), that binds each declared name's candidate where a decorator
        would have run (names bound another way are marked when the body has run). A module that
        cannot define every declared name runs unmarked, with a warning; one of a library that
        marks its own, as is."""
        import ast

        plain: CodeType = loader.get_code(name)  # from its cache, usually
        if self.stepped_back is not None:
            return plain
        names, defined = self.declaration.modules.get(name, {}), _names_in(plain)
        missing = [n for n in names if n not in defined]
        if missing:  # certainly not defined: the module runs as it is
            self._problem(self._mismatch(name, missing) + " The module is imported unmarked.")
        _MARKING[name] = self
        path = loader.get_filename(name)
        # Compiled as SourceLoader.source_to_code compiles it, into a tree first.
        tree = _with_hooks(ast.parse(loader.get_data(path), path), name, () if missing else names)
        code: CodeType = compile(tree, path, "exec", dont_inherit=True)
        return code

    def _starting(self, name: str, namespace: dict[str, Any]) -> AccelerationDomain | None:
        """Module ``name`` starts to run in ``namespace``: its loaders the real ones again, the
        domain made (again, for a reload of the top; or for a top-level namespace package, which
        no loader makes); the domain that marks it, None where the library marks its own."""
        _real_loaders(namespace)
        if name == self.declaration.library:
            if namespace.get("__name__") != name:  # python -m on the library's own top module
                self._problem(
                    f"Module {name!r} runs as the main module (python -m {name}): it is the top-"
                    f"level module of library {name!r}, which makes the library's domain when "
                    f"it is imported, and it runs unmarked. Import {name!r} from a script, or "
                    "run a module of the library's package with -m."
                )
                return None
            created, self.created = self.created, None
            if created is None or vars(created) is not namespace:
                self.make_domain(namespace)  # its body runs again: a reload
        with self._lock:
            if self.domain is None and self.stepped_back is None:
                self.make_domain(vars(sys.modules[self.declaration.library]))
            return self.domain if self.stepped_back is None else None

    def mark_in_place(
        self, module: str, namespace: dict[str, Any], *, imported_before: bool
    ) -> None:
        """Rebind each declared name of ``module``, whose body has run in ``namespace``, to its
        candidate; with ``imported_before`` (after :meth:`check_defines`), record in the domain's
        ``bound_before`` (:func:`coheriq.explain` lists it) where other modules bound the unmarked
        objects, which are never rebound."""
        domain = self.domain if self.stepped_back is None else None
        if domain is None:
            return
        names = self.declaration.modules[module]
        missing = [name for name in names if name not in namespace]
        if missing:  # named in its code, yet not bound by its body: defined later, if ever
            self._problem(
                self._mismatch(module, missing).replace(
                    "does not define", "has not defined, when its body has run,"
                )
                + f" {listing(missing)} stay unmarked, also if defined later (by a module "
                "__getattr__, say); the module's other declared names are marked."
            )
        originals = {}  # declared name -> the unmarked object it held
        for name in [name for name in names if name in namespace]:
            value = namespace[name]  # a candidate already, where marked as it ran: it stays
            if isinstance(value, type) and candidate_of(value) is None:
                self._class_not_in_place(module, name, value, imported_before)
            elif (marked := self._mark_one(domain, module, name, value, run=None)) is not value:
                namespace[name], originals[name] = marked, value
        by_id = {id(value): name for name, value in originals.items()} if imported_before else {}
        for holder, held in list(sys.modules.items()) if by_id else ():
            attributes = getattr(held, "__dict__", None)
            attributes = attributes if isinstance(attributes, dict) else {}
            for attribute, value in list(attributes.items()):
                if id(value) in by_id:
                    where = f"{holder}.{attribute}"
                    domain.state.bound_before.setdefault(by_id[id(value)], []).append(where)

    def _class_not_in_place(self, module: str, name: str, cls: type, imported_before: bool) -> None:
        """Say loudly that class ``cls``, bound to declared ``name``, stays unmarked, and why."""
        subclasses: list[type] = cls.__subclasses__()
        derived = [subclass.__qualname__ for subclass in subclasses]
        before = f" and classes derived from it already ({listing(derived)})" if derived else ""
        if imported_before:
            what = "was imported before the library was accelerated"
            fix = (
                f"Accelerate before importing {self.declaration.library!r} (the runner, "
                "COHERIQ_ACCELERATE, or coheriq.accelerate first)."
            )
        else:
            what = (
                "was not bound by its module's body as it ran from source (its loader runs "
                "it its own way, or the body bound it through globals())"
            )
            fix = "Declare the module that defines the class with a class statement."
        self._problem(
            f"Class {module}.{name} {what}: it stays unmarked, since marking it now would "
            f"rebuild it, and objects made before{before} would no longer be its own "
            f"(isinstance would fail). Its calls run the library's own class on every "
            f"engine. {fix}"
        )

    def _mark_one(
        self, domain: AccelerationDomain, module: str, name: str, value: Any, run: Any
    ) -> Any:
        """The candidate for ``value`` bound to declared ``name``; ``value`` where it cannot be,
        or where it is a library's wrapper around a plain function (neither function nor class,
        with a ``__wrapped__``: NumPy's dispatchers), the candidate, its function marked in place
        (see :func:`~coheriq._call.proxy.mark_in_place`), so that it keeps its identity."""
        if not callable(value) or candidate_of(value) is not None:
            return value  # a placeholder (name = None), or a candidate already
        wrapped = getattr(value, "__wrapped__", None)
        if wrapped is not None and not isinstance(value, (type, FunctionType)):
            function = innermost_function(value)
            why = (
                "its __wrapped__ leads to no plain Python function"
                if function is None
                else not_in_place(function)
            )
            if why is None and name in domain.state.candidates:
                why = "its module runs again, and the candidate stands for the first run's"
            if why is None:
                marker = lambda copy: domain._mark_for(copy, name, module, run)  # noqa: E731
                self._marked(module, name, value, mark_in_place, marker, function, value)
                return value
            self._problem(
                f"{module}.{name} is a {type(value).__module__}.{type(value).__qualname__} "
                f"around function {getattr(wrapped, '__qualname__', wrapped)!r}, which cannot "
                f"be marked in place ({why}): the candidate replaces that object, and a "
                "protocol to which it hands itself (NumPy's __array_function__ passes it as "
                f"func) now sees an object that is no longer {module}.{name}, so code that "
                "recognises it by identity (HANDLED_FUNCTIONS[func]) stops recognising it, "
                "and its own attributes (_implementation) are gone. Drop it from the "
                f"declaration of {self.declaration.library!r} unless its callers need no "
                "such protocol."
            )
        return self._marked(module, name, value, domain._mark_for, value, name, module, run)

    def _marked(self, module: str, name: str, value: Any, mark: Any, *args: Any) -> Any:
        """What ``mark(*args)`` returns; ``value``, with a problem said, where it raises."""
        try:
            return mark(*args)
        except CoheriqError as error:
            self._problem(
                f"{module}.{name} stays unmarked: {error} (declared by "
                f"{listing(self.declaration.sources)})"
            )
            return value

    def check_defines(self, module: ModuleType) -> None:
        """Raise :class:`~coheriq.CoheriqDeclarationError` unless ``module`` (run already)
        defines every name declared for it."""
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
        warnings.warn(sentence, CoheriqDeclarationWarning, stacklevel=2)


def _names_in(code: CodeType) -> set[str]:
    """Every name the code could bind: its names and strings (``globals()["f"]``), nested too."""
    found = {*code.co_names, *(name for name in code.co_consts if isinstance(name, str))}
    for nested in code.co_consts:
        if hasattr(nested, "co_names"):
            found |= _names_in(nested)
    return found


def _real_loaders(namespace: dict[str, Any]) -> None:
    """Put the real loader back in a module's ``__loader__`` and ``__spec__.loader``."""
    loader: Any = namespace.get("__loader__")
    if getattr(type(loader), "_coheriq_marking", False):
        namespace["__loader__"] = loader.loader
    spec: Any = namespace.get("__spec__")
    if getattr(type(getattr(spec, "loader", None)), "_coheriq_marking", False):
        spec.loader = spec.loader.loader


# The code that marks a module as it runs calls the functions below.
_MARKING: dict[str, Adapter] = {}  # declared module -> the adapter that made its marking code
_RUNS: dict[int, _Run] = {}  # id of the globals a declared module runs in -> its run


class _Run:
    """One run of a declared module's body: marks each declared name as it is bound."""

    def __init__(self, adapter: Adapter, domain: AccelerationDomain, module: str) -> None:
        self.adapter, self.domain, self.module = adapter, domain, module
        self.marked: dict[str, tuple[Any, Any]] = {}  # name -> (its function, the candidate)

    def mark(self, namespace: dict[str, Any], name: str) -> None:
        """Bind the candidate for what the module's body has just bound to declared ``name``."""
        value = namespace[name]
        earlier = self.marked.get(name)
        if earlier is not None and value is earlier[0]:
            # Bound again to the function it was bound to (area = _area twice, a walrus
            # tested again): the same candidate, which the aliases made since keep.
            namespace[name] = earlier[1]
            return
        if earlier is not None and value is not earlier[1]:
            # Bound again, to another: the aliases of its candidate (_py_mean = mean before
            # from _speedups import mean) get back the function, as without coheriq.
            for other, held in list(namespace.items()):
                if held is earlier[1] and other != name:
                    namespace[other] = earlier[0]
        # The run is the module body's frame, as for a decorator in it.
        run = registry.caller_run()
        candidate = self.adapter._mark_one(self.domain, self.module, name, value, run)
        if not isinstance(value, type):
            self.marked[name] = (value, candidate)
        namespace[name] = candidate


def _begin(module: str, marks: bool) -> None:
    """Called first by the marking code of declared ``module`` (:meth:`Adapter.marking_code`);
    with ``marks``, its declared names are marked as they are bound."""
    adapter, namespace = _MARKING[module], sys._getframe(1).f_globals
    domain = adapter._starting(module, namespace)
    if domain is not None and marks:
        _RUNS[id(namespace)] = _Run(adapter, domain, module)


def _bound(module: str, *names: str) -> None:
    """Called by the marking code of ``module`` after a statement that binds declared ``names``."""
    namespace = sys._getframe(1).f_globals
    run = _RUNS.get(id(namespace))
    if run is not None:
        for name in names:
            if name in namespace:  # a star import, a conditional walrus may not bind it
                run.mark(namespace, name)


def _bound_to(module: str, name: str, value: Any) -> Any:
    """Called by the marking code of ``module`` where a walrus has bound declared ``name``;
    returns what the name holds then (the candidate), as the walrus's value."""
    namespace = sys._getframe(1).f_globals  # a comprehension's frame, too, has the module's
    run = _RUNS.get(id(namespace))
    if run is None or namespace.get(name) is not value:
        return value
    run.mark(namespace, name)
    return namespace[name]


def _end(module: str) -> None:
    """Called last by the marking code of ``module``, when its body has run to the end."""
    namespace = sys._getframe(1).f_globals
    run = _RUNS.pop(id(namespace), None)
    if run is not None:  # bound another way (globals()[name] = ..., a global statement)
        run.adapter.mark_in_place(module, namespace, imported_before=False)


def runs_from_source(loader: Any) -> bool:
    """Whether ``loader`` runs modules from source as ``SourceFileLoader`` does (its class
    keeps that loader's ``exec_module``, ``get_code`` and ``source_to_code``)."""
    import _frozen_importlib_external as external

    kind = type(loader)
    return (
        getattr(kind, "exec_module", None) is external._LoaderBasics.exec_module
        and getattr(kind, "get_code", None) is external.SourceLoader.get_code
        and getattr(kind, "source_to_code", None) is external.SourceLoader.source_to_code
        and hasattr(loader, "get_filename")
    )


def _with_hooks(tree: ast.Module, module: str, names: Any) -> ast.Module:
    """``tree`` with the calls of the marking code (``_begin``, ``_bound``, ``_end``)."""
    import ast

    body = tree.body
    start = 0  # after the docstring and the __future__ imports, which must come first
    while start < len(body) and (
        (start == 0 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant))
        or (isinstance(body[start], ast.ImportFrom) and body[start].module == "__future__")  # type: ignore[attr-defined]
    ):
        start += 1
    line = _first_line(body[min(start, len(body) - 1)]) if body else -1
    tree.body = [
        *body[:start],
        _hook("_begin", module, bool(names), line=line),
        *_marked_statements(body[start:], module, frozenset(names)),
    ]
    _end_each_path(tree.body, module)
    return tree


def _first_line(statement: ast.stmt) -> int:
    """The line of the first instruction ``statement`` runs (a decorator's, a value's line)."""
    import ast

    try:  # the compiler knows, for this version: compiled alone, in a module of its own
        code = compile(ast.Module([statement], []), "<statement>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return statement.lineno
    return next((line for _, _, line in code.co_lines() if line), statement.lineno)


def _end_each_path(block: list[Any], module: str) -> None:
    """End ``block``, the module's last, with the ``_end`` call, on each path that completes it:
    each branch of a final ``if`` and handler of a final ``try`` gets a call of its own (to one
    shared call, without a location, the compiler would jump back, which a tracer sees)."""
    import ast

    last = block[-1] if block else None
    if isinstance(last, ast.If) or (isinstance(last, ast.Try) and not last.finalbody):
        branches = [last.body] if isinstance(last, ast.If) else [h.body for h in last.handlers]
        for branch in [*branches, last.orelse]:  # an empty else gets the call
            _end_each_path(branch, module)
    else:
        block.append(_hook("_end", module))


def _marked_statements(body: list[ast.stmt], module: str, names: frozenset[str]) -> list[Any]:
    """``body``, run in the module's scope, with a ``_bound`` call after each binding (and
    each walrus that binds a declared name in a :func:`_bound_to` call)."""
    import ast

    marked: list[Any] = []
    for statement in body:
        _walruses(statement, module, names)
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound = {statement.name}
        elif any(_is_block(value) for _, value in ast.iter_fields(statement)):
            _mark_blocks(statement, module, names)  # if, for, while, with, try, match
            bound = set()
        elif isinstance(statement, ast.ImportFrom) and any(a.name == "*" for a in statement.names):
            bound = set(names)
        else:
            bound = _bound_by(statement)
        marked += [statement, *_bound_hook(module, bound & names)]
    return marked


def _mark_blocks(node: Any, module: str, names: frozenset[str]) -> None:
    """Mark the blocks of compound statement ``node`` (and of its handlers or cases); what its
    header binds (a loop's or with's target, a case's pattern) as its body starts."""
    import ast

    for field, value in ast.iter_fields(node):
        if _is_block(value) and isinstance(value[0], ast.stmt):
            bound = _bound_by(node) & names if field == "body" else set()  # not the blocks'
            marked = _marked_statements(value, module, names)
            setattr(node, field, _bound_hook(module, bound) + marked)
        elif _is_block(value):
            for part in value:  # except handlers, match cases: blocks of their own
                _walruses(part, module, names)
                _mark_blocks(part, module, names)


def _is_block(value: Any) -> bool:
    """Whether a field's ``value`` is a block of statements, or the handlers or cases of one."""
    import ast

    blocks = (ast.stmt, ast.excepthandler, ast.match_case)
    return isinstance(value, list) and bool(value) and isinstance(value[0], blocks)


def _bound_by(node: Any) -> set[str]:
    """The names ``node`` binds in the scope it runs in, but by a walrus (see :func:`_bound_to`);
    not those of nested statements, lambdas' bodies and comprehensions' targets."""
    import ast

    found: set[str] = set()
    pending = [node]
    while pending:
        current = pending.pop()
        if isinstance(current, ast.Name) and isinstance(current.ctx, ast.Store):
            found.add(current.id)
        elif isinstance(current, ast.alias):
            found.add(current.asname or current.name.partition(".")[0])
        elif isinstance(current, (ast.MatchAs, ast.MatchStar)) and current.name:
            found.add(current.name)
        elif isinstance(current, ast.MatchMapping) and current.rest:
            found.add(current.rest)
        if isinstance(current, ast.NamedExpr):
            pending.append(current.value)  # its target is marked where it binds
        elif isinstance(current, ast.Lambda):  # its defaults run here, its body does not
            pending.extend(d for d in (*current.args.defaults, *current.args.kw_defaults) if d)
        elif isinstance(current, ast.comprehension):  # its target is the comprehension's own
            pending.extend((current.iter, *current.ifs))
        elif current is node or not isinstance(current, ast.stmt):
            pending.extend(ast.iter_child_nodes(current))
    return found


def _walruses(node: Any, module: str, names: frozenset[str]) -> Any:
    """``node`` (a node, a list of them, or neither) with each walrus that binds one of ``names``
    in a ``_bound_to`` call, in what runs in its scope: not in its blocks nor in a lambda's body
    (no ``ast.NodeTransformer``: :mod:`ast` is imported only where a module is compiled)."""
    import ast

    if isinstance(node, list):
        return [_walruses(part, module, names) for part in node]
    if not isinstance(node, ast.AST):
        return node
    for field, value in ast.iter_fields(node):
        if not (_is_block(value) or (field == "body" and isinstance(node, ast.Lambda))):
            setattr(node, field, _walruses(value, module, names))
    if isinstance(node, ast.NamedExpr) and node.target.id in names:
        call: Any = _hook("_bound_to", module, node.target.id).value
        call.args.append(node)  # which keeps its location
        return call
    return node


def _bound_hook(module: str, bound: set[str] | frozenset[str]) -> list[ast.stmt]:
    """The ``_bound`` call that marks ``bound``, in a list; none where it is empty."""
    return [_hook("_bound", module, *sorted(bound))] if bound else []


def _hook(function: str, *arguments: Any, line: int = -1) -> ast.Expr:
    """The statement ``__import__("coheriq._outside.adapter", ...).function(*arguments)``
    (the module's namespace gets no new name), at ``line``; by default at no location of its
    own, so that the compiler gives it that of what runs before it: no new line is traced."""
    import ast

    here: list[ast.expr] = [*map(ast.Constant, (__name__, None, None, function))]
    adapter = ast.Call(ast.Name("__import__", ast.Load()), here, [])
    hook = ast.Expr(
        ast.Call(ast.Attribute(adapter, function, ast.Load()), [*map(ast.Constant, arguments)], [])
    )
    node: Any
    for node in ast.walk(hook):
        node.lineno = node.end_lineno = line
        node.col_offset = node.end_col_offset = -1 if line == -1 else 0
    return hook
