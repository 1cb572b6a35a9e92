"""What installed packages declare of a library that never adopted coheriq, read without importing.

A declaration is a JSON file that a package names from the entry-point group
``coheriq.declarations.<library>`` (``MODULE:FILE``, as for an engine's statement): which
functions and classes of which of the library's modules are candidates, and which versions
of the library it was written against. Its format is in :doc:`outside`.
"""

from __future__ import annotations

import re
import sys
from functools import cached_property
from operator import eq, ge, gt, le, lt, ne

from .. import discovery
from .._names import check_candidate_name, check_name
from .._stdlib import TYPE_CHECKING
from ..exceptions import CoheriqDeclarationError, listing

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

FORMAT = 1
"""The version of the declaration's file format (its ``coheriq_declaration`` field)."""

_COMPARE = {"==": eq, "===": eq, "!=": ne, "<": lt, "<=": le, ">": gt, ">=": ge}
_CLAUSE = re.compile(r"^\s*(~=|===|==|!=|<=|>=|<|>)\s*(\d+(?:\.\d+)*)(\.\*)?\s*$")


class VersionRange:
    """The versions a declaration was written against: ``">=1.2,<2"`` (PEP 440 clauses).

    Release numbers are compared (``1.2.3``); a pre-, post- or local-release part of
    the installed version is left out, and ``==1.2.*`` matches the releases that start
    with ``1.2``. Text that is not such clauses raises :class:`ValueError`.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self._clauses: list[tuple[str, tuple[int, ...], bool]] = []
        for clause in text.split(","):
            found = _CLAUSE.match(clause)
            if found is None:
                raise ValueError(
                    f"{clause.strip()!r} is not a version clause like '>=1.2' or '==3.12.*'"
                )
            operator, number, star = found.groups()
            if star and operator not in ("==", "!="):
                raise ValueError(f"{clause.strip()!r}: only == and != take '.*'")
            self._clauses.append((operator, _release(number), bool(star)))

    def __contains__(self, version: str) -> bool:
        installed = _release(version)
        return all(_holds(op, installed, number, star) for op, number, star in self._clauses)

    def __repr__(self) -> str:
        return f"VersionRange({self.text!r})"


def _release(version: str) -> tuple[int, ...]:
    """The release numbers at the start of ``version``: ``"3.12.1rc1"`` -> ``(3, 12, 1)``."""
    found = re.match(r"\s*v?(\d+(?:\.\d+)*)", version)
    return tuple(int(part) for part in found.group(1).split(".")) if found else (0,)


def _holds(operator: str, installed: tuple[int, ...], number: tuple[int, ...], star: bool) -> bool:
    if star:
        return (installed[: len(number)] == number) == (operator == "==")
    width = max(len(installed), len(number))
    have, want = (part + (0,) * (width - len(part)) for part in (installed, number))
    if operator == "~=":  # ~=1.4.2: >=1.4.2, ==1.4.*
        return have >= want and installed[: len(number) - 1] == number[:-1]
    return bool(_COMPARE[operator](have, want))


class LibraryDeclaration:
    """The candidates of one library, as one package (or several, combined) declare them.

    Attributes:
        library: The library's top-level import name, and its domain's name.
        modules: Module name -> {candidate name -> whether it is a class}.
        env_prefix: The prefix of the environment variable that names the engine.
        distribution: The distribution the library is installed as, or None for a module
            of the standard library.
        ranges: ``(source, versions)`` for each declaration that states versions.
        sources: Where each declaration combined here came from, as sentences name it
            (``"entry point numpy of coheriq.declarations.statistics
            (statistics_numpy:statistics.coheriq-declaration.json)"``).
    """

    def __init__(
        self,
        library: str,
        modules: Mapping[str, Mapping[str, bool]],
        *,
        env_prefix: str | None = None,
        distribution: str | None = None,
        ranges: list[tuple[str, VersionRange]] | None = None,
        sources: tuple[str, ...] = (),
    ) -> None:
        self.library, self.distribution, self.sources = library, distribution, sources
        self.modules = {module: dict(names) for module, names in modules.items()}
        self.env_prefix = env_prefix or own_prefix(library)
        self.ranges = list(ranges or [])

    def __repr__(self) -> str:
        count = sum(len(names) for names in self.modules.values())
        return f"<LibraryDeclaration of {self.library!r}: {count} candidates>"

    def installed_version(self) -> str | None:
        """The installed library's version (Python's for the standard library), or None."""
        python = ".".join(map(str, sys.version_info[:3]))
        return python if self.distribution is None else self._metadata("version")

    def _metadata(self, field: str) -> Any:
        """``importlib.metadata``'s ``field`` of the distribution; None if it is not installed."""
        import importlib.metadata as metadata

        try:
            return getattr(metadata, field)(self.distribution)
        except metadata.PackageNotFoundError:
            return None

    def version_problems(self) -> list[str]:
        """A sentence for each declaration written against versions other than the installed one."""
        installed = self.installed_version()
        what = "Python" if self.distribution is None else f"distribution {self.distribution!r}"
        problems = []
        for source, versions in self.ranges:
            if installed is None:
                problems.append(
                    f"The declaration of library {self.library!r} ({source}) was written "
                    f"against {what} {versions.text}, which is not installed: is "
                    f"{self.distribution!r} the name the library is installed under?"
                )
            elif installed not in versions:
                problems.append(
                    f"Library {self.library!r} is {what} {installed}, but its declaration "
                    f"({source}) was written against {versions.text}: candidates it names "
                    "may have changed. `coheriq check` compares them with what is installed; "
                    "ask for a declaration that covers this version."
                )
        return problems

    @cached_property
    def adopts_coheriq(self) -> bool:
        """Whether the installed library requires coheriq, and so marks its own candidates."""
        required = [] if self.distribution is None else self._metadata("requires") or []
        return any(
            re.split(r"[\s;\[<>=!~(]", line, maxsplit=1)[0] == "coheriq" for line in required
        )


