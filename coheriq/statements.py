"""What an engine states it implements, read from its package without importing it.

An engine package ships a JSON file beside a module, pointed to from the entry-point group
``coheriq.statements.<domain>`` as ``MODULE:FILE`` (see :ref:`engine-statements`)::

    [project.entry-points."coheriq.statements.mylib"]
    fast = "mylib_fast:mylib_fast.coheriq.json"

The file says::

    {"coheriq_statement": 1, "domain": "mylib", "engine": "fast",
     "description": "one line", "needs": "an NVIDIA GPU",
     "implements": ["normalize", "Histogram"],
     "conversions": [{"library": "numpy:ndarray", "engine": "jax:Array"}],
     "results": "engine"}

(``conversions`` and ``results``, what the engine declares of its data, may be left out.)

A statement that cannot be read is reported as a problem, and its engine states nothing.
"""

from __future__ import annotations

from . import discovery
from ._engines.meta import supplier
from ._names import check_candidate_name, check_name, is_engine_name
from ._stdlib import TYPE_CHECKING
from .discovery import UnusableFileError
from .exceptions import CoheriqTypeError, did_you_mean, listing

if TYPE_CHECKING:
    from collections.abc import Iterable
    from importlib.metadata import EntryPoint
    from typing import Any

__all__ = [
    "FORMAT",
    "Disagreement",
    "EngineStatement",
    "compare",
    "dumps",
    "engine_statements",
    "implemented_by",
    "parse_statement",
    "read_statement_file",
    "statement_of",
]

FORMAT = 1
"""The statement format this coheriq reads and writes (the key ``coheriq_statement``)."""


class EngineStatement:
    """What one engine states about itself in its installed package.

    Attributes:
        domain: The domain's name.
        engine: The engine's name.
        description: One line that says what the engine is (``""`` if unstated).
        needs: What it needs to start (``"an NVIDIA GPU"``), or ``None``.
        implements: The candidates it states it implements, as names.
        conversions: The pairs of types it converts between, ``(library, engine)``,
            each as ``"module:qualname"`` (see :class:`coheriq.Conversion`).
        results: ``"engine"`` or ``"input"``: the form its results come back in.
        source: Where the statement came from: the entry point's value
            (``"mylib_fast:mylib_fast.coheriq.json"``), or what gave it otherwise.
        problem: Why the statement could not be used, as a sentence; ``None``
            when it was read. An engine whose statement has a problem states
            nothing (its ``implements`` is empty).
    """

    __slots__ = (
        "conversions",
        "description",
        "domain",
        "engine",
        "implements",
        "needs",
        "problem",
        "results",
        "source",
    )

    domain: str
    engine: str
    description: str
    needs: str | None
    implements: tuple[str, ...]
    conversions: tuple[tuple[str, str], ...]
    results: str
    source: str
    problem: str | None

    def __init__(
        self,
        domain: str,
        engine: str,
        *,
        description: str = "",
        needs: str | None = None,
        implements: Iterable[str] = (),
        conversions: Iterable[tuple[str, str]] = (),
        results: str = "engine",
        source: str = "",
        problem: str | None = None,
    ) -> None:
        pairs = tuple(map(tuple, conversions))
        values = {
            "domain": domain,
            "engine": engine,
            "description": description,
            "needs": needs,
            "implements": tuple(implements),
            "conversions": pairs,
            "results": results,
            "source": source,
            "problem": problem,
        }
        for name, value in values.items():
            object.__setattr__(self, name, value)  # frozen: __setattr__ refuses

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"An EngineStatement is read-only; {name!r} cannot be set.")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EngineStatement):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.__slots__)

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, n) for n in self.__slots__))

    def __repr__(self) -> str:
        state = f"problem={self.problem!r}" if self.problem else f"implements={self.implements!r}"
        return f"<EngineStatement of engine {self.engine!r} of domain {self.domain!r}: {state}>"

    def as_dict(self) -> dict[str, Any]:
        """The statement as its file holds it (for JSON)."""
        return {
            "coheriq_statement": FORMAT,
            "domain": self.domain,
            "engine": self.engine,
            "description": self.description,
            "needs": self.needs,
            "implements": list(self.implements),
            **(
                {"conversions": [{"library": lib, "engine": eng} for lib, eng in self.conversions]}
                if self.conversions
                else {}
            ),
            **({"results": self.results} if self.results != "engine" else {}),
        }


def engine_statements(domain: object) -> dict[str, EngineStatement]:
    """Return what the installed engines of ``domain`` (a domain or its name) state, by
    engine name, sorted; import nothing (the library need not exist here).

    An engine whose statement cannot be read comes with its ``problem`` set.

    Raises:
        CoheriqTypeError: ``domain`` is neither a domain nor a valid name.
    """
    name = domain if isinstance(domain, str) else getattr(domain, "name", None)
    if not isinstance(name, str):
        raise CoheriqTypeError(
            "engine_statements takes a domain or a domain's name, not "
            f"{type(domain).__name__} ({domain!r})."
        )
    check_name(name, "domain name")
    found = discovery.advertised_statements(name)
    return {e: _read(name, e, found[e]) for e in sorted(found) if is_engine_name(e)}


