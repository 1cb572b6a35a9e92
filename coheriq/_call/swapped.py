"""Code-swapped proxies: a function with the candidate's globals, defaults and closure.

Its code is the candidate's own where a call may run it directly; otherwise a
trampoline (the candidate's parameters and free variables) that calls an engine's
member or looks at the context (asking the compiled proxy, where there is one, what
to call), or, where ``set_dispatcher`` runs, the compiled proxy that looks.
Generator and coroutine functions are never swapped.
"""

from __future__ import annotations

import sys
from _weakref import ref as weak

from .._stdlib import CO_ASYNC_GENERATOR, CO_COROUTINE, CO_GENERATOR, TYPE_CHECKING, FunctionType
from .compiled import set_code, set_dispatcher, share
from .generated import RESERVED_PREFIX, parameter_lists

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


if TYPE_CHECKING:  # _make's arguments after its kind
    _Parts = tuple[str, Any, tuple[str, str], tuple[str, ...], "Cell", str, Any]

# A generator (or coroutine) made by an old-style @types.coroutine function.
_CO_ITERABLE_COROUTINE = 0x100


# Whether the GIL is off (once on, it stays on): see SwappedProxy._install.
_is_gil_enabled = getattr(sys, "_is_gil_enabled", None)  # 3.13+
_FREE_THREADED = _is_gil_enabled is not None and not _is_gil_enabled()

# Placeholders in the generated source, replaced by the objects they stand for.
_BOARD, _CELL, _TARGET = "\0coheriq board", "\0coheriq cell", "\0coheriq target"
_FINDER = "\0coheriq finder"  # a compiled proxy, asked what a call here runs
_NAME, _GUARD = "\0coheriq name", "\0coheriq guard"
_DEFAULTS, _ID, _MAP = "\0coheriq defaults", "\0coheriq id", "\0coheriq map"


def _not_by_value(obj: object) -> Any:
    """Refuse to pickle a trampoline's constant (a function pickled by value, with its code)."""
    raise TypeError(
        "A marked function's trampoline cannot be pickled: a marked function pickled "
        "by value (cloudpickle does so for a function defined in __main__) carries its "
        "code, which is the library's own only while its domain runs the reference "
        "outside blocks, profiles and verifications. Pickle it there, or define it in "
        "an importable module, which pickles it by reference."
    )


class _Guard:
    """Held by a trampoline before its target: refuses to be pickled."""

    __slots__ = ()
    __reduce__ = _not_by_value


_guard = _Guard()
if share is not None:  # read by every engine trampoline's call, on every thread
    share(_guard)


def _put(const: Any, objects: dict[str, Any]) -> Any:
    """A template's constant with its placeholders (in a tuple too) replaced by ``objects``."""
    if type(const) is str:
        return objects.get(const, const)
    if type(const) is tuple:
        made = tuple(objects.get(c, c) if type(c) is str else c for c in const)
        if share is not None:  # as the code that holds it, read by every thread's calls
            share(made)
        return made
    return const


class Board:
    """What the looking trampolines of one copy of a domain read: the Switchboard's flag
    (``scoped``), finder (``current``) and what it returns outside blocks (``missing``)."""

    __slots__ = ("current", "missing", "scoped")

    def __init__(self, current: Callable[[Any], Any]) -> None:
        self.scoped = True
        self.current = current
        self.missing: Any = None

    __reduce__ = _not_by_value


class Cell:
    """A candidate's slot as its trampolines read it (the Switchboard writes ``value``)."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value: Any = None

    __reduce__ = _not_by_value


class Defaults:
    """The candidate's defaults, checked by a trampoline that passes a call on as it is:
    right while they are the function's; else :meth:`exact` gives the function that
    binds the call with the function's. Holds the function weakly."""

    __slots__ = ("__defaults__", "__kwdefaults__", "_code", "_parts", "function", "ids", "none")

    def __init__(self, function: Any, reference: Any, parts: _Parts | None) -> None:
        self.function = weak(function)
        # Named as a function's: where the function is being freed, its weak reference
        # is dead and this stands for it. A copy of the dict, which may change in place.
        self.__defaults__: tuple[Any, ...] | None = getattr(reference, "__defaults__", None)
        self.__kwdefaults__ = _kwdefaults(reference) or None
        # What the trampoline compares: the ids of the defaults, then of the keyword-only
        # ones' names and values (held here, so the ids stay theirs); exact() decides.
        self.none: dict[str, Any] = {}
        kw = self.__kwdefaults__ or self.none
        self.ids = [id(self.__defaults__), *map(id, kw), *map(id, kw.values())]
        self._parts = parts  # _make's arguments for the exact trampoline, made when needed
        self._code: Any = None

    def exact(self) -> Any:
        """A function to send the call through, with the function's defaults, or None."""
        function = self.function()
        if function is None or self._parts is None or self.unchanged(function):
            return None
        code = self._code
        if code is None:
            code = self._code = _make(*self._parts, function.__name__)
        bound = _function(code, function)
        bound.__kwdefaults__ = function.__kwdefaults__
        return bound

    def unchanged(self, function: Any) -> bool:
        """Whether ``function``'s defaults are the candidate's: the same objects."""
        now, was = function.__defaults__ or (), self.__defaults__ or ()
        if now is not was and (len(now) != len(was) or any(map(_not_same, now, was))):
            return False
        kw_now, kw_was = function.__kwdefaults__ or {}, self.__kwdefaults__ or {}
        return len(kw_now) == len(kw_was) and all(
            kw_now.get(key, _NEVER) is value for key, value in kw_was.items()
        )

    __reduce__ = _not_by_value


