"""What stands at call sites, and what it reads.

The proxies of function candidates (generated functions, or the compiled proxy
of ``coheriq/_cproxy.c``) and the switchboard whose cells they read
(:mod:`.proxy`); a marked class, the library's class rebuilt so that calling it
dispatches, and its alternate constructors (:mod:`.marked`).
"""
