"""golem's verifier: what golem believes about a run, from its own evidence only.

What it trusts: golem itself, the test interpreter and the programs on PATH as the baseline
found them, and the workspace as it was before the run (the baseline run and the snapshot).
What it does not trust: the model, and everything a command of the agent's phase wrote,
anywhere it could write: the workspace, the agent's scratch, the dependency trees.

The entry points, in the order a fix uses them:

    run_baseline(...)   the suite before the run, in a scratch of its own (scratch.py); pins
                        the interpreter, the pytest configuration and the bytecode master
                        (suite.Plan), and refuses a baseline without evidence (UsageError)
    Snapshot.take(...)  every file before the run (snapshot.py)
    agent_scratch(...)  the only scratch the model's commands may write
    grade(...)          protected changes (protect.py) and the scan (scan.py); then, in a
                        scratch made after the agent's processes are gone, the copy
                        (rebuild.py) graded test by test (grade.py), the new tests in a pass
                        of their own, and -repeat (repeat.py); a graded run that changed
                        what golem put in its copy is not evidence (placed.py), unless the
                        baseline's own run changed that path too

docs/verification.md and docs/security.md say which mechanism enforces each boundary.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, TypeVar

from golem.core import cancel
from golem.core.errors import Cancelled, OutOfTime, UsageError
from golem.tools import sandbox, tree
from golem.trace import Trace
from golem.workflow.verifier import attribute, bytecode, carried, placed, protect, repeat, \
    scan
from golem.workflow.verifier.bytecode import compile_modules, compile_sources, discover, \
    rewrite_tests
from golem.workflow.verifier.grade import (Verdict, advise, judge, judge_new_tests,
                                           mark_flaky)
from golem.workflow.verifier.interpreter import probe
from golem.workflow.verifier.reached import never_reached
from golem.workflow.verifier.rebuild import Copy
from golem.workflow.verifier.scratch import Phase, cache_state
from golem.workflow.verifier.snapshot import Changes, dependency_trees
from golem.workflow.verifier.suite import Plan, SuiteResult, TestCommand, plan_for, run_suite

__all__ = ["Environment", "Baseline", "Grading", "run_baseline", "agent_scratch", "grade"]


@dataclass
class Environment:
    """How golem runs its own test runs: the sandbox mode, the base environment (HOME,
    TMPDIR and the bytecode cache are set per run), the time allowed, and the trace."""

    sandbox: str
    env: dict[str, str]
    trace: Trace
    suite_timeout: float = 1800.0
    deadline: float | None = None       # time.monotonic() instant the whole command ends
    origin: str = ""                    # the real workspace, where editable installs point

    def relocated(self, root: str, *workspaces: str) -> dict[str, str]:
        """The environment of a graded run in `root` standing in for `workspaces` (and the
        real one): path entries and import hooks of editable installs that point into them
        are moved to `root`, and nothing else in them may be read (helpers/relocate.py)."""
        real = os.path.realpath(root)
        tops = sorted({os.path.realpath(w) for w in (self.origin, *workspaces) if w} - {real})
        if not tops:
            return self.env
        keep = [os.path.join(top, name) for top in tops
                for name in (*_trees(top), ".git")]
        return {**self.env, "GOLEM_RELOCATE": json.dumps({"from": tops, "keep": keep})}

    def timeout(self) -> float:
        """Seconds a suite run may take now: the suite timeout, cut to what is left."""
        cancel.check()
        if self.deadline is None:
            return self.suite_timeout
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise OutOfTime("the wall-clock budget is spent")
        return min(self.suite_timeout, left)


@dataclass
class Baseline:
    """The suite before the run, and what golem pinned from it."""

    result: SuiteResult
    plan: Plan
    phase: Phase            # the baseline's scratch; closed by the caller
    trees: list[str]        # the dependency trees of the directory it ran in
    cwd: str
    master: str = ""        # golem's bytecode cache, as the baseline left it ...
    cache: dict[str, str] = field(default_factory=dict)     # ... entry by entry
    rewrites: set[str] = field(default_factory=set)     # what the suite's own run changed
    carried: dict[str, bytes] = field(default_factory=dict)    # test tools' state (carried.py)

    def trusted_master(self) -> str | None:
        """The bytecode cache, if it is still exactly as the baseline left it (where
        commands run unconfined, they could have written it); else None, and it is thrown
        away so no later baseline reads it either."""
        if not self.master:
            return None
        if cache_state(self.master) == self.cache:
            return self.master
        tree.remove_tree(self.master)
        try:
            os.unlink(self.master + ".state")
        except OSError:
            pass
        self.master = ""
        return None

    @property
    def tools(self) -> tuple[str, ...]:
        return self.plan.interpreter.roots if self.plan.interpreter else ()

    @property
    def tag(self) -> str | None:
        """The test interpreter's bytecode tag (`cpython-311`), if it has one."""
        return self.plan.interpreter.cache_tag if self.plan.interpreter else None

    @property
    def test_files(self) -> set[str]:
        return {f for f in self.result.files.values() if f}


