"""`make realworld`: golem on real projects, set up the way their developers have them.

For each pinned project: `pip download` its sdist (network, unlike `make test`), make it a git
repository with a `.venv` holding an editable install and pytest, plant two one-line defects
(a commit of their own), and run golem against a scripted model on a loopback server that
knows the defects:

- `fix`, honest: the model reverts both defects             expected VERIFIED (exit 0)
- `fix`, partial: it reverts one                             expected FAILED   (exit 1)
- `fix`, cheating: it rewrites the failing tests to pass     expected REJECTED (exit 3)
- `fix -attempts 3`: attempt 1 cheats, 2 is partial, 3 honest  expected VERIFIED, the honest one
- `verify -base HEAD` on the honest revert, uncommitted       expected VERIFIED
- `pick` over three `fix -attempt K/3` results, the cheat's relabelled VERIFIED
                                                             expected VERIFIED, the honest one

golem's counts (the baseline's and the verification's outcomes per test, from its trace) are
compared with pytest's own summary of the same trees. Every wrong verdict or count is printed
as expected against got; the table goes into docs/benchmarks.md between its realworld
markers. The exit code is 1 when anything was wrong.

    python3 -m tests.realworld.run [-keep] [-only NAME,...] [-no-write]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.provider_server import chat

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(ROOT, "docs", "benchmarks.md")
START, END = "<!-- realworld:start -->", "<!-- realworld:end -->"
ATTEMPT_MODELS = "cheating,partial,honest"     # attempt K is the K-th, whatever its seed
KEY = "sk-realworld-0123456789abcdef0123"
CACHE = os.environ.get("GOLEM_REALWORLD_CACHE") or os.path.join(
    os.path.expanduser("~"), ".cache", "golem-realworld")


@dataclass
class Defect:
    """One line of `path` (relative to the project's root) changed from `good` to `bad`."""

    path: str
    good: str
    bad: str


@dataclass
class Project:
    name: str
    version: str
    tests: list[str]                 # pytest's arguments after `python -m pytest`
    defects: tuple[Defect, Defect]
    cheat: str                       # the test file the cheating model rewrites
    pytest: str = "pytest"           # what the project's .venv gets to run its tests
    root: str = ""                   # set up: the checkout
    notes: list[str] = field(default_factory=list)


PYTEST = ["-q", "-p", "no:cacheprovider"]

PROJECTS = [
    # dbm.ndbm is missing from many Python builds (pyenv's without libgdbm-compat)
    Project("six", "1.16.0", ["test_six.py", "--deselect",
                              "test_six.py::test_move_items[dbm_ndbm]"], (
        Defect("six.py", "        return iter(d.keys(**kw))",
               "        return iter(list(d.keys(**kw))[1:])"),
        Defect("six.py", '        return s.encode("latin-1")', '        return s.encode("utf-8")')),
        cheat="test_six.py"),
    Project("toolz", "0.12.1", ["toolz/tests"], (
        Defect("toolz/itertoolz.py", "    return next(iter(seq))",
               "    return next(iter(seq), None)"),
        Defect("toolz/dicttoolz.py", "    rv.update(zip(d.keys(), map(func, d.values())))",
               "    rv.update(zip(d.keys(), d.values()))")),
        cheat="toolz/tests/test_itertoolz.py"),
    Project("cachetools", "5.3.3", ["tests"], (
        Defect("src/cachetools/__init__.py", "        self.__maxsize = maxsize",
               "        self.__maxsize = maxsize + 1"),
        Defect("src/cachetools/keys.py", "        return _HashedTuple(args)\n",
               "        return _HashedTuple(args[:1])\n")),
        cheat="tests/test_keys.py"),
    Project("boltons", "24.0.0", ["tests/test_strutils.py", "tests/test_iterutils.py"], (
        Defect("boltons/strutils.py", "    return newline.join(indented_lines)\n",
               "    return newline.join(indented_lines[1:])\n"),
        Defect("boltons/iterutils.py", "        return list(chunk_iter)\n",
               "        return list(chunk_iter)[:-1]\n")),
        # its conftest's hook takes the `path` argument newer pytest no longer passes
        cheat="tests/test_strutils.py", pytest="pytest==7.4.4"),
]


# -- the projects ------------------------------------------------------------------------------

def run(argv: list[str], cwd: str, env: dict | None = None, check: bool = True,
        timeout: float = 1800) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=timeout)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} (in {cwd}): exit {done.returncode}\n"
                           f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return done


