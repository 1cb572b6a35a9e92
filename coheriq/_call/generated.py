"""Generated functions that take a candidate's own parameters, and where their code claims to be.

A proxy or trampoline is generated, as :mod:`dataclasses` generates methods,
with the candidate's parameter list (:func:`parameter_lists`), so that it passes
arguments on without packing them into a tuple and a dict; its code claims the
candidate's file, first line and qualified name (:func:`on_one_line`), so that
tracebacks and :func:`inspect.getsource` show the library's source.
"""

from __future__ import annotations

import sys

from .._stdlib import CO_VARARGS, CO_VARKEYWORDS, TYPE_CHECKING, FunctionType

if TYPE_CHECKING:
    from typing import Any

__all__ = ["RESERVED_PREFIX", "Method", "on_one_line", "parameter_lists"]

# Parameters named so could clash with the generated code's own names.
RESERVED_PREFIX = "_coheriq"


def on_one_line(code: Any, line: int, qualname: str) -> Any:
    """Return ``code`` placed at ``line`` of its file, every instruction on that line.

    A traceback through a proxy then shows the candidate's own first line (its
    ``def``, or the decorator above it), not lines of the generated source. The
    location table is rewritten to entries that each say "the same line as
    before": from Python 3.11 on, entries of code 13, "no columns", with a line
    delta of 0, covering at most 8 code units each (CPython's
    ``Objects/locations.md``); on 3.10, (bytes, line delta 0) pairs.
    """
    changes: dict[str, Any] = {"co_firstlineno": line}
    table = bytearray()
    if sys.version_info >= (3, 11):
        changes["co_qualname"] = qualname
        units = len(code.co_code) // 2
        while units:
            span = min(units, 8)
            table += bytes((0x80 | 13 << 3 | (span - 1), 0))
            units -= span
    else:
        size = len(code.co_code)
        while size:
            span = min(size, 254)
            table += bytes((span, 0))
            size -= span
    changes["co_linetable"] = bytes(table)
    return code.replace(**changes)


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
