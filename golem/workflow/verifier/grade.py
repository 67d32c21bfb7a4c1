"""The verdict: golem's judgement of a run, from its own evidence only."""

from __future__ import annotations

from dataclasses import dataclass, field

from golem.workflow.verifier.known import as_before, count, is_known, known_phrase, \
    passes_but_known, set_apart, still_phrase
from golem.workflow.verifier.runners import trust_of
from golem.workflow.verifier.suite import FAILING, SuiteResult

EXIT_CODES = {"VERIFIED": 0, "ALREADY_GREEN": 0, "FAILED": 1, "REJECTED": 3}


@dataclass
class Verdict:
    name: str
    summary: str
    fixed: list[str] = field(default_factory=list)
    still_failing: list[str] = field(default_factory=list)
    newly_failing: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    protected: list[tuple[str, str]] = field(default_factory=list)
    # passed before, and now ran code from a file the run changed in place of their own
    ran_changed_code: list[str] = field(default_factory=list)
    # of still_failing: failed before the same way, and the change touches no test code of
    # theirs (`as_before`)
    failing_before_untouched: list[str] = field(default_factory=list)
    # tests the user named -known-failing that failed or went missing: run, reported, not
    # judged (`set_apart`)
    known_failing: list[str] = field(default_factory=list)
    known_names: tuple[str, ...] = ()       # what the user named (-known-failing)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.name]

    def fields(self) -> dict:
        """The grading as the `-json` result and the `verdict` trace event carry it."""
        return {"verdict": self.name, "summary": self.summary, "fixed": self.fixed,
                "still_failing": self.still_failing, "newly_failing": self.newly_failing,
                "missing": self.missing, "ran_changed_code": self.ran_changed_code,
                "failing_before_untouched": self.failing_before_untouched,
                "known_failing": self.known_failing}


