"""The decorators are invisible to a type checker: mypy --strict over tests/typing/."""

from pathlib import Path

import pytest

api = pytest.importorskip("mypy.api")

TYPED = Path(__file__).parent / "typing" / "typed_lib.py"
SCALE = "def (xs: list[float], factor: float =) -> list[float]"
BATCH = "def (rows: list[list[float]]) -> typed_lib.Batch"


def test_reveal_types_survive_the_decorators(tmp_path):
    stdout, stderr, status = api.run(["--strict", "--cache-dir", str(tmp_path), str(TYPED)])
    revealed = [
        line.split("Revealed type is ")[1].strip('"')
        for line in stdout.splitlines()
        if "Revealed type is" in line
    ]
    assert revealed == [
        SCALE,  # a function candidate keeps its parameters and return type
        "list[float]",
        BATCH,  # a class candidate is still the class
        "typed_lib.Batch",
        "typed_lib.Batch",  # and its classmethods are typed as before
        SCALE,  # an override is the function it decorates
        SCALE,  # resolve_impl returns what it is given
        BATCH,
        "str",
    ], stdout + stderr
    errors = [line for line in stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1 and 'Argument 1 to "scale" has incompatible type "str"' in errors[0]
    assert status == 1
