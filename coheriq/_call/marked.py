"""Marked classes: a class candidate is the library's own class, rebuilt (as dataclasses'
``slots=True`` rebuilds one) with a metaclass of its own whose ``__call__``, classmethods and
staticmethods dispatch to the active engine's class, and whose ``isinstance`` is also true for
every engine's class. Everything else is the class's own; its subclasses are not dispatched.
"""

from __future__ import annotations

import _thread  # not threading: the same lock, one import fewer
import sys

from .. import _stdlib
from .._stdlib import TYPE_CHECKING, FunctionType, MemberDescriptorType
from ..exceptions import CoheriqTypeError
from .generated import Method, parameter_lists
from .proxy import bound_elsewhere

if TYPE_CHECKING:
    from collections.abc import Callable, Container, Iterable, Iterator
    from typing import Any

    from .proxy import CandidateInfo, Switchboard


_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class statement's class, not a C type

_MARKING = "__coheriq_marking__"  # in the namespace that rebuilds a class: let through
# What a rebuilt class has of its own, not the class statement's.
_MADE_ANEW = frozenset({"__dict__", "__weakref__", "__qualname__", "_abc_impl"})

_MISSING = object()


if TYPE_CHECKING:
    # For the type checker only: annotations in a metaclass's body would be what a marked
    # class without annotations of its own reports as ``__annotations__``.
    class _MarkedClassMetaAttributes:
        __coheriq_candidate__: CandidateInfo
        _coheriq_root: type  # the class's own metaclass
        _coheriq_implementations: Container[type]
        _coheriq_signature: Any  # what inspect.signature gave unmarked, or None
        _coheriq_for_subclasses: type
        _coheriq_dispatch: Callable[..., Any]
        _coheriq_construct: Callable[..., Any]
        _coheriq_member: Callable[[], Any]  # what a call of the class here runs

else:
    _MarkedClassMetaAttributes = object


class CandidateClassMeta(type, _MarkedClassMetaAttributes):
    """The base of the metaclass of each marked class ``C``, made for ``C`` alone from this
    and ``C``'s own metaclass; a class deriving from ``C`` gets its subclass for
    subclasses, which constructs and checks ``isinstance`` as the own metaclass does."""

    def __new__(
        mcls, cls_name: str, bases: tuple[type, ...], namespace: dict[str, Any], /, **kwargs: Any
    ) -> CandidateClassMeta:
        marking = namespace.pop(_MARKING, False)
        info = mcls.__dict__.get("__coheriq_candidate__")
        if info is not None and not marking:
            if any(isinstance(b, mcls) for b in bases):  # a class deriving from the marked one
                mcls = mcls._coheriq_for_subclasses
            else:  # the marked class made anew by someone else
                raise CoheriqTypeError(
                    f"Class {cls_name!r} is being made again, with the metaclass of candidate "
                    f"{info.name!r} of domain {info.domain.name!r}, after coheriq marked it: "
                    "a class decorator above @acceleration_candidate that builds a new class "
                    "(dataclass(slots=True), attrs' define) is the usual cause. Put "
                    "@acceleration_candidate above the other class decorators, so that it "
                    "marks the class they make."
                )
        return super().__new__(mcls, cls_name, bases, namespace, **kwargs)

    @property
    def __signature__(cls) -> Any:
        """What :func:`inspect.signature` shows for the class unmarked: the class's own
        ``__signature__``; else None where ``__call__`` leads :mod:`inspect` to the
        constructor (which it then reads as unmarked); else the constructor's parameters
        less the first; else what it gave for the unmarked class, or raised."""
        try:
            return own_attribute(cls, "__signature__")
        except AttributeError:
            pass
        meta: Any = type(cls)
        call = meta.__call__
        if call is meta._coheriq_construct:
            return None
        constructor = _constructor(cls)
        function = getattr(constructor, "function", None)
        if function is not None and getattr(call, "__wrapped__", None) is function:
            return None
        if meta._coheriq_root.__call__ is type.__call__ and parameter_lists(constructor):
            signature = _stdlib.signature(function)  # the compiled __call__
            return signature.replace(parameters=tuple(signature.parameters.values())[1:])
        found = meta._coheriq_signature
        if isinstance(found, Exception):
            raise type(found)(*found.args)
        return found

    def __instancecheck__(cls, obj: object) -> bool:
        return super().__instancecheck__(obj) or _implemented_by(cls, type(obj))

    def __subclasscheck__(cls, sub: type) -> bool:
        return super().__subclasscheck__(sub) or _implemented_by(cls, sub)


