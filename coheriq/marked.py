"""The name that pickles of users' subclasses of marked classes use. Kept for good.

A user's subclass of a marked class, defined in ``__main__``, is pickled by value
(cloudpickle: dask, joblib), and its metaclass by the name
``coheriq.marked.subclasses_of.<class>``; every coheriq answers it, so that such a
pickle loads whichever coheriq wrote it. See
:class:`coheriq._call.marked.SubclassesOf`.

``import coheriq`` imports this module, for cloudpickle's sake, but not the
machinery of marked classes behind it: that comes with a library's first class,
or with the first read of ``subclasses_of`` (a pickle loading in a new process).
"""

from __future__ import annotations

__all__ = ["subclasses_of"]  # noqa: F822 - answered by __getattr__, on first read


def __getattr__(name: str) -> object:
    if name == "subclasses_of":
        from ._call.marked import subclasses_of

        return subclasses_of
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
