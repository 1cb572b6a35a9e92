"""Engines in the class form: real subclasses, checked and registered by EngineMeta."""

import pytest

import coheriq as cq


def test_class_form_methods_get_self_and_state(lib):
    class Fast(cq.engine_class(lib.name), name="fast"):
        def __init__(self):
            self.offset = 10

        def total(self, xs):
            return ("fast", sum(xs) + self.offset)

        @staticmethod
        def normalize(xs, *, scale=1.0):
            return "static"

    cq.enable_engine(lib.name, "fast")
    assert lib.total([1, 2]) == ("fast", 13)
    assert lib.normalize([1]) == "static"
    assert cq.engine_class(lib.name, "fast") is Fast
    assert "'fast'" in repr(Fast) and lib.name in repr(Fast)


def test_engine_is_instantiated_once_and_lazily(lib, two_engines):
    Fast, _ = two_engines
    assert Fast._instances == 0  # defining and listing an engine does not start it
    assert cq.available_engines(lib.name) == ("fast", "slow")
    assert Fast._instances == 0
    for _ in range(3):
        with cq.using_engine(lib.name, "fast"):
            lib.total([1])
    cq.enable_engine(lib.name, "fast")
    lib.total([1])
    assert Fast._instances == 1


def test_super_reaches_next_in_mro(lib):
    class Loud(cq.engine_class(lib.name), name="loud"):
        def normalize(self, xs, *, scale=1.0):
            return ["loud", *super().normalize(xs, scale=scale)]

    class Louder(Loud, name="louder"):
        def normalize(self, xs, *, scale=1.0):
            return ["louder", *super().normalize(xs, scale=scale)]

    with cq.using_engine(lib.name, Louder):
        assert lib.normalize([1, 1]) == ["louder", "loud", 0.5, 0.5]


def test_diamond_hybrid_resolves_by_mro(lib):
    base = cq.engine_class(lib.name)

    class Gpu(base, name="gpu"):
        def total(self, xs):
            return ("gpu", sum(xs))

        def normalize(self, xs, *, scale=1.0):
            return "gpu"

    class Mpi(base, name="mpi"):
        def total(self, xs):
            return ("mpi", sum(xs))

        class Batch:
            def __init__(self, rows):
                self.rows = rows

    class Hybrid(cq.engine_class(lib.name, "gpu"), cq.engine_class(lib.name, "mpi"), name="hybrid"):
        pass

    class Other(Mpi, Gpu, name="other"):
        pass

    assert Hybrid.__mro__[:4] == (Hybrid, Gpu, Mpi, base)
    with cq.using_engine(lib.name, "hybrid"):
        assert lib.total([1]) == ("gpu", 1)
        assert lib.normalize([1]) == "gpu"
        assert cq.resolve_impl(lib.Batch) is Mpi.Batch
    with cq.using_engine(lib.name, "other"):
        assert lib.total([1]) == ("mpi", 1)
        assert lib.normalize([1]) == "gpu"


def test_unnamed_mixin_is_a_base_not_an_engine(lib):
    class Mixin(cq.engine_class(lib.name)):
        def total(self, xs):
            return ("mixin", sum(xs))

    class Uses(Mixin, name="uses"):
        pass

    assert cq.available_engines(lib.name) == ("uses",)
    assert "mixin" in repr(Mixin)
    with pytest.raises(cq.CoheriqTypeError, match="unnamed engine mixin"):
        cq.enable_engine(lib.name, Mixin)
    with cq.using_engine(lib.name, Uses):
        assert lib.total([2]) == ("mixin", 2)


def test_private_helpers_are_allowed(lib):
    class Fast(cq.engine_class(lib.name), name="fast"):
        _cache = {}

        def _helper(self):
            return "helped"

        def total(self, xs):
            return self._helper()

    with cq.using_engine(lib.name, Fast):
        assert lib.total([]) == "helped"


def test_typo_is_rejected_with_suggestion(lib):
    with pytest.raises(cq.CoheriqEngineError, match="Did you mean 'normalize'"):

        class Typo(cq.engine_class(lib.name), name="typo"):
            def normalise(self, xs):
                return xs

    assert cq.available_engines(lib.name) == ()


def test_base_from_another_domain(lib, unique):
    from conftest import build_lib

    other = build_lib(unique())
    with pytest.raises(cq.CoheriqEngineInheritanceError, match="several domains"):

        class Both(cq.engine_class(lib.name), cq.engine_class(other.name), name="both"):
            pass


def test_non_engine_base(lib):
    class Plain:
        pass

    with pytest.raises(cq.CoheriqEngineInheritanceError, match="Plain' is not one"):

        class Mixed(cq.engine_class(lib.name), Plain, name="mixed"):
            pass


