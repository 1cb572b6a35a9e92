"""Engines advertised by installed distributions through entry points."""

import sys

import pytest

import coheriq as cq

ENGINE_MODULE = """
import coheriq

class Engine(coheriq.engine_class({domain!r}), name={engine!r}):
    def total(self, xs):
        return ({engine!r}, sum(xs))
"""


def advertise(make_dist, lib, engine, module, *, source=None, value=None):
    source = source if source is not None else ENGINE_MODULE.format(domain=lib.name, engine=engine)
    group = f"coheriq.engines.{lib.name}"
    make_dist(f"{module}_dist", {module: source}, {group: {engine: value or module}})


def test_listing_imports_nothing(lib, make_dist, unique):
    gpu, mpi = unique("gpu_mod"), unique("mpi_mod")
    advertise(make_dist, lib, "gpu", gpu)
    advertise(make_dist, lib, "mpi", mpi)
    assert cq.available_engines(lib.name) == ("gpu", "mpi")
    assert gpu not in sys.modules and mpi not in sys.modules


def test_naming_an_engine_imports_that_one_only(lib, make_dist, unique):
    gpu, mpi = unique("gpu_mod"), unique("mpi_mod")
    advertise(make_dist, lib, "gpu", gpu)
    advertise(make_dist, lib, "mpi", mpi)
    cq.enable_engine(lib.name, "gpu")
    assert gpu in sys.modules and mpi not in sys.modules
    assert lib.total([1]) == ("gpu", 1)


def test_module_colon_object_value(lib, make_dist, unique):
    module = unique("obj_mod")
    advertise(make_dist, lib, "gpu", module, value=f"{module}:Engine")
    with cq.using_engine(lib.name, "gpu"):
        assert lib.total([2]) == ("gpu", 2)


def test_environment_variable_loads_advertised_engine(lib, make_dist, unique, monkeypatch):
    module = unique("env_mod")
    advertise(make_dist, lib, "gpu", module)
    monkeypatch.setenv(lib.env_var, "gpu")
    assert module not in sys.modules
    assert lib.total([3]) == ("gpu", 3)


def test_engine_class_loads_for_hybrids(lib, make_dist, unique):
    module = unique("base_mod")
    advertise(make_dist, lib, "gpu", module)

    class Hybrid(cq.engine_class(lib.name, "gpu"), name="hybrid"):
        def normalize(self, xs, *, scale=1.0):
            return "hybrid"

    with cq.using_engine(lib.name, Hybrid):
        assert lib.total([1]) == ("gpu", 1)
        assert lib.normalize([1]) == "hybrid"


def test_failing_import_names_everything_and_changes_nothing(lib, make_dist, unique):
    module = unique("broken_mod")
    source = ENGINE_MODULE.format(domain=lib.name, engine="gpu") + "\nimport no_such_module_xyz\n"
    advertise(make_dist, lib, "gpu", module, source=source)
    with pytest.raises(cq.CoheriqEngineLoadError) as info:
        cq.enable_engine(lib.name, "gpu")
    message = str(info.value)
    assert "'gpu'" in message and lib.name in message and f"{module}_dist" in message
    assert "no_such_module_xyz" in message
    assert isinstance(info.value.__cause__, ImportError)
    # The engine class the module defined before failing is forgotten with it.
    assert not cq.explain(lib.name).settled
    with pytest.raises(cq.CoheriqEngineLoadError):
        cq.engine_class(lib.name, "gpu")
    cq.enable_engine(lib.name, cq.REFERENCE)
    assert lib.total([1]) == ("reference", 1)


def test_module_that_defines_another_name(lib, make_dist, unique):
    module = unique("wrong_mod")
    source = ENGINE_MODULE.format(domain=lib.name, engine="gpu2")
    advertise(make_dist, lib, "gpu", module, source=source)
    with pytest.raises(cq.CoheriqEngineLoadError, match="'gpu2' instead"):
        cq.enable_engine(lib.name, "gpu")
    assert not cq.explain(lib.name).settled


def test_advertised_engine_not_found_error_lists_it(lib, make_dist, unique):
    advertise(make_dist, lib, "gpu", unique("listed_mod"))
    with pytest.raises(cq.CoheriqEngineNotFoundError, match="Did you mean 'gpu'"):
        cq.enable_engine(lib.name, "gpuu")


def test_a_malformed_value_costs_only_its_own_entry_point(lib, make_dist, unique):
    # From Python 3.15 importlib.metadata refuses a malformed value when it reads
    # one: the distribution's other engines must still count.
    module = unique("sound_mod")
    source = ENGINE_MODULE.format(domain=lib.name, engine="sound")
    group = f"coheriq.engines.{lib.name}"
    make_dist(
        unique("mixed_dist"), {module: source}, {group: {"sound": module, "bad": "not valid!:"}}
    )
    assert cq.available_engines(lib.name) == ("bad", "sound")
    with pytest.raises(cq.CoheriqEngineLoadError, match="'bad'") as raised:
        cq.enable_engine(lib.name, "bad")
    assert "not valid!:" in str(raised.value)
    cq.enable_engine(lib.name, "sound")
    assert lib.total([4]) == ("sound", 4)


# -- a failed load takes back exactly what it registered -----------------------------------


TWO_ENGINES_ONE_MODULE = """
import os
import coheriq

class Simd(coheriq.engine_class({lib!r}), name="simd"):
    class Batch:  # an engine's own container
        def __init__(self, rows):
            self.rows = rows

if os.environ.get("HAS_TPU"):  # only on machines with a TPU
    class Tpu(coheriq.engine_class({lib!r}), name="tpu"):
        pass
"""


