"""What stands at a function candidate's call sites, and the :class:`Switchboard` it reads.

A proxy decides nothing: it reads its domain's flag and finder and its candidate's
slot, which the Switchboard writes into the generated proxies' globals, the
compiled proxies' ``Board`` and ``Cell``, and the code-swapped proxies' own.
"""

from __future__ import annotations

import sys
from os import environ as _environ

from .._stdlib import (
    CO_COROUTINE,
    TYPE_CHECKING,
    FunctionType,
    caller_outside_coheriq,
    carry_annotations,
    code_flags,
)
from ..exceptions import CoheriqTypeError
from .compiled import IMPLEMENTATION as _PROXY_IMPLEMENTATION
from .compiled import compiled as _compiled
from .generated import Method, parameter_lists
from .swapped import Board, SwappedProxy, in_place_copy, not_swappable, on_one_line

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any


_freed: list[_Forget] = []  # copies freed since the last Switchboard.retire()

# Whether a marked class's __call__ is the compiled proxy too: the cheaper on 3.11 and
# 3.12 (benchmarks/proxies.py); from 3.13 the interpreter inlines the engine class's
# construction from the generated one, which a call from C cannot have.
_COMPILED_CONSTRUCTS = sys.version_info < (3, 13)

_SWAP_CODE = _environ.get("COHERIQ_SWAP_CODE", "1") != "0"

_IN_PLACE: dict[int, tuple[Any, Any]] = {}  # see mark_in_place: id -> (copy, original)

_NAMES = ("__module__", "__name__", "__qualname__", "__doc__")  # a proxy's, from its candidate


def proxy_implementation() -> str:
    """Which proxy stands at call sites in this process, and why.

    ``"compiled"`` for the compiled proxy (a type written in C, with no Python
    frame of its own); otherwise ``"python (...)"``, with the reason: the
    extension was not built here (an install without a compiler), or
    ``COHERIQ_PURE_PYTHON=1`` asked for the pure-Python proxy. Decided once,
    when coheriq is imported.

    >>> coheriq.proxy_implementation().split()[0] in ("compiled", "python")
    True
    """
    return _PROXY_IMPLEMENTATION


class _Forward:
    """A replaced copy's slot: calls what its finder finds for the candidate ``name``."""

    __slots__ = ("current", "name")

    def __init__(self, current: Callable[[Any], Any], name: str) -> None:
        self.current = current
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.current(None).members[self.name](*args, **kwargs)


def bound_elsewhere(obj: Any, module: str) -> bool:
    """Whether ``obj``, marked by ``module``, is another module's, held there under its
    qualified name (``normalize = mark(_impl.normalize)``), where pickle finds it."""
    home = getattr(obj, "__module__", None)
    return isinstance(home, str) and home != module and module != "?" and _held_at_home(obj)


def _held_at_home(obj: Any) -> bool:
    """Whether ``obj``'s module holds ``obj`` itself under its qualified name."""
    found: Any = sys.modules.get(getattr(obj, "__module__", None) or "")
    for part in str(getattr(obj, "__qualname__", "")).split("."):
        found = getattr(found, part, None)  # "<locals>" finds nothing
    return found is obj


def _proxy_home(fn: Any, info: CandidateInfo) -> tuple[str, str] | None:
    """Where pickle finds ``fn``'s proxy: the marking module and candidate's name (below
    a class body that marks it) where ``fn`` is held at its own home or has no name to
    look up (a lambda, a partial); None to keep ``fn``'s (a decorator above a ``def``)."""
    qualname = getattr(fn, "__qualname__", None)
    named = isinstance(qualname, str) and "<lambda>" not in qualname
    if info.module == "?" or (named and not _held_at_home(fn)):
        return None
    prefix = ""
    frame = caller_outside_coheriq()
    if frame is not None and frame.f_code.co_name != "<module>":
        namespace = frame.f_locals  # a class body's names its class
        if isinstance(namespace.get("__qualname__"), str) and "__module__" in namespace:
            prefix = namespace["__qualname__"] + "."
    return info.module, prefix + info.name


