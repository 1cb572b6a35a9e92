"""Build the C kernels; the package metadata is in pyproject.toml."""

import platform
import sys

from setuptools import Extension, setup

flags, libraries = ["-O3"], []
if sys.platform == "linux" and platform.machine() in ("x86_64", "AMD64"):
    # glibc's vectorized exp (libmvec) is called under -ffast-math, so the kernels
    # take finite values only. -ffast-math is a compile flag here on purpose: at
    # link time it would set flush-to-zero for the whole process.
    flags.append("-ffast-math")
    libraries.append("mvec")

setup(
    ext_modules=[
        Extension(
            "ragbatch_compiled._kernels",
            sources=["ragbatch_compiled/_kernels.c"],
            extra_compile_args=flags,
            libraries=libraries,
        )
    ]
)
