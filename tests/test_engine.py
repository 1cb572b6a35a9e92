"""Engines in the decorator form, and engine_class."""

import pytest

import coheriq as cq


def test_override_forms_and_static_calls(lib):
    engine = cq.AccelerationEngine(lib.name, "fast")

    @engine.override
    def total(xs):
        return ("fast", sum(xs))

    @engine.override("normalize")
    def fast_normalize(xs, *, scale=1.0):
        return "fast normalize"

    @engine.override(name="Batch")
    class FastBatch:
        def __init__(self, rows):
            self.rows = rows

    assert total([1]) == ("fast", 1)  # the decorator returns the function unchanged
    cls = engine.materialize()
    assert cls is engine.engine_class is cq.engine_class(lib.name, "fast")
    assert cls.total is total and cls.Batch is FastBatch
    assert issubclass(cls, cq.engine_class(lib.name))
    cq.enable_engine(lib.name, engine)
    assert lib.total([2]) == ("fast", 2)
    assert lib.normalize([1]) == "fast normalize"
    assert type(lib.Batch([1])) is FastBatch
    assert "materialized" in repr(engine)


@pytest.mark.parametrize("how", ["name", "object", "class"])
def test_bases_by_name_object_or_class(lib, how):
    gpu = cq.AccelerationEngine(lib.name, "gpu")
    gpu.override("total")(lambda xs: "gpu")
    gpu_cls = gpu.materialize()
    mpi = cq.AccelerationEngine(lib.name, "mpi")
    mpi.override("total")(lambda xs: "mpi")
    mpi.override("normalize")(lambda xs, *, scale=1.0: "mpi")
    mpi.materialize()
    base = {"name": "gpu", "object": gpu, "class": gpu_cls}[how]
    hybrid = cq.AccelerationEngine(lib.name, "hybrid", [base, "mpi"]).materialize()
    assert hybrid.__mro__[1:3] == (gpu_cls, mpi.engine_class)
    with cq.using_engine(lib.name, "hybrid"):
        assert lib.total([]) == "gpu"
        assert lib.normalize([]) == "mpi"


def test_decorator_and_class_forms_combine(lib):
    class Gpu(cq.engine_class(lib.name), name="gpu"):
        def total(self, xs):
            return ["gpu", *super().total(xs)]

    engine = cq.AccelerationEngine(lib.name, "fast", [Gpu])
    engine.materialize()

    class Hybrid(engine.engine_class, name="hybrid"):
        def total(self, xs):
            return ["hybrid", *super().total(xs)]

    with cq.using_engine(lib.name, "hybrid"):
        assert lib.total([1]) == ["hybrid", "gpu", "reference", 1]


def test_engine_errors_name_what_is_wrong(lib):
    with pytest.raises(cq.CoheriqDomainNotFoundError):
        cq.AccelerationEngine(lib.name + "_nope", "fast")
    with pytest.raises(cq.CoheriqEngineError, match="reserved"):
        cq.AccelerationEngine(lib.name, "reference")
    with pytest.raises(cq.CoheriqTypeError, match="engine name"):
        cq.AccelerationEngine(lib.name, "")
    with pytest.raises(cq.CoheriqTypeError, match="list of engines"):
        cq.AccelerationEngine(lib.name, "x", bases="gpu")
    engine = cq.AccelerationEngine(lib.name, "fast")
    with pytest.raises(cq.CoheriqEngineError, match="Did you mean 'normalize'"):
        engine.override(name="normalise")(lambda xs: xs)
    with pytest.raises(cq.CoheriqEngineError, match="not materialized yet"):
        cq.enable_engine(lib.name, engine)
    with pytest.raises(cq.CoheriqEngineNotFoundError, match="'fast'"):
        cq.enable_engine(lib.name, "fast")  # created but not materialized: not an engine yet
    engine.override("total")(lambda xs: "fast")
    with pytest.raises(cq.CoheriqEngineError, match="twice"):
        engine.override("total")(lambda xs: "again")
    with pytest.raises(cq.CoheriqTypeError, match="functions and classes"):
        engine.override("total")(3)
    engine.materialize()
    with pytest.raises(cq.CoheriqEngineError, match="materialized already"):
        engine.override("normalize")(lambda xs: xs)
    with pytest.raises(cq.CoheriqEngineError, match="materialized already"):
        engine.materialize()
    with pytest.raises(cq.CoheriqEngineError, match="engine named 'fast' already"):
        cq.AccelerationEngine(lib.name, "fast")


def test_override_kind_is_checked_at_materialize(lib):
    engine = cq.AccelerationEngine(lib.name, "fast")
    engine.override("Batch")(lambda rows: rows)
    with pytest.raises(cq.CoheriqEngineError, match="must be overridden by a class"):
        engine.materialize()
    # The name stays reserved by the engine that failed (as in 0.0.x); nothing runs.
    assert cq.available_engines(lib.name) == ("fast",)
    with pytest.raises(cq.CoheriqEngineNotFoundError, match="not materialized yet"):
        cq.enable_engine(lib.name, "fast")


def test_unknown_base(lib):
    engine = cq.AccelerationEngine(lib.name, "hybrid", ["gpuu"])
    with pytest.raises(cq.CoheriqEngineNotFoundError, match="no engine named 'gpuu'"):
        engine.materialize()


def test_engine_class_lookup(lib, two_engines):
    fast, slow = two_engines
    assert cq.engine_class(lib.name) is cq.engine_class(lib.domain, cq.REFERENCE)
    assert cq.engine_class(lib.domain, "fast") is fast
    assert cq.engine_class(lib.name, "slow") is slow.engine_class
    with pytest.raises(cq.CoheriqEngineNotFoundError, match="Did you mean 'fast'"):
        cq.engine_class(lib.name, "fats")
    with pytest.raises(cq.CoheriqTypeError):
        cq.engine_class(lib.name, 3)
