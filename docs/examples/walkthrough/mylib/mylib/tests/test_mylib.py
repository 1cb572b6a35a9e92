"""Invariants every correct engine of mylib satisfies.

Run them on an engine with ``pytest --pyargs mylib.tests --coheriq-engine=mylib:NAME``.
"""

import mylib
import pytest

import coheriq


def engine() -> str:
    """The engine these tests run on, for failure messages."""
    return coheriq.active_implementation("mylib") or coheriq.REFERENCE


def test_normalize_sums_to_one():
    result = mylib.normalize([1.0, 2.0, 5.0])
    assert sum(result) == pytest.approx(1.0), f"on engine {engine()}"


def test_normalize_agrees_with_the_reference():
    with coheriq.using_engine("mylib", coheriq.REFERENCE):
        expected = mylib.normalize([1.0, 2.0, 5.0])
    assert mylib.normalize([1.0, 2.0, 5.0]) == pytest.approx(expected), f"on engine {engine()}"


def test_mean():
    assert mylib.mean([1.0, 2.0, 6.0]) == pytest.approx(3.0), f"on engine {engine()}"


def test_histogram_counts_every_value():
    histogram = mylib.Histogram([0.1, 0.3, 0.35, 0.9, 1.0])
    assert isinstance(histogram, mylib.Histogram)  # whichever engine made it
    assert histogram.counts == [1, 2, 0, 2], f"on engine {engine()}"


def test_density_reads_a_histogram_of_any_engine():
    with coheriq.using_engine("mylib", coheriq.REFERENCE):
        made_by_the_reference = mylib.Histogram([0.1, 0.6, 0.7, 0.8])
    assert mylib.density(made_by_the_reference) == pytest.approx([0.25, 0.0, 0.5, 0.25])
