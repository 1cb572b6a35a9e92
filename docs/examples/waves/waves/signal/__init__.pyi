from ._filters import Kernel, convolve

__all__ = ["Kernel", "convolve"]
