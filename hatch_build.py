"""Build hook: compile coheriq's optional C proxy where a compiler can, leave it out where not.

hatchling builds coheriq; this hook (``[tool.hatch.build.targets.wheel.hooks.custom]``
in pyproject.toml) adds ``coheriq/_cproxy.c``, compiled by setuptools' compiler
support for this Python (free-threaded builds too). If compiling fails (no
compiler: ``CC=false`` simulates it), the wheel is built without it, as a
pure-Python wheel, and coheriq runs on its Python proxy, the reference.
``COHERIQ_REQUIRE_COMPILED=1`` turns that fallback into an error (the release
wheels are built with it, so a wheel that claims a platform always carries the
extension).

Every wheel, editable ones too, also gets ``coheriq-accelerate.pth`` at the top
of site-packages: at interpreter start-up it accelerates the libraries that the
environment variable ``COHERIQ_ACCELERATE`` names, and profiles the process where
``COHERIQ_PROFILE`` asks (``python -m coheriq run --profile``); where neither is set,
it costs two lookups in ``os.environ``.

An editable install (``pip install -e .``) compiles the extension into the
source tree, next to ``coheriq/_cproxy.c``, where the editable import finds it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCE = "coheriq/_cproxy.c"
PTH_SOURCE = "coheriq/_outside/coheriq-accelerate.pth"
PTH_NAME = "coheriq-accelerate.pth"
MODULE = "coheriq._cproxy"


class CompiledProxyHook(BuildHookInterface):  # type: ignore[type-arg]
    """Compile ``coheriq._cproxy`` into the wheel, or leave it out, saying why."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        required = os.environ.get("COHERIQ_REQUIRE_COMPILED") == "1"
        root = Path(self.root)
        editable = version == "editable"
        # The start-up hook that accelerates what COHERIQ_ACCELERATE names in every
        # interpreter (a child process too): a .pth file must lie at the top of
        # site-packages, outside the package, editable installs included.
        startup = str(root / PTH_SOURCE)
        build_data["force_include"][startup] = PTH_NAME
        build_data.setdefault("force_include_editable", {})[startup] = PTH_NAME
        self._scratch = tempfile.mkdtemp(prefix="coheriq-build-")
        try:
            built = _compile(root, Path(self._scratch), inplace=editable)
        except Exception as error:  # no compiler, no headers, an unsupported Python
            if required:
                raise RuntimeError(
                    f"coheriq: COHERIQ_REQUIRE_COMPILED=1, but {SOURCE} could not be "
                    f"compiled: {error}"
                ) from error
            self.app.display_warning(
                f"coheriq: {SOURCE} was not compiled ({error}); this install uses the "
                "pure-Python proxy, which does the same with a frame of its own per call."
            )
            return
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        if not editable:
            build_data["force_include"][str(built)] = f"coheriq/{built.name}"
        self.app.display_info(f"coheriq: compiled {SOURCE} into {built.name}")

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        if self.target_name == "wheel":
            shutil.rmtree(getattr(self, "_scratch", ""), ignore_errors=True)


def _compile(root: Path, scratch: Path, *, inplace: bool) -> Path:
    """Compile the extension with setuptools' compiler support; return the built file."""
    from setuptools import Distribution, Extension
    from setuptools.command.build_ext import build_ext

    extension = Extension(MODULE, [SOURCE])
    distribution = Distribution({"name": "coheriq", "ext_modules": [extension]})
    distribution.script_args = []
    command = build_ext(distribution)
    command.build_temp = str(scratch / "temp")
    command.build_lib = str(scratch / "lib")
    command.inplace = inplace
    command.ensure_finalized()
    here = Path.cwd()
    os.chdir(root)  # build_ext resolves the source and an in-place target from here
    try:
        command.run()
    finally:
        os.chdir(here)
    built = Path(command.get_ext_fullpath(MODULE))
    return built if built.is_absolute() else root / built


if __name__ == "__main__":  # python hatch_build.py: compile in place, for development
    with tempfile.TemporaryDirectory(prefix="coheriq-build-") as scratch:
        print(_compile(Path(__file__).parent, Path(scratch), inplace=True))
