"""Engine "onedict" of cachetools, a library that never adopted coheriq.

cachetools' ``FIFOCache`` keeps the order of its keys in a
``collections.OrderedDict`` beside the cache's own data. The data is a ``dict``,
which keeps insertion order already: this engine's ``FIFOCache`` reads the order
from it, and so holds each key once instead of twice. A key set again moves to
the end, as in cachetools. Everything else is cachetools' own. ``constructed``
counts the caches the engine made, so that a test can tell it ran.

The engine is a subclass of the reference class that coheriq made from the
installed declaration (``cachetools_onedict.declaration.json``), as for any
library.
"""

from __future__ import annotations

import cachetools

import coheriq

constructed = [0]  # caches this engine constructed, in this process


class OneDictFIFOCache(cachetools.Cache):
    """A first-in, first-out cache whose order is the order of its own data."""

    def __init__(self, maxsize, getsizeof=None):
        cachetools.Cache.__init__(self, maxsize, getsizeof)
        constructed[0] += 1

    def __setitem__(self, key, value, cache_setitem=cachetools.Cache.__setitem__):
        cache_setitem(self, key, value)
        data = self._Cache__data
        if next(reversed(data)) != key:  # set again: to the end, as FIFOCache moves it
            data[key] = data.pop(key)

    def popitem(self):
        """Remove and return the `(key, value)` pair first inserted."""
        try:
            key = next(iter(self._Cache__data))
        except StopIteration:
            raise KeyError(f"{type(self).__name__} is empty") from None
        value = cachetools.Cache.__getitem__(self, key)
        del self[key]
        return (key, value)


# repr() and error messages say "FIFOCache"; pickles name the class by its qualname.
OneDictFIFOCache.__name__ = "FIFOCache"


class OneDict(coheriq.engine_class("cachetools"), name="onedict"):
    """cachetools whose FIFOCache holds each key once: its order is its data's."""

    FIFOCache = OneDictFIFOCache