class SubclassesOf:
    """``coheriq.marked.subclasses_of.<name>``: the metaclass of the subclasses of the
    marked class whose module and qualified name ``<name>`` encodes, found (importing the
    module) as pickle finds a class, in any process."""

    @staticmethod
    def name_of(cls: type) -> str:
        """The attribute name that stands for the marked class ``cls``."""
        return "x" + f"{cls.__module__}:{cls.__qualname__}".encode().hex()

    def __getattr__(self, name: str) -> type:
        import importlib  # only when a pickle names such a metaclass

        try:
            module, qualname = bytes.fromhex(name[1:]).decode().split(":", 1)
        except ValueError:
            raise AttributeError(f"{name!r} names no marked class") from None
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
        meta = type(found).__dict__.get("_coheriq_for_subclasses")
        if meta is None:
            raise AttributeError(f"{module}.{qualname} is not a class marked by coheriq")
        return meta  # type: ignore[no-any-return]


subclasses_of = SubclassesOf()


def _implemented_by(cls: CandidateClassMeta, sub: object) -> bool:
    """Whether ``sub`` is, or derives from, an engine's implementation of ``cls``."""
    if not isinstance(sub, type):
        return False
    implementations = type(cls)._coheriq_implementations
    return any(klass in implementations for klass in sub.__mro__)


def mark_class(
    info: CandidateInfo, switchboard: Switchboard, implementations: Container[type]
) -> type:
    """Rebuild ``info.reference``, the class statement's class, as the marked class; set
    ``info.construct``. ``implementations``: every engine's class for it, kept up to date
    by the domain. Raises CoheriqTypeError where the class cannot be a candidate."""
    original: type = info.reference
    _refuse_unmarkable(info, original)
    own = type(original)
    marked = _rebuild(info, original, _derive_metaclass(own, info, switchboard, implementations))
    info.construct = own.__call__.__get__(marked)
    construct_directly(marked, False)  # until the domain says otherwise
    return marked


def _refuse_unmarkable(info: CandidateInfo, cls: type) -> None:
    def refuse(why: str) -> CoheriqTypeError:
        return CoheriqTypeError(
            f"Class {cls.__qualname__!r} cannot be candidate {info.name!r} of domain "
            f"{info.domain.name!r}: {why}"
        )

    enum = sys.modules.get("enum")
    if enum is not None and isinstance(cls, enum.EnumMeta):
        raise refuse(
            "it is an Enum, whose members are made once, by its class statement, so no "
            "engine could supply members of its own. Mark the functions that take or "
            "return its members instead."
        )
    if issubclass(cls, type):
        raise refuse("it is a metaclass. Mark the classes it makes, or functions.")
    if not cls.__flags__ & _HEAPTYPE:
        raise refuse(
            "it is implemented in C, and coheriq marks a class by rebuilding it from its "
            "class statement. Mark a Python class that wraps or derives from it."
        )
    if bound_elsewhere(cls, info.module):
        raise refuse(
            f"it is defined in module {cls.__module__!r}, which holds it, and module "
            f"{info.module!r} marks it: the code of {cls.__module__!r} would go on "
            "building the unmarked class, and pickle would find that one. Mark it where it "
            "is defined: put @domain.acceleration_candidate above its class statement in "
            f"module {cls.__module__!r}."
        )
    if type.__subclasses__(cls):
        names = ", ".join(sub.__qualname__ for sub in type.__subclasses__(cls))
        raise refuse(
            f"it has subclasses already ({names}), which would keep deriving from the "
            "unmarked class. Mark the class right below its class statement, before any "
            "class derives from it."
        )


# The newest metaclass made from each original metaclass: the next derives from it, so
# that the marked classes of one original metaclass combine as bases (one line of them).
_newest: dict[type, type] = {}
_newest_lock = _thread.allocate_lock()


