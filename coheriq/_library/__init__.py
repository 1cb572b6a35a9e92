"""The library's side: its domain, and the copies of it.

:class:`~coheriq.AccelerationDomain` (marking, declarations, materializing) in
:mod:`.domain`; domains by name and the copies of a library's module that runs
again (:mod:`.registry`); candidates marked after ``materialize()``
(:mod:`.late_candidates`); the hook through which a profile or verification
watches every domain's calls (:mod:`.observing`); the rules by which a library's
results are compared (:mod:`.comparing`).
"""
