"""What an engine author does after the library's suite passes (issue 28, parts 1-3).

An engine's own alternate constructors run; the engine's own code builds objects
by the engine's MRO, never by the caller's context; overrides that are callables
(delegation to another candidate, ``functools.wraps``, ``singledispatchmethod``,
``partialmethod``) are accepted; a marked ``lru_cache`` keeps its cache API.
"""

from __future__ import annotations

import functools
import threading
import types
import warnings

import pytest

import coheriq as cq


def _sample_library(name: str):
    """A library whose class has the usual alternate constructors."""
    domain = cq.AccelerationDomain(name)

    @domain.acceleration_candidate
    class Sample:
        def __init__(self, values):
            self.values = list(values)

        @classmethod
        def from_text(cls, text):
            return cls(float(t) for t in text.split())

        @classmethod
        def from_values(cls, values):
            # As Fraction.from_float and many containers do: no call of cls(...).
            sample = super().__new__(cls)
            sample.values = list(values)
            return sample

        @staticmethod
        def kind():
            return "library"

        @property
        def size(self):
            return len(self.values)

    @domain.acceleration_candidate
    def mean(sample):
        return sum(sample.values) / len(sample.values)

    domain.materialize()
    return domain, Sample, mean


def test_an_engines_classmethods_and_staticmethods_run_under_it(unique):
    domain, Sample, _ = _sample_library(unique())
    ran = []

    class FastSample:
        def __init__(self, values):
            self.values = tuple(values)

        @classmethod
        def from_text(cls, text):
            ran.append("engine's from_text")
            return cls(map(float, text.split()))

        @staticmethod
        def kind():
            return "fast"

    class Fast(cq.engine_class(domain), name="fast"):
        Sample = FastSample

    library_sample = Sample

    class Derived(cq.engine_class(domain), name="derived"):
        class Sample(library_sample):
            pass

    assert type(Sample.from_text("1 2")) is Sample and Sample.kind() == "library"
    with cq.using_engine(domain, "fast"):
        made = Sample.from_text("1 2 3")
        assert type(made) is FastSample and made.values == (1.0, 2.0, 3.0)
        assert ran == ["engine's from_text"]
        assert Sample.kind() == "fast"
        # What the engine's class does not have is the library's own, bound to it.
        assert type(Sample.from_values([1])) is Sample
        # Data attributes and properties stay the class's own.
        assert isinstance(Sample.size, property)
    with cq.using_engine(domain, "derived"):
        # Built on object.__new__(cls): bound to the engine's class, builds its object.
        assert type(Sample.from_values([1, 2])) is Derived.Sample
        assert type(Sample.from_text("1")) is Derived.Sample
    # Outside, and for the subclasses of the marked class, nothing is redirected.
    assert type(Sample.from_values([1])) is Sample and Sample.kind() == "library"

    class Mine(Sample):
        pass

    with cq.using_engine(domain, "fast"):
        assert type(Mine.from_values([1])) is Mine and Mine.kind() == "library"


def test_the_global_engines_constructors_too_and_patching_still_works(unique):
    domain, Sample, _ = _sample_library(unique())
    library_sample = Sample

    class Fast(cq.engine_class(domain), name="fast"):
        class Sample(library_sample):
            @staticmethod
            def kind():
                return "fast"

    cq.enable_engine(domain, "fast")
    assert Sample.kind() == "fast"
    assert type(Sample.from_values([1])) is Fast.Sample
    # Assigning to the marked class changes its own attribute, as without coheriq.
    original = Sample.__dict__["from_values"]
    Sample.from_values = classmethod(lambda cls, values: ("patched", cls))
    assert Sample.__dict__["from_values"] is not original
    assert Sample.from_values([1]) == ("patched", Fast.Sample)  # the engine's class inherits it
    del Sample.from_values
    assert not hasattr(Sample, "from_values")


def test_under_the_reference_lookups_are_the_classs_own(unique):
    domain, Sample, _ = _sample_library(unique())
    cq.enable_engine(domain, cq.REFERENCE)
    assert type(Sample([1])) is Sample  # settles the reference
    raw = Sample.__dict__["from_text"]
    assert Sample.from_text.__func__ is raw.__func__
    # Nothing of coheriq's stands on the metaclass for those names.
    assert "from_text" not in type(Sample).__dict__


