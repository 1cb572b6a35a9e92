"""The proxies that stand at call sites in place of a domain's candidates.

A proxy does not decide anything. Every proxy of a domain reads one shared
namespace, the domain's :class:`Switchboard`, which the domain rewrites when its
global engine settles (each candidate's slot then holds that engine's member) and
when the first scope of the domain opens or the last one closes (a flag). So a
call in the common case is one generated function frame, two global loads and the
call of the implementation itself.

A function proxy is a function generated, like :mod:`dataclasses` does, with the
candidate's own parameter list, so that arguments are passed on without packing
them into a tuple and a dict. For ``def normalize(xs, *, eps=1e-9)`` it reads::

    def normalize(xs, *, eps=None):   # defaults are copied from the candidate
        if _coheriq_scoped:
            _coheriq_scope = _coheriq_current()
            if _coheriq_scope is not None:
                return _coheriq_scope.members['normalize'](xs, eps=eps)
        return _coheriq_impl_normalize(xs, eps=eps)

``_coheriq_current`` reads the domain's context variable; a scope whose block has
exited answers with the members of the context around it. Callables whose
parameters cannot be read from a code object get the same body with
``*args, **kwargs``.

A class proxy is a class whose metaclass, a subclass of
:class:`CandidateClassMeta` made for it alone, has a ``__call__`` generated the
same way from the reference class's ``__init__`` (Python looks ``__call__`` up on
the type of what is called, so a call of the proxy lands there directly). The
metaclass answers ``isinstance`` and ``issubclass`` for the implementations of
every engine of the domain.
"""

from __future__ import annotations

from ._stdlib import TYPE_CHECKING, FunctionType
from .exceptions import CoheriqTypeError

if TYPE_CHECKING:
    from collections.abc import Callable, Container, Mapping
    from typing import Any

__all__ = ["CandidateClassMeta", "Switchboard", "candidate_of"]

_SCOPED = "_coheriq_scoped"
_CURRENT = "_coheriq_current"
_HERE = "_coheriq_here"
_RESERVED_PREFIX = "_coheriq_"

# Code-object flags (the ``inspect`` module's CO_VARARGS and CO_VARKEYWORDS), read
# directly so that marking candidates does not import ``inspect``.
_CO_VARARGS = 0x04
_CO_VARKEYWORDS = 0x08
_CO_COROUTINE = 0x80


def _mark_coroutine_function(proxy: Callable[..., Any]) -> None:
    """Let ``inspect.iscoroutinefunction`` see an ``async def`` candidate through its proxy.

    The proxy itself is a plain function that returns the implementation's
    coroutine (so the engine is chosen when the call is made, not when it is
    awaited). Python 3.12 added a way to say so; older versions cannot be told.
    """
    import inspect  # only for async candidates, at the library's import

    mark = getattr(inspect, "markcoroutinefunction", None)
    if mark is not None:
        mark(proxy)


class CandidateInfo:
    """What a proxy stands for: a candidate of a domain.

    Attributes:
        domain: The :class:`~coheriq.AccelerationDomain` the candidate belongs to.
        name: The candidate's name in its domain.
        reference: The reference implementation (the decorated function or class).
    """

    __slots__ = ("domain", "name", "reference")

    def __init__(self, domain: Any, name: str, reference: Any) -> None:
        self.domain = domain
        self.name = name
        self.reference = reference

    @property
    def is_class(self) -> bool:
        """Whether the candidate is a class."""
        return isinstance(self.reference, type)

    def __repr__(self) -> str:
        return f"<candidate {self.name!r} of domain {self.domain.name!r}>"


def candidate_of(obj: object) -> CandidateInfo | None:
    """Return what ``obj`` stands for if it is a candidate proxy, else ``None``."""
    try:
        info = getattr(obj, "__coheriq_candidate__", None)
    except Exception:  # an object whose __getattr__ misbehaves is not a proxy
        return None
    return info if isinstance(info, CandidateInfo) else None


def _slot(name: str) -> str:
    return f"_coheriq_impl_{name}"


