"""`golem fix -attempts N`: independent attempts in private copies, one verified winner.

Each test scripts one conversation per model (the provider server routes a request by the
model it names) against a calculator with two bugs: `add` and `mul`. The attempts are real:
private copies, real suite runs, the sealed verification of each.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import unittest
from types import SimpleNamespace

from golem.core.errors import UsageError
from golem.workflow.attempts import (Attempt, Spec, apply_to_workspace, choose, closest,
                                     parse_models)
from golem.workflow.verifier.grade import Verdict
from golem.workflow.verifier.snapshot import Changes, Snapshot, fingerprint
from tests import layouts
from tests.adversarial import bwrap_or_skip
from tests.fixtures import REPO_ROOT, TEST_CMD, GolemCase, make_repo, read_trace, run_cli
from tests.provider_server import ProviderServer, Reply, chat
from tests.test_signals import processes

CALC = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a + b\n"
TESTS = """\
import unittest

from calc import add, mul


class CalcTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_mul(self):
        self.assertEqual(mul(2, 3), 6)

    def test_zero(self):
        self.assertEqual(add(0, 0), 0)
"""
FILES = {"calc.py": CALC, "tests/test_calc.py": TESTS}
FIX_ADD = ("edit_file", {"path": "calc.py", "old_string": "a - b", "new_string": "a + b"})
FIX_MUL = ("edit_file", {"path": "calc.py", "old_string": "def mul(a, b):\n    return a + b",
                         "new_string": "def mul(a, b):\n    return a * b"})
WORDY_FIX = ("write_file", {"path": "calc.py", "content": "# adds\ndef add(a, b):\n"
                            "    return a + b\n\n\n# multiplies\ndef mul(a, b):\n"
                            "    return a * b\n"})
WEAKEN = ("write_file", {"path": "tests/test_calc.py",
                         "content": "import unittest\n\n\nclass CalcTest(unittest.TestCase):\n"
                                    "    def test_add(self):\n        pass\n\n"
                                    "    def test_mul(self):\n        pass\n\n"
                                    "    def test_zero(self):\n        pass\n"})


def script(*steps) -> list:
    """One conversation: each step a tool call (or a Reply), then the claim it is done."""
    replies = [s if isinstance(s, Reply) else chat(tool_calls=[s]) for s in steps]
    return replies + [chat("done")]


def verdict(name: str, fixed=(), newly=()) -> Verdict:
    return Verdict(name, f"{name}: x", list(fixed), [], list(newly))


def attempt(index: int, name: str, findings=(), lines: int = 1, cost: float = 0.0,
            fixed=(), newly=()) -> Attempt:
    made = Attempt(Spec(index, f"m{index}", None), verdict(name, fixed, newly),
                   SimpleNamespace(usage=SimpleNamespace(cost=cost)),
                   SimpleNamespace(findings=list(findings)))
    made.diffs = {"calc.py": "@@ -1 +1 @@\n" + "".join(f"+line {i}\n" for i in range(lines))}
    return made


class SelectionTest(unittest.TestCase):
    """The order of preference, stated in golem/workflow/attempts.py."""

    def test_verified_without_findings_beats_smaller_verified_with_findings(self):
        flagged = attempt(1, "VERIFIED", findings=[{"kind": "skip"}], lines=1)
        clean = attempt(2, "VERIFIED", lines=9)
        self.assertIs(choose([flagged, clean]), clean)

    def test_never_rejected_or_failed(self):
        self.assertIsNone(choose([attempt(1, "REJECTED"), attempt(2, "FAILED"),
                                  attempt(3, "ALREADY_GREEN")]))

    def test_ties_go_to_the_smallest_change_then_the_lower_cost_then_the_first(self):
        self.assertEqual(choose([attempt(1, "VERIFIED", lines=5),
                                 attempt(2, "VERIFIED", lines=2)]).spec.index, 2)
        self.assertEqual(choose([attempt(1, "VERIFIED", lines=2, cost=0.3),
                                 attempt(2, "VERIFIED", lines=2, cost=0.1)]).spec.index, 2)
        self.assertEqual(choose([attempt(2, "VERIFIED", lines=2),
                                 attempt(1, "VERIFIED", lines=2)]).spec.index, 1)

    def test_closest_fixed_most_and_broke_nothing(self):
        broke = attempt(1, "FAILED", fixed=["a", "b"], newly=["c"])
        half = attempt(2, "FAILED", fixed=["a"])
        cheat = attempt(3, "REJECTED", fixed=["a", "b"])
        self.assertIs(closest([broke, half, cheat]), half)

    def test_model_names_keep_their_colons(self):
        providers = ["openai", "anthropic", "openrouter"]
        self.assertEqual(parse_models("anthropic:claude-x, vendor/model:free,gpt", providers),
                         [("anthropic", "claude-x"), (None, "vendor/model:free"),
                          (None, "gpt")])


class ApplyTest(GolemCase):
    """Only what was verified is applied, and only onto the workspace the snapshot saw."""

    def setUp(self):
        super().setUp()
        self.repo = make_repo(self.tmp, FILES)
        self.snap = Snapshot.take(self.repo, os.path.join(self.tmp, "snap"))
        self.source = make_repo(self.tmp, {**FILES, "calc.py": CALC.replace("a - b", "a + b")},
                                name="source")
        self.verified = fingerprint(self.source).entries
        self.changes = Changes([], ["calc.py"], [])

    def read(self, root: str) -> str:
        with open(os.path.join(root, "calc.py"), encoding="utf-8") as handle:
            return handle.read()

    def test_the_verified_change_is_applied(self):
        applied = apply_to_workspace(self.repo, self.source, self.snap, self.changes, set(),
                                     self.verified)
        self.assertEqual(applied.all, ["calc.py"])
        self.assertIn("a + b", self.read(self.repo))

    def test_a_source_changed_after_its_verification_is_not_applied(self):
        with open(os.path.join(self.source, "calc.py"), "a", encoding="utf-8") as handle:
            handle.write("import os\n")
        with self.assertRaises(UsageError) as cm:
            apply_to_workspace(self.repo, self.source, self.snap, self.changes, set(),
                               self.verified)
        self.assertIn("changed after its verification", str(cm.exception))
        self.assertEqual(self.read(self.repo), CALC)

    def test_a_workspace_changed_meanwhile_is_not_overwritten(self):
        with open(os.path.join(self.repo, "calc.py"), "a", encoding="utf-8") as handle:
            handle.write("# the user's edit\n")
        with self.assertRaises(UsageError):
            apply_to_workspace(self.repo, self.source, self.snap, self.changes, set(),
                               self.verified)
        self.assertIn("# the user's edit", self.read(self.repo))


class CopyLayoutTest(GolemCase):
    """`rebuild.Layout`: how every copy of a workspace is made, read from the workspace."""

    def test_each_layout_says_what_is_linked_and_what_is_bound(self):
        from golem.workflow.verifier.rebuild import Layout
        git_venv = Layout.of(layouts.build("git+venv", self.tmp, FILES, name="a"), [".venv"])
        self.assertEqual((git_venv.trees, git_venv.gitdir), ((".venv", ".git"), None))
        tree = layouts.build("worktree+venv", self.tmp, FILES, name="b")
        work = Layout.of(tree, [".venv"])
        self.assertEqual(work.trees, (".venv",))
        self.assertEqual(work.gitdir, os.path.join(self.tmp, "b-main", ".git", "worktrees", "b"))
        self.assertEqual(work.outside, (work.gitdir, os.path.join(self.tmp, "b-main", ".git")))
        self.assertEqual(work.managed, (".venv", ".git"))
        self.assertTrue(work.foreign(".git") and work.foreign(".venv/bin/python"))
        self.assertFalse(work.foreign("calc.py"))

    def test_a_git_file_naming_any_other_directory_binds_nothing(self):
        from golem.workflow.verifier.rebuild import Layout
        repo = make_repo(self.tmp, FILES)
        secret = os.path.join(self.tmp, "secret")
        os.mkdir(secret)
        with open(os.path.join(repo, ".git"), "w", encoding="utf-8") as handle:
            handle.write(f"gitdir: {secret}\n")
        layout = Layout.of(repo, [])
        self.assertEqual((layout.gitdir, layout.outside, layout.read_only), (None, (), ()))


class AttemptsCase(GolemCase):
    def serve_models(self, **conversations) -> ProviderServer:
        return self.enterContext(ProviderServer(by_model=conversations))

    def attempts(self, repo: str, server, *extra: str, env=None, sandbox: str = "none"):
        """`golem fix -json` with attempts; with `sandbox` bwrap they run side by side."""
        if sandbox == "bwrap":
            bwrap_or_skip(self)
        args = ["fix", "-dir", repo, "-test", TEST_CMD, "-provider", "openai",
                "-base-url", server.url, "-sandbox", sandbox, "-trace", self.trace, "-json",
                *extra]
        code, out, err = run_cli(args, env)
        return code, json.loads(out.splitlines()[-1]), err

    def calls(self, server, model: str) -> int:
        return sum(1 for r in server.requests if r["body"].get("model") == model)

    def read(self, repo: str, rel: str) -> str:
        with open(os.path.join(repo, rel), encoding="utf-8") as handle:
            return handle.read()


class ChooseTest(AttemptsCase):
    def test_the_verified_attempt_is_chosen_applied_and_undoable(self):
        repo = make_repo(self.tmp, FILES)
        busy = Reply({"error": {"message": "busy"}}, 429, headers={"Retry-After": "0"})
        server = self.serve_models(cheat=script(WEAKEN), half=script(FIX_ADD),
                                   fixer=[busy] + script(FIX_ADD, FIX_MUL))
        code, report, err = self.attempts(repo, server, "-attempts", "3",
                                          "-models", "cheat,half,fixer", "-jobs", "3")
        self.assertEqual((report["verdict"], code), ("VERIFIED", 0), report["summary"])
        self.assertEqual(report["chosen"], 3)
        self.assertIn("attempt 3 of 3", report["summary"])
        got = {a["attempt"]: (a["model"], a["verdict"]) for a in report["attempts"]}
        self.assertEqual(got, {1: ("cheat", "REJECTED"), 2: ("half", "FAILED"),
                               3: ("fixer", "VERIFIED")})
        for item in report["attempts"]:
            self.assertTrue(os.path.isfile(item["patch"]), item)
            self.assertGreater(item["steps"], 0)
        # only the winner reached the workspace: the tests are the user's, calc.py is fixed
        self.assertEqual(self.read(repo, "tests/test_calc.py"), TESTS)
        self.assertIn("a * b", self.read(repo, "calc.py"))
        self.assertEqual(report["changed_files"], ["calc.py"])
        # every event of an attempt carries its number
        events = read_trace(self.trace)
        tagged = {e.get("attempt") for e in events if e["event"] == "tool_call"}
        self.assertEqual(tagged, {1, 2, 3})
        # a provider retry inside an attempt keeps its own count as `try`
        retry = [e for e in events if e["event"] == "retry"]
        self.assertEqual([(e["attempt"], e["try"]) for e in retry], [(3, 1)])
        # the report: the attempts side by side, the chosen first; a timeline for each
        page = os.path.join(self.tmp, "report.html")
        self.assertEqual(run_cli(["trace", self.trace, "-html", page])[0], 0)
        with open(page, encoding="utf-8") as handle:
            html = handle.read()
        self.assertLess(html.index("attempt 3 (chosen): fixer"), html.index("attempt 1: cheat"))
        self.assertLess(html.index("Timeline of attempt 3"), html.index("Timeline of attempt 1"))
        self.assertEqual(html.count("<section>"), 1)
        code, out, err = run_cli(["undo", "-dir", repo])
        self.assertEqual(code, 0, err)
        self.assertEqual(self.read(repo, "calc.py"), CALC)

    def test_the_smaller_of_two_verified_fixes_wins(self):
        repo = make_repo(self.tmp, FILES)
        server = self.serve_models(wordy=script(WORDY_FIX), terse=script(FIX_ADD, FIX_MUL))
        code, report, err = self.attempts(repo, server, "-attempts", "2",
                                          "-models", "wordy,terse")
        self.assertEqual((report["verdict"], report["chosen"]), ("VERIFIED", 2))
        lines = {a["attempt"]: a["lines_changed"] for a in report["attempts"]}
        self.assertLess(lines[2], lines[1])
        self.assertNotIn("# adds", self.read(repo, "calc.py"))

    def test_no_verified_attempt_leaves_the_workspace_as_it_was(self):
        repo = make_repo(self.tmp, FILES)
        server = self.serve_models(cheat=script(WEAKEN), half=script(FIX_ADD))
        code, report, err = self.attempts(repo, server, "-attempts", "2",
                                          "-models", "cheat,half")
        self.assertEqual((report["verdict"], code), ("FAILED", 1), report["summary"])
        self.assertIsNone(report["chosen"])
        self.assertIn("closest, attempt 2 (half)", report["summary"])
        self.assertEqual((self.read(repo, "calc.py"), self.read(repo, "tests/test_calc.py")),
                         (CALC, TESTS))
        self.assertEqual(report["changed_files"], [])
        patches = {a["attempt"]: a["patch"] for a in report["attempts"]}
        with open(patches[2], encoding="utf-8") as handle:
            self.assertIn("+    return a + b", handle.read())
        # the rejected attempt's patch is whole: its protected change is in it, marked
        cheat = report["attempts"][0]
        self.assertEqual([p["path"] for p in cheat["protected_changes"]], ["tests/test_calc.py"])
        with open(patches[1], encoding="utf-8") as handle:
            text = handle.read()
        self.assertIn("# golem: protected change, never applied: tests/test_calc.py (test file",
                      text)
        self.assertIn("+        pass", text)

    def test_one_attempt_of_a_matrix_runs_in_place(self):
        repo = make_repo(self.tmp, FILES)
        server = self.serve_models(a=script(FIX_ADD), b=script(FIX_ADD, FIX_MUL))
        code, report, err = self.attempts(repo, server, "-attempt", "2/2", "-models", "a,b")
        self.assertEqual((report["verdict"], report["attempt"], report["model"]),
                         ("VERIFIED", "2/2", "b"))
        self.assertEqual(self.calls(server, "a"), 0)
        self.assertIn("a * b", self.read(repo, "calc.py"))


class StopTest(AttemptsCase):
    def test_first_stops_a_model_call_and_a_command_of_the_others(self):
        repo = layouts.build("git+venv", self.tmp, FILES)
        marker = "import time; time.sleep(271.5)"
        server = self.serve_models(
            fast=script(FIX_ADD, FIX_MUL),
            waits=[Reply(chat("too late"), delay=120)],
            runs=script(("run_command", {"argv": ["python3", "-c", marker]})))
        started = time.monotonic()
        code, report, err = self.attempts(repo, server, "-attempts", "3", "-jobs", "3",
                                          "-models", "fast,waits,runs", "-first",
                                          "-allow", "python3", sandbox="bwrap")
        took = time.monotonic() - started
        self.assertEqual((report["verdict"], report["chosen"]), ("VERIFIED", 1), report["summary"])
        stops = {a["attempt"]: a["stop"] for a in report["attempts"]}
        self.assertEqual((stops[2], stops[3]), ("cancelled", "cancelled"), report["attempts"])
        # no further model call after the stop, and the command's process is gone
        self.assertEqual((self.calls(server, "waits"), self.calls(server, "runs")), (1, 1))
        self.assertEqual(processes(marker.encode()), [])
        self.assertLess(took, 100.0)
        self.assertIn("a * b", self.read(repo, "calc.py"))

    def test_escalate_stops_at_the_first_verified_model(self):
        repo = layouts.build("git+venv", self.tmp, FILES)
        server = self.serve_models(cheap=script(FIX_ADD), better=script(FIX_ADD, FIX_MUL),
                                   best=script(FIX_ADD, FIX_MUL))
        code, report, err = self.attempts(repo, server, "-escalate", "cheap,better,best")
        self.assertEqual((report["verdict"], report["chosen"]), ("VERIFIED", 2), report["summary"])
        self.assertEqual(self.calls(server, "best"), 0)
        self.assertIn("a * b", self.read(repo, "calc.py"))
        verdicts = [a["verdict"] for a in report["attempts"]]
        self.assertEqual(verdicts, ["FAILED", "VERIFIED", None])
        # one after another: the second began after the first was graded
        events = read_trace(self.trace)
        first_done = next(i for i, e in enumerate(events)
                          if e["event"] == "attempt" and e.get("attempt") == 1)
        second_start = next(i for i, e in enumerate(events)
                            if e["event"] == "request" and e.get("attempt") == 2)
        self.assertLess(first_done, second_start)

    def test_the_cost_budget_is_shared_by_all_attempts(self):
        repo = make_repo(self.tmp, FILES)
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15, "cost": 0.25}
        looping = lambda: [chat(tool_calls=[("read_file", {"path": "calc.py"})], usage=usage)
                           for _ in range(30)]
        server = self.serve_models(a=looping(), b=looping(), c=looping())
        code, report, err = self.attempts(repo, server, "-attempts", "3", "-jobs", "3",
                                          "-models", "a,b,c", "-cost", "1", sandbox="bwrap")
        self.assertEqual({a["stop"] for a in report["attempts"]}, {"cost"}, report["attempts"])
        # $1 at $0.25 a call: four calls reach it; each call reserves its cost before it is
        # made, so the total stays within the budget plus one call
        self.assertLessEqual(len(server.requests), 4 + 1)
        self.assertGreaterEqual(report["cost"], 1.0)
        self.assertLessEqual(report["cost"], 1.25)
        self.assertEqual(self.read(repo, "calc.py"), CALC)


class KilledTest(AttemptsCase):
    def test_a_killed_run_leaves_the_workspace_untouched_and_undoable(self):
        bwrap_or_skip(self)
        repo = layouts.build("git+venv", self.tmp, FILES)
        slow = lambda: [chat(tool_calls=[FIX_ADD]), Reply(chat("late"), delay=120)]
        server = self.serve_models(a=slow(), b=slow())
        scratch = os.path.join(self.tmp, "tmpdir")
        os.mkdir(scratch)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TMPDIR": scratch,
               "GOLEM_STATE_DIR": os.environ["GOLEM_STATE_DIR"], "HOME": self.tmp}
        proc = subprocess.Popen(
            [sys.executable, "-m", "golem", "fix", "-dir", repo, "-test", TEST_CMD,
             "-provider", "openai", "-base-url", server.url, "-sandbox", "bwrap",
             "-attempts", "2", "-models", "a,b", "-json"],
            cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        end = time.monotonic() + 60
        while len(server.requests) < 4 and time.monotonic() < end and proc.poll() is None:
            time.sleep(0.05)
        self.assertEqual(len(server.requests), 4, proc.poll())   # both edited, both waiting
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 128 + signal.SIGTERM, err)
        report = json.loads(out.splitlines()[-1])
        self.assertEqual(report["stop"], "interrupted")
        # every attempt's steps, tokens and cost so far (two calls each)
        self.assertEqual([(a["attempt"], a["steps"]) for a in report["attempts"]],
                         [(1, 2), (2, 2)], report["attempts"])
        self.assertEqual(report["steps"], 4)
        self.assertEqual(report["tokens"]["total"], 2 * 120)     # the answered calls
        self.assertEqual((self.read(repo, "calc.py"), self.read(repo, "tests/test_calc.py")),
                         (CALC, TESTS))
        self.assertEqual(os.listdir(scratch), [])
        code, out, err = run_cli(["undo", "-dir", repo])
        self.assertEqual(code, 0, err)
        self.assertEqual(self.read(repo, "calc.py"), CALC)


class LayoutTest(AttemptsCase):
    """Attempts on workspaces as users have them (tests/layouts.py): a cheating, a half and
    an honest model; the honest fix is verified and applied."""

    def run_three(self, layout: str, sandbox: str):
        repo = layouts.build(layout, self.tmp, FILES, name=f"{layout}-{sandbox}")
        server = self.serve_models(cheat=script(WEAKEN), half=script(FIX_ADD),
                                   fixer=script(FIX_ADD, FIX_MUL))
        code, report, err = self.attempts(repo, server, "-attempts", "3",
                                          "-models", "cheat,half,fixer", sandbox=sandbox)
        verdicts = {a["attempt"]: a["verdict"] for a in report["attempts"]}
        self.assertEqual(verdicts, {1: "REJECTED", 2: "FAILED", 3: "VERIFIED"},
                         report["attempts"])
        self.assertEqual((report["verdict"], code, report["chosen"]), ("VERIFIED", 0, 3),
                         report["summary"])
        self.assertIn("a * b", self.read(repo, "calc.py"))
        self.assertEqual(self.read(repo, "tests/test_calc.py"), TESTS)
        self.assertEqual(report["changed_files"], ["calc.py"])
        return repo, report

    def test_every_layout_under_bubblewrap(self):
        for layout in layouts.LAYOUTS:
            with self.subTest(layout=layout):
                repo, report = self.run_three(layout, "bwrap")
                if layout not in ("plain",):
                    # git still knows the checkout: only calc.py differs from the commit
                    changed = layouts.git(repo, "status", "--porcelain",
                                          "--untracked-files=no")
                    self.assertEqual(changed.split(), ["M", "calc.py"])

    def test_git_layouts_without_a_sandbox(self):
        for layout in ("git+venv", "worktree+venv", "submodule+venv"):
            with self.subTest(layout=layout):
                self.run_three(layout, "none")

    def test_the_default_jobs_run_every_attempt_at_once(self):
        repo, report = self.run_three("git+venv", "bwrap")
        note = next(e for e in read_trace(self.trace) if e.get("attempts") == 3)
        self.assertEqual(note["jobs"], 3)


def finds(pattern: str, sibling: str, then: str) -> tuple[str, dict]:
    """A run_command call: python3 waits (up to 5 s) for a file `pattern` globs, then
    appends `then` to the file `sibling` beside each one found."""
    code = ("import glob, os, time\n"
            "for _ in range(50):\n"
            f"    found = glob.glob({pattern!r})\n"
            "    if found:\n"
            "        break\n"
            "    time.sleep(0.1)\n"
            "for p in found:\n"
            f"    open(os.path.join(os.path.dirname(p), {sibling!r}), 'a').write({then!r})\n"
            "print(len(found))\n")
    return ("run_command", {"argv": ["python3", "-c", code]})


class IsolationTest(AttemptsCase):
    """What one attempt can do to another, or to the workspace, by sandbox mode."""

    def copies(self, tag: str) -> str:
        """A pattern for the private copy of attempt 1 that holds the file `tag`."""
        import tempfile
        return os.path.join(tempfile.gettempdir(), "golem-attempt1-*", "*", tag)

    def test_under_bubblewrap_an_attempt_cannot_reach_another_ones_copy(self):
        repo = layouts.build("git+venv", self.tmp, FILES)
        tag = f"tag-{os.getpid()}-{id(self)}.txt"
        server = self.serve_models(
            honest=script(("write_file", {"path": tag, "content": "x\n"}), FIX_ADD, FIX_MUL),
            meddler=script(finds(self.copies(tag), "calc.py", "\nBROKEN\n")))
        code, report, err = self.attempts(repo, server, "-attempts", "2", "-allow", "python3",
                                          "-models", "honest,meddler", sandbox="bwrap")
        self.assertEqual((report["verdict"], report["chosen"]), ("VERIFIED", 1),
                         report["summary"])
        self.assertNotIn("BROKEN", self.read(repo, "calc.py"))

    def test_without_a_sandbox_the_attempts_run_one_at_a_time(self):
        repo = layouts.build("git+venv", self.tmp, FILES)
        server = self.serve_models(half=script(FIX_ADD), fixer=script(FIX_ADD, FIX_MUL))
        code, report, err = self.attempts(repo, server, "-attempts", "2", "-jobs", "2",
                                          "-models", "half,fixer")
        self.assertEqual((report["verdict"], report["chosen"]), ("VERIFIED", 2))
        events = read_trace(self.trace)
        self.assertTrue(any("one at a time" in e.get("message", "") for e in events))
        first_done = next(i for i, e in enumerate(events)
                          if e["event"] == "attempt" and e.get("attempt") == 1)
        second_start = next(i for i, e in enumerate(events)
                            if e["event"] == "request" and e.get("attempt") == 2)
        self.assertLess(first_done, second_start)

    def test_without_a_sandbox_a_later_attempt_writing_a_verified_copy_applies_nothing(self):
        repo = layouts.build("git+venv", self.tmp, FILES)
        tag = f"tag-{os.getpid()}-{id(self)}.txt"
        planted = "\nimport os  # planted\n"
        server = self.serve_models(
            honest=script(("write_file", {"path": tag, "content": "x\n"}), FIX_ADD, FIX_MUL),
            meddler=script(finds(self.copies(tag), "calc.py", planted)))
        code, report, err = self.attempts(repo, server, "-attempts", "2", "-allow", "python3",
                                          "-models", "honest,meddler")
        # the meddler found the honest copy only because it ran under none: it wrote there
        self.assertEqual((report["verdict"], report["chosen"]), ("FAILED", None),
                         report["summary"])
        self.assertIn("the verified copy changed after its verification", report["summary"])
        self.assertEqual(self.read(repo, "calc.py"), CALC)
        self.assertFalse(os.path.exists(os.path.join(repo, tag)))

    def test_without_a_sandbox_a_change_to_the_real_workspace_applies_nothing(self):
        repo = layouts.build("git+venv", self.tmp, FILES)
        server = self.serve_models(
            fixer=script(finds(os.path.join(repo, "tests", "test_calc.py"), "test_calc.py",
                               "\n# planted\n"), FIX_ADD, FIX_MUL))
        code, report, err = self.attempts(repo, server, "-attempts", "2", "-allow", "python3",
                                          "-models", "fixer,fixer")
        self.assertEqual((report["verdict"], report["chosen"]), ("FAILED", None),
                         report["summary"])
        self.assertIn("the workspace changed during the attempts (tests/test_calc.py)",
                      report["summary"])
        self.assertEqual(self.read(repo, "calc.py"), CALC)


class SeedTest(AttemptsCase):
    def test_each_run_draws_new_seeds_and_records_them(self):
        seen = []
        for run in range(2):
            repo = make_repo(self.tmp, FILES, name=f"repo{run}")
            server = self.serve_models(a=script(FIX_ADD), b=script(FIX_ADD, FIX_MUL))
            code, report, err = self.attempts(repo, server, "-attempts", "2",
                                              "-models", "a,b")
            base = report["seed"]
            self.assertEqual({a["attempt"]: a["seed"] for a in report["attempts"]},
                             {1: base + 1, 2: base + 2})
            sent = {r["body"]["model"]: r["body"].get("seed") for r in server.requests}
            self.assertEqual(sent, {"a": base + 1, "b": base + 2})
            seen.append(base)
        self.assertNotEqual(seen[0], seen[1])

    def test_a_matrix_job_sends_a_seed_of_its_own_run(self):
        seeds = []
        for run in range(2):
            repo = make_repo(self.tmp, FILES, name=f"repo{run}")
            server = self.serve_models(b=script(FIX_ADD, FIX_MUL))
            code, report, err = self.attempts(repo, server, "-attempt", "2/2", "-models", "a,b")
            self.assertEqual({r["body"].get("seed") for r in server.requests}, {report["seed"]})
            noted = [e.get("seed") for e in read_trace(self.trace) if "seed" in e]
            self.assertEqual(noted, [report["seed"]])
            os.remove(self.trace)
            seeds.append(report["seed"])
        self.assertNotEqual(seeds[0], seeds[1])


class StrayTest(GolemCase):
    def test_a_command_starting_while_another_attempt_ends_is_not_taken_for_a_stray(self):
        """Attempts run side by side: one ending reaps the strays of its commands while
        another's command may be starting; that command is not one of them."""
        import threading
        from golem.tools import process
        if not process.become_subreaper():
            self.skipTest("no child subreaper here")
        stop = threading.Event()

        def reap():
            while not stop.is_set():
                process.reap_strays()

        reaper = threading.Thread(target=reap)
        reaper.start()
        try:
            done = [process.run(["python3", "-c", "print('ok')"], cwd=self.tmp,
                                env={"PATH": os.environ["PATH"]}, timeout=60)
                    for _ in range(30)]
        finally:
            stop.set()
            reaper.join()
        self.assertEqual({(d.exit_code, d.output.strip()) for d in done}, {(0, "ok")})


