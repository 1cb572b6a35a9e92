"""coheriq's pytest plugin: run a suite on any engine, per engine, or in isolation.

Installed with coheriq (entry point ``pytest11``) and inert until used:

``--coheriq-engine=DOMAIN:ENGINE`` (repeatable), or ``COHERIQ_TEST_ENGINES="a:x,b:y"``
    Enables the engine for the whole run, before any test is collected, exactly
    as :func:`coheriq.enable_engine` would. ``DOMAIN:gpu,compiled`` is an
    ordered choice: the first of them that starts here (in the environment
    variable, ``"a:gpu,compiled,b:y"``: a name without ``DOMAIN:`` continues the
    list before it). A domain that is not registered yet is imported as a module
    of the same name first. Any problem stops the run at start-up with coheriq's
    message. The report header says which engine each domain runs on, and what
    an ordered choice passed over.

``@pytest.mark.coheriq_engines("mylib")``
    Runs the test once per available engine of the domain and once on the
    reference, each inside :class:`coheriq.using_engine`, with ids such as
    ``test_x[reference]`` and ``test_x[fast]``. The test may take the fixture
    ``coheriq_engine`` to learn which engine it runs on. An engine that fails to
    load fails its own case only; one that loads but cannot start on this machine
    (its ``__init__`` raised: no GPU, no cluster) skips its case, with the reason.

``@pytest.mark.coheriq_xfail("mylib", "fast", reason="...")``
    Marks the test as expected to fail when it runs on that engine (scoped or
    global) of the domain, and only then. ``engine`` may be a list of names.
    Where no domain of that name exists when the test runs (the library is not
    imported, or another library's suite shares the plugin), the marker does
    nothing, so a plugin can add it by test id to a suite it does not own.

``coheriq_isolated`` (fixture)
    Runs the test in a clean coheriq world (see :func:`coheriq.testing.isolated`).

The report header names every domain known at start-up and its engine.
"""

from __future__ import annotations

import os
from contextlib import nullcontext

import pytest

from ._stdlib import TYPE_CHECKING
from ._validate import REFERENCE
from .activation import (
    active_implementation,
    available_engines,
    enable_engine,
    import_domain,
    using_engine,
)
from .domain import all_domains, lookup_domain
from .exceptions import CoheriqEngineStartError, CoheriqError
from .ordered import describe_tried, parse_engine_list
from .testing import isolated

if TYPE_CHECKING:
    from typing import Any

ENV = "COHERIQ_TEST_ENGINES"
_chosen = pytest.StashKey[list[tuple[str, str]]]()
_failed_to_start = pytest.StashKey[bool]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("coheriq", "coheriq engines")
    group.addoption(
        "--coheriq-engine",
        action="append",
        default=[],
        metavar="DOMAIN:ENGINE",
        help=f"enable ENGINE for DOMAIN for the whole run (repeatable; also ${ENV}).",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "coheriq_engines(domain): run the test once per engine of the coheriq domain, "
        "the reference included, each inside coheriq.using_engine.",
    )
    config.addinivalue_line(
        "markers",
        "coheriq_xfail(domain, engine, reason='', strict=False): expect the test to fail "
        "when it runs on that engine of the coheriq domain.",
    )
    specs = [_parse(text, "--coheriq-engine") for text in config.getoption("coheriq_engine")]
    specs += [_parse(text, ENV) for text in _env_specs(os.environ.get(ENV, ""))]
    for domain, engine in specs:
        try:
            import_domain(domain)
            if "," in engine:  # an ordered choice: the first of them that starts here
                enable_engine(domain, parse_engine_list(engine, f" (given as {domain}:{engine})"))
            else:
                enable_engine(domain, engine)
        except CoheriqError as error:
            raise pytest.UsageError(f"coheriq engine {domain}:{engine}: {error}") from None
    config.stash[_chosen] = specs


def _env_specs(value: str) -> list[str]:
    """``"a:gpu,compiled,b:y"`` -> ``["a:gpu,compiled", "b:y"]``."""
    specs: list[str] = []
    for item in value.split(","):
        if ":" in item or not specs:
            specs.append(item)
        else:
            specs[-1] += "," + item
    return [spec for spec in specs if spec.strip()]


def _parse(text: str, source: str) -> tuple[str, str]:
    domain, sep, engine = text.strip().partition(":")
    if not sep or not domain.strip() or not engine.strip():
        raise pytest.UsageError(
            f"{source}: {text!r} is not DOMAIN:ENGINE; write for example mylib:fast."
        )
    return domain.strip(), engine.strip()


