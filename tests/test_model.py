"""coheriq against a small, obviously correct model of its rules (hypothesis stateful).

Random sequences of operations drive the real API and the model side by side:
creating domains, marking function and class candidates, materializing, defining
engines in both forms (hybrids included, some with failing ``__init__``),
enabling, setting the environment variable, entering and leaving scopes, calling
candidates, asking what runs, and every misuse among them. After each step, the
implementation that ran, what the introspection functions say and the class of
any exception raised must agree with the model.

Runs 300 sequences by default; ``--hypothesis-profile=soak`` runs 20,000.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import coheriq as cq
from coheriq._library.domain import lookup_domain
from coheriq.testing import isolated

DOMAINS = ["d0", "d1"]
CANDIDATES = ["f", "g", "Box"]  # Box is marked as a class
ENGINES = ["e0", "e1", "e2", "reference"]  # "reference" is reserved: always an error
# Lists are ordered choices: the first of them that starts (see choose_from).
ENV_VALUES = ["", "e0", "e1", "reference", "nope", "e2,e0", " nope , e1 ,reference", "e0,,e1"]
LIST_ITEMS = ["e0", "e1", "e2", "reference", "unknown"]


@dataclass
class ModelEngine:
    bases: list[str]
    overrides: set[str]
    failing_init: bool
    mirror: type  # a plain class with the same bases: Python's MRO, as the model's


@dataclass
class ModelDomain:
    candidates: dict[str, bool] = field(default_factory=dict)  # name -> is a class
    materialized: bool = False
    engines: dict[str, ModelEngine] = field(default_factory=dict)
    # Names reserved by AccelerationEngines whose materialize() failed: taken and
    # listed, as in coheriq 0.0.x, but not an engine that can run.
    reserved: set[str] = field(default_factory=set)
    settled: str | None = None
    env: str | None = None
    reference_mirror: type = field(default_factory=lambda: type("reference", (), {}))

    def mro(self, engine: str) -> list[str]:
        if engine == cq.REFERENCE:
            return []
        return [k.__name__ for k in self.engines[engine].mirror.__mro__[:-2]]

    def supplier(self, engine: str, candidate: str) -> str:
        for name in self.mro(engine):
            if candidate in self.engines[name].overrides:
                return name
        return cq.REFERENCE

    def fails_to_start(self, engine: str) -> bool:
        return any(self.engines[name].failing_init for name in self.mro(engine))

    def choose_from(self, names: list[str]) -> tuple[type | None, str | None]:
        """(error, engine) of an ordered choice: the first of ``names`` that can run."""
        if not self.materialized:
            return cq.CoheriqDomainError, None
        for name in names:
            if name == cq.REFERENCE:
                return None, name
            if name in self.engines and not self.fails_to_start(name):
                return None, name
        return cq.CoheriqEngineNotFoundError, None  # none can: each one's reason

    def activation_error(self, engine: str, *, globally: bool) -> type | None:
        """The error of choosing ``engine`` (globally, or for a scope), or None."""
        if not self.materialized:
            return cq.CoheriqDomainError
        if engine != cq.REFERENCE and engine not in self.engines:
            return cq.CoheriqEngineNotFoundError
        if globally and self.settled is not None:  # a no-op when it is the same engine
            return None if self.settled == engine else cq.CoheriqEngineSettledError
        if engine != cq.REFERENCE and self.fails_to_start(engine):
            return cq.CoheriqEngineStartError
        return None


def implementation(engine, candidate, is_class):
    """What an engine's override of ``candidate`` is: it says who it is."""
    if is_class:
        return type(candidate, (), {"__init__": lambda self: None, "made_by": engine})
    return lambda: (engine, candidate)


def failing_init(self):
    raise RuntimeError("this engine cannot start")


