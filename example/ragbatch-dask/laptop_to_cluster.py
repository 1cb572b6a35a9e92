"""The same call sites on a laptop and on a cluster: ``python laptop_to_cluster.py``.

Runs one small pipeline under the reference, the compiled engine and the dask
engine (a local cluster of two worker processes, or the scheduler named by
RAGBATCH_DASK_SCHEDULER), then shows that code running on the workers uses the
client's engine too.
"""

import ragbatch

import coheriq


def pipeline(values, offsets):
    batch = ragbatch.from_flat(values, offsets)
    indices, probabilities = ragbatch.topk(batch, 2)
    return batch.backend, [list(row) for row in indices], list(ragbatch.row_sum(probabilities))


def on_a_worker():
    """Library code that a cluster job runs on a worker."""
    batch = ragbatch.RaggedBatch([[3.0, 1.0, 2.0]])
    return coheriq.active_implementation("ragbatch"), ragbatch.softmax(batch).backend


def main():
    values, offsets = [0.5, 2.0, 1.0, 4.0, 3.0, -1.0], [0, 3, 3, 6]
    for engine in ["reference", "compiled", "dask"]:
        with coheriq.using_engine("ragbatch", engine):
            backend, best, mass = pipeline(values, offsets)
        mass = [round(float(m), 3) for m in mass]
        print(f"{engine:<10} container={backend:<10} top-2={best} mass={mass}")

    coheriq.enable_engine("ragbatch", "dask")  # the whole program, on the cluster
    print(coheriq.explain(ragbatch.topk))
    client = coheriq.resolve_impl(ragbatch.topk).__self__.client
    print("on the workers:", sorted(set(client.run(on_a_worker).values())))


if __name__ == "__main__":
    main()
