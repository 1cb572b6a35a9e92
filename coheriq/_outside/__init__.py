"""Accelerating a library that never adopted coheriq, from the outside.

``declarations`` reads what installed packages declare of a library, without
importing; ``adapter`` makes the library's domain from it and marks its modules;
``finder`` marks them as they are imported, reusing their real loaders;
``activation`` turns it on (``coheriq.accelerate``, ``COHERIQ_ACCELERATE``, the
start-up ``.pth`` file). ``python -m coheriq run`` (:mod:`coheriq.cli`) runs a
program with it on.
"""
