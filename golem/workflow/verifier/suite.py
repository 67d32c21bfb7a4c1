"""The test command, and what each test did when golem ran it.

Outcomes never come from stdout that the code under test could forge. unittest runs under
golem's driver and pytest under golem's launcher and plugin (helpers/), started in isolated
mode from a read-only directory: they stream one record per finished test over a pipe golem
reads during the run, so nothing that runs later (an atexit hook) can rewrite them, and a
run that ends without its last record did not finish. Every other runner's evidence is read
by its own module in golem/workflow/verifier/runners/ (`node --test` and jest write result
files, `go test -json` an event stream on stdout, cargo's harness its human output); a
command no runner claims is judged by its exit code alone, and the verdict says so.

golem runs the suite the same way every time, as fixed at the baseline (`Plan`): the test
interpreter or program by its absolute path, and for pytest the configuration file, rootdir
and confcutdir the baseline used, given explicitly, so nothing above the directory the suite
runs in is searched for runner configuration. Which command runs when `-test` is absent is
the runners' to say (runners/__init__.py, `detect`).
"""

from __future__ import annotations

import collections
import hashlib
import hmac
import itertools
import json
import os
import shutil
from dataclasses import dataclass, field

from golem.core.errors import UsageError
from golem.tools import process, tree
from golem.workflow.verifier import runners
from golem.workflow.verifier.interpreter import Interpreter
from golem.workflow.verifier.runners import (RUNNERS, TestCommand, detect, is_python,
                                             parse_command, runner_of)
from golem.workflow.verifier.runners.pytest import PYTEST_VALUE_OPTIONS, pytest_split
from golem.workflow.verifier.scratch import RunScratch

# the names other modules import from here, which now live with the runners
__all__ = ["PYTEST_VALUE_OPTIONS", "TestCommand", "detect", "is_python", "parse_command",
           "pytest_split", "runner_of", "FAILING", "OUTCOMES", "SuiteResult",
           "Plan", "plan_for", "run_suite", "seal_mac"]

FAILING = ("failed", "error")
_FAILING = frozenset(FAILING)
OUTCOMES = frozenset({"passed", "failed", "error", "skipped", "xfail", "xpass"})
OUTPUT_CAP = 32_000_000     # where the output is the evidence (go, cargo): keep far more of it
RECORDS_CAP = 64_000_000    # bytes of records golem reads from one run
MODULES_CAP = 20_000        # module files a run may name for golem to compile
DATA_CAP = 1_000            # changes to the tests' data golem keeps from one run
PYTEST_PINS = ("-c", "--config-file", "--rootdir", "--confcutdir")


@dataclass
class SuiteResult:
    """One run of the suite. `tests` is None when only the exit code is known."""

    exit_code: int | None
    timed_out: bool
    output: str
    elapsed: float
    evidence: str                               # the runner's `evidence`, or "exit-code"
    tests: dict[str, str] | None = None         # test id -> passed/failed/error/skipped/xfail/xpass
    pseudo: set[str] = field(default_factory=set)   # ids that stand for import or setup errors
    files: dict[str, str] = field(default_factory=dict)     # test id -> file it came from
    origins: dict[str, list[str]] = field(default_factory=dict)  # test id -> its code's files
    config: dict | None = None                  # pytest: rootdir, inifile, confcutdir
    problem: str | None = None                  # why the evidence cannot be trusted
    reads: dict[str, set[str]] = field(default_factory=dict)    # file -> code that read it
    notes: list[str] = field(default_factory=list)     # what golem's runner helpers said
    audit: set[str] = field(default_factory=set)       # what the test process reached for
    plugins: set[str] = field(default_factory=set)     # workspace files pytest loaded as plugins
    modules: list[str] = field(default_factory=list)   # the source files of the modules loaded
    rewritten: list[str] = field(default_factory=list)  # those pytest rewrote, golem lacking them
    # the tests' data the run changed: {label, key, file, filled} (attribute.py judges them)
    data: list[dict] = field(default_factory=list)
    # tests the runner reported passed that golem's witness saw raise, skip, stop or never
    # finish: test id -> what the witness saw (each such test counts as an error)
    disagreed: dict[str, str] = field(default_factory=dict)

    @property
    def failing(self) -> list[str]:
        tests = self.tests or {}
        # picked in C: asked for several times of a run with tens of thousands of tests
        return sorted(itertools.compress(tests, map(_FAILING.__contains__, tests.values())))

    @property
    def passed(self) -> bool:
        """Green: exit 0, no failing test, trustworthy evidence."""
        return (self.exit_code == 0 and not self.timed_out and self.problem is None
                and not self.failing)

    @property
    def started(self) -> bool:
        """The command ran at all (it could be started and was not reported missing)."""
        return self.exit_code is not None and self.exit_code not in (126, 127)

    def summary(self) -> str:
        if self.tests is not None:
            counts = _counts(self.tests) or {}
            parts = [f"{n} {o}" for o, n in sorted(counts.items())] or ["no tests"]
            text = f"{len(self.tests)} tests: " + ", ".join(parts)
        else:
            text = "exit code only"
        state = "timed out" if self.timed_out else f"exit {self.exit_code}"
        problem = f"; {self.problem}" if self.problem else ""
        return f"{'passing' if self.passed else 'failing'} ({text}; {state}{problem})"

    def to_json(self) -> dict:
        return {"passed": self.passed, "exit_code": self.exit_code, "timed_out": self.timed_out,
                "evidence": self.evidence, "failing": self.failing,
                "counts": _counts(self.tests), "problem": self.problem}

    def tests_from(self, files: set[str]) -> dict[str, str]:
        """The outcomes of the tests collected from `files`."""
        return {t: o for t, o in (self.tests or {}).items() if self.files.get(t) in files}


