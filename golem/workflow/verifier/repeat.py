"""`-repeat N`: re-run the tests that failed before, N more times each, to catch a fix that
only passes sometimes.

unittest and pytest tests run alone, each in a fresh process: unittest through golem's driver
with the test id, pytest with the test's file and node id in place of the command's test
paths. Other runners cannot isolate one test the same way everywhere, so the whole suite runs
again and each previously failing test's outcome is read from it; a runner judged by exit
code alone is compared by that. Any outcome that differs from the graded run makes the test
flaky.
"""

from __future__ import annotations

from typing import Callable

from golem.workflow.verifier.suite import SuiteResult

WHOLE_SUITE = "(whole suite)"


def alone(test_id: str, result: SuiteResult, runner: str) -> str | None:
    """How to select one test for a run of its own, or None (run the whole suite)."""
    if runner == "unittest":
        return test_id
    if runner == "pytest":
        file = result.files.get(test_id)
        if file and "::" in test_id:
            return f"{file}::{test_id.split('::', 1)[1]}"
    return None


def flaky_tests(runner: str, before: SuiteResult, after: SuiteResult, times: int,
                again: Callable[[str | None], SuiteResult],
                note: Callable[[str], None] = lambda message: None) -> list[str]:
    """Ids of previously failing tests whose outcome changed in any of `times` re-runs;
    `again(only)` runs the suite once (`only`: one test, or None for all of it)."""
    if times <= 0:
        return []
    if after.tests is None:
        for round_ in range(1, times + 1):
            result = again(None)
            note(f"repeat {round_}/{times}: the whole suite {result.summary()}")
            if result.passed != after.passed:
                return [WHOLE_SUITE]
        return []
    ids = sorted(t for t in before.failing if t not in before.pseudo and t in after.tests)
    flaky: list[str] = []
    if runner not in ("unittest", "pytest"):
        for round_ in range(1, times + 1):
            result = again(None)
            changed = [t for t in ids if t not in flaky and
                       (result.tests or {}).get(t) != after.tests[t]]
            note(f"repeat {round_}/{times}: the whole suite again; "
                 f"{len(changed)} previously failing test(s) changed outcome")
            flaky += changed
        return sorted(flaky)
    for test_id in ids:
        only = alone(test_id, after, runner)
        for round_ in range(1, times + 1):
            result = again(only)
            outcome = (result.tests or {}).get(test_id)
            note(f"repeat {round_}/{times}: {test_id} alone: {outcome or 'did not run'}")
            if outcome != after.tests[test_id]:
                flaky.append(test_id)
                break
    return flaky
