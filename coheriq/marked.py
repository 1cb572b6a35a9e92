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
- everything else is the class's own: attributes, ``classmethod``\\ s (which
  dispatch only where they call ``cls(...)``), ``help()``, :mod:`inspect`,
  ``type(obj) is C``, pickling by reference, and :mod:`copy` and unpickling,
  which call ``__new__`` rather than the class;
- a subclass of the marked class (a user's, or an engine's) gets a metaclass
  derived once more, whose ``__call__``, ``isinstance`` and ``issubclass`` are
  the original metaclass's: constructing a subclass is never dispatched;
- ``isinstance``/``issubclass`` with the marked class are also true for the
  implementations of every engine of the domain that do not derive from it.
"""

from __future__ import annotations

import sys

from ._stdlib import TYPE_CHECKING, FunctionType, MemberDescriptorType
from .exceptions import CoheriqTypeError
from .proxy import Method, parameter_lists

if TYPE_CHECKING:
    from collections.abc import Callable, Container, Iterator
    from typing import Any

    from .proxy import CandidateInfo, Switchboard

__all__ = ["CandidateClassMeta", "construct_directly", "mark_class"]

# Py_TPFLAGS_HEAPTYPE: set for classes made by a class statement, not for C types.
_HEAPTYPE = 1 << 9


class CandidateClassMeta(type):
    """The base of the metaclass of every marked class.

    The metaclass of a marked class ``C`` derives from this class and from
    ``C``'s own metaclass, and carries ``C``'s candidate
    (``__coheriq_candidate__``); its generated ``__call__`` dispatches the
    construction of ``C``. Only ``C`` has that metaclass: a class statement
    deriving from ``C`` gets the metaclass's subclass for subclasses, which
    constructs, and checks ``isinstance``, as the original metaclass does.
    """

    __coheriq_candidate__: CandidateInfo
    _coheriq_implementations: Container[type]
    _coheriq_signature: Any  # a Method, or what inspect.signature gave unmarked
    _coheriq_for_subclasses: type
    _coheriq_dispatch: Callable[..., Any]
    _coheriq_construct: Callable[..., Any]

    def __new__(
        mcls, cls_name: str, bases: tuple[type, ...], namespace: dict[str, Any], /, **kwargs: Any
    ) -> CandidateClassMeta:
        for_subclasses = mcls.__dict__.get("_coheriq_for_subclasses")
        if for_subclasses is not None and any(isinstance(b, mcls) for b in bases):
            mcls = for_subclasses
        return super().__new__(mcls, cls_name, bases, namespace, **kwargs)

    @property
    def __signature__(cls) -> Any:
        """What :func:`inspect.signature` shows for the class: what it shows unmarked.

        Raises what :func:`inspect.signature` raises for the unmarked class (a
        class deriving from a C type may have no signature).
        """
        import inspect  # introspection only: marking and calling never need it

        found = type(cls)._coheriq_signature
        if isinstance(found, Method):  # the constructor's parameters, less self or cls
            signature = inspect.signature(found.function)
            return signature.replace(parameters=tuple(signature.parameters.values())[1:])
        if isinstance(found, Exception):
            raise type(found)(*found.args)
        return found

    def __instancecheck__(cls, obj: object) -> bool:
        return super().__instancecheck__(obj) or _implemented_by(cls, type(obj))

    def __subclasscheck__(cls, sub: type) -> bool:
        return super().__subclasscheck__(sub) or _implemented_by(cls, sub)


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
    if type.__subclasses__(cls):
        names = ", ".join(sub.__qualname__ for sub in type.__subclasses__(cls))
        raise refuse(
            f"it has subclasses already ({names}), which would keep deriving from the "
            "unmarked class. Mark the class right below its class statement, before any "
            "class derives from it."
        )


def _derive_metaclass(
    own: type,
    info: CandidateInfo,
    switchboard: Switchboard,
    implementations: Container[type],
    original: type,
) -> type:
    """Make the metaclass of the marked class, and the one of its subclasses."""
    constructor = _constructor(original)
    where = getattr(getattr(constructor, "function", None), "__code__", None)
    call = switchboard.dispatcher(
        info.name,
        defname="__call__",
        signature_of=constructor,
        where=where,
        qualname=f"{original.__qualname__}.__call__",
        receiver="_coheriq_cls",
    )
    # Named like the class's own metaclass, so that help() reads as before (it
    # names the metaclass where it lists classmethods); the qualified name, which
    # repr() shows, says what it is.
    label = f"coheriq candidate {original.__qualname__}"
    try:
        meta = type(
            own.__name__,
            (CandidateClassMeta, own),
            {
                "__module__": own.__module__,
                "__qualname__": f"{own.__qualname__}[{label}]",
                "__call__": call,
                "_coheriq_dispatch": call,
                "_coheriq_construct": own.__call__,
                "__coheriq_candidate__": info,
                "_coheriq_implementations": implementations,
                "_coheriq_signature": _unmarked_signature(original, own, constructor),
            },
        )
    except TypeError as error:
        raise CoheriqTypeError(
            f"Class {original.__qualname__!r} cannot be candidate {info.name!r} of domain "
            f"{info.domain.name!r}: coheriq marks a class by giving it a metaclass derived "
            f"from its own ({own.__qualname__}), which Python refused: {error}."
        ) from error
    meta._coheriq_for_subclasses = type(  # type: ignore[attr-defined]
        own.__name__,
        (meta,),
        {
            "__module__": own.__module__,
            "__qualname__": f"{own.__qualname__}[subclass of {label}]",
            # The original metaclass's own slots, so that a subclass constructs and
            # answers isinstance exactly as it would without coheriq.
            "__call__": own.__call__,
            "__instancecheck__": own.__instancecheck__,
            "__subclasscheck__": own.__subclasscheck__,
            "__signature__": None,
        },
    )
    return meta


def construct_directly(cls: type, directly: bool) -> None:
    """Let calls of the marked class ``cls`` construct it without dispatching, or not.

    The domain says ``directly`` while its global choice constructs the class as
    it is (the reference, or an engine that does not override it) and no scope
    or profile is open anywhere: the metaclass then takes the original
    metaclass's ``__call__``, so that constructing the class costs what it cost
    before the library adopted coheriq. Otherwise it takes the generated one.
    """
    meta: Any = type(cls)
    wanted = meta._coheriq_construct if directly else meta._coheriq_dispatch
    if meta.__dict__["__call__"] is not wanted:
        meta.__call__ = wanted


def _unmarked_signature(cls: type, own: type, constructor: Any) -> Any:
    """What :func:`inspect.signature` needs to show ``cls`` as it shows it unmarked.

    Usually the constructor whose parameters the generated ``__call__`` copies
    (``inspect`` reads a class's signature from it, less its first parameter),
    kept so that the unmarked class itself need not be: a class that is kept
    alive stays among its bases' ``__subclasses__()``. Otherwise (a metaclass
    with a ``__call__`` of its own, both ``__new__`` and ``__init__``, a
    constructor inherited from a C type) the signature, or the error, that
    :func:`inspect.signature` gives for the unmarked class now.
    """
    if own.__call__ is type.__call__ and parameter_lists(constructor) is not None:
        return constructor
    import inspect  # only for such classes, and only while marking

    try:
        return inspect.signature(cls)
    except (TypeError, ValueError) as error:
        return error


def _constructor(cls: type) -> Any:
    """What fixes the call signature of ``cls``: its ``__init__`` or its ``__new__``.

    Returns a :class:`~coheriq.proxy.Method`, or None (a generic ``__call__``)
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
        marked: type = meta(cls.__name__, cls.__bases__, namespace)
    except TypeError as error:
        raise CoheriqTypeError(
            f"Class {cls.__qualname__!r} cannot be candidate {info.name!r} of domain "
            f"{info.domain.name!r}: rebuilding it (as coheriq marks classes, like "
            f"dataclasses(slots=True) does) failed: {error}. A base's __init_subclass__ "
            "that requires class keywords is the usual cause: coheriq cannot know the "
            "keywords the class statement passed; give them defaults."
        ) from error
    for function in _functions_in(namespace.values()):
        for cell in function.__closure__ or ():
            try:
                if cell.cell_contents is cls:
                    cell.cell_contents = marked
            except ValueError:  # an empty cell
                pass
    return marked


def _functions_in(values: Any) -> Iterator[Any]:
    """The Python functions in a class namespace, also inside the usual wrappers.

    Looks through ``classmethod``/``staticmethod`` (``__func__``), ``property``
    (``fget``, ``fset``, ``fdel``), :mod:`functools`' wrappers (``func``) and
    ``__wrapped__`` chains, and into nothing else (nested classes included).
    """
    pending, seen = list(values), set()
    while pending:
        value = pending.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, FunctionType):
            yield value
            inner = [value.__dict__.get("__wrapped__")]
        elif isinstance(value, (classmethod, staticmethod)):
            inner = [value.__func__]
        elif isinstance(value, property):
            inner = [value.fget, value.fset, value.fdel]
        elif type(value).__module__ == "functools":  # partialmethod, cached_property, ...
            inner = [getattr(value, "func", None)]
        else:
            continue
        pending.extend(i for i in inner if i is not None)
