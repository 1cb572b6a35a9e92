"""``python -m coheriq``: the command line (see :mod:`coheriq.cli`)."""

from .cli import main

raise SystemExit(main())