def test_misspelled_and_misfitting_constructors_of_an_engine_class_are_reported(unique):
    domain, _, _ = _sample_library(unique())

    with pytest.warns(cq.CoheriqSignatureWarning, match="from_txt.*from_text"):

        class Typo(cq.engine_class(domain), name="typo"):
            class Sample:
                def __init__(self, values):
                    pass

                @classmethod
                def from_txt(cls, text):
                    return cls()

    with pytest.warns(cq.CoheriqSignatureWarning, match="classmethod 'from_text'.*'text'"):

        class Short(cq.engine_class(domain), name="short"):
            class Sample:
                def __init__(self, values):
                    pass

                @classmethod
                def from_text(cls):
                    return cls()

    # An engine-only constructor with a name of its own is the engine's business.
    with warnings.catch_warnings():
        warnings.simplefilter("error")

        class Extra(cq.engine_class(domain), name="extra"):
            class Sample:
                def __init__(self, values):
                    pass

                @classmethod
                def from_device_buffer(cls, buffer):
                    return cls()


def test_engine_code_builds_by_its_mro_not_by_the_callers_context(unique):
    domain, Sample, mean = _sample_library(unique())

    class GpuSample(Sample):
        pass

    class Gpu(cq.engine_class(domain), name="gpu"):
        Sample = GpuSample

    class Worker(cq.engine_class(domain), name="worker"):
        """Does not override Sample; builds its results in a thread of its own."""

        def mean(self, sample):
            made = {}

            def work():
                made["plain"] = self.Sample([1, 2])
                made["alternate"] = self.Sample.from_text("1 2")
                made["inherits"] = self.mean is not None and isinstance(made["plain"], self.Sample)
                made["gpu is a Sample"] = isinstance(GpuSample([1]), self.Sample)

            thread = threading.Thread(target=work)
            thread.start()
            thread.join()
            return made

    cq.enable_engine(domain, "gpu")
    assert type(Sample([1])) is GpuSample  # the global engine
    with cq.using_engine(domain, "worker"):
        made = mean(Sample([1]))
    assert type(made["plain"]) is Sample, "engine 'worker' built 'gpu' objects"
    assert type(made["alternate"]) is Sample
    assert made["inherits"] and made["gpu is a Sample"]
    # Read from the engine class, it is the marked class itself.
    assert cq.engine_class(domain, "worker").Sample is Sample
    assert cq.engine_class(domain, "gpu").Sample is GpuSample


def test_everything_reached_through_self_class_runs_as_the_engines_code(unique):
    import asyncio

    with cq.testing.isolated():
        domain = cq.AccelerationDomain(unique())

        @domain.acceleration_candidate
        def label():
            return "library"

        @domain.acceleration_candidate
        class Batch:
            """Doc of Batch."""

            def __init__(self, values):
                self.values = values
                self.label = label()  # a candidate, called while constructing

            @staticmethod
            def make(values):
                return Batch(values)

            @classmethod
            async def load(cls, values):
                await asyncio.sleep(0)
                return cls(values)

            @classmethod
            def each(cls, values):
                for v in values:
                    yield cls([v])

        domain.materialize()

        class Other(cq.engine_class(domain), name="other"):
            def label(self):
                return "other"

            class Batch:
                def __init__(self, values):
                    self.values, self.label = values, "other"

        class Worker(cq.engine_class(domain), name="worker"):
            def label(self):
                return "worker"

        worker = cq.engine_class(domain, "worker")()
        made = {}

        def work():
            own = worker.Batch
            made["call"] = own([1])
            made["static"] = own.make([1])
            made["async"] = asyncio.run(own.load([1]))
            made["generator"] = next(own.each([1]))

        cq.enable_engine(domain, "other")
        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
        assert {k: (type(v) is Batch, v.label) for k, v in made.items()} == dict.fromkeys(
            made, (True, "worker")
        )
        own = worker.Batch
        assert own == Batch and hash(own) == hash(Batch) and own in {Batch}
        assert (own.__name__, own.__qualname__) == ("Batch", Batch.__qualname__)
        assert own.__doc__ == "Doc of Batch."
        assert own.__mro__ == Batch.__mro__

        class Derived(own):
            pass

        assert Derived.__mro__[1] is Batch


def test_generators_and_async_generators_reached_through_self_class_act_as_yield_from(unique):
    import asyncio

    with cq.testing.isolated():
        domain = cq.AccelerationDomain(unique())

        @domain.acceleration_candidate
        def label():
            return "library"

        @domain.acceleration_candidate
        class Batch:
            @classmethod
            async def stream(cls, n):
                for _ in range(n):
                    await asyncio.sleep(0)
                    yield label()

            @classmethod
            def careful(cls, log):
                try:
                    yield label()
                except KeyError:
                    log.append(("caught", label()))
                    yield "recovered"
                finally:
                    log.append(("finally", label()))

        domain.materialize()

        class Worker(cq.engine_class(domain), name="worker"):
            def label(self):
                return "worker"

        worker = cq.engine_class(domain, "worker")()
        cq.enable_engine(domain, cq.REFERENCE)

        async def consume():
            return [item async for item in worker.Batch.stream(2)]

        assert asyncio.run(consume()) == ["worker", "worker"]
        log = []
        steps = worker.Batch.careful(log)
        assert next(steps) == "worker"
        assert steps.throw(KeyError("x")) == "recovered"  # its except clause runs, on the engine
        steps.close()
        assert log == [("caught", "worker"), ("finally", "worker")]