# -- reading ------------------------------------------------------------------------------


def _read(domain: str, engine: str, ep: EntryPoint) -> EngineStatement:
    """The statement ``ep`` points to, or one that says why it cannot be used."""
    try:
        module, path = discovery.split_value(ep.value)
        data = discovery.load_json(discovery.file_beside(module, path), path)
    except UnusableFileError as error:
        return _unusable(domain, engine, ep.value, discovery.describe(ep), str(error))
    return parse_statement(
        data, domain=domain, engine=engine, source=ep.value, where=discovery.describe(ep)
    )


def read_statement_file(path: str, *, domain: str, engine: str) -> EngineStatement:
    """Return the statement of ``engine`` of ``domain`` that file ``path`` holds, or one whose
    ``problem`` says why not; never raise. Only a regular file of at most 1 MiB is read."""
    try:
        data = discovery.load_json(discovery.read_regular(path, path), path)
    except FileNotFoundError:
        return _unusable(domain, engine, path, repr(path), f"there is no file {path!r}")
    except UnusableFileError as error:
        return _unusable(domain, engine, path, repr(path), str(error))
    return parse_statement(data, domain=domain, engine=engine, source=path, where=repr(path))


def _unusable(domain: str, engine: str, source: str, where: str, what: str) -> EngineStatement:
    problem = (
        f"The statement of engine {engine!r} of domain {domain!r} ({where}) is ignored: "
        f"{what}. Until it is fixed the engine states nothing; write it again with "
        f"`coheriq statement {domain} {engine} -o FILE`."
    )
    return EngineStatement(domain, engine, source=source, problem=problem)


# -- what a statement says ----------------------------------------------------------------


def parse_statement(
    data: object, *, domain: str, engine: str | None = None, source: str = "", where: str = ""
) -> EngineStatement:
    """Return the statement that ``data`` (a file's parsed JSON) makes for ``domain`` and
    ``engine`` (``None``: the one it names), or one whose ``problem`` says why not; never raise.

    ``source`` is kept as :attr:`EngineStatement.source`; ``where`` (default: ``source``)
    is how a problem names it.
    """
    named = data.get("engine") if isinstance(data, dict) else None
    engine = engine if engine is not None else named if isinstance(named, str) else "?"
    try:
        fields = _fields(data, domain, engine)
    except UnusableFileError as error:
        return _unusable(domain, engine, source, where or source, str(error))
    return EngineStatement(domain, engine, source=source, **fields)


def _fields(data: object, domain: str, engine: str) -> dict[str, Any]:
    """The keyword arguments of :class:`EngineStatement` that ``data`` gives, checked (a
    :class:`~coheriq.discovery.UnusableFileError` says what is wrong)."""
    if not isinstance(data, dict):
        raise UnusableFileError(f"it holds a JSON {type(data).__name__}, not an object")
    version = data.get("coheriq_statement")
    if version != FORMAT or isinstance(version, bool):
        raise UnusableFileError(
            f'its "coheriq_statement" is {version!r}, and this coheriq reads format {FORMAT}; '
            "upgrade coheriq, or write the statement in that format"
        )
    if not isinstance(data.get("engine"), str):
        raise UnusableFileError(f'its "engine" is {data.get("engine")!r}, not an engine\'s name')
    for key, expected in (("domain", domain), ("engine", engine)):
        if data.get(key) != expected:
            raise UnusableFileError(
                f"it is a statement of {key} {data.get(key)!r}, not of {expected!r}"
            )
    description, needs = data.get("description", ""), data.get("needs")
    if not isinstance(description, str):
        raise UnusableFileError(f'its "description" is {description!r}, not a string')
    if needs is not None and not isinstance(needs, str):
        raise UnusableFileError(f'its "needs" is {needs!r}, neither a string nor null')
    implements = data.get("implements")
    if not isinstance(implements, list):
        raise UnusableFileError(
            f'its "implements" is {implements!r}, not a list of candidate names'
        )
    names: dict[str, None] = {}  # in order, each once
    for name in implements:
        try:
            names[check_candidate_name(name)] = None
        except CoheriqTypeError:
            raise UnusableFileError(
                f'its "implements" holds {name!r}, which is not a candidate name'
            ) from None
    return {
        "description": " ".join(description.split()),
        "needs": _one_line(needs),
        "implements": tuple(names),
        "conversions": _pairs(data.get("conversions", [])),
        "results": _results(data.get("results", "engine")),
    }


def _pairs(stated: object) -> tuple[tuple[str, str], ...]:
    """A statement's ``"conversions"``: ``(library, engine)`` pairs of ``module:qualname``."""
    pairs = []
    for pair in stated if isinstance(stated, list) else [stated]:
        named = [pair.get(k) if isinstance(pair, dict) else None for k in ("library", "engine")]
        if not all(isinstance(n, str) and ":" in n for n in named):
            raise UnusableFileError(
                f'its "conversions" holds {pair!r}, not {{"library": "module:qualname", '
                '"engine": "module:qualname"}'
            )
        pairs.append((named[0], named[1]))
    return tuple(pairs)  # type: ignore[arg-type]