FORGED_NOOP = """\
--- a/calc.py
+++ b/calc.py
@@ -1,2 +1,3 @@
+# fixed
 def add(a, b):
     return a - b
"""
FORGED_TESTS = """\
--- a/tests/test_calc.py
+++ b/tests/test_calc.py
@@ -6,7 +6,7 @@
 class CalcTest(unittest.TestCase):
     def test_add(self):
-        self.assertEqual(add(2, 3), 5)
+        self.assertEqual(add(2, 3), -1)
\x20
     def test_mul(self):
-        self.assertEqual(mul(2, 3), 6)
+        self.assertEqual(mul(2, 3), 5)
\x20
"""
FORGED_THROUGH_A_LINK = """\
diff --git a/out b/out
new file mode 120000
--- /dev/null
+++ b/out
@@ -0,0 +1 @@
+../..
\\ No newline at end of file
diff --git a/out/through.txt b/out/through.txt
new file mode 100644
--- /dev/null
+++ b/out/through.txt
@@ -0,0 +1 @@
+planted
"""
FORGED_OUTSIDE = """\
--- /dev/null
+++ b/../outside.txt
@@ -0,0 +1 @@
+planted
"""


class PickTest(AttemptsCase):
    """`golem pick`: the matrix jobs' results and patches, trusted for nothing."""

    def job(self, name: str, attempt: str, models: str, server) -> str:
        """One matrix job: its own checkout, `fix -attempt K/N -patch`, artifacts kept."""
        repo = make_repo(self.tmp, FILES, name=f"checkout-{name}")
        out_dir = os.path.join(self.tmp, "artifacts", name)
        os.makedirs(out_dir)
        code, out, err = run_cli(["fix", "-dir", repo, "-test", TEST_CMD, "-provider", "openai",
                                  "-base-url", server.url, "-sandbox", "none", "-json",
                                  "-attempt", attempt, "-models", models,
                                  "-patch", os.path.join(out_dir, "fix.patch")])
        result = os.path.join(out_dir, "result.json")
        with open(result, "w", encoding="utf-8") as handle:
            handle.write(out)
        return result

    def forged(self, name: str, patch: str, **fields) -> str:
        out_dir = os.path.join(self.tmp, "artifacts", name)
        os.makedirs(out_dir)
        with open(os.path.join(out_dir, "fix.patch"), "w", encoding="utf-8") as handle:
            handle.write(patch)
        result = os.path.join(out_dir, "result.json")
        with open(result, "w", encoding="utf-8") as handle:
            json.dump({"verdict": "VERIFIED", "patch": "fix.patch", "cost": 0.0,
                       "attempt": "1/9", "suspicious": [], **fields}, handle)
        return result

    def pick(self, repo: str, *results: str):
        code, out, err = run_cli(["pick", "-dir", repo, "-test", TEST_CMD, "-sandbox", "none",
                                  "-json", *results])
        return code, json.loads(out.splitlines()[-1]), err

    def test_the_verified_patch_of_a_matrix_is_picked_and_undoable(self):
        server = self.serve_models(half=script(FIX_ADD), fixer=script(FIX_ADD, FIX_MUL))
        first = self.job("one", "1/2", "half,fixer", server)
        second = self.job("two", "2/2", "half,fixer", server)
        repo = make_repo(self.tmp, FILES, name="clean")
        code, report, err = self.pick(repo, first, second)
        self.assertEqual((report["verdict"], code), ("VERIFIED", 0), report["summary"])
        self.assertEqual(report["picked"], second)
        self.assertIn("a * b", self.read(repo, "calc.py"))
        self.assertEqual(run_cli(["undo", "-dir", repo])[0], 0)
        self.assertEqual(self.read(repo, "calc.py"), CALC)

    def test_forged_artifacts_are_re_verified_and_refused(self):
        server = self.serve_models(fixer=script(FIX_ADD, FIX_MUL))
        real = self.job("real", "3/3", "a,b,fixer", server)
        # claimed VERIFIED, each smaller than the real fix, so each is tried before it
        noop = self.forged("noop", FORGED_NOOP, attempt="1/3")
        cheat = self.forged("cheat", FORGED_TESTS, attempt="2/3")
        outside = self.forged("outside", FORGED_OUTSIDE, attempt="1/3")
        link = self.forged("link", FORGED_THROUGH_A_LINK, attempt="1/3")
        repo = make_repo(self.tmp, FILES, name="clean")
        code, report, err = self.pick(repo, noop, cheat, outside, link, real)
        self.assertEqual((report["verdict"], report["picked"]), ("VERIFIED", real),
                         report["candidates"])
        tried = {c["result"]: c["verdict"] for c in report["candidates"]}
        self.assertEqual(tried[noop], "FAILED")
        self.assertEqual(tried[cheat], "REJECTED")
        self.assertEqual((tried[outside], tried[link]), ("FAILED", "FAILED"))
        why = {c["result"]: c["summary"] for c in report["candidates"]}
        self.assertIn("beyond a symbolic link", why[link])
        self.assertEqual([p for p in os.listdir(self.tmp) if p.endswith(".txt")], [])
        self.assertEqual(self.read(repo, "tests/test_calc.py"), TESTS)

    def test_only_forged_artifacts_leave_the_workspace_as_it_was(self):
        noop = self.forged("noop", FORGED_NOOP)
        cheat = self.forged("cheat", FORGED_TESTS)
        repo = make_repo(self.tmp, FILES, name="clean")
        code, report, err = self.pick(repo, noop, cheat)
        self.assertEqual((report["verdict"], code, report["picked"]), ("FAILED", 1, None))
        self.assertEqual((self.read(repo, "calc.py"), self.read(repo, "tests/test_calc.py")),
                         (CALC, TESTS))


if __name__ == "__main__":
    unittest.main()
