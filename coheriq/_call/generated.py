"""The parameter lists of generated functions: a candidate's own, so that a proxy or
trampoline passes arguments on as they came, without packing them (as :mod:`dataclasses`
generates methods)."""

from __future__ import annotations

from .._stdlib import CO_VARARGS, CO_VARKEYWORDS, TYPE_CHECKING, FunctionType

if TYPE_CHECKING:
    from typing import Any

__all__ = ["RESERVED_PREFIX", "Method", "parameter_lists"]

# Parameters named so could clash with the generated code's own names.
RESERVED_PREFIX = "_coheriq"


class Method:
    """A function whose first parameter (``self`` or ``cls``) the caller does not pass."""

    __slots__ = ("function",)

    def __init__(self, function: Any) -> None:
        self.function = function


def parameter_lists(fn: object) -> tuple[str, str] | None:
    """Return ``(parameters, arguments)`` source for ``fn``'s exact signature.

    ``parameters`` is what goes between the parentheses of ``def`` (defaults as
    ``None`` placeholders) and ``arguments`` what passes each parameter on to the
    implementation. Returns ``None`` when the signature cannot be reproduced: not
    a plain Python function, or a parameter name that coheriq uses itself.
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
