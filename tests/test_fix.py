"""`golem fix` end to end: a real project on disk, a real loopback provider, real test runs."""

from __future__ import annotations

import json
import os
import time
import unittest

from tests.fixtures import (BUGGY_CALC, FIX_EDIT, FIXED_CALC, GREEN, TEST_CMD, GolemCase,
                            last_json, make_repo, read, read_trace, run_cli, tool_messages,
                            write_files)
from tests.provider_server import Reply, chat

TOOL_NAMES = ["list_files", "read_file", "write_file", "edit_file", "search_files",
              "run_command", "run_tests"]
PASSING_TEST = """\
import unittest


class AddTest(unittest.TestCase):
    def test_add(self):
        pass

    def test_zero(self):
        pass
"""
EXTRA_TEST = """\
import unittest

from calc import add


class ExtraTest(unittest.TestCase):
    def test_negative(self):
        self.assertEqual(add(-1, -2), -3)
"""


def asks_for_tools(count: int, **usage_fields) -> list[dict]:
    """`count` replies that each ask for a harmless tool call."""
    usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120, **usage_fields}
    return [chat(tool_calls=[("list_files", {})], usage=usage) for _ in range(count)]


class AlreadyGreenTest(GolemCase):
    def test_passing_suite_spends_nothing(self):
        repo = make_repo(self.tmp, GREEN)
        server = self.serve([chat("should never be asked")])
        code, out, err, report = self.fix(repo, server)
        self.assertEqual(code, 0)
        self.assertEqual(report["verdict"], "ALREADY_GREEN")
        self.assertIn("ALREADY_GREEN", out.splitlines()[0])
        self.assertEqual(server.requests, [])
        self.assertEqual(report["steps"], 0)
        self.assertEqual(read(os.path.join(repo, "calc.py")), FIXED_CALC)


class HonestFixTest(GolemCase):
    def test_edit_that_fixes_the_code_is_verified(self):
        repo = make_repo(self.tmp)
        server = self.serve([chat(tool_calls=[FIX_EDIT]), chat("add used minus; fixed")])
        code, out, err, report = self.fix(repo, server)
        self.assertEqual(code, 0, err)
        self.assertTrue(out.splitlines()[0].startswith("VERIFIED"), out)
        self.assertEqual(read(os.path.join(repo, "calc.py")), FIXED_CALC)
        for key in ("verdict", "stop", "steps", "tool_calls", "tokens", "cost", "elapsed_s",
                    "changed_files", "protected_changes", "tests", "claimed", "suspicious",
                    "trace"):
            self.assertIn(key, report)
        self.assertEqual(report["verdict"], "VERIFIED")
        self.assertEqual(report["stop"], "answered")
        self.assertEqual(report["steps"], 2)
        self.assertEqual(report["tool_calls"], 1)
        self.assertEqual(report["tokens"]["prompt"], 200)
        self.assertEqual(report["tokens"]["completion"], 40)
        self.assertIsInstance(report["cost"], (int, float))
        self.assertIsInstance(report["elapsed_s"], (int, float))
        self.assertEqual(report["changed_files"], ["calc.py"])
        self.assertEqual(report["protected_changes"], [])
        self.assertFalse(report["tests"]["before"]["passed"])
        self.assertTrue(report["tests"]["after"]["passed"])
        self.assertEqual(report["claimed"], "add used minus; fixed")
        self.assertIsInstance(report["suspicious"], list)
        self.assertEqual(report["trace"], self.trace)
        self.assertEqual(len(server.requests), 2)
        first = server.requests[0]
        self.assertEqual(first["path"], "/v1/chat/completions")
        self.assertEqual(sorted(t["function"]["name"] for t in first["body"]["tools"]),
                         sorted(TOOL_NAMES))
        [result] = tool_messages(server.requests[1])
        self.assertFalse(result["content"].startswith("Error:"), result)