def pytest_report_header(config: pytest.Config) -> list[str]:
    domains = all_domains()
    if not domains:
        return []
    chosen = {domain for domain, _ in config.stash.get(_chosen, [])}
    lines = []
    for domain in domains:
        engine = active_implementation(domain)
        settled = domain.choice.settled
        tried = f"; tried {describe_tried(settled.tried)}" if settled and settled.tried else ""
        if domain.name in chosen:
            how = f"--coheriq-engine{tried}"
        elif engine is not None:
            how = "chosen before the run"
        else:
            variable = domain.env_var
            value = os.environ.get(variable, "").strip() if variable else ""
            engine = value or REFERENCE
            how = f"{variable}={value}" if value else "at first use"
        lines.append(f"{domain.name} on {engine!r} ({how})")
    return ["coheriq: " + "; ".join(lines)]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    markers = list(metafunc.definition.iter_markers("coheriq_engines"))
    if not markers:
        return
    if len(markers) > 1 or len(markers[0].args) != 1:
        raise pytest.UsageError(
            f"{metafunc.definition.nodeid}: use one coheriq_engines(domain) marker, with one "
            "domain name."
        )
    domain = markers[0].args[0]
    engines = [REFERENCE, *available_engines(domain)]
    # The parameter lives in each case's callspec, where the hooks below find it;
    # parametrize wants the name among the fixtures, even if the test takes none.
    if "coheriq_engine" not in metafunc.fixturenames:
        metafunc.fixturenames.append("coheriq_engine")
    metafunc.parametrize(
        "coheriq_engine", [(domain, e) for e in engines], ids=engines, indirect=True
    )


def _engine_scope(item: pytest.Item) -> Any:
    """The ``using_engine`` block of a case made by the coheriq_engines marker, if any."""
    callspec = getattr(item, "callspec", None)
    param = callspec.params.get("coheriq_engine") if callspec is not None else None
    if param is None or item.stash.get(_failed_to_start, False):
        return nullcontext()
    return using_engine(*param)


# Each phase of a case runs inside its engine's scope, so that its fixtures make
# their objects with that engine too.
@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> object:
    scope = _engine_scope(item)
    try:
        scope.__enter__()
    except CoheriqError as error:
        item.stash[_failed_to_start] = True  # reported here once, not again at teardown
        if isinstance(error, CoheriqEngineStartError):
            # Installed but not startable here (a GPU engine on a laptop): not a failure
            # of the test, and the reason shows in the summary.
            pytest.skip(str(error))
        raise
    try:
        return (yield)
    finally:
        scope.__exit__(None, None, None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> object:
    with _engine_scope(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> object:
    with _engine_scope(item):
        return (yield)


@pytest.fixture
def coheriq_engine(request: pytest.FixtureRequest) -> str:
    """The name of the engine this case runs on (with the ``coheriq_engines`` marker)."""
    param = getattr(request, "param", None)
    if param is None:
        raise pytest.UsageError(
            "The coheriq_engine fixture is filled by the coheriq_engines(domain) marker; "
            "mark the test with it."
        )
    return str(param[1])


@pytest.fixture
def coheriq_isolated() -> object:
    """Run the test in a clean coheriq world, restored afterwards."""
    with isolated():
        yield


@pytest.hookimpl(trylast=True, specname="pytest_runtest_setup")
def pytest_runtest_setup_xfail(item: pytest.Item) -> None:
    """Add an xfail mark to a case running on an engine its coheriq_xfail marker names."""
    # A second pytest_runtest_setup (pytest reads only names starting with "pytest_"),
    # trylast: it runs after the fixtures are set up, inside the case's engine scope.
    for marker in item.iter_markers("coheriq_xfail"):
        domain, engines = marker.args[0], marker.args[1]
        names = {engines} if isinstance(engines, str) else set(engines)
        if domain not in {d.name for d in all_domains()}:
            continue  # nothing of that domain can run here
        running = active_implementation(domain)
        if running is None:  # as the test's first call would, make the global choice
            running = lookup_domain(domain).choice.settle().engine
        if running in names:
            reason = marker.kwargs.get("reason", "") or f"known to fail on {running!r}"
            item.add_marker(
                pytest.mark.xfail(reason=reason, strict=marker.kwargs.get("strict", False))
            )