def _trees(root: str) -> list[str]:
    try:
        return dependency_trees(root)
    except OSError:
        return []


def _wrap(env: Environment, root: str, writable: tuple[str, ...], read_only=(), hidden=(),
          tools=()):
    wrap, _ = sandbox.wrapper(env.sandbox, root, writable, env.env.get("PATH"),
                              tuple(read_only), tuple(hidden), tuple(tools))
    return wrap


def _given(path: str | None) -> tuple[str, ...]:
    return (path,) if path else ()


def _no_evidence(result: SuiteResult, label: str) -> str | None:
    """Why a baseline cannot be graded against, or None."""
    tail = [line for line in result.output.strip().splitlines() if line.strip()][-1:]
    said = f" (it said: {tail[0][:200]})" if tail else ""
    if not result.started:
        return f"the test command cannot start{said}"
    if result.timed_out:
        return f"the {label} timed out after {result.elapsed:.0f}s, before the suite finished"
    if result.tests is not None and (result.problem or not result.tests):
        return f"the test command gives no evidence: {result.problem or 'no tests ran'}{said}"
    if any(t.startswith("golem: the code under test replaced") for t in result.pseudo):
        return ("the suite itself changes the test runner's machinery ("
                + next(t for t in result.pseudo if t.startswith("golem:"))[len("golem: "):]
                + "): golem cannot tell its results from tampering")
    return None


def _pin_pytest(result: SuiteResult, cwd: str) -> dict:
    """The pytest configuration the baseline used, relative to `cwd`; UsageError when it
    lies outside (golem never reads runner configuration from above the directory)."""
    config = result.config or {}
    pinned = {}
    for key in ("rootdir", "inifile", "confcutdir"):
        value = config.get(key)
        if not value:
            pinned[key] = None
            continue
        real = os.path.realpath(value)
        if real != cwd and not real.startswith(cwd + os.sep):
            raise UsageError(f"pytest takes its {key} from {value}, outside {cwd}: run golem "
                             "with -dir where the configuration is")
        pinned[key] = os.path.relpath(real, cwd)
    if pinned["rootdir"] is None:
        pinned["rootdir"] = "."
    return pinned


def _master(cache: Callable[[str], str] | None, plan: Plan, phase: Phase) -> str:
    """golem's bytecode cache for this interpreter and workspace, checked against what the
    last baseline left (a cache something else wrote since is thrown away and begun again);
    a fresh one in the phase's scratch when there is no persistent place for it."""
    if cache is None or plan.interpreter is None:
        path = os.path.join(phase.root, "pycache")
        os.mkdir(path, 0o700)
        return path
    path = cache(plan.interpreter.executable)
    recorded = _recorded_state(path)
    if recorded is None or cache_state(path) != recorded:
        tree.remove_tree(path)
        os.makedirs(path, mode=0o700)
    return path