class Switchboard:
    """The namespace that all proxies of one domain read at call time.

    Args:
        current: Returns the scope of the current context (an object whose
            ``members`` maps candidate names to what a call runs), or ``None``.
            Consulted only while some scope of the domain is open.
        here: Returns the member that the named candidate stands for in the
            current context, settling the domain if needed (for attribute
            access through class proxies).
        first_call: Called as ``first_call(name, *args, **kwargs)`` until the
            domain settles; it settles the domain and calls the member.
    """

    def __init__(
        self,
        current: Callable[[], Any],
        here: Callable[[str], Any],
        first_call: Callable[..., Any],
    ) -> None:
        self._first_call = first_call
        self.namespace: dict[str, Any] = {
            "__name__": __name__,  # the generated functions' frames count as coheriq's own
            _SCOPED: False,
            _CURRENT: current,
            _HERE: here,
        }

    def function_proxy(self, info: CandidateInfo) -> Callable[..., Any]:
        """Return a generated function that dispatches calls of ``info``'s candidate."""
        fn = info.reference
        self._disconnect(info.name)
        proxy = _generate(fn, info.name, info.name, self.namespace)
        for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
            try:
                setattr(proxy, attr, getattr(fn, attr))
            except (AttributeError, TypeError):
                pass
        proxy.__dict__.update(getattr(fn, "__dict__", {}))
        proxy.__annotations__ = dict(getattr(fn, "__annotations__", {}) or {})
        proxy.__wrapped__ = fn  # type: ignore[attr-defined]
        proxy.__coheriq_candidate__ = info  # type: ignore[attr-defined]
        if getattr(getattr(fn, "__code__", None), "co_flags", 0) & _CO_COROUTINE:
            _mark_coroutine_function(proxy)
        return proxy

    def class_proxy(self, info: CandidateInfo, implementations: Container[type]) -> type:
        """Return a class that stands for ``info``'s class candidate.

        Args:
            info: The candidate; ``info.reference`` is the reference class.
            implementations: The live collection of every class that implements
                this candidate in some engine of the domain (the domain adds to
                it); ``isinstance`` and ``issubclass`` consult it.
        """
        cls: type = info.reference
        self._disconnect(info.name)
        namespace = {
            "__module__": cls.__module__,
            "__qualname__": cls.__qualname__,
            "__doc__": cls.__doc__,
            "__wrapped__": cls,
            "__coheriq_candidate__": info,
            "__coheriq_switchboard__": self.namespace,
            "__coheriq_implementations__": implementations,
        }
        match_args = getattr(cls, "__match_args__", None)
        if match_args is not None:  # for `case Batch(x, y):` patterns
            namespace["__match_args__"] = match_args
        call = _generate(_constructor(cls), "__call__", info.name, self.namespace)
        meta = type(
            f"CandidateClassMeta[{cls.__name__}]",
            (CandidateClassMeta,),
            {"__call__": call, "__module__": __name__},
        )
        proxy: type = meta(cls.__name__, (), namespace)
        _make_reference_picklable(cls, proxy)
        return proxy

    def connect(self, members: Mapping[str, Any]) -> None:
        """Point every candidate's slot at the given member (the settled engine's)."""
        for name, member in members.items():
            self.namespace[_slot(name)] = member

    def set_current(self, current: Callable[[], Any]) -> None:
        """Replace the function that finds the current context's scope (for profiling)."""
        self.namespace[_CURRENT] = current

    def set_scoped(self, scoped: bool) -> None:
        """Say whether any scope of the domain is open, in any thread or task."""
        self.namespace[_SCOPED] = scoped

    def _disconnect(self, name: str) -> None:
        # Until the domain settles, a call goes through first_call, which settles it.
        first_call = self._first_call

        def settle_and_call(*args: Any, **kwargs: Any) -> Any:
            return first_call(name, *args, **kwargs)

        self.namespace[_slot(name)] = settle_and_call


def _make_reference_picklable(cls: type, proxy: type) -> None:
    """Let instances of the reference class ``cls`` pickle although ``proxy`` took its name.

    Pickle finds a class by module and qualified name, which now lead to the proxy,
    so the reduction is rewritten to name the proxy and rebuild ``cls`` from its
    ``__wrapped__``. Classes that define their own ``__reduce_ex__`` are left alone.
    """
    if "__reduce_ex__" in vars(cls) or any("__reduce_ex__" in vars(k) for k in cls.__mro__[1:-1]):
        return

    def __reduce_ex__(self: Any, protocol: Any) -> Any:  # noqa: N807
        reduced = object.__reduce_ex__(self, protocol)
        if type(self) is not cls or not isinstance(reduced, tuple):
            return reduced  # a subclass pickles by its own name, as usual
        constructor, args, *rest = reduced
        if not args or args[0] is not cls:
            return reduced
        return (_rebuild_reference, (proxy, constructor, args[1:]), *rest)

    try:
        cls.__reduce_ex__ = __reduce_ex__  # type: ignore[method-assign,assignment]
    except TypeError:  # a built-in or extension type: leave it as it is
        pass


