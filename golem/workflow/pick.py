"""`golem pick RESULTS...`: the winner of attempts run elsewhere, re-verified here.

Each RESULT is the `-json` object of one `golem fix -attempt K/N ... -patch FILE` (a CI
matrix job), with its patch in the same directory under the name the result gives. Nothing
in them is trusted: a result's verdict only makes its patch a candidate, and its findings,
cost and attempt number only order the candidates (its size is counted from the patch
itself). The suite command is this command's own (`-test` or detected), never a result's.

After one baseline of the workspace here, each candidate in order of preference is applied
with `git apply` to a private copy built from the snapshot (git refuses a path that leaves
the copy or passes through a link), and the copy is graded through the sealed verifier, as
`fix -attempts` grades an attempt. The first one VERIFIED is applied to the workspace
through golem's confined writes, undoable like a fix (or, with `-print`, only printed);
`-patch FILE` writes that change whole (added, removed and renamed files, modes, links).

A result names the commit its run started from (`base`); a candidate made on another commit
than the checkout here is refused before anything runs. A candidate that adds or retargets a
link leaving the repository is refused, and binary files a winner changes are named before
they are applied.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
from dataclasses import dataclass

from golem.core.errors import UsageError
from golem.tools import tree
from golem.tools.search import _git_env
from golem.trace import Trace
from golem.workflow import runs
from golem.workflow.attempts import _private_snapshot, apply_to_workspace, check_copy
from golem.workflow.fix import _own_files, base_report, write_output
from golem.workflow.patch import base_commit, diffstat, quote
from golem.workflow.setup import Options, Setup
from golem.workflow.verifier import known, rebuild, run_baseline
from golem.workflow.verifier.grade import Verdict
from golem.workflow.verifier.scratch import Phase
from golem.workflow.verifier.snapshot import VCS_NAMES, Changes, Snapshot, fingerprint

MAX_RESULT = 16 * 1024 * 1024
MAX_PATCH = 32 * 1024 * 1024


@dataclass
class Candidate:
    """One result file and its patch, as found; `why` says why it is no candidate."""

    result: str
    patch: str | None = None
    text: str = ""
    claimed: str | None = None
    attempt: str = ""
    model: str = ""
    findings: bool = False
    cost: float = 0.0
    lines: int = 0
    base: str | None = None
    why: str | None = None

    def rank(self) -> tuple:
        return (self.findings, self.lines, self.cost, _number(self.attempt), self.result)

    def to_json(self) -> dict:
        return {"result": self.result, "patch": self.patch, "claimed": self.claimed,
                "attempt": self.attempt or None, "model": self.model or None,
                "lines_changed": self.lines}


def _number(attempt: str) -> int:
    head = attempt.partition("/")[0]
    return int(head) if head.isdigit() else 1 << 30


def _read(path: str, cap: int) -> str:
    directory, name = os.path.split(os.path.abspath(path))
    data = tree.read_file(directory, name, cap + 1)
    if data is None:
        raise OSError(f"cannot read {path} (missing, a link or not a file)")
    if len(data[0]) > cap:
        raise OSError(f"{path} is larger than {cap} bytes")
    return data[0].decode("utf-8")


def load(path: str) -> Candidate:
    """A result file and the patch it names, read without trusting either."""
    found = Candidate(path)
    try:
        report = json.loads(_read(path, MAX_RESULT).strip().splitlines()[-1])
    except (OSError, ValueError, IndexError) as exc:
        found.why = f"not a result golem wrote ({exc})"
        return found
    if not isinstance(report, dict):
        found.why = "not a result golem wrote (not a JSON object)"
        return found
    text = lambda key: report.get(key) if isinstance(report.get(key), str) else ""
    found.claimed = text("verdict") or None
    found.attempt, found.model = text("attempt"), text("model")
    found.findings = bool(report.get("suspicious"))
    found.base = text("base") or None
    cost = report.get("cost")
    found.cost = cost if isinstance(cost, (int, float)) and math.isfinite(cost) \
        and cost >= 0 else 0.0
    if found.claimed != "VERIFIED":
        found.why = f"its run was not verified ({found.claimed or 'no verdict'})"
        return found
    name = os.path.basename(text("patch"))
    if not name:
        found.why = "it names no patch (run with -patch FILE)"
        return found
    found.patch = os.path.join(os.path.dirname(os.path.abspath(path)), name)
    try:
        found.text = _read(found.patch, MAX_PATCH)
    except (OSError, UnicodeDecodeError) as exc:
        found.why = f"its patch cannot be read ({exc})"
        return found
    if not found.text.strip():
        found.why = "its patch is empty"
        return found
    found.lines = sum(a + r for a, r in diffstat({"": found.text}).values())
    return found


def _apply(patch: str, root: str, scratch: str) -> str | None:
    """Apply the patch text to the copy at `root` with git; None, or why it did not apply."""
    path = os.path.join(scratch, "candidate.patch")
    tree.write_output(path, patch)
    argv = ["git", "-c", "core.fsmonitor=", "-c", "core.symlinks=true", "apply",
            "--whitespace=nowarn", "--", path]
    try:
        done = subprocess.run(argv, cwd=root, stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=120, env=_git_env(root))
    except FileNotFoundError:
        raise UsageError("golem pick needs git on PATH to apply the patches") from None
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"git apply failed: {exc}"
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        return f"git apply: {lines[0] if lines else 'failed'}"
    return None


def _short(commit: str) -> str:
    return commit[:12]


def check_bases(found: list[Candidate], here: str | None, directory: str) -> None:
    """UsageError naming the first candidate made on another commit than the checkout's."""
    for item in found:
        if item.why or item.base == here:
            continue
        if item.base is None:
            raise UsageError(f"{item.result} names no base commit, and {directory} is at "
                             f"{_short(here)}: pick takes results made on the commit it "
                             "applies to")
        if here is None:
            raise UsageError(f"{item.result} was made on commit {_short(item.base)}, and "
                             f"{directory} is not a git checkout at any commit")
        raise UsageError(f"{item.result} was made on commit {_short(item.base)}, and "
                         f"{directory} is at {_short(here)}: check out the commit the "
                         "attempts ran on")


