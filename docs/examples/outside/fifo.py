"""cachetools, which never adopted coheriq, on the engine "onedict" from the outside."""

import coheriq

coheriq.accelerate("cachetools", "onedict")  # before the import: every name is marked

import cachetools  # noqa: E402 - after accelerate, on purpose

cache = cachetools.FIFOCache(maxsize=2)
for key in "abc":
    cache[key] = key.upper()
print(cache, isinstance(cache, cachetools.FIFOCache), type(cache).__module__)
print(coheriq.explain(cachetools.FIFOCache))
