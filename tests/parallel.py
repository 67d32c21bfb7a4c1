"""`make test` in parallel: each test module in its own `python -X dev -W error -m unittest`
process, a few at once, the longest first, with one summary at the end in unittest's own form.

    python3 -m tests.parallel [-j N] [MODULE ...]

Most of golem's tests wait on subprocesses (test runs, git, venvs, a loopback server), so more
workers than cores pays. A module's output is kept together and shown whole when it fails; a
module that passes gets one line. The exit code is 1 when anything failed. Ctrl-C (SIGINT), a
hang-up or SIGTERM ends every worker and what it started (each worker leads its own process
group), and the exit code is 128 + the signal's number: 130 for Ctrl-C. The durations
of the last run, kept in the temporary directory, order the next one; without them the
biggest files go first.

Modules in SERIAL run alone, after the others, because they cannot share the machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERIAL: tuple[str, ...] = ()
_RAN = re.compile(r"^Ran (\d+) tests? in ([\d.]+)s\s*$", re.M)
_CLOSING = re.compile(r"^(OK|FAILED)(?: \((.*)\))?\s*$", re.M)
_ORDER = ("failures", "errors", "skipped", "expected failures", "unexpected successes")
STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def modules() -> list[str]:
    """Every tests/test_*.py, as a module name."""
    names = sorted(n for n in os.listdir(os.path.join(ROOT, "tests"))
                   if n.startswith("test_") and n.endswith(".py"))
    return [f"tests.{n[:-3]}" for n in names]


def durations_file() -> str:
    tag = hashlib.sha256(ROOT.encode()).hexdigest()[:12]
    return os.path.join(tempfile.gettempdir(), f"golem-test-durations-{tag}.json")


def load_durations() -> dict[str, float]:
    try:
        with open(durations_file(), encoding="utf-8") as handle:
            data = json.load(handle)
        return {k: float(v) for k, v in data.items()}
    except (OSError, ValueError, AttributeError):
        return {}


def save_durations(new: dict[str, float]) -> None:
    data = {**load_durations(), **new}
    path = durations_file()
    try:
        with open(path + ".part", "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=0, sort_keys=True)
        os.replace(path + ".part", path)
    except OSError:
        pass    # only the order of the next run depends on it


def longest_first(names: list[str]) -> list[str]:
    known = load_durations()

    def size(name: str) -> float:
        path = os.path.join(ROOT, *name.split(".")) + ".py"
        return os.path.getsize(path) if os.path.exists(path) else 0

    # a module never timed goes first: it may be the long one
    return sorted(names, key=lambda n: (n in known, -known.get(n, 0.0), -size(n)))


class Result:
    """One module's run: its exit code, output, seconds, and unittest's closing counts."""

    def __init__(self, name: str, code: int, output: str, seconds: float):
        self.name, self.code, self.output, self.seconds = name, code, output, seconds
        ran = _RAN.findall(output)
        closing = _CLOSING.findall(output)
        self.tests = int(ran[-1][0]) if ran else 0
        self.counts: dict[str, int] = {}
        if closing:
            for part in filter(None, (p.strip() for p in closing[-1][1].split(","))):
                key, _, value = part.rpartition("=")
                if value.isdigit():
                    self.counts[key] = self.counts.get(key, 0) + int(value)
        if not ran or not closing or (code != 0 and closing[-1][0] == "OK"):
            # it died before unittest could close (a crash, a kill): one error, shown whole,
            # and one test at least, so that passed = ran - failed - skipped holds
            self.counts["errors"] = self.counts.get("errors", 0) + 1
            self.tests = max(self.tests, 1)
        self.failed = code != 0 or bool(self.counts.get("failures") or self.counts.get("errors"))


class Pool:
    """Up to `jobs` module processes at once; `stop()` ends every one of them."""

    def __init__(self, jobs: int, python: str, root: str = ROOT):
        self.jobs, self.python, self.root = jobs, python, root
        self.lock = threading.Lock()
        self.procs: dict[str, subprocess.Popen] = {}
        self.stopping = False

    def run_one(self, name: str) -> Result:
        started = time.monotonic()
        with self.lock:
            if self.stopping:
                return Result(name, 130, "not started: interrupted\n", 0.0)
            proc = subprocess.Popen([self.python, "-X", "dev", "-W", "error", "-m", "unittest",
                                     name], cwd=self.root, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            self.procs[name] = proc
        try:
            raw, _ = proc.communicate()
        finally:
            with self.lock:
                self.procs.pop(name, None)
        output = raw.decode("utf-8", "replace")
        return Result(name, proc.returncode, output, time.monotonic() - started)

    def stop(self) -> None:
        with self.lock:
            self.stopping = True
            procs = list(self.procs.values())
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for proc in procs:
                try:
                    os.killpg(proc.pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
            end = time.monotonic() + 2.0
            while any(p.poll() is None for p in procs) and time.monotonic() < end:
                time.sleep(0.05)


class Inbox:
    """Where the main thread waits, and the only thing it waits on: a worker posts each result,
    and a stopping signal posts its number.

    A signal's handler only notes the number, so nothing is ever thrown into the code it lands
    in (a lock held, a report half written); the stopping is done by the main thread, between
    two waits. The kernel may hand the signal to any thread, and a handler runs only in the
    main thread, so the wake-up is a pipe (signal.set_wakeup_fd) that the C-level handler
    writes to from whichever thread it interrupts. A signal that whoever started the run
    ignores (SIGINT for a background job of a non-interactive shell, SIGHUP under nohup) stays
    ignored, as make and Python itself leave it.
    """

    def __init__(self):
        self.results: queue.SimpleQueue[Result] = queue.SimpleQueue()
        self.caught: list[int] = []
        self.lock = threading.Lock()        # a late worker never writes to a closed pipe
        self.closed = False
        self.read_end, self.write_end = os.pipe()
        os.set_blocking(self.write_end, False)
        self.saved: dict[int, object] = {}
        self.saved_fd = signal.set_wakeup_fd(self.write_end, warn_on_full_buffer=False)
        for sig in STOPPING:
            if signal.getsignal(sig) is not signal.SIG_IGN:
                self.saved[sig] = signal.signal(sig, self.note)

    def note(self, signum: int, _frame) -> None:
        self.caught.append(signum)      # no lock, no I/O: safe wherever it interrupts

    def post(self, result: Result) -> None:
        """From a worker: one module's result."""
        self.results.put(result)
        with self.lock:
            if not self.closed:
                try:
                    os.write(self.write_end, b"\0")
                except BlockingIOError:
                    pass        # the pipe is full: the main thread has bytes to read anyway

    def wait(self) -> Result | int:
        """The next result, or the number of a stopping signal, which comes first."""
        while True:
            if self.caught:
                return self.caught[0]
            try:
                return self.results.get_nowait()
            except queue.Empty:
                pass
            # a signal's number (set_wakeup_fd), or 0 from post()
            self.caught.extend(b for b in os.read(self.read_end, 512) if b in self.saved)

    def close(self) -> None:
        for sig, previous in self.saved.items():
            signal.signal(sig, signal.SIG_DFL if previous is None else previous)
        signal.set_wakeup_fd(self.saved_fd)
        with self.lock:
            self.closed = True
            os.close(self.read_end)
            os.close(self.write_end)