def _not_same(a: object, b: object) -> bool:
    return a is not b


def not_swappable(fn: object) -> str | None:
    """Why ``fn`` cannot be stood for by a code-swapped proxy, or None when it can."""
    if type(fn) is not FunctionType:
        return "it is not a plain Python function"
    code = fn.__code__
    if code.co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR | _CO_ITERABLE_COROUTINE):
        return "it is a generator or coroutine function"
    if any(name.startswith(RESERVED_PREFIX) for name in code.co_freevars):
        return "its closure holds a name of coheriq's"
    return None


def in_place_copy(function: Any) -> Any:
    """A copy of plain ``function`` (all but its identity), to be the candidate for which
    ``function`` itself becomes the proxy (see :class:`SwappedProxy`)."""
    copy = _function(function.__code__, function)
    copy.__kwdefaults__ = _kwdefaults(function)
    for attribute in ("__qualname__", "__module__", "__doc__", "__type_params__"):
        if hasattr(function, attribute):  # type parameters: 3.12+
            setattr(copy, attribute, getattr(function, attribute))
    annotate = getattr(function, "__annotate__", None)  # 3.14+: evaluated when read, not here
    if annotate is not None:
        copy.__annotate__ = annotate  # type: ignore[attr-defined]
    else:
        copy.__annotations__ = dict(function.__annotations__)
    copy.__dict__.update(function.__dict__)
    return copy


