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
    assert cq.active_implementation(lib.name) is None
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
    assert cq.active_implementation(lib.name) is None


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
