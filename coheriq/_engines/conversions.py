"""Data that crosses implementations: the conversions an engine declares (:class:`Conversion`).

An engine declares pairs of types, the library's and its own, with a function each way. Where a
call crosses from one implementation to another that does not read an engine's types (a decline,
a fallback along the MRO or the list, ``super()``), those arguments are converted to the
library's form; an engine's own implementation gets the library's types in its form, and with
``results="input"`` gives back results in the caller's. Types never choose an engine.
"""

from __future__ import annotations

import _thread
from _weakref import ref as _weak
from sys import _getframe
from time import perf_counter as _now

from .._names import REFERENCE, environment_flag
from .._stdlib import INFO, TYPE_CHECKING, after_fork_in_child, log
from ..exceptions import CoheriqConversionError, CoheriqTypeError, ended

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

TO_ENGINE, TO_LIBRARY = "to_engine", "to_library"
RESULTS = ("engine", "input")

# Called with (state, candidate, conversion, direction, seconds) for each conversion made, a
# cache hit not (a profile's).
watchers: list[Callable[[Any, str, Conversion, str, float], None]] = []
_lock = _thread.RLock()


class Conversion:
    """How an engine's objects of ``engine_type`` and the library's of ``library_type``
    become each other: ``to_engine(obj)`` and ``to_library(obj)``.

    Types and functions may be given as ``"module:qualname"`` strings, imported when a
    call first needs them. A round trip must give back an object equal to the one given.
    ``cache=True``: an object's conversion is kept while the object lives and reused
    (its result must not refer back to it); ``pickle_as_library=True``: the engine's
    objects pickle as the library's (they load where the engine is not installed;
    ``copy.copy`` and ``copy.deepcopy`` still give the engine's objects).
    """

    __slots__ = ("_given", "_resolved", "cache", "pickle_as_library")

    def __init__(
        self,
        library_type: type | str,
        engine_type: type | str,
        *,
        to_engine: Callable[[Any], Any] | str,
        to_library: Callable[[Any], Any] | str,
        cache: bool = False,
        pickle_as_library: bool = False,
    ) -> None:
        given: tuple[Any, ...] = (library_type, engine_type, to_engine, to_library)
        for what, value in zip(("library_type", "engine_type"), given[:2], strict=True):
            if not isinstance(value, (type, str)):
                raise CoheriqTypeError(
                    f"coheriq.Conversion takes {what} as a class or a 'module:qualname' "
                    f"string, not {type(value).__name__} {value!r}."
                )
        for what, value in zip((TO_ENGINE, TO_LIBRARY), given[2:], strict=True):
            if not (callable(value) or isinstance(value, str)):
                raise CoheriqTypeError(
                    f"coheriq.Conversion takes {what} as a function of one object or a "
                    f"'module:qualname' string, not {type(value).__name__} {value!r}."
                )
        self._given = given
        self._resolved: tuple[Any, ...] | None = None
        self.cache, self.pickle_as_library = bool(cache), bool(pickle_as_library)
        if self.pickle_as_library and isinstance(engine_type, type):
            self._pickle_as_library(engine_type)

    def resolved(self) -> tuple[Any, ...]:
        """``(library_type, engine_type, to_engine, to_library)``, the strings imported."""
        found = self._resolved
        if found is None:
            found = self._resolved = tuple(map(_imported, self._given))
            if self.pickle_as_library:
                self._pickle_as_library(found[1])
        return found

    def _pickle_as_library(self, engine_type: type) -> None:
        import copyreg  # only an engine whose objects pickle as the library's needs it

        copyreg.pickle(engine_type, self._reduce)

    @property
    def library_type(self) -> type:
        return self.resolved()[0]  # type: ignore[no-any-return]

    @property
    def engine_type(self) -> type:
        return self.resolved()[1]  # type: ignore[no-any-return]

    def _reduce(self, obj: Any) -> Any:
        """Pickle ``obj``, an engine's object, as its library form does: loaded, it is the
        library's object, wherever the engine (or coheriq) is not installed. ``copy``, which
        reads the same table, gets the engine's own reduction: a copy stays the engine's."""
        if _getframe(1).f_globals.get("__name__") == "copy":
            return object.__reduce_ex__(obj, 4)
        reduced = self.resolved()[3](obj).__reduce_ex__(4)
        made_by = getattr(reduced[0], "__name__", "")
        if made_by not in ("__newobj__", "__newobj_ex__"):
            return reduced
        # The pickler takes __newobj__ only for an object of the class it makes: the same
        # call, by a name of the standard library's (it loads without coheriq).
        from functools import partial

        if made_by == "__newobj__":
            cls, *args = reduced[1]
            return (partial(cls.__new__, cls, *args), (), *reduced[2:])
        cls, args, kwargs = reduced[1]
        return (partial(cls.__new__, cls, *args, **kwargs), (), *reduced[2:])

    def names(self) -> tuple[str, str]:
        """The two types as ``"module:qualname"``, the library's first (none imported)."""
        given = self._given[:2]
        return tuple(g if isinstance(g, str) else f"{g.__module__}:{g.__qualname__}" for g in given)  # type: ignore[return-value]

    def label(self, direction: str) -> str:
        """``'ndarray -> Array'``: the pair in ``direction``'s order, by the types' names."""
        names = [g if isinstance(g, str) else g.__qualname__ for g in self._given[:2]]
        names = [n.rpartition(":")[2].rpartition(".")[2] for n in names]
        return " -> ".join(names if direction == TO_ENGINE else names[::-1])

    def __repr__(self) -> str:
        return f"Conversion({self.label(TO_ENGINE).replace(' -> ', ' <-> ')})"


