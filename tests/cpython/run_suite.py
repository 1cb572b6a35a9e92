"""Run CPython's test suite of one module and print each test's outcome as JSON.

``python run_suite.py MODULE`` runs ``test.test_MODULE`` as CPython runs it
(``load_tests`` adds the module's doctests, where it has any). It is run by the
interpreter whose ``test`` package it uses, with the ``MODULE`` to test first on
``sys.path``. For ``statistics`` it also runs CPython's ``TestNormalDist`` tests
once more against the imported module itself, as ``TestNormalDistImported``
(CPython runs them against fresh copies of the module only).

``python run_suite.py MODULE --declining`` runs it on an engine that declines
every other call (see ``declining_engine.py``), inside a ``coheriq.profile()``
block, and adds the declines the profile counted to the report.
"""

from __future__ import annotations

import importlib
import json
import sys
import unittest


def extra_tests(module, suite_module) -> list[type[unittest.TestCase]]:
    """Tests of ``module`` itself that its suite runs only against fresh copies of it."""
    if module.__name__ != "statistics":
        return []

    class TestNormalDistImported(unittest.TestCase, suite_module.TestNormalDist):
        pass

    TestNormalDistImported.module = module
    return [TestNormalDistImported]


def marked(module) -> bool:
    """Whether ``module`` is marked: by its own code (its ``domain``), or from the outside."""
    if hasattr(module, "domain"):
        return True
    if "coheriq" not in sys.modules:
        return False
    from coheriq._call.proxy import candidate_of

    return candidate_of(getattr(module, "mean", None)) is not None


class Outcomes(unittest.TextTestResult):
    """A result that also remembers the outcome of every test by its id."""

    def startTestRun(self) -> None:  # noqa: N802 -- unittest's name
        super().startTestRun()
        self.outcomes: dict[str, str] = {}

    def addSuccess(self, test):  # noqa: N802
        super().addSuccess(test)
        self.outcomes[test.id()] = "passed"

    def addFailure(self, test, err):  # noqa: N802
        super().addFailure(test, err)
        self.outcomes[test.id()] = "failed"

    def addError(self, test, err):  # noqa: N802
        super().addError(test, err)
        self.outcomes[test.id()] = "error"

    def addSkip(self, test, reason):  # noqa: N802
        super().addSkip(test, reason)
        self.outcomes[test.id()] = "skipped"


def main(name: str, declining: bool = False) -> int:
    module = importlib.import_module(name)
    if declining:
        from declining_engine import install

        import coheriq

        install(name)
        coheriq.enable_engine(name, "halving")
        profile = coheriq.profile()
    suite_module = importlib.import_module(f"test.test_{name}")
    loader = unittest.TestLoader()
    suite = loader.loadTestsFromModule(suite_module)
    for case in extra_tests(module, suite_module):
        suite.addTests(loader.loadTestsFromTestCase(case))
    runner = unittest.TextTestRunner(stream=sys.stderr, resultclass=Outcomes, verbosity=0)
    if declining:
        with profile:
            result = runner.run(suite)
    else:
        result = runner.run(suite)
    report = {
        "file": module.__file__,
        "marked": marked(module),
        "ran": result.testsRun,
        "outcomes": result.outcomes,
    }
    if declining:
        report["declines"] = {f"{r.candidate}: {r.reason}": r.count for r in profile.declines}
    print(json.dumps(report))
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], declining="--declining" in sys.argv[2:]))