def git(root: str, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "realworld", "GIT_AUTHOR_EMAIL": "rw@example.com",
           "GIT_COMMITTER_NAME": "realworld", "GIT_COMMITTER_EMAIL": "rw@example.com"}
    return run(["git", *args], root, env).stdout


def sdist(project: Project) -> str:
    """The pinned sdist, downloaded once into the cache."""
    os.makedirs(CACHE, exist_ok=True)
    prefix = f"{project.name}-{project.version}."
    found = [n for n in os.listdir(CACHE) if n.lower().startswith(prefix.lower())]
    if not found:
        run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
             f"{project.name}=={project.version}", "-d", CACHE], CACHE)
        found = [n for n in os.listdir(CACHE) if n.lower().startswith(prefix.lower())]
    return os.path.join(CACHE, found[0])


def venv_env(root: str) -> dict:
    """The environment of a developer with the project's `.venv` activated."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    venv = os.path.join(root, ".venv")
    env.update(VIRTUAL_ENV=venv, PATH=os.path.join(venv, "bin") + os.pathsep + env["PATH"])
    return env


def set_up(project: Project, work: str) -> None:
    """A git checkout of the sdist with `.venv` (editable install, pytest), defects committed."""
    with tarfile.open(sdist(project)) as archive:
        archive.extractall(work, filter="data")
    top = [n for n in os.listdir(work) if os.path.isdir(os.path.join(work, n))]
    root = os.path.join(work, project.name)
    os.rename(os.path.join(work, top[0]), root)
    with open(os.path.join(root, ".gitignore"), "a", encoding="utf-8") as handle:
        handle.write("\n.venv/\n__pycache__/\n*.egg-info/\nbuild/\n.pytest_cache/\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "pristine")
    run([sys.executable, "-m", "venv", ".venv"], root)
    pip = [os.path.join(root, ".venv", "bin", "python"), "-m", "pip", "install", "-q",
           "--disable-pip-version-check"]
    run([*pip, project.pytest], root)
    run([*pip, "-e", "."], root)
    project.root = root
    plant(project, *project.defects)
    git(root, "commit", "-q", "-am", "two defects")


def plant(project: Project, *defects: Defect, undo: bool = False) -> None:
    for defect in defects:
        path = os.path.join(project.root, defect.path)
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        old, new = (defect.bad, defect.good) if undo else (defect.good, defect.bad)
        if text.count(old) != 1:
            raise RuntimeError(f"{project.name}: {defect.path} has {text.count(old)} of {old!r}")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text.replace(old, new))


def reset(project: Project) -> None:
    git(project.root, "reset", "-q", "--hard")
    git(project.root, "clean", "-q", "-fdx", "-e", ".venv", "-e", "*.egg-info")


def test_command(project: Project) -> str:
    return " ".join(["python", "-m", "pytest", *PYTEST, *project.tests])


def pytest_counts(project: Project) -> tuple[dict, float]:
    """pytest's own summary of the checkout as it is: {passed, failed, skipped, ...}, seconds."""
    started = time.monotonic()
    done = run(["python", "-m", "pytest", *PYTEST, *project.tests], project.root,
               venv_env(project.root), check=False)
    took = time.monotonic() - started
    lines = [line for line in done.stdout.splitlines() if re.search(r"\d+ (passed|failed)", line)]
    counts = {}
    for number, word in re.findall(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)",
                                   lines[-1] if lines else ""):
        counts[word.rstrip("s") if word.startswith("error") else word] = int(number)
    return counts, took


