"""A unified diff of a run's changes that `git apply` takes in the workspace.

Names are written exactly as git writes them: quoted, with C escapes and octal bytes, when
they hold a quote, a backslash, a control character or a byte outside ASCII, and with a tab
after a name that holds a space, so `git apply` recreates exactly the changed names and
nothing else (a name with a newline in it cannot smuggle a second file into the patch).
Links are diffed as git stores them (their target) and mode changes are kept. Text is diffed
only up to 1 MB a file; a larger or binary file becomes a binary patch up to 4 MB, and above
that a "Binary files ... differ" line that `git apply` refuses, so such a file is never
applied half.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import os
import re
import stat
import subprocess
import zlib

from golem.tools import tree
from golem.workflow.verifier.snapshot import Snapshot

TEXT_CAP = 1_000_000
BINARY_CAP = 4_000_000
_LINE = re.compile(rb"[^\n]*\n|[^\n]+\Z")
_ESCAPES = {7: "\\a", 8: "\\b", 9: "\\t", 10: "\\n", 11: "\\v", 12: "\\f", 13: "\\r",
            34: '\\"', 92: "\\\\"}


def base_commit(root: str) -> str | None:
    """The commit the checkout holding `root` is at (its HEAD), which a patch of this
    workspace applies to; None outside a git checkout or before its first commit."""
    env = {"PATH": os.environ.get("PATH") or "/usr/local/bin:/usr/bin:/bin",
           "HOME": os.devnull, "LC_ALL": "C", "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0",
           "GIT_OPTIONAL_LOCKS": "0"}
    try:
        done = subprocess.run(["git", "-c", "core.fsmonitor=", "rev-parse", "--verify",
                               "--quiet", "HEAD^{commit}"], cwd=root, env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    head = done.stdout.decode("ascii", errors="replace").strip()
    return head if done.returncode == 0 and re.fullmatch(r"[0-9a-f]{40,64}", head) else None


def quote(name: str) -> str:
    """`name` as git writes it in a diff (core.quotePath on)."""
    data = name.encode("utf-8", errors="surrogateescape")
    if not any(b < 0x20 or b >= 0x7F or b in (34, 92) for b in data):
        return name
    out = []
    for byte in data:
        if byte in _ESCAPES:
            out.append(_ESCAPES[byte])
        elif byte < 0x20 or byte >= 0x7F:
            out.append(f"\\{byte:03o}")
        else:
            out.append(chr(byte))
    return '"' + "".join(out) + '"'


def _side(prefix: str, rel: str, line: bool = False) -> str:
    text = quote(prefix + rel)
    return text + ("\t" if line and " " in rel and not text.startswith('"') else "")


def _lines(data: bytes) -> list[str] | None:
    """Lines split on \\n only (as git does), or None for content to treat as binary."""
    if b"\0" in data[:8192] or len(data) > TEXT_CAP:
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


def _git_mode(mode: int | None, link: bool) -> str:
    if link:
        return "120000"
    return "100755" if mode is not None and mode & 0o111 else "100644"


def file_diff(rel: str, old: bytes | None, new: bytes | None, old_mode: int | None = None,
              new_mode: int | None = None, old_link: bool = False,
              new_link: bool = False) -> str:
    """The git-style diff of one file (old None: created; new None: deleted). A link's
    content is its target; `*_mode` are permission bits."""
    a_mode, b_mode = _git_mode(old_mode, old_link), _git_mode(new_mode, new_link)
    header = f"diff --git {_side('a/', rel)} {_side('b/', rel)}\n"
    if old is None:
        header += f"new file mode {b_mode}\n"
    elif new is None:
        header += f"deleted file mode {a_mode}\n"
    elif a_mode != b_mode:
        header += f"old mode {a_mode}\nnew mode {b_mode}\n"
    if old is not None and new is not None and old == new:
        return header if a_mode != b_mode else ""
    a = [] if old is None else _lines(old)
    b = [] if new is None else _lines(new)
    if a is None or b is None:
        if len(old or b"") > BINARY_CAP or len(new or b"") > BINARY_CAP:
            return (header + f"Binary files {_side('a/', rel) if old is not None else '/dev/null'}"
                    f" and {_side('b/', rel) if new is not None else '/dev/null'} differ\n")
        return (header + f"index {_blob_id(old)}..{_blob_id(new)}\nGIT binary patch\n"
                + _binary_hunk(new or b"") + _binary_hunk(old or b""))
    body = difflib.unified_diff(a, b, "/dev/null" if old is None else _side("a/", rel, True),
                                "/dev/null" if new is None else _side("b/", rel, True), n=3,
                                lineterm="\n")
    text = "".join(_mark_missing_newline(list(body)))
    if text or old is None or new is None:
        return header + text   # an empty created or deleted file is the header alone
    return ""


def diffstat(diffs: dict[str, str]) -> dict[str, list[int]]:
    """Lines added and removed per file, from `file_diffs`."""
    stat_: dict[str, list[int]] = {}
    for rel, text in diffs.items():
        added = removed = 0
        in_hunk = False
        for line in text.splitlines():
            if line.startswith("@@"):
                in_hunk = True
            elif in_hunk and line.startswith("+"):
                added += 1
            elif in_hunk and line.startswith("-"):
                removed += 1
        stat_[rel] = [added, removed]
    return stat_


def _current(root: str, rel: str) -> tuple[bytes | None, int | None, bool]:
    """(content, mode, is a link) of `rel` now, read without following a link; a file over
    the binary cap is read only far enough to know it."""
    try:
        parts, name = tree.split(rel)
        dir_fd = tree.open_dir(root, parts)
    except (OSError, tree.TreeError):
        return None, None, False
    try:
        info = tree.lstat_at(dir_fd, name)
        if info is None:
            return None, None, False
        if stat.S_ISLNK(info.st_mode):
            return os.fsencode(os.readlink(name, dir_fd=dir_fd)), None, True
        if not stat.S_ISREG(info.st_mode):
            return None, None, False
        fd, info = tree.open_file(dir_fd, name)
        try:
            return tree.read_limited(fd, BINARY_CAP + 1), stat.S_IMODE(info.st_mode), False
        finally:
            os.close(fd)
    except OSError:
        return None, None, False
    finally:
        os.close(dir_fd)


def make_patch(root: str, snap: Snapshot, paths: list[str]) -> str:
    """The diff from the snapshot to the workspace as it is now, for the given paths."""
    return "".join(file_diffs(root, snap, paths).values())


def file_diffs(root: str, snap: Snapshot, paths: list[str]) -> dict[str, str]:
    """Each path's diff from the snapshot to the workspace as it is now, in path order."""
    parts = {}
    for rel in sorted(paths):
        entry = snap.entries.get(rel)
        old, old_mode, old_link = None, None, False
        if entry is not None:
            old_link = entry.is_link
            try:
                old = os.fsencode(entry.link_target) if old_link else snap.original(rel)
            except OSError:
                old = None          # the kept copy is damaged: say only that it differs
            old_mode = entry.mode
        new, new_mode, new_link = _current(root, rel)
        if entry is not None and old is None:     # too large to have been kept
            side = _side("b/", rel) if new is not None else "/dev/null"
            diff = (f"diff --git {_side('a/', rel)} {_side('b/', rel)}\n"
                    + ("" if new is not None else f"deleted file mode {_git_mode(old_mode, False)}\n")
                    + f"Binary files {_side('a/', rel)} and {side} differ\n")
            parts[rel] = diff
            continue
        if old is None and new is None:
            continue
        diff = file_diff(rel, old, new, old_mode, new_mode, old_link, new_link)
        if diff:
            parts[rel] = diff
    return parts
