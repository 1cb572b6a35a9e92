"""The library's side: its domain (:mod:`.domain`), domains by name and their copies
(:mod:`.registry`), late candidates, the hook watchers use, the comparison rules."""
