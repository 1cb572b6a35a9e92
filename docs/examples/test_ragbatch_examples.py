"""The examples of docs/testing.rst, run by tests/test_docs.py with the ragbatch example.

Each function is shown in the documentation with ``literalinclude``.
"""

import math

import pytest
import ragbatch

import coheriq


@pytest.mark.coheriq_engines("ragbatch")
def test_rows_sum_to_one(coheriq_engine):
    probabilities = ragbatch.softmax(ragbatch.RaggedBatch([[1.0, 3.0], [2.0]]))
    for row in probabilities:
        assert math.fsum(row) == pytest.approx(1.0)
    assert coheriq.engine_of(probabilities) == coheriq_engine


@pytest.mark.coheriq_engines("ragbatch")
@pytest.mark.coheriq_xfail(
    "ragbatch",
    ["numpy", "compiled", "hybrid", "dask", "gpu"],
    reason="sums in plain floating point",
    strict=True,
)
def test_row_sum_is_exact(coheriq_engine):
    batch = ragbatch.RaggedBatch([[1e16, 1.0, -1e16]])
    assert ragbatch.row_sum(batch)[0] == 1.0


@pytest.mark.coheriq_engines("ragbatch")
def test_hybrid_agrees_with_the_reference(coheriq_engine):
    batch = ragbatch.RaggedBatch([[1.0, 2.0, 3.0], [], [5.0]])
    with coheriq.using_engine("ragbatch", coheriq.REFERENCE):
        expected = ragbatch.softmax(batch)
    got = ragbatch.softmax(batch)
    assert list(got.row_lengths()) == list(expected.row_lengths())
    for row, want in zip(got, expected, strict=True):
        assert row == pytest.approx(want, rel=1e-12)


def test_scratch_domain(coheriq_isolated):
    domain = coheriq.AccelerationDomain("scratch")  # free in every test

    @domain.acceleration_candidate
    def double(x):
        return 2 * x

    domain.materialize()
    assert double(21) == 42