def _derive_metaclass(
    own: type, info: CandidateInfo, switchboard: Switchboard, implementations: Container[type]
) -> type:
    """Make the metaclass of the marked class (and the one of its subclasses), next in
    the line of ``own``'s original metaclass. Each sets every hook it answers with in its
    own body, so that what it inherits from the line changes nothing."""
    original: type = info.reference
    root = own.__dict__.get("_coheriq_root", own)  # own may be a subclasses' metaclass
    qualname = original.__qualname__

    def dispatcher_for(cls: type) -> Any:  # the __call__ for cls's constructor now
        constructor = _constructor(cls)
        function = getattr(constructor, "function", None)
        call = switchboard.dispatcher(
            info.name,
            defname="__call__",
            signature_of=constructor,
            where=getattr(function, "__code__", None),
            qualname=f"{qualname}.__call__",  # not the class: it must not be kept alive
            receiver="_coheriq_cls",
        )
        if isinstance(call, FunctionType) and root.__call__ is type.__call__ and function:
            call.__wrapped__ = function  # type: ignore[attr-defined]  # what inspect follows
        return call

    call = dispatcher_for(original)
    namespace = {
        "__module__": root.__module__,
        # Named as the own metaclass (help() names it); the qualified name says whose it is.
        "__qualname__": f"{root.__qualname__}[coheriq candidate {qualname}]",
        "__call__": call,
        "__doc__": _doc_of(root),
        "__instancecheck__": root.__instancecheck__,  # until check_implementations
        "__subclasscheck__": root.__subclasscheck__,
        "__signature__": CandidateClassMeta.__dict__["__signature__"],
        "_coheriq_root": root,
        "_coheriq_dispatch": call,
        "_coheriq_construct": root.__call__,
        "_coheriq_redirects": False,  # see construct_directly
        "__setattr__": _set_class_attribute,
        "__delattr__": _delete_class_attribute,
        "_coheriq_dispatcher_for": staticmethod(dispatcher_for),
        "_coheriq_member": staticmethod(lambda: switchboard.member(info.name)),
        "__coheriq_candidate__": info,
        "_coheriq_implementations": implementations,
        "_coheriq_signature": _unmarked_signature(original, root, _constructor(original)),
    }
    with _newest_lock:
        newest = _newest.get(root)
        try:
            meta = type(
                root.__name__,
                (newest,) if newest is not None else (CandidateClassMeta, root),
                namespace,
            )
        except TypeError as error:
            raise CoheriqTypeError(
                f"Class {qualname!r} cannot be candidate {info.name!r} of domain "
                f"{info.domain.name!r}: coheriq marks a class by giving it a metaclass derived "
                f"from its own ({root.__qualname__}), which Python refused: {error}."
            ) from error
        # The subclasses' metaclass: the own metaclass's hooks, and a name pickle finds
        # (cloudpickle pickles a class of __main__ by value, its metaclass by name).
        meta._coheriq_for_subclasses = _newest[root] = type(  # type: ignore[attr-defined]
            root.__name__,
            (meta,),
            {
                "__module__": "coheriq.marked",  # kept for good by that module, a shim
                "__qualname__": f"subclasses_of.{SubclassesOf.name_of(original)}",
                "__call__": root.__call__,
                "__doc__": namespace["__doc__"],
                "__instancecheck__": root.__instancecheck__,
                "__subclasscheck__": root.__subclasscheck__,
                "__signature__": None,
                "_coheriq_root": root,
            },
        )
    return meta


def _doc_of(root: type) -> Any:
    """What a class's ``__doc__`` is read through with its own metaclass ``root`` (for
    ``type``, a descriptor that runs one a class keeps as ``__doc__``, as 3.15's
    dataclasses do); ``type()`` would put None in a derived metaclass."""
    return next(klass.__dict__["__doc__"] for klass in root.__mro__ if "__doc__" in klass.__dict__)


def release(marked: Iterable[type]) -> None:
    """Take the marked classes ``marked`` of a dropped domain out of their metaclasses'
    line, so that it no longer holds them: the metaclasses made after theirs derive from
    those made before. They work on; only a new class deriving from one of them and from
    a class marked later can no longer be made."""
    with _newest_lock:
        leaving = []
        for cls in marked:
            own = vars(type(cls))
            if own.get("__coheriq_candidate__") is not None and not own.get("_coheriq_released"):
                type(cls)._coheriq_released = True  # type: ignore[attr-defined]
                leaving.append(type(cls))
        for meta in leaving:  # all marked first: those released together stay related
            _leave_line(meta)


def _leave_line(meta: type) -> None:
    """Take one marked class's pair of metaclasses out of the line (``_newest_lock`` held)."""
    root = meta.__dict__["_coheriq_root"]
    for_subclasses = meta.__dict__["_coheriq_for_subclasses"]
    before = _in_line(meta.__bases__, root)
    later: type
    for later in type.__subclasses__(for_subclasses):
        if (
            later.__bases__ == (for_subclasses,)
            and "_coheriq_for_subclasses" in later.__dict__
            and not later.__dict__.get("_coheriq_released")
        ):
            later.__bases__ = before  # the next pair of the line
    if _newest.get(root) is for_subclasses:
        if before == (CandidateClassMeta, root):
            del _newest[root]
        else:
            _newest[root] = before[0]


