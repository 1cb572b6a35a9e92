"""waves.signal: filters, imported on first use; each name is written next to its stub."""

import lazy_loader as lazy

from waves import domain

domain.declare("waves.signal._filters", functions=["convolve"], classes=["Kernel"])

__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)
