import pytest

import coheriq as cq


@pytest.mark.parametrize(
    ("error", "parents"),
    [
        (cq.CoheriqError, (RuntimeError,)),
        (cq.CoheriqLibraryError, (cq.CoheriqError,)),
        (cq.CoheriqDomainError, (cq.CoheriqLibraryError,)),
        (cq.CoheriqEngineError, (cq.CoheriqLibraryError,)),
        (cq.CoheriqEngineInheritanceError, (cq.CoheriqEngineError,)),
        (cq.CoheriqEngineLoadError, (cq.CoheriqEngineError,)),
        (cq.CoheriqUserError, (cq.CoheriqError,)),
        (cq.CoheriqDomainNotFoundError, (cq.CoheriqUserError,)),
        (cq.CoheriqEngineNotFoundError, (cq.CoheriqUserError,)),
        (cq.CoheriqEngineSettledError, (cq.CoheriqUserError,)),
        (cq.CoheriqTypeError, (cq.CoheriqUserError, TypeError)),
    ],
)
def test_error_tree(error, parents):
    for parent in parents:
        assert issubclass(error, parent)


def test_reference_constant():
    assert cq.REFERENCE == "reference"


def test_public_names_are_exported():
    for name in cq.__all__:
        assert getattr(cq, name) is not None
