"""Which files the reading tools see, and a fast line search over them.

In a git repository the listing comes from `git ls-files` (tracked and untracked files, minus
what `.gitignore` and `.git/info/exclude` list); elsewhere from a walk of the workspace. Either
way VCS directories, virtual environments, dependency and build directories are left out, and
every file is read through the workspace's confinement.

The search runs a bytes regex over whole files and confirms each hit on its own line with the
model's pattern, so results match a line-by-line search exactly; files whose line breaks are
not plain `\\n` take the line-by-line path. A time limit bounds the whole search; on the main
thread a timer signal also stops a pattern that backtracks without end on one line (the regex
engine checks for signals), elsewhere the limit is checked between files.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from golem.tools.workspace import DEFAULT_SKIP, Workspace

SKIP_DIRS = DEFAULT_SKIP | {
    ".hg", ".svn", ".nox", ".direnv", ".hypothesis", ".gradle", ".next", ".nuxt",
    ".parcel-cache", ".terraform", "htmlcov", "site-packages",
}
# Never text worth searching: skipped by name, without opening them.
BINARY_SUFFIXES = frozenset((
    "png jpg jpeg gif bmp ico webp tif tiff psd pdf zip gz tgz bz2 xz zst 7z rar jar war whl "
    "egg pyc pyo pyd so dll dylib exe o a lib obj class bin dat db sqlite sqlite3 woff woff2 "
    "ttf otf eot mp3 mp4 wav ogg flac avi mov mkv webm npy npz pkl pickle parquet h5 onnx "
    "pt ckpt safetensors").split())
GIT_TIMEOUT = 10.0
COUNT_MAX = 1000        # matches counted past the cap in the file where it was reached

# Line breaks other than \n (str.splitlines honours them, and read_file numbers by them),
# and \x1f, which only str's \s matches.
_ODD_BYTES = b"\r\x0b\x0c\x1c\x1d\x1e\x1f"
_ODD_TEXT = ("\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")
# Constructs whose meaning differs between one line and a whole buffer: lookarounds,
# atomic groups and possessive repeats, conditionals, flags turned off, \A and \Z.
_LINE_ONLY = re.compile(r"\(\?(?:<?[=!]|>|\(|[aiLmsux]*-)|\\[AZ]|[*+?}]\+")


def _skipped(name: str) -> bool:
    return name in SKIP_DIRS or name.endswith(".egg-info")


def _git_env(root: str) -> dict[str, str]:
    """Enough environment for git and nothing else: no key, no user configuration."""
    return {"PATH": os.environ.get("PATH") or "/usr/local/bin:/usr/bin:/bin",
            "HOME": os.devnull, "LC_ALL": "C", "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0",
            "GIT_OPTIONAL_LOCKS": "0",
            "GIT_CEILING_DIRECTORIES": os.path.dirname(root)}


def git_files(root: str, rel: str) -> list[str] | None:
    """Files below `rel` that git would consider (tracked or untracked, not ignored, not
    deleted), or None when `root` is not a git repository or git cannot answer."""
    if not os.path.lexists(os.path.join(root, ".git")):
        return None
    # core.fsmonitor would run a program named by the repository's own configuration (empty
    # turns it off in every git version); the work tree is pinned so a configured
    # core.worktree cannot list another directory.
    argv = ["git", "-c", "core.fsmonitor=", "--work-tree", root, "--literal-pathspecs",
            "ls-files", "-z", "-t", "--cached", "--others", "--deleted", "--exclude-standard"]
    if rel != ".":
        argv += ["--", rel]
    try:
        done = subprocess.run(argv, cwd=root, env=_git_env(root), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              timeout=GIT_TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    kept, gone = [], set()
    for entry in os.fsdecode(done.stdout).split("\0"):
        if len(entry) < 3 or entry.endswith("/"):    # nested repositories end with '/'
            continue
        if entry[0] == "R":
            gone.add(entry[2:])
        else:
            kept.append(entry[2:])
    kept.sort()
    # a path is listed once per index stage, and once more as deleted when it is gone
    return [p for i, p in enumerate(kept) if p not in gone and (i == 0 or kept[i - 1] != p)]


def files_below(workspace: Workspace, rel: str) -> list[str]:
    """Root-relative paths of the files below directory `rel`, sorted, skip rules applied.

    An explicit directory git has nothing for (an ignored build directory, say) is walked.
    """
    listed = git_files(workspace.root, rel)
    if not listed:
        return list(workspace.walk(rel, SKIP_DIRS))
    start = 0 if rel == "." else len(rel) + 1
    out, last_head, last_ok = [], None, True
    for path in listed:
        head = path.rpartition("/")[0]
        if head != last_head:   # sorted paths share directories: judge each one once
            last_head = head
            last_ok = not any(_skipped(p) for p in head[start:].split("/") if p)
        if last_ok and (".." not in path or ".." not in path.split("/")):
            out.append(path)
    return out


def _ascii(data: bytes) -> str:
    return data.decode("ascii")


def _unix(data: bytes) -> bytes | None:
    """`data` with CR LF as LF, or None when it holds other line breaks (or \\x1f)."""
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n")
    return data if len(data.translate(None, _ODD_BYTES)) == len(data) else None


class _Expired(Exception):
    """The search's time limit passed inside a regular expression."""


