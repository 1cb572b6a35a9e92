"""The finder that marks declared modules as they are imported, around their real loaders.

:class:`DeclaredModules` stands first on :data:`sys.meta_path`; it answers None at once for an
undeclared module, and for a declared one wraps the loader that the finders after it give (so
the same file is found as without coheriq) in a :class:`MarkingLoader`."""

from __future__ import annotations

import sys
from _frozen_importlib_external import _LoaderBasics

from .._stdlib import TYPE_CHECKING
from .adapter import runs_from_source
from .startup import spec_after

if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import CodeType, ModuleType
    from typing import Any

    from .adapter import Adapter


class DeclaredModules:
    """A meta path finder for the modules of the libraries accelerated from the outside."""

    def __init__(self) -> None:
        self.adapters: dict[str, Adapter] = {}  # module name -> the adapter of its library

    def __repr__(self) -> str:
        return f"<coheriq finder of {len(self.adapters)} declared modules>"

    def watch(self, adapter: Adapter) -> None:
        """Mark the modules ``adapter`` declares, and its top-level one, as they are imported."""
        for module in [adapter.declaration.library, *adapter.declaration.modules]:
            self.adapters[module] = adapter

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        """The spec the other finders give a declared module, with a marking loader; else None."""
        adapter = self.adapters.get(fullname)
        if adapter is None:
            return None
        spec = spec_after(self, fullname, path, target)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec  # a namespace package, or a loader of the old protocol: left alone
        marking = SourceMarkingLoader if runs_from_source(spec.loader) else MarkingLoader
        spec.loader = marking(spec.loader, adapter)  # type: ignore[assignment]
        return spec


class MarkingLoader:
    """A declared module's real loader, for one that runs modules its own way (a C
    extension's, a zip file's): the module is marked when it has run. All but
    ``create_module`` and ``exec_module`` is the real loader's."""

    _coheriq_marking = True  # how the marking code tells this loader from the real one

    def __init__(self, loader: Any, adapter: Adapter) -> None:
        self.loader, self.adapter = loader, adapter

    def __repr__(self) -> str:
        return f"<coheriq marking loader around {self.loader!r}>"

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        """What the real loader creates; for the library's top-level module, with its domain
        made before the module is in :data:`sys.modules`, where other threads could see it."""
        create = getattr(self.loader, "create_module", None)
        module: ModuleType | None = None if create is None else create(spec)
        if spec.name == self.adapter.declaration.library:
            if module is None:
                module = type(sys)(spec.name)  # what the import system makes otherwise
            self.adapter.make_domain(vars(module))
            self.adapter.created = module
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Run ``module`` with the real loader (its loader again), its declared names marked."""
        self.adapter.execute(module, self.loader)


class SourceMarkingLoader(MarkingLoader):
    """The marking loader around a loader that runs modules from source, as the standard
    ones do: the import system (or ``runpy``) runs the module's marking code from
    ``get_code`` as it runs the real loader's (see :meth:`.Adapter.marking_code`)."""

    exec_module = _LoaderBasics.exec_module

    def get_code(self, fullname: str) -> CodeType:
        """The code of declared module ``fullname`` that marks its declared names as it runs."""
        return self.adapter.marking_code(self.loader, fullname)


_finder = DeclaredModules()


def installed_finder() -> DeclaredModules:
    """The finder, first on :data:`sys.meta_path` (put there on the first call)."""
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
    return _finder
