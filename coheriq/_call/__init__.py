"""What stands at call sites: function proxies and the Switchboard they read (:mod:`.proxy`),
and marked classes (:mod:`.marked`)."""
