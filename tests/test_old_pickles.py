"""Pickles written by an earlier coheriq load with this one.

``tests/pickles/users_subclass-0.1.0.hex`` was written by coheriq 0.1.0 (before
its modules moved into packages) with cloudpickle 3.1.3: an object of a user's
subclass of a marked class, the subclass defined in ``__main__``, so pickled by
value, its metaclass by the name ``coheriq.marked.subclasses_of.<class>``, which
every later coheriq must still answer. The library is
``tests/pickles/pickled_shapes.py``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

PICKLES = Path(__file__).parent / "pickles"

LOAD = """
import pickle, sys
sys.path.insert(0, {path!r})
import pickled_shapes
mine = pickle.loads(bytes.fromhex(open({pickle!r}).read()))
print(type(mine).__name__, mine.label, mine.width(), isinstance(mine, pickled_shapes.Interval))
print(type(type(mine)).__module__, type(type(mine)).__qualname__.split(".")[0])
"""


@pytest.mark.skipif(
    sys.version_info[:2] != (3, 11),
    reason="written on Python 3.11: a class pickled by value carries code objects, which "
    "load only on the Python version that wrote them",
)
def test_a_users_subclass_pickled_by_coheriq_0_1_0_loads():
    pytest.importorskip("cloudpickle", reason="cloudpickle (dask, joblib) is not installed")
    script = LOAD.format(path=str(PICKLES), pickle=str(PICKLES / "users_subclass-0.1.0.hex"))
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    assert first.split() == ["Mine", "three", "3", "True"]
    assert second.split() == ["coheriq.marked", "subclasses_of"]