def _rebuild_reference(proxy: Any, constructor: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """Unpickle helper: call ``constructor`` with the reference class behind ``proxy``."""
    return constructor(proxy.__wrapped__, *args)


def _constructor(cls: type) -> Any:
    """Return what fixes the call signature of ``cls``: its ``__init__``, or None.

    A class with its own ``__new__``, or only ``object.__init__``, gets a generic
    proxy constructor.
    """
    if cls.__new__ is not object.__new__ or cls.__init__ is object.__init__:  # type: ignore[comparison-overlap,misc]
        return None
    return _Method(cls.__init__)  # type: ignore[misc]


class _Method:
    """A function whose first parameter (``self``) the caller does not pass."""

    __slots__ = ("function",)

    def __init__(self, function: Any) -> None:
        self.function = function


def _parameter_lists(fn: object) -> tuple[str, str] | None:
    """Return ``(parameters, arguments)`` source for ``fn``'s exact signature.

    ``parameters`` is what goes between the parentheses of ``def`` (defaults as
    ``None`` placeholders) and ``arguments`` what passes each parameter on to the
    implementation. Returns ``None`` when the signature cannot be reproduced: not
    a plain Python function, or a parameter name that coheriq uses itself.
    """
    skip = 1 if isinstance(fn, _Method) else 0
    fn = fn.function if isinstance(fn, _Method) else fn
    if type(fn) is not FunctionType:
        return None
    code = fn.__code__
    npos, nposonly, nkwonly = code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount
    if npos < skip:
        return None
    names = list(code.co_varnames[: npos + nkwonly])
    rest = npos + nkwonly
    varargs = code.co_varnames[rest] if code.co_flags & _CO_VARARGS else None
    rest += bool(varargs)
    varkw = code.co_varnames[rest] if code.co_flags & _CO_VARKEYWORDS else None
    every = [*names, varargs or "", varkw or ""]
    if any(n.startswith(_RESERVED_PREFIX) for n in every):
        return None

    first_default = npos - len(fn.__defaults__ or ())
    kwdefaults = fn.__kwdefaults__ or {}
    params: list[str] = []
    args: list[str] = []
    for i, n in enumerate(names[:npos]):
        if i >= skip:
            params.append(f"{n}=None" if i >= first_default else n)
            args.append(n)
        if i + 1 == nposonly and i >= skip:
            params.append("/")
    if varargs:
        params.append(f"*{varargs}")
        args.append(f"*{varargs}")
    elif nkwonly:
        params.append("*")
    for n in names[npos:]:
        params.append(f"{n}=None" if n in kwdefaults else n)
        args.append(f"{n}={n}")
    if varkw:
        params.append(f"**{varkw}")
        args.append(f"**{varkw}")
    return ", ".join(params), ", ".join(args)


def _generate(
    fn: Any, defname: str, candidate: str, namespace: dict[str, Any]
) -> Callable[..., Any]:
    """Compile the proxy function ``defname`` that dispatches calls of ``candidate``.

    For a class proxy's ``__call__`` (``fn`` a :class:`_Method`), the generated
    function takes the proxy class first, as a metaclass method does, and does not
    pass it on.
    """
    exact = _parameter_lists(fn)
    params, args = exact or ("*args, **kwargs", "*args, **kwargs")
    if defname == "__call__":
        params = f"_coheriq_cls, {params}" if params else "_coheriq_cls"
    source = (
        f"def {defname}({params}):\n"
        f"    if {_SCOPED}:\n"
        f"        _coheriq_scope = {_CURRENT}()\n"
        f"        if _coheriq_scope is not None:\n"
        f"            return _coheriq_scope.members[{candidate!r}]({args})\n"
        f"    return {_slot(candidate)}({args})\n"
    )
    code = compile(source, f"<coheriq proxy of {candidate}>", "exec")
    local: dict[str, Any] = {}
    exec(code, namespace, local)
    proxy: Callable[..., Any] = local[defname]
    if exact is not None:
        source_fn = fn.function if isinstance(fn, _Method) else fn
        proxy.__defaults__ = source_fn.__defaults__
        proxy.__kwdefaults__ = source_fn.__kwdefaults__
    return proxy


class CandidateClassMeta(type):
    """The metaclass of class proxies: a class that stands for a class candidate.

    Calling the proxy constructs the active engine's implementation;
    ``isinstance``/``issubclass`` are true for the implementation of every engine
    of the domain; attributes that the proxy does not have itself (class
    attributes, classmethods, staticmethods) are read from the active
    implementation. Names starting with ``__`` are never forwarded, so that
    introspection never settles a domain.
    """

    def __new__(
        mcls, cls_name: str, bases: tuple[type, ...], namespace: dict[str, Any], /, **kwargs: Any
    ) -> CandidateClassMeta:
        proxies = [b for b in bases if isinstance(b, CandidateClassMeta)]
        if proxies:
            info: CandidateInfo = proxies[0].__coheriq_candidate__
            raise CoheriqTypeError(
                f"Class {cls_name!r} cannot subclass {info.reference.__qualname__!r}: it is "
                f"candidate {info.name!r} of coheriq domain {info.domain.name!r}, which stands "
                "for whichever engine's implementation is active, so there is no single class "
                "to inherit from. Subclass the implementation you mean instead, for example "
                f"coheriq.resolve_impl({info.reference.__qualname__}) or "
                f"coheriq.engine_class({info.domain.name!r}).{info.name}."
            )
        return super().__new__(mcls, cls_name, bases, namespace, **kwargs)

    def __getattr__(cls, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(f"type object {cls.__qualname__!r} has no attribute {attr!r}")
        info: CandidateInfo = cls.__coheriq_candidate__
        implementation = cls.__coheriq_switchboard__[_HERE](info.name)
        return getattr(implementation, attr)

    def __instancecheck__(cls, obj: object) -> bool:
        return cls.__subclasscheck__(type(obj))

    def __subclasscheck__(cls, sub: type) -> bool:
        if not isinstance(sub, type):
            raise TypeError("issubclass() arg 1 must be a class")
        if sub is cls:
            return True
        implementations = cls.__coheriq_implementations__
        return any(c in implementations for c in sub.__mro__)
