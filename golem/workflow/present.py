"""The trace events a person reads after a run, beside the grading: the diff of the allowed
changes (`diff`: the console prints its stat and the diff, the HTML report shows it
coloured) and every test's outcome before and after (`outcomes`: the report's table), with
the baseline's output. They are written from what golem itself holds (its snapshot, the
workspace, its own result files), after the verdict was reached, and never change it."""

from __future__ import annotations

from golem.trace import Trace
from golem.workflow.patch import diffstat

MAX_DIFF = 256 * 1024       # characters of diff text in the trace (-patch writes it whole)
MAX_OUTPUT = 20_000         # characters of the baseline's output
MAX_TESTS = 20_000          # tests in the outcomes table


def emit_diff(trace: Trace, diffs: dict[str, str], held: set[str] = frozenset()) -> None:
    """The `diff` event: the allowed changes (protected ones left out), stat and text."""
    allowed = {path: text for path, text in diffs.items() if path not in held}
    text = "".join(allowed.values())
    trace.emit("diff", stat=diffstat(allowed), text=text[:MAX_DIFF],
               truncated=len(text) > MAX_DIFF, held=sorted(held & set(diffs)))


def emit_outcomes(trace: Trace, before, after, elapsed: dict[str, float] | None = None) -> None:
    """The `outcomes` event: test id -> outcome before and after (None when only the exit
    code is known), the seconds each suite run took, and the baseline's output tail."""
    def table(result):
        if result is None or result.tests is None:
            return None
        return dict(sorted(result.tests.items())[:MAX_TESTS])
    output = before.output or ""
    trace.emit("outcomes", before=table(before), after=table(after),
               before_s=round(before.elapsed, 3),
               after_s=round(after.elapsed, 3) if after is not None else None,
               baseline_output=output[-MAX_OUTPUT:], baseline_passed=before.passed,
               **(elapsed or {}))