def _runner_modules(plan: Plan, cwd: str, env: dict[str, str], wrap,
                    helpers: str) -> list[str]:
    """The sources of the modules the test runner and golem's helpers load, for golem to
    place in its cache (bytecode.discover: the test interpreter says which, golem reads
    them itself)."""
    names = ["unittest"]
    if plan.runner == "pytest":
        names += ["pytest", "_pytest.python", "_pytest.fixtures", "_pytest.assertion.rewrite"]
    names += sorted(n for n in bytecode.imported(helpers)
                    if plan.runner == "pytest" or n.split(".")[0] not in ("pytest", "_pytest"))
    return discover(plan.interpreter.executable, names, cwd, env, wrap)


T = TypeVar("T")


def _meanwhile(action: Callable[[], T]) -> Callable[[], T | None]:
    """Start `action` in a thread of its own (stopped with the attempt, if any); the function
    returned waits for its result: None where it failed."""
    box: list = []
    stopper = cancel.current()

    def body() -> None:
        try:
            with cancel.scope(stopper) if stopper else contextlib.nullcontext():
                box.append(action())
        except Exception:
            box.append(None)

    thread = threading.Thread(target=body, daemon=True)
    thread.start()

    def result() -> T | None:
        thread.join()
        return box[0] if box else None

    return result


def _recorded_state(path: str) -> dict | None:
    data = tree.read_file(os.path.dirname(path), os.path.basename(path) + ".state", 64_000_000)
    try:
        return json.loads(data[0]) if data else None
    except ValueError:
        return None


