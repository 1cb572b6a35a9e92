"""The ``coheriq`` command line: list, show, explain and check engines; write statements; run
and verify programs. The command-line guide (docs/tools.rst) gives its output, its JSON and its
exit codes (2: the command could not run, said in one line on standard error).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import sys
import textwrap
import warnings
from typing import Any, NoReturn

from . import discovery
from ._api.engine_forms import engine_class
from ._api.verbs import available_engines, import_domain
from ._choice.ordered import parse_engine_list
from ._engines.overrides import STRICT_ENV, bypassed_classes
from ._library.domain import AccelerationDomain
from ._library.late_candidates import import_declared, not_imported_note
from ._library.registry import copies_of
from ._names import REFERENCE
from ._tools.introspection import Coverage, coverage, explain
from .exceptions import (
    CoheriqDeclarationWarning,
    CoheriqDomainNotFoundError,
    CoheriqError,
    CoheriqSignatureWarning,
    did_you_mean,
)
from .statements import (
    EngineStatement,
    compare,
    dumps,
    engine_statements,
    read_statement_file,
    statement_of,
)

__all__ = ["main"]

BROKEN = "broken"  # a coverage cell, and show's word, for an engine that cannot be loaded
STATED = "stated"  # a coverage cell, for a candidate that a statement says its engine implements
IMPORTED = "imported"  # show's word for an engine whose class was looked at


# -- output -------------------------------------------------------------------------------


def _wrap(line: str) -> str:
    """``line`` wrapped to the terminal's width (at least 40), with a hanging indent."""
    body = line.lstrip(" ")
    indent = " " * (len(line) - len(body))
    return textwrap.fill(
        body,
        max(shutil.get_terminal_size((80, 24)).columns, 40),
        initial_indent=indent,
        subsequent_indent=indent + "  ",
        break_long_words=False,
        break_on_hyphens=False,
    )


def _say(*lines: str) -> None:
    """Print prose lines, each wrapped (never a table: its columns must stay aligned)."""
    for line in lines:
        print(_wrap(line) if line else "")


def _json(**data: Any) -> None:
    print(json.dumps(data, indent=2))


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'s' * (number != 1)}"


def _state(error: str | None, **more: Any) -> dict[str, Any]:
    """An engine's (or module's) state in JSON."""
    return {"ok": True, **more} if error is None else {"ok": False, **more, "error": error}


# -- list ---------------------------------------------------------------------------------


def _distribution(ep: object) -> dict[str, str | None]:
    dist = getattr(ep, "dist", None)
    return {"distribution": getattr(dist, "name", None), "version": getattr(dist, "version", None)}


_STATED = ("description", "needs", "implements")  # what list --json gives of a statement


def _installed() -> dict[str, dict[str, Any]]:
    """Advertised domains and engines, from package metadata only (nothing is imported)."""
    domains: dict[str, dict[str, Any]] = {
        name: {"module": ep.value, **_distribution(ep), "engines": {}}
        for name, ep in discovery.advertised_domains().items()
    }
    for domain, engines in discovery.engine_groups().items():
        entry = domains.setdefault(domain, {"module": None, **_distribution(None), "engines": {}})
        stated = engine_statements(domain) if engines else {}
        for ep in sorted(engines, key=lambda ep: ep.name):  # stable: the first of a name wins
            said, state = stated.get(ep.name), None
            if said is not None:
                more = {} if said.problem else {k: getattr(said, k) for k in _STATED}
                state = _state(said.problem, source=said.source, **more)
            entry["engines"].setdefault(
                ep.name, {"module": ep.value, **_distribution(ep), "statement": state}
            )
    return dict(sorted(domains.items()))


def _list(args: argparse.Namespace) -> int:
    installed = _installed()
    if args.json:
        _json(domains=installed)
        return 0
    if not installed:
        _say("No coheriq domains or engines are advertised by installed packages.")
    for name, entry in installed.items():
        where = f" (module {entry['module']}, from {entry['distribution']} {entry['version']})"
        _say(f"domain {name}{where if entry['module'] else ''}")
        for engine, info in entry["engines"].items():
            _say(f"  engine {engine}: {info['module']} ({info['distribution']} {info['version']})")
            said = info["statement"]
            if said is not None and not said["ok"]:
                _say(f"    {said['error']}")
            elif said is not None:
                if said["description"]:
                    _say(f"    {said['description']}")
                needs = f"; needs {said['needs']}" if said["needs"] else ""
                count = _count(len(said["implements"]), "candidate")
                _say(f"    implements {count} (stated){needs}")
        if not entry["engines"]:
            _say("  no engines advertised")
    return 0


# -- the domain or candidate a command names ----------------------------------------------