def _counts(tests: dict[str, str] | None) -> dict[str, int] | None:
    if tests is None:
        return None
    return dict(collections.Counter(tests.values()))


@dataclass
class Plan:
    """How golem runs the test command for its own evidence, fixed at the baseline."""

    command: TestCommand
    program: str                            # argv[0], absolute
    interpreter: Interpreter | None = None  # the test interpreter (unittest, pytest)
    pytest_config: dict | None = None       # rootdir, inifile, confcutdir relative to the run

    @property
    def runner(self) -> str:
        return self.command.runner

    def argv(self, cwd: str, run: RunScratch, helpers: str, only: str | None = None,
             result: str | None = None, write_cache: bool = False) -> list[str]:
        """The command line of one run in `cwd`, as the command's runner makes it; `only`
        runs that one test (what the runner's `alone` gave), `result` is where a runner that
        writes a file puts it; `write_cache` lets the interpreter write bytecode into
        golem's cache (baselines only)."""
        call = runners.Call(self.command.argv, self.program, cwd, run, helpers, only, result,
                            write_cache, self.pytest_config)
        runner = RUNNERS.get(self.runner)
        return runner.argv(call) if runner is not None else call.pinned


def plan_for(command: TestCommand, env: dict[str, str], cwd: str) -> Plan:
    """The plan for `command`: its program (or interpreter) pinned to an absolute path."""
    argv0 = command.argv[0]
    runner = RUNNERS.get(command.runner)
    if runner is not None and runner.python:
        from golem.workflow.verifier.interpreter import locate
        script = not is_python(argv0)       # a console script (`pytest`): its interpreter
        interp = locate(argv0, env, cwd, script=script)
        return Plan(command, interp.executable, interp)
    program = argv0 if "/" in argv0 else shutil.which(argv0, path=env.get("PATH"))
    if not program:
        raise UsageError(f"the test command cannot start: {argv0!r} is not on PATH")
    return Plan(command, os.path.abspath(program) if "/" in program else program)


