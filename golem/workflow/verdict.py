"""The verdict: golem's judgement of a run, from its own evidence only."""

from __future__ import annotations

from dataclasses import dataclass, field

from golem.workflow.suite import FAILING, SuiteResult

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

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.name]

    def fields(self) -> dict:
        """The grading as the `-json` result and the `verdict` trace event carry it."""
        return {"verdict": self.name, "summary": self.summary, "fixed": self.fixed,
                "still_failing": self.still_failing, "newly_failing": self.newly_failing,
                "missing": self.missing}


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
    finding makes the verdict REJECTED, with the findings as the reason.
    """
    if not findings:
        return verdict
    count = f"{len(findings)} suspicious finding{'s' if len(findings) != 1 else ''}"
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
    so VERIFIED becomes FAILED; the flaky ids are named in the summary either way."""
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


def judge(before: SuiteResult, after: SuiteResult,
          protected: list[tuple[str, str]]) -> Verdict:
    """Compare the suite before and after a run, given the protected paths it changed."""
    if after.tests is None:
        if protected:
            return _rejected(Verdict("REJECTED", ""), after, protected)
        if after.passed:
            return Verdict("VERIFIED", "VERIFIED: suite passes (judged by exit code only: no "
                           "per-test results for this runner) and no test file was modified")
        return Verdict("FAILED", f"FAILED: suite still fails ({after.summary()})")
    old = {t: o for t, o in (before.tests or {}).items() if t not in before.pseudo}
    new = after.tests
    was_failing = [t for t, o in old.items() if o in FAILING]
    fixed = sorted(t for t in was_failing if new.get(t) == "passed")
    still = sorted(set(t for t in was_failing if t in new and new[t] != "passed")
                   | set(t for t in after.failing if t not in old))
    broke = sorted(t for t, o in old.items() if o == "passed" and t in new and new[t] != "passed")
    missing = sorted(t for t in old if t not in new)
    verdict = Verdict("FAILED", "", fixed, still, broke, missing)
    if protected:
        return _rejected(verdict, after, protected)
    if after.passed and not (still or broke or missing):
        verdict.name = "VERIFIED"
        verdict.summary = (f"VERIFIED: suite passes ({len(new)} tests, {len(fixed)} fixed) "
                           "and no test file was modified")
        return verdict
    problems = []
    if still:
        problems.append(f"{len(still)} still failing: {_names(still)}")
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
    verdict.summary = "FAILED: " + "; ".join(problems)
    return verdict