def _domain(args: argparse.Namespace) -> AccelerationDomain:
    """The domain the command names, importing its library (one line on failure)."""
    module = args.import_module
    try:
        if module:
            __import__(module)
        # A library that never adopted coheriq, seen as its engines' users see it: accelerated
        # from the outside, before anything imports it (explain's MODULE.NAME imports MODULE).
        library = args.domain.partition(".")[0]
        if copies_of(library) is None and library.isidentifier():
            from ._outside.activation import accelerate_if_declared

            accelerate_if_declared(library)
        return import_domain(args.domain)
    except CoheriqError:
        raise
    except ImportError as error:  # only --import's module: import_domain says its own
        raise CoheriqError(
            f"The module {module!r} that --import names could not be imported: "
            f"{type(error).__name__}: {error}. Check its name, or install the package "
            "that provides it."
        ) from error
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
        neither = CoheriqError(
            f"{args.domain!r} is neither a coheriq domain nor a candidate that "
            f"module {module!r} defines. Name a domain (coheriq list shows them) or a "
            "candidate as MODULE.NAME, e.g. ragbatch.softmax."
        )
        if not all(part.isidentifier() for part in module.split(".")):  # ".x", "a..b"
            raise neither from None
        try:
            imported = importlib.import_module(module)
        except ImportError:
            raise neither from None
        except Exception as error:  # the module itself failed while being imported
            raise CoheriqError(
                f"Importing module {module!r}, to find candidate {name!r}, raised "
                f"{type(error).__name__}: {error}. Fix the module, or name the domain instead."
            ) from error
        try:
            return getattr(imported, name)
        except AttributeError:
            raise neither from None


def _load_each(
    domain: AccelerationDomain,
    names: list[str],
    start: bool = False,
    notes: dict[str, list[str]] | None = None,
) -> dict[str, str | None]:
    """Load (with ``start``, also start) each engine on its own, so that a broken one does not
    hide the others: name -> ``None``, or why not. ``notes`` gets each one's warnings."""
    results: dict[str, str | None] = {}
    for name in names:
        try:
            cls = engine_class(domain, name)
            if start:  # its __init__ runs: an engine that cannot run here says so
                domain.engines.members_of(cls)
            if notes is not None:
                notes[name] = bypassed_classes(domain, cls)
            table = cls.__coheriq_conversions__
            results[name] = " ".join(table.problems(name)) if table is not None else None
            results[name] = results[name] or None
        except CoheriqError as error:
            results[name] = str(error)
    return results


# -- show ---------------------------------------------------------------------------------


def _with_columns(
    table: Coverage, broken: dict[str, str], stated: dict[str, EngineStatement]
) -> Coverage:
    """``table`` with a column for each broken engine, and each that its statement stands for."""
    engines = [REFERENCE, *sorted({*table.engines[1:], *broken, *stated})]

    def cell(candidate: str, engine: str) -> str:
        if engine not in stated:
            return BROKEN
        return STATED if candidate in stated[engine].implements else REFERENCE

    rows = {
        c: {e: row[e] if e in row else cell(c, e) for e in engines} for c, row in table.rows.items()
    }
    return Coverage(table.domain, engines, rows)


def _show(args: argparse.Namespace) -> int:
    domain = _domain(args)
    engines = domain.engines
    advertised = engines.names()
    # An engine not imported yet that states what it implements stays so: its statement stands
    # for it (coheriq check compares the two). One with an unusable statement is imported.
    unimported = [
        (n, s)
        for n, s in engine_statements(domain).items()
        if n in advertised and n not in engines.by_name
    ]
    stated = {n: s for n, s in unimported if s.problem is None}
    ignored = {n: s.problem for n, s in unimported if s.problem is not None}
    # As coverage(advertised=True): an engine not materialized yet has no class.
    names = [n for n in advertised if n not in engines.reserved and n not in stated]
    failures = {n: e and " ".join(e.split()) for n, e in _load_each(domain, names).items()}
    broken = {name: error for name, error in failures.items() if error is not None}
    table = _with_columns(coverage(domain), broken, stated)
    kinds = domain.candidate_kinds
    if args.json:
        states = {n: _state(e, source=IMPORTED) for n, e in failures.items()}
        states.update({n: _state(None, source=STATED) for n in stated})
        for name, problem in ignored.items():
            states[name]["statement_error"] = problem
        _json(
            domain=domain.name,
            env_var=domain.env_var,
            candidates={c: "class" if k else "function" for c, k in kinds.items()},
            not_imported=dict(domain.not_imported),
            engines=dict(sorted(states.items())),
            coverage=table.rows,
            problems=len(broken),
        )
        return 1 if broken else 0
    env = domain.env_var
    variable = f"environment variable {env}" if env else "no environment variable"
    _say(f"domain {domain.name}: {_count(len(kinds), 'candidate')}, {variable}")
    later = domain.not_imported
    for c, is_class in kinds.items():
        note = f" ({not_imported_note(later[c])})" if c in later else ""
        _say(f"  {'class' if is_class else 'function'} {c}{note}")
    print()
    print(table)  # a table: never wrapped
    if stated:
        print()
        _say(
            f"{STATED}: implemented, as the engine's statement says (the engine is not "
            "imported; coheriq check imports it and compares)."
        )
        for name, statement in sorted(stated.items()):
            needs = f" Needs {statement.needs}." if statement.needs else ""
            said = f" {statement.description}" if statement.description else ""
            _say(f"{name}: {STATED}.{said}{needs}")
    for word, problems in ((IMPORTED, ignored), (BROKEN, broken)):
        if problems:
            print()
            _say(*(f"{name}: {word}: {problem}" for name, problem in sorted(problems.items())))
    return 1 if broken else 0