def _in_line(bases: tuple[type, ...], root: type) -> tuple[type, ...]:
    """``bases`` of a pair of the line, or of the nearest pair before it still in the line."""
    while bases != (CandidateClassMeta, root):
        owner = bases[0].__bases__[0]  # the metaclass of the pair ``bases`` names
        if not owner.__dict__.get("_coheriq_released"):
            break
        bases = owner.__bases__
    return bases


def check_implementations(cls: type, foreign: bool) -> None:
    """Make the marked class ``cls``'s ``isinstance`` true for engines' classes that do not
    derive from it (where some engine has one: ``foreign``), or leave it the own
    metaclass's, at its speed."""
    meta: Any = type(cls)
    checks = CandidateClassMeta if foreign else meta._coheriq_root
    if meta.__dict__["__instancecheck__"] is not checks.__instancecheck__:
        meta.__instancecheck__ = checks.__instancecheck__
        meta.__subclasscheck__ = checks.__subclasscheck__


def construct_directly(cls: type, directly: bool) -> None:
    """Let the marked class ``cls`` construct itself as its own metaclass does (``directly``:
    the domain's global choice constructs it as it is, and no block or profile is open),
    or dispatch its calls, classmethods and staticmethods (:class:`AlternateConstructor`)."""
    meta: Any = type(cls)
    wanted = meta._coheriq_construct if directly else meta._coheriq_dispatch
    with _switch_lock:
        if (
            meta.__dict__["__call__"] is wanted
            and meta.__dict__["_coheriq_redirects"] is not directly
        ):
            return
        meta._coheriq_redirects = not directly
        if directly:
            for name, value in list(meta.__dict__.items()):
                if isinstance(value, AlternateConstructor):
                    type.__delattr__(meta, name)
        else:
            root = meta._coheriq_root
            for name in alternate_constructors(cls):
                if not hasattr(root, name):  # ABCMeta's register, type's mro: Python's
                    type.__setattr__(meta, name, AlternateConstructor(name, cls))
        meta.__call__ = wanted
        meta.__coheriq_candidate__.constructs_directly = directly


# Guards construct_directly's switch, and assigning a redirected name.
_switch_lock = _thread.RLock()


def alternate_constructors(cls: type) -> list[str]:
    """The names of the classmethods and staticmethods ``cls`` has or inherits (not
    ``object``'s), dunders left out: the ways to build it an engine's class may redefine."""
    names: dict[str, None] = {}
    for klass in cls.__mro__[:-1]:
        for name, value in klass.__dict__.items():
            if isinstance(value, (classmethod, staticmethod)) and not (
                name.startswith("__") and name.endswith("__")
            ):
                names.setdefault(name, None)
    return list(names)


def own_attribute(cls: type, name: str) -> Any:
    """``name`` read from ``cls`` as without coheriq's metaclass: a classmethod of a marked
    class is its own, whatever engine runs. AttributeError where it has none."""
    value = raw_attribute(cls, name)
    get = getattr(type(value), "__get__", None)
    return value if get is None else get(value, None, cls)


