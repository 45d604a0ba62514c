#!/usr/bin/env python3
"""Run the Python client's tests with plain unittest and end with one summary line:

    python: N passed, M failed, K skipped

Exit status 0 only when nothing failed. (``python3 -m unittest discover -s tests`` and
``pytest tests`` run the same tests.)
"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


class CountingResult(unittest.TextTestResult):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.passed = 0
        self.failed_ids = set()

    def addSuccess(self, test):
        super().addSuccess(test)
        self.passed += 1

    def _failed(self, test):
        test = getattr(test, "test_case", test)  # a subtest counts as its test
        self.failed_ids.add(test.id())

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._failed(test)

    def addError(self, test, err):
        super().addError(test, err)
        self._failed(test)

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            self._failed(test)

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._failed(test)


def main() -> int:
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.dirname(HERE))
    pattern = sys.argv[1] if len(sys.argv) > 1 else "test*.py"
    suite = unittest.defaultTestLoader.discover(HERE, pattern=pattern, top_level_dir=HERE)
    runner = unittest.TextTestRunner(verbosity=2, resultclass=CountingResult)
    result = runner.run(suite)
    failed = len(result.failed_ids)
    print(f"python: {result.passed} passed, {failed} failed, {len(result.skipped)} skipped")
    for test, reason in result.skipped:
        print(f"python: skipped {test.id() if hasattr(test, 'id') else test}: {reason}")
    return 0 if failed == 0 and result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
