"""Support for testing code that uses coheriq, with or without pytest.

:func:`isolated` gives a block a clean coheriq world (no domain, engine or global choice, no
package metadata read) and puts the previous one back afterwards, so that one test's domains
and engines never leak into the next, without forking:

>>> from coheriq.testing import isolated
>>> outer = coheriq.AccelerationDomain("doc_testing")
>>> with isolated():
...     inner = coheriq.AccelerationDomain("doc_testing")  # the name is free in here
>>> coheriq.available_engines("doc_testing")  # and the outer domain is back
()

Under pytest, the fixture ``coheriq_isolated`` does the same (see :mod:`coheriq.pytest_plugin`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from . import discovery
from ._call import marked
from ._library import registry

__all__ = ["frozen_crossovers", "isolated"]


@contextmanager
def isolated() -> Iterator[None]:
    """Run the block in a clean coheriq world, then restore the previous one.

    Inside, no domain is registered and no entry point has been read. On exit, what the
    block made is dropped: its domains and engines, what it read from package metadata, and
    the modules first imported inside it that defined a domain or an engine (importing them
    again defines them again); the domains from before come back as they were. Environment
    variables are not coheriq's state: set them with ``monkeypatch`` or restore them yourself.
    """
    before = set(sys.modules)
    outer_domains = registry.replace({})
    outer_cache = discovery._replace_cache({})
    try:
        yield
    finally:
        inner = registry.replace(outer_domains)
        discovery._replace_cache(outer_cache)
        domains = [domain for copies in inner.values() for domain in copies.alive()]
        marked.release([info.reference for d in domains for info in d.state.class_candidates])
        modules = set()
        for domain in domains:
            domain.state.switchboard.release()
            modules.add(domain.module)
            modules.update(cls.__module__ for cls in domain.engines.classes)
        for module in modules - before:
            sys.modules.pop(module, None)


@contextmanager
def frozen_crossovers(mode: str = "declared") -> Iterator[None]:
    """Hold every engine's crossover (:func:`coheriq.crossover`) at ``mode`` in the block:
    ``"declared"``, the engines' declared defaults whatever ``coheriq calibrate`` measured
    on this machine (what the pytest plugin does for a whole run); ``"measured"``; or
    ``"off"``, none (engines run every call, as to time an engine alone); then put back
    what held before. For every thread: a test's calls never depend on timing."""
    from ._engines.crossover import freeze

    before = freeze(mode)
    try:
        yield
    finally:
        freeze(before)
