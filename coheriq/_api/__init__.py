"""The user's verbs (:mod:`.verbs`: ``enable_engine``, ``using_engine``, ...) and the
two forms of an engine (:mod:`.engine_forms`: ``engine_class`` and
``AccelerationEngine``)."""
