"""Engines: classes of their domain's reference class.

Their metaclass (:mod:`.meta`) and its checks of overrides (:mod:`.overrides`); a
domain's registry of them (:mod:`.registry`); an engine's start (:mod:`.start`);
``self.<Class>`` (:mod:`.own_class`); declining calls (:mod:`.declines`).
"""
