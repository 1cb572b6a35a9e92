"""The one resolution rule: which implementation a call runs.

What a call may find (:mod:`.records`: a settlement, a block, a block that
ended), the global choice settled once (:mod:`.global_choice`), an ordered
list of engines (:mod:`.ordered`), and the ``using_engine`` blocks of a domain
(:mod:`.blocks`).
"""