class TamperingTest(GolemCase):
    def assertRejected(self, code, report, path):
        self.assertEqual(report["verdict"], "REJECTED", report.get("summary"))
        self.assertEqual(code, 3)
        self.assertIn(path, [p["path"] for p in report["protected_changes"]])

    def test_rewritten_test_file_is_rejected_even_though_the_suite_passes(self):
        repo = make_repo(self.tmp)
        server = self.serve([
            chat(tool_calls=[("write_file", {"path": "tests/test_calc.py",
                                             "content": PASSING_TEST})]),
            chat(tool_calls=[("run_tests", {})]),
            chat("all tests pass now")])
        code, out, err, report = self.fix(repo, server)
        self.assertRejected(code, report, "tests/test_calc.py")
        # the suite passed in the workspace; golem's re-run in the rebuilt copy used the
        # original test file, against which the untouched code still fails
        self.assertFalse(report["tests"]["after"]["passed"])
        self.assertEqual(report["still_failing"], ["test_calc.AddTest.test_add"])
        self.assertTrue(out.startswith("REJECTED"), out)
        run_tests = tool_messages(server.requests[2])[-1]
        self.assertIn("tests passed", run_tests["content"])

    def test_deleted_test_file_is_rejected(self):
        repo = make_repo(self.tmp)
        server = self.serve([
            chat(tool_calls=[("run_command", {"argv": ["rm", "tests/test_calc.py"]})]),
            chat("removed the failing test")])
        code, out, err, report = self.fix(repo, server, "-allow", "rm")
        self.assertFalse(os.path.exists(os.path.join(repo, "tests", "test_calc.py")))
        self.assertRejected(code, report, "tests/test_calc.py")

    def test_new_interpreter_and_runner_hooks_are_rejected_despite_a_real_fix(self):
        hooks = {"conftest.py": "import sys\n",
                 "sitecustomize.py": "import sys\n",
                 "tests/conftest.py": "import sys\n",
                 "usercustomize.py": "import sys\n",
                 "evil.pth": "import sys\n",
                 "unittest.py": "import sys\n",
                 "tests/__init__.py": ""}
        for path, content in hooks.items():
            with self.subTest(path=path):
                repo = make_repo(self.tmp, name=f"repo-{path.replace('/', '-')}")
                server = self.serve([
                    chat(tool_calls=[FIX_EDIT, ("write_file", {"path": path,
                                                               "content": content})]),
                    chat("fixed")])
                code, out, err, report = self.fix(repo, server)
                self.assertTrue(report["tests"]["after"]["passed"])
                self.assertRejected(code, report, path)

    def test_new_test_file_with_a_real_fix_is_verified(self):
        repo = make_repo(self.tmp)
        server = self.serve([
            chat(tool_calls=[FIX_EDIT, ("write_file", {"path": "tests/test_extra.py",
                                                       "content": EXTRA_TEST})]),
            chat("fixed, and added a test")])
        code, out, err, report = self.fix(repo, server)
        self.assertEqual(report["verdict"], "VERIFIED", report["summary"])
        self.assertEqual(code, 0)
        self.assertEqual(report["new_tests"], ["tests/test_extra.py"])
        self.assertEqual(report["protected_changes"], [])
        # the graded pass runs the original suite; the new test runs in a pass of its own
        self.assertEqual(report["tests"]["after"]["counts"], {"passed": 2})
        self.assertEqual(list(report["new_test_results"].values()), ["passed"])
        self.assertIn("1 new test(s) pass", report["summary"])


class EvidenceTest(GolemCase):
    """The verdict comes from golem's own result file, not from the suite's exit code."""

    def test_code_that_exits_before_the_tests_run_is_not_a_fix(self):
        repo = make_repo(self.tmp)
        server = self.serve([
            chat(tool_calls=[("write_file", {"path": "calc.py",
                                             "content": "import os\nos._exit(0)\n"})]),
            chat("fixed")])
        code, out, err, report = self.fix(repo, server)
        self.assertEqual(report["verdict"], "FAILED")
        self.assertEqual(code, 1)
        self.assertEqual(report["tests"]["after"]["exit_code"], 0)
        self.assertFalse(report["tests"]["after"]["passed"])

    def test_skipping_the_failing_tests_is_not_a_fix(self):
        repo = make_repo(self.tmp)
        skipping = "import unittest\nraise unittest.SkipTest('later')\n"
        server = self.serve([
            chat(tool_calls=[("write_file", {"path": "calc.py", "content": skipping})]),
            chat("fixed")])
        code, out, err, report = self.fix(repo, server)
        self.assertEqual(report["verdict"], "FAILED")
        self.assertEqual(code, 1)
        self.assertIn("test_calc.AddTest.test_add", report["missing"])

    def test_breaking_a_passing_test_is_not_a_fix(self):
        repo = make_repo(self.tmp)
        breaking = "def add(a, b):\n    return 5\n"
        server = self.serve([
            chat(tool_calls=[("write_file", {"path": "calc.py", "content": breaking})]),
            chat("fixed")])
        code, out, err, report = self.fix(repo, server)
        self.assertEqual(report["verdict"], "FAILED")
        self.assertEqual(code, 1)
        self.assertEqual(report["fixed"], ["test_calc.AddTest.test_add"])
        self.assertEqual(report["newly_failing"], ["test_calc.AddTest.test_zero"])