def _results(stated: object) -> str:
    if stated not in ("engine", "input"):
        raise UnusableFileError(f'its "results" is {stated!r}, not "engine" or "input"')
    return str(stated)


def _one_line(text: str | None) -> str | None:
    """``text`` on one line, its spaces collapsed; ``None`` for nothing at all."""
    return " ".join(text.split()) or None if text is not None else None


# -- a statement and the engine's class ---------------------------------------------------


def implemented_by(cls: Any) -> tuple[str, ...]:
    """The candidates engine class ``cls`` does not take from the reference (its body, a base
    engine or a mixin defines them), in domain order."""
    reference = cls.__mro__[-2]  # the reference class, just before object
    kinds = cls.__coheriq_domain__.candidate_kinds
    return tuple(c for c in kinds if supplier(cls, c) is not reference)


def converted_by(cls: Any) -> tuple[tuple[str, str], ...]:
    """The pairs of types engine class ``cls`` declares conversions for, ``(library, engine)``
    as ``"module:qualname"`` (a class given as one is not imported)."""
    table = cls.__coheriq_conversions__
    return () if table is None else tuple(c.names() for c in table.conversions)


def statement_of(cls: Any, *, description: str, needs: str | None) -> EngineStatement:
    """The statement that engine class ``cls`` makes true, with ``description`` and ``needs``."""
    table = cls.__coheriq_conversions__
    return EngineStatement(
        cls.__coheriq_domain__.name,
        cls.__coheriq_name__,
        description=" ".join(description.split()),
        needs=_one_line(needs),
        implements=implemented_by(cls),
        conversions=converted_by(cls),
        results="engine" if table is None else table.results,
    )


def dumps(statement: EngineStatement) -> str:
    """The text of a statement's file: two-space JSON and a final newline."""
    import json

    return json.dumps(statement.as_dict(), indent=2, ensure_ascii=False) + "\n"


class Disagreement:
    """Where an engine's statement and its class disagree.

    Attributes:
        not_implemented: Candidates stated, which the class takes from the reference.
        not_stated: Candidates the class implements, which the statement leaves out.
        unknown: Stated names that are no candidate of the domain.
        conversions: How the stated conversions and result policy differ from the
            class's, as sentences (empty where they agree).
        message: All of it as sentences, with what to do.
    """

    def __init__(
        self,
        not_implemented: list[str],
        not_stated: list[str],
        unknown: list[str],
        message: str,
        conversions: list[str] | None = None,
    ) -> None:
        self.not_implemented, self.not_stated, self.unknown = not_implemented, not_stated, unknown
        self.conversions = conversions or []
        self.message = message

    def as_dict(self) -> dict[str, list[str]]:
        """The lists, for JSON (``conversions`` only where they differ)."""
        names = ("not_implemented", "not_stated", "unknown", "conversions")
        return {n: getattr(self, n) for n in names if n != "conversions" or self.conversions}


def compare(statement: EngineStatement, cls: Any) -> Disagreement | None:
    """Compare what ``statement`` says with engine class ``cls``; ``None`` if they agree."""
    candidates = list(cls.__coheriq_domain__.candidate_kinds)
    implemented = implemented_by(cls)
    stated = statement.implements
    unknown = [n for n in stated if n not in candidates]
    missing = [n for n in stated if n in candidates and n not in implemented]
    unstated = [n for n in implemented if n not in stated]
    table = cls.__coheriq_conversions__
    converts = _conversions_differ(
        statement, converted_by(cls), "engine" if table is None else table.results
    )
    if not (unknown or missing or unstated or converts):
        return None
    said = []
    if missing:
        said.append(f"it states {listing(missing)}, which the class takes from the reference")
    if unstated:
        said.append(f"the class implements {listing(unstated)}, which it does not state")
    said += converts
    domain = statement.domain
    # A misspelled name gets a sentence of its own, with the closest candidates.
    typos = "".join(
        f" It names {n!r}, which is no candidate of domain {domain!r}.{did_you_mean(n, candidates)}"
        for n in unknown
    )
    message = (
        f"The statement of engine {statement.engine!r} of domain {domain!r} "
        f"({statement.source}) disagrees with the engine's class"
        + (f": {'; '.join(said)}." if said else ".")
        + typos
        + f" Write it again from the class with `coheriq statement {domain} "
        f"{statement.engine} -o FILE`, or fix the engine."
    )
    return Disagreement(missing, unstated, unknown, message, converts)


def _conversions_differ(
    statement: EngineStatement, declared: tuple[tuple[str, str], ...], results: str
) -> list[str]:
    """How a statement's conversions and result policy differ from a class's, as clauses."""
    said = []
    stated = statement.conversions
    if set(stated) != set(declared):
        shown = [f"{lib} <-> {eng}" for lib, eng in declared] or ["none"]
        said.append(
            f"it states conversions {listing(f'{a} <-> {b}' for a, b in stated) or 'none'}, "
            f"the class declares {listing(shown)}"
        )
    if statement.results != results:
        said.append(f"it states results={statement.results!r}, the class has {results!r}")
    return said
