"""`golem fix`: baseline, the agent run, then golem's own verdict.

    baseline  run the suite in a scratch of its own (per-test evidence where the runner
              allows); no evidence -> exit 2; green -> ALREADY_GREEN
    snapshot  fingerprint and keep a copy of every file, outside the workspace
    agent     the model works under the budgets, in the only scratch its commands may write
    verdict   compare with the snapshot (protected paths -> REJECTED), then in a fresh scratch
              re-run the suite in a rebuilt copy, and the new tests in a pass of their own
"""

from __future__ import annotations

import dataclasses
import os

from golem import agent
from golem.agent import prompts, stops
from golem.core.errors import UsageError, interrupted
from golem.llm import Provider, preflight
from golem.tools import default_registry, process, tree
from golem.trace import Trace
from golem.trace.console import duration
from golem.workflow import present, runs
from golem.workflow.checkout import driver_commands
from golem.workflow.patch import base_commit, diffstat, file_diffs
from golem.workflow.setup import Options, Setup
from golem.workflow.verifier import agent_scratch, grade, known, rebuild, run_baseline
from golem.workflow.verifier.grade import Verdict
from golem.workflow.verifier.protect import Facts, doctest_changes, import_roots
from golem.workflow.verifier.snapshot import (Changes, Snapshot, bytecode, compare,
                                              fingerprint, manifest, manifest_changes,
                                              planted_bytecode)
from golem.workflow.verifier.suite import SuiteResult

# report fields the `verdict` trace event carries beside the grading itself
VERDICT_EXTRAS = ("protected_changes", "claimed", "changed_files", "suspicious", "flaky",
                  "verified_in", "new_tests", "new_test_results", "sealed")


UNSEALED = ("this verdict is not sealed: without bubblewrap the model's commands ran as you, "
            "and could have changed what golem relies on outside the workspace (the "
            "interpreter, site-packages); see docs/security.md")


def _tail(text: str, lines: int = 40, chars: int = 4000) -> str:
    tail = "\n".join(text.rstrip().splitlines()[-lines:])
    return tail[-chars:]


def base_report(setup: Setup, before: SuiteResult) -> dict:
    """The fields of the result that exist however the run ends."""
    return {"verdict": None, "stop": None, "steps": 0, "tool_calls": 0,
            "tokens": {"prompt": 0, "completion": 0, "cached": 0, "total": 0}, "cost": 0.0,
            "elapsed_s": 0.0, "changed_files": [], "protected_changes": [],
            "new_tests": [], "new_test_results": {}, "tests": {"before": before.to_json(),
                                                               "after": None},
            "fixed": [], "still_failing": before.failing, "newly_failing": [], "missing": [],
            "ran_changed_code": [], "failing_before_untouched": [], "known_failing": [],
            "claimed": "", "suspicious": [], "trace": setup.options.trace,
            "test_command": setup.command.text, "evidence": before.evidence,
            "run_id": None, "patch": None, "error": None, "flaky": [], "verified_in": None,
            "sealed": setup.sealed, "base": base_commit(setup.workspace.root)}


def reserve_for_verification(options: Options, before: SuiteResult) -> float:
    """Seconds of -wall kept back from the agent for the verification: twice the baseline's
    run time plus ten seconds, at most half the wall."""
    if options.budget.wall <= 0:
        return 0.0
    return min(options.budget.wall / 2, 2 * before.elapsed + 10.0)


def check_time_for_model(options: Options, before: SuiteResult) -> None:
    """A -wall the baseline and the verification's reserve use up leaves the model nothing:
    a usage error now, before a run that could only end in a misleading verdict."""
    wall = options.budget.wall
    if wall <= 0:
        return
    reserve = reserve_for_verification(options, before)
    left = wall - reserve - options.budget.elapsed()
    if left < 1.0:      # not even a second for the snapshot and one model call
        needed = options.budget.elapsed() + 2 * before.elapsed + 10.0 + 30.0
        raise UsageError(f"-wall {_seconds(wall)} leaves no time for the model: the baseline "
                         f"took {before.elapsed:.1f}s and {reserve:.1f}s are kept for the "
                         f"verification; give -wall {_seconds(needed)} or more")


def _seconds(value: float) -> str:
    return f"{value:.0f}s" if value >= 10 else f"{value:g}s"


def unittest_dirs(argv: list[str]) -> set[str]:
    """The start and top-level directories a `python -m unittest discover` names."""
    found = set()
    for flag, value in zip(argv, argv[1:]):
        if flag in ("-s", "--start-directory", "-t", "--top-level-directory"):
            found.add(os.path.normpath(value).strip("./") if value not in (".", "./") else "")
    return found


