"""`golem fix`: baseline, the agent run, then golem's own verdict.

    baseline  run the suite (per-test evidence where the runner allows); green -> ALREADY_GREEN
    snapshot  fingerprint and keep a copy of every file, outside the workspace
    agent     the model works under the budgets
    verdict   compare with the snapshot (protected paths -> REJECTED), re-run the suite, grade
"""

from __future__ import annotations

import os

from golem import agent
from golem.agent import prompts, stops
from golem.errors import interrupted
from golem.llm import Provider, preflight
from golem.tools import default_registry
from golem.trace import Trace
from golem.workflow import rebuild, repeat, runs
from golem.workflow.patch import diffstat, file_diffs
from golem.workflow.protect import new_tests, protected_changes
from golem.workflow.setup import Options, Setup
from golem.workflow.snapshot import Changes, Snapshot, compare, fingerprint
from golem.workflow.suite import SuiteResult, run_suite
from golem.workflow.suspicious import scan_changes
from golem.workflow.verdict import advise, judge, mark_flaky

# report fields the `verdict` trace event carries beside the grading itself
VERDICT_EXTRAS = ("protected_changes", "claimed", "changed_files", "suspicious", "flaky",
                  "verified_in")


def _tail(text: str, lines: int = 40, chars: int = 4000) -> str:
    tail = "\n".join(text.rstrip().splitlines()[-lines:])
    return tail[-chars:]


def suite(setup: Setup, label: str) -> SuiteResult:
    """Run the suite in the workspace and record it in the trace as `label`."""
    result = run_suite(setup.command, cwd=setup.workspace.root, env=setup.env,
                       scratch=setup.scratch, timeout=setup.options.suite_timeout,
                       wrap=setup.wrap)
    setup.trace.emit(label, summary=result.summary(), **result.to_json())
    return result


def base_report(setup: Setup, before: SuiteResult) -> dict:
    """The fields of the result that exist however the run ends."""
    return {"verdict": None, "stop": None, "steps": 0, "tool_calls": 0,
            "tokens": {"prompt": 0, "completion": 0, "cached": 0, "total": 0}, "cost": 0.0,
            "elapsed_s": 0.0, "changed_files": [], "protected_changes": [],
            "new_tests": [], "tests": {"before": before.to_json(), "after": None},
            "fixed": [], "still_failing": before.failing, "newly_failing": [], "missing": [],
            "claimed": "", "suspicious": [], "trace": setup.options.trace,
            "test_command": setup.command.text, "evidence": before.evidence,
            "run_id": None, "patch": None, "error": None, "flaky": [], "verified_in": None}


def fix(options: Options, provider: Provider, trace: Trace, model: str,
        secrets: list[str]) -> dict:
    """Run `golem fix` and return its result (the `-json` object, plus `exit_code`)."""
    with Setup(options, trace) as setup:
        before = suite(setup, "baseline")
        preflight.wait(provider, options.budget.deadline)   # a rejected key: exit 2, now
        report = base_report(setup, before)
        if before.passed:
            summary = "ALREADY_GREEN: the suite passes before any change; no model was called"
            trace.emit("verdict", verdict="ALREADY_GREEN", summary=summary)
            return {**report, "verdict": "ALREADY_GREEN", "summary": summary, "exit_code": 0}

        run_id, run_dir = runs.new_run(setup.workspace.root)
        snap = Snapshot.take(setup.workspace.root, run_dir)
        registry = default_registry(setup.context(), secrets)
        task = prompts.fix_task(setup.command.text, before.failing, _tail(before.output))
        outcome = agent.run(provider, registry, model=model, system=prompts.FIX, task=task,
                            budget=options.budget, trace=trace,
                            max_tokens=options.provider.max_tokens, window=options.window,
                            context=options.context)

        after_files = fingerprint(setup.workspace.root)
        changes = _without(compare(snap.entries, after_files),
                           _own_files(setup.workspace.root, options))
        runs.finish_run(run_dir, changes, after_files)
        protected = protected_changes(changes, setup.command.argv)
        findings = scan_changes(setup.workspace.root, changes, protected, snap.original,
                                snap.entries, before.failing)
        if findings:
            trace.emit("suspicious", findings=findings)
        usage = outcome.usage
        report.update(stop=outcome.stop, steps=outcome.steps, tool_calls=outcome.tool_calls,
                      tokens=usage.to_json(),
                      cost=round(usage.cost or 0.0, 6), elapsed_s=round(outcome.elapsed, 3),
                      changed_files=changes.all, new_tests=new_tests(changes),
                      protected_changes=[{"path": p, "reason": r} for p, r in protected],
                      claimed=outcome.claimed, error=outcome.error, run_id=run_id,
                      suspicious=findings)
        if changes.all:
            trace.emit("note", message=f"run {run_id} changed {len(changes.all)} file(s); "
                       f"`golem undo {run_id}` puts them back", run_id=run_id)
        if outcome.stop == "interrupted":
            raise interrupted(outcome.interrupt, report)    # the CLI prints it with -json

        # the re-run happens in a copy rebuilt from the snapshot plus the allowed changes only
        copy = rebuild.from_snapshot(snap, setup.workspace.root,
                                     rebuild.target_for(setup.scratch, setup.workspace.root),
                                     changes, {p for p, _ in protected})
        after, wrap = rebuild.run_in_copy(setup, copy)
        verdict = judge(before, after, protected)
        flaky = repeat.after_grading(setup, copy.root, wrap, before, after, verdict.name)
        verdict = advise(mark_flaky(verdict, flaky), findings, options.strict)
        if outcome.stop == "declined" and verdict.name == "FAILED":
            # a clean exit for a task that cannot be done honestly: say so beside the evidence
            verdict.summary += ("; the model declined, saying the task cannot be done without "
                                "changing the tests")
        stops.explain(verdict, outcome)     # a provider error or a refusal, named
        report.update(flaky=flaky, verified_in="copy", exit_code=verdict.exit_code,
                      **verdict.fields())
        report["tests"]["after"] = after.to_json()
        diffs = file_diffs(setup.workspace.root, snap, changes.all)   # each file read once
        report["diffstat"] = diffstat("".join(diffs.values()))
        if options.patch:
            protected_paths = {p for p, _ in protected}
            _write_patch(options.patch,
                         "".join(d for p, d in diffs.items() if p not in protected_paths))
            report["patch"] = options.patch
        trace.emit("verdict", **verdict.fields(), **{key: report[key] for key in VERDICT_EXTRAS})
        return report


def _own_files(root: str, options: Options) -> set[str]:
    """golem's own output files (trace, patch, recording) that live inside the workspace."""
    own = set()
    for path in (options.trace, options.patch, options.provider.record):
        if path:
            rel = os.path.relpath(os.path.realpath(path), root)
            if not rel.startswith(".."):
                own.add(rel.replace(os.sep, "/"))
    return own


def _without(changes: Changes, paths: set[str]) -> Changes:
    keep = lambda names: [n for n in names if n not in paths]
    return Changes(keep(changes.added), keep(changes.modified), keep(changes.removed))


def _write_patch(path: str, text: str) -> None:
    tmp = f"{path}.part"
    with open(tmp, "w", encoding="utf-8", errors="surrogateescape") as handle:
        handle.write(text)
    os.replace(tmp, path)
