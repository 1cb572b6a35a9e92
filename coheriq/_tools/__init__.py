"""Tools for looking at a program, imported on first use: none is on the call path.

``explain`` and ``coverage`` (:mod:`.introspection`); ``profile``
(:mod:`.profiling`); ``verify`` (:mod:`.verification`, its records in
:mod:`.verdicts`); ``snapshot`` (:mod:`.snapshot`). The profile and the
verification watch calls through the hook of :mod:`coheriq._library.observing`.
"""