@dataclass
class Found:
    """What a search found: the lines, and what it knows about the rest."""

    hits: list[str] = field(default_factory=list)
    more: int = 0               # matches past the cap that were counted
    exact: bool = True          # False when files were left unsearched after the cap
    expired: bool = False       # the time limit stopped the search


class Search:
    """One search: a pattern, a cap on the lines kept, and a time limit in seconds."""

    def __init__(self, pattern: re.Pattern[str], cap: int, seconds: float,
                 render: Callable[[str, int, str], str]):
        self.line = pattern
        self.cap = cap
        self.seconds = seconds
        self.render = render
        self.found = Found()
        self.raw: re.Pattern[bytes] | None = None
        self.text: re.Pattern[str] | None = None
        if not _LINE_ONLY.search(pattern.pattern):
            self.text = re.compile(pattern.pattern, pattern.flags | re.MULTILINE)
            if pattern.pattern.isascii():
                try:
                    self.raw = re.compile(pattern.pattern.encode("ascii"), re.MULTILINE)
                except re.error:
                    self.raw = None
        # Anchors and \s see odd line breaks and \x1f differently in a buffer than in a line.
        self.sensitive = any(c in pattern.pattern for c in ("^", "$", "\\s"))
        self._in_regex = False
        self._late = False
        self._until = 0.0
        self._last: str | None = None

    # -- running with a time limit ----------------------------------------------------------

    def run(self, workspace: Workspace, paths: list[str], limit: int) -> Found:
        """Search `paths` (read at most `limit` bytes each) until done, capped or out of time."""
        self._until = time.monotonic() + self.seconds
        self._last = paths[-1] if paths else None
        alarm = (threading.current_thread() is threading.main_thread()
                 and hasattr(signal, "setitimer") and signal.getitimer(signal.ITIMER_REAL)[0] == 0)
        old = signal.signal(signal.SIGALRM, self._on_alarm) if alarm else None
        try:
            if alarm:
                signal.setitimer(signal.ITIMER_REAL, self.seconds)
            workspace.read_many(paths, limit, self._visit)
        except _Expired:
            self.found.expired = True
        finally:
            if alarm:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, old if old is not None else signal.SIG_DFL)
        if self.found.expired:
            self.found.exact = False
        return self.found

    def _on_alarm(self, signum, frame) -> None:
        # The regex engine checks for signals, so raising here stops a runaway pattern;
        # anywhere else the flag is enough, and no descriptor is left half-opened.
        self._late = True
        if self._in_regex:
            raise _Expired()

    def _visit(self, path: str, data: bytes, size: int) -> bool:
        if self._late or time.monotonic() > self._until:
            self.found.expired = True
            return False
        if not data or data.find(b"\0", 0, 8192) >= 0:
            return True
        self._in_regex = True
        try:
            if self.raw is not None and data.isascii():
                self._search_ascii(path, data)
            else:
                self._search_text(path, data.decode("utf-8", "replace"))
        finally:
            self._in_regex = False
        if len(self.found.hits) >= self.cap:
            if path != self._last:
                self.found.exact = False    # the files after this one are not searched
            return False
        return True

    # -- one file ---------------------------------------------------------------------------

    def _search_ascii(self, path: str, data: bytes) -> None:
        # Odd line breaks matter to anchors and \s; to other patterns only for numbering
        # the lines, so a file without a match at all never pays for the check.
        if not self.sensitive and self.raw.search(data) is None:
            return
        plain = _unix(data)
        if plain is None:
            self._search_text(path, data.decode("ascii"))
        else:
            self._scan(path, plain, self.raw, b"\n", _ascii)

    def _search_text(self, path: str, text: str) -> None:
        plain = text.replace("\r\n", "\n") if "\r" in text else text
        if self.text is not None and not any(c in plain for c in _ODD_TEXT):
            self._scan(path, plain, self.text, "\n", str)
            return
        for number, line in enumerate(text.splitlines(), 1):
            if self.line.search(line) and not self._keep(path, number, line):
                return

    def _scan(self, path: str, data, regex, newline, decode) -> None:
        """Whole-buffer search; each candidate line is confirmed with the line pattern."""
        pos, number, counted, end_all = 0, 1, 0, len(data)
        while pos <= end_all:
            match = regex.search(data, pos)
            if match is None:
                return
            start = data.rfind(newline, 0, match.start()) + 1
            if start >= end_all and end_all:
                return          # the empty "line" after a final newline is not a line
            end = data.find(newline, match.start())
            end = end_all if end < 0 else end
            number += data.count(newline, counted, start)
            counted = start
            line = decode(data[start:end])
            if self.line.search(line) and not self._keep(path, number, line):
                return
            pos = end + 1

    def _keep(self, path: str, number: int, line: str) -> bool:
        """Record one matching line; False once nothing more is worth counting here."""
        found = self.found
        if len(found.hits) < self.cap:
            found.hits.append(self.render(path, number, line))
            return True
        found.more += 1
        if found.more >= COUNT_MAX:
            found.exact = False
            return False
        return True