def run_suite(plan: Plan, *, cwd: str, env: dict[str, str], run: RunScratch, helpers: str,
              timeout: float, wrap=None, cap: int = 200_000, only: str | None = None,
              write_cache: bool = False, refuse_early: bool = False) -> SuiteResult:
    """Run the suite once in `cwd` and read each test's outcome from golem's own evidence;
    only a baseline run may `write_cache` (golem's bytecode cache). With `refuse_early` (a
    baseline), the run ends as soon as its records show the suite replacing the runner's
    machinery: golem refuses such a baseline whatever else it does."""
    result_file = os.path.join(run.root, f"result-{plan.runner}.json")
    argv = plan.argv(cwd, run, helpers, only, result_file, write_cache)
    reads = RUNNERS[plan.runner].reads if plan.runner in RUNNERS else ""
    if reads == "output":
        cap = max(cap, OUTPUT_CAP)
    streams = plan.runner in ("unittest", "pytest")
    key = os.urandom(32) if streams else b""      # this run's seal, known to golem alone
    result = SuiteResult(None, False, "", 0.0, "exit-code")
    reader = _StreamReader(result, key) if streams else None    # read while the tests run
    done = process.run(argv, cwd=cwd, env=run.env(env), timeout=timeout, cap=cap, wrap=wrap,
                       evidence=RECORDS_CAP if streams else 0, seal=key,
                       records=(reader.refusing if refuse_early else reader.feed)
                       if reader is not None else None)
    result.exit_code, result.timed_out, result.output, result.elapsed = \
        done.exit_code, done.timed_out, done.output, done.elapsed
    evidence = RUNNERS[plan.runner].evidence if plan.runner in RUNNERS else None
    if not evidence:
        return result
    result.evidence = evidence
    if reader is not None:
        reader.finish(done.evidence_truncated)
    elif reads == "output":
        read = RUNNERS[plan.runner].parse(done.output, cwd)
        result.tests, result.pseudo, result.problem = read.tests, read.pseudo, read.problem
        result.output = read.output if read.output is not None else result.output
        if done.truncated:
            result.problem = f"the {plan.runner} output was too long to keep whole"
    else:
        _read_file(result, plan.runner, result_file, cwd)
    if result.problem is None and not result.tests:
        result.problem = "no tests ran"
    elif result.problem is None and (result.exit_code == 0) == bool(result.failing):
        result.problem = (f"the exit code ({result.exit_code}) disagrees with the results "
                          f"({len(result.failing)} failing)")
    return result


def _read_file(result: SuiteResult, runner: str, path: str, cwd: str) -> None:
    data = tree.read_file(os.path.dirname(path), os.path.basename(path), 256_000_000)
    if data is None:
        result.tests = {}
        result.problem = "the result file was missing: the suite did not run to the end"
        return
    text = data[0].decode("utf-8", errors="replace")
    try:
        read = RUNNERS[runner].parse(text, cwd)
        result.tests, result.pseudo, result.problem = read.tests, read.pseudo, read.problem
    except (ValueError, KeyError, TypeError) as exc:
        result.tests = {}
        result.problem = f"the result file was unreadable ({exc}): the suite did not finish"


def seal_mac(key: bytes) -> str:
    """The seal golem's driver writes last with this run's key (helpers/evidence.py)."""
    return hmac.new(key, b"golem-seal-v1", hashlib.sha256).hexdigest()


def _read_tests(result: SuiteResult, record: dict, ids: list, outcome: str,
                tests: dict[str, str], left: dict[str, int], keyed: bool) \
        -> tuple[str | None, bool | None]:
    """One `test` or `tests` record (the tests in `ids` had `outcome`) into `result`. `left`
    holds how many more reports each test may have (collected, less reported; a test never
    collected may be reported once, when the stream is not keyed). Returns the problem the
    record shows, and whether it is forged (None: malformed)."""
    pseudo = bool(record.get("pseudo"))
    file = record.get("file")
    file = file if isinstance(file, str) else None
    origins = record.get("origins")
    origins = [o for o in origins if isinstance(o, str)] if isinstance(origins, list) else None
    failing = outcome in FAILING
    files, found = result.files, result.origins
    for test_id in ids:
        if type(test_id) is not str:
            return "malformed", None
        prior = tests.get(test_id)
        if not pseudo:
            count = left.get(test_id)
            if count is None:
                if keyed:
                    return f"a test the runner never collected was reported: {test_id}", True
                count = 1
            if count <= 0 and (not failing or prior not in FAILING):
                return f"a test was reported twice: {test_id}", True
            left[test_id] = count - 1
        if failing or prior not in FAILING:
            tests[test_id] = outcome
        if pseudo:
            result.pseudo.add(test_id)
        if file is not None:
            files.setdefault(test_id, file)
        if origins is not None:     # one list shared by the record's tests, never changed
            held = found.setdefault(test_id, origins)
            if held is not origins:
                found[test_id] = held + origins
    return None, False


