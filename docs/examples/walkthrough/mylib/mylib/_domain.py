"""The domain of mylib, in a module of its own so that every module can import it."""

import coheriq

domain = coheriq.AccelerationDomain("mylib", env_prefix="MYLIB")
