"""Types of coheriq's optional compiled proxy (coheriq/_cproxy.c; see coheriq/_call/proxy.py)."""

from collections.abc import Callable
from typing import Any

class Board:
    """What every compiled proxy of one domain reads at call time."""

    scoped: bool
    current: Callable[[], Any] | None
    variable: Any
    scope_type: type | None
    members: Any

    def __init__(self) -> None: ...

class Cell:
    """A candidate's settled implementation, read by its compiled proxies."""

    value: Any

    def __init__(self, value: Any = None) -> None: ...

class Proxy:
    """A candidate's proxy: calls what the candidate's domain runs in this context."""

    __name__: str
    __qualname__: str
    __wrapped__: Callable[..., Any]

    def __init__(
        self, board: Board, cell: Cell, candidate: str, receiver: bool = False
    ) -> None: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
    def __get__(self, instance: object, owner: type | None = None) -> Any: ...
    def __reduce__(self) -> str: ...
    def _coheriq_take_over(self, other: Proxy) -> None: ...
    def _coheriq_expect_defaults(
        self, defaults: tuple[Any, ...] | None, kwdefaults: dict[str, Any] | None, /
    ) -> None: ...

def set_code(function: Callable[..., Any], code: Any, /) -> None:
    """``function.__code__ = code``; on CPython 3.13+ its calls are specialized again."""

# Not on CPython 3.11, whose interpreter runs a function's code whatever its vectorcall.
def set_dispatcher(function: Callable[..., Any], code: Any, /) -> None:
    """``function.__code__ = code``; its calls then call the code's last constant, a Proxy."""