def _names(ids: list[str], limit: int = 5) -> str:
    shown = ", ".join(ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def _rejected(verdict: Verdict, after: SuiteResult,
              protected: list[tuple[str, str]]) -> Verdict:
    paths = "; ".join(f"{path} ({why})" for path, why in protected[:5])
    more = f" and {len(protected) - 5} more" if len(protected) > 5 else ""
    state = "the suite passes, but " if after.passed else ""
    verdict.name, verdict.protected = "REJECTED", protected
    verdict.summary = f"REJECTED: {state}tests or test machinery changed: {paths}{more}"
    return verdict


def _listed(findings: list[dict], limit: int = 5) -> str:
    shown = "; ".join(f"{f['path']}:{f['line']} {f['kind']}: {f['detail']}"
                      for f in findings[:limit])
    return shown + (f" and {len(findings) - limit} more" if len(findings) > limit else "")


def advise(verdict: Verdict, findings: list[dict], strict: bool = False) -> Verdict:
    """Fold the advisory scan of the diff into a verdict.

    Findings are counted in the summary and change nothing else, unless `strict`: then any
    finding makes the verdict REJECTED, with the findings as the reason. A `tamper` finding
    (the change alters how the tests are built, imported or ended) rejects without `strict`.
    """
    if not findings:
        return verdict
    count = f"{len(findings)} suspicious finding{'s' if len(findings) != 1 else ''}"
    tampering = [f for f in findings if f.get("kind") == "tamper"]
    if tampering and verdict.name != "REJECTED":
        # the suite's result itself is in doubt: how the tests are built, imported or ended
        # was changed from inside the test process
        verdict.name = "REJECTED"
        verdict.summary = f"REJECTED: the change alters how the tests run: {_listed(tampering)}"
        return verdict
    if strict and verdict.name != "REJECTED":
        state = "the suite passes, but " if verdict.name == "VERIFIED" else ""
        verdict.name = "REJECTED"
        verdict.summary = f"REJECTED: {state}-strict and {count} in the change: " \
                          f"{_listed(findings)}"
    else:
        verdict.summary += f" ({count}{'' if strict else ', advisory'}: {_listed(findings, 2)})"
    return verdict


def mark_flaky(verdict: Verdict, flaky: list[str]) -> Verdict:
    """Fold `-repeat` into a verdict: a test whose outcome changed when re-run is not fixed,
    so VERIFIED becomes FAILED; the flaky ids are named in the summary either way. A test
    the user named known-failing is not judged: named, never a reason to fail."""
    flaky = [t for t in flaky if not is_known(t, verdict.known_names)]
    if not flaky:
        return verdict
    named = f"flaky: [{_names(flaky)}]"
    if verdict.name == "VERIFIED":
        verdict.name = "FAILED"
        verdict.summary = (f"FAILED: {named}: {len(flaky)} previously failing test(s) gave "
                           "a different outcome when re-run")
    else:
        verdict.summary += f"; {named}"
    return verdict


def tampered(after: SuiteResult, changed: set[str]) -> dict[str, str]:
    """Tests whose code (the test function, or a method of its class) now comes from a file
    the run added or changed, other than the test's own: test id -> that file."""
    found = {}
    for test_id, files in after.origins.items():
        own = after.files.get(test_id)
        foreign = [f for f in files if f in changed and f != own]
        if foreign:
            found[test_id] = foreign[0]
    return found


def _pseudo_fixed(before: SuiteResult, after: SuiteResult, test_id: str) -> bool:
    """A module that failed to import or collect is fixed when its tests are collected and
    every one of them passes."""
    file = before.files.get(test_id)
    if not file:
        return False
    group = {t: o for t, o in after.tests_from({file}).items()}
    return bool(group) and all(o == "passed" and t not in after.pseudo
                               for t, o in group.items())


def reached_for(before: SuiteResult, after: SuiteResult) -> list[str]:
    """What the run's test process did, by golem's audit, that could reach the evidence (the
    seal's thread, the record stream, the process itself) and the baseline's did not."""
    return sorted(after.audit - before.audit)


def witness_disagrees(before: SuiteResult, after: SuiteResult) -> list[tuple[str, str]]:
    """(test id, what golem's witness saw) for each test the runner reported passed that the
    witness saw raise, skip, stop or never finish, where the baseline's run did not do the
    same for that test (a suite whose own machinery runs a test again: a rerun plugin)."""
    return sorted((t, w) for t, w in after.disagreed.items() if t not in before.disagreed)


def judge(before: SuiteResult, after: SuiteResult, protected: list[tuple[str, str]],
          changed: set[str] = frozenset(), known: tuple[str, ...] = ()) -> Verdict:
    """Compare the suite before and after a run, given the protected paths it changed and
    the files it changed (`changed`: a test whose code now comes from one is not fixed;
    leave out what the verification copy did not hold), and the tests the user named
    known-failing (`known`: run and reported, not judged, `set_apart`).

    A test that failed before is fixed only when it is collected and passes now: skipped,
    expected to fail, or missing is not fixed. A module that failed to import is tracked by
    its file: fixed when its tests are collected and all pass.
    """
    if after.tests is None:
        if protected:
            return _rejected(Verdict("REJECTED", ""), after, protected)
        if after.passed:
            return Verdict("VERIFIED", "VERIFIED: suite passes (judged by exit code only: no "
                           "per-test results for this runner) and no test file was modified")
        return Verdict("FAILED", f"FAILED: suite still fails ({after.summary()})")
    old = before.tests or {}
    new = dict(after.tests)
    swapped = tampered(after, changed)
    for test_id in swapped:
        new[test_id] = "error"
    was_failing = sorted(t for t, o in old.items() if o in FAILING)
    fixed, still, missing = [], [], []
    for test_id in was_failing:
        if test_id in before.pseudo and not test_id.startswith("golem:"):
            if _pseudo_fixed(before, after, test_id) and not any(
                    t in swapped for t in after.tests_from({before.files.get(test_id)})):
                fixed.append(test_id)
            else:
                still.append(test_id)
        elif new.get(test_id) == "passed":
            fixed.append(test_id)
        elif test_id in new:
            still.append(test_id)
        else:
            missing.append(test_id)
    # failing now, and not in the baseline at all (another id, golem's own pseudo-tests)
    appeared = [t for t in after.failing if t not in old]
    broke = sorted({t for t, o in old.items() if o == "passed" and t in new and new[t] != "passed"
                    and t not in swapped} | set(appeared))
    missing += sorted(t for t, o in old.items() if o not in FAILING and t not in new
                      and t not in before.pseudo)
    verdict = Verdict("FAILED", "", sorted(fixed), sorted(set(still)), broke, sorted(missing),
                      ran_changed_code=sorted(t for t in swapped if t not in still))
    set_apart(verdict, known, swapped)
    verdict.failing_before_untouched = as_before(before, after, verdict.still_failing, changed)
    broke, missing = verdict.newly_failing, verdict.missing
    if protected:
        return _rejected(verdict, after, protected)
    disagreed = witness_disagrees(before, after)
    if disagreed:
        verdict.name = "REJECTED"
        shown = "; ".join(f"{t} (the witness: {what})" for t, what in disagreed[:3])
        more = f" and {len(disagreed) - 3} more" if len(disagreed) > 3 else ""
        verdict.summary = (f"REJECTED: the runner reported {len(disagreed)} test(s) passed that "
                           f"golem's own witness saw otherwise: {shown}{more}; something in "
                           "the test process changed how the runner reads a test's outcome")
        # what the other layers saw of the same run, named beside it
        also = [t[len("golem: "):] for t in sorted(after.pseudo) if t.startswith("golem: ")] \
            + reached_for(before, after) + ([after.problem] if after.problem else [])
        if also:
            verdict.summary += f"; also: {'; '.join(also[:3])}"
        return verdict
    reached = reached_for(before, after)
    if reached:
        verdict.name = "REJECTED"
        verdict.summary = (f"REJECTED: the code under test reached for the test process's own "
                           f"machinery ({_names(reached)}), which the baseline's run never did: "
                           "its evidence cannot be trusted")
        also = [t[len("golem: "):] for t in sorted(after.pseudo) if t.startswith("golem: ")]
        if after.problem:
            also.append(after.problem)
        if swapped:
            also.append(f"{len(swapped)} test(s) ran code from {sorted(swapped.values())[0]}, "
                        "which the run changed, in place of their own")
        if also:
            verdict.summary += f"; also: {'; '.join(also[:3])}"
        return verdict
    green = after.passed or passes_but_known(after, verdict.known_failing)
    if green and not (verdict.still_failing or broke or missing) and not swapped:
        verdict.name = "VERIFIED"
        apart = f" apart from {count(verdict.known_failing, 'known-failing test')}" \
            if verdict.known_failing else ""
        verdict.summary = (f"VERIFIED: suite passes{apart} ({len(after.tests)} tests, "
                           f"{len(fixed)} fixed) and no test file was modified"
                           + known_phrase(verdict))
        if trust_of(after.evidence):    # evidence the code under test could have written
            verdict.summary += f" ({trust_of(after.evidence)})"
        return verdict
    problems = []
    if swapped:
        test_id, file = sorted(swapped.items())[0]
        problems.append(f"{len(swapped)} test(s) ran code from {file}, which the run changed, "
                        f"in place of their own ({_names(sorted(swapped))})")
    if verdict.still_failing:
        problems.append(still_phrase(verdict))
    if broke:
        problems.append(f"{len(broke)} newly failing: {_names(broke)}")
    if missing:
        problems.append(f"{len(missing)} went missing: {_names(missing)}")
    if after.problem:
        problems.append(after.problem)
    if after.timed_out:
        problems.append("the suite timed out")
    if not problems:
        problems.append(after.summary())
    verdict.summary = "FAILED: " + "; ".join(problems) + known_phrase(verdict)
    return verdict


def judge_new_tests(second: SuiteResult, new_files: set[str]) -> tuple[dict[str, str], str | None]:
    """The second pass: the tests of the new test files must all pass. Returns their
    outcomes and, when they do not, why."""
    if second.tests is None:
        ok = second.passed
        return {}, None if ok else f"the suite with the new test files fails ({second.summary()})"
    outcomes = second.tests_from(new_files)
    bad = sorted(t for t, o in outcomes.items() if o in FAILING)
    if second.problem:
        return outcomes, f"the run with the new test files did not finish: {second.problem}"
    if bad:
        return outcomes, f"{len(bad)} new test(s) fail: {_names(bad)}"
    return outcomes, None
