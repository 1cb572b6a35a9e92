"""Invariants every correct engine of ragbatch satisfies.

Run them on an engine with ``pytest --pyargs ragbatch.tests --coheriq-engine=ragbatch:NAME``
(the reference when no engine is named). Nothing here names an engine's classes:
results are checked through the candidates, against properties and against the
reference within 1e-12.
"""

from __future__ import annotations

import math
import random

import pytest
import ragbatch

import coheriq

TOLERANCE = 1e-12


def engine() -> str:
    """The engine these tests run on (the domain's global choice, made by now)."""
    ragbatch.RaggedBatch([])  # makes the choice if nothing has yet
    return coheriq.active_implementation("ragbatch")


def random_rows(seed: int, n_rows: int, longest: int) -> list[list[float]]:
    rng = random.Random(seed)
    return [[rng.gauss(0, 4) for _ in range(rng.randrange(longest + 1))] for _ in range(n_rows)]


def on_reference(fn, *args):
    """``fn(*args)`` on the reference, with every batch argument rebuilt there."""
    with coheriq.using_engine("ragbatch", coheriq.REFERENCE):
        args = tuple(
            ragbatch.from_flat(*ragbatch.to_flat(a)) if isinstance(a, ragbatch.RaggedBatch) else a
            for a in args
        )
        return fn(*args)


def close(got, want) -> bool:
    got, want = [float(x) for x in got], [float(x) for x in want]
    return len(got) == len(want) and all(
        (math.isnan(g) and math.isnan(w)) or g == pytest.approx(w, rel=TOLERANCE, abs=1e-300)
        for g, w in zip(got, want, strict=True)
    )


BATCHES = {
    "mixed": random_rows(1, 40, 30),
    "empty rows": [[], [1.0], [], [2.0, -1.0], []],
    "no rows": [],
    "single row": [[3.0, 1.0, 2.0, 2.0]],
    "ties": [[1.0, 1.0, 1.0], [0.0, 5.0, 5.0, 0.0]],
    # Rows long enough that engines keep a short list of the best (not a sort), with
    # runs of equal values around where the list's last entry falls.
    "long rows, ties": [[float(i % 7) for i in range(300)], [float(-(i % 4)) for i in range(97)]],
    # Rows of every length up to 40 with few distinct values: ties wherever an engine
    # cuts a row into parts (lanes, blocks) or bounds what can still be kept.
    "short rows, ties": [
        [float(random.Random(n).randrange(4)) for _ in range(n)] for n in range(41)
    ],
}


# -- the container -------------------------------------------------------------------


@pytest.mark.parametrize("rows", BATCHES.values(), ids=BATCHES.keys())
def test_container_holds_rows(rows):
    batch = ragbatch.RaggedBatch(rows)
    assert isinstance(batch, ragbatch.RaggedBatch)
    assert len(batch) == len(rows)
    assert [list(r) for r in batch] == rows
    assert list(batch.row_lengths()) == [len(r) for r in rows]
    assert batch == on_reference(ragbatch.RaggedBatch, rows)
    assert batch.backend == coheriq.engine_of(batch) == engine()


def test_indexing_returns_copies():
    batch = ragbatch.RaggedBatch([[1.0, 2.0], [3.0]])
    row = batch[0]
    row[0] = 99.0
    assert list(batch[0]) == [1.0, 2.0]
    assert list(batch[-1]) == [3.0]
    with pytest.raises(IndexError):
        batch[2]


def test_equality_across_engines_and_values():
    batch = ragbatch.RaggedBatch([[1.0], [2.0, 3.0]])
    assert batch == ragbatch.from_flat([1.0, 2.0, 3.0], [0, 1, 3])
    assert batch != ragbatch.RaggedBatch([[1.0], [2.0, 4.0]])
    assert batch != ragbatch.RaggedBatch([[1.0, 2.0], [3.0]])
    assert (batch == "not a batch") is False


def test_flat_round_trip_and_classmethod():
    values, offsets = [1.0, 2.0, 3.0, 4.0], [0, 1, 1, 4]
    batch = ragbatch.RaggedBatch.from_flat(values, offsets)
    assert batch == ragbatch.from_flat(values, offsets)
    got_values, got_offsets = ragbatch.to_flat(batch)
    assert [float(v) for v in got_values] == values
    assert [int(o) for o in got_offsets] == offsets
    values[0] = 99.0  # from_flat copied its input
    assert list(batch[0]) == [1.0]


BAD_OFFSETS = [
    ([1.0, 2.0], [1, 2], "offsets must start at 0, not 1."),
    ([1.0, 2.0], [0, 2, 1, 2], "offsets must not decrease, but offsets[2] = 1 is less than "),
    ([1.0, 2.0], [0, 1], "offsets must end at the number of values, 2, not at 1."),
    ([1.0, 2.0], [0, 3], "offsets must end at the number of values, 2, not at 3."),
    ([], [], "offsets must not be empty"),
]