# -- explain ------------------------------------------------------------------------------


def _explain(args: argparse.Namespace) -> int:
    subject = _subject(args)
    report = explain(subject)
    domain = import_domain(report.domain)
    listed = "," in domain.choice.env_value()  # an ordered list: explain tried it already
    if not report.settled and report.engine != REFERENCE and not report.tried and not listed:
        # As the first call would, choosing nothing: start the engine the environment names,
        # so that one missing or unable to start is reported now, and the table filled in.
        named_by = f" (named by the environment variable {domain.env_var})"
        cls = domain.engines.engine_class(domain.choice.env_value(), named_by=named_by)
        domain.engines.members_of(cls)
        report = explain(subject)
    if report.engine is None:  # an ordered list of which nothing can run here
        reason = report.reason.rstrip(".")  # it may end a sentence of its own
        raise CoheriqError(f"Domain {report.domain!r} cannot run here: {reason}.")
    if args.json:
        _json(**report.as_dict())
    else:  # the prose wrapped; the "supplied by" table as it is
        prose, heading, table = str(report).partition("\n  supplied by:")
        _say(*prose.splitlines())
        if heading:
            print(heading.lstrip("\n") + table)
    return 0


# -- check --------------------------------------------------------------------------------


def _add_problem(results: dict[str, str | None], name: str, problem: str) -> None:
    earlier = results.get(name)
    results[name] = problem if earlier is None else f"{earlier} {problem}"


