"""The ``coheriq`` command line: list, show, explain and check engines.

Exit codes: 0 when all is well; 1 when ``check`` found a problem; 2 when the
command itself could not run (a usage error, an unknown domain, an engine that
fails to load in ``show``/``explain``), with one line on standard error that says
why. Every command takes ``--json`` for tools.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import warnings

from . import discovery
from ._validate import REFERENCE
from .activation import available_engines, import_domain
from .domain import AccelerationDomain
from .engine import engine_class
from .exceptions import CoheriqError, CoheriqSignatureWarning
from .introspection import coverage, explain
from .signatures import STRICT_ENV

__all__ = ["main"]


def _distribution(ep: object) -> dict[str, str | None]:
    dist = getattr(ep, "dist", None)
    return {
        "distribution": getattr(dist, "name", None),
        "version": getattr(dist, "version", None),
    }


def _installed() -> dict[str, dict[str, object]]:
    """Advertised domains and engines, from package metadata only (nothing is imported)."""
    from importlib.metadata import distributions

    domains: dict[str, dict[str, object]] = {}
    for name, advertised in discovery.advertised_domains().items():
        domains[name] = {"module": advertised.value, **_distribution(advertised), "engines": {}}
    prefix = discovery.group_of("")
    every = (ep for dist in distributions() for ep in dist.entry_points)
    for ep in every:
        if ep.group.startswith(prefix):
            domain = ep.group[len(prefix) :]
            entry = domains.setdefault(
                domain, {"module": None, "distribution": None, "version": None, "engines": {}}
            )
            engines = entry["engines"]
            assert isinstance(engines, dict)
            engines.setdefault(ep.name, {"value": ep.value, **_distribution(ep)})
    return dict(sorted(domains.items()))


def _list(args: argparse.Namespace) -> int:
    installed = _installed()
    if args.json:
        print(json.dumps({"domains": installed}, indent=2))
        return 0
    if not installed:
        print("no coheriq domains or engines are advertised by installed packages")
    for name, entry in installed.items():
        where = (
            f" (module {entry['module']}, from {entry['distribution']} {entry['version']})"
            if entry["module"]
            else ""
        )
        print(f"domain {name}{where}")
        engines = entry["engines"]
        assert isinstance(engines, dict)
        for engine, info in sorted(engines.items()):
            print(f"  engine {engine}: {info['value']} ({info['distribution']} {info['version']})")
        if not engines:
            print("  no engines advertised")
    return 0


def _domain(args: argparse.Namespace) -> AccelerationDomain:
    """The domain the command names, importing its library (one line on failure)."""
    module = args.import_module
    try:
        if module:
            __import__(module)
        return import_domain(args.domain)
    except (CoheriqError, ImportError):
        raise
    except Exception as error:  # the library itself failed while being imported
        raise CoheriqError(
            f"Importing the library of domain {args.domain!r} raised "
            f'{type(error).__name__}: {error}. Fix the library (run `python -c "import '
            f'{module or args.domain}"` for the traceback), or name another domain.'
        ) from error


def _subject(args: argparse.Namespace) -> object:
    """What ``explain`` is asked about: a domain, or a candidate as ``module.name``."""
    try:
        return _domain(args)
    except CoheriqError:
        module, dot, name = args.domain.rpartition(".")
        if not dot:
            raise
        try:
            found = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            raise CoheriqError(
                f"{args.domain!r} is neither a coheriq domain nor a candidate that "
                f"module {module!r} defines. Name a domain (coheriq list shows them) or a "
                "candidate as MODULE.NAME, e.g. ragbatch.softmax."
            ) from None
        return found


def _show(args: argparse.Namespace) -> int:
    domain = _domain(args)
    table = coverage(domain, advertised=True)
    kinds = domain.candidate_kinds
    if args.json:
        data = {
            "domain": domain.name,
            "env_var": domain.env_var,
            "candidates": {c: "class" if k else "function" for c, k in kinds.items()},
        }
        print(json.dumps({**data, "coverage": table.as_dict()}, indent=2))
        return 0
    count = f"{len(kinds)} candidate{'s' * (len(kinds) != 1)}"
    variable = (
        f"environment variable {domain.env_var}" if domain.env_var else "no environment variable"
    )
    print(f"domain {domain.name}: {count}, {variable}")
    for candidate, is_class in kinds.items():
        print(f"  {'class' if is_class else 'function'} {candidate}")
    print()
    print(table)
    return 0


def _explain(args: argparse.Namespace) -> int:
    subject = _subject(args)
    report = explain(subject)
    if not report.settled and report.engine != REFERENCE and not report.tried:
        # Do what the first call would, choosing nothing: find the engine that the
        # environment names (importing it) and start it, so that a name matching no
        # engine, or an engine that cannot start here, is reported now, and the
        # table of who supplies what can be filled in.
        domain = import_domain(report.domain)
        named_by = f" (named by the environment variable {domain.env_var})"
        cls = domain.engines.engine_class(domain.choice.env_value(), named_by=named_by)
        domain.engines.members_of(cls)
        report = explain(subject)
    if report.engine is None:  # an ordered list of which nothing can run here
        raise CoheriqError(f"Domain {report.domain!r} cannot run here: {report.reason}.")
    print(json.dumps(report.as_dict(), indent=2) if args.json else report)
    return 0


def _check(args: argparse.Namespace) -> int:
    """Load engines with signature checks strict; report every problem."""
    os.environ[STRICT_ENV] = "1"  # engines defined from here on fail on a bad override
    results: dict[str, str] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CoheriqSignatureWarning)
        domain = _domain(args)  # engines defined with the library were checked as it loaded
        names = args.engines or available_engines(domain)
        for name in names:
            try:
                cls = engine_class(domain, name)
                if args.start:  # also start it: an engine that cannot run here says so
                    domain.engines.members_of(cls)
                results[name] = "ok, started" if args.start else "ok"
            except CoheriqError as error:
                results[name] = f"error: {error}"
    for warning in caught:
        if isinstance(warning.message, CoheriqSignatureWarning):
            results[warning.message.engine] = f"error: {warning.message}"
    problems = sum(1 for r in results.values() if r.startswith("error"))
    if args.json:
        data = {"domain": domain.name, "engines": results, "problems": problems}
        print(json.dumps(data, indent=2))
    else:
        for name, result in results.items():
            print(f"{name}: {result}")
        checked = f"{len(results)} engine{'s' * (len(results) != 1)} checked"
        print(f"{checked}, {problems} with {'a problem' if problems == 1 else 'problems'}")
    return 1 if problems else 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="coheriq", description="See and check the coheriq engines of installed libraries."
    )
    from . import __version__

    parser.add_argument("--version", action="version", version=f"coheriq {__version__}")
    parser.add_argument("--json", action="store_true", help="print JSON for tools")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, run: object, help: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help, description=help)
        # Before or after the command; SUPPRESS keeps a --json given before it.
        sub.add_argument(
            "--json", action="store_true", default=argparse.SUPPRESS, help="print JSON for tools"
        )
        sub.set_defaults(run=run)
        return sub

    command("list", _list, "list advertised domains and engines, importing none")
    for name, run, text in [
        ("show", _show, "show a domain's candidates and which engine supplies each"),
        ("explain", _explain, "say what a call would run now (environment included), and why"),
        ("check", _check, "load engines with strict signature checks; exit 1 on any problem"),
    ]:
        sub = command(name, run, text)
        sub.add_argument("domain", metavar="DOMAIN")
        sub.add_argument(
            "--import",
            dest="import_module",
            metavar="MODULE",
            help="import MODULE first (the library, when it does not advertise its domain)",
        )
        if name == "check":
            sub.add_argument("engines", nargs="*", metavar="ENGINE", help="default: all")
            sub.add_argument(
                "--start",
                action="store_true",
                help="also start each engine (its __init__ runs): report one that cannot run here",
            )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return its exit code."""
    args = _parser().parse_args(argv)
    try:
        return int(args.run(args))
    except (CoheriqError, ImportError) as error:
        if args.json:  # a tool reading JSON gets the error as JSON too
            print(json.dumps({"error": str(error), "kind": type(error).__name__}, indent=2))
        print(f"coheriq: error: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `coheriq list | head -1`: the reader has gone, say nothing
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that the interpreter's flush is silent
        return 1
