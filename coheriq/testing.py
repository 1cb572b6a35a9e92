"""Support for testing code that uses coheriq, with or without pytest.

coheriq keeps process-wide state: the registry of domains, their engines and
their global choices, and the entry points read from package metadata.
:func:`isolated` gives a block a clean world of its own and puts the previous one
back afterwards, so that domains and engines made by one test never leak into
the next, without running each test in a forked process:

>>> from coheriq.testing import isolated
>>> outer = coheriq.AccelerationDomain("doc_testing")
>>> with isolated():
...     inner = coheriq.AccelerationDomain("doc_testing")  # the name is free in here
>>> coheriq.available_engines("doc_testing")  # and the outer domain is back
()

Under pytest, the fixture ``coheriq_isolated`` does the same (see
:mod:`coheriq.pytest_plugin`).
"""

from __future__ import annotations

import sys
from contextlib import contextmanager

from . import discovery
from ._call import marked
from ._library import registry
from ._stdlib import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

__all__ = ["isolated"]


@contextmanager
def isolated() -> Iterator[None]:
    """Run the block in a clean coheriq world, then restore the previous one.

    Inside the block no domain is registered (so none is settled, and no scope of
    one is open) and no entry point has been read yet. On exit, whatever the block
    created is dropped: its domains and their engines, what it read from package
    metadata, and the modules first imported inside the block that defined a
    domain or an engine (so that importing them again defines them again). The
    domains that existed before the block come back as they were.

    Environment variables are not coheriq's state: set them with pytest's
    ``monkeypatch`` or restore them yourself.
    """
    before = set(sys.modules)
    outer_domains = registry.replace({})
    outer_cache = discovery._replace_cache({})
    try:
        yield
    finally:
        inner = registry.replace(outer_domains)
        discovery._replace_cache(outer_cache)
        marked.release(_classes_marked_by(inner.values()))
        for copies in inner.values():
            for domain in copies.alive():
                domain.state.switchboard.release()
        for module in _modules_that_defined(inner.values()) - before:
            sys.modules.pop(module, None)


def _classes_marked_by(domains: Iterable[registry.Copies]) -> list[type]:
    return [
        info.reference
        for copies in domains
        for domain in copies.alive()
        for info in domain.state.class_candidates
    ]


def _modules_that_defined(domains: Iterable[registry.Copies]) -> set[str]:
    modules: set[str] = set()
    for copies in domains:
        for domain in copies.alive():
            modules.add(domain.module)
            modules.update(cls.__module__ for cls in domain.engines.classes)
    return modules