def _check_statements(
    domain: AccelerationDomain, names: list[str], results: dict[str, str | None], every: bool
) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Compare the statement of each engine that loaded with its class (one that cannot be
    read or disagrees is its engine's problem); return each compared statement's JSON state,
    and with ``every``, the problem of each statement of an engine that does not exist."""
    statements = engine_statements(domain)
    states: dict[str, dict[str, Any]] = {}
    for name in names:
        statement, cls = statements.get(name), domain.engines.by_name.get(name)
        if statement is None or cls is None:
            continue  # states nothing, or its class could not be loaded to compare
        drift = None if statement.problem else compare(statement, cls)
        problem = statement.problem or (drift.message if drift else None)
        states[name] = _state(problem, **(drift.as_dict() if drift else {}))
        if problem is not None:
            _add_problem(results, name, problem)
    orphans = {
        name: (
            f"Package metadata has a statement of engine {name!r} of domain {domain.name!r} "
            f"({statements[name].source}), but there is no such engine.{did_you_mean(name, names)} "
            f"Name the engine in group {discovery.statement_group_of(domain.name)!r} as it is "
            f"advertised in group {discovery.group_of(domain.name)!r}."
        )
        for name in (sorted(set(statements) - set(names)) if every else ())
    }
    return states, orphans


def _check(args: argparse.Namespace) -> int:
    """Import the library's lazily imported modules, then load (with ``--start``, start) each
    engine with strict signature checks and compare its statement; report every problem."""
    os.environ[STRICT_ENV] = "1"  # engines defined from here on fail on a bad override
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CoheriqSignatureWarning)
        domain = _domain(args)  # engines defined with the library were checked as it loaded
        # Meanwhile a bad override is a warning, reported as its engine's, instead of
        # failing the import of a module that loads an engine with the library.
        os.environ[STRICT_ENV] = "0"
        try:
            imported = import_declared(domain)  # module -> its problem
        finally:
            os.environ[STRICT_ENV] = "1"
        notes: dict[str, list[str]] = {}
        names = args.engines or list(available_engines(domain))
        results = _load_each(domain, names, args.start, notes)
        stated, orphans = _check_statements(domain, names, results, every=not args.engines)
    declared = []  # how the library differs from a declaration of it (accelerated from outside)
    for warning in caught:
        if isinstance(warning.message, CoheriqSignatureWarning):
            _add_problem(results, warning.message.engine, str(warning.message))
        elif isinstance(warning.message, CoheriqDeclarationWarning):
            declared.append(str(warning.message))
    results = dict(sorted(results.items()))
    problems = {info.module: None for info in domain.state.candidates.values()} | imported
    modules = {module: _state(problem) for module, problem in sorted(problems.items())}
    checked = {
        "modules": len(modules),
        "candidates": len(domain.candidate_kinds),
        "engines": len(results),
        "statements": len(stated) + len(orphans),
    }
    failed = {
        "engine": [n for n, e in results.items() if e is not None],
        "module": [m for m, state in modules.items() if not state["ok"]],
        "statement": list(orphans),
        "declaration": [f"{domain.name} ({len(declared)})"] if declared else [],
    }
    count = sum(map(len, failed.values())) - bool(declared) + len(declared)
    if args.json:
        engines = {
            n: _state(
                e,
                **({"started": e is None} if args.start else {}),
                **({"warnings": notes[n]} if notes.get(n) else {}),
                **({"statement": stated[n]} if n in stated else {}),
            )
            for n, e in results.items()
        }
        _json(
            domain=domain.name,
            engines=engines,
            modules=modules,
            orphan_statements={n: _state(e) for n, e in orphans.items()},
            declaration_problems=declared,
            checked=checked,
            problems=count,
        )
        return 1 if count else 0
    ok = "ok, started" if args.start else "ok"
    agrees = " (its statement agrees)"
    for n, e in results.items():
        _say(f"{n}: {ok + agrees * (n in stated) if e is None else 'error: ' + e}")
    _say(*(f"{n}: warning: {note}" for n, said in sorted(notes.items()) for note in said))
    _say(*(f"module {m}: error: {s['error']}" for m, s in modules.items() if not s["ok"]))
    _say(*(f"statement {n}: error: {e}" for n, e in orphans.items()))
    _say(*(f"declaration: {problem}" for problem in declared))
    what = ", ".join(_count(number, noun[:-1]) for noun, number in checked.items())
    found = "; ".join(f"{kind} {', '.join(map(repr, n))}" for kind, n in failed.items() if n)
    _say(
        f"Checked domain {domain.name!r}: {what}. "
        + (f"{_count(count, 'problem')}: {found}." if count else "No problems.")
    )
    return 1 if count else 0


# -- statement ----------------------------------------------------------------------------


def _statement(args: argparse.Namespace) -> int:
    """Write the statement of an engine, from its class (which this imports)."""
    domain = _domain(args)
    if args.engine == REFERENCE:
        raise CoheriqError(
            f"{REFERENCE!r} is the domain's own implementations, not an engine: it states "
            f"nothing. Name an engine of domain {domain.name!r}."
        )
    cls = engine_class(domain, args.engine)
    description = args.description if args.description is not None else _description(cls)
    needs = args.needs if args.needs is not None else _needs_before(args, domain)
    statement = statement_of(cls, description=description, needs=needs)
    text = dumps(statement)
    if not args.output:
        sys.stdout.write(text)  # the statement itself, JSON with or without --json
        return 0
    try:
        with open(args.output, "w", encoding="utf-8") as file:
            file.write(text)
    except OSError as error:
        raise CoheriqError(
            f"The statement of engine {args.engine!r} of domain {domain.name!r} could not be "
            f"written to {args.output!r}: {error.strerror or error}. Give -o a file that can "
            "be written, in a directory that exists."
        ) from None
    if args.json:
        said = statement.as_dict()
        _json(domain=domain.name, engine=args.engine, file=args.output, statement=said)
        return 0
    ep = discovery.advertised(domain.name).get(args.engine)
    module = discovery.module_of(ep) if ep is not None else cls.__module__
    _say(
        f"Wrote the statement of engine {args.engine!r} of domain {domain.name!r} to "
        f"{args.output}: it implements {_count(len(statement.implements), 'candidate')}.",
        f"Point to it from the engine's package, with the file relative to the directory "
        f"that holds module {module!r}:",
    )
    print(f'  [project.entry-points."{discovery.statement_group_of(domain.name)}"]')
    print(f'  {args.engine} = "{module}:{os.path.basename(args.output)}"')
    return 0


def _description(cls: Any) -> str:
    """An engine's description when none is given: its class's docstring, else its module's."""
    module = sys.modules.get(cls.__module__)
    # The class's own docstring: docstrings inherit.
    for doc in (cls.__dict__.get("__doc__"), getattr(module, "__doc__", None)):
        if first := "".join((doc or "").strip().splitlines()[:1]).strip():
            return first
    raise CoheriqError(
        f"Engine {cls.__coheriq_name__!r} of domain {cls.__coheriq_domain__.name!r} has no "
        "docstring (neither its class nor its module) to take a description from. Give "
        "one with --description TEXT, or write a docstring."
    )


def _needs_before(args: argparse.Namespace, domain: AccelerationDomain) -> str | None:
    """The ``needs`` of the statement this one replaces: the output file's (where it is a
    regular file, never ``-o /dev/stdout`` into a pipe), else the installed one's."""
    if args.output:
        said = read_statement_file(args.output, domain=domain.name, engine=args.engine)
        if said.problem is None:
            return said.needs
    installed = engine_statements(domain).get(args.engine)
    return installed.needs if installed is not None and installed.problem is None else None


# -- verify and run -----------------------------------------------------------------------


def _leading_options(
    command: str,
    words: list[str],
    options: tuple[str, ...],
    what: dict[str, str] | None = None,
    flags: tuple[str, ...] = (),
) -> list[tuple[str, str]]:
    """Take ``--option VALUE`` and ``--option=VALUE`` of ``options``, and ``--flag`` of
    ``flags`` (value ``""``), off the front of ``words``: the options before another
    program's command line, which argparse would take. ``what``: an option's value, said
    where it is missing."""
    taken = []
    while words and words[0].split("=")[0] in (*options, *flags):
        option, equals, value = words.pop(0).partition("=")
        if option in flags:
            if equals:
                raise UsageError(f"{command}: {option} takes no value; give {option} alone.")
        elif not equals:
            if not words:
                said = (what or {}).get(option)
                raise UsageError(f"{command}: {option} needs a value{f', {said}' if said else ''}.")
            value = words.pop(0)
        taken.append((option, value))
    return taken


def _verify(args: argparse.Namespace) -> int:
    """Run a program with a verification on; print its report after the program's output."""
    from ._tools.verification import verify

    words = list(args.program)
    for option, value in _leading_options("verify", words, ("--against", "--every", "--rtol")):
        kind = {"--against": str, "--every": int, "--rtol": float}[option]
        try:
            setattr(args, option[2:], kind(value))
        except ValueError:
            raise UsageError(f"verify: {option} takes a number, not {value!r}.") from None
    as_module, program, arguments = _program("verify", words)
    domain = _domain(args)
    check = verify(
        domain, args.engine, args.against, rtol=args.rtol, every=args.every, on_mismatch="record"
    )
    with check:
        status = _run_program(as_module, program, arguments)
    if args.json:
        _json(**check.as_dict())
    else:
        print(check)
    return 1 if not check.ok else status


def _program(command: str, words: list[str]) -> tuple[bool, str, list[str]]:
    """``SCRIPT [ARGS...]`` or ``-m MODULE [ARGS...]``: whether a module, its name, its
    arguments (a UsageError where it names nothing, or a script that is not there)."""
    forms = "SCRIPT [ARGS...] or -m MODULE [ARGS...]"
    as_module = words[:1] == ["-m"]
    if as_module:
        words = words[1:]
    if not words:
        raise UsageError(f"{command} needs a program to run: {forms}.")
    if not as_module and not os.path.isfile(words[0]):
        raise UsageError(f"{command}: there is no script {words[0]!r}; give a file, or {forms}.")
    return as_module, words[0], words[1:]


def _calibrate_options(calibrate: argparse.ArgumentParser) -> None:
    calibrate.add_argument(
        "--against",
        metavar="OTHER",
        help="time it against OTHER (default: the engine after it in the library's "
        "<PREFIX>_ENGINE list, else the reference)",
    )
    calibrate.add_argument(
        "--candidate",
        action="append",
        metavar="NAME",
        help="only this candidate (repeatable; default: each with a crossover)",
    )
    calibrate.add_argument(
        "--budget", type=float, default=60.0, metavar="SECONDS", help="time to spend (60)"
    )
    calibrate.add_argument(
        "--plot", metavar="FILE", help="also draw the table into FILE (needs matplotlib)"
    )
    calibrate.add_argument(
        "--no-store", action="store_true", help="measure and print, but keep nothing"
    )
    calibrate.add_argument(
        "--run",
        dest="recorded_program",
        nargs=argparse.REMAINDER,
        metavar="PROGRAM",
        help="run a program (SCRIPT [ARGS...] or -m MODULE [ARGS...]; last) and calibrate on "
        "the calls it makes, a few of each size, instead of the engine's inputs",
    )


def _calibrate(args: argparse.Namespace) -> int:
    """Calibrate an engine's crossovers; print the table (and draw it with --plot)."""
    from ._tools.calibration import calibrate

    if not args.budget > 0:
        raise UsageError(f"calibrate: --budget takes seconds above 0, not {args.budget}.")
    words = args.recorded_program
    program = None if words is None else _program("calibrate --run", list(words))
    domain = _domain(args)
    calls = None
    if program is not None:
        from ._tools.calibration import record_calls

        with record_calls(domain, args.engine) as recording:
            status = _run_program(*program[:2], program[2])
        if status != 0:
            raise UsageError(
                f"calibrate: the program {program[1]!r} exited with status {status}; "
                "calibrate on a run that succeeds."
            )
        calls = recording.calls
        print(f"recorded {recording!r}", file=sys.stderr)
    result = calibrate(
        domain,
        args.engine,
        against=args.against,
        candidates=args.candidate,
        calls=calls,
        budget=args.budget,
        store=not args.no_store,
    )
    if args.plot:
        result.draw().savefig(args.plot)
    if args.json:
        _json(**result.as_dict(), stored=None if result.stored is None else str(result.stored))
    else:
        print(result)
        if args.plot:
            print(f"drawn in {args.plot}")
    return 0


def _run_program(as_module: bool, program: str, arguments: list[str]) -> int:
    """Run ``program`` in this process as ``python`` would (``sys.argv``, ``sys.path[0]``, an
    exception printed); return its exit status."""
    import runpy
    import traceback

    saved_argv, saved_path = sys.argv, sys.path[0]
    sys.argv = [program, *arguments]
    sys.path[0] = "" if as_module else os.path.dirname(os.path.abspath(program))
    try:
        if as_module:
            _check_runnable(program)  # found as runpy finds it, from the same sys.path
            runpy.run_module(program, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(program, run_name="__main__")
    except UsageError:  # no module to run: the command could not run, not the program
        raise
    except SystemExit as done:  # the program's own exit: the report comes all the same
        if done.code is None or isinstance(done.code, int):
            return done.code or 0
        print(done.code, file=sys.stderr)
        return 1
    except BaseException as error:  # what `python SCRIPT` would print; then the report
        traceback.print_exception(type(error), error, error.__traceback__)
        return 130 if isinstance(error, KeyboardInterrupt) else 1
    finally:
        sys.argv, sys.path[0] = saved_argv, saved_path
    return 0


def _check_runnable(module: str) -> None:
    """Raise a one-line :class:`UsageError`, not runpy's traceback, where ``python -m module``
    would find nothing to run (importing its parent packages, as running it would)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(module)
        if spec is not None and spec.submodule_search_locations is not None:
            if module == "__main__" or module.endswith(".__main__"):
                raise UsageError(
                    f"verify: {module!r} is a package, and a package cannot be run as "
                    "__main__. Name a module to run."
                )
            if importlib.util.find_spec(f"{module}.__main__") is None:
                raise UsageError(
                    f"verify: {module!r} is a package without a __main__ module, so -m cannot "
                    f"run it. Name the module of it to run (-m {module}.NAME), or give the "
                    "package a __main__.py."
                )
    except (ImportError, ValueError) as error:  # a parent that is missing, or no package
        raise UsageError(
            f"verify: module {module!r} could not be found ({type(error).__name__}: {error}). "
            "Check its name, or install the package that provides it."
        ) from None
    if spec is None:
        raise UsageError(
            f"verify: there is no module {module!r} to run with -m (No module named "
            f"{module!r}). Check its name, or install the package that provides it."
        )


def _run(args: argparse.Namespace) -> int:
    """Set the libraries' variables (and the profile's), then replace this process with
    ``python`` running the program, with this one's options; return only on Windows (no
    ``exec``), its status."""
    words = list(args.program)
    specs, printed, json_file = [], False, None
    for option, text in _leading_options(
        "run", words, ("--engine", "--profile-json"), _RUN_VALUES, flags=("--profile",)
    ):
        if option == "--profile":
            printed = True
        elif option == "--profile-json":
            json_file = _profile_file(text, json_file)
        else:
            library, _, engine = (part.strip() for part in text.partition(":"))
            if not library:
                raise UsageError(f"run: --engine {text!r} is not LIB or LIB:ENGINE.")
            specs.append((library, engine or None))
    if not specs and not printed and json_file is None:
        raise UsageError(
            "run needs --engine LIB[:ENGINE] (repeatable), --profile or --profile-json FILE "
            "before the program."
        )
    if not words:
        raise UsageError(
            "run needs a program to run: SCRIPT [ARGS...], -m MODULE [ARGS...] or -c CODE "
            "[ARGS...], as python takes it."
        )
    outside = [library for library, engine in specs if _name_in_environment(library, engine)]
    if outside and not _startup_file_runs():
        raise CoheriqError(
            f"Library {outside[0]!r} is accelerated from the outside when Python starts, by "
            "coheriq's start-up file coheriq-accelerate.pth, and this interpreter will not "
            "read it (coheriq is imported from a source tree, or Python runs with -S). Install "
            "coheriq (pip install coheriq, or pip install -e . in its source tree), or run "
            "without -S."
        )
    _ask_for_profile(printed, json_file)
    # What this interpreter's start-up said it cannot accelerate is not said again there.
    from ._outside.activation import said_at_start_up
    from ._outside.startup import SAID_ENV

    said = said_at_start_up()
    if said:
        os.environ[SAID_ENV] = ",".join(said)
    command = [sys.executable, *_interpreter_options(), *words]
    sys.stdout.flush()
    sys.stderr.flush()
    if sys.platform == "win32":  # no exec: os.execv would start the program and return
        import signal
        import subprocess

        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the program's to handle
        return subprocess.call(command)
    os.execv(sys.executable, command)
    return 0  # never reached: the program ran instead


_RUN_VALUES = {
    "--engine": "LIB or LIB:ENGINE",
    "--profile-json": "the FILE to write the profile's JSON report to",
}


def _profile_file(text: str, given: str | None) -> str:
    """``--profile-json``'s file, made absolute (the program may change its directory) and
    checked now, before the program runs."""
    from ._outside.startup import profile_file_problem

    if given is not None:
        raise UsageError("run: --profile-json is given twice; give it once, with one FILE.")
    if not text:
        raise UsageError("run: --profile-json needs a FILE to write the profile's JSON report to.")
    path = os.path.abspath(text)
    problem = profile_file_problem(path)
    if problem is not None:
        raise UsageError(
            f"run: --profile-json {text!r} {problem}. Give a file in a directory that exists "
            "and can be written (--profile-json profile.json, say)."
        )
    return path


def _ask_for_profile(printed: bool, json_file: str | None) -> None:
    """Set ``COHERIQ_PROFILE`` for the program where run's options ask for a profile, or
    where this interpreter's start-up took it out of the environment (then passed on)."""
    from ._outside.startup import PROFILE_ENV, take_profile_request

    inherited = take_profile_request()  # this interpreter does not report its own
    if not printed and json_file is None:
        if inherited is not None:
            os.environ[PROFILE_ENV] = inherited
        return
    if not _startup_file_runs(PROFILE_ENV):
        raise CoheriqError(
            "run --profile and --profile-json need coheriq's start-up file "
            "coheriq-accelerate.pth, as installed by this version of coheriq, and this "
            "interpreter will not read it (coheriq is imported from a source tree, its "
            "install is older than its source, or Python runs with -S). Install coheriq "
            "(pip install coheriq, or pip install -e . in its source tree), or run without -S."
        )
    parts = (["1"] if printed else []) + ([] if json_file is None else [json_file])
    os.environ[PROFILE_ENV] = os.pathsep.join(parts)  # the file is absolute: never "1"