def _imported(value: Any) -> Any:
    """``value``, or the object a ``"module:qualname"`` string names (imported)."""
    if not isinstance(value, str):
        return value
    module, _, qualname = value.partition(":")
    try:
        found = __import__(module, fromlist=["_"])
        for part in qualname.split(".") if qualname else ():
            found = getattr(found, part)
    except (ImportError, AttributeError) as error:
        raise CoheriqConversionError(
            f"A conversion names {value!r}, which cannot be imported: {error}. Give "
            "'module:qualname' of an importable class or function."
        ) from error
    return found


class ByType:
    """What was found for each class, held without keeping the class alive (a class made
    at run time is freed as it would be without coheriq)."""

    __slots__ = ("_found",)

    def __init__(self) -> None:
        self._found: dict[int, tuple[Any, Any]] = {}

    def get(self, kind: type, default: Any = None) -> Any:
        entry = self._found.get(id(kind))
        return entry[1] if entry is not None and entry[0]() is kind else default

    def set(self, kind: type, value: Any) -> None:
        key, found = id(kind), self._found

        def forget(_: object) -> None:  # as the class is freed, before its id is reused
            found.pop(key, None)

        found[key] = (_weak(kind, forget), value)


class Table:
    """The conversions an engine class declares and inherits, its result policy, and the
    candidates whose implementations in it take the library's types as they are."""

    __slots__ = ("_by_type", "accepts", "conversions", "results")

    def __init__(
        self, conversions: tuple[Conversion, ...], results: str, accepts: frozenset[str] | bool
    ) -> None:
        self.conversions, self.results, self.accepts = conversions, results, accepts
        self._by_type = {TO_ENGINE: ByType(), TO_LIBRARY: ByType()}

    def problems(self, engine: str) -> list[str]:
        """What is wrong with these conversions of ``engine``, as sentences: a name that
        cannot be imported, or a library type that two of them convert."""
        found: list[str] = []
        seen: dict[type, type] = {}
        for conversion in self.conversions:
            try:
                library = conversion.resolved()[0]
            except CoheriqConversionError as error:
                found.append(f"Engine {engine!r}: {error}")
                continue
            if library in seen and seen[library] != conversion.engine_type:
                found.append(
                    f"Engine {engine!r} converts {library.__qualname__} in two ways "
                    f"({seen[library].__qualname__} and {conversion.engine_type.__qualname__}): "
                    "the first one declared is used; declare one conversion per library type."
                )
            seen.setdefault(library, conversion.engine_type)
        return found

    def takes_library_types(self, candidate: str) -> bool:
        return self.accepts is True or (self.accepts is not False and candidate in self.accepts)

    def find(self, kind: type, direction: str) -> Conversion | None:
        """The conversion of an object of type ``kind`` in ``direction``, or None."""
        memo = self._by_type[direction]
        found = memo.get(kind, False)
        if found is False:
            source = 0 if direction == TO_ENGINE else 1
            found = next(
                (c for c in self.conversions if issubclass(kind, c.resolved()[source])), None
            )
            memo.set(kind, found)
        return found  # type: ignore[no-any-return]