def test_a_failed_load_keeps_the_engines_loaded_before_from_the_same_module(lib, make_dist):
    module = f"{lib.name}_accel"
    make_dist(
        module,
        {module: TWO_ENGINES_ONE_MODULE.format(lib=lib.name)},
        {f"coheriq.engines.{lib.name}": {"simd": f"{module}:Simd", "tpu": f"{module}:Tpu"}},
    )
    cq.enable_engine(lib.name, "simd")
    batch = lib.Batch([1])
    with pytest.raises(cq.CoheriqEngineLoadError, match="tpu"):
        with cq.using_engine(lib.name, "tpu"):
            pass
    assert isinstance(batch, lib.Batch) and cq.engine_of(batch) == "simd"
    with cq.using_engine(lib.name, "simd"):
        assert type(lib.Batch([1])) is type(batch)
    assert module in sys.modules  # imported before the failed load: left in place


INTERRUPTED = """
import os
import coheriq

class Kb(coheriq.engine_class({lib!r}), name="kb"):
    def total(self, xs):
        return helper(xs)

if os.environ.get("INTERRUPT_IMPORT"):
    raise KeyboardInterrupt  # Ctrl-C while the module is imported

def helper(xs):
    return ("kb", sum(xs))
"""


def test_an_import_interrupted_after_the_class_statement_leaves_nothing(
    lib, make_dist, monkeypatch
):
    module = f"{lib.name}_kb"
    make_dist(
        module,
        {module: INTERRUPTED.format(lib=lib.name)},
        {f"coheriq.engines.{lib.name}": {"kb": module}},
    )
    monkeypatch.setenv("INTERRUPT_IMPORT", "1")
    with pytest.raises(KeyboardInterrupt):
        cq.enable_engine(lib.name, "kb")
    assert not cq.explain(lib.name).settled and module not in sys.modules
    monkeypatch.delenv("INTERRUPT_IMPORT")
    cq.enable_engine(lib.name, "kb")  # the retry imports the module afresh
    assert lib.total([1, 2]) == ("kb", 3)


CROSS_DOMAIN = """
import coheriq

class Stray(coheriq.engine_class({other!r}), name="stray"):  # another domain's engine
    pass
{body}
"""


def test_a_failed_load_takes_back_what_it_registered_in_other_domains(
    lib, make_dist, unique, tmp_path
):
    from conftest import build_lib

    other = build_lib(unique("other"))
    module = f"{lib.name}_cross"
    site = make_dist(
        module,
        {module: CROSS_DOMAIN.format(other=other.name, body="")},
        {f"coheriq.engines.{lib.name}": {"cross": module}},
    )
    with pytest.raises(cq.CoheriqEngineLoadError, match="did not define an engine"):
        cq.enable_engine(lib.name, "cross")
    assert "stray" not in cq.available_engines(other.name)
    fixed = CROSS_DOMAIN.format(
        other=other.name,
        body=f"class Cross(coheriq.engine_class({lib.name!r}), name='cross'):\n    pass\n",
    )
    (site / f"{module}.py").write_text(fixed)
    cq.enable_engine(lib.name, "cross")  # a retry imports the fixed module: no clash
    assert "stray" in cq.available_engines(other.name)


def test_one_rule_for_engine_names_everywhere(lib, make_dist, monkeypatch):
    module = f"{lib.name}_names"
    make_dist(
        module,
        {module: "raise AssertionError('never imported')\n"},
        {f"coheriq.engines.{lib.name}": {"reference": module, "bad name": module}},
    )
    assert cq.available_engines(lib.name) == ()  # neither name can be an engine
    monkeypatch.setenv(lib.env_var, "bad name")
    with pytest.raises(cq.CoheriqEngineNotFoundError, match="not a valid engine name"):
        lib.total([1])
    assert module not in sys.modules


# -- a distribution whose metadata cannot be read ------------------------------------------


def test_a_distribution_with_unreadable_entry_points_does_not_stop_discovery(lib):
    import importlib.metadata as metadata

    from coheriq import discovery

    class Broken(metadata.Distribution):  # as the importlib_metadata backport reads one
        def read_text(self, filename):  # with a malformed entry point
            return (
                "Metadata-Version: 2.1\nName: broken\nVersion: 1\n"
                if filename == "METADATA"
                else None
            )

        def locate_file(self, path):
            return path

        @property
        def entry_points(self):
            raise ValueError("Invalid object reference")

    class Finder:
        @staticmethod
        def find_distributions(context=None):
            return iter([Broken()])

        @staticmethod
        def find_spec(*args, **kwargs):
            return None

    sys.meta_path.insert(0, Finder)
    discovery.clear_cache()
    try:
        assert cq.available_engines(lib.name) == ()
        cq.enable_engine(lib.name, cq.REFERENCE)
    finally:
        sys.meta_path.remove(Finder)
        discovery.clear_cache()


def test_the_importlib_metadata_backport_and_a_malformed_entry_point(lib, make_dist):
    # Python 3.11 with dask: the backport is imported, and coheriq's discovery must
    # survive an entry point it cannot parse, as it does with the standard library.
    pytest.importorskip("importlib_metadata", reason="the importlib_metadata backport is absent")
    make_dist("malformed_dist", {}, {f"coheriq.engines.{lib.name}": {"bad": "not valid!:"}})
    make_dist(
        "good_dist",
        {"good_mod": "import coheriq\n"},
        {"coheriq.engines.unrelated_domain": {"good": "good_mod"}},
    )
    cq.available_engines(lib.name)  # listed or skipped, as the metadata reader can
    with pytest.raises(cq.CoheriqError):  # a clear error, never a bare ValueError
        cq.using_engine(lib.name, "bad").__enter__()
    cq.enable_engine(lib.name, cq.REFERENCE)
