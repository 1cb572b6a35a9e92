"""waves: a mean at once; signal processing in a subpackage imported on first use.

Laid out as lazy_loader's ``attach_stub`` users lay out theirs: each package's
``__init__.pyi`` says what it loads lazily, and each package declares the
candidates of its own modules.
"""

import lazy_loader as lazy

import coheriq

domain = coheriq.AccelerationDomain("waves", env_prefix="WAVES")

# 1. This package's own lazily loaded module.
domain.declare("waves._core", functions=["mean"])

# 2. A subpackage that declares its modules itself, when it is first imported.
domain.declare_package("waves.signal")

# 3. Materialize: engines may now override mean, and whatever waves.signal declares.
domain.materialize()

__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)