@pytest.mark.parametrize(("values", "offsets", "message"), BAD_OFFSETS)
def test_invalid_offsets_raise_the_same_error_everywhere(values, offsets, message):
    for make in (ragbatch.from_flat, ragbatch.RaggedBatch.from_flat):
        with pytest.raises(ValueError) as error:
            make(values, offsets)
        assert str(error.value).startswith(message)


# -- the functions ------------------------------------------------------------------


@pytest.mark.parametrize("rows", BATCHES.values(), ids=BATCHES.keys())
def test_softmax(rows):
    batch = ragbatch.RaggedBatch(rows)
    result = ragbatch.softmax(batch)
    assert isinstance(result, ragbatch.RaggedBatch)
    assert list(result.row_lengths()) == [len(r) for r in rows]
    for row, probabilities in zip(rows, result, strict=True):
        if row:
            assert math.fsum(probabilities) == pytest.approx(1.0, rel=1e-12)
            assert all(0.0 < p <= 1.0 for p in probabilities)
            assert probabilities.index(max(probabilities)) == row.index(max(row))
    shifted = ragbatch.RaggedBatch([[x + 7.5 for x in row] for row in rows])
    assert close(ragbatch.softmax(shifted).values, result.values)
    assert close(result.values, on_reference(ragbatch.softmax, batch).values)


@pytest.mark.parametrize("k", [1, 3, 5, 8, 9, 20, 50])
@pytest.mark.parametrize("rows", BATCHES.values(), ids=BATCHES.keys())
def test_topk(rows, k):
    batch = ragbatch.RaggedBatch(rows)
    indices, probabilities = ragbatch.topk(batch, k)
    softmax = ragbatch.softmax(batch)
    assert list(indices.row_lengths()) == [min(k, len(r)) for r in rows]
    for row, best, probs, all_probs in zip(rows, indices, probabilities, softmax, strict=True):
        best = [int(i) for i in best]
        expected = sorted(range(len(row)), key=lambda i: (-row[i], i))[:k]
        assert best == expected  # larger first, equal values in index order
        assert close(probs, [all_probs[i] for i in best])
    want_indices, want_probabilities = on_reference(ragbatch.topk, batch, k)
    assert close(indices.values, want_indices.values)
    assert close(probabilities.values, want_probabilities.values)


@pytest.mark.parametrize("k", [0, -1, 2.5, True, "3", None])
def test_topk_rejects_bad_k(k):
    with pytest.raises(ValueError, match="k must be a positive integer"):
        ragbatch.topk(ragbatch.RaggedBatch([[1.0]]), k)


@pytest.mark.parametrize("rows", BATCHES.values(), ids=BATCHES.keys())
def test_row_sum_and_mean(rows):
    batch = ragbatch.RaggedBatch(rows)
    sums, means = list(ragbatch.row_sum(batch)), list(ragbatch.row_mean(batch))
    assert len(sums) == len(means) == len(rows)
    for row, total, mean in zip(rows, sums, means, strict=True):
        assert float(total) == pytest.approx(math.fsum(row), rel=1e-12, abs=1e-12)
        if row:
            assert float(mean) == pytest.approx(math.fsum(row) / len(row), rel=1e-12, abs=1e-12)
        else:
            assert total == 0.0 and math.isnan(mean)


def test_a_row_of_a_million_values():
    rng = random.Random(7)
    row = [rng.uniform(-20, 20) for _ in range(10**6)]
    row[123_456] = 25.0  # the largest, once
    batch = ragbatch.RaggedBatch([row, [1.0]])
    probabilities = ragbatch.softmax(batch)
    assert math.fsum(probabilities[0]) == pytest.approx(1.0, rel=1e-9)
    indices, top = ragbatch.topk(batch, 3)
    assert int(indices[0][0]) == 123_456
    assert float(top[0][0]) == pytest.approx(float(probabilities[0][123_456]), rel=1e-12)
    assert float(ragbatch.row_sum(batch)[0]) == pytest.approx(math.fsum(row), rel=1e-9)


def test_batches_from_another_engine_are_accepted():
    rows = BATCHES["mixed"]
    with coheriq.using_engine("ragbatch", coheriq.REFERENCE):
        made_by_reference = ragbatch.RaggedBatch(rows)
    made_here = ragbatch.RaggedBatch(rows)
    assert close(ragbatch.softmax(made_by_reference).values, ragbatch.softmax(made_here).values)
    with coheriq.using_engine("ragbatch", coheriq.REFERENCE):
        assert close(ragbatch.row_mean(made_here), ragbatch.row_mean(made_by_reference))


def test_results_come_in_this_engines_container():
    batch = ragbatch.RaggedBatch([[1.0, 2.0]])
    indices, probabilities = ragbatch.topk(batch, 1)
    for made in (
        ragbatch.softmax(batch),
        indices,
        probabilities,
        ragbatch.from_flat([1.0], [0, 1]),
    ):
        assert coheriq.engine_of(made) == engine()