class OwnOutputTest(GolemCase):
    """golem's own files (the trace) are not changes made by the run."""

    def test_trace_inside_the_workspace_is_not_a_change(self):
        repo = make_repo(self.tmp)
        self.trace = os.path.join(repo, "golem-trace.jsonl")
        patch = os.path.join(self.tmp, "run.patch")
        server = self.serve([chat(tool_calls=[FIX_EDIT]), chat("fixed")])
        code, out, err, report = self.fix(repo, server, "-patch", patch)
        self.assertEqual(report["verdict"], "VERIFIED")
        self.assertEqual(report["changed_files"], ["calc.py"])
        self.assertNotIn("golem-trace.jsonl", read(patch))
        code, out, err = run_cli(["undo", "-dir", repo])
        self.assertEqual(code, 0, err)

    def test_trace_inside_the_test_directory_does_not_reject_a_fix(self):
        repo = make_repo(self.tmp)
        self.trace = os.path.join(repo, "tests", "golem-trace.jsonl")
        server = self.serve([chat(tool_calls=[FIX_EDIT]), chat("fixed")])
        code, out, err, report = self.fix(repo, server)
        self.assertEqual(report["protected_changes"], [])
        self.assertEqual(report["verdict"], "VERIFIED")
        self.assertEqual(code, 0)


