"""A unified diff of a run's changes that `git apply` takes in the workspace."""

from __future__ import annotations

import base64
import difflib
import hashlib
import os
import re
import zlib

from golem.workflow.snapshot import Snapshot

_LINE = re.compile(rb"[^\n]*\n|[^\n]+\Z")


def _lines(data: bytes | None) -> list[str] | None:
    """Lines split on \\n only (as git does), or None for binary content."""
    if data is None:
        return []
    if b"\0" in data[:8192]:
        return None
    return [line.decode("utf-8", errors="surrogateescape") for line in _LINE.findall(data)]


def _mark_missing_newline(hunk_lines: list[str]) -> list[str]:
    out = []
    for line in hunk_lines:
        if line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n\\ No newline at end of file\n")
    return out


def _blob_id(data: bytes | None) -> str:
    if data is None:
        return "0" * 40
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _binary_hunk(data: bytes) -> str:
    """One `literal` hunk: deflated, in base85 lines of at most 52 bytes, as git writes it."""
    packed = zlib.compress(data, 9)
    rows = [f"literal {len(data)}"]
    for start in range(0, len(packed), 52):
        chunk = packed[start:start + 52]
        size = chr(ord("A") + len(chunk) - 1) if len(chunk) <= 26 else chr(ord("a") + len(chunk) - 27)
        rows.append(size + base64.b85encode(chunk, pad=True).decode("ascii"))
    return "\n".join(rows) + "\n\n"


def file_diff(rel: str, old: bytes | None, new: bytes | None) -> str:
    """The git-style diff of one file (old None: created; new None: deleted)."""
    a, b = _lines(old), _lines(new)
    header = f"diff --git a/{rel} b/{rel}\n"
    if old is None:
        header += "new file mode 100644\n"
    elif new is None:
        header += "deleted file mode 100644\n"
    if a is None or b is None:
        return (header + f"index {_blob_id(old)}..{_blob_id(new)}\nGIT binary patch\n"
                + _binary_hunk(new or b"") + _binary_hunk(old or b""))
    body = difflib.unified_diff(a, b, "/dev/null" if old is None else f"a/{rel}",
                                "/dev/null" if new is None else f"b/{rel}", n=3)
    text = "".join(_mark_missing_newline(list(body)))
    if text or old is None or new is None:
        return header + text   # an empty created or deleted file is the header alone
    return ""


def diffstat(patch: str) -> dict[str, list[int]]:
    """Lines added and removed per file in a patch made by `make_patch`."""
    stat: dict[str, list[int]] = {}
    current = None
    for line in patch.splitlines():
        if line.startswith("diff --git a/"):
            current = line[len("diff --git a/"):].split(" b/", 1)[0]
            stat[current] = [0, 0]
        elif current is None or line.startswith(("+++ ", "--- ")):
            continue
        elif line.startswith("+"):
            stat[current][0] += 1
        elif line.startswith("-"):
            stat[current][1] += 1
    return stat


def make_patch(root: str, snap: Snapshot, paths: list[str]) -> str:
    """The diff from the snapshot to the workspace as it is now, for the given paths."""
    return "".join(file_diffs(root, snap, paths).values())


def file_diffs(root: str, snap: Snapshot, paths: list[str]) -> dict[str, str]:
    """Each path's diff from the snapshot to the workspace as it is now, in path order."""
    parts = {}
    for rel in sorted(paths):
        old = snap.original(rel) if rel in snap.entries else None
        full = os.path.join(root, *rel.split("/"))
        new = None
        if os.path.isfile(full) and not os.path.islink(full):
            with open(full, "rb") as handle:
                new = handle.read()
        if old is None and new is None:
            continue
        parts[rel] = file_diff(rel, old, new)
    return parts