def run_baseline(env: Environment, command: TestCommand, cwd: str, label: str = "baseline",
                 read_only: tuple[str, ...] = (),
                 cache: Callable[[str], str] | None = None) -> Baseline:
    """Run the suite in `cwd` before anything changes it, and pin how later runs go.
    `read_only` directories (dependency trees linked in from elsewhere) are bound read-only;
    `cache(interpreter)` names golem's persistent bytecode cache for that interpreter."""
    phase = Phase("base")
    try:
        plan = plan_for(command, env.env, cwd)
        trees = dependency_trees(cwd)
        # a cache kept between golem's runs is one anything unconfined could have written:
        # only runs whose commands run unconfined anyway use it; sealed ones make their own
        sealed = _wrap(env, cwd, (phase.root,)) is not None
        master = _master(None if sealed else cache, plan, phase)
        run = phase.run(pycache=master)
        helpers = phase.helpers()
        tools = plan.interpreter.roots if plan.interpreter else ()
        # what may run the workspace's code (the probe, the runner's imports, the suite) is
        # never given golem's cache to write; golem's compiler (`-I -S`) is the only writer
        wrap = _wrap(env, cwd, (run.root,), (helpers, master, *read_only), (), tools)
        warmed = None
        tag = plan.interpreter.cache_tag if plan.interpreter else None
        if plan.interpreter is not None:
            env.trace.emit("note", message=f"test interpreter: {plan.interpreter.describe()}",
                           interpreter=plan.interpreter.executable)
            before = cache_state(master)
            # the runner's modules are listed while the interpreter is probed: two processes
            # that read, at once
            listed = _meanwhile(lambda: _runner_modules(plan, cwd, run.env(env.env), wrap,
                                                        helpers)) \
                if tag is not None and not os.listdir(master) else lambda: []
            # sealed, golem's compiler works meanwhile too, into a directory of its own that
            # no other process may write (commands that run unconfined could write any)
            staged = tempfile.mkdtemp(prefix="compiled-", dir=phase.root) \
                if sealed and tag is not None else None
            compiled = _meanwhile(lambda: compile_sources(
                plan.interpreter.executable, tag, master, [cwd, helpers], staged,
                run.env(env.env), _wrap(env, cwd, (staged,), (helpers, master, *read_only),
                                        (), tools), into=staged)) if staged else lambda: 0
            try:
                probe(plan.interpreter, cwd, trees, run.env(env.env), wrap)
            finally:
                modules = listed() or []
                compiled()
            if cache_state(master) != before:
                env.trace.emit("note", message="golem's bytecode cache changed while the test "
                               "interpreter was probed; it was thrown away")
                tree.remove_tree(master)
                os.makedirs(master, mode=0o700)
                modules = []
            if tag is not None:
                writer = _wrap(env, cwd, (run.root, master), (helpers, *read_only), (), tools)
                within = [*tools, *(os.path.join(cwd, t) for t in trees)]
                compile_modules(plan.interpreter.executable, tag, master, modules, within,
                                cwd, run.root, run.env(env.env), writer)
                if staged:
                    bytecode.place_compiled(staged, master, tag)
                    tree.remove_tree(staged)    # moved: its copies are in the cache now
                else:
                    compile_sources(plan.interpreter.executable, tag, master, [cwd, helpers],
                                    run.root, run.env(env.env), writer)
            warmed = cache_state(master)
        view = phase.view(master if plan.interpreter else None, tag, cwd)
        if view is not None:
            run.pycache = view
        # the suite itself never writes the cache: bound read-only, and checked after
        wrap = _wrap(env, cwd, (run.root,), (helpers, master, *_given(view), *read_only), (),
                     tools)
        timeout = env.timeout()
        # what the suite's own run changes in its tree is its habit, not a graded run's cheat
        try:
            watch = placed.start(cwd, placed.pruned(trees),
                                 None if sealed else {t: os.path.join(cwd, t) for t in trees},
                                 run.root)
        except (OSError, tree.TreeError) as exc:
            # nothing is taken for the suite's habit: every change a graded run makes counts
            env.trace.emit("note", message=f"golem could not record the tree before the "
                           f"{label} ({exc}): every change a graded run makes to it counts")
            watch = None
        try:
            result = run_suite(plan, cwd=cwd, env=env.relocated(cwd), run=run, helpers=helpers,
                               timeout=timeout, wrap=wrap)
        finally:
            written = watch.finish(added=True) if watch else []
        attribute.judge_data(result, None, None)    # the suite's habits, for later runs
        rewrites = {rel for rel, _ in written}
        changed = sorted(rel for rel, what in written if what != "added")
        if changed:
            env.trace.emit("note", message=f"the {label}'s own run changed {len(changed)} "
                           f"path(s) it did not make ({_names(changed)}): a graded run may "
                           "change them too", rewrites=changed)
        if result.timed_out and timeout < env.suite_timeout:
            raise UsageError(f"the {label} did not finish within -wall ({timeout:.0f}s left "
                             "for it); give more time or a faster -test")
        env.trace.emit(label, summary=result.summary(), **result.to_json())
        for message in result.notes:
            env.trace.emit("note", message=message)
        why = never_reached(result, plan, cwd) or _no_evidence(result, label)
        if why:
            raise UsageError(why)
        if plan.runner == "pytest":
            plan.pytest_config = _pin_pytest(result, cwd)
        state = cache_state(master)
        if warmed is not None and state != warmed:
            # something the suite ran wrote golem's cache (possible where commands run
            # unconfined): nothing in it is trusted, now or later
            env.trace.emit("note", message="the baseline wrote golem's bytecode cache; it "
                           "was thrown away")
            tree.remove_tree(master)
            os.makedirs(master, mode=0o700)
            state = cache_state(master)
        elif warmed is not None and tag is not None and result.modules:
            # what else the suite loaded (its dependencies: a list of paths to consider,
            # never bytecode), placed for the runs that follow, as the runner's modules were
            # (`within` and `writer` as they were for those)
            placed_any = compile_modules(plan.interpreter.executable, tag, master,
                                         result.modules, within, cwd, run.root,
                                         run.env(env.env), writer)
            # the test modules pytest rewrote, rewritten for the runs that follow by pytest's
            # rewriter in a process that has the cache read-only (as the suite's `wrap`
            # gives it); golem places what it wrote if the cache is as it was
            if plan.runner == "pytest" and result.rewritten:
                ahead = cache_state(master)
                placed_any += rewrite_tests(plan.interpreter.executable, tag, master,
                                            result.rewritten, result.modules, within, cwd,
                                            run.root, run.env(env.env), wrap,
                                            settled=lambda: cache_state(master) == ahead)
            if placed_any:
                state = cache_state(master)
        if cache is not None and not sealed and plan.interpreter is not None:
            tree.write_output(master + ".state", json.dumps(state))
        # only where golem's driver or plugin records what the run reads (carried.discarded)
        kept, why_not = carried.take(cwd) if plan.runner in ("unittest", "pytest") \
            else ({}, None)
        if kept:
            env.trace.emit("note", message=f"the graded runs start with the test tools' "
                           f"state as the {label} left it ({len(kept)} file(s) of "
                           f"{', '.join(carried.KEPT)})")
        elif why_not:
            env.trace.emit("note", message=f"the graded runs start without the test tools' "
                           f"state: {why_not}")
        return Baseline(result, plan, phase, trees, cwd, master, state, rewrites, kept)
    except OutOfTime:
        phase.close()
        raise UsageError(f"the {label} did not finish within -wall") from None
    except BaseException:
        phase.close()
        raise