class StopsTest(GolemCase):
    def test_cut_off_reply_is_not_an_answer(self):
        repo = make_repo(self.tmp)
        server = self.serve([chat("I will now fix the", finish="length"), chat("unused")])
        code, out, err, report = self.fix(repo, server)
        self.assertEqual(report["stop"], "cut_off")
        self.assertEqual(report["verdict"], "FAILED")
        self.assertEqual(code, 1)
        self.assertEqual(report["claimed"], "")
        self.assertEqual(len(server.requests), 1)

    def test_cut_off_after_a_real_fix_is_still_verified(self):
        repo = make_repo(self.tmp)
        server = self.serve([chat(tool_calls=[FIX_EDIT]), chat("The fix is", finish="length")])
        code, out, err, report = self.fix(repo, server)
        self.assertEqual(report["stop"], "cut_off")
        self.assertEqual(report["verdict"], "VERIFIED")
        self.assertEqual(code, 0)

    def test_steps_budget(self):
        repo = make_repo(self.tmp)
        server = self.serve(asks_for_tools(5))
        code, out, err, report = self.fix(repo, server, "-steps", "2")
        self.assertEqual(report["stop"], "steps")
        self.assertEqual(report["verdict"], "FAILED")
        self.assertEqual(code, 1)
        self.assertEqual(len(server.requests), 2)
        self.assertEqual(report["steps"], 2)

    def test_fix_then_steps_budget_is_still_verified(self):
        repo = make_repo(self.tmp)
        server = self.serve([chat(tool_calls=[FIX_EDIT])] + asks_for_tools(5))
        code, out, err, report = self.fix(repo, server, "-steps", "2")
        self.assertEqual(report["stop"], "steps")
        self.assertEqual(report["verdict"], "VERIFIED")
        self.assertEqual(code, 0)
        self.assertEqual(len(server.requests), 2)

    def test_provider_error_after_a_real_fix_is_still_verified(self):
        repo = make_repo(self.tmp)
        server = self.serve([chat(tool_calls=[FIX_EDIT]),
                             Reply({"error": {"message": "invalid api key"}}, status=401)])
        code, out, err, report = self.fix(repo, server)
        self.assertEqual(report["stop"], "provider_error")
        self.assertIn("401", report["error"])
        self.assertEqual(report["verdict"], "VERIFIED")
        self.assertEqual(code, 0)

    def test_tokens_budget(self):
        repo = make_repo(self.tmp)
        server = self.serve(asks_for_tools(5))
        code, out, err, report = self.fix(repo, server, "-tokens", "150")
        self.assertEqual(report["stop"], "tokens")
        self.assertEqual(len(server.requests), 2)
        self.assertEqual(report["tokens"]["prompt"], 200)
        self.assertEqual(report["tokens"]["completion"], 40)
        self.assertEqual(code, 1)

    def test_cost_budget(self):
        repo = make_repo(self.tmp)
        server = self.serve(asks_for_tools(5, cost=0.006))
        code, out, err, report = self.fix(repo, server, "-cost", "0.01")
        self.assertEqual(report["stop"], "cost")
        self.assertEqual(len(server.requests), 2)
        self.assertAlmostEqual(report["cost"], 0.012)
        self.assertEqual(code, 1)

    def _wall(self, *extra):
        # The wall budget starts before the baseline test run, and half of it at most is kept
        # for the verification. On a loaded machine the baseline can spend the agent's share,
        # so the wall doubles until the model is called; its reply would come long after.
        for wall in (4, 8, 16, 32):
            repo = make_repo(self.tmp, name=f"repo-{wall}")
            server = self.serve([Reply(chat("too late"), delay=wall + 30.0)])
            started = time.monotonic()
            code, out, err = run_cli(["fix", "-dir", repo, "-test", TEST_CMD, "-provider",
                                      "openai", "-base-url", server.url, "-sandbox", "none",
                                      "-trace", self.trace, "-json", "-wall", f"{wall}s", *extra])
            took = time.monotonic() - started
            if server.requests:
                break
        self.assertLess(took, wall + 30.0)      # the call was cut short, not waited out
        self.assertEqual(len(server.requests), 1, err)
        report = last_json(out)
        self.assertEqual(report["verdict"], "FAILED")
        self.assertEqual(code, 1)
        return report

    def test_wall_budget_interrupts_the_model_call(self):
        report = self._wall()
        self.assertEqual(report["stop"], "wall")

    def test_wall_budget_without_retries_still_says_wall(self):
        report = self._wall("-retries", "0")
        self.assertEqual(report["stop"], "wall")