class CandidateInfo:
    """A candidate of a domain: its ``reference`` (the decorated function, or the marked
    class) and ``proxy`` (what stands at call sites).

    A class candidate's ``construct`` is what its metaclass's ``__call__`` runs under
    the reference, and ``constructs_directly`` whether it runs it now (set by
    :func:`coheriq._call.marked.construct_directly` only). ``run`` and ``first_run``
    are the frames of the module runs that marked it last and first; ``wrapper``, for
    a function marked in place, the library's object bound to the candidate's name.
    """

    __slots__ = (
        "construct",
        "constructs_directly",
        "domain",
        "first_run",
        "module",
        "name",
        "proxy",
        "reference",
        "run",
        "wrapper",
    )

    def __init__(
        self, domain: Any, name: str, reference: Any, module: str = "?", run: Any = None
    ) -> None:
        self.domain = domain
        self.name = name
        self.reference = reference
        self.proxy: Any = None
        self.construct: Callable[..., Any] | None = None
        self.constructs_directly = False
        self.module = module
        self.run = self.first_run = run
        self.wrapper: Any = None

    @property
    def is_class(self) -> bool:
        return isinstance(self.reference, type)

    def __reduce__(self) -> tuple[type[None], tuple[()]]:
        """Pickle as None: a marked function pickled by value (cloudpickle) is a copy
        that no domain marked, and its ``__dict__`` carries this."""
        return type(None), ()

    def __repr__(self) -> str:
        return f"<candidate {self.name!r} of domain {self.domain.name!r}>"


def candidate_of(obj: object) -> CandidateInfo | None:
    """What ``obj`` stands for if it is a candidate's proxy, marked class (not a subclass)
    or the wrapper of a function marked in place, else None."""
    try:
        info = getattr(obj, "__coheriq_candidate__", None)
        if not isinstance(info, CandidateInfo):
            if type(obj) is FunctionType or isinstance(obj, type):
                return None
            info = getattr(innermost_function(obj), "__coheriq_candidate__", None)
            if not isinstance(info, CandidateInfo):
                return None
    except Exception:  # an object whose __getattr__ misbehaves is not a proxy
        return None
    # Only the proxy or marked class itself: a subclass shares the metaclass that
    # carries the mark, and functools.wraps copies it into a wrapper's __dict__.
    if info.proxy is not None and info.proxy is not obj and info.wrapper is not obj:
        return None
    return info


def innermost_function(obj: object) -> Any:
    """The first plain Python function down ``obj``'s ``__wrapped__`` chain (``obj``
    itself, if it is one), or None."""
    for _ in range(100):  # as inspect.unwrap, a chain that loops ends
        if type(obj) is FunctionType:
            return obj
        if isinstance(obj, type):
            return None
        obj = getattr(obj, "__wrapped__", None)
        if obj is None:
            return None
    return None


def not_in_place(function: Any) -> str | None:
    """Why ``function`` cannot be marked in place (see :func:`mark_in_place`), or None."""
    if not _SWAP_CODE:
        return "COHERIQ_SWAP_CODE=0 turns off the code-swapped functions, which that needs"
    why = not_swappable(function)
    if why is None and (info := candidate_of(function)) is not None:
        why = f"it stands for candidate {info.name!r} of domain {info.domain.name!r} already"
    return why


def mark_in_place(mark: Callable[[Any], Any], function: Any, wrapper: Any) -> CandidateInfo:
    """Mark plain ``function`` in place, held by the library's ``wrapper``; return the candidate.

    ``mark`` marks a copy of ``function`` as the reference, whose proxy ``function``
    itself becomes, so what the library made keeps its identity. Call where
    :func:`not_in_place` says nothing against it. Raises CoheriqTypeError, leaving
    ``function`` as it was, where this Python cannot swap its code.
    """
    copy = in_place_copy(function)
    _IN_PLACE[id(copy)] = (copy, function)
    try:
        mark(copy)
    finally:
        del _IN_PLACE[id(copy)]
    info: CandidateInfo = function.__coheriq_candidate__
    info.wrapper = wrapper
    return info


def code_flags_behind(fn: object) -> int:
    """``fn``'s code flags, read through a function candidate's proxy from its reference."""
    info = candidate_of(fn)
    source = info.reference if info is not None and not info.is_class else fn
    return code_flags(source)