def declare(
    cls_name: str, bases: tuple[type, ...], conversions: Any, results: Any, accepts: Any
) -> Table | None:
    """The :class:`Table` of a new engine class, from its class keywords and its bases';
    None where nothing along its bases declares a conversion."""
    inherited = [t for t in (table_of(b) for b in bases) if t is not None]
    if conversions is None and results is None and accepts is None and len(inherited) < 2:
        return inherited[0] if inherited else None
    own = _checked(cls_name, conversions, results, accepts)
    merged = [*own[0]]
    for table in inherited:
        merged += [c for c in table.conversions if c not in merged]
    policy = own[1] or next((t.results for t in inherited), "engine")
    taken: frozenset[str] | bool = own[2] if accepts is not None else False
    if accepts is None and inherited:
        taken = inherited[0].accepts
    return Table(tuple(merged), policy, taken)


def _checked(
    cls_name: str, conversions: Any, results: Any, accepts: Any
) -> tuple[list[Conversion], str | None, frozenset[str] | bool]:
    listed = list(conversions) if isinstance(conversions, (list, tuple)) else conversions
    if listed is not None and (
        not isinstance(listed, list) or not all(isinstance(c, Conversion) for c in listed)
    ):
        raise CoheriqTypeError(
            f"Engine class {cls_name!r} takes conversions= as a list of coheriq.Conversion, "
            f"not {conversions!r}."
        )
    if results is not None and results not in RESULTS:
        raise CoheriqTypeError(
            f"Engine class {cls_name!r} takes results='engine' (results stay the engine's "
            f"types) or results='input' (in the form the caller passed), not {results!r}."
        )
    if accepts is not None and not isinstance(accepts, bool):
        if isinstance(accepts, str) or not all(isinstance(n, str) for n in accepts):
            raise CoheriqTypeError(
                f"Engine class {cls_name!r} takes accepts_library_types= as True, False or "
                f"a list of candidate names, not {accepts!r}."
            )
        accepts = frozenset(accepts)
    return listed or [], results, accepts if accepts is not None else False


def table_of(cls: Any) -> Table | None:
    """The :class:`Table` of engine class ``cls`` (None: it converts nothing)."""
    return getattr(cls, "__coheriq_conversions__", None)


# -- the cache: id(object) -> {(conversion, direction): converted}, held while it lives ------

_cache: dict[int, dict[tuple[Conversion, str], Any]] = {}
# Why each failed: a message, not the error, whose traceback would hold the object.
_failed: dict[int, dict[tuple[Conversion, str], str]] = {}
_derived: dict[int, int] = {}  # id(converted) -> id(the object it was converted from)
_watched: dict[int, Any] = {}  # id(object) -> the weak reference that forgets it


def _watch(obj: Any) -> bool:
    """Forget ``obj``'s entries when it is freed; False where it cannot be referred weakly."""
    key = id(obj)
    if key in _watched:
        return True

    def forget(_: object) -> None:  # as obj is freed, before its id is reused
        _forget(key)

    try:
        _watched[key] = _weak(obj, forget)
    except TypeError:
        return False
    return True


def _forget(key: int) -> None:
    with _lock:
        _watched.pop(key, None)
        _failed.pop(key, None)
        for converted in (_cache.pop(key, None) or {}).values():
            _derived.pop(id(converted), None)


def mutated(*objects: Any) -> None:
    """Say that ``objects`` changed in place: their cached conversions, and those of
    the objects they were converted from, are dropped (the next crossing converts again)."""
    for obj in objects:
        key = id(obj)
        with _lock:
            source = _derived.get(key)
        _forget(key)
        if source is not None:
            _forget(source)


def convert(
    obj: Any, conversion: Conversion, direction: str, state: Any = None, candidate: str = ""
) -> Any:
    """``obj`` converted in ``direction`` by ``conversion``: from the cache where the
    conversion allows one, else made, counted and (the first of each) logged."""
    key, pair = id(obj), (conversion, direction)
    cached = conversion.cache
    if cached:
        entries = _cache.get(key)
        if entries is not None and pair in entries:
            return entries[pair]
        failed = _failed.get(key, {}).get(pair)
        if failed is not None:
            raise CoheriqConversionError(f"{failed} (It failed before: not tried again.)")
    function = conversion.resolved()[2 if direction == TO_ENGINE else 3]
    start = _now()
    try:
        converted = function(obj)
    except Exception as error:
        failed = (
            f"Converting {type(obj).__name__} ({conversion.label(direction)}) by {direction} "
            f"for {_where(state, candidate)} failed: {ended(str(error) or type(error).__name__)} "
            "Fix the engine's conversion, or pass the call an object it converts."
        )
        if cached:
            with _lock:
                _failed.setdefault(key, {})[pair] = failed
                _keep_while_alive(obj)
        raise CoheriqConversionError(failed) from error
    seconds = _now() - start
    if cached:
        with _lock:
            entries = _cache.setdefault(key, {})
            if pair in entries:  # another thread's came first: every caller gets one
                return entries[pair]
            entries[pair] = converted
            _derived[id(converted)] = key
            _keep_while_alive(obj)
    _counted(state, candidate, conversion, direction, seconds)
    return converted