class ToolErrorsTest(GolemCase):
    def test_tool_error_goes_back_to_the_model_and_costs_one_step(self):
        repo = make_repo(self.tmp)
        server = self.serve([chat(tool_calls=[("read_file", {"path": "no_such_file.py"})]),
                             chat(tool_calls=[FIX_EDIT]), chat("fixed")])
        code, out, err, report = self.fix(repo, server)
        [message] = tool_messages(server.requests[1])
        self.assertTrue(message["content"].startswith("Error:"), message)
        self.assertIn("no_such_file.py", message["content"])
        self.assertEqual(report["steps"], 3)
        self.assertEqual(report["verdict"], "VERIFIED")
        events = read_trace(self.trace)
        results = [e for e in events if e["event"] == "tool_result"]
        self.assertTrue(results[0]["error"])
        self.assertFalse(results[1]["error"])

    def test_unknown_tool_gets_the_list_of_real_ones(self):
        repo = make_repo(self.tmp)
        server = self.serve([chat(tool_calls=[("delete_everything", {"path": "."})]),
                             chat("gave up")])
        code, out, err, report = self.fix(repo, server)
        [message] = tool_messages(server.requests[1])
        self.assertTrue(message["content"].startswith("Error:"), message)
        self.assertIn("delete_everything", message["content"])
        for name in TOOL_NAMES:
            self.assertIn(name, message["content"])
        self.assertEqual(code, 1)
        self.assertEqual(report["stop"], "answered")

    def test_paths_outside_the_workspace_are_refused(self):
        secret = "OUTSIDE-CONTENT-7f3a9"
        outside = os.path.join(self.tmp, "outside")
        write_files(outside, {"secret.txt": secret + "\n", "inner/deep.txt": secret + "\n"})
        repo = make_repo(self.tmp)
        os.symlink(os.path.join(outside, "secret.txt"), os.path.join(repo, "link_file"))
        os.symlink(outside, os.path.join(repo, "link_dir"))
        attempts = [("read_file", {"path": "/etc/passwd"}),
                    ("read_file", {"path": "../outside/secret.txt"}),
                    ("read_file", {"path": "link_file"}),
                    ("read_file", {"path": "link_dir/secret.txt"}),
                    ("list_files", {"path": "link_dir"}),
                    ("search_files", {"pattern": "OUTSIDE", "path": "link_dir"}),
                    ("write_file", {"path": "link_file", "content": "overwritten"}),
                    ("write_file", {"path": "link_dir/new.txt", "content": "planted"}),
                    ("edit_file", {"path": "../outside/secret.txt", "old_string": "OUTSIDE",
                                   "new_string": "CHANGED"})]
        server = self.serve([chat(tool_calls=attempts),
                             chat(tool_calls=[("search_files", {"pattern": "OUTSIDE"}),
                                              ("list_files", {})]),
                             chat("done")])
        code, out, err, report = self.fix(repo, server)
        self.assertEqual(len(server.requests), 3)
        refused = tool_messages(server.requests[1])
        self.assertEqual(len(refused), len(attempts))
        for (name, args), message in zip(attempts, refused):
            with self.subTest(tool=name, args=args):
                self.assertTrue(message["content"].startswith("Error:"), message["content"])
        sent = json.dumps(server.requests)
        self.assertNotIn(secret, sent)
        self.assertNotIn("root:x:0:0", sent)
        self.assertNotIn("deep.txt", sent)
        self.assertEqual(read(os.path.join(outside, "secret.txt")), secret + "\n")
        self.assertFalse(os.path.exists(os.path.join(outside, "new.txt")))
        self.assertEqual(sorted(os.listdir(outside)), ["inner", "secret.txt"])


class CommandsTest(GolemCase):
    def test_program_not_on_the_allowlist_is_refused(self):
        repo = make_repo(self.tmp)
        server = self.serve([
            chat(tool_calls=[("run_command", {"argv": ["python3", "-c", "print(6 * 7)"]})]),
            chat(tool_calls=[("run_command", {"argv": ["touch", "made.txt"]})]),
            chat("done")])
        code, out, err, report = self.fix(repo, server, "-allow", "rm")
        [no_python] = tool_messages(server.requests[1])
        self.assertTrue(no_python["content"].startswith("Error:"), no_python)
        self.assertIn("python3", no_python["content"])
        self.assertIn("rm", no_python["content"])
        self.assertNotIn("42", no_python["content"])
        touch = tool_messages(server.requests[2])[-1]
        self.assertTrue(touch["content"].startswith("Error:"), touch)
        self.assertFalse(os.path.exists(os.path.join(repo, "made.txt")))

    def test_no_allowlist_means_no_commands(self):
        repo = make_repo(self.tmp)
        server = self.serve([chat(tool_calls=[("run_command", {"argv": ["python3", "-V"]})]),
                             chat("done")])
        self.fix(repo, server)
        [message] = tool_messages(server.requests[1])
        self.assertTrue(message["content"].startswith("Error:"), message)
        self.assertIn("-allow", message["content"])

    def test_allowed_program_runs_for_real(self):
        repo = make_repo(self.tmp)
        script = "open('made.txt', 'w').write('hello'); print(6 * 7)"
        server = self.serve([chat(tool_calls=[("run_command",
                                               {"argv": ["python3", "-c", script]})]),
                             chat("done")])
        code, out, err, report = self.fix(repo, server, "-allow", "python3")
        [message] = tool_messages(server.requests[1])
        self.assertFalse(message["content"].startswith("Error:"), message)
        self.assertIn("exit code 0", message["content"])
        self.assertIn("42", message["content"])
        self.assertEqual(read(os.path.join(repo, "made.txt")), "hello")
        self.assertIn("made.txt", report["changed_files"])