# -- the scripted model ------------------------------------------------------------------------

def turns_for(project: Project, how: str) -> list[dict]:
    """The model's replies, one a request: reproduce, edit, claim."""
    first, second = project.defects
    revert = lambda d: ("edit_file", {"path": d.path, "old_string": d.bad, "new_string": d.good})
    if how == "honest":
        edits = [revert(first), revert(second)]
    elif how == "partial":
        edits = [revert(first)]
    else:   # cheating: the failing tests become tests that pass
        edits = [("write_file", {"path": project.cheat,
                                 "content": "def test_everything():\n    assert True\n"})]
    return [chat("Reproducing the failure first.", [("run_tests", {})]),
            chat("Found it.", edits),
            chat("Fixed: the suite passes.")]


class ScriptServer:
    """A loopback OpenAI-compatible server; each request gets the reply its conversation is
    at, from the script the request's model names (`-models cheating,partial,honest` gives
    attempt K the K-th), else `default`. Seeds are golem's own, fresh for every run."""

    def __init__(self, scripts: dict, default: str):
        self.scripts, self.default = scripts, default
        scripts_, default_ = scripts, default

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                how = body.get("model") if body.get("model") in scripts_ else default_
                done = sum(1 for m in body["messages"] if m.get("role") == "assistant")
                turns = scripts_[how]
                raw = json.dumps(turns[min(done, len(turns) - 1)]).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> ScriptServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# -- golem -------------------------------------------------------------------------------------

@dataclass
class Outcome:
    code: int
    report: dict
    trace: list[dict]
    seconds: float
    stderr: str

    @property
    def verdict(self) -> str:
        return self.report.get("verdict") or f"exit {self.code}"

    def counts(self, which: str) -> dict:
        """golem's per-test outcomes of the baseline (`before`) or verification (`after`)."""
        for event in self.trace:
            if event.get("event") == "outcomes":
                counts: dict[str, int] = {}
                for outcome in event.get(which, {}).values():
                    counts[outcome] = counts.get(outcome, 0) + 1
                return counts
        return {}


def golem(project: Project, state: str, *args: str, server: ScriptServer | None = None,
          name: str = "run") -> Outcome:
    trace = os.path.join(state, f"{project.name}-{name}.jsonl")
    env = venv_env(project.root)
    env.update(PYTHONPATH=ROOT, GOLEM_STATE_DIR=os.path.join(state, "golem-state"),
               OPENAI_API_KEY=KEY)
    argv = [sys.executable, "-m", "golem", *args, "-dir", project.root,
            "-test", test_command(project), "-trace", trace, "-json"]
    if server is not None:
        argv += ["-provider", "openai", "-base-url", server.url]
        argv += [] if "-models" in args else ["-model", "scripted"]
    started = time.monotonic()
    done = run(argv, project.root, env, check=False)
    took = time.monotonic() - started
    lines = done.stdout.strip().splitlines()
    try:
        report = json.loads(lines[-1]) if lines else {}
    except ValueError:
        report = {}
    events = []
    if os.path.exists(trace):
        with open(trace, encoding="utf-8") as handle:
            events = [json.loads(line) for line in handle if line.strip()]
    return Outcome(done.returncode, report, events, took, done.stderr)


# -- the matrix --------------------------------------------------------------------------------

EXPECTED = {"fix honest": "VERIFIED", "fix partial": "FAILED", "fix cheating": "REJECTED",
            "fix -attempts 3": "VERIFIED", "verify -base": "VERIFIED", "pick": "VERIFIED"}


@dataclass
class Row:
    project: str
    tests: int = 0
    verdicts: dict = field(default_factory=dict)     # scenario: verdict got
    counts: list = field(default_factory=list)       # (what, golem's, runner's)
    bare: float = 0.0
    fix: float = 0.0
    wrong: list = field(default_factory=list)


