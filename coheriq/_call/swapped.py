"""The code-swapped proxy: a marked function that *is* the library's function on the reference.

A candidate that is a plain Python function is stood for by a new function made
from the candidate's own code, globals, defaults and closure. Only its code
changes, with what the domain's calls must do (see :class:`SwappedProxy`):

- **direct**: the domain is settled on an implementation that this function can
  run as it is (the candidate itself, on the reference), and it need not look at
  the context: its code is the candidate's code. A call is the unmarked call: no
  frame, no cost and nothing else of coheriq's (warnings, tracebacks, the
  recursion limit, profilers and coverage see the library's code).
- **settled elsewhere**: settled on an engine, not looking: its code is a
  trampoline, generated with the candidate's parameters, that calls the engine's
  member, held as a constant of the code object.
- **looking**: before the domain settles (a trampoline that takes any
  arguments, made from one template, so that marking compiles nothing), while a
  profile or verification is on, and while a block of the domain is open (after
  blocks opened more than a few times, for good: so that a program that opens
  blocks in a loop swaps nothing per block; see
  :class:`~coheriq._choice.blocks.Scopes`): a trampoline that reads the domain's
  flag and finder from a :class:`Board` held as a constant, as the generated
  proxy reads them from its globals::

      def normalize(xs, *, eps=None):   # defaults are the candidate's own
          if BOARD.scoped:
              scope = BOARD.current()
              if scope is not None:
                  return scope.members['normalize'](xs, eps=eps)
          return CELL.value(xs, eps=eps)

A call that a trampoline taking any arguments (or the compiled dispatcher)
passes on as it is leaves the implementation to fill in its own defaults, the
candidate's: right while the function's ``__defaults__`` and ``__kwdefaults__``
are the candidate's. A user may change them, as on any function; then such a
call goes through the looking trampoline with the candidate's parameters, made
into a function with the function's defaults, so that they fill the call, as
the unmarked function's would (see :class:`Defaults`).

A trampoline that calls a target holds a guard before it, which refuses to be
pickled: a copy of the function made by pickling its code (cloudpickle, for a
function of ``__main__``) is refused with a reason, never made with a private
copy of an engine.

The constants are what keep the trampolines free of the library's globals,
which the function must keep (``__globals__`` cannot change). Its closure
cannot change either: a trampoline declares the same free variables as the
candidate (a dead reference to each), since CPython takes a new code object
only with as many.

Where coheriq's compiled part runs (:mod:`coheriq._call.compiled`), a function
that must look dispatches from C instead of through the looking trampoline: its
code is a trampoline that calls the candidate's compiled proxy, and its
vectorcall calls that proxy directly (``set_dispatcher``), so that a call in a
block costs about what the compiled proxy's does and shows no frame of
coheriq's. On an engine it does so before CPython 3.11 only: from 3.11 on the
engine trampoline is the cheaper, since the interpreter inlines its call of the
engine's implementation. Not on CPython 3.11 at all, whose interpreter runs a
function's code whatever its vectorcall: there, and without the compiled part,
the trampolines above run.

A swap is one assignment to ``__code__``: a thread already running the old code
finishes it, and the next call runs the new. On a free-threaded CPython every
code a function ran stays referenced by its :class:`SwappedProxy`, since a call
may read the old code while another thread replaces it: each code once, as the
few a function switches between (its own, the looking trampoline, one per
engine it runs) are made once and swapped in again. From CPython 3.13 on,
the interpreter never again specializes the calls of a function whose code was
assigned; the compiled part's swap (``set_code``) gives the function its new
code's version, as a ``def`` of that code would, so that they are specialized
again. (Without the compiled part, a call there costs a little more than an
unmarked one: see the performance guide.)
Generator and coroutine functions keep the generated or compiled proxy: their
calls return what the implementation's call returns, and a swap would change
what ``inspect`` says the function is.
"""

from __future__ import annotations

import sys
from _weakref import ref as weak