class SwappedProxy:
    """One candidate's code-swapped proxy, ``function``, and the codes it switches between.

    ``function``, where given, is the library's function that ``reference`` copies
    (:func:`in_place_copy`); ``dispatcher``, the candidate's compiled proxy, where
    ``set_dispatcher`` runs. Raises ValueError where this Python cannot give a
    trampoline the function's free variables.
    """

    __slots__ = (
        "_defaults",
        "_direct",
        "_direct_for",
        "_dispatcher",
        "_dispatching",
        "_freevars",
        "_kept",
        "_looking",
        "_looks",
        "_parameters",
        "_reference",
        "_running",
        "cell",
        "function",
        "name",
    )

    def __init__(
        self, reference: Any, name: str, board: Board, dispatcher: Any = None, function: Any = None
    ) -> None:
        self.name = name
        self.cell = Cell()
        self._dispatcher = dispatcher
        # What a looking trampoline asks: on 3.11 (no set_dispatcher) the compiled proxy,
        # so that the call of what it finds is one the interpreter inlines.
        self._looks: tuple[str, Any] = (_FINDER, dispatcher) if dispatcher else (_BOARD, board)
        if dispatcher is not None:
            # What pickling the function by value meets first, in its code's constants.
            # (Pickle reads __reduce_ex__ from the instance's __dict__ before its type.)
            dispatcher.__reduce_ex__ = _not_by_value
        self._kept: dict[int, Any] = {}  # see _install
        # Engine trampolines by their target's id (with the target, which keeps the id).
        self._running: dict[int, tuple[Any, Any]] = {}
        self._looking: Any = None
        self._freevars = reference.__code__.co_freevars
        self.function = function or _function(reference.__code__, reference)
        self._read(reference)
        self.look(exact=False)  # one template for all: marking compiles nothing

    def look(self, exact: bool = True) -> None:
        """Make each call look at the context first: through the compiled dispatcher where
        ``set_dispatcher`` runs, else a trampoline with the candidate's parameters
        (``exact``) or any."""
        if self._dispatcher is not None and set_dispatcher is not None:
            self._dispatch()
            return
        if not exact:
            self._install(self._trampoline(*self._looks, generic=True))
            return
        if self._looking is None:
            self._looking = self._trampoline(*self._looks)
        self._install(self._looking)

    def run(self, target: Any) -> None:
        """Make each call run ``target`` without looking: as the function itself where it can."""
        if target is self._direct_for:
            self._install(self._direct)
            return
        running = self._running.get(id(target))
        if running is None or running[0] is not target:
            running = self._running[id(target)] = (target, self._trampoline(_TARGET, target))
        self._install(running[1])

    def release(self) -> None:
        """Run the candidate's own code for good and keep no trampoline (whose constants
        would keep the domain alive), for a dropped domain; not where it cannot run it."""
        if self._direct is None:
            return
        self._install(self._direct)
        self._drop_codes()

    def retire(self) -> None:
        """Look for good, keeping no other code: for a copy of the domain that a newer one
        replaced, whose board's finder holds the copy weakly."""
        self._install(self._trampoline(*self._looks, generic=True))
        self._drop_codes()

    def _drop_codes(self) -> None:
        self._running = {}
        self._looking = self._dispatching = None
        self._kept.clear()

    def take(self, reference: Any) -> None:
        """Stand for ``reference``, which the candidate's module marked again, and look
        (through a trampoline only, where its globals or closure are not the function's)."""
        self._read(reference)
        function = self.function
        function.__defaults__ = getattr(reference, "__defaults__", None)
        function.__kwdefaults__ = _kwdefaults(reference)
        self.look()

    def _read(self, reference: Any) -> None:
        """Take what the codes that stand for ``reference`` are made of."""
        function = self.function
        self._reference = reference
        own = (
            not_swappable(reference) is None
            and reference.__globals__ is function.__globals__
            and _same_cells(reference.__closure__, function.__closure__)
        )
        self._direct_for: Any = reference if own else _NEVER
        self._direct: Any = reference.__code__ if own else None
        if own:
            function.__kwdefaults__ = _kwdefaults(reference)
        exact = parameter_lists(reference)
        clash = exact is not None and any(
            name.strip("*").partition("=")[0] in self._freevars for name in exact[0].split(", ")
        )
        self._parameters = (_ANY, _ANY) if exact is None or clash else exact
        self._running = {}
        self._looking = self._dispatching = None
        parts = None
        if self._parameters[0] is not _ANY:
            kind, obj = self._looks
            parts = (kind, obj, self._parameters, self._freevars, self.cell, self.name, reference)
        self._defaults = Defaults(function, reference, parts)
        if self._dispatcher is not None:  # it passes calls on while these are the function's
            self._dispatcher._coheriq_expect_defaults(
                self._defaults.__defaults__, self._defaults.__kwdefaults__
            )

    def _trampoline(self, kind: str, obj: Any, generic: bool = False) -> Any:
        """A trampoline of ``kind`` (``_BOARD``, ``_FINDER``: it looks; ``_TARGET``: it
        calls ``obj``)."""
        parameters = (_ANY, _ANY) if generic else self._parameters
        return _make(
            kind,
            obj,
            parameters,
            self._freevars,
            self.cell,
            self.name,
            self._reference,
            self.function.__name__,
            self._defaults,
        )

    def _install(self, code: Any) -> None:
        if _FREE_THREADED:
            # Another thread may still run the old code. Each code once, by id (a code's
            # hash reads its constants, which may be an engine's unhashable member).
            self._kept.setdefault(id(code), code)
        if set_code is not None:
            set_code(self.function, code)
        else:
            self.function.__code__ = code

    def _dispatch(self) -> None:
        """Make calls go through the compiled dispatcher, from C."""
        assert set_dispatcher is not None and self._dispatcher is not None
        code = self._dispatching
        if code is None:
            code = self._trampoline(_TARGET, self._dispatcher, generic=True)
            code = self._dispatching = code.replace(co_consts=(*code.co_consts, self._dispatcher))
        if _FREE_THREADED:  # as in _install: a call may still read the code it replaces
            self._kept.setdefault(id(code), code)
        set_dispatcher(self.function, code)


def _make(
    kind: str,
    obj: Any,
    parameters: tuple[str, str],
    freevars: tuple[str, ...],
    cell: Cell,
    name: str,
    reference: Any,
    defname: str,
    defaults: Defaults | None = None,
) -> Any:
    """A trampoline of ``kind`` for candidate ``name``: its template, given the objects,
    name and place (file, first line) of the candidate."""
    params, args = parameters
    template = _template(kind, params, args, freevars)
    objects = {
        kind: obj,
        _CELL: cell,
        _NAME: name,
        _GUARD: _guard,
        _DEFAULTS: defaults,
        _ID: id,
        _MAP: map,
    }
    where = getattr(reference, "__code__", None)
    return template.replace(
        co_consts=tuple(_put(c, objects) for c in template.co_consts),
        co_name=defname,
        co_filename=getattr(where, "co_filename", f"<coheriq trampoline of {name}>"),
        co_firstlineno=getattr(where, "co_firstlineno", 1),
        co_qualname=getattr(reference, "__qualname__", name),
    )