def report(result: Result, out) -> None:
    if result.failed:
        bar = "=" * 70
        out.write(f"{bar}\nFAIL  {result.name} ({result.seconds:.1f}s, exit {result.code})\n"
                  f"{bar}\n{result.output.rstrip()}\n{bar}\n")
    else:
        skipped = result.counts.get("skipped", 0)
        extra = f", {skipped} skipped" if skipped else ""
        out.write(f"ok    {result.name}: {result.tests} tests{extra} in "
                  f"{result.seconds:.1f}s\n")
    out.flush()


def closing_line(results: list[Result]) -> str:
    totals: dict[str, int] = {}
    for result in results:
        for key, value in result.counts.items():
            totals[key] = totals.get(key, 0) + value
    failed = any(r.failed for r in results)
    keys = [k for k in _ORDER if totals.get(k)] + sorted(k for k in totals if k not in _ORDER)
    if not failed:
        keys = [k for k in keys if k not in ("failures", "errors")]
    parts = ", ".join(f"{k}={totals[k]}" for k in keys)
    word = "FAILED" if failed else "OK"
    return f"{word} ({parts})" if parts else word


def work(pool: Pool, todo: queue.SimpleQueue, inbox: Inbox) -> None:
    """A worker thread: the modules in `todo` one after another, each result to `inbox`."""
    while True:
        try:
            name = todo.get_nowait()
        except queue.Empty:
            return
        try:
            result = pool.run_one(name)
        except Exception as exc:    # it could not even start: a failure, never a silent gap
            result = Result(name, 1, f"the runner could not run it: {exc!r}\n", 0.0)
        inbox.post(result)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tests.parallel",
                                     description="run golem's test modules in parallel")
    parser.add_argument("-j", "--jobs", type=int, default=int(os.environ.get("JOBS", 0) or 4),
                        help="modules at once (default: $JOBS, else 4)")
    parser.add_argument("--root", default=ROOT, help="where the modules are imported from")
    parser.add_argument("modules", nargs="*", help="test modules (default: every tests/test_*)")
    args = parser.parse_args(argv)
    names = args.modules or modules()
    parallel = longest_first([n for n in names if n not in SERIAL])
    alone = [n for n in names if n in SERIAL]
    pool = Pool(max(1, args.jobs), sys.executable, args.root)
    started = time.monotonic()
    results: list[Result] = []
    inbox = Inbox()         # before the first worker: from then on a signal stops them all
    try:
        for batch, jobs in ((parallel, pool.jobs), (alone, 1)):
            todo: queue.SimpleQueue[str] = queue.SimpleQueue()
            for name in batch:
                todo.put(name)
            for _ in range(min(jobs, len(batch))):
                threading.Thread(target=work, args=(pool, todo, inbox), daemon=True).start()
            for _ in batch:
                got = inbox.wait()
                if isinstance(got, int):
                    pool.stop()
                    sys.stdout.write(f"\ninterrupted ({signal.Signals(got).name}): "
                                     "every test process was ended\n")
                    sys.stdout.flush()
                    return 128 + got
                results.append(got)
                report(got, sys.stdout)
    except BaseException:
        pool.stop()         # whatever ends the run early (a closed stdout) ends its workers too
        raise
    finally:
        inbox.close()
    if args.root == ROOT:
        save_durations({r.name: r.seconds for r in results if not r.failed})
    elapsed = time.monotonic() - started
    total = sum(r.tests for r in results)
    sys.stdout.write("-" * 70 + f"\nRan {total} test{'' if total == 1 else 's'} in "
                     f"{elapsed:.3f}s\n\n"
                     f"{closing_line(results)}\n")
    sys.stdout.flush()
    return 1 if any(r.failed for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