from .._stdlib import (
    CO_ASYNC_GENERATOR,
    CO_COROUTINE,
    CO_GENERATOR,
    TYPE_CHECKING,
    FunctionType,
)
from .compiled import set_code, set_dispatcher
from .generated import parameter_lists

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = [
    "Board",
    "Cell",
    "Defaults",
    "SwappedProxy",
    "in_place_copy",
    "not_swappable",
    "on_one_line",
]

# A generator (or coroutine) made by an old-style @types.coroutine function.
_CO_ITERABLE_COROUTINE = 0x100


def _free_threaded() -> bool:
    """Whether this CPython runs without the GIL now (a free-threaded build, GIL off).

    A GIL that is on stays on (CPython turns it on, never off, at run time), so
    the answer at import holds for the process. Read without :mod:`sysconfig`,
    whose import would cost every program that imports coheriq.
    """
    is_gil_enabled = getattr(sys, "_is_gil_enabled", None)  # 3.13+
    return is_gil_enabled is not None and not is_gil_enabled()


# Where a call may read a function's old code while another thread assigns a new
# one, every code a proxy ran stays alive (see SwappedProxy._install).
_FREE_THREADED = _free_threaded()

# Placeholders in the generated source, replaced by the objects they stand for.
_BOARD, _CELL, _TARGET = "\0coheriq board", "\0coheriq cell", "\0coheriq target"
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
    """What a trampoline that calls a target holds before it: refuses to be pickled."""

    __slots__ = ()
    __reduce__ = _not_by_value


_guard = _Guard()


def _put(const: Any, objects: dict[str, Any]) -> Any:
    """A template's constant with the objects its placeholders stand for (in a tuple too)."""
    if type(const) is str:
        return objects.get(const, const)
    if type(const) is tuple:
        return tuple(objects.get(c, c) if type(c) is str else c for c in const)
    return const


class Board:
    """What every looking trampoline of one copy of a domain reads: the flag and the finder.

    Attributes:
        scoped: Whether calls must look at the context (the Switchboard's flag).
        current: Returns what a call in this context runs in (a scope), or None
            for the candidate's slot (the Switchboard's finder).
    """

    __slots__ = ("current", "scoped")

    def __init__(self, current: Callable[[], Any]) -> None:
        self.scoped = True
        self.current = current

    __reduce__ = _not_by_value


class Cell:
    """A candidate's slot as its looking trampoline reads it: ``value``, what a call runs
    when it need not look (the Switchboard writes it)."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value: Any = None

    __reduce__ = _not_by_value


if TYPE_CHECKING:
    # What a looking trampoline with the candidate's parameters is made of (see _make):
    # the board, the parameters, the free variables, the cell, the name, the candidate.
    _Parts = tuple[Board, tuple[str, str], tuple[str, ...], Cell, str, Any]


class Defaults:
    """Whether the function's defaults are still its candidate's: asked first by a
    trampoline that takes any arguments, which passes a call on as it is.

    An implementation fills in its own defaults (the candidate's, which an engine's
    override repeats), and the compiled dispatcher (``set_dispatcher``) passes calls on
    as they are too: right while the function's ``__defaults__`` and
    ``__kwdefaults__`` hold the candidate's. Once a user changed them, a call must be
    bound with them, as the unmarked function's would: calling returns a function
    made of the looking trampoline with the candidate's parameters and the function's
    defaults, through which the trampoline sends the call (:meth:`exact`; None where
    the defaults are unchanged, or that trampoline cannot be made).

    It holds the function weakly, and nothing that holds it (a code's constant is
    never collected).
    """

    __slots__ = ("__defaults__", "__kwdefaults__", "_code", "_parts", "function", "ids", "none")

    def __init__(self, function: Any, reference: Any, parts: _Parts | None) -> None:
        self.function = weak(function)
        # The candidate's, which its implementations fill in (a copy of the dict: the
        # reference's own may be changed in place, as the function's may). Named as a
        # function's: where the function is being freed (a finalizer of the garbage it
        # is part of calls it), its weak reference is dead, and this stands for it.
        # (A reference that is no function, which a function marked in place takes when
        # its module runs again, has none: see coheriq._call.proxy.mark_in_place.)
        self.__defaults__: tuple[Any, ...] | None = getattr(reference, "__defaults__", None)
        kwdefaults = getattr(reference, "__kwdefaults__", None)
        self.__kwdefaults__ = dict(kwdefaults) if kwdefaults else None
        # What the trampoline compares first: the ids of the defaults, the keyword-only
        # ones' names and values, in order (this holds them, so the ids stay theirs).
        # Different ids need not be different defaults: exact() then compares them.
        self.none: dict[str, Any] = {}
        kw = self.__kwdefaults__ or self.none
        self.ids = [id(self.__defaults__), *map(id, kw), *map(id, kw.values())]
        # What the looking trampoline with the candidate's parameters is made of
        # (see _make): made the first time a call needs it.
        self._parts = parts
        self._code: Any = None

    def exact(self) -> Any:
        """A function to send the call through, with the function's defaults, or None."""
        function = self.function()
        if function is None or self._parts is None or self.unchanged(function):
            return None
        code = self._code
        if code is None:
            code = self._code = _make(_BOARD, *self._parts, function.__name__)
        bound = FunctionType(
            code,
            function.__globals__,
            function.__name__,
            function.__defaults__,
            function.__closure__,
        )
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
    if any(name.startswith("_coheriq") for name in code.co_freevars):
        return "its closure holds a name of coheriq's"
    return None


