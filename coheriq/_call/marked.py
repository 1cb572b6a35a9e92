"""Marked classes: a class candidate is the library's own class, not a stand-in.

``@domain.acceleration_candidate`` on a class returns the class rebuilt, the way
:mod:`dataclasses` (``slots=True``) and attrs rebuild classes: the same name,
qualified name, module, bases, ``__dict__`` and ``__slots__``, with the
``__class__`` cells of its methods (zero-argument ``super()``) re-pointed at the
rebuilt class. What changes is its metaclass: a class derived from the class's
own metaclass (``type``, ``ABCMeta``, or the library's) and from
:class:`CandidateClassMeta`, made for this class alone, whose ``__call__``
constructs the active engine's implementation. So:

- calling the marked class is dispatched, like a call of a function candidate;
  under the reference it constructs the class itself;
- so are its other construction entry points: while an engine whose
  implementation of the class is another class may run (see
  :func:`construct_directly`), a ``classmethod`` or ``staticmethod`` read from
  the marked class itself comes from the engine's class where that has one
  (bound to it), else it is the class's own (:class:`AlternateConstructor`);
- everything else is the class's own: data attributes, properties, ``help()``,
  :mod:`inspect`, ``type(obj) is C``, pickling by reference, and :mod:`copy`
  and unpickling, which call ``__new__`` rather than the class;
- a subclass of the marked class (a user's, or an engine's) gets a metaclass
  derived once more, whose ``__call__``, ``isinstance`` and ``issubclass`` are
  the original metaclass's: constructing a subclass is never dispatched;
- ``isinstance``/``issubclass`` with the marked class are also true for the
  implementations of every engine of the domain that do not derive from it.
"""

from __future__ import annotations

# _thread rather than threading: the same lock, without importing threading.
import _thread
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

__all__ = [
    "AlternateConstructor",
    "CandidateClassMeta",
    "alternate_constructors",
    "check_implementations",
    "construct_directly",
    "mark_class",
    "own_attribute",
]

# Py_TPFLAGS_HEAPTYPE: set for classes made by a class statement, not for C types.
_HEAPTYPE = 1 << 9

# A key of the namespace that rebuilds a marked class: the metaclass lets it through.
_MARKING = "__coheriq_marking__"

# What a rebuilt class has of its own, not the class statement's: left as made.
_MADE_ANEW = frozenset({"__dict__", "__weakref__", "__qualname__", "_abc_impl"})

_MISSING = object()


if TYPE_CHECKING:

    class _MarkedClassMetaAttributes:
        """What the metaclass of a marked class carries. Declared for the type
        checker only: annotations in a metaclass's own body would be what a marked
        class without annotations of its own reports as ``__annotations__``."""

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
    """The base of the metaclass of every marked class.

    The metaclass of a marked class ``C`` derives from this class and from
    ``C``'s own metaclass, and carries ``C``'s candidate
    (``__coheriq_candidate__``); its generated ``__call__`` dispatches the
    construction of ``C``. Only ``C`` has that metaclass: a class statement
    deriving from ``C`` gets the metaclass's subclass for subclasses, which
    constructs, and checks ``isinstance``, as the original metaclass does.
    """

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
        """What :func:`inspect.signature` shows for the class: what it shows unmarked.

        That is the class's own ``__signature__`` where it has one. Else, where
        the metaclass's ``__call__`` leads :mod:`inspect` to the constructor (it
        constructs directly, or is the generated dispatcher, whose ``__wrapped__``
        is the constructor), None: ``inspect`` then reads the constructor itself,
        in the annotation format it was asked for, as it does unmarked. Else the
        constructor's parameters, less the first, as they are now (a decorator
        above the marker may have added ``__init__``); else what
        :func:`inspect.signature` gave for the unmarked class. Raises what that
        raised (a class deriving from a C type may have no signature).
        """
        for klass in cls.__mro__[:-1]:  # as reading the attribute from the class would
            if "__signature__" in klass.__dict__:
                own = klass.__dict__["__signature__"]
                get = getattr(type(own), "__get__", None)
                return own if get is None else get(own, None, cls)
        meta: Any = type(cls)
        call = meta.__call__
        if call is meta._coheriq_construct:
            return None
        constructor = _constructor(cls)
        function = getattr(constructor, "function", None)
        if function is not None and getattr(call, "__wrapped__", None) is function:
            return None
        if meta._coheriq_root.__call__ is type.__call__ and parameter_lists(constructor):
            signature = _stdlib.signature(function)  # the compiled __call__ (3.10 to 3.12)
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
    """Finds the metaclass of the subclasses of a marked class by a name (for pickle).

    ``coheriq.marked.subclasses_of.<name>`` is that metaclass, where ``<name>``
    encodes the marked class's module and qualified name: looking it up imports
    the module, as pickle does to find a class, so it works in another process.
    """

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
    """Rebuild ``info.reference`` as a marked class; set ``info.construct``.

    Args:
        info: The candidate; ``info.reference`` is the library's class as its
            class statement made it.
        switchboard: The domain's dispatch cells.
        implementations: The live collection of every class that implements this
            candidate in some engine of the domain (the domain adds to it).

    Raises:
        CoheriqTypeError: The class cannot be a candidate; the message says why.
    """
    original: type = info.reference
    _refuse_unmarkable(info, original)
    own = type(original)
    meta = _derive_metaclass(own, info, switchboard, implementations, original)
    marked = _rebuild(info, original, meta)
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