def agent_scratch(env: Environment, baseline: Baseline | None, workspace: str,
                  read_only: tuple[str, ...] = (), hidden: tuple[str, ...] = ()) \
        -> tuple[Phase, dict[str, str], Callable | None]:
    """The agent's phase: its scratch (HOME, TMPDIR; golem's bytecode cache read-only), the
    environment and the sandbox for the model's commands. Only this scratch and `workspace`
    are writable to them; `read_only` directories are bound read-only, `hidden` ones
    covered (an attempt's private copy hides the real workspace)."""
    phase = Phase("agent")
    master = baseline.trusted_master() if baseline else None
    run = phase.run(pycache=master)
    view = phase.view(master, baseline.tag, workspace) if baseline else None
    if view is not None:
        run.pycache = view
    tools = baseline.tools if baseline else ()
    cache = (master, *_given(view)) if master else ()
    wrap = _wrap(env, workspace, (phase.root,), (*cache, *read_only), hidden, tools)
    return phase, run.env(env.env), wrap


@dataclass
class Grading:
    """Everything the verification found."""

    verdict: Verdict
    protected: list[tuple[str, str]]
    findings: list[dict]
    after: SuiteResult | None
    new_tests: list[str] = field(default_factory=list)
    new_results: dict[str, str] = field(default_factory=dict)
    flaky: list[str] = field(default_factory=list)
    copy: Copy | None = None


def _names(paths) -> str:
    paths = sorted(paths)
    return ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")


def _placed_check(env: Environment, baseline: Baseline, watch: placed.Watch,
                  result: SuiteResult, label: str) -> str | None:
    """Why a graded run is not evidence because of what it did to its copy, or None: it
    changed, removed or replaced something golem put there (and the baseline's own run did
    not change that path too), or its tests came from a file it wrote itself."""
    changed = [(rel, what) for rel, what in watch.finish() if rel not in baseline.rewrites]
    if not watch.watched:
        env.trace.emit("note", message=f"the {label}: golem cannot watch directories for "
                       "moves here (no inotify); only the files in its copy were checked")
    if watch.short:
        return (f"golem ran out of directory watches for the {label}'s copy (at "
                f"{watch.short}): a directory moved aside during the run would not be seen")
    if changed:
        env.trace.emit("note", message=f"the {label} changed what golem put in its copy",
                       changed=[f"{rel}: {what}" for rel, what in changed[:50]])
        rel, what = changed[0]
        more = f", and {len(changed) - 1} more" if len(changed) > 1 else ""
        return (f"the {label} changed {rel} ({what}{more}), which golem put in its copy: "
                "a run that rewrites its own tree is not evidence")
    known = set(baseline.result.files.values())
    born = sorted({f for f in result.files.values()
                   if f and f not in watch.state and f not in known})
    if born:
        return (f"tests were collected from {born[0]}, a file the {label} wrote itself: "
                "golem did not put it in its copy")
    return None


def _writers(baseline: Baseline, result: SuiteResult, root: str) -> attribute.Writers:
    """The test-side files whose code may write the tests' data, read from the copy `root`
    (where they are as the baseline had them: they are protected)."""
    files = baseline.test_files | baseline.result.plugins | {
        f for each in result.origins.values() for f in each if protect.is_test_path(f)}

    def read(rel: str) -> bytes | None:
        found = tree.read_file(root, rel, attribute.SOURCE_LIMIT)
        return found[0] if found else None

    return attribute.Writers(read, files)