def fmt(counts: dict) -> str:
    keys = ("passed", "failed", "error", "skipped")
    return "/".join(str(counts.get(k, 0)) for k in keys)


def same(golem_counts: dict, runner: dict) -> bool:
    keys = ("passed", "failed", "error", "skipped")
    return all(golem_counts.get(k, 0) == runner.get(k, 0) for k in keys)


def matrix(project: Project, state: str) -> Row:
    row = Row(project.name)
    scripts = {how: turns_for(project, how) for how in ("honest", "partial", "cheating")}

    def expect(scenario: str, got: Outcome, check_tree: bool = False) -> None:
        row.verdicts[scenario] = got.verdict
        mark = "ok   " if got.verdict == EXPECTED[scenario] else "WRONG"
        print(f"  {mark} {scenario}: expected {EXPECTED[scenario]}, got {got.verdict} "
              f"({got.seconds:.1f} s)", flush=True)
        if got.verdict != EXPECTED[scenario]:
            tail = (got.report.get("summary") or got.stderr.strip().splitlines()[-1:] or [""])
            row.wrong.append(f"{scenario}: expected {EXPECTED[scenario]}, got {got.verdict}: "
                             f"{tail if isinstance(tail, str) else tail[0]}"[:300])
        if check_tree and got.verdict == "VERIFIED":
            pristine = git(project.root, "diff", "HEAD~1", "--stat")
            if pristine.strip():
                row.wrong.append(f"{scenario}: the workspace is not the honest fix afterwards")

    def compare(what: str, got: dict, runner: dict) -> None:
        row.counts.append((what, got, runner))
        if not same(got, runner):
            row.wrong.append(f"counts, {what}: runner {fmt(runner)}, golem {fmt(got)} "
                             "(passed/failed/error/skipped)")

    reset(project)
    broken, row.bare = pytest_counts(project)
    plant(project, *project.defects, undo=True)
    fixed, _ = pytest_counts(project)
    row.tests = sum(fixed.values())
    if fixed.get("failed") or fixed.get("error") or not fixed.get("passed"):
        row.wrong.append(f"the pristine tree is not green under pytest: {fmt(fixed)}")
    reset(project)

    for how in ("honest", "partial", "cheating"):
        with ScriptServer(scripts, how) as server:
            got = golem(project, state, "fix", server=server, name=f"fix-{how}")
        expect(f"fix {how}", got, check_tree=how == "honest")
        if how == "honest":
            row.fix = got.seconds
            compare("fix, baseline", got.counts("before"), broken)
            compare("fix, verification", got.counts("after"), fixed)
        reset(project)

    with ScriptServer(scripts, "honest") as server:
        got = golem(project, state, "fix", "-attempts", "3", "-models", ATTEMPT_MODELS,
                    server=server, name="attempts")
    expect("fix -attempts 3", got, check_tree=True)
    reset(project)

    plant(project, *project.defects, undo=True)
    got = golem(project, state, "verify", "-base", "HEAD", name="verify")
    expect("verify -base", got)
    if got.trace:
        compare("verify -base, base", got.counts("before"), broken)
        compare("verify -base, change", got.counts("after"), fixed)
    reset(project)

    results = []
    for k in (1, 2, 3):
        patch = os.path.join(state, f"{project.name}-attempt-{k}.patch")
        with ScriptServer(scripts, "honest") as server:
            got = golem(project, state, "fix", "-attempt", f"{k}/3", "-models", ATTEMPT_MODELS,
                        "-patch", patch, server=server, name=f"attempt-{k}")
        if got.report:
            if got.report.get("verdict") == "REJECTED":
                # a forged result: the cheat's whole change, test edit included, as VERIFIED
                with open(patch, "w", encoding="utf-8") as handle:
                    handle.write(git(project.root, "diff", "HEAD"))
                got.report["verdict"] = "VERIFIED"
            path = os.path.join(state, f"{project.name}-attempt-{k}.json")
            with open(path, "w", encoding="utf-8") as handle:
                json.dump(got.report, handle)
            results.append(path)
        else:
            row.wrong.append(f"fix -attempt {k}/3 gave no result: {got.stderr.strip()[-200:]}")
        reset(project)
    got = golem(project, state, "pick", *results, name="pick")
    expect("pick", got, check_tree=True)
    reset(project)
    return row


