"""`golem verify -base REV`: the verifier alone, on changes someone else made.

The baseline is the suite as it was at REV, run in a copy exported with `git archive` into
golem's scratch directory (the repository is only read). The changes are everything that
differs from REV now: commits, uncommitted edits and untracked files git does not ignore.
The re-run happens in a second export of REV with only the allowed changes taken over from
the workspace (golem/workflow/rebuild.py).
"""

from __future__ import annotations

import io
import os
import subprocess
import tarfile

from golem.errors import UsageError
from golem.tools import sandbox
from golem.trace import Trace
from golem.workflow import rebuild, repeat
from golem.workflow.protect import new_tests, protected_changes
from golem.workflow.setup import Options, Setup
from golem.workflow.snapshot import Changes
from golem.workflow.suite import run_suite
from golem.workflow.suspicious import files_under, read_source, scan_changes
from golem.workflow.verdict import advise, judge, mark_flaky


def _git(root: str, *args: str, binary: bool = False) -> str | bytes:
    try:
        done = subprocess.run(["git", "-C", root, *args], stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"git {args[0]} failed: {exc}") from None
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip().splitlines()
        raise UsageError(f"git {args[0]}: {message[-1] if message else 'failed'}")
    return done.stdout if binary else done.stdout.decode(errors="surrogateescape")


def changes_since(root: str, rev: str) -> Changes:
    """Paths (relative to root) that differ from `rev`: committed, uncommitted or untracked."""
    added, modified, removed = [], [], []
    status = _git(root, "diff", "--name-status", "--no-renames", "-z", "--relative", rev, "--")
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


def verify(options: Options, trace: Trace, rev: str) -> dict:
    """Judge the workspace against the suite at `rev`, with the same verdicts as `fix`."""
    with Setup(options, trace) as setup:
        root = setup.workspace.root
        _git(root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
        changes = changes_since(root, rev)
        base = os.path.join(setup.scratch, "base")
        _export(root, rev, base)
        linked = rebuild.link_dependencies(base, root)   # what the tests import, read-only
        trace.emit("note", message=f"baseline: the suite as it was at {rev}")
        base_wrap, _ = sandbox.wrapper(options.sandbox, base, setup.scratch,
                                       read_only=rebuild.sources(root, linked))
        before = run_suite(setup.command, cwd=base, env=setup.env, scratch=setup.scratch,
                           timeout=options.suite_timeout, wrap=base_wrap)
        trace.emit("baseline", summary=before.summary(), **before.to_json())
        protected = protected_changes(changes, setup.command.argv)
        # the re-run happens in a fresh export of REV plus the allowed changes only
        copy = rebuild.from_export(lambda target: _export(root, rev, target), root,
                                   rebuild.target_for(setup.scratch, root), changes,
                                   {p for p, _ in protected})
        after, wrap = rebuild.run_in_copy(setup, copy)
        findings = scan_changes(root, changes, protected,
                                lambda rel: read_source(os.path.join(base, *rel.split("/"))),
                                files_under(base), before.failing)
        if findings:
            trace.emit("suspicious", findings=findings)
        verdict = judge(before, after, protected)
        flaky = repeat.after_grading(setup, copy.root, wrap, before, after, verdict.name)
        verdict = advise(mark_flaky(verdict, flaky), findings, options.strict)
        report = {**verdict.fields(), "base": rev,
                  "changed_files": changes.all, "new_tests": new_tests(changes),
                  "protected_changes": [{"path": p, "reason": r} for p, r in protected],
                  "tests": {"before": before.to_json(), "after": after.to_json()},
                  "test_command": setup.command.text, "evidence": after.evidence,
                  "suspicious": findings, "trace": options.trace, "flaky": flaky,
                  "verified_in": "copy", "exit_code": verdict.exit_code}
        trace.emit("verdict", **verdict.fields(),
                   protected_changes=report["protected_changes"], suspicious=findings,
                   flaky=flaky, verified_in="copy")
        return report