def raw_attribute(cls: type, name: str) -> Any:
    """``name`` in the dict of the first class along ``cls.__mro__`` that has it, unbound;
    AttributeError where none has."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    raise AttributeError(f"type object {cls.__qualname__!r} has no attribute {name!r}")


class AlternateConstructor:
    """Classmethod or staticmethod ``name`` of marked class ``owner``, on its metaclass (a
    data descriptor: it comes first) while the class dispatches (:func:`construct_directly`).

    Read from ``owner``, it is the attribute of the class a call of ``owner`` would
    construct here and now, where that class has one (bound to it), else ``owner``'s own;
    reading it chooses nothing. Setting or deleting it changes ``owner``'s own; any other
    class reads the name as without it.
    """

    __slots__ = ("name", "owner")

    def __init__(self, name: str, owner: type) -> None:
        self.name, self.owner = name, owner

    def __get__(self, cls: Any, meta: Any = None) -> Any:
        if cls is None:  # read from the metaclass itself
            return self
        if cls is self.owner:
            implementation = meta._coheriq_member()
            if isinstance(implementation, type) and implementation is not cls:
                for klass in implementation.__mro__[:-1]:
                    if self.name in klass.__dict__:
                        return getattr(implementation, self.name)
            return own_attribute(cls, self.name)
        return _read_as_ever(cls, self.name)

    def __set__(self, cls: Any, value: Any) -> None:
        self._change(cls, lambda: type.__setattr__(cls, self.name, value))

    def __delete__(self, cls: Any) -> None:
        self._change(cls, lambda: type.__delattr__(cls, self.name))

    def _change(self, cls: Any, change: Callable[[], None]) -> None:
        # type.__setattr__ would call this descriptor again: step aside meanwhile.
        home = type(self.owner)
        with _switch_lock:
            type.__delattr__(home, self.name)
            try:
                change()
            finally:
                if self.name in alternate_constructors(self.owner):
                    type.__setattr__(home, self.name, self)


def _set_class_attribute(cls: Any, name: str, value: Any) -> None:
    """``setattr`` on a marked class: a classmethod or staticmethod added is redirected too,
    and a new ``__init__`` or ``__new__`` (``mock.patch.object``) gets its ``__call__``."""
    type.__setattr__(cls, name, value)
    meta = type(cls)
    if name in ("__init__", "__new__"):
        _constructor_changed(cls)
    if (
        isinstance(value, (classmethod, staticmethod))
        and meta.__dict__.get("_coheriq_redirects")  # the marked class, dispatching now
        and name not in meta.__dict__
        and name in alternate_constructors(cls)
        and not hasattr(meta._coheriq_root, name)
    ):
        with _switch_lock:
            type.__setattr__(meta, name, AlternateConstructor(name, cls))


def _delete_class_attribute(cls: Any, name: str) -> None:
    """``delattr`` on a marked class (``mock.patch`` undoing its ``__init__``)."""
    type.__delattr__(cls, name)
    if name in ("__init__", "__new__"):
        _constructor_changed(cls)


def _constructor_changed(cls: Any) -> None:
    """Regenerate the marked class's dispatching ``__call__`` for its constructor now."""
    meta = type(cls)
    if meta.__dict__.get("__coheriq_candidate__") is None:
        return  # a subclass: its metaclass's __call__ is the original one
    call = meta._coheriq_dispatcher_for(cls)
    with _switch_lock:
        dispatching = meta.__dict__["__call__"] is meta._coheriq_dispatch
        meta._coheriq_dispatch = call
        if dispatching:
            meta.__call__ = call


def _read_as_ever(cls: type, name: str) -> Any:
    """``getattr(cls, name)`` as if no :class:`AlternateConstructor` were in the way, or
    AttributeError."""
    try:
        return own_attribute(cls, name)
    except AttributeError:
        pass
    meta: Any = type(cls)
    for klass in meta.__mro__:
        if name not in klass.__dict__:
            continue
        value = klass.__dict__[name]
        if not isinstance(value, AlternateConstructor):
            get = getattr(type(value), "__get__", None)
            return value if get is None else get(value, cls, meta)
    raise AttributeError(f"type object {cls.__qualname__!r} has no attribute {name!r}")


def _unmarked_signature(cls: type, own: type, constructor: Any) -> Any:
    """What :func:`inspect.signature` gives (or raises) for the unmarked ``cls``, where it
    is not read from the constructor, which the marked class has too; else None (the
    unmarked class is not kept alive: it would stay among its bases' subclasses)."""
    if own.__call__ is type.__call__ and parameter_lists(constructor) is not None:
        return None
    try:  # only for such classes, and only while marking
        return _stdlib.signature(cls)
    except (TypeError, ValueError) as error:
        return error


def _constructor(cls: type) -> Any:
    """What fixes the call signature of ``cls`` (its ``__init__`` or ``__new__``), as a
    :class:`~coheriq._call.generated.Method`; None where both or neither do."""
    new, init = cls.__new__, cls.__init__  # type: ignore[misc]
    if new is object.__new__ and init is not object.__init__:  # type: ignore[comparison-overlap]
        return Method(init)
    if init is object.__init__ and isinstance(new, FunctionType):
        return Method(new)
    return None


