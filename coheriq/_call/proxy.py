"""The function proxies that stand at call sites, and the cells every proxy reads.

A proxy does not decide anything. Every proxy of a domain runs in one shared
namespace, the domain's :class:`Switchboard`, which the domain rewrites when its
global engine settles (each candidate's slot then holds that engine's member)
and when the first scope of the domain opens or the last one closes (a flag). So
a call in the common case is one generated function frame, two global loads and
the call of the implementation itself. (Globals, not closure cells: a function
with free variables copies them into each new frame, measurably slower.)

A function proxy is a function generated, like :mod:`dataclasses` does, with the
candidate's own parameter list, so that arguments are passed on without packing
them into a tuple and a dict. For ``def normalize(xs, *, eps=1e-9)`` it reads::

    def normalize(xs, *, eps=None):   # defaults are copied from the candidate
        if _coheriq_scoped:
            _coheriq_scope = _coheriq_current()
            if _coheriq_scope is not None:
                return _coheriq_scope.members['normalize'](xs, eps=eps)
        return _coheriq_impl_normalize(xs, eps=eps)

``_coheriq_scoped`` is set while the domain must look at the context: a scope
is open somewhere, a profile is recording, or the global choice is not made yet.
``_coheriq_current`` then finds this context's scope (see :mod:`coheriq._choice.records`).
(A later copy of a library's domain uses names with its number: ``_coheriq2_scoped``.)
Callables whose parameters cannot be read from a code object get the same body
with ``*args, **kwargs``.

The proxy is meant to be the function as far as Python tools can tell: it keeps
the candidate's ``__module__`` (so :mod:`doctest` and :func:`inspect.getmodule`
count it as the module's), and its code carries the candidate's file, first line
and qualified name, every instruction on that one line, so that
:func:`inspect.getsource`, tracebacks and profilers show the library's source.
It is one frame: the implementation is fetched (and the domain settled, on the
first call) before it is called, so nothing of coheriq's stays on the stack.

Class candidates are the library's own classes, rebuilt with a metaclass whose
``__call__`` is generated here the same way (see :mod:`coheriq._call.marked`).

That one frame is what the compiled proxy (``coheriq/_cproxy.c``, a type with
vectorcall) does without: where it was built, :meth:`Switchboard.dispatcher`
makes one of those instead. It reads the same state, which the Switchboard
writes beside the namespace into a ``Board`` per domain (the flag, the finder,
and the context variable the finder only reads, which the compiled proxy then
reads itself) and a ``Cell`` per candidate (its slot), and calls the
implementation with the caller's arguments as they are. The generated function
stays the reference: used where the extension is not built and under
``COHERIQ_PURE_PYTHON=1`` (see :func:`proxy_implementation`).
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
from .compiled import set_dispatcher as _set_dispatcher
from .generated import Method, parameter_lists
from .swapped import Board, SwappedProxy, in_place_copy, not_swappable, on_one_line

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

__all__ = [
    "CandidateInfo",
    "Method",
    "Switchboard",
    "bound_elsewhere",
    "candidate_of",
    "innermost_function",
    "mark_in_place",
    "not_in_place",
    "parameter_lists",
    "proxy_implementation",
    "update_proxy",
]

# The names of copies freed since the last Switchboard.retire() (see _Forget).
_freed: list[_Forget] = []


# Whether a marked class's dispatching __call__ is the compiled proxy too. Measured
# (benchmarks/proxies.py): it is the cheaper on 3.11 and 3.12; from 3.13 on, the
# generated __call__ is, because inside a Python frame the interpreter specializes
# the engine class's construction (its __init__ runs inlined), which a call from C
# cannot have.
_COMPILED_CONSTRUCTS = sys.version_info < (3, 13)


# Whether plain Python functions get code-swapped proxies (coheriq._call.swapped):
# COHERIQ_SWAP_CODE=0 gives them the dispatcher every other candidate gets.
_SWAP_CODE = _environ.get("COHERIQ_SWAP_CODE", "1") != "0"

# The copies being marked in place (see mark_in_place), by id: (the copy, its original).
_IN_PLACE: dict[int, tuple[Any, Any]] = {}


def proxy_implementation() -> str:
    """Which proxy stands at call sites in this process, and why.

    ``"compiled"`` for the compiled proxy (a type written in C, with no Python
    frame of its own); otherwise ``"python (...)"``, with the reason: the
    extension was not built here (an install without a compiler, or a
    free-threaded CPython), or ``COHERIQ_PURE_PYTHON=1`` asked for the
    pure-Python proxy. Decided once, when coheriq is imported.

    >>> coheriq.proxy_implementation().split()[0] in ("compiled", "python")
    True
    """
    return _PROXY_IMPLEMENTATION


class _Forward:
    """A replaced copy's slot: calls what its finder finds for the candidate ``name``."""

    __slots__ = ("current", "name")

    def __init__(self, current: Callable[[], Any], name: str) -> None:
        self.current = current
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.current().members[self.name](*args, **kwargs)