def leaving_links(root: str, snap: Snapshot, linked: list[str]) -> list[str]:
    """`path -> target` for each link under `root` that the snapshot does not hold as it
    is and whose target leaves the tree (absolute, or above the root once normalized).
    `linked` are the top-level names the copy itself links to the workspace; they and
    version-control directories are not walked."""
    found = []
    for folder, dirs, files in os.walk(root):
        rel_dir = os.path.relpath(folder, root)
        rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/")
        own = set() if rel_dir else set(linked)
        for name in [*dirs, *files]:
            full = os.path.join(folder, name)
            if name in own or not os.path.islink(full):
                continue
            rel = f"{rel_dir}/{name}" if rel_dir else name
            target = os.readlink(full)
            entry = snap.entries.get(rel)
            if entry is not None and entry.is_link and entry.link_target == target:
                continue
            inside = os.path.normpath(os.path.join(rel_dir, target)).replace(os.sep, "/")
            if os.path.isabs(target) or inside == ".." or inside.startswith("../"):
                found.append(f"{quote(rel)} -> {quote(target)}")
        dirs[:] = [d for d in dirs if d not in own and d not in VCS_NAMES]
    return sorted(found)


def binary_files(diffs: dict[str, str]) -> list[str]:
    """The paths whose diff is binary (a `GIT binary patch`, or too large to carry)."""
    return [rel for rel, text in diffs.items()
            if "\nGIT binary patch\n" in text or "\nBinary files " in text]


