"""`golem verify -base REV`: the verifier alone, on changes someone else made.

The baseline is the suite as it was at REV, run in a copy exported with `git archive` into a
scratch directory of its own (the repository is only read). The changes are everything that
differs from REV now: commits, uncommitted edits and untracked files git does not ignore,
except inside the workspace's dependency trees (`.venv`, `node_modules`, ...), which are
linked read-only into both the export and the verification copy, as `fix` does. The re-run
happens in a second export of REV with only the allowed changes taken over from the
workspace (golem/workflow/verifier/rebuild.py), through the same sealed path as `fix`.
git runs without user or system configuration and with `core.fsmonitor` off, so nothing the
repository's own configuration names is run.
"""

from __future__ import annotations

import io
import os
import subprocess
import tarfile

from golem.errors import UsageError
from golem.tools import tree
from golem.tools.search import _git_env
from golem.trace import Trace
from golem.workflow import present, runs
from golem.workflow.fix import facts_for
from golem.workflow.setup import Options, Setup
from golem.workflow.verifier import grade, rebuild, run_baseline
from golem.workflow.verifier.scratch import Phase
from golem.workflow.verifier.snapshot import Changes, Snapshot, dependency_trees, fingerprint


def _git(root: str, *args: str, binary: bool = False) -> str | bytes:
    argv = ["git", "-c", "core.fsmonitor=", "--work-tree", root, "-C", root, *args]
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=300, env=_git_env(root))
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"git {args[0]} failed: {exc}") from None
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip().splitlines()
        raise UsageError(f"git {args[0]}: {message[-1] if message else 'failed'}")
    return done.stdout if binary else done.stdout.decode(errors="surrogateescape")


def changes_since(root: str, rev: str) -> Changes:
    """Paths (relative to root) that differ from `rev`: committed, uncommitted or untracked."""
    added, modified, removed = [], [], []
    status = _git(root, "diff", "--no-ext-diff", "--no-textconv", "--name-status",
                  "--no-renames", "-z", "--relative", rev, "--")
    fields = status.split("\0")
    for kind, path in zip(fields[0::2], fields[1::2]):
        {"A": added, "D": removed}.get(kind[:1], modified).append(path)
    untracked = _git(root, "ls-files", "--others", "--exclude-standard", "-z")
    added += [p for p in untracked.split("\0") if p]
    return Changes(sorted(set(added)), sorted(modified), sorted(removed))


def _export(root: str, rev: str, target: str) -> None:
    prefix = _git(root, "rev-parse", "--show-prefix").strip()
    tree = f"{rev}:{prefix}" if prefix else rev
    data = _git(root, "archive", "--format=tar", tree, binary=True)
    os.makedirs(target)
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        if hasattr(tarfile, "data_filter"):
            archive.extractall(target, filter="data")
            return
        for member in archive.getmembers():   # Python before 3.11.4: check by hand
            name = member.name
            if name.startswith("/") or ".." in name.split("/") or member.islnk() or \
                    (member.issym() and (member.linkname.startswith("/")
                                         or ".." in member.linkname.split("/"))):
                raise UsageError(f"refusing to export {name!r} from {rev}")
        archive.extractall(target)


def resolve_base(root: str, rev: str) -> None:
    """UsageError naming `rev` when it is not a commit of the checkout at `root`."""
    _resolve(root, rev)


def _resolve(root: str, rev: str) -> None:
    try:
        _git(root, "rev-parse", "--git-dir")
    except UsageError:
        raise UsageError(f"golem verify needs a git checkout, and {root} is not inside one "
                         f"(so -base {rev!r} names nothing there)") from None
    try:
        _git(root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
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
    listed = _git(root, "ls-files", "-z", "--cached", "--", *found).split("\0")
    listed += _git(root, "ls-tree", "-r", "-z", "--name-only", rev, "--",
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
        export = setup.keep(Phase("export"))
        base = os.path.join(export.root, os.path.basename(root) or "base")
        _export(root, rev, base)
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
        snap = Snapshot(export.root, before.entries, before.dirs, links)
        facts = facts_for(setup, baseline, snap, changes, {})
        original = lambda rel: (tree.read_file(base, rel, 4_000_000) or (None,))[0]
        trace.emit("phase", name="verification")
        grading = grade(setup.verifier, baseline, root, changes, facts,
                        lambda target, exclude: rebuild.from_export(
                            lambda t: _export(root, rev, t), root, target, changes, exclude,
                            links),
                        original, strict=options.strict, repeats=options.repeat)
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
                  "verified_in": "copy" if grading.after is not None else None,
                  "exit_code": verdict.exit_code}
        present.emit_outcomes(trace, baseline.result, grading.after)
        trace.emit("verdict", **verdict.fields(),
                   protected_changes=report["protected_changes"], suspicious=grading.findings,
                   flaky=grading.flaky, verified_in=report["verified_in"],
                   new_tests=grading.new_tests, sealed=setup.sealed)
        return report