def facts_for(setup: Setup, baseline, snap: Snapshot, changes, trees_changed,
              original=None, where: str | None = None) -> Facts:
    """What protects the tests, from the baseline and the snapshot; `original(rel)` gives a
    file's content before the change (default: the snapshot's kept copy), and `where` is
    the tree holding the changes (default: the workspace)."""
    before = set(snap.entries)
    interp = baseline.plan.interpreter
    facts = Facts(test_argv=setup.command.argv, test_files=baseline.test_files, before=before,
                  trees_changed=trees_changed,
                  allow_change=tuple(setup.options.allow_change),
                  known_failing=tuple(setup.options.known_failing))
    if interp is not None and interp.names:
        facts.outside_names = interp.names
        facts.suffixes = interp.suffixes
    facts.read_by_tests(baseline.result.reads)
    facts.plugins = set(baseline.result.plugins)
    facts.loaded_by_tests(baseline.result.modules, baseline.result.origins, baseline.cwd)
    facts.drivers = driver_commands(setup.workspace.root)
    root = where or setup.workspace.root
    facts.doctests = doctest_changes(
        changes, baseline.result.tests or {}, baseline.result.files,
        original or (lambda rel: _original(snap, rel)),
        lambda rel: (tree.read_file(root, rel, 16_000_000) or (None,))[0])
    added_tests = {p for p in changes.added if p.endswith(".py")}
    facts.import_roots = import_roots(facts.test_files | added_tests, before | set(changes.added),
                                      unittest_dirs(setup.command.argv))
    return facts


