"""The data type of the engine guide's "arraylib": an array of numbers, as a library has one.

It stands for ``numpy.ndarray``. It imports nothing, so that a pickle of it loads in
a program that has neither coheriq nor an engine (the guide shows one).
"""


class Array:
    """The library's array: its numbers, in ``values``."""

    def __init__(self, values):
        self.values = list(values)

    def __eq__(self, other):
        return type(other) is Array and other.values == self.values

    def __repr__(self):
        return f"Array({self.values})"
