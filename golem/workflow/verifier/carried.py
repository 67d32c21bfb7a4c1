"""Test tools' own state, carried from the baseline into every graded copy.

Some test tools keep what they learnt between runs in the tree they run in: Hypothesis keeps
the examples that failed (and a corpus of others) in `.hypothesis/`, and replays them first
on the next run. A graded copy holds no cache directory (snapshot.py), so without this each
graded run would start from nothing: slower than the developer's own second run, and blind
to a failing example the baseline's run saved.

What is carried is the state as the baseline's run left it in the workspace, before any
command of the agent ran: golem reads it at the end of the baseline (regular files only,
never through a link, within a size limit) and keeps it in its own memory, so nothing the
agent does later can change it. Each graded copy gets those files afresh before its run; what
the run writes there stays in that copy. Nothing the agent's commands write to the
workspace's own `.hypothesis/` reaches a graded run.
"""

from __future__ import annotations

import os
import stat

from golem.tools import tree

# top-level directories of the run's working directory whose content is carried
KEPT = (".hypothesis",)
MAX_FILES = 10_000
MAX_BYTES = 16 * 1024 * 1024


def take(cwd: str) -> tuple[dict[str, bytes], str | None]:
    """The files of the KEPT directories below `cwd` (path relative to `cwd` -> content),
    and None; or nothing and why, for state that cannot be read whole or is too large (the
    graded runs then start without it, as before)."""
    found: dict[str, bytes] = {}
    total = 0
    for name in KEPT:
        try:
            info = os.lstat(os.path.join(cwd, name))
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode):
            continue
        try:
            for item in tree.walk(os.path.join(cwd, name), max_entries=4 * MAX_FILES):
                if item.kind != "file":
                    continue
                if len(found) >= MAX_FILES or total + item.info.st_size > MAX_BYTES:
                    return {}, _too_large(name)
                fd, _ = tree.open_file(item.dir_fd, item.name)
                try:
                    data = tree.read_limited(fd, MAX_BYTES - total + 1)
                finally:
                    os.close(fd)
                total += len(data)
                if total > MAX_BYTES:
                    return {}, _too_large(name)
                found[f"{name}/{item.rel}"] = data
        except (OSError, tree.TreeError) as exc:
            return {}, f"{name} could not be read whole ({exc})"
    return found, None


def _too_large(name: str) -> str:
    return f"{name} holds more than {MAX_FILES:,} files or {MAX_BYTES // (1024 * 1024)} MiB"


def place(root: str, files: dict[str, bytes]) -> str | None:
    """Write `files` into the copy at `root` (never through a link); None, or why not."""
    try:
        with tree.Writer(root) as writer:
            for rel, data in sorted(files.items()):
                writer.write(rel, data)
    except (OSError, tree.TreeError) as exc:
        return str(exc)
    return None


def discarded(root: str, files: dict[str, bytes], reads: dict[str, set]) -> str | None:
    """Why a graded run in the copy at `root` is no evidence because of what it did to the
    state golem placed there, or None. The tool rewrites its own state as it runs (Hypothesis
    deletes the saved examples that no longer fail, and its index of them), but only as it
    uses it: a run that removed or changed what golem placed, and read none of it (the
    driver's read records, `reads`), threw it away unseen. Code under test shares the
    tool's process, so this sees the plain form only: code that reads a file first, or
    turns the tool's database off, is not seen."""
    if any(rel in reads for rel in files):
        return None
    for rel, data in sorted(files.items()):
        now = tree.read_file(root, rel, len(data) + 1)
        if now is None or now[0] != data:
            return (f"the test tools' state golem put in its copy ({rel}) was removed or "
                    "changed, and the run read none of it: a run that discards it unseen is "
                    "not evidence")
    return None
