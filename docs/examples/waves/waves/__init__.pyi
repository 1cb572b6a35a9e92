from . import signal
from ._core import mean

__all__ = ["mean", "signal"]
