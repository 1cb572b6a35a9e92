"""A library laid out as real ones are, for ``benchmarks/threads.py``.

Everything is defined at module level: the unmarked functions, the candidates and
the engines' methods. That matters on a free-threaded CPython, which defers the
reference counts of module-level functions but not of nested ones (a ``def``
inside a function), so only these say how a library's calls scale with threads.
Four of each, so that each of four threads can call a function of its own.

``reference_lib`` stays on its reference (its engine ``fast`` is for blocks);
``engine_lib``'s engine ``fast`` is chosen globally by ``threads.py``.
"""

from __future__ import annotations

import coheriq

reference_lib = coheriq.AccelerationDomain("threadlib_reference")
engine_lib = coheriq.AccelerationDomain("threadlib_engine")


def plain_0(x: int) -> int:
    return x


def plain_1(x: int) -> int:
    return x


def plain_2(x: int) -> int:
    return x


def plain_3(x: int) -> int:
    return x


@reference_lib.acceleration_candidate
def ref_0(x: int) -> int:
    return x


@reference_lib.acceleration_candidate
def ref_1(x: int) -> int:
    return x


@reference_lib.acceleration_candidate
def ref_2(x: int) -> int:
    return x


@reference_lib.acceleration_candidate
def ref_3(x: int) -> int:
    return x


@engine_lib.acceleration_candidate
def eng_0(x: int) -> int:
    return x


@engine_lib.acceleration_candidate
def eng_1(x: int) -> int:
    return x


@engine_lib.acceleration_candidate
def eng_2(x: int) -> int:
    return x


@engine_lib.acceleration_candidate
def eng_3(x: int) -> int:
    return x


reference_lib.materialize()
engine_lib.materialize()


class ReferenceLibFast(coheriq.engine_class(reference_lib), name="fast"):  # type: ignore[misc]
    """Methods, as most engines' implementations are."""

    def ref_0(self, x: int) -> int:
        return x

    def ref_1(self, x: int) -> int:
        return x

    def ref_2(self, x: int) -> int:
        return x

    def ref_3(self, x: int) -> int:
        return x


class EngineLibFast(coheriq.engine_class(engine_lib), name="fast"):  # type: ignore[misc]
    """Methods, as most engines' implementations are."""

    def eng_0(self, x: int) -> int:
        return x

    def eng_1(self, x: int) -> int:
        return x

    def eng_2(self, x: int) -> int:
        return x

    def eng_3(self, x: int) -> int:
        return x