def pick(options: Options, trace: Trace, results: list[str], print_only: bool = False,
         patch_path: str | None = None) -> dict:
    """Re-verify the candidates in order of preference; apply (or print) the first that
    verifies, and write it to `patch_path`. Returns the `-json` object with `exit_code`."""
    found = [load(path) for path in results]
    check_bases(found, base_commit(os.path.realpath(options.dir)), options.dir)
    for item in found:
        if item.why:
            trace.emit("note", message=f"{item.result}: no candidate: {item.why}")
    candidates = sorted((c for c in found if not c.why), key=Candidate.rank)
    with Setup(options, trace) as setup:
        root = setup.workspace.root
        baseline = run_baseline(setup.verifier, setup.command, root,
                                cache=lambda interp: runs.cache_for(interp, root))
        setup.keep(baseline.phase)
        report = base_report(setup, baseline.result)
        report.update(candidates=[], picked=None, changed_files=[], binary_files=[],
                      chosen_patch=None)
        green = known.green_before(baseline.result, options.known_failing)
        if green is not None:
            summary = (f"ALREADY_GREEN: the suite passes here before any patch{green}; "
                       "nothing to pick")
            trace.emit("verdict", verdict="ALREADY_GREEN", summary=summary)
            return {**report, "verdict": "ALREADY_GREEN", "summary": summary, "exit_code": 0}
        run_id, run_dir = runs.new_run(root)
        snap = Snapshot.take(root, run_dir)
        runs.record_root(run_dir, snap.root_id)
        winner = None
        for number, item in enumerate(candidates, 1):
            checked, copy_root = _check(setup, baseline, snap, item, number, options)
            entry = {**item.to_json(), "verdict": checked.verdict.name,
                     "summary": checked.verdict.summary}
            report["candidates"].append(entry)
            trace.emit("note", message=f"candidate {number} ({item.result}): "
                       f"{checked.verdict.summary}", candidate=entry)
            if checked.verdict.name == "VERIFIED":
                winner = (item, checked, copy_root)
                break
        report["candidates"] += [{**c.to_json(), "verdict": None, "summary": c.why}
                                 for c in found if c.why]
        if winner is None:
            runs.finish_run(run_dir, Changes([], [], []), {})
            verdict = Verdict("FAILED", f"FAILED: none of {len(results)} result(s) verified "
                              f"here ({len(candidates)} candidate patch(es) tried); the "
                              "workspace is unchanged")
            report.update(exit_code=verdict.exit_code, **verdict.fields())
            trace.emit("verdict", **verdict.fields())
            return report
        item, checked, copy_root = winner
        grading = checked.grading
        report.update(picked=item.result, patch=item.patch, run_id=run_id,
                      diffstat=diffstat(checked.diffs),
                      new_tests=grading.new_tests, suspicious=grading.findings,
                      protected_changes=[{"path": p, "reason": r}
                                         for p, r in grading.protected])
        report["tests"]["after"] = grading.after.to_json() if grading.after else None
        verdict = checked.verdict
        chosen = "".join(checked.diffs.values())
        binary = binary_files(checked.diffs)
        if binary:      # named before anything is applied or written
            report["binary_files"] = binary
            trace.emit("note", message=f"the picked change holds {len(binary)} binary "
                       f"file(s), verified with the rest; review them before committing: "
                       + ", ".join(quote(p) for p in binary), binary_files=binary)
        if print_only:
            runs.finish_run(run_dir, Changes([], [], []), {})
            report["diff"] = chosen
        else:
            try:
                applied = apply_to_workspace(root, copy_root, snap, checked.changes,
                                             {p for p, _ in grading.protected}, checked.after,
                                             ignore=_own_files(root, options))
            except UsageError as exc:
                runs.finish_run(run_dir, Changes([], [], []), {})
                verdict = Verdict("FAILED", f"FAILED: {exc}")
                report.update(exit_code=verdict.exit_code, **verdict.fields())
                trace.emit("verdict", **verdict.fields())
                return report
            runs.finish_run(run_dir, applied,
                            fingerprint(root, deps=snap.deps).entries)
            report["changed_files"] = applied.all
            trace.emit("note", message=f"applied {item.patch}: `golem undo {run_id}` puts "
                       "the workspace back")
        if patch_path:
            write_output(root, patch_path, chosen)
            report["chosen_patch"] = patch_path
            whole = [rel for rel, text in checked.diffs.items() if "\nBinary files " in text]
            if whole:   # git apply refuses the patch rather than take it in part
                trace.emit("note", message=f"{patch_path} cannot carry {len(whole)} file(s) "
                           "too large for a diff, so git apply refuses it: "
                           + ", ".join(quote(p) for p in whole))
        summary = verdict.summary + f" (picked {os.path.basename(item.result)}" + \
            (f", attempt {item.attempt}" if item.attempt else "") + ")"
        verdict = dataclasses.replace(verdict, summary=summary)
        report.update(exit_code=verdict.exit_code, **verdict.fields())
        trace.emit("verdict", **verdict.fields(), picked=item.result)
        return report


def _check(setup: Setup, baseline, snap: Snapshot, item: Candidate, number: int,
           options: Options):
    """Candidate `number` applied to a private copy and graded: (Checked, the copy's root)."""
    from golem.workflow.attempts import Checked
    root = setup.workspace.root
    home = setup.keep(Phase(f"candidate{number}"))
    layout = rebuild.Layout.of(root, snap.deps)
    copy = rebuild.from_snapshot(snap, root, os.path.join(home.root, os.path.basename(root)),
                                 Changes([], [], []), set(), layout)
    if copy.problems:
        return Checked(Verdict("FAILED", "FAILED: the private copy is incomplete: "
                               + "; ".join(copy.problems[:2]))), copy.root
    private = _private_snapshot(snap, copy.root, layout)
    why = _apply(item.text, copy.root, home.root)
    if why:
        return Checked(Verdict("FAILED", f"FAILED: the patch does not apply here: {why}")), \
            copy.root
    leaving = leaving_links(copy.root, private, copy.linked)
    if leaving:
        return Checked(Verdict("FAILED", "FAILED: refused: the patch makes a link that "
                               f"leaves the repository: {leaving[0]}")), copy.root
    checked = check_copy(setup, baseline, snap, private, copy.root, setup.verifier,
                         layout, options)
    return checked, copy.root
