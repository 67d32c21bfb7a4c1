"""Whole suites under `golem fix`: each graded run against a bare run, `fix` against three
bare runs, and the disk the attempts' copies take.

Every suite is a real git checkout with one planted one-line defect (its own commit) that fails
a few tests; a loopback model edits the line back, runs the tests and answers. The graded
runs' durations come from the trace of that real `golem fix -json -trace FILE`. The real
project is a pinned sdist fetched once into a cache outside the repository (`pip download`,
its sha256 checked); without the network, or without pip, its rows say "not measured" and why.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass

from tests.bench.run import (ROOT, Figure, _call, _many_methods, _many_tests,  # noqa: E402
                             answer_reply, make_tree)
from tests.bench.server import ScriptServer

GIT_ID = ["-c", "user.name=bench", "-c", "user.email=bench@example.com",
          "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false"]
IGNORED = "__pycache__/\n.pytest_cache/\n.hypothesis/\n.benchmarks/\n"
UNITTEST = "python3 -m unittest discover -s tests"

# the real project: idna's sdist, most of its ~6,400 tests methods of one generated class
REAL = "idna", "3.20", "a7db850025b95ded1eae8a46181a1a6c56c92c96f0e2b005d9ff8dc0210cab44"
REAL_DEFECT = "idna/compat.py", "    return encode(label)\n", "    return encode(label)[:-1]\n"


@dataclass
class Defect:
    """One line of `path` changed from `good` to `bad` (and the model's edit back)."""

    path: str
    good: str
    bad: str


# -- checkouts -------------------------------------------------------------------------------

def git(root: str, *args: str) -> str:
    return subprocess.run(["git", *GIT_ID, *args], cwd=root, capture_output=True, text=True,
                          check=True).stdout


def commit_with_defect(root: str, defect: Defect) -> None:
    """`root` as a git checkout: the project committed, then `defect` planted and committed."""
    with open(os.path.join(root, ".gitignore"), "a", encoding="utf-8") as handle:
        handle.write(IGNORED)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "the project")
    path = os.path.join(root, defect.path)
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    if text.count(defect.good) != 1:
        raise RuntimeError(f"{defect.path}: the line to break is not there exactly once")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text.replace(defect.good, defect.bad))
    git(root, "commit", "-q", "-am", "a defect")


def _triple(root: str) -> Defect:
    """A second function and three tests of it, beside a generated suite: the defect breaks
    these three tests and leaves the generated ones alone."""
    with open(os.path.join(root, "calc.py"), "a", encoding="utf-8") as handle:
        handle.write("\n\ndef triple(x):\n    return 3 * x\n")
    with open(os.path.join(root, "tests", "test_triple.py"), "w", encoding="utf-8") as handle:
        handle.write("import unittest\n\nimport calc\n\n\nclass Triple(unittest.TestCase):\n"
                     + "".join(f"    def test_{i}(self):\n        self.assertEqual("
                               f"calc.triple({i}), {3 * i})\n\n" for i in (1, 2, 3)))
    return Defect("calc.py", "    return 3 * x\n", "    return 3 * x + 1\n")


# -- timing a suite ---------------------------------------------------------------------------

def events(path: str) -> list[dict]:
    """The events of a trace file."""
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _when(event: dict) -> float:
    return datetime.datetime.fromisoformat(event["time"]).timestamp()


