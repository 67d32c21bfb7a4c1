"""`golem fix -attempts N`: several independent attempts, one verified winner.

After one baseline and one snapshot, each attempt gets a private copy of the workspace built
from the snapshot, an agent scratch and a sandbox of its own (the real workspace is hidden
from it; the dependency trees are bound read-only), and its own conversation, in a thread of
its own (`-jobs` at once). `-steps` and `-tokens` hold per attempt; `-cost` and `-wall` for
the whole command. Each attempt is graded through the sealed verifier, in a fresh copy of
its own. The choice is stated and reproducible:

    VERIFIED with no suspicious finding, then VERIFIED with advisory findings (never under
    -strict, where a finding is REJECTED); never FAILED or REJECTED. Ties go to the smallest
    change (lines added plus removed), then the lower cost, then the lower attempt number.

Only the winner is applied to the workspace, through the same confined writes golem uses
everywhere (golem/tools/tree.py), after checking the workspace is still as the snapshot
has it; it is undoable like any fix. With no winner the workspace is left as it was, every
attempt's patch is kept in the run directory, and the verdict names the attempt that came
closest (most tests fixed, none newly failing). `-first` stops the others (their model calls,
their commands, their verification) as soon as one attempt is VERIFIED.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import threading
from dataclasses import dataclass, field
from secrets import randbelow
from typing import Any, Callable

from golem import agent
from golem.core import cancel
from golem.agent import prompts, stops
from golem.core.errors import UsageError, interrupted
from golem.llm import Provider
from golem.llm.types import Usage
from golem.tools import default_registry, process, tree
from golem.tools.workspace import Workspace
from golem.trace import Trace
from golem.workflow import present, runs
from golem.workflow.fix import (UNSEALED, VERDICT_EXTRAS, _own_files, _tail, base_report,
                                facts_for, reserve_for_verification, resolved, write_output)
from golem.workflow.patch import diffstat, file_diffs
from golem.workflow.pool import Pool, SharedBudget
from golem.workflow.setup import Options, Setup
from golem.workflow.verifier import agent_scratch, grade, known, rebuild, run_baseline
from golem.workflow.verifier.grade import Verdict
from golem.workflow.verifier.scratch import Phase
from golem.workflow.verifier.snapshot import (Changes, Entry, Snapshot, _large, compare,
                                              fingerprint, manifest, manifest_changes)


@dataclass
class Spec:
    """What one attempt runs with."""

    index: int              # 1-based
    model: str
    provider: Provider
    seed: int | None = None  # the sampling seed its requests carry, where the provider takes one


@dataclass
class Attempt:
    """One attempt, as it ended."""

    spec: Spec
    verdict: Verdict | None = None
    outcome: Any = None
    grading: Any = None
    changes: Changes | None = None
    diffs: dict[str, str] = field(default_factory=dict)
    patch: str | None = None
    root: str | None = None
    error: str | None = None
    after: dict[str, Entry] = field(default_factory=dict)
    held: dict[str, str] = field(default_factory=dict)     # diffs of the protected changes
    patch_text: str = ""    # what `patch` holds, for the trace (the run's record keeps it)

    @property
    def lines(self) -> int:
        """Lines added plus removed by all its changes, protected ones included (a
        REJECTED attempt changed lines too)."""
        return sum(a + r for a, r in diffstat({**self.diffs, **self.held}).values())

    @property
    def cost(self) -> float:
        return (self.outcome.usage.cost or 0.0) if self.outcome else 0.0

    def rank(self) -> tuple | None:
        """The order of preference among verified attempts (lower first), or None."""
        if self.verdict is None or self.verdict.name != "VERIFIED":
            return None
        findings = self.grading.findings if self.grading else []
        return (1 if findings else 0, self.lines, self.cost, self.spec.index)

    def closeness(self) -> tuple:
        """How near an unverified attempt came: not rejected, most fixed, fewest broken."""
        v = self.verdict
        if v is None:
            return (0, 0, 0, -self.spec.index)
        return (v.name != "REJECTED", len(v.fixed) if not v.newly_failing else -1,
                -len(v.newly_failing), -self.spec.index)

    def to_json(self) -> dict:
        usage = self.outcome.usage if self.outcome else Usage()
        grading = self.grading
        return {"attempt": self.spec.index, "model": self.spec.model, "seed": self.spec.seed,
                "stop": self.outcome.stop if self.outcome else None,
                "verdict": self.verdict.name if self.verdict else None,
                "summary": self.verdict.summary if self.verdict else self.error,
                "steps": self.outcome.steps if self.outcome else 0,
                "tokens": usage.to_json(), "cost": round(usage.cost or 0.0, 6),
                "diffstat": diffstat(self.diffs), "lines_changed": self.lines,
                "suspicious": grading.findings if grading else [],
                "protected_changes": [{"path": p, "reason": r}
                                      for p, r in (grading.protected if grading else [])],
                "fixed": self.verdict.fixed if self.verdict else [],
                "patch": self.patch, "error": self.error}


def choose(attempts: list[Attempt]) -> Attempt | None:
    """The winner by the stated order, or None when no attempt is VERIFIED."""
    ranked = [(a.rank(), a) for a in attempts if a.rank() is not None]
    return min(ranked, key=lambda pair: pair[0])[1] if ranked else None


def closest(attempts: list[Attempt]) -> Attempt | None:
    return max(attempts, key=lambda a: a.closeness()) if attempts else None


def _private_snapshot(snap: Snapshot, root: str,
                      layout: rebuild.Layout | None = None) -> Snapshot:
    """The snapshot as seen from a private copy: a file too large to keep is fingerprinted
    by its metadata, which differs in the copy, so those entries are taken from the copy;
    what the layout writes (a worktree's `.git` file) is not the tree's and is left out."""
    entries = {p: e for p, e in snap.entries.items() if not (layout and layout.foreign(p))}
    for rel, entry in list(entries.items()):
        if entry.sha.startswith("large:"):
            info = os.lstat(os.path.join(root, *rel.split("/")))
            entries[rel] = Entry(_large(info), entry.mode, entry.size, False)
    return Snapshot(snap.directory, entries, snap.dirs, snap.deps, snap.manifest,
                    snap.root_id)


def apply_to_workspace(root: str, source: str, snap: Snapshot, changes: Changes,
                       exclude: set[str], verified: dict[str, Entry],
                       layout: rebuild.Layout | None = None,
                       ignore: set[str] = frozenset()) -> Changes:
    """Make the workspace at `root` hold what `source` holds at the changed paths (but the
    `exclude`d and compiled ones), through no-follow writes, after checking that the whole
    workspace is still as the snapshot has it (files, dependency trees, git's refs; the
    paths in `ignore` are golem's own output) and the whole of `source` still as it was
    graded (`verified`, its fingerprint then). Returns the changes applied."""
    layout = layout or rebuild.Layout.of(root, snap.deps)
    now = fingerprint(root, deps=snap.deps).entries
    moved = [p for p in compare(snap.entries, now).all if p not in ignore]
    if not moved and snap.manifest:
        moved = list(manifest_changes(snap.manifest, manifest(root, snap.deps)))
    if moved:
        raise UsageError(f"the workspace changed during the attempts ({moved[0]}); the "
                         "winner was not applied (its patch is in the run directory)")
    # what is applied must be what was verified: the source as it was when it was graded
    held = _own(fingerprint(source, deps=layout.trees).entries, layout)
    moved = compare(_own(verified, layout), held).all
    if moved:
        raise UsageError(f"the verified copy changed after its verification ({moved[0]}); "
                         "nothing was applied")
    skip = exclude | {p for p in changes.all if rebuild.compiled(p) or layout.foreign(p)}
    target = rebuild.Copy(root, os.path.realpath(source))
    with tree.Writer(root) as writer:
        for rel in sorted(set(changes.all) - skip):
            rebuild._take_over(target, writer, rel)
    keep = lambda names: [n for n in names if n not in skip]
    return Changes(keep(changes.added), keep(changes.modified), keep(changes.removed))


def _own(entries: dict[str, Entry], layout: rebuild.Layout) -> dict[str, Entry]:
    """A copy's fingerprint without what the layout put there (links to the trees, the
    `.git` file)."""
    return {p: e for p, e in entries.items()
            if not layout.foreign(p) and p.split("/", 1)[0] not in layout.managed}


class Runner:
    """Everything the attempts share: the setup, the baseline, the snapshot, the layout of
    every copy, the budgets, and the bound on verifications at once (the cores)."""

    def __init__(self, setup: Setup, baseline, snap: Snapshot, run_dir: str, options: Options,
                 trace: Trace, secrets: list[str], layout: rebuild.Layout):
        self.setup, self.baseline, self.snap, self.run_dir = setup, baseline, snap, run_dir
        self.options, self.trace, self.secrets, self.layout = options, trace, secrets, layout
        self.pool = Pool(options.budget.cost)
        self.grading = threading.BoundedSemaphore(max(1, os.cpu_count() or 1))
        self.started: dict[int, Attempt] = {}      # every attempt begun, for an interrupt
        reserve = reserve_for_verification(options, baseline.result)
        self.wall = options.budget.wall - reserve if reserve else options.budget.wall
        self.task = prompts.fix_task(setup.command.text,
                                     known.to_fix(baseline.result.failing,
                                                  options.known_failing),
                                     _tail(baseline.result.output))

    def run(self, spec: Spec, stopper: cancel.Cancel) -> Attempt:
        """One attempt from start to verdict, in the calling thread."""
        attempt = self.started.setdefault(spec.index, Attempt(spec))
        trace = self.trace.tagged(spec.index)
        env = dataclasses.replace(self.setup.verifier, trace=trace)
        root_ws = self.setup.workspace.root
        # kept until the command ends: the winner is applied from it
        home = self.setup.keep(Phase(f"attempt{spec.index}"))
        with cancel.scope(stopper):
            copy = rebuild.from_snapshot(self.snap, root_ws,
                                         os.path.join(home.root, os.path.basename(root_ws)),
                                         Changes([], [], []), set(), self.layout)
            attempt.root = copy.root
            if copy.problems:
                attempt.error = "the private copy is incomplete: " + "; ".join(copy.problems[:2])
                trace.emit("attempt", model=spec.model, summary=attempt.error, verdict=None)
                return attempt
            snap = _private_snapshot(self.snap, copy.root, self.layout)
            phase, cmd_env, wrap = agent_scratch(env, self.baseline, copy.root,
                                                 read_only=self.layout.read_only,
                                                 hidden=(root_ws,))
            opts = self.options
            budget = SharedBudget(steps=opts.budget.steps, tokens=opts.budget.tokens,
                                  wall=self.wall, cost=0.0, started=opts.budget.started,
                                  pool=self.pool)
            try:
                context = self.setup.context(cmd_env, wrap)
                context.workspace = Workspace(copy.root)
                registry = default_registry(context, self.secrets)
                outcome = agent.run(spec.provider, registry, model=spec.model,
                                    system=prompts.FIX, task=self.task, budget=budget,
                                    trace=trace, max_tokens=opts.provider.max_tokens,
                                    window=opts.window, context=opts.context)
                attempt.outcome = outcome
                budget.settle(outcome.usage)
            finally:
                if budget._held is not None:        # a call that never came back
                    self.pool.release(budget._held, 0.0)
                process.reap_strays()
                phase.close()
            if outcome.stop not in ("interrupted", "cancelled"):
                with self.grading:
                    self._grade(attempt, copy.root, snap, env)
        summary = attempt.verdict.summary if attempt.verdict else \
            (attempt.error or f"no verdict: stop={outcome.stop}")
        # the patch goes in the trace too: the report links it there, where it outlives
        # the run's directory (pruned, or a demo's, removed at once)
        trace.emit("attempt", model=spec.model, summary=f"attempt {spec.index} ({spec.model}): "
                   f"{summary}", verdict=attempt.verdict.name if attempt.verdict else None,
                   patch=attempt.patch, patch_text=attempt.patch_text[:present.MAX_DIFF],
                   patch_truncated=len(attempt.patch_text) > present.MAX_DIFF)
        return attempt

    def _grade(self, attempt: Attempt, root: str, snap: Snapshot, env) -> None:
        checked = check_copy(self.setup, self.baseline, self.snap, snap, root, env,
                             self.layout, self.options)
        attempt.verdict, attempt.grading = checked.verdict, checked.grading
        attempt.changes, attempt.diffs = checked.changes, checked.diffs
        attempt.after, attempt.held = checked.after, checked.held
        if checked.grading is None:
            return
        stops.explain(attempt.verdict, attempt.outcome)
        patch = os.path.join(self.run_dir, f"attempt-{attempt.spec.index}.patch")
        reasons = dict(checked.grading.protected)
        marked = "".join(f"# golem: protected change, never applied: {rel} ({reasons[rel]})\n"
                         + diff for rel, diff in checked.held.items())
        attempt.patch_text = "".join(attempt.diffs.values()) + marked
        tree.write_output(patch, attempt.patch_text)
        attempt.patch = patch


@dataclass
class Checked:
    """A private copy, graded: the verdict, and the changes and their diffs (the allowed
    ones: what applying it would write; `held`, the protected ones, kept for reading)."""

    verdict: Verdict
    grading: Any = None
    changes: Changes | None = None
    diffs: dict[str, str] = field(default_factory=dict)
    after: dict[str, Entry] = field(default_factory=dict)     # the copy's fingerprint, graded
    held: dict[str, str] = field(default_factory=dict)


def check_copy(setup: Setup, baseline, master: Snapshot, snap: Snapshot, root: str, env,
               layout: rebuild.Layout | list[str], options: Options) -> Checked:
    """Grade the private copy at `root` (whose own view of the snapshot is `snap`) through
    the sealed verifier, in a fresh copy of its own made as `layout` says (the trees linked
    from the real workspace, never through the copy's links), as `fix` grades the
    workspace."""
    if not isinstance(layout, rebuild.Layout):
        layout = rebuild.Layout.of(setup.workspace.root, master.deps)
    try:
        after = _own(fingerprint(root, deps=layout.trees).entries, layout)
    except tree.TreeError as exc:
        return Checked(Verdict("FAILED", f"FAILED: the copy holds a tree golem cannot "
                               f"walk: {exc}"))
    changes = compare(_own(snap.entries, layout), after)
    trees = manifest_changes(master.manifest, manifest(setup.workspace.root, master.deps))
    facts = facts_for(setup, baseline, snap, changes, trees, where=root)
    grading = grade(env, baseline, root, changes, facts,
                    lambda target, exclude: rebuild.from_snapshot(
                        snap, root, target, changes, exclude, layout),
                    lambda rel: _original(master, rel), strict=options.strict,
                    repeats=options.repeat)
    held = {p for p, _ in grading.protected}
    every = file_diffs(root, snap, changes.all)
    diffs = {p: d for p, d in every.items() if p not in held}
    return Checked(grading.verdict, grading, changes, diffs, after,
                   {p: d for p, d in every.items() if p in held})


def _original(snap: Snapshot, rel: str) -> bytes | None:
    try:
        return snap.original(rel)
    except OSError:
        return None


def run_attempts(runner: Runner, specs: list[Spec], jobs: int, first: bool) -> list[Attempt]:
    """Run the attempts, `jobs` at a time; with `first`, stop the others once one is
    VERIFIED. A Ctrl-C (or SIGTERM) stops them all, then goes on up."""
    stoppers = {spec.index: cancel.Cancel() for spec in specs}
    won = threading.Event()
    done: list[Attempt] = []

    def one(spec: Spec) -> Attempt:
        if won.is_set():
            return Attempt(spec, error="not started: another attempt was verified first")
        attempt = runner.run(spec, stoppers[spec.index])
        if first and attempt.verdict is not None and attempt.verdict.name == "VERIFIED":
            won.set()
            for index, stopper in stoppers.items():
                if index != spec.index:
                    stopper.set()
        return attempt

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(jobs, len(specs))),
                                                 thread_name_prefix="golem-attempt")
    futures = [pool.submit(one, spec) for spec in specs]
    try:
        for future, spec in zip(futures, specs):
            try:
                done.append(future.result())
            except Exception as exc:     # a bug in one attempt must not end the others
                done.append(Attempt(spec, error=f"{type(exc).__name__}: {exc}"))
    except BaseException:
        for stopper in stoppers.values():
            stopper.set()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return done


def so_far(runner: Runner, specs: list[Spec]) -> list[Attempt]:
    """Every attempt as far as it got (after an interrupt: steps, tokens, cost so far)."""
    return [runner.started.get(spec.index) or Attempt(spec, error="not started")
            for spec in specs]


def totals(report: dict, attempts: list[Attempt]) -> None:
    """The attempts, and their steps, tool calls, tokens and cost summed, into `report`."""
    report["attempts"] = [a.to_json() for a in attempts]
    usage = Usage()
    for a in attempts:
        if a.outcome:
            usage += a.outcome.usage
    report.update(steps=sum(a.outcome.steps for a in attempts if a.outcome),
                  tool_calls=sum(a.outcome.tool_calls for a in attempts if a.outcome),
                  tokens=usage.to_json(), cost=round(usage.cost or 0.0, 6))


def fix_attempts(options: Options, specs: list[Spec], trace: Trace, secrets: list[str], *,
                 jobs: int, first: bool = False) -> dict:
    """`golem fix -attempts N` (see the module docstring); returns the `-json` object with
    `exit_code`, `attempts` and `chosen`."""
    with Setup(options, trace) as setup:
        root = setup.workspace.root
        patch_path = resolved(options.patch)
        trace.emit("phase", name="baseline")
        baseline = run_baseline(setup.verifier, setup.command, root,
                                cache=lambda interp: runs.cache_for(interp, root))
        setup.keep(baseline.phase)
        trace.emit("phase", name="preflight")
        for spec in specs:
            preflight_wait(spec.provider, options.budget.deadline)
        report = base_report(setup, baseline.result)
        report.update(attempts=[], chosen=None)
        green = known.green_before(baseline.result, options.known_failing)
        if green is not None:
            summary = (f"ALREADY_GREEN: the suite passes before any change{green}; no model "
                       "was called")
            trace.emit("verdict", verdict="ALREADY_GREEN", summary=summary)
            return {**report, "verdict": "ALREADY_GREEN", "summary": summary, "exit_code": 0}
        trace.emit("phase", name="snapshot")
        run_id, run_dir = runs.new_run(root)
        snap = Snapshot.take(root, run_dir)
        runs.record_root(run_dir, snap.root_id)
        report["run_id"] = run_id
        layout = rebuild.Layout.of(root, snap.deps)
        runner = Runner(setup, baseline, snap, run_dir, options, trace, secrets, layout)
        if not setup.sealed and jobs > 1 and len(specs) > 1:
            # unconfined commands could write another attempt's copy: one at a time
            jobs = 1
            trace.emit("note", message=SEQUENTIAL)
        jobs = min(jobs, len(specs))
        trace.emit("note", message=f"{len(specs)} attempts, {jobs} at a time"
                   + (", stopping at the first verified" if first else ""),
                   attempts=len(specs), jobs=jobs, first=first,
                   seeds=[spec.seed for spec in specs])
        try:
            attempts = run_attempts(runner, specs, jobs, first)
        except KeyboardInterrupt as exc:
            runs.finish_run(run_dir, Changes([], [], []), {})
            totals(report, so_far(runner, specs))
            report.update(stop="interrupted",
                          elapsed_s=round(options.budget.elapsed(), 3))
            raise interrupted(exc, report) from None
        return _conclude(report, attempts, runner, patch_path)


SEQUENTIAL = ("-sandbox none: the attempts run one at a time, since without bubblewrap one "
              "attempt's commands could write another's copy; see docs/security.md")


def preflight_wait(provider: Provider, deadline: float | None) -> None:
    from golem.llm import preflight
    preflight.wait(provider, deadline)


def _conclude(report: dict, attempts: list[Attempt], runner: Runner,
              patch_path: str | None) -> dict:
    setup, trace, options = runner.setup, runner.trace, runner.options
    root = setup.workspace.root
    totals(report, attempts)
    winner = choose(attempts)
    pick = winner or closest([a for a in attempts if a.verdict is not None])
    if pick is None:
        verdict = Verdict("FAILED", "FAILED: no attempt got as far as a verdict: "
                          + "; ".join(a.error or "" for a in attempts if a.error)[:300])
        report.update(stop=_stop(attempts), exit_code=verdict.exit_code, **verdict.fields())
        runs.finish_run(runner.run_dir, Changes([], [], []), {})
        trace.emit("verdict", **verdict.fields(), attempts=report["attempts"], chosen=None)
        return report
    verdict = pick.verdict
    grading = pick.grading
    report.update(stop=pick.outcome.stop if pick.outcome else None,
                  claimed=pick.outcome.claimed if pick.outcome else "",
                  error=pick.outcome.error if pick.outcome else None,
                  elapsed_s=round(runner.options.budget.elapsed(), 3),
                  new_tests=grading.new_tests, new_test_results=grading.new_results,
                  protected_changes=[{"path": p, "reason": r} for p, r in grading.protected],
                  suspicious=grading.findings, flaky=grading.flaky,
                  verified_in="copy" if grading.after is not None else None,
                  diffstat=diffstat(pick.diffs))
    report["tests"]["after"] = grading.after.to_json() if grading.after else None
    if winner is not None:
        try:
            applied = apply_to_workspace(root, winner.root, runner.snap, winner.changes,
                                         {p for p, _ in grading.protected}, winner.after,
                                         runner.layout, _own_files(root, options))
        except UsageError as exc:
            applied = Changes([], [], [])
            verdict = Verdict("FAILED", f"FAILED: {exc}")
        after = fingerprint(root, deps=runner.snap.deps).entries
        runs.finish_run(runner.run_dir, applied, after)
        report["changed_files"] = applied.all
        report["chosen"] = winner.spec.index if applied.all or not winner.changes.all else None
        if verdict.name == "VERIFIED":
            verdict = dataclasses.replace(verdict, summary=verdict.summary + (
                f" (attempt {winner.spec.index} of {len(attempts)}, {winner.spec.model}, "
                f"chosen)"))
            if applied.all and options.undo_hint:
                trace.emit("note", message=f"attempt {winner.spec.index} applied: "
                           f"`golem undo {report['run_id']}` puts the workspace back")
        if options.patch:
            write_output(root, patch_path, "".join(winner.diffs.values()))
            report["patch"] = options.patch
    else:
        runs.finish_run(runner.run_dir, Changes([], [], []), {})
        name = verdict.name
        verdict = dataclasses.replace(
            verdict, summary=f"{name}: no attempt was verified ({len(attempts)} attempts; "
                             f"patches kept in {runner.run_dir}); closest, attempt "
                             f"{pick.spec.index} ({pick.spec.model}): "
                             f"{verdict.summary.split(': ', 1)[-1]}")
        report["changed_files"] = []
    report.update(exit_code=verdict.exit_code, **verdict.fields())
    present.emit_diff(trace, pick.diffs)
    present.emit_outcomes(trace, runner.baseline.result, grading.after)
    if not setup.sealed:
        trace.emit("note", message=UNSEALED)
    extras = {key: report.get(key) for key in VERDICT_EXTRAS}
    extras["sealed"] = setup.sealed
    trace.emit("verdict", **verdict.fields(), **extras, attempts=report["attempts"],
               chosen=report["chosen"])
    return report


def _stop(attempts: list[Attempt]) -> str | None:
    stops_ = {a.outcome.stop for a in attempts if a.outcome}
    return stops_.pop() if len(stops_) == 1 else None


def parse_models(text: str, providers: list[str]) -> list[tuple[str | None, str]]:
    """`-models A,B,...` as (provider or None, model): a `PROVIDER:` prefix counts only when
    PROVIDER is a provider's name, so ids such as `vendor/model:free` stay whole."""
    found = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        head, sep, tail = item.partition(":")
        if sep and head in providers and tail:
            found.append((head, tail))
        else:
            found.append((None, item))
    if not found:
        raise UsageError("-models is empty; give model ids separated by commas")
    return found


def seed_base() -> int:
    """A fresh base for the attempts' seeds (attempt K sends base + K): a re-run, or another
    job of a matrix, draws new samples from a provider that honours seeds."""
    return randbelow(1 << 30)


def make_specs(models: list[tuple[str | None, str]], count: int,
               factory: Callable[[str | None, str, int], Provider]) -> list[Spec]:
    """`count` attempts over `models`, round robin; `factory(provider, model, index)` builds
    each attempt's own provider."""
    specs = []
    for index in range(1, count + 1):
        provider, model = models[(index - 1) % len(models)]
        specs.append(Spec(index, model, factory(provider, model, index)))
    return specs