def _name_in_environment(library: str, engine: str | None) -> bool:
    """Set the variable that accelerates ``library`` on ``engine`` in the program; return
    whether it is accelerated from the outside (else its domain's variable names the engine)."""
    from ._outside.activation import accelerate, accelerate_if_declared

    if accelerate_if_declared(library, engine):
        return True
    try:
        domain = _domain(argparse.Namespace(import_module=None, domain=library))
    except CoheriqDomainNotFoundError:
        # Neither declared nor adopting coheriq: COHERIQ_ACCELERATE's message.
        accelerate(library, engine)  # raises: no installed package declares it
        raise
    if engine is None:
        raise UsageError(
            f"run: --engine {library} names no engine, and library {library!r} adopted "
            f"coheriq (its domain is not accelerated from the outside): give {library}:ENGINE."
        )
    named_by = f" (named by run --engine {library}:{engine})"
    for name in parse_engine_list(engine, named_by):
        if name != REFERENCE and name not in domain.engines.names():
            domain.engines.engine_class(name, named_by=named_by)  # raises: no such engine
    if domain.env_var is None:
        raise CoheriqError(
            f"Domain {library!r} has no environment variable (its library creates it with "
            "env_prefix=None), so run cannot choose its engine for the program. Call "
            f"coheriq.enable_engine({library!r}, {engine!r}) in the program instead."
        )
    os.environ[domain.env_var] = engine
    return False