def parse_declaration(data: object, *, source: str) -> LibraryDeclaration:
    """Return the declaration that ``data`` (a file's parsed JSON) makes.

    Raises:
        CoheriqDeclarationError: It is not a declaration of this format; the
            message names ``source`` (where it came from) and what is wrong.
    """

    def wrong(what: str) -> CoheriqDeclarationError:
        return CoheriqDeclarationError(
            f"The declaration {source} cannot be used: {what}. Correct the file its "
            "package ships (the format is described in coheriq's guide 'Accelerating a "
            "library you do not own')."
        )

    if not isinstance(data, dict):
        raise wrong(f"it holds a JSON {type(data).__name__}, not an object")
    if data.get("coheriq_declaration") != FORMAT:
        raise wrong(
            f'its "coheriq_declaration" is {data.get("coheriq_declaration")!r}, not {FORMAT}'
        )
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        raise wrong(f"it has fields coheriq does not know: {listing(unknown)}")
    given_library = data.get("library")
    try:
        library = check_name(given_library, "library name")
    except Exception:
        raise wrong(f'its "library" is {given_library!r}, not a module name') from None
    if not library.isidentifier():
        raise wrong(f'its "library" is {library!r}, not a top-level module name')
    given = data.get("modules")
    if not isinstance(given, dict) or not given:
        raise wrong('its "modules" is not an object of module names')
    modules = {module: _names_of(library, module, names, wrong) for module, names in given.items()}
    env_prefix, own = data.get("env_prefix"), own_prefix(library)
    if env_prefix is not None and env_prefix != own:
        raise wrong(
            f'its "env_prefix" is {env_prefix!r}, but a declaration chooses engines only '
            f"for the library it declares, and the variables of library {library!r} start "
            f'with {own!r} ({own}_ENGINE). Remove "env_prefix" from the file, or set it to {own!r}'
        )
    distribution = data.get("distribution")
    if distribution is not None and not (isinstance(distribution, str) and distribution.strip()):
        raise wrong(f'its "distribution" is {distribution!r}, neither a name nor null')
    versions = data.get("versions")
    if versions is not None and not isinstance(versions, str):
        raise wrong(f'its "versions" is {versions!r}, not a string like ">=1.2,<2"')
    try:
        ranges = [] if versions is None else [(source, VersionRange(versions))]
    except ValueError as error:
        raise wrong(f'its "versions" {versions!r} cannot be read: {error}') from None
    # Its env_prefix is None or its own, which a declaration gets without one.
    return LibraryDeclaration(
        library, modules, distribution=distribution, ranges=ranges, sources=(source,)
    )


