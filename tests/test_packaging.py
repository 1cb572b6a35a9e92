"""The source tree and the package metadata: what a release is made of."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

import coheriq

ROOT = Path(__file__).resolve().parent.parent
BUILD_PRODUCTS = re.compile(r"\.(so|pyd|o|dll|dylib|whl)$|\.egg-info/|(^|/)__pycache__/")


def test_the_source_tree_tracks_no_build_product():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (an sdist, say): nothing to check")
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
    ).stdout.splitlines()
    assert tracked
    assert [path for path in tracked if BUILD_PRODUCTS.search(path)] == []


def test_the_license_is_the_one_the_metadata_names():
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License")
    assert 'license = "MIT"' in (ROOT / "pyproject.toml").read_text(encoding="utf-8")


def test_the_classifiers_name_every_supported_python():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["requires-python"] == ">=3.11"
    versions = {
        c.rsplit(" ", 1)[1]
        for c in project["classifiers"]
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    }
    supported = [f"3.{minor}" for minor in range(11, 16)]
    assert versions == set(supported)
    assert "Programming Language :: Python :: Free Threading :: 2 - Beta" in project["classifiers"]
    # The release wheels cover the same versions, and the docs say the same.
    cibuildwheel = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]
    built = cibuildwheel["cibuildwheel"]["build"].split()
    assert built == [f"cp{v.replace('.', '')}-*" for v in supported]
    index = " ".join((ROOT / "docs" / "index.rst").read_text(encoding="utf-8").split())
    assert f"CPython {', '.join(supported[:-1])} and {supported[-1]}" in index
    assert project["keywords"]
    assert "version" in project["dynamic"]  # one number: coheriq.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", coheriq.__version__)


def test_the_contributing_page_names_every_module_of_the_package():
    page = (ROOT / "docs" / "contributing.rst").read_text(encoding="utf-8")
    modules = sorted(
        {path.stem for path in (ROOT / "coheriq").rglob("*.py")} - {"__init__", "__main__"}
    )
    packages = sorted(path.parent.name for path in (ROOT / "coheriq").glob("*/__init__.py"))
    assert [name for name in packages if f"{name}/" not in page] == []
    assert [name for name in modules if not re.search(rf"(?<![\w.]){name}\b", page)] == []


def build_wheel(folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Build coheriq's wheel from this tree into ``folder``, as pip would install it."""
    pytest.importorskip("hatchling")
    pytest.importorskip("setuptools")
    pip = [sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps"]
    return subprocess.run(
        [*pip, "-w", str(folder), str(ROOT)], capture_output=True, text=True, env=env, timeout=300
    )


@pytest.mark.parametrize("compiler", ["false", "cc"], ids=["no-compiler", "compiler"])
@pytest.mark.slow
def test_a_wheel_carries_the_compiled_proxy_only_where_it_compiles(tmp_path, compiler):
    """The build hook (hatch_build.py) compiles coheriq/_cproxy.c, or leaves it out."""
    if compiler == "cc" and shutil.which("cc") is None:
        pytest.skip("no C compiler here")
    env = {k: v for k, v in os.environ.items() if k != "COHERIQ_REQUIRE_COMPILED"}
    env["CC"] = compiler
    done = build_wheel(tmp_path, env)
    assert done.returncode == 0, done.stderr
    (wheel,) = tmp_path.glob("coheriq-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    compiled = [name for name in names if name.startswith("coheriq/_cproxy.")]
    if compiler == "false":  # a pure-Python wheel, for any platform
        assert wheel.name.endswith("-py3-none-any.whl")
        assert compiled == ["coheriq/_cproxy.pyi"]
    else:  # this interpreter's ABI and platform
        tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
        abi = tag + ("t" if sysconfig.get_config_var("Py_GIL_DISABLED") else "")  # cp313t
        assert f"-{tag}-{abi}-" in wheel.name
        assert len(compiled) == 2 and "coheriq/_cproxy.c" not in names


@pytest.mark.slow
def test_a_release_build_fails_rather_than_leave_the_compiled_proxy_out(tmp_path):
    env = {**os.environ, "CC": "false", "COHERIQ_REQUIRE_COMPILED": "1"}
    done = build_wheel(tmp_path, env)
    assert done.returncode != 0
    assert "COHERIQ_REQUIRE_COMPILED=1" in done.stderr + done.stdout
    assert list(tmp_path.glob("*.whl")) == []