def _copy_run(env: Environment, baseline: Baseline, phase: Phase, copy: Copy, label: str,
              workspace: str, master: str | None, only: str | None = None,
              spoiled: list[str] | None = None) -> SuiteResult:
    run = phase.run(pycache=master)
    helpers = phase.helpers()
    view = phase.view(master, baseline.tag, copy.root)
    if view is not None:
        run.pycache = view
    cache = (master, *_given(view)) if master else ()
    wrap = _wrap(env, copy.root, (run.root,), (helpers, *cache, *copy.read_only), (workspace,),
                 baseline.tools)
    # unconfined, the run could write golem's cache through its view, or the view itself
    watched = [p for p in (master, view) if p] if wrap is None else []
    before = [cache_state(p) for p in watched]
    timeout = env.timeout()
    # unconfined, the linked dependency trees are writable too: they are watched with the copy
    layout = copy.layout
    trees = None if wrap is not None or layout is None else {
        name: os.path.join(layout.workspace, name) for name in copy.linked
        if name in layout.trees and name != ".git"}
    if baseline.carried:
        why_not = carried.place(copy.root, baseline.carried)
        if why_not:
            env.trace.emit("note", message=f"the {label} starts without the test tools' "
                           f"state: {why_not}")
    try:
        watch, unrecorded = placed.start(copy.root, placed.pruned(()), trees, run.root), None
    except (OSError, tree.TreeError) as exc:
        watch, unrecorded = None, exc
    try:
        result = run_suite(baseline.plan, cwd=copy.root,
                           env=env.relocated(copy.root, workspace), run=run, helpers=helpers,
                           timeout=timeout, wrap=wrap, only=only)
    except BaseException:
        if watch is not None:
            watch.close()
        raise
    for note in attribute.judge_data(result, _writers(baseline, result, copy.root),
                                     baseline.result)[:20]:
        env.trace.emit("note", message=f"the {label} changed the tests' data, the tests' own "
                       f"doing: {note}")

    def no_evidence(reason: str | None, spoils: bool = True) -> None:
        """Add `reason` to the run's problems; one that `spoils` spoils every later run of
        the verification too."""
        if reason:
            result.problem = f"{result.problem}; {reason}" if result.problem else reason
            if spoils and spoiled is not None:
                spoiled.append(reason)

    if watch is None:
        no_evidence(f"golem could not record its copy before the {label} ({unrecorded}): "
                    "what the run did to it is unknown")
    else:
        no_evidence(_placed_check(env, baseline, watch, result, label))
    if baseline.carried:
        no_evidence(carried.discarded(copy.root, baseline.carried, result.reads))
    if result.timed_out and timeout < env.suite_timeout:
        no_evidence(f"the {label} ran out of -wall after {timeout:.0f}s (the time kept for "
                    "it)", spoils=False)
    if [cache_state(p) for p in watched] != before:
        no_evidence(f"the {label} changed golem's bytecode cache or its view of it: its "
                    "results are not evidence")
        baseline.trusted_master()       # thrown away, for every later run too
    if copy.problems:
        no_evidence("the verification copy is incomplete: " + "; ".join(copy.problems[:3]),
                    spoils=False)
    if only is None:
        env.trace.emit(label, summary=result.summary(), verified_in="copy", **result.to_json())
    return result


