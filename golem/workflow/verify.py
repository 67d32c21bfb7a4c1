"""`golem verify -base REV`: the verifier alone, on changes someone else made.

The baseline is the suite as it was at REV, run in a copy exported with `git archive` into a
scratch directory of its own (the repository is only read). Submodules are exported too, each
at the commit REV records for it, from the submodule's own repository in the workspace. The
changes are everything that differs from REV now: commits, uncommitted edits and untracked
files git does not ignore (inside a submodule, measured from the commit REV records), except
inside the workspace's dependency trees (`.venv`, `node_modules`, ...), which are linked
read-only into both the export and the verification copy, as `fix` does. Build products git
ignores that sit beside the sources (an extension module built in place, a generated module)
are carried from the workspace into both as well: they are no change, and the suite needs
them (`build_products`). The re-run happens in a second export of REV with only the allowed
changes taken over from the workspace (golem/workflow/verifier/rebuild.py), through the same
sealed path as `fix`.

`-dir` may be any directory of a work tree (a package in a monorepo): the export is that
directory's part of REV, and every path is relative to it. git reads the repository as the
user's own git does, with the user's configuration (so clean and smudge filters, as git-lfs
installs them, give the files their working-tree content), but with `core.fsmonitor` off,
without the variables that point git at another repository, and without credentials.
"""

from __future__ import annotations

import os

from golem.core.errors import UsageError
from golem.tools import tree
from golem.trace import Trace
from golem.workflow import present, runs
from golem.workflow.checkout import (build_products, carry, changes_since, environment_hooks,
                                     export, run_git)
from golem.workflow.fix import facts_for
from golem.workflow.setup import Options, Setup
from golem.workflow.verifier import grade, known, rebuild, run_baseline
from golem.workflow.verifier.grade import advise
from golem.workflow.verifier.scratch import Phase
from golem.workflow.verifier.snapshot import Changes, Snapshot, dependency_trees, fingerprint


def resolve_base(root: str, rev: str) -> None:
    """UsageError naming `rev` when it is not a commit of the checkout at `root`."""
    _resolve(root, rev)


