"""The user's verbs (:mod:`.verbs`) and the two forms of an engine (:mod:`.engine_forms`)."""