# The newest metaclass made from each original metaclass (see _derive_metaclass).
_newest: dict[type, type] = {}
_newest_lock = _thread.allocate_lock()


def _derive_metaclass(
    own: type,
    info: CandidateInfo,
    switchboard: Switchboard,
    implementations: Container[type],
    original: type,
) -> type:
    """Make the metaclass of the marked class, and the one of its subclasses.

    Python requires the metaclass of a class to derive from the metaclass of
    each of its bases. Every marked class has a metaclass of its own, so that
    any two of them, as bases of one class (a user's class deriving from two
    marked classes; a marked class deriving from another), would conflict. So
    each new metaclass derives from the newest one made before it from the same
    original metaclass (``type``, ``ABCMeta``, ...): they form one line, and the
    newest of any of them is the metaclass of a class combining them, as with
    one shared metaclass. Each sets every hook it answers with in its own body,
    so what it inherits from the line changes nothing.
    """
    root = own.__dict__.get("_coheriq_root", own)  # own may be a subclasses' metaclass
    namespace = _marked_metaclass_namespace(root, original, info, switchboard, implementations)
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
                f"Class {original.__qualname__!r} cannot be candidate {info.name!r} of domain "
                f"{info.domain.name!r}: coheriq marks a class by giving it a metaclass derived "
                f"from its own ({root.__qualname__}), which Python refused: {error}."
            ) from error
        meta._coheriq_for_subclasses = _newest[root] = _subclasses_metaclass(  # type: ignore[attr-defined]
            meta, root, original
        )
    return meta


