"""``python -m coheriq``: the command line (see :mod:`coheriq.cli`)."""

import sys

from .cli import main

sys.exit(main())
