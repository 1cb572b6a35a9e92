"""coheriq's proxies side by side, on each Python: what a call costs.

Run ``python benchmarks/proxies.py PYTHON [PYTHON ...]``, each PYTHON an
interpreter with coheriq installed (``pip install -e .`` builds the compiled proxy
for it). For each, ``benchmarks/run.py --only dispatch`` runs four times: with
plain functions on the code-swapped proxy, with the compiled part (``swapped``,
column ``swap``: the default, classes on the compiled proxy) and without it
(``swapped-pure``, ``swap-py``: ``COHERIQ_PURE_PYTHON=1``, what an install
without a compiler runs), and with every candidate on the compiled proxy
(``compiled``: ``COHERIQ_SWAP_CODE=0``) and on the pure-Python one (``python``:
both settings), each run pairing every statement with its baseline
in one process as run.py always does, in 15 rounds of 150,000 calls. ``--record DIR`` writes each
run's figures to ``DIR/<python>-<proxy>/`` and the comparison to
``DIR/proxies.txt`` and ``DIR/proxies.json``, which the performance page shows;
with ``--keep`` the columns recorded there for other Pythons stay in the table
(each Python measured where it runs: CI's newer Pythons live in a chroot), and
``--keep --record DIR`` with no PYTHON writes the table again from what is
recorded there, measuring nothing.

Each cell is the median ratio over the run's rounds; the floor row is
``functools.partial(impl)``: what any callable written in C costs in front of a
Python function, measured in the same run. Each case's target is stated in that
floor (``benchmarks/targets.py``), so it is the run's own: every run, the kept
ones too, is held to the targets of today's targets.py, and a cell over its target
is marked ``*``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import targets

HERE = Path(__file__).parent
CASES = [
    "call, reference, no block ever",
    "call, reference, after blocks opened",
    "call, global engine, positional",
    "call, global engine, keyword",
    "floor: functools.partial(impl)",
    "call inside using_engine",
    "call inside using_engine, reference",
    "call while another thread is scoped",
    "construct class candidate",
    "construct inside using_engine",
]
# Each kind's column label.
LABELS = {"swapped": "swap", "swapped-pure": "swap-py", "compiled": "comp", "python": "pyth"}
# Each run's plan: 15 rounds of 150,000 calls a case (run.py's own is 31 of 300,000),
# so that the sixteen runs of four Pythons take minutes, not an hour.
ROUNDS, NUMBER = 15, 150_000

# Each kind: its settings, COHERIQ_SWAP_CODE and COHERIQ_PURE_PYTHON.
PROXIES = {
    "swapped": {"COHERIQ_SWAP_CODE": "1", "COHERIQ_PURE_PYTHON": "0"},
    "swapped-pure": {"COHERIQ_SWAP_CODE": "1", "COHERIQ_PURE_PYTHON": "1"},
    "compiled": {"COHERIQ_SWAP_CODE": "0", "COHERIQ_PURE_PYTHON": "0"},
    "python": {"COHERIQ_SWAP_CODE": "0", "COHERIQ_PURE_PYTHON": "1"},
}


def with_targets(rows: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """One run's rows by case, each with its target and verdict under targets.py."""
    return {row["case"]: row for row in targets.apply(list(rows.values()))}


def measure(python: str, proxy: str, folder: Path, quick: bool) -> dict[str, dict[str, Any]] | None:
    """Run the dispatch cases with ``python`` on ``proxy``; return each case's row.

    None if ``python`` cannot run ``proxy`` (the compiled proxy is not built for it).
    """
    env = {**os.environ, **PROXIES[proxy]}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    command = [python, str(HERE / "run.py"), "--only", "dispatch", "--record", str(folder)]
    # A quick run is run.py's own smoke plan: this plan would override it (a "quick"
    # comparison then took three minutes).
    command += ["--quick"] if quick else ["--rounds", str(ROUNDS), "--number", str(NUMBER)]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{python} on the {proxy} proxy failed:\n{done.stderr}")
    run = json.loads((folder / "dispatch.json").read_text(encoding="utf-8"))
    dispatcher = run["proxy"].split()[0]
    swapped = {"compiled": "swapped", "python": "swapped-pure"}[dispatcher]
    ran = swapped if run.get("swap_code") else dispatcher
    if ran != proxy:
        print(f"left out: {python} ran on {run['proxy']}", file=sys.stderr)
        return None
    return with_targets({row["case"]: row for row in run["rows"]})