def test_inconsistent_mro(lib):
    class A(cq.engine_class(lib.name), name="a"):
        pass

    class B(A, name="b"):
        pass

    with pytest.raises(cq.CoheriqEngineInheritanceError, match="method resolution order"):

        class Bad(A, B, name="bad"):
            pass

    with pytest.raises(cq.CoheriqEngineInheritanceError, match="only once"):

        class Twice(A, A):
            pass

    assert cq.available_engines(lib.name) == ("a", "b")


def test_override_kinds_are_checked(lib):
    with pytest.raises(cq.CoheriqEngineError, match="class candidate 'Batch'"):

        class NotAClass(cq.engine_class(lib.name), name="e1"):
            def Batch(self):  # noqa: N802
                pass

    with pytest.raises(cq.CoheriqEngineError, match="non-callable"):

        class NotCallable(cq.engine_class(lib.name), name="e2"):
            total = 42

    with pytest.raises(cq.CoheriqEngineError, match="non-callable"):

        class Property(cq.engine_class(lib.name), name="e3"):
            @property
            def total(self):
                return 1


def test_reserved_and_duplicate_names(lib):
    with pytest.raises(cq.CoheriqEngineError, match="reserved"):

        class Ref(cq.engine_class(lib.name), name="reference"):
            pass

    class Fast(cq.engine_class(lib.name), name="fast"):
        pass

    with pytest.raises(cq.CoheriqEngineError, match="engine named 'fast' already"):

        class Again(cq.engine_class(lib.name), name="fast"):
            pass

    assert cq.engine_class(lib.name, "fast") is Fast
    with pytest.raises(cq.CoheriqTypeError, match="not a valid name"):

        class Spaces(cq.engine_class(lib.name), name="has space"):
            pass


def test_unknown_class_keyword(lib):
    with pytest.raises(cq.CoheriqTypeError, match="Did you mean 'name'"):

        class Typo(cq.engine_class(lib.name), nmae="fast"):
            pass


def test_no_base(lib):
    with pytest.raises(cq.CoheriqEngineInheritanceError, match="no base"):
        cq.EngineMeta("Loose", (), {}, name="loose")


def test_init_failure_surfaces_at_enable_and_leaves_nothing(lib):
    class Broken(cq.engine_class(lib.name), name="broken"):
        def __init__(self):
            raise OSError("no device")

        def total(self, xs):
            return "broken"

    with pytest.raises(cq.CoheriqEngineError, match="no device") as info:
        cq.enable_engine(lib.name, "broken")
    assert isinstance(info.value.__cause__, OSError)
    assert not cq.explain(lib.name).settled
    with pytest.raises(cq.CoheriqEngineError, match="failed to start"):
        with cq.using_engine(lib.name, "broken"):
            pass
    assert lib.total([1]) == ("reference", 1)


def test_init_calling_own_domain_is_a_clear_error(lib):
    class Recursive(cq.engine_class(lib.name), name="recursive"):
        def __init__(self):
            self.warm = lib.total([1])

    with pytest.raises(cq.CoheriqEngineError, match=r"from that engine.s __init__"):
        cq.enable_engine(lib.name, "recursive")
    assert not cq.explain(lib.name).settled


def test_init_may_use_the_settled_global_choice(lib):
    lib.total([1])  # settles on the reference

    class Warm(cq.engine_class(lib.name), name="warm"):
        def __init__(self):
            self.warm = lib.total([1])  # runs the reference: Warm is not active yet

        def total(self, xs):
            return self.warm

    with cq.using_engine(lib.name, "warm"):
        assert lib.total([5]) == ("reference", 1)


# -- an engine first used inside a block, whose __init__ calls the library -----------------


def test_an_engines_init_calling_the_library_in_a_block_chooses_nothing(lib):
    class Warm(cq.engine_class(lib.name), name="warm"):
        def __init__(self):
            self.empty = lib.Batch([])  # through the domain, before the engine exists

    with pytest.raises(cq.CoheriqEngineError, match="from that engine's __init__"):
        with cq.using_engine(lib.name, "warm"):
            pass
    assert not cq.explain(lib.name).settled  # the global choice is still open
    cq.enable_engine(lib.name, cq.REFERENCE)


# -- an engine that sets a candidate to the candidate itself -------------------------------


def test_an_engine_that_sets_a_candidate_to_itself_is_refused(lib):
    for body in ({"total": lib.total}, {"Batch": lib.Batch}, {"total": staticmethod(lib.total)}):
        with pytest.raises(cq.CoheriqEngineError, match="itself, whose calls would come back"):
            type(cq.engine_class(lib.name))("Loop", (cq.engine_class(lib.name),), body, name="loop")
    assert cq.available_engines(lib.name) == ()
