"""The parameter lists of generated proxies and trampolines: the candidate's own, so that
arguments pass on as they came, unpacked (as :mod:`dataclasses` generates methods)."""

from __future__ import annotations

from .._stdlib import CO_VARARGS, CO_VARKEYWORDS, TYPE_CHECKING, FunctionType

if TYPE_CHECKING:
    from typing import Any


# Parameters named so could clash with the generated code's own names.
RESERVED_PREFIX = "_coheriq"


class Method:
    """A function whose first parameter (``self`` or ``cls``) the caller does not pass."""

    __slots__ = ("function",)

    def __init__(self, function: Any) -> None:
        self.function = function


def parameter_lists(fn: object) -> tuple[str, str] | None:
    """Return ``(parameters, arguments)``: the source of a ``def``'s parameters for ``fn``'s
    exact signature (defaults as ``None`` placeholders) and of a call that passes each on.
    None for anything but a plain Python function, or a name with :data:`RESERVED_PREFIX`.
    """
    skip = 1 if isinstance(fn, Method) else 0
    fn = fn.function if isinstance(fn, Method) else fn
    if type(fn) is not FunctionType:
        return None
    code = fn.__code__
    npos, nposonly, nkwonly = code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount
    if npos < skip:
        return None
    names = list(code.co_varnames[: npos + nkwonly])
    rest = npos + nkwonly
    varargs = code.co_varnames[rest] if code.co_flags & CO_VARARGS else None
    rest += bool(varargs)
    varkw = code.co_varnames[rest] if code.co_flags & CO_VARKEYWORDS else None
    every = [*names, varargs or "", varkw or ""]
    if any(n.startswith(RESERVED_PREFIX) for n in every):
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