def own_prefix(library: str) -> str:
    """The prefix of ``library``'s variables: its name in capitals (``"SHAPES"``)."""
    return re.sub(r"\W", "_", library).upper()


_FIELDS = {"coheriq_declaration", "library", "distribution", "versions", "env_prefix", "modules"}
_KINDS = ("a function", "a class")  # by whether a candidate is a class


def _names_of(library: str, module: str, names: object, wrong: Any) -> dict[str, bool]:
    """A module's ``{"functions": [...], "classes": [...]}``, checked: name -> is a class."""
    parts = str(module).split(".")
    if parts[0] != library or not all(part.isidentifier() for part in parts):
        raise wrong(f"module {module!r} is not a module of library {library!r}")
    if not isinstance(names, dict) or set(names) - {"functions", "classes"}:
        raise wrong(f'module {module!r} is not given as {{"functions": [...], "classes": [...]}}')
    kinds: dict[str, bool] = {}
    for key, is_class in (("functions", False), ("classes", True)):
        listed = names.get(key, [])
        if not isinstance(listed, list):
            raise wrong(f"the {key} of module {module!r} are not a list of names")
        for name in listed:
            try:
                check_candidate_name(name)
            except Exception:
                raise wrong(f"{name!r} in module {module!r} is not a candidate's name") from None
            if name in kinds:
                raise wrong(f"module {module!r} names {name!r} twice")
            kinds[name] = is_class
    return kinds


def combine(declarations: list[LibraryDeclaration]) -> LibraryDeclaration:
    """One declaration with every candidate of ``declarations`` (of one library); raises
    :class:`~coheriq.CoheriqDeclarationError` where two disagree about a candidate's module
    or kind, or about the distribution."""
    first = declarations[0]
    modules: dict[str, dict[str, bool]] = {}
    where: dict[str, tuple[str, bool, str]] = {}  # name -> module, is a class, source
    for declaration in declarations:
        source = declaration.sources[0]
        if declaration.distribution != first.distribution:
            raise CoheriqDeclarationError(
                f"The declarations of library {first.library!r} disagree about its "
                f"distribution: {first.distribution!r} ({first.sources[0]}) and "
                f"{declaration.distribution!r} ({source}). Their packages must agree."
            )
        for module, names in declaration.modules.items():
            for name, is_class in names.items():
                earlier = where.setdefault(name, (module, is_class, source))
                if earlier[:2] != (module, is_class):
                    raise CoheriqDeclarationError(
                        f"The declarations of library {first.library!r} disagree about "
                        f"candidate {name!r}: {_KINDS[earlier[1]]} of module {earlier[0]!r} "
                        f"({earlier[2]}), {_KINDS[is_class]} of module {module!r} ({source}). "
                        "Their packages must agree on what the library defines."
                    )
                modules.setdefault(module, {})[name] = is_class
    return LibraryDeclaration(
        first.library,
        modules,
        distribution=first.distribution,
        ranges=[r for d in declarations for r in d.ranges],
        sources=tuple(s for d in declarations for s in d.sources),
    )


def declaration_of(library: str) -> LibraryDeclaration | None:
    """The installed packages' declarations of ``library``, combined; None if none declares it.

    Reads package metadata and the files it names; imports nothing.

    Raises:
        CoheriqDeclarationError: A declaration cannot be read or is not one of
            ``library``, or two disagree.
    """
    found = []
    group = discovery.declaration_group_of(library)
    for name, ep in sorted(discovery.advertised_declarations(library).items()):
        dist = getattr(ep, "dist", None)
        shipped = f", distribution {dist.name!r}" if dist is not None else ""
        source = f"entry point {name!r} of {group} ({ep.value}{shipped})"
        try:
            module, path = discovery.split_value(ep.value)
            data = discovery.load_json(discovery.file_beside(module, path), path)
        except discovery.UnusableFileError as error:
            raise CoheriqDeclarationError(
                f"The declaration {source} cannot be used: {error}. Reinstall its package, "
                "or correct the entry point."
            ) from None
        declaration = parse_declaration(data, source=source)
        if declaration.library != library:
            raise CoheriqDeclarationError(
                f"The declaration {source} declares library {declaration.library!r}, not "
                f"{library!r}: its entry point is in the wrong group."
            )
        found.append(declaration)
    return combine(found) if found else None
