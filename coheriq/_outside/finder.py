"""The finder that marks declared modules as they are imported, reusing their real loaders.

:class:`DeclaredModules` stands first on :data:`sys.meta_path`. For a module no
activated library declares it answers ``None`` at once (one dictionary lookup),
and the import goes on as if it were not there. For a declared module it asks
the finders after it for the module's spec (so the same file is found, by the
same finder, as without coheriq) and gives the spec a :class:`MarkingLoader`
around the real loader: the real loader creates the module, and, where it runs
modules from source as the standard file loaders do
(:class:`SourceMarkingLoader`), the import system runs the module's marking
code as it would run the loader's own (see :func:`~coheriq._outside.adapter.marking_code`);
any other loader runs the module itself, and it is marked when it has run.

A finder, rather than replacing ``builtins.__import__`` or setting attributes
on the library's modules, because it sees every import: ``importlib.import_module``,
``python -m``, lazily loaded submodules (``importlib.util.LazyLoader`` wraps
the loader this finder gives), imports from C and Cython code, and reloads. The
module's ``__loader__`` and ``__spec__.loader`` are the real loader again before
its body runs, so ``inspect``, ``importlib.resources`` and ``linecache`` see
the module as they would without coheriq.
"""

from __future__ import annotations

import sys
from _frozen_importlib_external import _LoaderBasics

from .._stdlib import TYPE_CHECKING
from .adapter import marking_code, runs_from_source

if TYPE_CHECKING:
    from importlib.abc import Loader
else:
    # importlib.abc imports importlib.resources (about 20 ms, in every process that
    # COHERIQ_ACCELERATE starts); the import system needs no base class, only exec_module.
    Loader = object

if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import CodeType, ModuleType
    from typing import Any

    from .adapter import Adapter

__all__ = ["DeclaredModules", "MarkingLoader", "SourceMarkingLoader", "installed_finder"]


class DeclaredModules:
    """A meta path finder for the modules of the libraries accelerated from the outside."""

    def __init__(self) -> None:
        self.adapters: dict[str, Adapter] = {}  # module name -> the adapter of its library

    def __repr__(self) -> str:
        return f"<coheriq finder of {len(self.adapters)} declared modules>"

    def watch(self, adapter: Adapter) -> None:
        """Mark the modules ``adapter`` declares when they are imported from now on."""
        # The top-level module too: its run makes the library's domain.
        for module in [adapter.declaration.library, *adapter.declaration.modules]:
            self.adapters[module] = adapter

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        """The spec the other finders give a declared module, with a marking loader; else None."""
        adapter = self.adapters.get(fullname)
        if adapter is None:
            return None
        spec = self._spec_from_the_others(fullname, path, target)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec  # a namespace package, or a loader of the old protocol: left alone
        marking = SourceMarkingLoader if runs_from_source(spec.loader) else MarkingLoader
        spec.loader = marking(spec.loader, adapter)
        return spec

    def _spec_from_the_others(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None
    ) -> ModuleSpec | None:
        """The spec that the finders after this one on ``sys.meta_path`` find."""
        finders = list(sys.meta_path)
        after = finders[finders.index(self) + 1 :] if self in finders else finders
        for finder in after:
            find_spec = getattr(finder, "find_spec", None)
            if find_spec is None:
                continue
            spec: ModuleSpec | None = find_spec(fullname, path, target)
            if spec is not None:
                return spec
        return None

    def invalidate_caches(self) -> None:
        """Nothing is cached here (:func:`importlib.invalidate_caches` asks every finder)."""


class MarkingLoader(Loader):
    """A declared module's real loader, whose modules are marked as they execute.

    Everything but ``exec_module`` (and, for :class:`SourceMarkingLoader`,
    ``get_code``) is the real loader's (``get_source``, ``get_resource_reader``,
    ``is_package``, ...). This class is for a loader that runs modules its own way
    (a C extension's, a zip file's): the module is marked when it has run.
    """

    _coheriq_marking = True  # how the marking code tells this loader from the real one

    def __init__(self, loader: Any, adapter: Adapter) -> None:
        self.loader = loader
        self.adapter = adapter

    def __repr__(self) -> str:
        return f"<coheriq marking loader around {self.loader!r}>"

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        """What the real loader creates; the library's top-level module, with its domain made.

        The domain is made before the import system puts the module in
        :data:`sys.modules`, so that no other thread importing a submodule can
        find the library without it.
        """
        create = getattr(self.loader, "create_module", None)
        module: ModuleType | None = None if create is None else create(spec)
        if spec.name == self.adapter.declaration.library:
            if module is None:
                module = type(sys)(spec.name)  # what the import system makes otherwise
            self.adapter.make_domain(module)
            self.adapter.created = module
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Run ``module`` with the real loader, its declared names marked."""
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:
            spec.loader = self.loader
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = self.loader
        self.adapter.execute(module, self.loader)


class SourceMarkingLoader(MarkingLoader):
    """The marking loader around a loader that runs modules from source, as the standard ones do.

    Its ``get_code`` is the module's marking code
    (:func:`~coheriq._outside.adapter.marking_code`), and its ``exec_module`` the
    standard loaders' own: the import system runs that code as it runs the real
    loader's, in the module's globals and through importlib's frames, which
    tracebacks and warnings leave out. ``runpy`` (``python -m``) runs the same
    code, from ``get_code``.
    """

    exec_module = _LoaderBasics.exec_module

    def get_code(self, fullname: str) -> CodeType:
        """The code of declared module ``fullname`` that marks its declared names as it runs."""
        if self.adapter.stepped_back is not None:  # the library marks its own
            code: CodeType = self.loader.get_code(fullname)
            return code
        return marking_code(self.adapter, self.loader, fullname)


_finder: DeclaredModules | None = None


def installed_finder() -> DeclaredModules:
    """The finder, first on :data:`sys.meta_path` (put there on the first call)."""
    global _finder
    if _finder is None:
        _finder = DeclaredModules()
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
    return _finder