def in_place_copy(function: Any) -> Any:
    """A copy of plain function ``function``, to be the candidate that ``function`` stands for.

    Everything but the identity is ``function``'s: its code, globals, defaults,
    closure cells, names, module, doc and attributes. Given as ``function`` to
    :class:`SwappedProxy` with the copy as its reference, the library's function
    object itself becomes the candidate's code-swapped proxy: what holds it (a
    library's wrapper that hands itself to a protocol, as NumPy's
    ``__array_function__`` dispatchers do) keeps it, and each call of it
    dispatches. On the reference outside blocks it runs its own code again.
    """
    copy = FunctionType(
        function.__code__,
        function.__globals__,
        function.__name__,
        function.__defaults__,
        function.__closure__,
    )
    kwdefaults = function.__kwdefaults__
    copy.__kwdefaults__ = dict(kwdefaults) if kwdefaults is not None else None
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
    """One candidate's code-swapped proxy (``function``) and the codes it switches between.

    ``function``, where given, is the library's function that ``reference``
    copies (see :func:`in_place_copy`): it is the proxy, swapped in place.

    ``cell`` is the candidate's slot, which the Switchboard writes. :meth:`look`
    and :meth:`run` swap the code; :meth:`take` makes the function stand for a
    redefined candidate; :meth:`release` lets a dropped domain be freed.

    What a code object holds is invisible to the garbage collector (code is not
    tracked), so what the installed code's constants hold stays alive, with
    whatever it reaches, as long as the code: the trampolines hold only the
    board, the cell and the target (or ``dispatcher``, the candidate's compiled
    proxy, through which calls then go from C), and :meth:`release` leaves the
    candidate's own code, which holds nothing of the domain's.

    Raises:
        ValueError: (from the constructor) this Python cannot give a trampoline
            the function's free variables.
    """

    __slots__ = (
        "_board",
        "_defaults",
        "_direct",
        "_direct_for",
        "_dispatcher",
        "_dispatching",
        "_freevars",
        "_kept",
        "_looking",
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
        self._board = board
        # The candidate's compiled proxy, given where the compiled part can send the
        # function's calls through it (set_dispatcher; see _dispatch); else None.
        self._dispatcher = dispatcher
        if dispatcher is not None:
            # Its code's constant: what pickling the function by value meets first.
            # (Pickle reads __reduce_ex__ from the instance's __dict__ before its type.)
            dispatcher.__reduce_ex__ = _not_by_value
        # Every code installed, once each, by id (see _install).
        self._kept: dict[int, Any] = {}
        # The engine trampolines made, by their target's id (with the target, which
        # keeps the id its own): switching back to an engine swaps in its code again.
        self._running: dict[int, tuple[Any, Any]] = {}
        self._looking: Any = None
        self._freevars = reference.__code__.co_freevars
        # In place: the library's own function, of which ``reference`` is a copy (see
        # in_place_copy), whose identity a wrapper of the library's keeps.
        self.function = function or FunctionType(
            reference.__code__,
            reference.__globals__,
            reference.__name__,
            reference.__defaults__,
            reference.__closure__,
        )
        self._read(reference)
        # Until the domain settles, the trampoline that takes any arguments: made
        # from one template for all, so that marking compiles nothing.
        self.look(exact=False)

    # -- what the function runs ---------------------------------------------------------

    def look(self, exact: bool = True) -> None:
        """Make each call look at the context first (a looking trampoline).

        ``exact``: the trampoline with the candidate's own parameters, compiled
        the first time it is asked for; else one that takes ``*args, **kwargs``.
        With a compiled dispatcher, calls dispatch through it instead.
        """
        if self._dispatcher is not None:
            self._dispatch()
            return
        if not exact:
            self._install(self._trampoline(_BOARD, self._board, generic=True))
            return
        if self._looking is None:
            self._looking = self._trampoline(_BOARD, self._board)
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
        """Let the domain be freed: run the candidate's own code, and keep no trampoline.

        For a domain that is dropped (:func:`coheriq.testing.isolated`): calls
        of the function then run the reference. A trampoline kept anywhere in
        the domain would keep the domain alive through its constants, so none is
        kept, and the function can swap no more. (A function that cannot run
        its candidate's code, one whose module marked another function in its
        place, keeps its trampoline, and the domain.)
        """
        if self._direct is None:
            return
        self._install(self._direct)
        self._running = {}
        self._looking = self._dispatching = None
        self._kept.clear()

    def retire(self) -> None:
        """Look for good, and keep no other trampoline: for a copy of the domain that a
        newer one replaced, whose board finds what to run through a finder that holds
        the copy weakly (what the installed code holds stays alive: see :meth:`release`)."""
        self._install(self._trampoline(_BOARD, self._board, generic=True))
        self._running = {}
        self._looking = self._dispatching = None
        self._kept.clear()

    def take(self, reference: Any) -> None:
        """Stand for ``reference`` from now on (a candidate whose module marked it again).

        The function keeps its globals and closure: where those are not the new
        reference's, a call reaches it through a trampoline, never directly.
        Leaves the function looking.
        """
        self._read(reference)
        function = self.function
        function.__defaults__ = getattr(reference, "__defaults__", None)
        kwdefaults = getattr(reference, "__kwdefaults__", None)
        function.__kwdefaults__ = dict(kwdefaults) if kwdefaults is not None else None
        self.look()

    # -- making the codes ---------------------------------------------------------------

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
            kwdefaults = reference.__kwdefaults__
            function.__kwdefaults__ = dict(kwdefaults) if kwdefaults is not None else None
        exact = parameter_lists(reference)
        clash = exact is not None and any(
            name.strip("*").partition("=")[0] in self._freevars for name in exact[0].split(", ")
        )
        self._parameters = (_ANY, _ANY) if exact is None or clash else exact
        self._running = {}
        self._looking = self._dispatching = None
        parts = None
        if self._parameters[0] is not _ANY:
            parts = (self._board, self._parameters, self._freevars, self.cell, self.name, reference)
        self._defaults = Defaults(function, reference, parts)
        if self._dispatcher is not None:  # it passes calls on while these are the function's
            self._dispatcher._coheriq_expect_defaults(
                self._defaults.__defaults__, self._defaults.__kwdefaults__
            )

    def _trampoline(self, kind: str, obj: Any, generic: bool = False) -> Any:
        """A trampoline of ``kind`` (``_BOARD``: it looks; ``_TARGET``: it calls ``obj``)."""
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
        if _FREE_THREADED:  # see the module doc
            # Each code once, whatever the number of swaps: the codes a function
            # switches between are made once and reused (by id: a code's hash and
            # equality read its constants, which may be an engine's unhashable member).
            self._kept.setdefault(id(code), code)
        if set_code is not None:
            set_code(self.function, code)
        else:
            self.function.__code__ = code

    def _dispatch(self) -> None:
        """Make calls go through the compiled dispatcher, from C (:mod:`coheriq._call.compiled`).

        The code installed is the trampoline that calls the dispatcher, which
        runs only where a call reaches the code past the function; it holds the
        dispatcher as its last constant, where the compiled part finds it.
        """
        assert set_dispatcher is not None and self._dispatcher is not None
        code = self._dispatching
        if code is None:
            code = self._trampoline(_TARGET, self._dispatcher, generic=True)
            code = self._dispatching = code.replace(co_consts=(*code.co_consts, self._dispatcher))
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
    """A trampoline of ``kind`` for candidate ``name``, from the template of its kind,
    parameters and free variables, with the candidate's objects, name and place (its
    file and first line). ``defaults``: what one that takes any arguments asks first.
    """
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
    changes: dict[str, Any] = {
        "co_consts": tuple(_put(c, objects) for c in template.co_consts),
        "co_name": defname,
        "co_filename": getattr(where, "co_filename", f"<coheriq trampoline of {name}>"),
        "co_firstlineno": getattr(where, "co_firstlineno", 1),
        "co_qualname": getattr(reference, "__qualname__", name),
    }
    return template.replace(**changes)


# The parameters of a trampoline that takes any arguments.
_ANY = "*_coheriq_args, **_coheriq_kwargs"

# Compiled trampolines without their objects, by kind, parameters, arguments and free
# variables: a candidate's trampoline is one of these with its own (code.replace). They
# hold placeholders only: what a code object holds is never collected.
_templates: dict[tuple[str, str, str, tuple[str, ...]], Any] = {}


def _template(kind: str, params: str, args: str, freevars: tuple[str, ...]) -> Any:
    """The template of a trampoline (see :meth:`SwappedProxy._trampoline`).

    Raises:
        ValueError: this Python does not give the trampoline those free variables.
    """
    key = (kind, params, args, freevars)
    code = _templates.get(key)
    if code is not None:
        return code
    # One that takes any arguments binds none: where the function's defaults may no
    # longer be its candidate's, it asks whether to send the call through one that does
    # (see Defaults). The question is asked with builtins only, whose calls run no
    # code of coheriq's: the ids of the function's defaults against the candidate's.
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
        # The guard comes first among the constants, before the target, so that
        # pickling the code (by value) meets the guard's refusal before it copies the
        # target (an engine's member, with its engine): one constant, unpacked.
        body = (
            f"        _coheriq_guard, _coheriq_target = ({_GUARD!r}, {_TARGET!r})\n"
            + bind
            + f"        return _coheriq_target({args})\n"
        )
    else:
        body = bind + (
            f"        if {_BOARD!r}.scoped:\n"
            f"            _coheriq_scope = {_BOARD!r}.current()\n"
            f"            if _coheriq_scope is not None:\n"
            f"                return _coheriq_scope.members[{_NAME!r}]({args})\n"
            f"        return {_CELL!r}.value({args})\n"
        )
    # The free variables are the factory's locals, each named once in the trampoline
    # under a test the compiler removes: the code declares them and never reads them.
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
    """Return ``code`` placed at ``line`` of its file, every instruction on that line.

    So a traceback through generated code shows the candidate's own first line. Each
    entry of the location table says "no columns, same line" (code 13, line delta 0)
    for at most 8 code units (CPython's ``Objects/locations.md``).
    """
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
    """Whether two closures are the same cells."""
    a, b = a or (), b or ()
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))