def _mark_coroutine_function(proxy: Callable[..., Any]) -> None:
    """Let ``inspect.iscoroutinefunction`` (3.12+; else asyncio's) see an ``async def``
    candidate through its proxy, a plain function that returns the coroutine."""
    if sys.version_info >= (3, 12):
        import inspect  # only for async candidates, at the library's import

        inspect.markcoroutinefunction(proxy)
    else:
        import asyncio.coroutines  # a library with async candidates runs asyncio anyway

        proxy._is_coroutine = asyncio.coroutines._is_coroutine  # type: ignore[attr-defined]


class Switchboard:
    """Writes what every proxy of one domain reads at call time.

    ``current``, the finder, is read while the flag is set: ``current(missing)``
    returns the scope whose ``members`` a call in this context runs (of class
    ``scope_class``), else ``missing`` (:meth:`set_missing`; None: the slot).
    ``namespace``, the generated proxies' globals, is shared by every copy of a
    library's domain (so autoreload's code swaps reach the later copy), each copy's
    names carrying ``tag``. ``unchosen(name)`` is what a slot holds until the global
    choice is made (a callable that makes it).
    """

    def __init__(
        self,
        current: Callable[[Any], Any],
        namespace: dict[str, Any],
        tag: str,
        scope_class: type,
        unchosen: Callable[[str], Any],
    ) -> None:
        self.namespace = namespace
        self._unchosen = unchosen
        # The documented module name that tracebacks and warnings show for generated proxies.
        namespace.setdefault("__name__", "coheriq.proxy")
        self._scoped = f"_coheriq{tag}_scoped"
        self._current = f"_coheriq{tag}_current"
        self._missing = f"_coheriq{tag}_missing"
        # The names both boards hold too: the namespace's name -> the boards' field.
        self._fields = {self._scoped: "scoped", self._current: "current", self._missing: "missing"}
        self._slot_prefix = f"_coheriq{tag}_impl_"
        self.retired = False  # see retire()
        # A weak reference's callback for when the copy is freed; not a bound method,
        # which would keep the Switchboard alive from the code that holds the reference.
        self.forget = _Forget(namespace, tuple(self._fields), self._slot_prefix)
        # The compiled proxies' flag, finder and its context variable, and a Cell per slot.
        self._board: Any = _compiled.Board() if _compiled is not None else None
        self._cells: dict[str, Any] = {}
        if self._board is not None:
            self._board.scope_type = scope_class
            self._board.members = scope_class.__dict__["members"]
        self._swapped: dict[str, SwappedProxy] = {}
        self._swap_board = Board(current)
        self.runs_directly: bool | None = False  # None: a swap of them all was stopped
        self._generic: list[SwappedProxy] = []  # on the trampoline marking gives them
        self._write(self._scoped, True)
        self._write(self._current, current)
        self._write(self._missing, None)

    def function_proxy(self, info: CandidateInfo) -> Callable[..., Any]:
        """Return what stands at call sites for ``info``'s candidate: a code-swapped proxy
        for a plain function (unless ``COHERIQ_SWAP_CODE=0``), else a dispatcher."""
        swapped = self._swapped_proxy(info)
        proxy = swapped.function if swapped is not None else self._dispatcher_for(info)
        self._dress(proxy, info)
        if swapped is not None:
            slot = self._slot(info.name)
            self._swapped[slot] = swapped
            self._write(slot, self._slot_value(slot, info.name))
            if not self.runs_directly:
                self._generic.append(swapped)
        return proxy

    def stand_in_again(self, info: CandidateInfo) -> None:
        """Make ``info.proxy`` (the same object) stand for ``info.reference``, marked again."""
        proxy = info.proxy
        slot = self._slot(info.name)
        swapped = self._swapped.get(slot)
        if swapped is None or swapped.function is not proxy:
            fresh = self._dispatcher_for(info)
            self._dress(fresh, info)
            update_proxy(proxy, fresh)
            return
        swapped.take(info.reference)
        if self.runs_directly:
            swapped.run(swapped.cell.value)
        proxy.__dict__.clear()
        self._dress(proxy, info)

    def kind_of(self, name: str) -> str:
        """``"function"`` where a code-swapped proxy stands for ``name``, else the
        dispatcher's kind (:func:`proxy_implementation`'s first word)."""
        if self._slot(name) in self._swapped:
            return "function"
        return _PROXY_IMPLEMENTATION.split()[0]

    def _swapped_proxy(self, info: CandidateInfo) -> SwappedProxy | None:
        """A code-swapped proxy for ``info``'s candidate, or None where one cannot stand;
        CoheriqTypeError for one marked in place whose code this Python cannot swap."""
        in_place = _IN_PLACE.get(id(info.reference))
        function = in_place[1] if in_place is not None and in_place[0] is info.reference else None
        if function is None and (not _SWAP_CODE or not_swappable(info.reference) is not None):
            return None
        dispatcher = None
        if _compiled is not None:  # calls that look go through it, or ask it what to call
            fn = info.reference
            dispatcher = self._compiled_proxy(info.name, fn.__name__, fn.__qualname__, False)
        try:
            return SwappedProxy(info.reference, info.name, self._swap_board, dispatcher, function)
        except ValueError as error:  # free variables this Python cannot mirror
            if function is None:
                return None
            raise CoheriqTypeError(
                f"Function {function.__qualname__!r} cannot stand for candidate {info.name!r} "
                f"of domain {info.domain.name!r} in place: {error}"
            ) from None

    def _dispatcher_for(self, info: CandidateInfo) -> Callable[..., Any]:
        """A dispatcher for ``info``'s candidate, with its parameters."""
        import keyword  # as for the candidate's name: marking needs it, importing does not

        fn = info.reference
        defname = getattr(fn, "__name__", None)
        if not (isinstance(defname, str) and defname.isidentifier()) or keyword.iskeyword(defname):
            defname = info.name  # a lambda's "<lambda>" cannot be a def's name
        return self.dispatcher(
            info.name,
            defname=defname,
            signature_of=fn,
            where=getattr(fn, "__code__", None),
            qualname=getattr(fn, "__qualname__", info.name),
        )

    def _dress(self, proxy: Any, info: CandidateInfo) -> None:
        """Give ``proxy`` what makes it the candidate for Python's tools (names, docs,
        attributes, annotations, ``__wrapped__``) and the candidate itself."""
        fn = info.reference
        for attr in _NAMES:
            try:
                setattr(proxy, attr, getattr(fn, attr))
            except (AttributeError, TypeError):
                pass
        proxy.__dict__.update(getattr(fn, "__dict__", {}))
        if not isinstance(fn, FunctionType):
            # What a callable object offers besides its call (lru_cache's cache_info).
            for attr in dir(fn):
                if not attr.startswith("_") and not hasattr(proxy, attr):
                    try:
                        setattr(proxy, attr, getattr(fn, attr))
                    except AttributeError:
                        pass
        home = _proxy_home(fn, info)
        if home is not None:  # so that pickle finds the proxy
            proxy.__module__, proxy.__qualname__ = home
            proxy.__name__ = info.name
        carry_annotations(proxy, fn)
        type_params = getattr(fn, "__type_params__", ())
        if type_params:  # a generic function (3.12+): def f[T](x: T) -> T
            proxy.__type_params__ = type_params
        proxy.__wrapped__ = fn
        proxy.__coheriq_candidate__ = info
        if code_flags(fn) & CO_COROUTINE:
            _mark_coroutine_function(proxy)

    def dispatcher(
        self,
        candidate: str,
        *,
        defname: str,
        signature_of: Any,
        where: Any,
        qualname: str,
        receiver: str | None = None,
    ) -> Callable[..., Any]:
        """The compiled proxy of ``candidate``, or a function generated to dispatch its calls
        with the parameters of ``signature_of`` (a :class:`Method`: less the first), at
        the file and line of code object ``where``; ``receiver``: a first parameter
        that is not passed on (the class, for a metaclass's ``__call__``)."""
        if _compiled is not None and (receiver is None or _COMPILED_CONSTRUCTS):
            return self._compiled_proxy(candidate, defname, qualname, receiver is not None)
        slot = self._slot(candidate)
        self._slot_value(slot, candidate)
        exact = parameter_lists(signature_of)
        params, args = exact or ("*args, **kwargs", "*args, **kwargs")
        if receiver is not None:
            # Positional-only, so that a keyword argument of the same name, taken by
            # the candidate's **kwargs, reaches the candidate.
            if not params:
                params = f"{receiver}, /"
            elif "/" in params.split(", "):
                params = f"{receiver}, {params}"  # the candidate's own / covers it
            else:
                params = f"{receiver}, /, {params}"
        filename = getattr(where, "co_filename", f"<coheriq proxy of {candidate}>")
        source = (
            f"def {defname}({params}):\n"
            f"    if {self._scoped}:\n"
            f"        _coheriq_scope = {self._current}({self._missing})\n"
            f"        if _coheriq_scope is not None:\n"
            f"            return _coheriq_scope.members[{candidate!r}]({args})\n"
            f"    return {slot}({args})\n"
        )
        module = compile(source, filename, "exec")
        code = next(c for c in module.co_consts if getattr(c, "co_name", None) == defname)
        code = on_one_line(code, getattr(where, "co_firstlineno", 1), qualname)
        proxy: Callable[..., Any] = FunctionType(code, self.namespace, defname)
        if exact is not None:
            source_fn = signature_of.function if isinstance(signature_of, Method) else signature_of
            proxy.__defaults__ = source_fn.__defaults__
            proxy.__kwdefaults__ = source_fn.__kwdefaults__
        return proxy

    def _compiled_proxy(
        self, candidate: str, defname: str, qualname: str, receiver: bool
    ) -> Callable[..., Any]:
        """The compiled proxy of ``candidate``: it passes the caller's arguments on as they are."""
        slot = self._slot(candidate)
        cell = self._cells.get(slot)
        if cell is None:
            cell = self._cells[slot] = _compiled.Cell(self._slot_value(slot, candidate))
        proxy: Callable[..., Any] = _compiled.Proxy(self._board, cell, candidate, receiver)
        proxy.__name__, proxy.__qualname__ = defname, qualname
        return proxy

    def member(self, candidate: str) -> Any:
        """What a call of ``candidate`` runs in this context, as a proxy would find it;
        None where finding it would make the global choice (asking makes none)."""
        namespace = self.namespace
        if namespace[self._scoped]:
            scope = namespace[self._current](namespace[self._missing])
            if scope is not None:
                if getattr(scope, "chooses", False):
                    return None
                return scope.members[candidate]
        member = namespace[self._slot(candidate)]
        return None if getattr(type(member), "chooses", False) else member

    def connect(self, members: Mapping[str, Any]) -> None:
        """Point every candidate's slot at what a call runs now (the settled engine's)."""
        if self.retired:
            return
        for name, member in members.items():
            self._write(self._slot(name), member)

    def set_current(self, current: Callable[[Any], Any], variable: Any = None) -> None:
        """Replace the finder; ``variable``: the context variable that ``current`` only
        reads, if so (the compiled proxies then read it themselves)."""
        if self.retired:
            return
        self._read_variable(None)  # until the new finder is in, the finder alone
        self._write(self._current, current)
        self._read_variable(variable)

    def set_missing(self, missing: Any) -> None:
        """Say what the finder returns in a context without a block (None: the slot)."""
        if not self.retired:
            self._write(self._missing, missing)

    def set_scoped(self, scoped: bool) -> None:
        """Say whether proxies must look at the context before calling."""
        if not self.retired:
            self._write(self._scoped, scoped)

    def run_directly(self, directly: bool) -> None:
        """Let the code-swapped proxies run their slot without looking, or make them look;
        with the domain's lock held, while the flag is off or before it goes on."""
        if self.retired:
            return
        if directly is not self.runs_directly:
            swapping = list(self._swapped.values())
        elif directly or not self._generic:
            return
        else:  # still looking: only the proxies on the trampoline that takes any arguments
            swapping = self._generic
        # Neither until every proxy is swapped: a swap that an exception stops (a
        # KeyboardInterrupt between two proxies) is done again by the next call.
        self.runs_directly = None
        for swapped in swapping:
            if directly:
                swapped.run(swapped.cell.value)
            else:
                swapped.look()
        self._generic = []
        self.runs_directly = directly

    def retire(self, current: Callable[[Any], Any]) -> None:
        """Look at the context on every call, through ``current`` alone, and ignore later
        changes: for a copy of a domain that a later copy replaced. ``current`` must hold
        the copy weakly and never return None; each slot forwards to what it finds."""
        _follow_autoreload()
        for swapped in self._swapped.values():
            swapped.retire()
        self.runs_directly = False
        while _freed:
            try:
                _freed.pop().drop()
            except IndexError:  # another thread took the last
                break
        self._read_variable(None)
        self._write(self._current, current)
        self._write(self._missing, None)
        for key in _names_in(self.namespace, self._slot_prefix):
            self._write(key, _Forward(current, key[len(self._slot_prefix) :]))
        self._write(self._scoped, True)
        self.retired = True

    def release(self) -> None:
        """Let a dropped domain be freed (:func:`coheriq.testing.isolated`): its
        code-swapped proxies run their candidates' own code from now on."""
        for swapped in self._swapped.values():
            swapped.release()
        self.retired = True

    def _write(self, key: str, value: Any) -> None:
        """Set the namespace's ``key``, and the copies of it other proxies read."""
        self.namespace[key] = value
        field = self._fields.get(key)
        if field is not None:
            setattr(self._swap_board, field, value)
            if self._board is not None:
                setattr(self._board, field, value)
            return
        swapped = self._swapped.get(key)
        if swapped is not None:
            swapped.cell.value = value
            if self.runs_directly:
                swapped.run(value)
        if key in self._cells:
            self._cells[key].value = value

    def _read_variable(self, variable: Any) -> None:
        """Let the compiled proxies read ``variable`` instead of calling the finder."""
        if self._board is not None:
            self._board.variable = variable

    def _slot_value(self, slot: str, name: str) -> Any:
        """What candidate ``name``'s ``slot`` holds, given one if it has none yet."""
        value = self.namespace.get(slot)
        if value is None:
            value = self.namespace[slot] = self._unchosen(name)
        return value

    def _slot(self, name: str) -> str:
        return f"{self._slot_prefix}{name}"