def trace_times(path: str) -> dict[str, float]:
    """Seconds taken by the parts of one `fix`, from its trace's timestamps (events carry the
    time they were written, to the millisecond, and no durations): `baseline` (its phase event
    to its result), `verification` (its phase event to its result: the copy rebuilt and the
    graded run), `prepare` (the phase event to the note that the copy is rebuilt: the checks
    of the changes, then the copy), and
    `agent_tests` (the model's `run_tests`, call to result)."""
    times: dict[str, float] = {}
    started: dict[str, float] = {}
    for event in events(path):
        kind = event.get("event")
        if kind == "phase":
            started[event.get("name")] = _when(event)
        elif kind in ("baseline", "verification") and kind in started:
            times[kind] = _when(event) - started[kind]
        elif kind == "note" and "verification" in started and "applied" in event:
            times["prepare"] = _when(event) - started["verification"]
        elif kind == "tool_call" and event.get("name") == "run_tests":
            started["agent_tests"] = _when(event)
        elif kind == "tool_result" and event.get("name") == "run_tests":
            times["agent_tests"] = _when(event) - started.pop("agent_tests")
    return times


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def _bare(root: str, argv: list[str]) -> float:
    """Seconds of one bare run of the suite in `root`, its output read (as golem, CI and a
    terminal read it); bytecode written beside the sources, as a developer's Python does."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=root, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    took = time.perf_counter() - start
    if done.returncode not in (0, 1):      # 1: the planted defect's failures
        raise RuntimeError(f"the bare run did not run the suite (exit {done.returncode}): "
                           f"{done.stdout[-1500:].decode(errors='replace')}")
    return took


def _fix(repo: str, state: str, command: str, defect: Defect, trace: str,
         extra: tuple[str, ...] = (), env: dict | None = None) -> tuple[float, dict]:
    """One scripted `golem fix` of `repo` (edit the defect back, run the tests, answer):
    its wall-clock seconds and its JSON result."""
    edit = {"path": defect.path, "old_string": defect.bad.strip("\n"),
            "new_string": defect.good.strip("\n")}
    script = [_call(0, "edit_file", edit), _call(1, "run_tests", {}),
              answer_reply(f"Fixed {defect.path}.")]
    env = {**(env or os.environ), "GOLEM_STATE_DIR": state, "OPENAI_API_KEY": "bench"}
    with ScriptServer(script) as server:
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "golem", "fix", "-dir", repo, "-test",
                               command, "-provider", "openai", "-base-url", server.url,
                               "-json", "-trace", trace, *extra],
                              cwd=ROOT, env=env, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL)
        took = time.perf_counter() - start
    try:        # the verdict's line, then the JSON result on the last line
        result = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        result = {}
    if result.get("verdict") != "VERIFIED":
        raise RuntimeError(f"the scripted fix was not VERIFIED: {done.stdout[-800:]}"
                           f"{done.stderr[-1500:]}")
    return took, result


def suite_figures(label: str, build, command: str, repeats: int = 3,
                  runner_note: str = "") -> list[Figure]:
    """`build(root)` makes the project and returns its defect; the graded run against a bare
    run, and `fix` against three bare runs, wall-clock medians of `repeats` rounds after one
    dropped warm-up round (bare run and `fix` interleaved in each round)."""
    loads = [_load()]
    with tempfile.TemporaryDirectory() as tmp:
        original = os.path.join(tmp, "original")
        os.makedirs(original)
        defect = build(original)
        commit_with_defect(original, defect)
        bare_repo = os.path.join(tmp, "bare")
        git(tmp, "clone", "-q", original, bare_repo)
        argv = command.split()
        state = os.path.join(tmp, "state")     # one for all rounds: golem keeps its caches
        bares, fixes, traces = [], [], []
        _bare(bare_repo, argv)                 # the bare runs' bytecode written
        for round_ in range(repeats + 1):
            bare = _bare(bare_repo, argv)
            repo = os.path.join(tmp, f"fix{round_}")
            git(tmp, "clone", "-q", original, repo)
            trace = os.path.join(tmp, f"trace{round_}.jsonl")
            took, result = _fix(repo, state, command, defect, trace)
            if round_:
                bares.append(bare)
                fixes.append(took)
                traces.append(trace_times(trace))
        tests = sum((result.get("tests", {}).get("after", {}).get("counts") or {}).values())
    loads.append(_load())
    bare, fix = statistics.median(bares), statistics.median(fixes)
    part = {k: statistics.median(t[k] for t in traces if k in t)
            for k in ("baseline", "verification", "prepare", "agent_tests")
            if any(k in t for t in traces)}
    graded = part.get("verification", float("nan"))
    name = f"{label} ({tests:,} tests)"
    how = (f"`{command}`{runner_note}; a git checkout, one planted one-line defect "
           f"({defect.path}) failing a few tests; the model edits it back, runs the tests and "
           f"answers (a loopback model). Wall-clock medians of {repeats} rounds after one "
           "dropped warm-up round (bare runs with their `__pycache__` warm; golem with its "
           "own caches, one state directory for every round); the graded run is "
           "`fix`'s verification, from its trace's timestamps (its phase event to its result: "
           "the checks of the changes and the copy, "
           f"{part.get('prepare', 0):.2f} s to the note that the copy is rebuilt, then the "
           f"graded run and golem's reading of it); the baseline took "
           f"{part.get('baseline', 0):.2f} s and the model's "
           f"`run_tests` {part.get('agent_tests', 0):.2f} s; load average "
           f"{loads[0]} before, {loads[1]} after (1/5/15 min, {os.cpu_count()} cores)")
    return [
        Figure(f"suite: graded / bare run, {name}",
               f"{graded / bare:.2f}x ({graded:.2f} s / {bare:.2f} s)", "at most 1.1x",
               graded <= 1.1 * bare, how),
        Figure(f"suite: `fix` / three bare runs, {name}",
               f"{fix / (3 * bare):.2f}x ({fix:.2f} s / 3 x {bare:.2f} s)",
               "within 1.3x of three bare runs plus 1 s", fix <= 1.3 * 3 * bare + 1.0,
               "the same rounds: `golem fix` start to exit, against the median bare run"),
    ]


def _one_class(methods: int):
    def build(root: str) -> Defect:
        _many_methods(root, methods)
        return _triple(root)
    return build


def _small_tests(tests: int):
    def build(root: str) -> Defect:
        _many_tests(root, tests)
        return _triple(root)
    return build


def suite_one_class(methods: int = 10_000, repeats: int = 5) -> list[Figure]:
    """One generated class of `methods` test methods, plus three tests the defect breaks."""
    return suite_figures("one class", _one_class(methods), UNITTEST, repeats)


def suite_many_tests(tests: int = 50_000, repeats: int = 5) -> list[Figure]:
    """`tests` small generated tests (50 to a class), plus three tests the defect breaks."""
    return suite_figures("many small tests", _small_tests(tests), UNITTEST, repeats)


# -- the real project -------------------------------------------------------------------------

def cache_dir() -> str:
    """Where fetched sdists are kept: `$GOLEM_BENCH_CACHE`, else `$XDG_CACHE_HOME/golem-bench`,
    else `~/.cache/golem-bench`; never inside the repository."""
    return os.environ.get("GOLEM_BENCH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "golem-bench")


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def real_sdist(fetch: bool = True) -> tuple[str | None, str]:
    """The pinned sdist's path in the cache and "", or None and why it is not there. A file
    whose sha256 is not the pinned one is never used (a fetched one is removed)."""
    name, version, sha = REAL
    cache = cache_dir()
    path = os.path.join(cache, f"{name}-{version}.tar.gz")
    if os.path.exists(path):
        if _sha256(path) == sha:
            return path, ""
        if not fetch:
            return None, f"the cached {os.path.basename(path)} does not have the pinned sha256"
        os.remove(path)
    if not fetch:
        return None, f"{name} {version}'s sdist is not in {cache} and fetching is off"
    os.makedirs(cache, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as part:
        try:
            done = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                                   "--no-binary", ":all:", "--timeout", "20", "--retries", "1",
                                   f"{name}=={version}", "-d", part],
                                  capture_output=True, text=True, stdin=subprocess.DEVNULL,
                                  timeout=600)
        except subprocess.TimeoutExpired:
            return None, f"`pip download {name}=={version}` did not finish in 600 s"
        got = os.path.join(part, os.path.basename(path))
        if done.returncode != 0 or not os.path.exists(got):
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return None, f"`pip download {name}=={version}` failed (no network?): {last[:200]}"
        if _sha256(got) != sha:
            return None, f"the downloaded {os.path.basename(path)} does not have the pinned sha256"
        os.replace(got, path)
    return path, ""


def _has(module: str) -> bool:
    return subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True,
                          stdin=subprocess.DEVNULL).returncode == 0


def suite_real_project(repeats: int = 3, tests: tuple[str, ...] = (), fetch: bool = True,
                       runner: str = "pytest") -> list[Figure]:
    """idna's pinned sdist as a git checkout with its one planted defect, under `runner`:
    pytest (what the project's CI runs) or unittest (its tests are unittest classes);
    `tests` narrows the run to those files (the benchmark's own test runs one small file).
    Without the sdist (no network, no pip, a wrong hash): "not measured", and why."""
    name, version, sha = REAL
    label = f"real project: {name} {version} under {runner}"
    names = (f"suite: graded / bare run, {label}", f"suite: `fix` / three bare runs, {label}")
    targets = ("at most 1.1x", "within 1.3x of three bare runs plus 1 s")
    path, why = real_sdist(fetch)
    if path is not None and runner == "pytest" and not _has("pytest"):
        path, why = None, "pytest is not installed for this Python"
    if path is None:
        return [Figure(n, "not measured", t, None, why) for n, t in zip(names, targets)]
    if runner == "pytest":
        command = " ".join(["python3", "-m", "pytest", *tests])
        note = " (what the project's CI runs"
    else:
        modules = [t[:-3].replace("/", ".") for t in tests]
        command = " ".join(["python3", "-m", "unittest", *modules]) if tests else \
            "python3 -m unittest discover -s tests -t ."
        note = " (its tests are unittest classes"
    note += f"; the sdist's sha256 {sha[:12]}... checked)"
    properties = "tests/test_idna_properties.py"
    if not _has("hypothesis"):
        note += f"; hypothesis is not installed, so {properties} is left out of the checkout"

    def build(root: str) -> Defect:
        with tarfile.open(path) as archive:
            safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            archive.extractall(root + ".x", **safe)
        top = os.path.join(root + ".x", f"{name}-{version}")
        for entry in os.listdir(top):
            shutil.move(os.path.join(top, entry), root)
        shutil.rmtree(root + ".x")
        if "left out" in note:
            os.remove(os.path.join(root, properties))
        return Defect(*REAL_DEFECT)

    figures = suite_figures(label, build, command, repeats, note)
    for figure, wanted in zip(figures, names):    # the rows keep their names at any count
        figure.how = f"{figure.name.split(', ', 1)[1]}: {figure.how}"
        figure.name = wanted
    return figures


def suite_real_project_unittest(repeats: int = 3, tests: tuple[str, ...] = (),
                                fetch: bool = True) -> list[Figure]:
    """The real project under `python3 -m unittest discover`."""
    return suite_real_project(repeats, tests, fetch, runner="unittest")


# -- the attempts' disk -----------------------------------------------------------------------

def _usage(paths: list[str], seen: set | None = None) -> tuple[int, int]:
    """Bytes on disk under `paths` (each inode once, hard links and all, and none already in
    `seen`) and files seen."""
    seen = set() if seen is None else seen
    total, stack = 0, list(paths)
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue            # removed while we looked
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
            if (info.st_dev, info.st_ino) not in seen:
                seen.add((info.st_dev, info.st_ino))
                total += info.st_blocks * 512
    return total, len(seen)


def _fs_used(path: str) -> int:
    info = os.statvfs(path)
    return (info.f_blocks - info.f_bfree) * info.f_frsize


class DiskSampler:
    """`with DiskSampler({"scratch": a, "state": b}) as s:` measures the directories from a
    thread, `interval` seconds after each walk ends, and keeps the peak bytes on disk of each
    and of all together (GNU `du` where it is installed, else a walk in Python)."""

    def __init__(self, roots: dict[str, str], interval: float = 0.05, fs: str | None = None):
        self.roots, self.interval = roots, interval
        self.du = shutil.which("du")    # GNU du: a walk in C, far lighter than one in Python
        self.peak = {name: 0 for name in [*roots, "all"]}
        # with `fs`: also the file system's own count of blocks in use, above where it
        # started (shared extents once: what a walk cannot see)
        self.fs, self.fs_start = fs, _fs_used(fs) if fs else 0
        self.peak["fs"] = 0
        self.walks, self.walking = 0, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def sample(self) -> None:
        start = time.perf_counter()
        seen: set = set()
        sizes = self._du() if self.du else {n: _usage([p], seen)[0]
                                            for n, p in self.roots.items()}
        for name, used in sizes.items():
            self.peak[name] = max(self.peak[name], used)
        if self.fs:
            self.peak["fs"] = max(self.peak["fs"], _fs_used(self.fs) - self.fs_start)
        self.peak["all"] = max(self.peak["all"], sum(sizes.values()))
        self.walks += 1
        self.walking += time.perf_counter() - start

    def _du(self) -> dict[str, int]:
        """Each root's bytes on disk by `du -s -B1` (an inode under two roots counts once,
        in the first; files removed during the walk are skipped)."""
        done = subprocess.run([self.du, "-s", "-B1", *self.roots.values()],
                              capture_output=True, text=True, stdin=subprocess.DEVNULL)
        sizes = dict.fromkeys(self.roots, 0)
        where = {path: name for name, path in self.roots.items()}
        for line in done.stdout.splitlines():
            size, _, path = line.partition("\t")
            if path in where and size.isdigit():
                sizes[where[path]] = int(size)
        return sizes

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def __enter__(self) -> "DiskSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()


def copy_times(path: str) -> tuple[list[float], list[float]]:
    """From a trace of `fix -attempts N`: each attempt's private copy (the note announcing
    the attempts to the attempt's `run_start`: the copy built and its scratch made) and each
    verification copy (the attempt's `run_end` to its "verification copy rebuilt" note)."""
    begun = None
    private, verify, ends = [], [], {}
    for event in events(path):
        kind, attempt = event.get("event"), event.get("attempt")
        if kind == "note" and "attempts" in event and attempt is None:
            begun = _when(event)
        elif kind == "run_start" and begun is not None:     # one attempt: no private copy
            private.append(_when(event) - begun)
        elif kind == "run_end":
            ends[attempt] = _when(event)
        elif kind == "note" and "applied" in event and attempt in ends:
            verify.append(_when(event) - ends[attempt])
    return private, verify


def _disk_repo(root: str, files: int) -> Defect:
    """`files` generated source files, a calculator and its test (the defect's)."""
    make_tree(os.path.join(root, "src"), files - 3)
    os.makedirs(os.path.join(root, "tests"))
    with open(os.path.join(root, "calc.py"), "w", encoding="utf-8") as handle:
        handle.write("def add(a, b):\n    return a + b\n")
    with open(os.path.join(root, "tests", "test_calc.py"), "w", encoding="utf-8") as handle:
        handle.write("import unittest\n\nfrom calc import add\n\n\nclass T(unittest.TestCase):\n"
                     "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n")
    return Defect("calc.py", "    return a + b\n", "    return a - b\n")


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


def attempts_disk_reflink(files: int = 5_000, counts: tuple[int, ...] = (1, 3, 8)) \
        -> list[Figure]:
    """`attempts_disk` on a file system with reflinks, named by $GOLEM_BENCH_REFLINK_DIR (a
    directory on XFS or Btrfs, e.g. a loop device made for it): the copies share the
    snapshot's blocks there."""
    where = os.environ.get("GOLEM_BENCH_REFLINK_DIR", "")
    why = "" if where else "GOLEM_BENCH_REFLINK_DIR is not set"
    if where and not _reflinks(where):
        why = f"{where} cannot share blocks between files (no reflinks)"
    if why:
        return [Figure(f"attempts: file system blocks in use, `fix -attempts {count}`, "
                       f"{files:,}-file repository, with reflinks", "not measured",
                       "under 1.2x the tree per attempt", None, f"not measured: {why}")
                for count in counts]
    return attempts_disk(files, counts, on=where)


def _reflinks(where: str) -> bool:
    import fcntl
    with tempfile.TemporaryDirectory(dir=where) as tmp:
        first, second = os.path.join(tmp, "a"), os.path.join(tmp, "b")
        with open(first, "wb") as handle:
            handle.write(b"x" * 65536)
        with open(first, "rb") as src, open(second, "wb") as dst:
            try:
                fcntl.ioctl(dst.fileno(), 0x40049409, src.fileno())     # FICLONE
            except OSError:
                return False
    return True


def attempts_disk(files: int = 5_000, counts: tuple[int, ...] = (1, 3, 8),
                  on: str | None = None) -> list[Figure]:
    """Peak disk golem writes (its scratch under TMPDIR, its state directory) for
    `fix -attempts N` on a generated `files`-file git checkout, N in `counts`; with `on`
    (a directory on a file system with reflinks), everything is made there and the figure is
    the file system's own count of blocks in use."""
    figures = []
    with tempfile.TemporaryDirectory(dir=on) as tmp:
        original = os.path.join(tmp, "original")
        os.makedirs(original)
        defect = _disk_repo(original, files)
        commit_with_defect(original, defect)
        tree, _ = _usage([original])
        tree -= _usage([os.path.join(original, ".git")])[0]
        for count in counts:
            base = os.path.join(tmp, f"n{count}")
            scratch, state = os.path.join(base, "tmp"), os.path.join(base, "state")
            os.makedirs(scratch), os.makedirs(state)
            repo = os.path.join(base, "repo")
            git(tmp, "clone", "-q", original, repo)
            models = [f"m{i}" for i in range(1, count + 1)]
            edit = {"path": defect.path, "old_string": defect.bad.strip("\n"),
                    "new_string": defect.good.strip("\n")}
            script = lambda: [_call(0, "edit_file", edit), _call(1, "run_tests", {}),
                              answer_reply("Fixed.")]
            trace = os.path.join(base, "trace.jsonl")
            env = {**os.environ, "TMPDIR": scratch, "GOLEM_STATE_DIR": state,
                   "OPENAI_API_KEY": "bench"}
            argv = [sys.executable, "-m", "golem", "fix", "-dir", repo, "-test", UNITTEST,
                    "-provider", "openai", "-json", "-trace", trace, "-attempts", str(count),
                    *(["-models", ",".join(models)] if count > 1 else ["-model", models[0]])]
            load = _load()
            with ScriptServer([], by_model={m: script() for m in models}) as server, \
                    DiskSampler({"scratch": scratch, "state": state}, fs=on) as sampler:
                start = time.perf_counter()
                done = subprocess.run([*argv, "-base-url", server.url], cwd=ROOT, env=env,
                                      capture_output=True, text=True, stdin=subprocess.DEVNULL)
                took = time.perf_counter() - start
            if '"verdict": "VERIFIED"' not in done.stdout:
                raise RuntimeError(f"fix -attempts {count} was not VERIFIED: "
                                   f"{done.stdout[-800:]}{done.stderr[-1500:]}")
            private, verify = copy_times(trace)
            jobs = next((e["jobs"] for e in events(trace) if "jobs" in e), 1)
            copies = (f"private copies {statistics.median(private):.2f} s (median of "
                      f"{len(private)})" if private else "no private copy (the workspace)")
            copies += (f", verification copies {statistics.median(verify):.2f} s"
                       if verify else "")
            peak = sampler.peak
            if on:
                figures.append(Figure(
                    f"attempts: file system blocks in use, `fix -attempts {count}`, "
                    f"{files:,}-file repository, with reflinks",
                    f"{_mib(peak['fs'])} ({peak['fs'] / tree:.2f}x the tree's {_mib(tree)}; "
                    f"{peak['fs'] / tree / count:.2f}x an attempt); {copies}; {took:.1f} s",
                    "under 1.2x the tree per attempt", peak["fs"] <= 1.2 * count * tree,
                    f"the peak rise in blocks in use (statvfs) of a file system with reflinks "
                    f"({on}), where the checkout, TMPDIR and GOLEM_STATE_DIR all are, "
                    f"sampled {sampler.interval * 1000:.0f} ms after each walk; a walk "
                    f"counts {_mib(peak['all'])} at the peak, each reflinked file whole; "
                    f"the tree is the checkout without `.git` ({files:,} files); {jobs} "
                    f"attempt(s) at a time; load average {load}"))
                continue
            figures.append(Figure(
                f"attempts: peak scratch disk, `fix -attempts {count}`, {files:,}-file "
                "repository",
                f"{_mib(peak['scratch'])} ({peak['scratch'] / tree:.1f}x the tree's "
                f"{_mib(tree)}); state {_mib(peak['state'])}; {copies}; {took:.1f} s",
                "scratch under 0.1x the tree per attempt", peak["scratch"] <= 0.1 * count * tree,
                f"bytes on disk (st_blocks, each inode once) under a fresh TMPDIR, where golem "
                f"makes every copy and scratch, and a fresh GOLEM_STATE_DIR (its snapshot "
                f"store, run directory and bytecode cache), measured by "
                f"{'`du -s -B1`' if sampler.du else 'a walk'} from a thread, "
                f"{sampler.interval * 1000:.0f} ms after each walk ended ({sampler.walks} "
                f"walks, {sampler.walking / max(1, sampler.walks) * 1000:.0f} ms each on "
                "average); the "
                f"tree is the checkout without `.git` ({files:,} files); {jobs} attempt(s) at "
                "a time (the default `-jobs`); copy times from the trace's timestamps (the "
                "note announcing the attempts to each attempt's `run_start`, each `run_end` to "
                f"its \"verification copy rebuilt\" note); load average {load}"))
    return figures
