"""Mark a copy of a module of CPython's standard library as a coheriq domain, as the guide says.

``python mark_stdlib.py MODULE OUT_DIR`` writes ``OUT_DIR/MODULE.py``: the
interpreter's own source of the module with a domain of the module's name
created before its first definition, each function and class of its
``__all__`` marked as a candidate (its exceptions excepted), and
``domain.materialize()`` as the last line. Nothing else changes: the library's
users (and its test suite) must not be able to tell. For ``statistics`` that is
its 20 public functions and ``NormalDist``; for ``fractions``, ``Fraction``.
"""

from __future__ import annotations

import re
import sys
import sysconfig
from pathlib import Path

DOMAIN = """
import coheriq

domain = coheriq.AccelerationDomain("{name}", env_prefix="{name_upper}")
"""


def candidates(source: str) -> list[str]:
    """The names in ``__all__`` that the module defines with ``def`` or ``class``."""
    exported = re.search(r"^__all__ = \[(.*?)\]", source, re.S | re.M)
    assert exported is not None, "the module has no __all__"
    names = re.findall(r"'(\w+)'", exported.group(1))
    defined = set(re.findall(r"^(?:def|class) (\w+)", source, re.M))
    # A library's exceptions (StatisticsError) are not something an engine replaces.
    return [n for n in names if n in defined and not n.endswith(("Error", "Warning"))]


def mark(source: str, name: str) -> tuple[str, list[str]]:
    """Return the marked source of module ``name`` and the names marked."""
    names = candidates(source)
    first = re.search(r"^(?:@|def |class )", source, re.M)  # decorators come first
    assert first is not None
    domain = DOMAIN.format(name=name, name_upper=name.upper()).lstrip()
    marked = source[: first.start()] + domain + "\n\n" + source[first.start() :]
    for candidate in names:
        marked, count = re.subn(
            rf"^((?:def|class) {candidate}\b)",
            r"@domain.acceleration_candidate\n\1",
            marked,
            flags=re.M,
        )
        assert count == 1, f"{candidate} is defined {count} times"
    return marked.rstrip("\n") + "\n\n\ndomain.materialize()\n", names


def main(module: str, out_dir: str) -> None:
    original = Path(sysconfig.get_path("stdlib")) / f"{module}.py"
    marked, names = mark(original.read_text(encoding="utf-8"), module)
    Path(out_dir, f"{module}.py").write_text(marked, encoding="utf-8")
    print(" ".join(names))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
