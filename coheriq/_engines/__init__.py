"""Engines: classes of their domain's reference class.

The metaclass every engine class has (:mod:`.meta`) and its check of each
override's signature (:mod:`.overrides`); a domain's registry of its engines
(:mod:`.registry`); an engine's start, once per process (:mod:`.start`); a
class candidate as an engine's own code reaches it, ``self.<Class>``
(:mod:`.own_class`).
"""
