"""coheriq's pytest plugin (entry point ``pytest11``): a library's suite on any engine.

Inert until used; :doc:`testing` is its guide.

``--coheriq-engine=DOMAIN:ENGINE`` (repeatable), or ``COHERIQ_TEST_ENGINES="a:x,b:y"``
    Enables the engine before collection, as :func:`coheriq.enable_engine` would
    (``DOMAIN:gpu,compiled``: the first that starts), and runs the domain's
    ``coheriq_engines`` cases on it only. A problem stops the run with one message.

``--coheriq-verify=DOMAIN:ENGINE[:AGAINST]`` (repeatable)
    The same, and each test runs inside :func:`coheriq.verify` against AGAINST (the
    reference by default): a test during which they disagreed fails.

``--coheriq-crossovers=declared`` (the default) or ``=measured``
    Which crossovers (:func:`coheriq.crossover`) hold during the run: the engines'
    declared defaults, so that no test depends on what ``coheriq calibrate`` measured
    on the machine, or those measured (as outside tests).

``--coheriq-share``
    Counts every call of the run, and gives in the summary, for each domain whose engine
    the run chose (every domain called, where it chose none), the share of its calls
    that ran on that engine and what declined the others (``mylib: 97% of 1,200 calls on
    fast; 3% declined: 36 by fast (...)``). A :func:`coheriq.profile` of every thread is
    open for the whole run: each call is watched (about +12% on CPython's
    test_statistics on a NumPy engine); calls made in other processes (pytest-xdist's
    workers, ``--forked`` tests) are not counted.

``@pytest.mark.coheriq_engines("mylib")``
    Runs the test on each engine of the domain, the reference included, inside
    :class:`coheriq.using_engine`: ``test_x[reference]``, ``test_x[fast]``.

``@pytest.mark.coheriq_xfail("mylib", "fast", reason="...")``
    Expects the test to fail where it runs on that engine (or those) of the domain;
    does nothing where no such domain exists.

Each domain's engine is reported where the domain first exists: in the header,
after "collected", or at the end of the run.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from contextlib import ExitStack, nullcontext

import pytest

from . import discovery
from ._api.verbs import (
    active_implementation,
    available_engines,
    enable_engine,
    import_domain,
    using_engine,
)
from ._choice.ordered import describe_tried, parse_engine_list
from ._library.domain import all_domains, lookup_domain
from ._names import REFERENCE
from ._stdlib import TYPE_CHECKING
from .exceptions import (
    CoheriqDomainNotFoundError,
    CoheriqEngineStartError,
    CoheriqError,
    did_you_mean,
    listing,
)
from .statements import engine_statements
from .testing import isolated

if TYPE_CHECKING:
    from typing import Any

    from ._library.domain import AccelerationDomain
    from ._tools.profiling import Profile
    from ._tools.verification import Verification

ENV = "COHERIQ_TEST_ENGINES"
OPTION = "--coheriq-engine"
VERIFY_OPTION = "--coheriq-verify"
CROSSOVERS_OPTION = "--coheriq-crossovers"
SHARE_OPTION = "--coheriq-share"
# domain -> (the engine the run chose for it, where it was named: OPTION or ENV)
_chosen = pytest.StashKey[dict[str, tuple[str, str]]]()
# domain -> how many of its coheriq_engines cases, made for other engines, were deselected
_deselected = pytest.StashKey[dict[str, int]]()
_reported = pytest.StashKey[set[str]]()  # the domains whose line the run has written
_failed_to_start = pytest.StashKey[bool]()
_verifications = pytest.StashKey[list["Verification"]]()  # the coheriq.verify objects of the run
# (domain, candidate, engine, reason) -> calls declined in the run (see may_decline).
_crossovers_before = pytest.StashKey[str | None]()  # the freeze the run replaced
_declined = pytest.StashKey[dict[tuple[str, str, str, str], int]]()
_profile = pytest.StashKey["Profile"]()  # every call of the run, with SHARE_OPTION


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("coheriq", "coheriq engines")
    group.addoption(
        OPTION,
        action="append",
        default=[],
        metavar="DOMAIN:ENGINE",
        help=f"enable ENGINE for DOMAIN for the whole run and run the domain's "
        f"coheriq_engines cases on it only (repeatable; also ${ENV}).",
    )
    group.addoption(
        VERIFY_OPTION,
        action="append",
        default=[],
        metavar="DOMAIN:ENGINE[:AGAINST]",
        help=f"as {OPTION}=DOMAIN:ENGINE, and compare every call on ENGINE with AGAINST "
        "(the reference by default); a test whose calls disagree fails (repeatable).",
    )
    group.addoption(
        CROSSOVERS_OPTION,
        choices=("declared", "measured", "off"),
        default="declared",
        help="the engines' crossovers in force: 'declared' (default: the engines' declared "
        "defaults, whatever coheriq calibrate measured here, so that no test depends on "
        "timing), 'measured' (the calibrations of this machine, as outside tests) or 'off' "
        "(none: engines run every call).",
    )
    group.addoption(
        SHARE_OPTION,
        action="store_true",
        help="count every call of the run, and give in the summary the share of each chosen "
        "domain's calls that ran on its engine, and what declined the others (each call is "
        "watched: a slower run).",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """Accelerate from the outside the declared libraries named, before conftests import them
    (their engines are enabled in :func:`pytest_configure`, as any library's)."""
    given = getattr(early_config.known_args_namespace, "coheriq_engine", None) or []
    verified = getattr(early_config.known_args_namespace, "coheriq_verify", None) or []
    specs = [*given, *verified, *_env_specs(os.environ.get(ENV, ""))]
    libraries = {text.partition(":")[0].strip() for text in specs} - {""}
    for library in sorted(libraries - {domain.name for domain in all_domains()}):
        from ._outside.activation import accelerate_if_declared

        try:
            accelerate_if_declared(library)
        except CoheriqError as error:
            raise pytest.UsageError(f"{OPTION}: library {library!r}: {error}") from None


def pytest_configure(config: pytest.Config) -> None:
    _count_declines(config)
    from ._engines.crossover import freeze

    config.stash[_crossovers_before] = freeze(config.getoption("coheriq_crossovers"))
    for marker in (
        "coheriq_engines(domain): run the test once per engine of the coheriq domain, the "
        "reference included, each inside coheriq.using_engine (with --coheriq-engine for that "
        "domain, on the chosen engine only).",
        "coheriq_xfail(domain, engine, reason='', strict=xfail_strict): expect the test to "
        "fail when it runs on that engine of the coheriq domain.",
    ):
        config.addinivalue_line("markers", marker)
    given = [(text, OPTION) for text in config.getoption("coheriq_engine")]
    given += [(text, ENV) for text in _env_specs(os.environ.get(ENV, ""))]
    # A library accelerated from the outside may be named alone: marked, no engine chosen.
    specs = [_parse(text, source) for text, source in given if not _marked_only(text)]
    verified = [_parse_verify(text) for text in config.getoption("coheriq_verify") or []]
    twice = sorted({d for d, _, _ in verified if [v[0] for v in verified].count(d) > 1})
    if twice:
        raise pytest.UsageError(
            f"{VERIFY_OPTION} names domain {twice[0]!r} more than once: a run verifies one "
            "engine of a domain, against one other. Name it once."
        )
    specs += [(domain, engine, VERIFY_OPTION) for domain, engine, _ in verified]
    _refuse_two_engines_for_one_domain(specs)
    config.stash[_chosen] = {
        domain: (_enable(domain, engine, source), source) for domain, engine, source in specs
    }
    config.stash[_verifications] = [_verification(*spec) for spec in verified]
    if config.getoption("coheriq_share"):
        _profile_the_run(config)


def _parse_verify(text: str) -> tuple[str, str, str]:
    """``DOMAIN:ENGINE[:AGAINST]`` -> (domain, engine, against)."""
    parts = [part.strip() for part in text.split(":")]
    if len(parts) not in (2, 3) or not all(parts):
        raise pytest.UsageError(
            f"{VERIFY_OPTION}: {text!r} is not DOMAIN:ENGINE or DOMAIN:ENGINE:AGAINST; write "
            "for example mylib:fast, or mylib:gpu:fast to compare two engines."
        )
    return parts[0], parts[1], parts[2] if len(parts) == 3 else REFERENCE


def _verification(domain: str, engine: str, against: str) -> Verification:
    from ._tools.verification import verify

    # The domain itself, not its name: a test in a world of its own (coheriq_isolated)
    # does not find the run's domains by name.
    verification = verify(lookup_domain(domain), engine, against, on_mismatch="record")
    try:  # both engines exist and start: checked at start-up, not in the first test
        with verification:
            pass
    except CoheriqError as error:
        raise pytest.UsageError(f"{VERIFY_OPTION}={domain}:{engine}:{against}: {error}") from None
    return verification


def _refuse_two_engines_for_one_domain(specs: list[tuple[str, str, str]]) -> None:
    """Raise a usage error where the command line and environment name two engines of a domain."""
    first: dict[str, tuple[str, str]] = {}
    for domain, engine, source in specs:
        earlier = first.setdefault(domain, (engine, source))
        if earlier[0] != engine:
            raise pytest.UsageError(
                f"{earlier[1]} names engine {earlier[0]!r} of domain {domain!r}, and {source} "
                f"names {engine!r}: a run has one global engine per domain. Name one of them "
                "(coheriq_engines cases still run on every engine)."
            )


def _env_specs(value: str) -> list[str]:
    """``"a:gpu,compiled,b:y"`` -> ``["a:gpu,compiled", "b:y"]``: an item with a colon starts
    a spec, one without continues the one before."""
    return [spec for spec in re.split(r",(?=[^,]*:)", value) if spec.strip()]


def _marked_only(text: str) -> bool:
    """Whether ``text`` names, without an engine, a library accelerated from the outside."""
    from ._outside.activation import adapter_of

    return ":" not in text and adapter_of(text.strip()) is not None


def _parse(text: str, source: str) -> tuple[str, str, str]:
    """``DOMAIN:ENGINE`` -> (domain, engine, source)."""
    domain, sep, engine = (part.strip() for part in text.partition(":"))
    if not sep and domain:
        raise pytest.UsageError(
            f"{source}: {text!r} names no engine, and no installed package declares library "
            f"{domain!r} (a library accelerated from the outside may be named alone: "
            f"marked, no engine chosen). Write DOMAIN:ENGINE, for example {domain}:fast."
        )
    if not domain or not engine:
        raise pytest.UsageError(
            f"{source}: {text!r} is not DOMAIN:ENGINE; write for example mylib:fast."
        )
    return domain, engine, source


def _enable(domain: str, engine: str, source: str) -> str:
    """Enable what ``source`` names for the whole run; return the engine chosen."""
    given = f"{source} item {domain}:{engine}" if source == ENV else f"{source}={domain}:{engine}"
    try:
        import_domain(domain)
    except CoheriqDomainNotFoundError as error:
        raise pytest.UsageError(_no_such_domain(domain, given, error)) from None
    except CoheriqError as error:
        raise pytest.UsageError(f"{given}: {error}") from None
    except Exception as error:  # the library itself raised while being imported
        raise pytest.UsageError(
            f"{given}: importing the library of domain {domain!r} raised "
            f"{type(error).__name__}: {error}. Fix the library, or name another domain."
        ) from None
    named_by = f" (given as {domain}:{engine})"
    try:  # an ordered choice (a comma): the first of them that starts here
        enable_engine(domain, parse_engine_list(engine, named_by) if "," in engine else engine)
    except CoheriqError as error:
        raise pytest.UsageError(f"{given}: {error}") from None
    # An ordered choice is resolved by now: the cases to keep are the chosen engine's.
    return active_implementation(domain) or engine


def _no_such_domain(domain: str, given: str, error: CoheriqDomainNotFoundError) -> str:
    """The message for a domain that importing its library did not create."""
    advertised = discovery.advertised_domains()
    ep = advertised.get(domain)
    module = discovery.module_of(ep) if ep is not None else domain
    cause = error.__cause__  # the ImportError, where the import itself failed
    outcome = "did not create it" if cause is None else f"failed ({cause})"
    tried = f"importing the module {module!r} {outcome}"
    if ep is not None:  # the library is installed but broken: no other name would help
        return (
            f"{given}: an installed package advertises the coheriq domain {domain!r} "
            f"({discovery.describe(ep)}), but {tried}. Fix or reinstall that package, or "
            "name another domain."
        )
    known = {d.name for d in all_domains()} | set(advertised)
    fix = "Correct the domain's name, or install the library that creates it."
    if cause is None:
        # The module is installed (it imported): what is missing is an engine package
        # that declares it, as COHERIQ_ACCELERATE would say, not another name.
        from ._outside.activation import accelerate

        try:
            accelerate(domain)
            fix = ""  # declared after all (installed meanwhile): nothing to add
        except CoheriqError as error:
            fix = str(error)
    return (
        f"{given} names the coheriq domain {domain!r}, which no imported library created and "
        f"no installed package advertises, and {tried}.{did_you_mean(domain, known)} "
        f"Domains here (imported, or advertised by installed packages): {listing(known)}. "
        f"{fix}"
    )


def pytest_report_header(config: pytest.Config) -> list[str]:
    return _report_domains(config, "before the run")


def _report_domains(config: pytest.Config, when: str) -> list[str]:
    """A line for each domain registered since the last report, and for the engines it names
    (none under ``-q``). ``when``: when an engine chosen otherwise was chosen."""
    if config.get_verbosity() < 0:
        return []
    reported = config.stash.setdefault(_reported, set())
    new = [domain for domain in all_domains() if domain.name not in reported]
    reported.update(domain.name for domain in new)
    chosen = config.stash.get(_chosen, {})
    lines, stated = [], []
    for domain in new:
        line, engines = _domain_line(domain, chosen, when)
        lines.append(f"coheriq: {line}")
        # Each engine named that states what it is (read without importing it).
        said = engine_statements(domain.name) if set(engines) - {REFERENCE} else {}
        for engine in engines:
            statement = said.get(engine)
            if statement is not None and statement.problem is None and statement.description:
                needs = f" Needs {statement.needs}." if statement.needs else ""
                stated.append(
                    f"coheriq: engine {engine!r} of {domain.name}: {statement.description}{needs}"
                )
    return lines + stated


def _domain_line(
    domain: AccelerationDomain, chosen: dict[str, tuple[str, str]], when: str
) -> tuple[str, list[str]]:
    """``mylib on 'fast' (how it was chosen)``, and the engines the line names."""
    settled = domain.choice.settled
    engine = settled.engine if settled else None  # None: not chosen yet
    variable = domain.env_var
    value = os.environ.get(variable, "").strip() if variable else ""
    names = [name.strip() for name in value.split(",") if name.strip()]
    tried = f"; tried {describe_tried(settled.tried)}" if settled and settled.tried else ""
    after = ""
    if domain.name in chosen:
        how = OPTION
    elif engine is not None and engine not in names:
        how = f"chosen {when}"
    elif names:
        how = f"{variable}={value}"
        after = (
            f"; its coheriq_engines cases still run on every engine "
            f"({OPTION}={domain.name}:{','.join(names)} runs them on it only)"
        )
        if engine is None:
            after = ", chosen at its first call" + after
    else:
        engine, how = REFERENCE, "at first use"
    if engine is not None:
        names = [engine]
    on = ", ".join(map(repr, names))
    if len(names) > 1:
        on = f"the first of {on} that starts here"
    # Declared candidates of modules the tests import later (or never: then the
    # run did not test them on any engine).
    later = len(domain.not_imported)
    waiting = f", {later} candidates not imported yet" if later else ""
    return f"{domain.name} on {on} ({how}{tried}){waiting}{after}", names


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
    # Every engine, also with --coheriq-engine: the cases of the others are deselected
    # below rather than never made, so that the run says how many it left out.
    engines = [REFERENCE, *available_engines(domain)]
    # The parameter lives in each case's callspec, where the hooks below find it;
    # parametrize wants the name among the fixtures, even if the test takes none.
    if "coheriq_engine" not in metafunc.fixturenames:
        metafunc.fixturenames.append("coheriq_engine")
    metafunc.parametrize(
        "coheriq_engine", [(domain, e) for e in engines], ids=engines, indirect=True
    )


def _case(item: pytest.Item) -> tuple[str, str] | None:
    """``(domain, engine)`` of a case made by the coheriq_engines marker, else ``None``."""
    callspec = getattr(item, "callspec", None)
    param = callspec.params.get("coheriq_engine") if callspec is not None else None
    return None if param is None else (param[0], param[1])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the coheriq_engines cases of engines other than the one the run chose."""
    chosen = config.stash.get(_chosen, {})
    drop: dict[pytest.Item, str] = {}  # a case of another engine -> its domain
    for item in items:
        case = _case(item)
        if case is not None and case[0] in chosen and case[1] != chosen[case[0]][0]:
            drop[item] = case[0]
    if drop:
        config.hook.pytest_deselected(items=list(drop))
        items[:] = [item for item in items if item not in drop]
    counts = Counter(drop.values())
    config.stash[_deselected] = {domain: counts[domain] for domain in chosen if counts[domain]}


def pytest_report_collectionfinish(config: pytest.Config) -> list[str]:
    """After "collected ...": the domains the test modules created, and what was deselected."""
    chosen = config.stash.get(_chosen, {})
    lines = _report_domains(config, "before the run")
    for domain, count in config.stash.get(_deselected, {}).items():
        engine, source = chosen[domain]
        lines.append(
            f"coheriq: deselected {count} coheriq_engines case{'s' * (count != 1)} of "
            f"{domain}: {source} chose {engine!r}, so they run on that engine only "
            "(without it, on every installed engine)"
        )
    return lines


def _engine_scope(item: pytest.Item) -> Any:
    """The ``using_engine`` block of a case made by the coheriq_engines marker, if any."""
    case = _case(item)
    if case is None or item.stash.get(_failed_to_start, False):
        return nullcontext()
    return using_engine(*case)


# Each phase of a case runs inside its engine's scope, so that its fixtures make
# their objects with that engine too.
@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> object:
    with ExitStack() as stack:
        try:
            stack.enter_context(_engine_scope(item))
        except CoheriqError as error:
            item.stash[_failed_to_start] = True  # reported here once, not again at teardown
            if isinstance(error, CoheriqEngineStartError):
                # Installed but not startable here (a GPU engine on a laptop): not a failure
                # of the test, and the reason shows in the summary.
                pytest.skip(str(error))
            raise
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> object:
    verifications = item.config.stash.get(_verifications, [])
    before = [_mismatch_state(v) for v in verifications]
    with ExitStack() as stack:
        for verification in verifications:
            stack.enter_context(verification)
        with _engine_scope(item):
            outcome = yield
    lines: list[str] = []
    for verification, (count, shown) in zip(verifications, before, strict=True):
        new = [str(m) for m in verification.mismatches if id(m) not in shown]
        more = _mismatch_state(verification)[0] - count - len(new)  # not kept as examples
        lines += new + [f"and {more} more (counted in the report)"] * (more > 0)
    if lines:
        pytest.fail(
            f"{VERIFY_OPTION}: the engine and the implementation it is verified against "
            "disagreed during this test:\n" + "\n".join(lines),
            pytrace=False,
        )
    return outcome


def _mismatch_state(verification: Verification) -> tuple[int, set[int]]:
    """How many mismatches ``verification`` counted, and which it keeps as examples."""
    return sum(r.mismatches for r in verification.rows), {id(m) for m in verification.mismatches}


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    created = _report_domains(config, "during the run")  # by the tests, as they ran
    if created:
        terminalreporter.write_sep("-", "coheriq domains")
        for line in created:
            terminalreporter.write_line(line)
    for verification in config.stash.get(_verifications, []):
        terminalreporter.write_sep("-", "coheriq verification")
        terminalreporter.write_line(str(verification))
    if _profile in config.stash:
        terminalreporter.write_sep("-", "coheriq share of the calls")
        for line in _share_lines(config):
            terminalreporter.write_line(line)
    declined = config.stash.get(_declined, {})
    if declined:
        terminalreporter.write_sep("-", "coheriq declines")
        for (domain, candidate, engine, reason), n in sorted(declined.items()):
            terminalreporter.write_line(
                f"{domain}.{candidate}: {engine} declined {n} call{'s' * (n != 1)} ({reason})"
            )


def _profile_the_run(config: pytest.Config) -> None:
    """Record every call of the run, in every thread, for the share lines of the summary."""
    from ._tools.profiling import profile

    recorded: Profile = profile(everywhere=True)
    config.stash[_profile] = recorded
    recorded.__enter__()
    config.add_cleanup(lambda: recorded.__exit__(None, None, None))


def _share_lines(config: pytest.Config) -> list[str]:
    """For each domain the run chose an engine for (each called, where it chose none), the
    share of its calls on that engine."""
    shares = config.stash[_profile].share()
    chosen: dict[str, tuple[str, str]] = config.stash.get(_chosen, {})
    domains = list(chosen) or list(shares)
    if not domains:
        return ["no calls through coheriq candidates were recorded in this process"]
    return [
        str(shares[domain])
        if domain in shares
        else f"{domain}: no calls of its candidates were recorded in this process"
        for domain in domains
    ]


def _count_declines(config: pytest.Config) -> None:
    """Count every decline of the run, for the summary (see coheriq.may_decline)."""
    from ._engines import declines

    counts: Counter[tuple[str, str, str, str]] = Counter()
    config.stash[_declined] = counts

    def count(state: Any, candidate: str, engine: str, reason: str) -> None:
        counts[state.name, candidate, engine, reason] += 1

    declines.watchers.append(count)
    config.add_cleanup(lambda: declines.watchers.remove(count))


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
        name, names = _xfail_target(item, marker)
        domain = next((d for d in all_domains() if d.name == name), None)
        if domain is None:
            continue  # nothing of that domain can run here
        # Outside a block, as the test's first call would, make the global choice.
        running = domain.scopes.active_engine() or domain.choice.settle().engine
        if running in names:
            reason = marker.kwargs.get("reason", "") or f"known to fail on {running!r}"
            # Without strict=, the project's xfail_strict setting decides, as for xfail.
            strict = {"strict": marker.kwargs["strict"]} if "strict" in marker.kwargs else {}
            item.add_marker(pytest.mark.xfail(reason=reason, **strict))


def _xfail_target(item: pytest.Item, marker: pytest.Mark) -> tuple[str, set[str]]:
    """The domain and engine(s) a coheriq_xfail marker names, positionally or by keyword."""
    args, kwargs = marker.args, marker.kwargs
    domain = args[0] if args else kwargs.get("domain")
    engines = args[1] if len(args) > 1 else kwargs.get("engine", kwargs.get("engines"))
    if not isinstance(domain, str) or engines is None:
        raise pytest.UsageError(
            f"{item.nodeid}: coheriq_xfail names a domain and an engine (or a list of "
            "engines): @pytest.mark.coheriq_xfail('mylib', 'fast', reason='...'), or "
            "domain= and engine= as keywords."
        )
    return domain, {engines} if isinstance(engines, str) else set(engines)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _crossovers_before in config.stash:
        from ._engines.crossover import freeze

        freeze(config.stash[_crossovers_before])
