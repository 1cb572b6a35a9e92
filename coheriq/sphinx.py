"""coheriq's Sphinx extension: a candidate's ``autodoc`` entry ends with the engines that
implement it, each with its description and needs, read from their statements (importing none)::

    extensions = ["sphinx.ext.autodoc", "coheriq.sphinx"]
    coheriq_engines = {"mylib": ["engines/mylib_gpu.coheriq.json", {"coheriq_statement": 1, ...}]}

``coheriq_engines`` gives engines not installed where the docs are built, as statement files
(relative to ``conf.py``) or statements, in place of installed engines of the same name. A
given statement that cannot be used is a Sphinx warning; an installed one is left out. The
objects' ``__doc__`` stays as it is.
"""

from __future__ import annotations

import json
import os
import weakref
from typing import Any

from sphinx.application import Sphinx
from sphinx.util import logging

from . import __version__
from ._call.proxy import candidate_of
from .statements import EngineStatement, engine_statements, parse_statement

__all__ = ["setup"]

_logger = logging.getLogger(__name__)

# Per build, the statements of each domain asked for: read once.
_read: weakref.WeakKeyDictionary[Sphinx, dict[str, dict[str, EngineStatement]]] = (
    weakref.WeakKeyDictionary()
)


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the ``coheriq_engines`` setting and the note added to candidates' entries."""
    app.add_config_value("coheriq_engines", {}, "env", types=(dict,))
    app.connect("autodoc-process-docstring", _add_engines)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": __version__}


def _add_engines(
    app: Sphinx, what: str, name: str, obj: object, options: object, lines: list[str]
) -> None:
    """Append the engines that implement ``obj`` to its docstring's lines, if it is a candidate."""
    info = candidate_of(obj)
    if info is None:
        return
    statements = _statements(app, info.domain.name)
    implementing = [s for _, s in sorted(statements.items()) if info.name in s.implements]
    if not implementing:
        return
    if lines and lines[-1].strip():
        lines.append("")
    lines += [".. rubric:: Engines", "", *map(_bullet, implementing), ""]


def _bullet(statement: EngineStatement) -> str:
    said = f" — {_escaped(statement.description)}" if statement.description else ""
    needs = f" (needs: {_escaped(statement.needs)})" if statement.needs else ""
    return f"* ``{statement.engine}``{said}{needs}"


def _escaped(text: str) -> str:
    """``text`` as reStructuredText shows it literally (a statement is plain text)."""
    for character in "\\*`|_[]":
        text = text.replace(character, "\\" + character)
    return text


def _statements(app: Sphinx, domain: str) -> dict[str, EngineStatement]:
    """The usable statements of ``domain``'s engines: the installed ones, then those conf.py
    gives (a warning for each of those that cannot be used)."""
    by_domain = _read.setdefault(app, {})
    if domain in by_domain:
        return by_domain[domain]
    found = {}
    for engine, statement in engine_statements(domain).items():
        if statement.problem is None:
            found[engine] = statement
        else:
            _logger.verbose("coheriq: %s", statement.problem)
    given = app.config.coheriq_engines.get(domain, [])
    if isinstance(given, (str, os.PathLike, dict)):
        given = [given]  # one statement, not in a list
    for number, item in enumerate(given):
        statement = _given_one(app, domain, item, f"coheriq_engines[{domain!r}][{number}]")
        if statement.problem is None:
            found[statement.engine] = statement
        else:
            _logger.warning("coheriq: %s", statement.problem, type="coheriq", subtype="statement")
    by_domain[domain] = found
    return found


def _given_one(app: Sphinx, domain: str, item: object, where: str) -> EngineStatement:
    """One item of ``coheriq_engines``: a statement, or the path of its file."""
    if not isinstance(item, (str, os.PathLike)):
        return parse_statement(item, domain=domain, source=where, where=f"conf.py's {where}")
    given = os.fspath(item)
    where = f"conf.py's {where}, the file {given!r}"
    try:
        with open(os.path.join(app.confdir, given), encoding="utf-8") as file:
            data = json.load(file)
    except (OSError, ValueError, RecursionError) as error:
        reason = getattr(error, "strerror", None) or error
        problem = (
            f"The statement {where}, of domain {domain!r}, cannot be read ({reason}). Give "
            "the path of a statement file relative to conf.py, or the statement itself."
        )
        return EngineStatement(domain, "?", source=given, problem=problem)
    return parse_statement(data, domain=domain, source=given, where=where)