# The parameters of a trampoline that takes any arguments.
_ANY = "*_coheriq_args, **_coheriq_kwargs"

# Compiled trampolines by kind, parameters, arguments and free variables; they hold
# placeholders only, since what a code object holds is never collected.
_templates: dict[tuple[str, str, str, tuple[str, ...]], Any] = {}


def _template(kind: str, params: str, args: str, freevars: tuple[str, ...]) -> Any:
    """The template of a trampoline; ValueError where this Python cannot give it
    ``freevars``."""
    key = (kind, params, args, freevars)
    code = _templates.get(key)
    if code is not None:
        return code
    # One that takes any arguments binds none: where the function's defaults are no
    # longer the candidate's it sends the call through one that does (see Defaults),
    # asking with builtins only, whose calls run no code of coheriq's.
    bind = (
        f"        _coheriq_exact = {_DEFAULTS!r}.function() or {_DEFAULTS!r}\n"
        f"        _coheriq_kw = _coheriq_exact.__kwdefaults__ or {_DEFAULTS!r}.none\n"
        f"        _coheriq_id, _coheriq_map = ({_ID!r}, {_MAP!r})\n"
        f"        if [_coheriq_id(_coheriq_exact.__defaults__),"
        f" *_coheriq_map(_coheriq_id, _coheriq_kw),"
        f" *_coheriq_map(_coheriq_id, _coheriq_kw.values())] != {_DEFAULTS!r}.ids:\n"
        f"            _coheriq_exact = {_DEFAULTS!r}.exact()\n"
        f"            if _coheriq_exact is not None:\n"
        f"                return _coheriq_exact({args})\n"
        if params == _ANY
        else ""
    )
    if kind == _TARGET:
        # The guard comes first, so that pickling the code by value is refused before
        # it copies the target (an engine's member, with its engine).
        body = (
            f"        _coheriq_guard, _coheriq_target = ({_GUARD!r}, {_TARGET!r})\n"
            + bind
            + f"        return _coheriq_target({args})\n"
        )
    elif kind == _FINDER:
        body = bind + (  # _coheriq_target: a local that tells coheriq's stack walks this frame
            f"        _coheriq_target = {_FINDER!r}._coheriq_implementation()\n"
            f"        return _coheriq_target({args})\n"
        )
    else:
        body = bind + (
            f"        if {_BOARD!r}.scoped:\n"
            f"            _coheriq_scope = {_BOARD!r}.current({_BOARD!r}.missing)\n"
            f"            if _coheriq_scope is not None:\n"
            f"                return _coheriq_scope.members[{_NAME!r}]({args})\n"
            f"        return {_CELL!r}.value({args})\n"
        )
    # The free variables, named under a test the compiler removes, are never read.
    source = (
        "def _coheriq_trampoline():\n"
        + (f"    {' = '.join(freevars)} = None\n" if freevars else "")
        + f"    def _coheriq_code({params}):\n"
        + (f"        if 0:\n            ({', '.join(freevars)},)\n" if freevars else "")
        + body
        + "    return _coheriq_code\n"
    )
    factory = compile(source, "<coheriq trampoline>", "exec").co_consts[0]
    code = next(c for c in factory.co_consts if getattr(c, "co_name", None) == "_coheriq_code")
    if code.co_freevars != freevars:
        raise ValueError(
            f"Python {sys.version.split()[0]} does not give a trampoline the free "
            f"variables {freevars}."
        )
    code = _templates[key] = on_one_line(code, 1, "_coheriq_code")
    return code


def on_one_line(code: Any, line: int, qualname: str) -> Any:
    """Return ``code`` with every instruction on ``line`` of its file, named ``qualname``."""
    # Each entry: "no columns, same line" (code 13, line delta 0) for at most 8 code
    # units (CPython's Objects/locations.md).
    table = bytearray()
    units = len(code.co_code) // 2
    while units:
        span = min(units, 8)
        table += bytes((0x80 | 13 << 3 | (span - 1), 0))
        units -= span
    return code.replace(co_firstlineno=line, co_qualname=qualname, co_linetable=bytes(table))


# What no slot ever holds: a proxy whose function cannot run its reference's code.
_NEVER = object()


def _same_cells(a: tuple[Any, ...] | None, b: tuple[Any, ...] | None) -> bool:
    a, b = a or (), b or ()
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def _function(code: Any, like: Any) -> FunctionType:
    """A new function of ``code`` with ``like``'s globals, name, defaults and closure."""
    return FunctionType(code, like.__globals__, like.__name__, like.__defaults__, like.__closure__)


def _kwdefaults(fn: object) -> dict[str, Any] | None:
    """A copy of ``fn``'s keyword-only defaults."""
    kwdefaults = getattr(fn, "__kwdefaults__", None)
    return dict(kwdefaults) if kwdefaults is not None else None