def bound_elsewhere(obj: Any, module: str) -> bool:
    """Whether ``obj``, marked by ``module``, belongs to another module, which holds it.

    That is, ``obj.__module__`` is another module's name, and that module holds
    ``obj`` itself under ``obj.__qualname__``: where pickle, ``help()`` and
    that module's own code find it (``normalize = mark(_impl.normalize)``).
    A decorator above a ``def`` or ``class`` statement marks an object that
    is bound nowhere yet, wherever the decorator is written.
    """
    home = getattr(obj, "__module__", None)
    return isinstance(home, str) and home != module and module != "?" and _held_at_home(obj)


def _held_at_home(obj: Any) -> bool:
    """Whether ``obj``'s module holds ``obj`` itself under its qualified name."""
    found: Any = sys.modules.get(getattr(obj, "__module__", None) or "")
    for part in str(getattr(obj, "__qualname__", "")).split("."):
        found = getattr(found, part, None)  # "<locals>" finds nothing
    return found is obj


def _proxy_home(fn: Any, info: CandidateInfo) -> tuple[str, str] | None:
    """Where the proxy of ``fn`` lives (module, qualified name), when not where ``fn`` does.

    pickle finds a function by its ``__module__`` and ``__qualname__``. The
    proxy keeps ``fn``'s where ``fn`` is bound nowhere yet (a decorator above
    its ``def``). It is the marking module's, under the candidate's name (below
    the class whose body marks it), where ``fn`` is held there already, so that
    pickle would find ``fn`` (``normalize = mark(_impl.normalize)``, or
    ``mark(_normalize, name="normalize")``), or where ``fn`` has no name pickle
    could look up (a lambda, a :func:`functools.partial`, a callable object).
    """
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
    """What a proxy stands for: a candidate of a domain.

    Attributes:
        domain: The :class:`~coheriq.AccelerationDomain` the candidate belongs to.
        name: The candidate's name in its domain.
        reference: The reference implementation: the decorated function, or the
            marked class (the library's class, rebuilt).
        proxy: What stands at call sites: the function proxy, or the marked class.
        construct: For a class candidate, constructs the marked class itself
            (what its metaclass's ``__call__`` runs under the reference); else None.
        constructs_directly: For a class candidate, whether the marked class
            constructs itself now without dispatching (see
            :func:`coheriq._call.marked.construct_directly`, which alone sets it).
        module: The name of the module that marked it.
        run: The frame of the module run (or function) that marked it last:
            when it has ended, the module may run again and mark the candidate
            anew (see :mod:`coheriq._library.late_candidates`).
        first_run: The frame of the run that marked it first.
        wrapper: Where the proxy is the library's own function, marked in place
            (see :func:`mark_in_place`): the library's object bound to the
            candidate's name, which holds it (its ``__wrapped__``); else None.
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
        """Whether the candidate is a class."""
        return isinstance(self.reference, type)

    def __reduce__(self) -> tuple[type[None], tuple[()]]:
        """Pickle as None: a marked function pickled by value (cloudpickle does so
        for a function of ``__main__``) is a copy of the library's function, which
        no domain marked; its ``__dict__`` carries this mark, which is not copied."""
        return type(None), ()

    def __repr__(self) -> str:
        return f"<candidate {self.name!r} of domain {self.domain.name!r}>"


def candidate_of(obj: object) -> CandidateInfo | None:
    """Return what ``obj`` stands for if it is a candidate's proxy or marked class, else ``None``.

    A marked class carries its candidate on its metaclass, which its subclasses
    share; only the marked class itself is the candidate.

    A library's wrapper that holds a function marked in place (see
    :func:`mark_in_place`) is the candidate too: the library binds it to the
    candidate's name.
    """
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
    itself, if it is one), or None where the chain reaches none."""
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
    if why is not None:
        return why
    info = candidate_of(function)
    if info is not None:
        return f"it stands for candidate {info.name!r} of domain {info.domain.name!r} already"
    return None


