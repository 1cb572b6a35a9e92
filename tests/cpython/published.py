"""statistics' NumPy engine, laid out in a directory as pip would install it.

Used by the suite's tests (``tests/test_cpython_suites.py``) and by
``benchmarks/outside.py``: the engine module, its ``.dist-info`` advertising it,
and, for ``statistics`` accelerated from the outside, its declaration of the
module's candidates (``statistics.coheriq-declaration.json``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

HERE = Path(__file__).parent
DECLARATION = "statistics.coheriq-declaration.json"


def publish_numpy_engine(where: Path, *, declaration: bool, extra: tuple[str, ...] = ()) -> None:
    """Install engine "numpy" of statistics into ``where`` (with its declaration if asked).

    ``extra`` names more files of this directory to copy beside it.
    """
    for name in ("statistics_numpy.py", *extra, *([DECLARATION] if declaration else [])):
        shutil.copy(HERE / name, where / name)
    info = where / "statistics_numpy-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: statistics-numpy\nVersion: 1.0\n")
    entry_points = "[coheriq.engines.statistics]\nnumpy = statistics_numpy\n"
    if declaration:
        entry_points += (
            f"\n[coheriq.declarations.statistics]\nnumpy = statistics_numpy:{DECLARATION}\n"
        )
    (info / "entry_points.txt").write_text(entry_points)