def _keep_while_alive(obj: Any) -> None:
    """Watch ``obj``, whose entries were just stored (the lock held), to forget them as it
    is freed: stored first, so that a mutated() meanwhile forgets them too; forgotten at
    once where it cannot be referred to weakly (converted again each time)."""
    if not _watch(obj):
        _forget(id(obj))


def _where(state: Any, candidate: str) -> str:
    if state is None:
        return "an explicit request"
    return f"candidate {candidate!r} of domain {state.name!r}"


_logged: set[tuple[str, str, str]] = set()


def _counted(state: Any, candidate: str, conversion: Conversion, direction: str, s: float) -> None:
    if state is not None:
        label = conversion.label(direction)
        if (state.name, candidate, label) not in _logged:
            _logged.add((state.name, candidate, label))
            log(INFO, "domain %r: %r converts %s by %s", state.name, candidate, label, direction)
    for watcher in list(watchers):
        watcher(state, candidate, conversion, direction, s)


# -- a call that crosses: what to convert on the way in, and on the way out ---------------


def crossing(state: Any, name: str, chosen: Any, owner: Any, call: Callable[..., Any]) -> Any:
    """``call``, an implementation of candidate ``name`` supplied by engine class ``owner``
    (None: the reference) in a call on engine class ``chosen``, converting what crosses:
    ``chosen``'s engine types that ``owner`` does not read go to the library's form (a
    fallback: an error in strict mode); the library's types to ``owner``'s form, unless its
    implementation takes them; the result back per ``chosen``'s policy. ``call`` itself where
    nothing can cross."""
    table, own = table_of(chosen), table_of(owner)
    if table is None or getattr(call, "__coheriq_crossing__", False):
        return call
    out = [c for c in table.conversions if own is None or c not in own.conversions]
    inward = own if own is not None and not own.takes_library_types(name) else None
    if not out and inward is None:
        return call
    back = table.results == "input" and inward is not None
    strict = _strict_variables(state)
    info = state.candidates.get(name)  # a candidate with side effects may change its arguments
    mutates = info is not None and name in info.domain.comparisons.side_effects
    steps = ByType()  # type of an argument -> what to do with it (None: nothing)

    def step_for(kind: type, items: bool = True, out_too: bool = True) -> Any:
        """A function of an argument of type ``kind``: ``(converted, whether it came in)``."""
        for conversion in out if out_too else ():
            if issubclass(kind, conversion.engine_type):

                def down(value: Any, conversion: Conversion = conversion) -> tuple[Any, bool]:
                    _refuse(state, name, chosen, owner, conversion, strict)
                    library = convert(value, conversion, TO_LIBRARY, state, name)
                    into = step_for(type(library), items=False, out_too=False)
                    return (into(library)[0] if into else library), False  # not the caller's

                return down
        if inward is not None and inward.find(kind, TO_LIBRARY) is None:  # not its own yet
            found = inward.find(kind, TO_ENGINE)
            if found is not None:
                return lambda value: (convert(value, found, TO_ENGINE, state, name), True)
        if items and (kind is tuple or kind is list):
            return each_item
        return None

    def each_item(value: Any) -> tuple[Any, bool]:  # a tuple's or list's, one level down
        converted, came_in = list(value), False
        for i, item in enumerate(converted):
            step = step_for(type(item), items=False)
            if step is not None:
                converted[i], came = step(item)
                came_in |= came
        return type(value)(converted), came_in

    def converting(*args: Any, **kwargs: Any) -> Any:
        came_in = False
        given = args, kwargs
        for i, value in enumerate(args):
            step = steps.get(type(value), False)
            if step is False:
                step = step_for(type(value))
                steps.set(type(value), step)
            if step is not None:
                if args is given[0]:
                    args = list(args)  # type: ignore[assignment]
                args[i], came = step(value)  # type: ignore[index]
                came_in |= came
        if kwargs:
            kwargs = dict(kwargs)
            for key, value in kwargs.items():
                step = step_for(type(value))
                if step is not None:
                    kwargs[key], came = step(value)
                    came_in |= came
        try:
            result = call(*args, **kwargs)
        finally:
            if mutates:
                _forget_received(*given[0], *given[1].values(), *args, *kwargs.values())
        if back and came_in:
            result = library_form(result, inward, state, name)  # type: ignore[arg-type]
        return result

    converting.__coheriq_crossing__ = True  # type: ignore[attr-defined]
    converting.__wrapped__ = call  # type: ignore[attr-defined]
    for attribute in ("__name__", "__qualname__", "__doc__", "__module__", "__self__"):
        if hasattr(call, attribute):
            setattr(converting, attribute, getattr(call, attribute))
    return converting