def mark_in_place(mark: Callable[[Any], Any], function: Any, wrapper: Any) -> CandidateInfo:
    """Mark plain ``function`` in place, held by the library's ``wrapper``; return the candidate.

    ``mark`` marks the reference it is given and returns its proxy: given a copy
    of ``function`` (see :func:`~coheriq._call.swapped.in_place_copy`) as the
    reference, the proxy is ``function`` itself, whose code is swapped (see
    :mod:`coheriq._call.swapped`). So everything the library made keeps its
    identity: ``wrapper``, still bound to the candidate's name, and what it
    holds. Call where :func:`not_in_place` says nothing against it.

    Raises:
        CoheriqTypeError: This Python cannot swap the code of ``function``; it is
            left as it was.
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
    """``fn``'s code flags, read through a candidate's proxy to its reference's code.

    A candidate's proxy is a plain function whatever its candidate is: what a
    call returns (a coroutine, a generator) is what the reference's code says.
    """
    info = candidate_of(fn)
    source = info.reference if info is not None and not info.is_class else fn
    return code_flags(source)


def _mark_coroutine_function(proxy: Callable[..., Any]) -> None:
    """Let ``inspect.iscoroutinefunction`` see an ``async def`` candidate through its proxy.

    The proxy itself is a plain function that returns the implementation's
    coroutine (so the engine is chosen when the call is made, not when it is
    awaited). Python 3.12 added a way to tell ``inspect``; before it, only
    :func:`asyncio.iscoroutinefunction` can be told (by asyncio's marker), and
    ``inspect.iscoroutinefunction`` reads the code's flags alone.
    """
    import inspect  # only for async candidates, at the library's import

    mark = getattr(inspect, "markcoroutinefunction", None)
    if mark is not None:
        mark(proxy)
        return
    import asyncio.coroutines  # a library with async candidates runs asyncio anyway

    marker = getattr(asyncio.coroutines, "_is_coroutine", None)
    if marker is not None:
        proxy._is_coroutine = marker  # type: ignore[attr-defined]


class Switchboard:
    """The names that every proxy of one domain reads at call time.

    Args:
        current: Returns the object whose ``members`` map candidate names to what
            a call in the current context runs (a scope; before the domain
            settles, a view that settles it), or ``None`` for the settled
            implementation. Consulted only while the ``scoped`` flag is set.
        namespace: The globals of the generated functions, shared by every copy
            of a library's domain (see :mod:`coheriq._library.registry`); each copy's
            names carry ``tag``. So the code of a later copy's proxy, put into an
            earlier copy's proxy (as IPython's autoreload does to the functions
            of a reloaded module), reaches the later copy.
        tag: Distinguishes this copy's names in ``namespace`` (empty for the first).
        scope_class: The class of what ``current`` returns for a block, whose
            ``members`` the compiled proxies read through its descriptor.
        unchosen: Makes what a candidate's slot holds until the global choice is
            made, given its name (something callable that makes the choice).
    """

    def __init__(
        self,
        current: Callable[[], Any],
        namespace: dict[str, Any],
        tag: str = "",
        scope_class: type | None = None,
        unchosen: Callable[[str], Any] | None = None,
    ) -> None:
        self.namespace = namespace
        self._unchosen = unchosen
        # The generated functions' frames count as coheriq's own.
        # The module name tracebacks and warnings show for the generated proxies
        # (documented; kept when this module moved).
        namespace.setdefault("__name__", "coheriq.proxy")
        self._scoped = f"_coheriq{tag}_scoped"
        self._current = f"_coheriq{tag}_current"
        self._slot_prefix = f"_coheriq{tag}_impl_"
        self.retired = False  # see retire()
        # A weak reference's callback, for when the copy is freed. Not a method of
        # the Switchboard: a code-swapped proxy's code holds the weak reference
        # (through the finder), and what code holds is never collected.
        self.forget = _Forget(namespace, self._scoped, self._current, self._slot_prefix)
        # The compiled proxies read the same state from a Board (the flag, the finder,
        # and the context variable that the finder only reads, where it does, which
        # they then read themselves) and a Cell per candidate (its slot), written
        # beside the names.
        self._board: Any = _compiled.Board() if _compiled is not None else None
        self._cells: dict[str, Any] = {}
        members = scope_class.__dict__.get("members") if scope_class is not None else None
        if self._board is not None and members is not None:
            # A block's members, read through the descriptor without a lookup.
            self._board.scope_type, self._board.members = scope_class, members
        # The code-swapped proxies (see coheriq._call.swapped), by slot, and the flag
        # and finder they read; whether they run their slot without looking.
        self._swapped: dict[str, SwappedProxy] = {}
        self._swap_board = Board(current)
        self.runs_directly: bool | None = False  # None: a swap of them all was stopped
        # Proxies still on the looking trampoline that takes any arguments, which
        # marking gives them (it compiles nothing): the next refresh swaps them.
        self._generic: list[SwappedProxy] = []
        # Until the domain settles there is no implementation to call directly:
        # every call looks at the context, which settles the domain.
        self._write(self._scoped, True)
        self._write(self._current, current)

    def function_proxy(self, info: CandidateInfo) -> Callable[..., Any]:
        """Return the function that stands at call sites for ``info``'s candidate.

        A plain Python function gets a code-swapped proxy (see
        :mod:`coheriq._call.swapped`), unless ``COHERIQ_SWAP_CODE=0``; anything
        else a dispatcher (compiled where built, else generated).
        """
        swapped = self._swapped_proxy(info)
        proxy = swapped.function if swapped is not None else self._dispatcher_for(info)
        self._dress(proxy, info)
        if swapped is not None:
            slot = self._slot(info.name)
            self._swapped[slot] = swapped
            swapped.cell.value = self._slot_value(slot, info.name)
            if self.runs_directly:
                swapped.run(swapped.cell.value)
            else:
                self._generic.append(swapped)
        return proxy

    def stand_in_again(self, info: CandidateInfo) -> None:
        """Make ``info.proxy`` stand for ``info.reference``, which its module marked again.

        The proxy stays the same object: call sites that kept it run the new code.
        """
        proxy = info.proxy
        slot = self._slot(info.name)
        swapped = self._swapped.get(slot)
        if swapped is None or swapped.function is not proxy:
            update_proxy(proxy, self._dispatcher_for(info, dressed=True))
            return
        swapped.take(info.reference)
        if self.runs_directly:
            swapped.run(swapped.cell.value)
        proxy.__dict__.clear()
        self._dress(proxy, info)

    def kind_of(self, name: str) -> str:
        """Which proxy stands for function candidate ``name``: ``"function"`` for a
        code-swapped one, else :func:`proxy_implementation`'s first word."""
        if self._slot(name) in self._swapped:
            return "function"
        return _PROXY_IMPLEMENTATION.split()[0]

    def _swapped_proxy(self, info: CandidateInfo) -> SwappedProxy | None:
        """A code-swapped proxy for ``info``'s candidate, or None where one cannot stand.

        Raises:
            CoheriqTypeError: The candidate is marked in place (see
                :func:`mark_in_place`), and this Python cannot swap its code.
        """
        in_place = _IN_PLACE.get(id(info.reference))
        function = in_place[1] if in_place is not None and in_place[0] is info.reference else None
        if function is None and (not _SWAP_CODE or not_swappable(info.reference) is not None):
            return None
        dispatcher = None
        if _set_dispatcher is not None:  # calls that look go through it, from C
            slot = self._slot(info.name)
            self._slot_value(slot, info.name)
            fn = info.reference
            dispatcher = self._compiled_proxy(
                info.name, slot, fn.__name__, fn.__qualname__, receiver=False
            )
        try:
            return SwappedProxy(info.reference, info.name, self._swap_board, dispatcher, function)
        except ValueError as error:  # free variables this Python cannot mirror
            if function is None:
                return None
            raise CoheriqTypeError(
                f"Function {function.__qualname__!r} cannot stand for candidate {info.name!r} "
                f"of domain {info.domain.name!r} in place: {error}"
            ) from None

    def _dispatcher_for(self, info: CandidateInfo, dressed: bool = False) -> Callable[..., Any]:
        """A dispatcher for ``info``'s candidate with its parameters (and, if ``dressed``,
        its attributes too, as :meth:`_dress` gives them)."""
        import keyword  # as for the candidate's name: marking needs it, importing does not

        fn = info.reference
        defname = getattr(fn, "__name__", None)
        if not (isinstance(defname, str) and defname.isidentifier()) or keyword.iskeyword(defname):
            defname = info.name  # a lambda's "<lambda>" cannot be a def's name
        proxy = self.dispatcher(
            info.name,
            defname=defname,
            signature_of=fn,
            where=getattr(fn, "__code__", None),
            qualname=getattr(fn, "__qualname__", info.name),
        )
        if dressed:
            self._dress(proxy, info)
        return proxy

    def _dress(self, proxy: Any, info: CandidateInfo) -> None:
        """Give ``proxy`` what makes it the candidate for Python's tools: names, docs,
        attributes, annotations, ``__wrapped__``, and the candidate it stands for."""
        fn = info.reference
        for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
            try:
                setattr(proxy, attr, getattr(fn, attr))
            except (AttributeError, TypeError):
                pass
        proxy.__dict__.update(getattr(fn, "__dict__", {}))
        if not isinstance(fn, FunctionType):
            # What a callable object offers besides its call (lru_cache's
            # cache_info and cache_clear, say), the proxy offers too.
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
        """Compile the function that dispatches calls of ``candidate`` (see the module doc).

        Args:
            candidate: The candidate's name.
            defname: The generated function's name.
            signature_of: The function whose parameters the generated one copies
                (a :class:`Method` to leave out its first); otherwise generic.
            where: A code object whose file and first line the generated code
                claims, or None.
            qualname: The generated code's qualified name.
            receiver: A first parameter the generated function takes and does not
                pass on (the class, for a metaclass's ``__call__``).
        """
        slot = self._slot(candidate)
        self._slot_value(slot, candidate)
        if _compiled is not None and (receiver is None or _COMPILED_CONSTRUCTS):
            return self._compiled_proxy(candidate, slot, defname, qualname, receiver is not None)
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
            f"        _coheriq_scope = {self._current}()\n"
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
        self, candidate: str, slot: str, defname: str, qualname: str, receiver: bool
    ) -> Callable[..., Any]:
        """The compiled proxy of ``candidate``: the same dispatch as the generated one,
        with the caller's arguments passed on as they are and no frame of its own."""
        cell = self._cells.get(slot)
        if cell is None:
            cell = self._cells[slot] = _compiled.Cell(self.namespace[slot])
        proxy: Callable[..., Any] = _compiled.Proxy(self._board, cell, candidate, receiver)
        proxy.__name__, proxy.__qualname__ = defname, qualname
        return proxy

    def member(self, candidate: str, undecided: Any = None) -> Any:
        """What a call of ``candidate`` runs in this context, as a proxy would find it.

        ``undecided`` where finding it would make the domain's global choice (a
        view whose ``chooses`` is true): asking makes no choice.
        """
        namespace = self.namespace
        if namespace[self._scoped]:
            scope = namespace[self._current]()
            if scope is not None:
                if getattr(scope, "chooses", False):
                    return undecided
                return scope.members[candidate]
        member = namespace[self._slot(candidate)]
        return undecided if getattr(type(member), "chooses", False) else member

    def connect(self, members: Mapping[str, Any]) -> None:
        """Point every candidate's slot at what a call runs now (the settled engine's)."""
        if self.retired:
            return
        for name, member in members.items():
            self._write(self._slot(name), member)

    def set_current(self, current: Callable[[], Any], variable: Any = None) -> None:
        """Replace the function that finds the current context's scope.

        ``variable``: the context variable whose ``get`` ``current`` is, if it is
        (the compiled proxy reads it directly), else None.
        """
        if self.retired:
            return
        self._read_variable(None)  # until the new finder is in, the finder alone
        self._write(self._current, current)
        self._read_variable(variable)

    def set_scoped(self, scoped: bool) -> None:
        """Say whether proxies must look at the context before calling."""
        if not self.retired:
            self._write(self._scoped, scoped)

    def run_directly(self, directly: bool) -> None:
        """Let the code-swapped proxies run their slot without looking, or make them look.

        Swaps the code of each (see :mod:`coheriq._call.swapped`), so that a
        proxy runs as its candidate itself when its slot holds it; only when
        this changes. Call with the domain's lock held, and only while the flag
        is off, or before it goes on: a looking proxy reads the flag itself.
        """
        if self.retired:
            return
        swapping = list(self._swapped.values())
        if directly is self.runs_directly:
            if directly or not self._generic:
                return
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

    def retire(self, current: Callable[[], Any]) -> None:
        """From now on, look at the context on every call, through ``current`` alone.

        For a copy of a domain that a later copy replaced: the namespace, which
        the later copy's proxies keep, then holds nothing of this copy's but
        ``current``, which must hold the copy weakly and never return ``None``.
        So the copy is freed when nothing else holds it. Each slot forwards to
        what ``current`` finds, for a call that read the flag just before it
        was set. Later changes (connect, set_current, set_scoped) are ignored.
        """
        _follow_autoreload()
        for swapped in self._swapped.values():
            swapped.retire()
        self.runs_directly = False
        while _freed:  # the names of copies freed since the last retire() go now
            try:
                _freed.pop().drop()
            except IndexError:  # another thread took the last
                break
        self._read_variable(None)
        self._write(self._current, current)
        for key in self._slots():
            self._write(key, _Forward(current, key[len(self._slot_prefix) :]))
        self._write(self._scoped, True)
        self.retired = True

    def release(self) -> None:
        """The domain is dropped (see :func:`coheriq.testing.isolated`): let it be freed.

        Its code-swapped proxies run their candidates' own code from now on
        (see :meth:`coheriq._call.swapped.SwappedProxy.release`); its other
        proxies, which the collector sees through, are left as they are.
        """
        for swapped in self._swapped.values():
            swapped.release()
        self.retired = True

    def _write(self, key: str, value: Any) -> None:
        """Set the namespace's ``key``, and the copies of it other proxies read."""
        self.namespace[key] = value
        if key == self._scoped:
            self._swap_board.scoped = value
        elif key == self._current:
            self._swap_board.current = value
        else:
            swapped = self._swapped.get(key)
            if swapped is not None:
                swapped.cell.value = value
                if self.runs_directly:
                    swapped.run(value)
        if self._board is None:
            return
        if key == self._scoped:
            self._board.scoped = value
        elif key == self._current:
            self._board.current = value
        elif key in self._cells:
            self._cells[key].value = value

    def _read_variable(self, variable: Any) -> None:
        """Let the compiled proxies read ``variable`` instead of calling the finder."""
        if self._board is not None:
            self._board.variable = variable

    def _slot_value(self, slot: str, name: str) -> Any:
        """What candidate ``name``'s ``slot`` holds, given one if it has none yet."""
        value = self.namespace.get(slot)
        if value is None:
            value = self.namespace[slot] = self._unchosen(name) if self._unchosen else None
        return value

    def _slots(self) -> list[str]:
        return _names_in(self.namespace, self._slot_prefix)

    def _slot(self, name: str) -> str:
        return f"{self._slot_prefix}{name}"


