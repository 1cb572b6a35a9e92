"""A pytest plugin for running CPython's statistics suite, which we do not own, on an engine.

``pytest --import-mode=append -p statistics_xfails --coheriq-engine=statistics:numpy
.../test/test_statistics.py`` (``append``: the default mode would put the standard
library's directory first on ``sys.path``, and so import its unmarked ``statistics``).

It does two things a conftest would do, from outside the suite:

- It leaves out the mixin classes (``TestNormalDist``, ``TestSumCommon``) whose
  names start with ``Test`` but which are not unittest test cases: unittest
  runs them only through the classes that combine them with a module, while
  pytest would collect them on their own and fail them.
- It marks the tests that engine "numpy" is known to fail with
  ``coheriq_xfail("statistics", "numpy", strict=True)``: expected to fail on that
  engine only (on the reference they must pass), and required to fail there, so
  that the list cannot go stale.
"""

from __future__ import annotations

import unittest

import pytest

ROUNDING = (
    "the engine's arithmetic: NumPy sums in float64, pairwise, where the library sums "
    "exactly and rounds once, so the last bits differ"
)

# "Class::test" -> why it fails on engine "numpy".
KNOWN = {
    "TestPVariance::test_accuracy_bug_20499": ROUNDING,
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mixins = [i for i in items if i.cls is not None and not issubclass(i.cls, unittest.TestCase)]
    if mixins:
        config.hook.pytest_deselected(items=mixins)
        items[:] = [i for i in items if i not in mixins]
    for item in items:
        key = f"{item.cls.__name__}::{item.name}" if item.cls else item.name
        reason = KNOWN.get(key)
        if reason is not None:
            marker = pytest.mark.coheriq_xfail("statistics", "numpy", reason=reason, strict=True)
            item.add_marker(marker)
