"""The name by which pickles of users' subclasses of marked classes find their metaclass.

``coheriq.marked.subclasses_of.<class>`` (see :class:`coheriq._call.marked.SubclassesOf`),
kept for good so that such a pickle loads whichever coheriq wrote it. ``import coheriq``
imports this module, for cloudpickle's sake, but not the machinery behind the name: a
library's first marked class, or the first read of the name, does.
"""

from __future__ import annotations

__all__ = ["subclasses_of"]  # noqa: F822 - answered by __getattr__, on first read


def __getattr__(name: str) -> object:
    if name == "subclasses_of":
        from ._call.marked import subclasses_of

        return subclasses_of
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