def test_an_engines_init_may_build_the_librarys_objects(unique):
    domain, Sample, mean = _sample_library(unique())

    class Prebuilt(cq.engine_class(domain), name="prebuilt"):
        def __init__(self):
            self.empty = self.Sample([])  # while starting: constructed as called

        def mean(self, sample):
            return type(self.empty).__name__

    with cq.using_engine(domain, "prebuilt"):
        assert mean(Sample([1])) == "Sample"


def test_an_engine_that_overrides_the_class_builds_its_own_in_any_thread(unique):
    domain, Sample, mean = _sample_library(unique())

    class FastSample(Sample):
        pass

    class Fast(cq.engine_class(domain), name="fast"):
        Sample = FastSample

        def mean(self, sample):
            out = []
            thread = threading.Thread(target=lambda: out.append(self.Sample([1])))
            thread.start()
            thread.join()
            return out[0]

    with cq.using_engine(domain, "fast"):
        assert type(mean(Sample([1]))) is FastSample


def test_delegating_to_another_candidate_is_an_override(unique):
    domain = cq.AccelerationDomain(unique())

    @domain.acceleration_candidate
    def average(xs):
        return sum(xs) / len(xs)

    @domain.acceleration_candidate
    def mean(xs):
        return sum(xs) / len(xs) + 0.0

    domain.materialize()
    other = cq.AccelerationDomain(unique())

    @other.acceleration_candidate
    def fast_mean(xs):
        return ("other library", sum(xs) / len(xs))

    other.materialize()
    # As an engine package reaches them: through the libraries' modules.
    mylib = types.SimpleNamespace(average=average, mean=mean)
    otherlib = types.SimpleNamespace(fast_mean=fast_mean)

    class Delegating(cq.engine_class(domain), name="delegating"):
        mean = mylib.average  # the same domain's candidate

        def average(self, xs):
            return ("engine", sum(xs) / len(xs))

    class Elsewhere(cq.engine_class(domain), name="elsewhere"):
        average = otherlib.fast_mean  # another library's candidate

    with cq.using_engine(domain, "delegating"):
        assert mean([1, 3]) == ("engine", 2.0)  # through average, on this engine
    with cq.using_engine(domain, "elsewhere"):
        assert average([1, 3]) == ("other library", 2.0)

    with pytest.raises(cq.CoheriqEngineError, match="itself"):

        class Loop(cq.engine_class(domain), name="loop"):
            mean = mylib.mean


def test_decorated_overrides_are_accepted(unique):
    domain = cq.AccelerationDomain(unique())

    @domain.acceleration_candidate
    def normalize(xs):
        """Scale xs to sum to one."""
        return [x / sum(xs) for x in xs]

    @domain.acceleration_candidate
    def describe(x):
        return "reference"

    @domain.acceleration_candidate
    def scale(xs, factor):
        return [x * factor for x in xs]

    domain.materialize()
    mylib = types.SimpleNamespace(normalize=normalize)

    class Fast(cq.engine_class(domain), name="fast"):
        @functools.wraps(mylib.normalize)
        def normalize(self, xs):
            inverse = 1 / sum(xs)
            return [x * inverse for x in xs]

        @functools.singledispatchmethod
        def describe(self, x):
            return "object"

        @describe.register
        def _(self, x: int):
            return "int"

        def _scale(self, xs, factor, offset):
            return [x * factor + offset for x in xs]

        scale = functools.partialmethod(_scale, offset=0)

    assert Fast.normalize.__doc__ == "Scale xs to sum to one."
    with cq.using_engine(domain, "fast"):
        assert normalize([1, 3]) == [0.25, 0.75]
        assert (describe(1), describe("a")) == ("int", "object")
        assert scale([1, 2], 3) == [3, 6]

    # functools.wraps(candidate) does not make a wrapper the candidate: another
    # library may mark its own wrapper.
    mine = cq.AccelerationDomain(unique())

    @mine.acceleration_candidate
    @functools.wraps(normalize)
    def wrapped(xs):
        return normalize(xs)

    mine.materialize()
    assert wrapped.__name__ == "normalize" and wrapped([1, 1]) == [0.5, 0.5]