def _marked_metaclass_namespace(
    root: type,
    original: type,
    info: CandidateInfo,
    switchboard: Switchboard,
    implementations: Container[type],
) -> dict[str, Any]:
    """The body of a marked class's metaclass, whose original metaclass is ``root``."""
    dispatcher_for = _dispatcher_maker(info, switchboard, root, original.__qualname__)
    call = dispatcher_for(original)
    # Named like the class's own metaclass, so that help() reads as before (it
    # names the metaclass where it lists classmethods); the qualified name, which
    # repr() shows, says what it is.
    label = f"coheriq candidate {original.__qualname__}"
    return {
        "__module__": root.__module__,
        "__qualname__": f"{root.__qualname__}[{label}]",
        "__call__": call,
        "__doc__": _doc_of(root),
        # The original metaclass's checks, until an engine brings a class
        # that does not derive from this one (see check_implementations).
        "__instancecheck__": root.__instancecheck__,
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


def _dispatcher_maker(
    info: CandidateInfo, switchboard: Switchboard, root: type, qualname: str
) -> Callable[[type], Any]:
    """Return ``dispatcher_for(cls)``: a marked class's generated ``__call__``.

    Each one takes the parameters that ``cls``'s constructor has when it is
    made (a class rebuilt with another ``__init__`` gets a new one). Only the
    class's ``qualname`` is kept, not the class: the unmarked class must not be
    kept alive.
    """

    def dispatcher_for(cls: type) -> Any:
        constructor = _constructor(cls)
        function = getattr(constructor, "function", None)
        call = switchboard.dispatcher(
            info.name,
            defname="__call__",
            signature_of=constructor,
            where=getattr(function, "__code__", None),
            qualname=f"{qualname}.__call__",
            receiver="_coheriq_cls",
        )
        if isinstance(call, FunctionType) and root.__call__ is type.__call__ and function:
            # What inspect follows to read the class's signature from its constructor,
            # as for the unmarked class (see CandidateClassMeta.__signature__).
            call.__wrapped__ = function  # type: ignore[attr-defined]
        return call

    return dispatcher_for


def _doc_of(root: type) -> Any:
    """What a class's ``__doc__`` is read through, as with its own metaclass ``root``.

    For ``type``, a descriptor that runs the descriptor a class may keep as its
    ``__doc__`` (3.15's dataclasses compute the docstring so, on first read);
    ``type()`` would put None in a derived metaclass.
    """
    return next(klass.__dict__["__doc__"] for klass in root.__mro__ if "__doc__" in klass.__dict__)


def _subclasses_metaclass(meta: type, root: type, original: type) -> type:
    """The metaclass of the subclasses of a marked class whose metaclass is ``meta``.

    It has the original metaclass's own hooks, so that a subclass constructs
    and answers ``isinstance`` exactly as it would without coheriq, and a name
    that pickle can look up (see :class:`SubclassesOf`): a user's class defined
    in ``__main__`` is pickled by value by cloudpickle (dask, joblib), its
    metaclass by this name.
    """
    return type(
        root.__name__,
        (meta,),
        {
            "__module__": "coheriq.marked",  # kept for good by that module, a shim
            "__qualname__": f"subclasses_of.{SubclassesOf.name_of(original)}",
            "__call__": root.__call__,
            "__doc__": meta.__dict__["__doc__"],  # the marked class's, read as its own
            "__instancecheck__": root.__instancecheck__,
            "__subclasscheck__": root.__subclasscheck__,
            "__signature__": None,
            "_coheriq_root": root,
        },
    )


def release(marked: Iterable[type]) -> None:
    """Take the marked classes ``marked``, which are dropped, out of their metaclasses' line.

    Each new marked class's metaclass derives from the line of those made before
    it (see :func:`_derive_metaclass`), which so holds every one of them, and,
    through them, their domains. A dropped domain's classes (an isolated world
    that ended, a copy of a library that a reload replaced) leave it: the
    metaclasses made after theirs derive from those made before instead. Theirs
    keep what they derive from, so the classes work on as before, combine with
    each other and with classes marked before them, and are freed when nothing
    else holds them; only a new class deriving from one of them and from a class
    marked after them can no longer be made.
    """
    with _newest_lock:
        leaving = []
        for cls in marked:
            meta = type(cls)
            if meta.__dict__.get("__coheriq_candidate__") is None or meta.__dict__.get(
                "_coheriq_released"
            ):
                continue  # not a marked class, or released already
            meta._coheriq_released = True  # type: ignore[attr-defined]
            leaving.append(meta)
        for meta in leaving:  # all marked first: those released together stay related
            _leave_line(meta)


def _leave_line(meta: type) -> None:
    """Take one marked class's pair of metaclasses out of the line; hold ``_newest_lock``."""
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
    """Make the marked class ``cls`` check engines' classes in isinstance, or not.

    Only an engine's class that does not derive from ``cls`` (``foreign``) needs
    the metaclass's own check; without one, the original metaclass's answers,
    at its speed.
    """
    meta: Any = type(cls)
    root = meta._coheriq_root
    hooks = (
        (CandidateClassMeta.__instancecheck__, CandidateClassMeta.__subclasscheck__)
        if foreign
        else (root.__instancecheck__, root.__subclasscheck__)
    )
    if meta.__dict__["__instancecheck__"] is not hooks[0]:
        meta.__instancecheck__, meta.__subclasscheck__ = hooks


def construct_directly(cls: type, directly: bool) -> None:
    """Let the marked class ``cls`` construct itself without dispatching, or not.

    The domain says ``directly`` while its global choice constructs the class as
    it is (the reference, or an engine that does not override it) and no scope
    or profile is open anywhere: the metaclass then takes the original
    metaclass's ``__call__``, so that constructing the class costs what it cost
    before the library adopted coheriq, and its classmethods and staticmethods
    are read as ever. Otherwise it takes the generated ``__call__``, and
    :class:`AlternateConstructor`\\ s for the classmethods and staticmethods.
    """
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
                # A name the original metaclass answers (ABCMeta's register, type's
                # mro) stays the metaclass's, as Python's own lookups expect.
                if not hasattr(root, name):
                    type.__setattr__(meta, name, AlternateConstructor(name, cls))
        meta.__call__ = wanted
        meta.__coheriq_candidate__.constructs_directly = directly


# Guards the switch between constructing directly and dispatching, and the
# assignment to a redirected name (see AlternateConstructor.__set__).
_switch_lock = _thread.RLock()


def alternate_constructors(cls: type) -> list[str]:
    """The names of the classmethods and staticmethods ``cls`` has, dunders left out.

    Those a class defines and those it inherits (``object``'s aside): each is a
    way to build the class that an engine's class may define its own way.
    """
    names: dict[str, None] = {}
    for klass in cls.__mro__[:-1]:
        for name, value in klass.__dict__.items():
            if isinstance(value, (classmethod, staticmethod)) and not (
                name.startswith("__") and name.endswith("__")
            ):
                names.setdefault(name, None)
    return list(names)


def own_attribute(cls: type, name: str) -> Any:
    """Read ``name`` from ``cls`` as a class without a metaclass of coheriq's would.

    Along ``cls.__mro__``, bound to ``cls``: a classmethod of a marked class read
    this way is the class's own, whatever engine runs.

    Raises:
        AttributeError: ``cls`` has no such attribute.
    """
    for klass in cls.__mro__:
        if name in klass.__dict__:
            value = klass.__dict__[name]
            get = getattr(type(value), "__get__", None)
            return value if get is None else get(value, None, cls)
    raise AttributeError(f"type object {cls.__qualname__!r} has no attribute {name!r}")


class AlternateConstructor:
    """A classmethod or staticmethod of a marked class, read where engines may differ.

    Put on the marked class's metaclass (as a data descriptor it comes before
    the class's own attribute) only while some call of the class may construct
    an engine's class (see :func:`construct_directly`). Read from the marked
    class, it is the attribute of the class that a call of the marked class
    would construct here and now, where that class has one of that name (not
    merely ``object``'s), bound to it; else the marked class's own. So under an
    engine ``Sample.from_text(s)`` runs the engine's ``from_text``, and a
    library's ``from_text`` built on ``object.__new__(cls)`` builds the engine's
    object where the engine's class derives from the library's.

    Reading it makes no choice: before the domain's global engine is chosen
    (outside blocks), it is the class's own, whose ``cls(...)`` then chooses.
    Assigning or deleting the attribute changes the class's own, as it would
    without coheriq.

    Every other class whose metaclass derives from the marked class's (its
    subclasses, and classes marked after it: see ``_derive_metaclass``) reads the
    name as it would without this descriptor: never redirected.

    Args:
        name: The attribute's name.
        owner: The marked class it redirects.
    """

    __slots__ = ("name", "owner")

    def __init__(self, name: str, owner: type) -> None:
        self.name = name
        self.owner = owner

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
    """``setattr`` on a marked class: a classmethod or staticmethod added is redirected too.

    (One the class had is redirected already; see :func:`construct_directly`.) A
    new ``__init__`` or ``__new__`` (``mock.patch.object``) gets a dispatching
    ``__call__`` with its parameters.
    """
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
    """``getattr(cls, name)`` as if no :class:`AlternateConstructor` were in the way.

    The class's own attribute along its MRO, else its metaclass's (skipping the
    redirections of marked classes that its metaclass derives from).

    Raises:
        AttributeError: Neither has one.
    """
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
    """The signature :func:`inspect.signature` gives for the unmarked ``cls``, where needed.

    Usually nothing: ``inspect`` reads a class's signature from its constructor,
    less its first parameter, which the marked class has too, so the unmarked
    class need not be kept (a class that is kept alive stays among its bases'
    ``__subclasses__()``). Otherwise (a metaclass with a ``__call__`` of its own,
    both ``__new__`` and ``__init__``, a constructor inherited from a C type) the
    signature, or the error, that :func:`inspect.signature` gives for ``cls`` now.
    """
    if own.__call__ is type.__call__ and parameter_lists(constructor) is not None:
        return None
    try:  # only for such classes, and only while marking
        return _stdlib.signature(cls)
    except (TypeError, ValueError) as error:
        return error


def _constructor(cls: type) -> Any:
    """What fixes the call signature of ``cls``: its ``__init__`` or its ``__new__``.

    Returns a :class:`~coheriq._call.proxy.Method`, or None (a generic ``__call__``)
    when both are the class's own or neither is a Python function.
    """
    new, init = cls.__new__, cls.__init__  # type: ignore[misc]
    if new is object.__new__ and init is not object.__init__:  # type: ignore[comparison-overlap]
        return Method(init)
    if init is object.__init__ and isinstance(new, FunctionType):
        return Method(new)
    return None


def _rebuild(info: CandidateInfo, cls: type, meta: type) -> type:
    """Create ``cls`` again with metaclass ``meta``, from its own namespace.

    As :func:`dataclasses._add_slots` does: the descriptors that ``__slots__``,
    ``__dict__`` and ``__weakref__`` made are left for ``type`` to make anew, and
    the qualified name is kept. The bases' ``__init_subclass__`` and the
    descriptors' ``__set_name__`` run again, for the rebuilt class.
    """
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
    # Those hooks ran without the class statement's keywords: what they set on the
    # class goes back to what the class statement left, but for what must be the
    # rebuilt class's own (its slots, __dict__ and ABC data, made anew).
    anew = _MADE_ANEW.union(slots)
    for name in set(marked.__dict__) - set(namespace) - anew:
        delattr(marked, name)
    for name, value in namespace.items():
        if name not in anew and marked.__dict__.get(name, _MISSING) is not value:
            type.__setattr__(marked, name, value)
    for function in _functions_in(namespace.values()):
        for cell in function.__closure__ or ():
            try:
                if cell.cell_contents is cls:
                    cell.cell_contents = marked
            except ValueError:  # an empty cell
                pass
    _repoint_registries(cls, marked)
    return marked


def _repoint_registries(cls: type, marked: type) -> None:
    """Where the bases' hooks registered ``cls``, leave ``marked`` only.

    A base's ``__init_subclass__`` (or metaclass) that appends each new class to
    a list, a set or a dict ran for the class statement and again for the
    rebuilt class: the registry would hold both. The lists, sets and dicts
    looked at are those the bases, and the modules that define them, hold as
    attributes; the class statement's class is replaced by ``marked``, or
    dropped where ``marked`` is there already.
    """
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


def _cell_contents(function: Any) -> list[Any]:
    """What the closure cells of ``function`` hold (empty cells left out)."""
    held = []
    for cell in function.__closure__ or ():
        try:
            held.append(cell.cell_contents)
        except ValueError:  # a cell not filled yet
            pass
    return held


def _functions_in(values: Any) -> Iterator[Any]:
    """The Python functions in a class namespace, also inside the usual wrappers.

    Looks through ``classmethod``/``staticmethod`` (``__func__``), ``property``
    (``fget``, ``fset``, ``fdel``), any other wrapping object (see
    :func:`_held_by`: functools' wrappers, another package's descriptor, a
    decorator's object), ``__wrapped__`` chains and the closures of functions (a
    decorator's inner function keeps the decorated one in a cell), and into
    nothing else (nested classes included).
    """
    pending, seen = list(values), set()
    while pending:
        value = pending.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, FunctionType):
            yield value
            inner = [value.__dict__.get("__wrapped__"), *_cell_contents(value)]
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
    """The functions an object that wraps one may hold: by the usual names, or its own.

    ``func`` (functools' partialmethod, cached_property), ``__wrapped__``,
    ``__func__``, ``fget``/``fset``/``fdel``, and the values of the object's own
    ``__dict__`` that are functions or wrappers of one (a decorator class that
    keeps the function under a name of its own).
    """
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