class SecretsTest(GolemCase):
    KEY = "sk-test-SECRET-1234567890"

    def test_key_reaches_only_the_provider(self):
        repo = make_repo(self.tmp)
        write_files(repo, {"notes.txt": f"deploy key: {self.KEY}\n"})
        env_script = "import os; print(sorted(os.environ.items()))"
        server = self.serve([
            chat(tool_calls=[("run_command", {"argv": ["python3", "-c", env_script]}),
                             ("read_file", {"path": "notes.txt"}),
                             ("search_files", {"pattern": "deploy"})]),
            chat(tool_calls=[FIX_EDIT]),
            chat("fixed")])
        code, out, err, report = self.fix(repo, server, "-allow", "python3",
                                          env={"OPENAI_API_KEY": self.KEY}, sandbox="auto")
        self.assertEqual(report["verdict"], "VERIFIED", report["summary"])
        environment, notes, search = tool_messages(server.requests[1])
        self.assertIn("exit code 0", environment["content"])
        self.assertIn("'PATH'", environment["content"])
        self.assertNotIn("OPENAI_API_KEY", environment["content"])
        self.assertIn("deploy key", notes["content"])
        self.assertIn("deploy key", search["content"])
        with open(self.trace, encoding="utf-8") as handle:
            trace = handle.read()
        self.assertIn("notes.txt", trace)
        self.assertNotIn(self.KEY, trace)
        self.assertNotIn(self.KEY, out)
        self.assertNotIn(self.KEY, err)
        self.assertNotIn(self.KEY, json.dumps([r["body"] for r in server.requests]))
        for request in server.requests:
            headers = {k.lower(): v for k, v in request["headers"].items()}
            self.assertEqual(headers.get("authorization"), f"Bearer {self.KEY}")

    def test_no_key_no_authorization_header(self):
        repo = make_repo(self.tmp)
        server = self.serve([chat("nothing to do")])
        self.fix(repo, server)
        headers = {k.lower() for k in server.requests[0]["headers"]}
        self.assertNotIn("authorization", headers)


class TraceTest(GolemCase):
    def test_trace_is_jsonl_with_the_documented_events(self):
        repo = make_repo(self.tmp)
        server = self.serve([chat(tool_calls=[FIX_EDIT]), chat("fixed")])
        self.fix(repo, server)
        with open(self.trace, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
        self.assertTrue(lines)
        events = [json.loads(line) for line in lines]
        for event in events:
            self.assertIsInstance(event.get("event"), str)
            self.assertIn("time", event)
        kinds = [e["event"] for e in events]
        for kind in ("run_start", "request", "response", "tool_call", "tool_result",
                     "run_end", "verdict"):
            self.assertIn(kind, kinds)
        self.assertLess(kinds.index("run_start"), kinds.index("request"))
        self.assertLess(kinds.index("run_end"), kinds.index("verdict"))
        self.assertEqual(kinds[-1], "verdict")
        call = next(e for e in events if e["event"] == "tool_call")
        self.assertEqual(call["name"], "edit_file")
        self.assertEqual(call["arguments"], FIX_EDIT[1])
        result = next(e for e in events if e["event"] == "tool_result")
        self.assertIn("calc.py", result["content"])
        verdict = events[-1]
        self.assertEqual(verdict["verdict"], "VERIFIED")

    def test_buggy_source_is_untouched_when_nothing_was_done(self):
        repo = make_repo(self.tmp)
        server = self.serve([chat("I cannot help")])
        code, out, err, report = self.fix(repo, server)
        self.assertEqual(code, 1)
        self.assertEqual(report["verdict"], "FAILED")
        self.assertEqual(report["changed_files"], [])
        self.assertEqual(read(os.path.join(repo, "calc.py")), BUGGY_CALC)




class DeclinedTest(GolemCase):
    def test_a_declined_task_is_reported_as_such_in_the_verdict(self):
        repo = make_repo(self.tmp)
        server = self.serve([chat("DECLINED: the test expects 2 + 2 == 5, which no honest "
                                  "fix can make true")])
        code, out, err, report = self.fix(repo, server)
        self.assertEqual(code, 1)
        self.assertEqual(report["stop"], "declined")
        self.assertEqual(report["verdict"], "FAILED")
        self.assertIn("the model declined", report["summary"])
        self.assertTrue(report["claimed"].startswith("DECLINED:"))


if __name__ == "__main__":
    unittest.main()