def test_non_callables_are_still_refused(unique):
    domain = cq.AccelerationDomain(unique())

    @domain.acceleration_candidate
    def total(xs):
        return sum(xs)

    domain.materialize()
    with pytest.raises(cq.CoheriqEngineError, match="non-callable int 42"):

        class Broken(cq.engine_class(domain), name="broken"):
            total = 42


def test_a_marked_lru_cache_keeps_its_cache_api(unique):
    domain = cq.AccelerationDomain(unique())
    calls = []

    @domain.acceleration_candidate
    @functools.lru_cache(maxsize=8)
    def fib(n):
        calls.append(n)
        return n if n < 2 else fib(n - 1) + fib(n - 2)

    @domain.acceleration_candidate
    @functools.cache
    def square(n):
        return n * n

    domain.materialize()
    assert fib(10) == 55
    assert fib.cache_info().hits > 0 and fib.cache_parameters() == {
        "maxsize": 8,
        "typed": False,
    }
    fib.cache_clear()
    assert fib.cache_info().currsize == 0
    assert square(4) == 16 and square.cache_info().misses == 1


def test_a_classmethod_of_one_marked_class_never_hides_another_classes_attributes(unique):
    import abc

    with cq.testing.isolated():
        domain = cq.AccelerationDomain(unique("abcs"))

        @domain.acceleration_candidate
        class A(abc.ABC):  # noqa: B024 - an ABC with no abstract method
            @classmethod
            def register_all(cls):
                return cls

            @classmethod
            def mro(cls):  # a classmethod named like type's own
                return type.mro(cls)

            @classmethod
            def register(cls, sub):
                return ("A's own register", sub)

        domain.materialize()

        class Fast(cq.engine_class(domain.name), name="fast"):
            class A:
                @classmethod
                def register_all(cls):
                    return "engine"

        other = cq.AccelerationDomain(unique("abcs"))

        @other.acceleration_candidate  # marked after A: its metaclass derives from A's
        class B(abc.ABC):  # noqa: B024
            pass

        other.materialize()

        class Virtual:
            pass

        with cq.using_engine(domain.name, "fast"):
            assert A.register_all() == "engine"
            B.register(Virtual)  # ABCMeta's, as without coheriq
            assert issubclass(Virtual, B)
            with pytest.raises(AttributeError, match="register_all"):
                B.register_all  # noqa: B018 - A's name, not B's

            class Sub(A):
                pass

            assert Sub.register_all() is Sub  # a subclass is never redirected
            assert [k.__name__ for k in Sub.__mro__][:2] == ["Sub", "A"]


def test_delegations_in_a_circle_and_wrapped_self_references_are_refused(unique):
    with cq.testing.isolated():
        domain = cq.AccelerationDomain(unique())

        @domain.acceleration_candidate
        def mean(xs):
            return sum(xs) / len(xs)

        @domain.acceleration_candidate
        def average(xs):
            return sum(xs) / len(xs)

        domain.materialize()
        base = cq.engine_class(domain)
        library_mean, library_average = mean, average
        with pytest.raises(cq.CoheriqEngineError, match=r"circle \(mean -> average -> mean\)"):

            class Swap(base, name="swap"):
                mean = library_average
                average = library_mean

        for wrapped in (functools.partial(mean), functools.lru_cache(mean)):
            with pytest.raises(cq.CoheriqEngineError, match="candidate 'mean' of domain"):
                type(base)("Wrapped", (base,), {"mean": wrapped})

        class Half(base):  # a mixin delegating one way: fine on its own
            mean = library_average

        with pytest.raises(cq.CoheriqEngineError, match="circle"):

            class Closing(Half, name="closing"):
                average = library_mean

        class Fine(Half, name="fine"):
            pass

        with cq.using_engine(domain, "fine"):
            assert mean([1, 3]) == 2


def test_a_classmethod_added_to_the_marked_class_later_follows_the_engine(unique):
    domain, Sample, _mean = _sample_library(unique())

    library = Sample
    with pytest.warns(cq.CoheriqSignatureWarning, match="does not have"):  # not yet

        class Fast(cq.engine_class(domain), name="fast"):
            class Sample(library):
                @classmethod
                def from_json(cls, text):
                    return ("engine", text)

    cq.enable_engine(domain, "fast")
    Sample([1])  # the engine is settled: the class dispatches
    Sample.from_json = classmethod(lambda cls, text: ("library", text))
    assert Sample.from_json("{}") == ("engine", "{}")
    with cq.using_engine(domain, "reference"):
        assert Sample.from_json("{}") == ("library", "{}")
    del Sample.from_json
    assert not hasattr(Sample, "from_json")