# What an interpreter is: its version, with a "t" for a free-threaded build (as its
# command is named), and the first word of what it says of its proxy where it may use
# the compiled one.
DESCRIBE = (
    "import platform, sysconfig, coheriq; free = sysconfig.get_config_var('Py_GIL_DISABLED'); "
    "print(platform.python_version() + ('t' if free else ''), coheriq.proxy_implementation())"
)


def describe(python: str) -> tuple[str, bool]:
    """``python``'s version, and whether it runs the compiled part."""
    env = {**os.environ, "COHERIQ_PURE_PYTHON": "0"}
    done = subprocess.run(
        [python, "-c", DESCRIBE], capture_output=True, text=True, env=env, check=True
    )
    version, implementation = done.stdout.split()[:2]
    return version, implementation == "compiled"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "pythons", nargs="*", help="interpreters with coheriq installed (none: --keep only)"
    )
    parser.add_argument("--record", type=Path, metavar="DIR", help="write the runs here")
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument(
        "--keep", action="store_true", help="keep DIR's recorded columns of other Pythons"
    )
    args = parser.parse_args(argv)
    if not args.pythons and not (args.keep and args.record):
        parser.error("name a PYTHON, or --keep --record DIR to write DIR's table again")
    base = args.record or Path(os.environ.get("TMPDIR", "/tmp")) / "coheriq-proxies"
    # Each column: (Python version, proxy) -> that run's rows by case.
    runs: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    if args.keep and (base / "proxies.json").is_file():
        kept = json.loads((base / "proxies.json").read_text(encoding="utf-8"))
        runs.update({tuple(label.split(" ")): with_targets(rows) for label, rows in kept.items()})  # type: ignore[misc]
    for python in args.pythons:
        version, compiled = describe(python)
        for proxy in PROXIES:
            if PROXIES[proxy]["COHERIQ_PURE_PYTHON"] == "0" and not compiled:
                print(f"left out: {python}, {proxy}: no compiled part", file=sys.stderr)
                continue
            print(f"Python {version}, {proxy} proxy ...", file=sys.stderr, flush=True)
            found = measure(python, proxy, base / f"{version}-{proxy}", args.quick)
            if found is not None:
                runs[version, proxy] = found

    def order(column: tuple[str, str]) -> tuple[list[int], int]:  # by version, then proxy
        version, proxy = column
        return [int(part.rstrip("t")) for part in version.split(".")], list(PROXIES).index(proxy)

    runs = {column: runs[column] for column in sorted(runs, key=order)}
    if not runs:
        sys.exit(f"nothing recorded in {base / 'proxies.json'}, and no PYTHON named")
    width = max(len(case) for case in CASES) + 2
    rule = max(len(targets.rule(case)) for case in CASES) + 4
    head = f"{'median ratio':<{width}}{'target':<{rule}}" + "".join(
        f"{f'{v} {LABELS[p]}':>17}" for v, p in runs
    )
    lines = [head, "-" * len(head)]
    for case in CASES:
        cells = "".join(
            f"{rows[case]['median']:>15.2f}x{'*' if rows[case]['verdict'] == 'MISSED' else ' '}"
            if case in rows
            else f"{'-':>16} "  # recorded before the case existed
            for rows in runs.values()
        )
        target = f"<= {targets.rule(case)}" if targets.rule(case) else ""
        lines.append(f"{case:<{width}}{target:<{rule}}{cells}".rstrip())
    direct = "call, global engine, positional"
    ns = "".join(f"{rows[direct]['baseline_ns']:>15.0f}ns" for rows in runs.values())
    lines.append(f"{'direct call of impl(1), ns':<{width}}{'':<{rule}}{ns}")
    lines.append(
        "floor: functools.partial(impl), in the same run; *: over its target"
        " (benchmarks/targets.py)"
    )
    table = "\n".join(lines)
    print(table)
    if args.record:
        (base / "proxies.txt").write_text(table + "\n", encoding="utf-8")
        summary = {f"{v} {p}": rows for (v, p), rows in runs.items()}
        (base / "proxies.json").write_text(json.dumps(summary, indent=2) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