class CoheriqModel(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.world = isolated()
        self.world.__enter__()
        self.model: dict[str, ModelDomain] = {}
        self.proxies: dict[tuple[str, str], object] = {}
        self.scopes: list[tuple[str, str, cq.using_engine]] = []
        self.saved_env = {d: os.environ.get(env_var(d)) for d in DOMAINS}

    def teardown(self):
        while self.scopes:
            self.scopes.pop()[2].__exit__(None, None, None)
        self.world.__exit__(None, None, None)
        for domain, value in self.saved_env.items():
            if value is None:
                os.environ.pop(env_var(domain), None)
            else:
                os.environ[env_var(domain)] = value

    # -- helpers -------------------------------------------------------------

    def check(self, expected, action):
        """Run ``action``; the exception class it raises must be ``expected`` (or none)."""
        try:
            result = action()
        except cq.CoheriqError as error:
            assert type(error) is expected, f"raised {type(error).__name__}: {error}"
            return None
        assert expected is None, f"expected {expected.__name__}, nothing raised"
        return result

    def engine_for_call(self, domain):
        """(error class, engine) that a call in this context runs, settling like coheriq."""
        model = self.model[domain]
        if not model.materialized:
            return cq.CoheriqDomainError, None
        for name, engine, _ in reversed(self.scopes):
            if name == domain:
                return None, engine
        if model.settled is None:
            value = (model.env or "").strip()
            if "," in value:
                names = [name.strip() for name in value.split(",")]
                if not all(names):
                    return cq.CoheriqTypeError, None  # a malformed list
                error, engine = model.choose_from(names)
                if error is None:
                    model.settled = engine
                return error, engine
            engine = value or cq.REFERENCE
            if engine != cq.REFERENCE and engine not in model.engines:
                return cq.CoheriqEngineNotFoundError, None
            if engine != cq.REFERENCE and model.fails_to_start(engine):
                return cq.CoheriqEngineStartError, None
            model.settled = engine
        return None, model.settled

    # -- domains and candidates ---------------------------------------------

    @rule(domain=st.sampled_from(DOMAINS))
    def create_domain(self, domain):
        expected = cq.CoheriqDomainError if domain in self.model else None
        # Each time from a module of its own: the same module running again would
        # make a new copy of its domain (modelled in test_copies.py), not a clash.
        self.creations = getattr(self, "creations", 0) + 1
        creator = {"__name__": f"model_library_{self.creations}", "cq": cq}
        create = f"cq.AccelerationDomain({domain!r}, env_prefix={domain.upper()!r})"
        made = self.check(expected, lambda: eval(create, creator))
        if made is not None:
            self.model[domain] = ModelDomain()

    @precondition(lambda self: self.model)
    @rule(data=st.data(), candidate=st.sampled_from(CANDIDATES))
    def mark(self, data, candidate):
        domain = data.draw(st.sampled_from(sorted(self.model)))
        model = self.model[domain]
        is_class = candidate == "Box"
        expected = None
        if model.materialized or candidate in model.candidates:
            expected = cq.CoheriqDomainError
        real = lookup_domain(domain)
        proxy = self.check(
            expected,
            lambda: real.acceleration_candidate(name=candidate)(
                implementation(cq.REFERENCE, candidate, is_class)
            ),
        )
        if proxy is not None:
            model.candidates[candidate] = is_class
            self.proxies[domain, candidate] = proxy

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def materialize(self, data):
        domain = data.draw(st.sampled_from(sorted(self.model)))
        model = self.model[domain]
        expected = cq.CoheriqDomainError if model.materialized else None
        real = lookup_domain(domain)
        if self.check(expected, real.materialize) is not None:
            model.materialized = True

    # -- engines --------------------------------------------------------------

    def expected_definition_error(self, domain, name, bases, class_form):
        model = self.model[domain]
        if not model.materialized:
            # The decorator form raises what 0.0.x raised there too (an engine error).
            return cq.CoheriqDomainError if class_form else cq.CoheriqDomainNotReadyError, None
        if name == cq.REFERENCE or name in model.engines or name in model.reserved:
            return cq.CoheriqEngineError, None
        mirrors = tuple(model.engines[b].mirror for b in bases) or (model.reference_mirror,)
        try:
            mirror = type(name, mirrors, {})
        except TypeError:  # Python cannot linearize these bases
            return cq.CoheriqEngineInheritanceError, None
        return None, mirror

    @precondition(lambda self: self.model)
    @rule(
        data=st.data(),
        name=st.sampled_from(ENGINES),
        failing=st.booleans(),
        class_form=st.booleans(),
    )
    def define_engine(self, data, name, failing, class_form):
        domain = data.draw(st.sampled_from(sorted(self.model)))
        model = self.model[domain]
        bases = data.draw(st.lists(st.sampled_from(sorted(model.engines) or ["e0"]), max_size=2))
        bases = [b for b in bases if b in model.engines]
        overrides = data.draw(st.sets(st.sampled_from(sorted(model.candidates) or ["f"])))
        overrides &= set(model.candidates)
        failing = failing and class_form  # the decorator form has no __init__
        expected, mirror = self.expected_definition_error(domain, name, bases, class_form)
        body = {c: implementation(name, c, model.candidates[c]) for c in overrides}

        def define_class_form():
            base_classes = tuple(cq.engine_class(domain, b) for b in bases) or (
                cq.engine_class(domain),
            )
            namespace = {c: v if isinstance(v, type) else staticmethod(v) for c, v in body.items()}
            if failing:
                namespace["__init__"] = failing_init
            return cq.EngineMeta(name, base_classes, namespace, name=name)

        def define_decorator_form():
            engine = cq.AccelerationEngine(domain, name, bases)
            for candidate, value in body.items():
                engine.override(name=candidate)(value)
            return engine.materialize()

        made = self.check(expected, define_class_form if class_form else define_decorator_form)
        if made is not None:
            model.engines[name] = ModelEngine(bases, overrides, failing, mirror)
        elif expected is cq.CoheriqEngineInheritanceError and not class_form:
            model.reserved.add(name)  # constructed (name reserved), materialize() failed

    # -- choosing -------------------------------------------------------------

    @precondition(lambda self: self.model)
    @rule(data=st.data(), engine=st.sampled_from([*ENGINES, "unknown"]))
    def enable(self, data, engine):
        domain = data.draw(st.sampled_from(sorted(self.model)))
        model = self.model[domain]
        expected = model.activation_error(engine, globally=True)
        if expected is None:
            model.settled = engine
        self.check(expected, lambda: cq.enable_engine(domain, engine))

    @precondition(lambda self: self.model)
    @rule(data=st.data(), names=st.lists(st.sampled_from(LIST_ITEMS), min_size=1, unique=True))
    def enable_list(self, data, names):
        domain = data.draw(st.sampled_from(sorted(self.model)))
        model = self.model[domain]
        expected, engine = model.choose_from(names)
        if expected is None and model.settled is None:
            model.settled = engine
        elif expected is None and model.settled != engine:
            expected = cq.CoheriqEngineSettledError  # a list is the engine it chooses now
        self.check(expected, lambda: cq.enable_engine(domain, names))

    @precondition(lambda self: self.model)
    @rule(data=st.data(), names=st.lists(st.sampled_from(LIST_ITEMS), min_size=1, unique=True))
    def enter_scope_list(self, data, names):
        domain = data.draw(st.sampled_from(sorted(self.model)))
        expected, engine = self.model[domain].choose_from(names)
        scope = cq.using_engine(domain, names)
        self.check(expected, scope.__enter__)
        if expected is None:
            self.scopes.append((domain, engine, scope))

    @precondition(lambda self: self.model)
    @rule(data=st.data(), value=st.sampled_from(ENV_VALUES))
    def set_environment(self, data, value):
        domain = data.draw(st.sampled_from(sorted(self.model)))
        os.environ[env_var(domain)] = value
        self.model[domain].env = value

    @precondition(lambda self: self.model)
    @rule(data=st.data(), engine=st.sampled_from([*ENGINES, "unknown"]))
    def enter_scope(self, data, engine):
        domain = data.draw(st.sampled_from(sorted(self.model)))
        expected = self.model[domain].activation_error(engine, globally=False)
        scope = cq.using_engine(domain, engine)
        self.check(expected, scope.__enter__)
        if expected is None:
            self.scopes.append((domain, engine, scope))

    @precondition(lambda self: self.scopes)
    @rule()
    def exit_scope(self):
        self.scopes.pop()[2].__exit__(None, None, None)

    # -- calling --------------------------------------------------------------

    @precondition(lambda self: self.proxies)
    @rule(data=st.data())
    def call(self, data):
        domain, candidate = data.draw(st.sampled_from(sorted(self.proxies)))
        model = self.model[domain]
        proxy = self.proxies[domain, candidate]
        if model.candidates[candidate] and not model.materialized:
            # Before materialize() a class constructs itself and chooses nothing.
            assert type(proxy()) is proxy and proxy().made_by == cq.REFERENCE
            return
        expected, engine = self.engine_for_call(domain)
        result = self.check(expected, proxy)
        if expected is not None:
            return
        supplier = model.supplier(engine, candidate)
        if model.candidates[candidate]:
            assert result.made_by == supplier
            assert cq.engine_of(result) == supplier
            assert isinstance(result, proxy)
        else:
            assert result == (supplier, candidate)

    @invariant()
    def introspection_agrees(self):
        for domain, model in self.model.items():
            scoped = [engine for name, engine, _ in self.scopes if name == domain]
            if scoped or model.settled is not None or not model.materialized:
                active = scoped[-1] if scoped else model.settled
                assert cq.active_implementation(domain) == active
            else:  # what the first call will choose, not chosen yet
                assert not cq.explain(domain).settled
            assert cq.available_engines(domain) == tuple(sorted({*model.engines, *model.reserved}))


def env_var(domain):
    return f"{domain.upper()}_ENGINE"


TestCoheriqModel = pytest.mark.slow(CoheriqModel.TestCase)
