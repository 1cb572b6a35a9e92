"""The IPython extension: accelerate libraries, and profile a cell, from a notebook or an
IPython shell::

    %load_ext coheriq.ipython
    %coheriq_accelerate cachetools:plaindict statistics

    %%coheriq_profile -o prof --json profile.json
    run_the_cell()

``%coheriq_accelerate``: each word is ``LIB`` or ``LIB:ENGINE``; the library is accelerated
from the outside (:func:`coheriq.accelerate`), on the engine where one is named. Run it before
the cell that imports the library, so that the names the notebook binds from it are the
candidates.

``%%coheriq_profile``: the cell runs inside a :func:`coheriq.profile` of every thread (a pool
the cell uses included), which is printed after the cell, also where the cell raises (then the
error is shown, as without the magic); the cell's last expression is its value, as without
it (a cell with a top-level ``await`` cannot run in it). ``-o NAME`` keeps the profile in the
variable ``NAME``, ``--json FILE`` writes its JSON report to ``FILE``.
"""

from __future__ import annotations

import ast
import os
import shlex
from typing import Any

from ._outside.activation import accelerate
from ._outside.startup import profile_file_problem
from ._tools.profiling import Profile, profile

__all__ = ["coheriq_accelerate", "coheriq_profile", "load_ipython_extension"]

PROFILE_USAGE = "%%coheriq_profile [-o NAME] [--json FILE]"


def coheriq_accelerate(line: str) -> None:
    """``%coheriq_accelerate LIB[:ENGINE] ...``: accelerate each library named."""
    words = line.split()
    if not words:
        print("usage: %coheriq_accelerate LIB[:ENGINE] [LIB[:ENGINE] ...]")
        return
    for word in words:
        library, _, engine = word.partition(":")
        accelerate(library, engine or None)
        chosen = f"on engine {engine!r}" if engine else "with no engine chosen"
        print(f"coheriq: library {library!r} is accelerated from the outside, {chosen}.")


def coheriq_profile(line: str, cell: str) -> Any:
    """``%%coheriq_profile [-o NAME] [--json FILE]``: run the cell inside a profile of every
    thread; print the profile after it (also where it raises, before the error is shown);
    return the cell's value."""
    from IPython import get_ipython

    __tracebackhide__ = True  # IPython leaves this frame out of the cell's traceback
    shell: Any = get_ipython()
    name, json_file = _profile_options(line)
    recorded = profile(everywhere=True)
    if name is not None:
        shell.user_ns[name] = recorded
    try:
        with recorded:
            return _run_cell(shell, cell)
    finally:
        _report(recorded, json_file)


def _profile_options(line: str) -> tuple[str | None, str | None]:
    """``-o NAME`` and ``--json FILE`` (or ``--json=FILE``) of ``line``, each checked."""
    try:
        words, name, json_file = shlex.split(line), None, None
    except ValueError as error:  # an unclosed quote
        raise _usage_error(f"{PROFILE_USAGE}: {error} in {line!r}.") from None
    while words:
        option, equals, value = words.pop(0).partition("=")
        if option not in ("-o", "--json"):
            raise _usage_error(
                f"{PROFILE_USAGE}: {option!r} is not one of its options. -o NAME keeps the "
                "profile in the variable NAME; --json FILE writes its JSON report to FILE."
            )
        if not equals and not words:
            raise _usage_error(f"{PROFILE_USAGE}: {option} needs a value.")
        value = value if equals else words.pop(0)
        if option == "-o":
            if not value.isidentifier():
                raise _usage_error(f"{PROFILE_USAGE}: -o {value!r} is not a variable's name.")
            name = value
        else:
            json_file = os.path.abspath(value)
            problem = profile_file_problem(json_file)
            if problem is not None:
                raise _usage_error(
                    f"{PROFILE_USAGE}: --json {value!r} {problem}. Give a file in a directory "
                    "that exists and can be written."
                )
    return name, json_file


def _usage_error(message: str) -> Exception:
    """IPython's error for a magic's bad options: shown in one line, no traceback."""
    from IPython.core.error import UsageError

    return UsageError(message)


def _run_cell(shell: Any, cell: str) -> Any:
    """Run ``cell`` in the user's namespace as IPython runs a cell (its own magics and
    transformations, its lines in tracebacks); return its last expression's value, if any."""
    __tracebackhide__ = True
    code = shell.transform_cell(cell)
    # Named as the cell running the magic ("Cell In[7]"): the shell counts the next one.
    number = getattr(getattr(shell.displayhook, "exec_result", None), "execution_count", None)
    filename = shell.compile.cache(code, number or 0, raw_code=cell)
    tree = shell.transform_ast(shell.compile.ast_parse(code, filename=filename))
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    namespaces = (shell.user_global_ns, shell.user_ns)
    exec(shell.compile(tree, filename, "exec"), *namespaces)
    if last is None:
        return None
    return eval(shell.compile(ast.Expression(last.value), filename, "eval"), *namespaces)


def _report(recorded: Profile, json_file: str | None) -> None:
    """Print ``recorded``; write its JSON report to ``json_file`` (where that fails, say so:
    an error here must not hide the cell's)."""
    print(recorded)
    if json_file is not None:
        try:
            with open(json_file, "w", encoding="utf-8") as file:
                file.write(recorded.to_json() + "\n")
        except OSError as error:
            print(f"coheriq: the profile could not be written to {json_file!r}: {error}")


def load_ipython_extension(ipython: Any) -> None:
    """Register ``%coheriq_accelerate`` and ``%%coheriq_profile`` (what ``%load_ext
    coheriq.ipython`` calls)."""
    ipython.register_magic_function(coheriq_profile, "cell")
    ipython.register_magic_function(coheriq_accelerate, "line")
