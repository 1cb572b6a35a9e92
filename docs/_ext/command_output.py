"""The ``command-output`` directive: a coheriq command's output, run at build time.

A sample of output written by hand goes stale the day the command changes; this
one is produced by running the command each time the page is built::

    .. command-output:: coheriq explain ragbatch
       :env: RAGBATCH_ENGINE=numpy
       :returncode: 0
       :ellipsis: 12

The argument is the command line as a reader types it; its first word must be
``coheriq``, run as ``sys.executable -m coheriq`` (the interpreter building the
docs, so the coheriq and the packages installed beside it). Options:

``:env:``
    ``NAME=VALUE`` pairs (shell-quoted, separated by spaces) set for the command,
    and shown in the caption before it, as a reader would type them.
``:returncode:``
    The exit status the command is expected to end with (default 0). Any other
    status, an expected one that does not come, a timeout, or output holding a
    path of this machine is an error, which fails the build (it runs with -W).
``:ellipsis:``
    Show only the first N lines, then ``...``.
``:timeout:``
    Seconds before the command is killed (default 120).

The command runs as on a terminal 80 columns wide that is not one (``COLUMNS=80``,
standard output and error captured together, in the order written), in a
controlled environment: of the builder's, only where Python and its packages are,
the locale and the temporary folders; nothing that chooses an engine or
configures a device (``*_ENGINE``, ``COHERIQ_*``, ``RAGBATCH_GPU_PLATFORM``,
``JAX_PLATFORMS``). Only what the page shows changes it, so the output is the
same wherever the docs are built.

The output is a literal block with the CSS class ``output`` (styled as output,
not code: ``_static/coheriq.css``) in a container whose caption is the command,
``$ coheriq list``.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

PROGRAM = "coheriq"  # the one command this directive runs
TIMEOUT = 120


def _env_pairs(text: str) -> dict[str, str]:
    """``NAME=VALUE NAME2='a b'`` as a dictionary; a word without ``=`` is refused."""
    pairs = {}
    for word in shlex.split(text):
        name, equals, value = word.partition("=")
        if not equals or not name:
            raise ValueError(f"{word!r} is not NAME=VALUE; write :env: NAME=VALUE [NAME=VALUE ...]")
        pairs[name] = value
    return pairs


# What the commands take from the builder's environment: where Python and its
# packages are, and the locale and temporary folders. Nothing that configures an
# engine or a device (RAGBATCH_GPU_PLATFORM, JAX_PLATFORMS, CUDA_VISIBLE_DEVICES)
# gets through, so that a page's output is the same on every machine that builds it.
_KEPT = frozenset(
    {
        "PATH",
        "HOME",
        "PYTHONPATH",
        "PYTHONHOME",
        "VIRTUAL_ENV",
        "LANG",
        "LC_ALL",
        "LC_CTYPE",
        "TMPDIR",
        "TEMP",
        "TMP",
        "SYSTEMROOT",
        "USERPROFILE",
        "APPDATA",
        "LOCALAPPDATA",
    }
)


def _environment(extra: dict[str, str]) -> dict[str, str]:
    """A controlled environment: what :data:`_KEPT` names of the builder's, plus the page's."""
    kept = {name: value for name, value in os.environ.items() if name in _KEPT}
    # Unbuffered: standard output and error interleave as they were written.
    return {**kept, "COLUMNS": "80", "PYTHONUNBUFFERED": "1", **extra}


def _machine_paths(srcdir: Path) -> list[str]:
    """Paths that must not appear on a page: they would differ on every machine."""
    home = os.path.expanduser("~")
    candidates = {sys.prefix, sys.base_prefix, str(srcdir.resolve().parent), home}
    return sorted(p for p in candidates if len(p) > 1)  # "/" is in every path


class CommandOutput(SphinxDirective):
    """Run ``coheriq ARGS`` and show its output, captioned with the command."""

    required_arguments = 1
    final_argument_whitespace = True
    option_spec: ClassVar[dict[str, Any]] = {
        "env": directives.unchanged_required,
        "returncode": directives.nonnegative_int,
        "ellipsis": directives.positive_int,
        "timeout": directives.positive_int,
        "name": directives.unchanged,
    }

    def run(self) -> list[nodes.Node]:
        command = self.arguments[0]
        try:
            extra = _env_pairs(self.options.get("env", ""))
            words = shlex.split(command)
        except ValueError as error:
            raise self.error(f"command-output: {error}.") from None
        if not words or words[0] != PROGRAM:
            raise self.error(
                f"command-output runs {PROGRAM} commands only, not {command!r}; write "
                f"`.. command-output:: {PROGRAM} ARGS`."
            )
        self._note_dependencies()
        output = self._output(words[1:], extra)
        caption = " ".join([*(f"{n}={shlex.quote(v)}" for n, v in extra.items()), command])
        return [self._block(f"$ {caption}", output)]

    def _output(self, args: list[str], extra: dict[str, str]) -> str:
        """The command's output, checked: its exit status, and no machine's paths."""
        expected = self.options.get("returncode", 0)
        timeout = self.options.get("timeout", TIMEOUT)
        try:
            done = subprocess.run(
                [sys.executable, "-m", PROGRAM, *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env=_environment(extra),
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise self.error(
                f"command-output: {self.arguments[0]!r} ran past {timeout} s and was killed; "
                "make it faster or give it more time with :timeout: SECONDS."
            ) from None
        output = done.stdout.rstrip()
        if done.returncode != expected:
            raise self.error(
                f"command-output: {self.arguments[0]!r} exited with status {done.returncode}, "
                f"not the {expected} expected; fix the command, or declare the status with "
                f":returncode: {done.returncode}. Its output:\n{output}"
            )
        for path in _machine_paths(Path(self.env.srcdir)):
            if path in output:
                raise self.error(
                    f"command-output: the output of {self.arguments[0]!r} holds {path!r}, a "
                    "path of this machine, which would differ on every machine that builds "
                    "the page; show another command, or make the command leave it out. The "
                    "lines that hold it:\n"
                    + "\n".join(line for line in output.splitlines() if path in line)
                )
        return self._shortened(output)

    def _shortened(self, output: str) -> str:
        """The first ``:ellipsis:`` lines, then ``...``, if the page asks for fewer."""
        keep = self.options.get("ellipsis")
        lines = output.splitlines()
        if keep is None or len(lines) <= keep:
            return output
        return "\n".join([*lines[:keep], "..."])

    def _block(self, caption: str, output: str) -> nodes.container:
        """A literal block of class ``output``, in a container captioned with the command."""
        literal = nodes.literal_block(output, output, language="text")
        literal["classes"] += ["output"]
        self.set_source_info(literal)
        # The caption as literal text: not parsed as markup, nor its "--" made a dash.
        title = nodes.caption(caption, "", nodes.literal(caption, caption))
        self.set_source_info(title)
        container = nodes.container("", literal_block=True, classes=["literal-block-wrapper"])
        container += [title, literal]
        self.add_name(container)
        return container

    def _note_dependencies(self) -> None:
        """Rebuild the page when coheriq's code changes: its output may change with it."""
        import coheriq

        for path in sorted(Path(coheriq.__file__).parent.glob("*.py")):
            self.env.note_dependency(str(path))


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("command-output", CommandOutput)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