def _rebuild(info: CandidateInfo, cls: type, meta: type) -> type:
    """Create ``cls`` again with metaclass ``meta``, from its own namespace, as
    ``dataclasses._add_slots`` does (``type`` makes the slots, ``__dict__`` and
    ``__weakref__`` anew); ``__init_subclass__`` and ``__set_name__`` run again."""
    namespace = dict(cls.__dict__)
    namespace.pop("__dict__", None)
    namespace.pop("__weakref__", None)
    slots = [
        name
        for name, value in namespace.items()
        if isinstance(value, MemberDescriptorType) and value.__objclass__ is cls
    ]
    for name in slots:
        del namespace[name]
    declared = namespace.get("__slots__")
    if declared is not None and iter(declared) is declared:  # an iterator, used up by now
        namespace["__slots__"] = tuple(slots)
    namespace["__qualname__"] = cls.__qualname__
    try:
        marked: type = meta(cls.__name__, cls.__bases__, {**namespace, _MARKING: True})
    except Exception as error:
        raise CoheriqTypeError(
            f"Class {cls.__qualname__!r} cannot be candidate {info.name!r} of domain "
            f"{info.domain.name!r}: rebuilding it (as coheriq marks classes, like "
            "dataclasses(slots=True) does) runs its metaclass and its bases' "
            "__init_subclass__ again, without the class statement's keywords, and that "
            f"failed: {type(error).__name__}: {error}. Give such keywords defaults, and let "
            "hooks that register classes accept a class of the same name again."
        ) from error
    # Those hooks ran without the class statement's keywords: the class goes back to what
    # the statement left, but for what must be the rebuilt class's own (made anew).
    anew = _MADE_ANEW.union(slots)
    for name in set(marked.__dict__) - set(namespace) - anew:
        delattr(marked, name)
    for name, value in namespace.items():
        if name not in anew and marked.__dict__.get(name, _MISSING) is not value:
            type.__setattr__(marked, name, value)
    for function in _functions_in(namespace.values()):
        for cell, held in _cells(function):
            if held is cls:  # zero-argument super()'s __class__, among others
                cell.cell_contents = marked
    _repoint_registries(cls, marked)
    return marked


def _repoint_registries(cls: type, marked: type) -> None:
    """Where the bases' hooks registered ``cls`` and now ``marked`` too (in a list, set or
    dict that a base or its module holds), leave ``marked`` only."""
    containers: dict[int, Any] = {}
    for base in marked.__mro__[1:-1]:
        module = sys.modules.get(base.__module__)
        for owner in (base, module):
            for value in list(getattr(owner, "__dict__", {}).values()):
                if type(value) in (list, set, dict):
                    containers.setdefault(id(value), value)
    for container in containers.values():
        if isinstance(container, list):
            if any(item is cls for item in container):
                has_marked = any(item is marked for item in container)
                container[:] = [
                    marked if item is cls else item
                    for item in container
                    if not (item is cls and has_marked)
                ]
        elif isinstance(container, set):
            if cls in container:
                container.discard(cls)
                container.add(marked)
        else:
            for key, value in list(container.items()):
                if value is cls:
                    container[key] = marked


def _cells(function: Any) -> list[tuple[Any, Any]]:
    """The closure cells of ``function`` that are filled, each with what it holds."""
    cells = []
    for cell in function.__closure__ or ():
        try:
            cells.append((cell, cell.cell_contents))
        except ValueError:  # a cell not filled yet
            pass
    return cells


def _functions_in(values: Any) -> Iterator[Any]:
    """The Python functions in a class namespace, also inside wrappers (classmethods,
    properties, :func:`_held_by`), ``__wrapped__`` and closures; not in nested classes."""
    pending, seen = list(values), set()
    while pending:
        value = pending.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, FunctionType):
            yield value
            inner = [value.__dict__.get("__wrapped__"), *(held for _, held in _cells(value))]
        elif isinstance(value, (classmethod, staticmethod)):
            inner = [value.__func__]
        elif isinstance(value, property):
            inner = [value.fget, value.fset, value.fdel]
        elif isinstance(value, type) or type(value).__module__ == "builtins":
            continue  # a nested class, a number, a string: no function of the class's
        else:  # functools' wrappers, another package's cached_property, a decorator's object
            inner = _held_by(value)
        pending.extend(i for i in inner if i is not None)


def _held_by(wrapper: Any) -> list[Any]:
    """The functions a wrapping object may hold: by the usual names (``func``,
    ``__wrapped__``, ``__func__``, ``fget``...) or as callables in its own ``__dict__``."""
    held = []
    for name in ("func", "__wrapped__", "__func__", "fget", "fset", "fdel"):
        try:
            held.append(getattr(wrapper, name, None))
        except Exception:  # a descriptor whose attribute lookup misbehaves
            continue
    try:
        own = vars(wrapper)
    except TypeError:  # no __dict__ (slots)
        own = {}
    held += [v for v in own.values() if callable(v) and not isinstance(v, type)]
    return held
