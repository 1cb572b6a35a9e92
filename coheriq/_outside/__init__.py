"""Accelerating a library that never adopted coheriq, from the outside (see docs/outside.rst).

``declarations`` reads what packages declare of it, without importing; ``adapter`` makes its domain
and marks its modules; ``finder`` marks them as they are imported; ``activation`` and ``startup``
turn it on (``coheriq.accelerate``, ``COHERIQ_ACCELERATE``, the ``.pth`` file)."""
