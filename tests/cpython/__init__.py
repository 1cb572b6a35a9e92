"""CPython's own statistics suite, run against statistics marked as a coheriq domain."""
