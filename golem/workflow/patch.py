"""A unified diff of a run's changes that `git apply` takes in the workspace."""

from __future__ import annotations

import difflib
import os

from golem.workflow.snapshot import Snapshot


def _lines(data: bytes | None) -> list[str] | None:
    if data is None:
        return []
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", errors="surrogateescape").splitlines(keepends=True)


def _mark_missing_newline(hunk_lines: list[str]) -> list[str]:
    out = []
    for line in hunk_lines:
        if line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n\\ No newline at end of file\n")
    return out


def file_diff(rel: str, old: bytes | None, new: bytes | None) -> str:
    """The git-style diff of one file (old None: created; new None: deleted)."""
    a, b = _lines(old), _lines(new)
    header = f"diff --git a/{rel} b/{rel}\n"
    if old is None:
        header += "new file mode 100644\n"
    elif new is None:
        header += "deleted file mode 100644\n"
    if a is None or b is None:
        return header + f"Binary files a/{rel} and b/{rel} differ\n"
    body = difflib.unified_diff(a, b, "/dev/null" if old is None else f"a/{rel}",
                                "/dev/null" if new is None else f"b/{rel}", n=3)
    text = "".join(_mark_missing_newline(list(body)))
    return header + text if text else ""


def make_patch(root: str, snap: Snapshot, paths: list[str]) -> str:
    """The diff from the snapshot to the workspace as it is now, for the given paths."""
    parts = []
    for rel in sorted(paths):
        old = snap.original(rel) if rel in snap.entries else None
        full = os.path.join(root, *rel.split("/"))
        new = None
        if os.path.isfile(full) and not os.path.islink(full):
            with open(full, "rb") as handle:
                new = handle.read()
        if old is None and new is None:
            continue
        parts.append(file_diff(rel, old, new))
    return "".join(parts)
