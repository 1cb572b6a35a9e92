"""Where the documentation's own files are, for the examples on its pages.

The doctests run from wherever ``sphinx-build`` was started; a page that runs a
file of ``docs/examples`` finds it from here.
"""

from pathlib import Path

DOCS = Path(__file__).resolve().parent
EXAMPLES = DOCS / "examples"