def _names_in(namespace: dict[str, Any], prefix: str) -> list[str]:
    # list() first: a collector's callback (a _Forget) may change the namespace meanwhile.
    return [key for key in list(namespace) if key.startswith(prefix)]


class _Forget:
    """A weak reference's callback: a freed copy's names leave the namespace at the next
    :meth:`Switchboard.retire`, not at once, since the collector calls it before the
    finalizers of the same garbage, which may still call the copy's proxies."""

    __slots__ = ("keys", "namespace", "slot_prefix")

    def __init__(self, namespace: dict[str, Any], keys: tuple[str, ...], slots: str) -> None:
        self.namespace = namespace
        self.keys = keys
        self.slot_prefix = slots

    def __call__(self, _: object = None) -> None:
        _freed.append(self)

    def drop(self) -> None:
        for key in [*self.keys, *_names_in(self.namespace, self.slot_prefix)]:
            self.namespace.pop(key, None)


def _follow_autoreload() -> None:
    """Teach IPython's autoreload, which updates functions in place, to update compiled
    proxies too (:func:`update_proxy`); called when a copy of a domain is replaced."""
    autoreload = sys.modules.get("IPython.extensions.autoreload")
    rules = getattr(autoreload, "UPDATE_RULES", None)
    if _compiled is None or not isinstance(rules, list):
        return
    if not any(rule[1] is update_proxy for rule in rules):
        rules.insert(0, (_both_compiled_proxies, update_proxy))


def _both_compiled_proxies(old: object, new: object) -> bool:
    return type(old) is type(new) is _compiled.Proxy


def update_proxy(proxy: Any, fresh: Any) -> None:
    """Make ``proxy`` what the newly made ``fresh`` is, in place, so that references taken
    before its module ran again (or autoreload reloaded it) run the new code."""
    if isinstance(proxy, FunctionType):
        proxy.__code__ = fresh.__code__
        proxy.__defaults__ = fresh.__defaults__
        proxy.__kwdefaults__ = fresh.__kwdefaults__
        if sys.version_info >= (3, 12):
            proxy.__type_params__ = fresh.__type_params__
    else:  # the compiled proxy
        proxy._coheriq_take_over(fresh)
    for attr in _NAMES:
        setattr(proxy, attr, getattr(fresh, attr))
    proxy.__dict__ = dict(fresh.__dict__)
    carry_annotations(proxy, fresh.__wrapped__)
