"""The one resolution rule: which implementation a call runs.

The global choice, made once (:mod:`.global_choice`), from an ordered list of
engines maybe (:mod:`.ordered`); the ``using_engine`` blocks that override it in
their context (:mod:`.blocks`); what a domain's parts share (:mod:`.state`).
"""
