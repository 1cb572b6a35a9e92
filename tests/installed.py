"""Give a test's interpreter coheriq from this source tree as an install gives it.

``python -m coheriq run`` and ``COHERIQ_ACCELERATE`` rest on the start-up file an
install of coheriq puts in site-packages (``coheriq-accelerate.pth``); an
interpreter that finds coheriq on ``PYTHONPATH`` has none, and the runner refuses
to run there, saying so. These two files, written into a virtual environment's
site-packages, are what an editable install would leave there.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def give_coheriq(python: str) -> None:
    """Put this tree and coheriq's start-up file in the site-packages of ``python``'s venv.

    ``python`` must be a virtual environment's interpreter, made for the tests: the
    files stay there (rewritten each time, for the tree of the run that calls this).
    """
    done = subprocess.run(
        [python, "-c", "import sys, sysconfig; print(sys.prefix != sys.base_prefix); "
         "print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    in_venv, site = done.stdout.split("\n", 1)
    if in_venv != "True":
        raise AssertionError(f"{python} is not a virtual environment's: it would change for good")
    site_packages = Path(site.strip())
    # "_" sorts before "c": the tree is on sys.path when the start-up file's line runs.
    (site_packages / "_coheriq_source_tree.pth").write_text(f"{ROOT}\n", encoding="utf-8")
    startup = ROOT / "coheriq" / "_outside" / "coheriq-accelerate.pth"
    shutil.copyfile(startup, site_packages / "coheriq-accelerate.pth")