class _StreamReader:
    """Reads the records golem's driver or plugin streams during a run into `result`, one
    line at a time as they arrive (`line`, from the pipe's reader while the tests still run,
    so the reading costs the run no time of its own), then judges the whole (`finish`).
    With `key`, the stream must end with the seal only the driver's own `main` can have asked
    for, after the runner returned; and it must hold the runner's own collection, and every
    test it reports must be one collected (import and setup errors aside), reported once."""

    def __init__(self, result: SuiteResult, key: bytes = b""):
        self.result, self.key = result, key
        self.tests: dict[str, str] = {}
        self.replaced: list[str] = []
        self.started = self.ended = self.sealed = False
        self.end: dict = {}
        self.problem: str | None = None
        self.collected: dict[str, int] | None = None
        self.left: dict[str, int] = {}      # test id -> how many more reports it may have
        self.forged = False
        self.number = 0
        self.done = False       # a problem was found: nothing after it is read
        self.pending: list[bytes] = []      # the start of a line whose end has not arrived
        self.saw: dict[str, str] = {}       # test id -> what golem's witness saw it do
        self.decode = json.JSONDecoder().decode

    def feed(self, chunk: bytes) -> None:
        """Bytes of the stream as they arrive: each line they complete is read (each byte
        joined once, however many pieces a long line arrives in)."""
        if self.done:
            return
        cut = chunk.rfind(b"\n")
        if cut < 0:
            self.pending.append(chunk)
            return
        whole = b"".join([*self.pending, chunk[:cut]])
        self.pending = [chunk[cut + 1:]] if cut + 1 < len(chunk) else []
        for piece in whole.split(b"\n"):
            # what bytes.splitlines makes of it ("\r" ends a line too)
            for line in piece.splitlines() if piece else (b"",):
                if not self.line(line):
                    return

    def line(self, line: bytes) -> bool:
        """One record; False once a problem ends the reading."""
        if self.done:
            return False
        self.number += 1
        number, result = self.number, self.result
        try:
            record = self.decode(line.decode("utf-8", "surrogatepass"))
        except ValueError:
            return self._stop(f"record {number} of the evidence is not JSON")
        kind = record.get("e") if isinstance(record, dict) else None
        if self.sealed:
            return self._stop("evidence arrived after the run's seal")
        if kind == "seal":
            if not self.ended or not self.key or not hmac.compare_digest(
                    str(record.get("mac", "")), seal_mac(self.key)):
                self.forged = True
                return self._stop("the evidence carries a seal golem did not make")
            self.sealed = True
            return True
        if kind == "audit":
            event = record.get("event")
            if isinstance(event, str):
                result.audit.add(event[:100])
            return True
        if self.ended:
            return self._stop("evidence arrived after the run's last record")
        if kind == "start":
            if self.started:
                return self._stop("the evidence started twice")
            self.started = True
        elif kind == "config":
            result.config = {k: record.get(k) for k in ("rootdir", "inifile", "confcutdir")}
        elif kind == "collected":
            ids = record.get("ids")
            if self.collected is not None:
                self.forged = True
                return self._stop("the evidence holds two collections")
            ids = ids if isinstance(ids, list) else []
            # id -> how many times the runner collected it (most often, each once)
            collected = dict.fromkeys(ids, 1) if set(map(type, ids)) <= {str} else None
            if collected is None or len(collected) != len(ids):
                collected = {}
                for each in ids:
                    if isinstance(each, str):
                        collected[each] = collected.get(each, 0) + 1
            self.collected = collected
            before, self.left = self.left, collected    # counted down as tests are reported
            for each, count in before.items():      # reported before the collection
                self.left[each] = self.left.get(each, 1) + count - 1
        elif kind == "test" or kind == "tests":
            ids = [record.get("id")] if kind == "test" else record.get("ids")
            outcome = record.get("outcome")
            if not isinstance(ids, list) or outcome not in OUTCOMES:
                return self._stop(f"record {number} of the evidence is malformed")
            why, fake = _read_tests(result, record, ids, outcome, self.tests, self.left,
                                    bool(self.key))
            if why:
                self.forged = bool(fake)
                return self._stop(why if fake else f"record {number} of the evidence is "
                                  "malformed")
            if outcome == "passed" and self.saw and not self.saw.keys().isdisjoint(ids):
                self._disagree([t for t in ids if t in self.saw])
        elif kind == "witness":
            test_id, saw = record.get("id"), record.get("saw")
            if isinstance(test_id, str) and isinstance(saw, str):
                if saw == "retry":      # the runner runs the test again (a rerun plugin)
                    self.saw.pop(test_id, None)
                elif test_id not in self.saw:
                    exc = record.get("exc")
                    self.saw[test_id] = f"{saw} {exc}"[:200] if isinstance(exc, str) and \
                        exc else saw[:200]
        elif kind == "data":
            if len(result.data) < DATA_CAP and isinstance(record.get("label"), str):
                result.data.append({"label": record["label"][:300],
                                    "key": str(record.get("key") or "")[:200],
                                    "file": record.get("file") if isinstance(
                                        record.get("file"), str) else None,
                                    "filled": record.get("filled") is True})
        elif kind == "read":
            path, by = record.get("path"), record.get("by")
            if isinstance(path, str) and isinstance(by, str):
                result.reads.setdefault(path, set()).add(by)
        elif kind == "modules":
            files = record.get("files")
            if isinstance(files, list):
                result.modules = [f for f in files[:MODULES_CAP] if isinstance(f, str)]
            files = record.get("rewritten")
            if isinstance(files, list):
                result.rewritten = [f for f in files[:MODULES_CAP] if isinstance(f, str)]
        elif kind == "plugins":
            result.plugins.update(f for f in record.get("files") or [] if isinstance(f, str))
        elif kind == "note":
            if isinstance(record.get("message"), str) and len(result.notes) < 20:
                result.notes.append(record["message"][:500])
        elif kind == "guard":
            self.replaced += [str(r) for r in record.get("replaced") or []
                              if str(r) not in self.replaced]
        elif kind == "end":
            self.ended, self.end = True, record
        return True

    def refusing(self, chunk: bytes) -> bool:
        """`feed`, answering whether the run should end now: its guard named the runner's
        machinery replaced (a baseline golem refuses)."""
        self.feed(chunk)
        return bool(self.replaced)

    def _disagree(self, ids: list[str]) -> None:
        """The runner reported `ids` passed; golem's witness saw otherwise: each counts as an
        error, and the disagreement is named (grade.judge)."""
        result = self.result
        for test_id in ids:
            result.disagreed[test_id] = self.saw[test_id]
            self.tests[test_id] = "error"

    def _stop(self, problem: str) -> bool:
        self.problem, self.done = problem, True
        return False

    def finish(self, truncated: bool) -> None:
        """The whole stream read (a last line without its line break included): judge it.
        `result`'s exit code and timing must be the run's by now."""
        if self.pending and not self.done:
            tail, self.pending = b"".join(self.pending), []
            for line in tail.splitlines():
                if not self.line(line):
                    break
        result, tests, problem, end = self.result, self.tests, self.problem, self.end
        forged = self.forged
        if self.replaced:
            # not a test: it stands for the whole run, which cannot be trusted
            replaced = self.replaced
            test_id = ("golem: the code under test replaced " + ", ".join(replaced[:5])
                       + (" and more" if len(replaced) > 5 else ""))
            tests[test_id] = "error"
            result.pseudo.add(test_id)
        result.tests = tests
        if problem is None and truncated:
            problem = "the evidence was too long to keep whole"
        if problem is None and not self.started:
            problem = "the runner never started: the result file was missing"
        if problem is None and not self.ended:
            problem = ("the run did not finish (no last record): the suite exited early or "
                       "was cut short")
        if self.key and not self.sealed:
            problem = problem or ("the evidence is not sealed: golem's driver never reached "
                                  "its own end (the test process left early or became "
                                  "another program, or the records are not the driver's)")
            forged = True
        if forged:      # nothing in it is evidence that a test passed; a failure still counts
            result.tests = {t: o for t, o in result.tests.items() if o in FAILING}
            result.files = {t: f for t, f in result.files.items() if t in result.tests}
            result.origins = {t: o for t, o in result.origins.items() if t in result.tests}
            result.pseudo &= set(result.tests)
        if problem is None and isinstance(end.get("exit"), int) \
                and result.exit_code is not None and not result.timed_out \
                and end["exit"] != result.exit_code:
            problem = (f"the process exited {result.exit_code} after the runner finished "
                       f"with {end['exit']}: something ran after the end")
        result.problem = problem