def grade(env: Environment, baseline: Baseline, workspace: str, changes: Changes,
          facts: protect.Facts, build: Callable[[str, set[str]], Copy],
          original: Callable[[str], bytes | None], *, strict: bool = False,
          repeats: int = 0) -> Grading:
    """Judge `changes` to `workspace` against `baseline`.

    `build(target, exclude)` writes the verification copy at `target`, leaving out the paths
    in `exclude`; `original(path)` gives a file's content before the change. Call only after
    every process of the agent's phase is gone: the verification's scratch is made here.
    """
    facts.named_by_tests(original)
    facts.run_by = protect.named_to_run(
        facts.before, changes, original,
        lambda rel: (tree.read_file(workspace, rel, protect.NAMED_LIMIT + 1) or (None,))[0])
    protected = protect.protected_changes(changes, facts)
    held = {p for p, _ in protected}
    new_tests = [p for p in protect.new_tests(changes, facts) if p not in held]
    allowed = [p for p in changes.added + changes.modified if p not in held]
    version = baseline.plan.interpreter.version if baseline.plan.interpreter else None
    failing = scan.failing_by_file(baseline.result.files, baseline.result.failing,
                                   baseline.result.pseudo)
    findings = scan.scan_changes(workspace, allowed, new_tests, original, failing, version)
    if findings:
        env.trace.emit("suspicious", findings=findings)
    changed = set(changes.added) | set(changes.modified)
    master = baseline.trusted_master()
    if master is None:
        env.trace.emit("note", message="the bytecode cache changed during the run; the "
                       "verification compiles everything from source")
    with Phase("verify") as phase:
        def target() -> str:
            parent = tempfile.mkdtemp(prefix="copy-", dir=phase.root)
            return os.path.join(parent, os.path.basename(workspace.rstrip("/")) or "ws")

        try:
            copy = build(target(), held | set(new_tests))
            env.trace.emit("note", message=copy.describe(), applied=copy.applied,
                           left_out=copy.left_out, compiled=copy.compiled, linked=copy.linked)
            spoiled: list[str] = []
            after = _copy_run(env, baseline, phase, copy, "verification", workspace, master,
                              spoiled=spoiled)
            strays = sorted({after.files[t] for t in after.tests or {}
                             if after.files.get(t) in set(changes.added)})
            if strays:
                reason = (f"tests were collected from {strays[0]}, a file the run added that "
                          "golem did not hold back as a new test file")
                after.problem = f"{after.problem}; {reason}" if after.problem else reason
            late = protect.read_in_run(after.reads, changed - held, facts)
            if late:
                protected = sorted(protected + late)
            verdict = judge(baseline.result, after, protected, changed)
            grading = Grading(verdict, protected, findings, after, new_tests, copy=copy)
            if new_tests and verdict.name != "REJECTED":
                second = build(target(), held)
                result = _copy_run(env, baseline, phase, second, "new tests", workspace,
                                   master, spoiled=spoiled)
                grading.new_results, problem = judge_new_tests(result, set(new_tests))
                if problem and verdict.name == "VERIFIED":
                    verdict.name, verdict.summary = "FAILED", f"FAILED: {problem}"
                elif verdict.name == "VERIFIED" and grading.new_results:
                    verdict.summary = verdict.summary.replace(
                        " fixed)", f" fixed; {len(grading.new_results)} new test(s) pass)", 1)
            if repeats > 0 and verdict.name != "REJECTED":
                grading.flaky = repeat.flaky_tests(
                    baseline.plan.runner, baseline.result, after, repeats,
                    lambda only: _copy_run(env, baseline, phase, copy, "repeat", workspace,
                                           master, only, spoiled),
                    note=lambda message: env.trace.emit("note", message=message))
                if grading.flaky:
                    env.trace.emit("note", message=f"flaky: {', '.join(grading.flaky)}",
                                   flaky=grading.flaky)
            if spoiled and verdict.name == "VERIFIED":
                # a later run (new tests, a repeat) rewrote its tree: none of it is evidence
                verdict.name, verdict.summary = "FAILED", f"FAILED: {spoiled[0]}"
        except OutOfTime:
            verdict = Verdict("FAILED", "FAILED: the verification did not finish within "
                              "-wall (the time kept for it ran out)", protected=protected)
            return Grading(verdict, protected, findings, None, new_tests)
        except Cancelled:
            verdict = Verdict("FAILED", "FAILED: the verification was stopped: another "
                              "attempt was verified first", protected=protected)
            return Grading(verdict, protected, findings, None, new_tests)
    grading.verdict = advise(mark_flaky(verdict, grading.flaky), findings, strict)
    return grading
