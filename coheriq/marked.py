"""The name that pickles of users' subclasses of marked classes use. Kept for good.

A user's subclass of a marked class, defined in ``__main__``, is pickled by value
(cloudpickle: dask, joblib), and its metaclass by the name
``coheriq.marked.subclasses_of.<class>``; every coheriq answers it, so that such a
pickle loads whichever coheriq wrote it. See
:class:`coheriq._call.marked.SubclassesOf`.
"""

from ._call.marked import subclasses_of

__all__ = ["subclasses_of"]