def _resolve(root: str, rev: str) -> None:
    try:
        run_git(root, "rev-parse", "--git-dir")
    except UsageError:
        raise UsageError(f"golem verify needs a git checkout, and {root} is not inside one "
                         f"(so -base {rev!r} names nothing there)") from None
    try:
        run_git(root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except UsageError:
        raise UsageError(f"-base {rev!r} is not a commit in {root} (git rev-parse cannot "
                         "resolve it)") from None


def untracked_trees(root: str, rev: str) -> list[str]:
    """The workspace's dependency trees that are environment, not change: no file in them is
    tracked by git (index or HEAD) or present at `rev`. A directory the commits under
    judgment hold (a `pyvenv.cfg` committed beside a package, say) is no dependency tree:
    its files are changes like any other, diffed, protected and scanned."""
    found = dependency_trees(root)
    if not found:
        return []
    listed = run_git(root, "ls-files", "-z", "--cached", "--", *found).split("\0")
    listed += run_git(root, "ls-tree", "-r", "-z", "--name-only", rev, "--",
                      *found).split("\0")
    owned = lambda t: any(p == t or p.startswith(t + "/") for p in listed if p)
    return [t for t in found if not owned(t)]


def _outside_trees(changes: Changes, trees: list[str]) -> Changes:
    inside = lambda rel: any(rel == t or rel.startswith(t + "/") for t in trees)
    keep = lambda names: [n for n in names if not inside(n)]
    return Changes(keep(changes.added), keep(changes.modified), keep(changes.removed))


def verify(options: Options, trace: Trace, rev: str) -> dict:
    """Judge the workspace against the suite at `rev`, with the same verdicts as `fix`."""
    with Setup(options, trace) as setup:
        root = setup.workspace.root
        _resolve(root, rev)
        trees = untracked_trees(root, rev)
        layout = rebuild.Layout.of(root, trees)     # how every copy of it is made
        links = list(layout.trees)
        changes = _outside_trees(changes_since(root, rev), trees)
        products = build_products(root, changes, trees)
        scratch = setup.keep(Phase("export"))
        base = os.path.join(scratch.root, os.path.basename(root) or "base")
        export(root, rev, base)
        left_out: dict[str, str] = {}
        products = carry(root, base, products, left_out)
        if products:
            trace.emit("note", message=f"carried into the base and the verification copy: "
                       f"{len(products)} build product(s) git ignores ("
                       + ", ".join(products[:5]) + (", ..." if len(products) > 5 else "")
                       + ")", build_products=products)
        for rel, why in sorted(left_out.items()):
            trace.emit("note", message=f"not carried: {rel}, {why}", left_out=rel)
        machine = [p for p in products if not p.endswith(".py")]
        if machine:
            trace.emit("note", message="carried unjudged: compiled extension module(s) git "
                       "ignores, machine code golem cannot read (" + ", ".join(machine[:5])
                       + (", ..." if len(machine) > 5 else "") + "); run verify on a fresh "
                       "checkout to judge without them", extensions=machine)
        with tree.Writer(base) as writer:     # what the tests import, read-only
            for name in links:
                if writer.lstat(name) is None:
                    writer.symlink(name, os.path.join(root, name))
        trace.emit("note", message=f"baseline: the suite as it was at {rev}")
        trace.emit("phase", name="baseline")
        baseline = run_baseline(setup.verifier, setup.command, os.path.realpath(base),
                                read_only=layout.read_only,
                                cache=lambda interp: runs.cache_for(interp, root))
        setup.keep(baseline.phase)
        before = fingerprint(base, deps=links)
        snap = Snapshot(scratch.root, before.entries, before.dirs, links)
        original = lambda rel: (tree.read_file(base, rel, 4_000_000) or (None,))[0]
        facts = facts_for(setup, baseline, snap, changes, {}, original)
        trace.emit("phase", name="verification")
        grading = grade(setup.verifier, baseline, root, changes, facts,
                        lambda target, exclude: rebuild.from_export(
                            lambda t: (export(root, rev, t), carry(root, t, products)),
                            root, target, changes, exclude, layout),
                        original, strict=options.strict, repeats=options.repeat)
        # the workspace's environment is trusted, not judged: start-up code in it that no
        # known installer writes is a finding (REJECTED under -strict)
        hooks = environment_hooks(root, trees)
        if hooks:
            trace.emit("suspicious", findings=hooks)
            grading.findings = grading.findings + hooks
            grading.verdict = advise(grading.verdict, hooks, options.strict)
        for name in known.unmatched(options.known_failing, baseline.result, grading.after):
            trace.emit("note", message=f"-known-failing {name}: no test of the baseline or "
                       "the verification has that id or lies below it")
        verdict = grading.verdict
        report = {**verdict.fields(), "base": rev,
                  "changed_files": changes.all, "new_tests": grading.new_tests,
                  "new_test_results": grading.new_results,
                  "protected_changes": [{"path": p, "reason": r} for p, r in grading.protected],
                  "tests": {"before": baseline.result.to_json(),
                            "after": grading.after.to_json() if grading.after else None},
                  "test_command": setup.command.text,
                  "evidence": (grading.after or baseline.result).evidence,
                  "suspicious": grading.findings, "trace": options.trace,
                  "flaky": grading.flaky, "sealed": setup.sealed,
                  "build_products": {"carried": products, "left_out": sorted(left_out)},
                  "verified_in": "copy" if grading.after is not None else None,
                  "exit_code": verdict.exit_code}
        present.emit_outcomes(trace, baseline.result, grading.after)
        trace.emit("verdict", **verdict.fields(),
                   protected_changes=report["protected_changes"], suspicious=grading.findings,
                   flaky=grading.flaky, verified_in=report["verified_in"],
                   new_tests=grading.new_tests, sealed=setup.sealed)
        return report