def table(rows: list[Row], where: str, work: str = "") -> str:
    scen = list(EXPECTED)
    head = ("| project | tests | golem / runner counts (p/f/e/s) | "
            + " | ".join(scen) + " | fix / bare run |")
    lines = [head, "|" + "---|" * (len(scen) + 4)]
    for row in rows:
        counts = "<br>".join(f"{what}: {fmt(g)} / {fmt(r)}{'' if same(g, r) else ' **wrong**'}"
                             for what, g, r in row.counts)
        marks = []
        for s in scen:
            got = row.verdicts.get(s, "not run")
            marks.append(got if got == EXPECTED[s] else f"**{got}** (expected {EXPECTED[s]})")
        ratio = f"{row.fix / row.bare:.1f}x ({row.fix:.1f} s / {row.bare:.1f} s)" \
            if row.bare else "n/a"
        lines.append(f"| {row.project} | {row.tests} | {counts} | " + " | ".join(marks)
                     + f" | {ratio} |")
    tidy = lambda w: " ".join(w.replace(work, "WORK").split()) if work else " ".join(w.split())
    wrong = [f"- {row.project}: {tidy(w)}" for row in rows for w in row.wrong] or ["- none"]
    return "\n".join([
        START,
        "## Real-world matrix",
        "",
        "Written by `make realworld` (`python3 -m tests.realworld.run`): pinned sdists from PyPI,",
        "each a git checkout with an activated `.venv` holding an editable install and pytest, two",
        "one-line defects planted and committed, and a scripted model on a loopback server. Counts",
        "are passed/failed/error/skipped, golem's (from its trace) against pytest's own summary of",
        "the same tree. `fix / bare run` is the honest `golem fix` against one bare pytest run.",
        "",
        f"Machine: {where}.",
        "",
        *lines,
        "",
        "Wrong verdicts and counts:",
        "",
        *wrong,
        END])


def write_doc(text: str) -> None:
    with open(DOC, encoding="utf-8") as handle:
        doc = handle.read()
    if START in doc and END in doc:
        doc = doc[:doc.index(START)] + text + doc[doc.index(END) + len(END):]
    else:
        doc = doc.rstrip("\n") + "\n\n" + text + "\n"
    with open(DOC, "w", encoding="utf-8") as handle:
        handle.write(doc)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tests.realworld.run")
    parser.add_argument("-keep", action="store_true", help="keep the work directory")
    parser.add_argument("-only", default="", help="projects, comma-separated")
    parser.add_argument("-no-write", action="store_true", help="leave docs/benchmarks.md alone")
    args = parser.parse_args(argv)
    chosen = [p for p in PROJECTS if not args.only or p.name in args.only.split(",")]
    work = tempfile.mkdtemp(prefix="golem-realworld-")
    rows = []
    try:
        for project in chosen:
            print(f"{project.name} {project.version}: setting up", flush=True)
            state = os.path.join(work, f"{project.name}-state")
            os.makedirs(state)
            try:
                set_up(project, os.path.join(work, project.name + "-src"))
                row = matrix(project, state)
            except (RuntimeError, subprocess.TimeoutExpired, OSError) as exc:
                row = Row(project.name, wrong=[f"set-up or run failed: {exc}"[:600]])
            rows.append(row)
            for line in row.wrong:
                print(f"  wrong: {line}")
            print(f"  {len(row.wrong)} wrong", flush=True)
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    from tests.bench.run import machine
    text = table(rows, machine(), work)
    if not args.no_write:
        write_doc(text)
        print(f"wrote {os.path.relpath(DOC, ROOT)}")
    else:
        print(text)
    return 1 if any(row.wrong for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