def library_form(value: Any, table: Table, state: Any, name: str, depth: int = 1) -> Any:
    """``value`` with what is of ``table``'s engine types (it, or the items of a tuple,
    list or dict ``depth`` levels down) in the library's form."""
    conversion = table.find(type(value), TO_LIBRARY)
    if conversion is not None:
        return convert(value, conversion, TO_LIBRARY, state, name)
    kind = type(value)
    if depth and (kind is tuple or kind is list):
        return kind(library_form(item, table, state, name, depth - 1) for item in value)
    if depth and kind is dict:
        return {k: library_form(v, table, state, name, depth - 1) for k, v in value.items()}
    return value


def _forget_received(*objects: Any) -> None:
    """After a call of a candidate with side effects: what it received may have changed."""
    for obj in objects:
        mutated(obj)
        if type(obj) is tuple or type(obj) is list:
            mutated(*obj)


def _strict_variables(state: Any) -> list[str]:
    variables = ["COHERIQ_FAIL_ON_CONVERT"]
    if getattr(state, "env_prefix", None):
        variables.append(f"{state.env_prefix}_FAIL_ON_CONVERT")
    return variables


_CONVERSIONS_ARE_ERRORS = (
    "to make a conversion where a call falls back an error",
    "to let a call that falls back convert its arguments",
)


def _refuse(
    state: Any, name: str, chosen: Any, owner: Any, conversion: Conversion, variables: list[str]
) -> None:
    """Raise CoheriqConversionError where a variable of ``variables`` says conversions at a
    fallback are errors (read at each: a test may set it while the engine runs)."""
    strict = [v for v in variables if environment_flag(v, _CONVERSIONS_ARE_ERRORS)]
    if strict:
        engine = chosen.__coheriq_name__ or chosen.__qualname__
        named = getattr(owner, "__coheriq_name__", REFERENCE)
        to = "the reference" if named == REFERENCE else f"{owner.__qualname__}'s implementation"
        raise CoheriqConversionError(
            f"A call of {name!r} on engine {engine!r} of domain {state.name!r} falls back to "
            f"{to}, which would convert an argument ({conversion.label(TO_LIBRARY)}). "
            f"Conversions at a fallback are errors here ({strict[0]}=1); unset it to allow "
            "them, or keep the call on the engine."
        )


class ReferenceReached:
    """A function candidate on the reference class of a domain whose engines convert: read
    from an engine's instance (``super().name``, or ``self.name`` where the engine does not
    override it), the reference, converting what crosses to it; from the class, the function."""

    __slots__ = ("_for", "function", "name", "state")

    def __init__(self, state: Any, name: str, function: Any) -> None:
        self.state, self.name, self.function = state, name, function
        self._for: dict[type, Any] = {}

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        if instance is None:
            return self.function
        cls = type(instance)
        found = self._for.get(cls)
        if found is None:
            found = crossing(self.state, self.name, cls, None, self.function)
            self._for[cls] = found
        return found


def would_convert(name: str, chosen: Any, owner: Any, values: Iterable[Any]) -> list[str]:
    """What a call of candidate ``name`` on engine class ``chosen`` answered by ``owner``'s
    implementation (None: the reference) would convert of ``values``, its arguments, as
    sentences (``"ndarray -> Array by to_engine"``); converts nothing."""
    table, own = table_of(chosen), table_of(owner)
    if table is None:
        return []
    inward = own if own is not None and not own.takes_library_types(name) else None
    found: list[str] = []
    for value in values:
        items = list(value) if type(value) in (tuple, list) else [value]
        for item in items:
            outward = table.find(type(item), TO_LIBRARY)
            if outward is not None and (own is None or outward not in own.conversions):
                found.append(f"{outward.label(TO_LIBRARY)} by to_library (a fallback)")
            elif inward is not None and inward.find(type(item), TO_LIBRARY) is None:
                conversion = inward.find(type(item), TO_ENGINE)
                if conversion is not None:
                    found.append(f"{conversion.label(TO_ENGINE)} by to_engine")
    if found and inward is not None and table.results == "input":
        found.append("results of the engine's types back by to_library (results='input')")
    return found


@after_fork_in_child
def _reinit_lock_in_child() -> None:
    global _lock
    _lock = _thread.RLock()