def _startup_file_runs(needs: str = "") -> bool:
    """Whether an interpreter started as this one was reads coheriq's start-up ``.pth`` file
    (one that mentions ``needs``: an install made before a variable is read does not)."""
    import site

    if sys.flags.no_site:
        return False
    places = [*site.getsitepackages()]
    if site.ENABLE_USER_SITE:
        places.append(site.getusersitepackages())
    for place in places:
        try:
            with open(os.path.join(place, "coheriq-accelerate.pth"), encoding="utf-8") as file:
                if needs in file.read():
                    return True
        except (OSError, ValueError):
            continue
    return False


def _interpreter_options() -> list[str]:
    """The options this interpreter was started with (``-X dev``, ``-u``), from
    ``sys.orig_argv``; none where ``main`` was called by a program."""
    typed, argv = sys.orig_argv, sys.argv
    start = len(typed) - len(argv)  # the word that named coheriq
    if start < 1 or typed[start + 1 :] != argv[1:] or argv[0] == "-c":
        return []
    options = typed[1:start]
    return options[:-1] if options[-1:] == ["-m"] else options


# -- the parser and main ------------------------------------------------------------------


class UsageError(Exception):
    """A command line argparse refuses, raised (not exited on) so that --json sees it."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        raise UsageError(
            f"{message[:1].upper()}{message[1:]}. Run `{self.prog} --help` for the "
            "commands and options it takes."
        )


def _parse(argv: list[str]) -> argparse.Namespace:
    """The command line's arguments; ``run``'s words after the command are left for it."""
    at = next((i for i, word in enumerate(argv) if not word.startswith("-")), None)
    if at is None or argv[at] != "run" or argv[at + 1 : at + 2] in (["-h"], ["--help"]):
        return _parser().parse_args(argv)
    args = _parser().parse_args(argv[: at + 1])
    args.program = argv[at + 1 :]
    return args


def _parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = _Parser(
        prog="coheriq", description="See and check the coheriq engines of installed libraries."
    )
    parser.add_argument("--version", action="version", version=f"coheriq {__version__}")
    parser.add_argument("--json", action="store_true", help="print JSON for tools")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    subs = {}
    for name, run, text in [
        ("list", _list, "list advertised domains and engines, importing none"),
        (
            "run",
            _run,
            "run a program (SCRIPT, -m MODULE or -c CODE) with libraries on engines, those that "
            "never adopted coheriq accelerated from the outside; --profile: its profile at exit",
        ),
        ("show", _show, "show a domain's candidates and which engine supplies each"),
        ("explain", _explain, "say what a call would run now (environment included), and why"),
        (
            "check",
            _check,
            "load engines with strict signature checks, compare their statements; exit 1 on "
            "any problem",
        ),
        ("statement", _statement, "write what an engine implements, from its class, as JSON"),
        (
            "calibrate",
            _calibrate,
            "time an engine against what runs instead, on calls of growing size; store where "
            "it starts to win (its crossover) for this machine",
        ),
        (
            "verify",
            _verify,
            "run a program on an engine and compare each call with the reference; exit 1 on "
            "any difference",
        ),
        (
            "shadow",
            _shadow,
            "shadow report [PATH...]: read the reports shadow verification wrote "
            "(COHERIQ_SHADOW); exit 1 on any difference",
        ),
    ]:
        sub = subs[name] = commands.add_parser(name, help=text, description=text)
        sub.set_defaults(run=run)
        # Before or after the command; SUPPRESS keeps a --json given before it.
        sub.add_argument(
            "--json", action="store_true", default=argparse.SUPPRESS, help="print JSON for tools"
        )
        if name not in ("list", "run", "shadow"):
            sub.add_argument("domain", metavar="DOMAIN")
            sub.add_argument(
                "--import",
                dest="import_module",
                metavar="MODULE",
                help="import MODULE first (the library, when it does not advertise its domain)",
            )
        if name in ("statement", "verify", "calibrate"):
            sub.add_argument("engine", metavar="ENGINE")
    runner, check, statement, verify = (subs[n] for n in ("run", "check", "statement", "verify"))
    _calibrate_options(subs["calibrate"])
    runner.add_argument(
        "--engine",
        action="append",
        metavar="LIB[:ENGINE]",
        help="accelerate library LIB, on ENGINE (repeatable; before the program)",
    )
    runner.add_argument(
        "--profile",
        action="store_true",
        help="profile the calls through candidates, every thread, and print the profile on "
        "standard error at exit (before the program)",
    )
    runner.add_argument(
        "--profile-json",
        metavar="FILE",
        help="write the profile's JSON report to FILE at exit (before the program)",
    )
    runner.add_argument(
        "program",
        nargs="*",
        metavar="PROGRAM [ARGS...]",
        help="the script to run, -m MODULE or -c CODE, and its arguments",
    )
    check.add_argument("engines", nargs="*", metavar="ENGINE", help="default: all")
    check.add_argument(
        "--start",
        action="store_true",
        help="also start each engine: report one that cannot run here",
    )
    statement.add_argument(
        "--description",
        metavar="TEXT",
        help="one line on the engine (default: its class's docstring's first line)",
    )
    statement.add_argument(
        "--needs",
        metavar="TEXT",
        help="what the engine needs to start, e.g. 'an NVIDIA GPU' (default: what the "
        "statement it replaces says; '' for nothing)",
    )
    statement.add_argument(
        "-o", "--output", metavar="FILE", help="write the statement to FILE (default: print it)"
    )
    verify.add_argument(
        "--against", default=REFERENCE, metavar="OTHER", help="compare with OTHER (the reference)"
    )
    verify.add_argument("--rtol", type=float, metavar="X", help="relative tolerance (1e-9)")
    verify.add_argument(
        "--every", type=int, default=1, metavar="N", help="compare every N-th call of each (1)"
    )
    verify.add_argument(
        "program",
        nargs=argparse.REMAINDER,
        metavar="PROGRAM [ARGS...]",
        help="the script to run, or -m MODULE, and its arguments",
    )
    report = (
        subs["shadow"]
        .add_subparsers(dest="action", required=True, metavar="ACTION")
        .add_parser(
            "report",
            help="print the reports, merged per library, engine and other side",
            description="Print the shadow verification reports in PATH (merged per library, "
            "engine and other side, from every process); exit 1 where calls differed.",
        )
    )
    report.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print JSON for tools"
    )
    report.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="report files or folders of them (default: where COHERIQ_SHADOW_REPORT, else "
        "the user's cache folder, says)",
    )
    return parser


def _shadow(args: argparse.Namespace) -> int:
    """Print the shadow verification reports named (merged per domain, engine and other
    side, from every process); exit 1 where calls differed."""
    from ._tools import shadow

    paths = args.paths or [shadow.default_folder()]
    missing = [str(p) for p in paths if not os.path.exists(p)]
    if missing:
        raise UsageError(
            f"shadow report: {missing[0]!r} does not exist. Name a report file or folder, or "
            "run a program with COHERIQ_SHADOW=LIB:RATE first (its reports go to "
            "COHERIQ_SHADOW_REPORT, else the user's cache folder)."
        )
    reports = shadow.merge(shadow.read_reports(paths))
    if args.json:
        _json(reports=reports)
    elif not reports:
        print(f"no shadow verification reports in {', '.join(str(p) for p in paths)}")
    else:
        print("\n\n".join(shadow.render(report) for report in reports))
    return 1 if any(r["totals"].get("mismatches") for r in reports) else 0


def _fail(error: BaseException, as_json: bool) -> int:
    """Report an error that stopped the command (also as JSON for --json); return 2. On
    standard error it is one line (for logs and grep), wrapped only at a terminal."""
    if as_json:
        _json(error=str(error), kind=type(error).__name__)
    line = f"coheriq: error: {' '.join(str(error).split())}"
    print(_wrap(line) if sys.stderr.isatty() else line, file=sys.stderr)
    return 2


class _ReaderMayLeave:
    """Standard output where a reader that has gone (``coheriq check | head -1``) ends the
    output only: the rest goes nowhere, and the exit status does not change."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._unless_gone(self._stream.write, text)
        return len(text)

    def flush(self) -> None:
        self._unless_gone(self._stream.flush)

    def _unless_gone(self, method: Any, *args: Any) -> None:
        try:
            method(*args)
        except BrokenPipeError:  # the rest, and the interpreter's last flush, go to devnull
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding, ...
        return getattr(self._stream, name)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return its exit code."""
    argv = sys.argv[1:] if argv is None else argv
    stdout = sys.stdout
    sys.stdout = _ReaderMayLeave(stdout)
    try:
        args = _parse(argv)
        return int(args.run(args))
    except UsageError as error:
        return _fail(error, "--json" in argv)
    except (CoheriqError, ImportError) as error:  # ImportError: a library's own, unwrapped
        return _fail(error, args.json)
    finally:
        sys.stdout.flush()
        sys.stdout = stdout