def fix(options: Options, provider: Provider, trace: Trace, model: str,
        secrets: list[str]) -> dict:
    """Run `golem fix` and return its result (the `-json` object, plus `exit_code`)."""
    with Setup(options, trace) as setup:
        root = setup.workspace.root
        patch_path = resolved(options.patch)
        trace.emit("phase", name="baseline")
        baseline = run_baseline(setup.verifier, setup.command, root,
                                cache=lambda interp: runs.cache_for(interp, root))
        setup.keep(baseline.phase)
        trace.emit("phase", name="preflight")
        preflight.wait(provider, options.budget.deadline)   # a rejected key: exit 2, now
        before = baseline.result
        report = base_report(setup, before)
        green = known.green_before(before, options.known_failing)
        if green is not None:
            summary = (f"ALREADY_GREEN: the suite passes before any change{green}; no model "
                       "was called")
            trace.emit("verdict", verdict="ALREADY_GREEN", summary=summary)
            return {**report, "verdict": "ALREADY_GREEN", "summary": summary, "exit_code": 0}

        check_time_for_model(options, before)
        trace.emit("phase", name="snapshot")
        run_id, run_dir = runs.new_run(root)
        snap = Snapshot.take(root, run_dir, runs.store_dir())
        runs.record_root(run_dir, snap.root_id)
        compiled = bytecode(root, snap.deps)
        layout = rebuild.Layout.of(root, snap.deps)     # how every copy of it is made
        phase, env, wrap = agent_scratch(setup.verifier, baseline, root,
                                         read_only=layout.outside)
        setup.keep(phase)
        registry = default_registry(setup.context(env, wrap), secrets)
        task = prompts.fix_task(setup.command.text,
                                known.to_fix(before.failing, options.known_failing),
                                _tail(before.output))
        reserve = reserve_for_verification(options, before)
        budget = dataclasses.replace(options.budget, wall=options.budget.wall - reserve) \
            if reserve else options.budget
        if reserve:
            trace.emit("note", message=f"-wall {duration(options.budget.wall)}: "
                       f"{reserve:.1f}s of it kept for the verification (twice the "
                       f"baseline's {before.elapsed:.1f}s plus 10s, at most half)",
                       reserve_s=round(reserve, 3))
        try:
            outcome = agent.run(provider, registry, model=model, system=prompts.FIX, task=task,
                                budget=budget, trace=trace,
                                max_tokens=options.provider.max_tokens, window=options.window,
                                context=options.context)
        finally:
            # every process of the agent's phase is gone before anything is read back
            process.reap_strays()
            phase.close()

        usage = outcome.usage
        report.update(stop=outcome.stop, steps=outcome.steps, tool_calls=outcome.tool_calls,
                      tokens=usage.to_json(),
                      cost=round(usage.cost or 0.0, 6), elapsed_s=round(outcome.elapsed, 3),
                      claimed=outcome.claimed, error=outcome.error,
                      run_id=run_id if options.undo_hint else None)   # a copy about to go
        try:
            after_files = fingerprint(root, deps=snap.deps)
            planted = planted_bytecode(compiled, bytecode(root, snap.deps))
        except tree.TreeError as exc:
            runs.finish_run(run_dir, None, None)
            summary = f"FAILED: the run left a tree golem cannot walk: {exc}"
            verdict = Verdict("FAILED", summary)
            report.update(exit_code=verdict.exit_code, **verdict.fields())
            trace.emit("verdict", **verdict.fields())
            return report
        changes = compare(snap.entries, after_files.entries).without(_own_files(root, options))
        changes = Changes(sorted({*changes.added, *planted.added}),
                          sorted({*changes.modified, *planted.modified}), changes.removed)
        runs.finish_run(run_dir, changes, {**after_files.entries,
                                           **runs.entries_now(root, planted.all)})
        if changes.all and options.undo_hint:
            trace.emit("note", message=f"run {run_id} changed {len(changes.all)} file(s); "
                       f"`golem undo {run_id}` puts them back", run_id=run_id)
        if outcome.stop == "interrupted":
            raise interrupted(outcome.interrupt, report)    # the CLI prints it with -json
        trees_changed = manifest_changes(snap.manifest, manifest(root, snap.deps))
        facts = facts_for(setup, baseline, snap, changes, trees_changed)
        trace.emit("phase", name="verification")
        grading = grade(setup.verifier, baseline, root, changes, facts,
                        lambda target, exclude: rebuild.from_snapshot(
                            snap, root, target, changes, exclude, layout),
                        lambda rel: _original(snap, rel), strict=options.strict,
                        repeats=options.repeat)
        for name in known.unmatched(options.known_failing, before, grading.after):
            trace.emit("note", message=f"-known-failing {name}: no test of the baseline or "
                       "the verification has that id or lies below it")
        verdict = grading.verdict
        if outcome.stop == "declined" and verdict.name == "FAILED":
            # a clean exit for a task that cannot be done honestly: say so beside the evidence
            verdict.summary += ("; the model declined, saying the task cannot be done without "
                                "changing the tests")
        stops.explain(verdict, outcome)     # a provider error or a refusal, named
        protected = grading.protected
        report.update(changed_files=changes.all, new_tests=grading.new_tests,
                      new_test_results=grading.new_results,
                      protected_changes=[{"path": p, "reason": r} for p, r in protected],
                      suspicious=grading.findings, flaky=grading.flaky,
                      verified_in="copy" if grading.after is not None else None,
                      exit_code=verdict.exit_code, **verdict.fields())
        report["tests"]["after"] = grading.after.to_json() if grading.after else None
        held = {p for p, _ in protected}
        diffs = file_diffs(root, snap, changes.all)     # each file read once
        report["diffstat"] = diffstat(diffs)
        present.emit_diff(trace, diffs, held)
        present.emit_outcomes(trace, before, grading.after)
        if options.patch:
            write_output(root, patch_path,
                         "".join(d for p, d in diffs.items() if p not in held))
            report["patch"] = options.patch
        if not setup.sealed:
            trace.emit("note", message=UNSEALED)
        trace.emit("verdict", **verdict.fields(), **{key: report[key] for key in VERDICT_EXTRAS})
        return report


def write_output(root: str, path: str, text: str) -> None:
    """Write one of golem's output files atomically, never through a link; inside the
    workspace, through the same no-link walk as every write golem makes there."""
    full = os.path.abspath(path)
    if full.startswith(root + os.sep):
        rel = os.path.relpath(full, root).replace(os.sep, "/")
        with tree.Writer(root) as writer:
            writer.write(rel, text.encode("utf-8", errors="surrogateescape"), 0o644)
        return
    tree.write_output(full, text)


def resolved(path: str | None) -> str | None:
    """`path` with its directory resolved now, before the model runs: where it leads is
    decided by the tree as the user gave it, not as the run left it."""
    if not path:
        return None
    full = os.path.abspath(path)
    return os.path.join(os.path.realpath(os.path.dirname(full)), os.path.basename(full))


def _original(snap: Snapshot, rel: str) -> bytes | None:
    try:
        return snap.original(rel)
    except OSError:
        return None     # a damaged kept copy: the scan treats the file as new


def _own_files(root: str, options: Options) -> set[str]:
    """golem's own output files (trace, patch, recording) that live inside the workspace."""
    own = set()
    for path in (options.trace, options.patch, options.provider.record):
        if path:
            rel = os.path.relpath(os.path.realpath(path), root)
            if not rel.startswith(".."):
                own.add(rel.replace(os.sep, "/"))
    return own
