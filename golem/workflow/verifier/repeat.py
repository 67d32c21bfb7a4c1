"""`-repeat N`: re-run the tests that failed before, N more times each, to catch a fix that
only passes sometimes.

Each test runs alone where its runner can select one test (`Runner.alone`): unittest through
golem's driver with the test id, pytest with the test's file and node id in place of the
command's test paths, cargo with `--exact NAME`, each in a fresh process. The tests a runner
cannot select alone (go, node, jest; a doc test) are read from whole runs of the suite again,
N of them; a runner judged by exit code alone is compared by that. Any outcome that differs
from the graded run makes the test flaky.
"""

from __future__ import annotations

from typing import Callable

from golem.workflow.verifier.runners import RUNNERS
from golem.workflow.verifier.suite import SuiteResult

WHOLE_SUITE = "(whole suite)"


def alone(test_id: str, result: SuiteResult, runner: str) -> str | None:
    """How to select one test for a run of its own, or None (run the whole suite)."""
    found = RUNNERS.get(runner)
    return found.alone(test_id, result.files) if found is not None else None


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
    selected = {t: alone(t, after, runner) for t in ids}
    whole = [t for t in ids if selected[t] is None]
    flaky: list[str] = []
    for round_ in range(1, times + 1 if whole else 1):
        result = again(None)
        changed = [t for t in whole if t not in flaky and
                   (result.tests or {}).get(t) != after.tests[t]]
        note(f"repeat {round_}/{times}: the whole suite again; "
             f"{len(changed)} previously failing test(s) changed outcome")
        flaky += changed
    for test_id in ids:
        only = selected[test_id]
        if only is None:
            continue
        for round_ in range(1, times + 1):
            result = again(only)
            outcome = (result.tests or {}).get(test_id)
            note(f"repeat {round_}/{times}: {test_id} alone: {outcome or 'did not run'}")
            if outcome != after.tests[test_id]:
                flaky.append(test_id)
                break
    return sorted(flaky)