def _names_in(namespace: dict[str, Any], prefix: str) -> list[str]:
    # list() first: a callback of the garbage collector may change the namespace
    # (a _Forget) while it is read.
    return [key for key in list(namespace) if key.startswith(prefix)]


class _Forget:
    """A freed copy's names: they leave the namespace at the next :meth:`Switchboard.retire`.

    Called as a weak reference's callback (see
    :meth:`coheriq._choice.blocks.Scopes.retire`). Not at once: the collector
    calls it before the finalizers (``__del__``) of the same garbage, which may
    still call the copy's proxies.
    """

    __slots__ = ("keys", "namespace", "slot_prefix")

    def __init__(self, namespace: dict[str, Any], scoped: str, current: str, slots: str) -> None:
        self.namespace = namespace
        self.keys = (scoped, current)
        self.slot_prefix = slots

    def __call__(self, _: object = None) -> None:
        _freed.append(self)

    def drop(self) -> None:
        """Take the copy's names out of the namespace."""
        for key in [*self.keys, *_names_in(self.namespace, self.slot_prefix)]:
            self.namespace.pop(key, None)


def _follow_autoreload() -> None:
    """Let IPython's autoreload update compiled proxies in place, as it updates functions.

    After an edit, autoreload swaps the code of each function of the module's old
    copy for the new one's, so names imported earlier (``from lib import f``) run
    the new code; a Python proxy's new code reads the new copy's names. It knows
    nothing of other callables, so a compiled proxy is taught here: it takes over
    what the new copy's proxy reads. Called when a copy of a domain is replaced,
    which autoreload's reload does before it updates the old objects.
    """
    autoreload = sys.modules.get("IPython.extensions.autoreload")
    rules = getattr(autoreload, "UPDATE_RULES", None)
    if _compiled is None or not isinstance(rules, list):
        return
    if not any(rule[1] is update_proxy for rule in rules):
        rules.insert(0, (_both_compiled_proxies, update_proxy))


def _both_compiled_proxies(old: object, new: object) -> bool:
    return type(old) is type(new) is _compiled.Proxy


def update_proxy(proxy: Any, fresh: Any) -> None:
    """Make the function ``proxy`` what the newly generated ``fresh`` is, in place.

    So every reference to the proxy, taken before its module ran again (or, for
    a compiled proxy, before IPython's autoreload reloaded it), runs the new
    code with the new signature, documentation and attributes.
    """
    if isinstance(proxy, FunctionType):
        proxy.__code__ = fresh.__code__
        proxy.__defaults__ = fresh.__defaults__
        proxy.__kwdefaults__ = fresh.__kwdefaults__
        if sys.version_info >= (3, 12):
            proxy.__type_params__ = fresh.__type_params__
    else:  # the compiled proxy
        proxy._coheriq_take_over(fresh)
    for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
        setattr(proxy, attr, getattr(fresh, attr))
    proxy.__dict__ = dict(fresh.__dict__)
    carry_annotations(proxy, fresh.__wrapped__)
