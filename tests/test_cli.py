"""The command line as a user meets it: flags, errors, exit codes and the smaller commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import unittest

import golem
from tests.fixtures import (BUGGY_CALC, CALC_TESTS, FIX_EDIT, FIXED_CALC, GREEN, REPO_ROOT,
                            TEST_CMD, GolemCase, git, last_json, make_repo, read, run_cli,
                            write_files)
from tests.provider_server import Reply, chat

TOOL_NAMES = {"list_files", "read_file", "write_file", "edit_file", "search_files",
              "run_command", "run_tests"}
HELPER = "def double(x):\n    return 2 * x\n"


class UsageErrorsTest(GolemCase):
    def assertUsageError(self, code, out, err, *fragments):
        self.assertEqual(code, 2)
        self.assertEqual(out, "")
        lines = err.splitlines()
        self.assertEqual(len(lines), 1, err)
        self.assertTrue(lines[0].startswith("golem:"), err)
        for fragment in fragments:
            self.assertIn(fragment, lines[0])

    def test_missing_openrouter_key_runs_nothing(self):
        repo = make_repo(self.tmp)
        server = self.serve([chat("never")])
        code, out, err = run_cli(["fix", "-dir", repo, "-test", TEST_CMD, "-base-url",
                                  server.url, "-trace", self.trace])
        self.assertUsageError(code, out, err, "OPENROUTER_API_KEY")
        self.assertEqual(server.requests, [])
        self.assertFalse(os.path.exists(self.trace))
        self.assertFalse(os.path.exists(os.environ["GOLEM_STATE_DIR"]))

    def test_blank_openrouter_key_counts_as_missing(self):
        repo = make_repo(self.tmp)
        code, out, err = run_cli(["fix", "-dir", repo], env={"OPENROUTER_API_KEY": "  "})
        self.assertUsageError(code, out, err, "OPENROUTER_API_KEY")

    def test_unknown_provider_lists_the_real_ones(self):
        repo = make_repo(self.tmp)
        code, out, err = run_cli(["fix", "-dir", repo, "-provider", "nosuch"])
        self.assertUsageError(code, out, err, "nosuch", "openrouter", "openai", "demo")

    def test_missing_directory(self):
        missing = os.path.join(self.tmp, "nowhere")
        code, out, err = run_cli(["fix", "-dir", missing, "-provider", "openai"])
        self.assertUsageError(code, out, err, missing)

    def test_bad_budget_values(self):
        repo = make_repo(self.tmp)
        cases = (("-steps", "-1", "steps"), ("-wall", "soon", "soon"),
                 ("-cost", "-0.5", "cost"), ("-tokens", "-3", "tokens"))
        for flag, value, named in cases:
            with self.subTest(flag=flag):
                code, out, err = run_cli(["fix", "-dir", repo, "-provider", "openai",
                                          flag, value])
                self.assertUsageError(code, out, err, named)

    def test_unknown_command_suggests_the_closest(self):
        code, out, err = run_cli(["fxi"])
        self.assertUsageError(code, out, err, "fxi", "fix")

    def test_unknown_flag(self):
        code, out, err = run_cli(["fix", "-frobnicate"])
        self.assertEqual(code, 2)
        self.assertIn("frobnicate", err)


class SmallCommandsTest(GolemCase):
    def test_version(self):
        for flag in ("--version", "-version"):
            with self.subTest(flag=flag):
                code, out, err = run_cli([flag])
                self.assertEqual(code, 0)
                self.assertEqual(out.strip(), f"golem {golem.__version__}")

    def test_module_entry_point(self):
        done = subprocess.run([sys.executable, "-m", "golem", "--version"], cwd=REPO_ROOT,
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout.strip(), f"golem {golem.__version__}")

    def test_tools_text(self):
        code, out, err = run_cli(["tools"])
        self.assertEqual(code, 0)
        for name in TOOL_NAMES:
            self.assertIn(f"{name}(", out)

    def test_tools_json(self):
        for flag in ("-json", "--json"):
            with self.subTest(flag=flag):
                code, out, err = run_cli(["tools", flag])
                self.assertEqual(code, 0)
                specs = json.loads(out)
                self.assertIsInstance(specs, list)
                self.assertEqual({s["name"] for s in specs}, TOOL_NAMES)
                self.assertEqual(len(specs), 7)
                by_name = {s["name"]: s for s in specs}
                self.assertEqual(set(by_name["edit_file"]["parameters"]["properties"]),
                                 {"path", "old_string", "new_string"})
                self.assertEqual(set(by_name["run_command"]["parameters"]["properties"]),
                                 {"argv"})

    def test_one_dash_and_two_dashes(self):
        for dash in ("-", "--"):
            with self.subTest(dash=dash):
                repo = make_repo(self.tmp, GREEN, name=f"repo{len(dash)}")
                server = self.serve([])
                code, out, err = run_cli([
                    "fix", f"{dash}dir", repo, f"{dash}test", TEST_CMD,
                    f"{dash}provider", "openai", f"{dash}base-url", server.url,
                    f"{dash}sandbox", "none", f"{dash}steps", "3", f"{dash}json"])
                self.assertEqual(code, 0, err)
                self.assertEqual(last_json(out)["verdict"], "ALREADY_GREEN")


class RunCommandTest(GolemCase):
    def run_goal(self, server, *extra, goal="write a helper"):
        repo = make_repo(self.tmp)
        code, out, err = run_cli(["run", "-dir", repo, "-goal", goal, "-provider", "openai",
                                  "-base-url", server.url, "-sandbox", "none", "-json",
                                  *extra])
        return repo, code, out, err

    def test_answered_run_exits_zero(self):
        server = self.serve([
            chat(tool_calls=[("write_file", {"path": "helper.py", "content": HELPER})]),
            chat("wrote helper.py")])
        repo, code, out, err = self.run_goal(server)
        self.assertEqual(code, 0, err)
        self.assertEqual(out.splitlines()[0], "wrote helper.py")
        report = last_json(out)
        self.assertEqual(report["stop"], "answered")
        self.assertEqual(read(os.path.join(repo, "helper.py")), HELPER)
        self.assertIn("write a helper", json.dumps(server.requests[0]["body"]["messages"]))

    def test_provider_error_exits_non_zero(self):
        server = self.serve([Reply({"error": {"message": "invalid api key"}}, status=401)])
        repo, code, out, err = self.run_goal(server)
        self.assertNotEqual(code, 0)
        self.assertNotEqual(code, 2)
        report = last_json(out)
        self.assertEqual(report["stop"], "provider_error")
        self.assertIn("401", report["error"])
        self.assertEqual(len(server.requests), 1)

    def test_budget_stop_exits_non_zero(self):
        server = self.serve([chat(tool_calls=[("list_files", {})]) for _ in range(3)])
        repo, code, out, err = self.run_goal(server, "-steps", "1")
        self.assertNotEqual(code, 0)
        self.assertEqual(last_json(out)["stop"], "steps")
        self.assertEqual(len(server.requests), 1)


class TraceCommandTest(GolemCase):
    def test_prints_the_console_lines_of_a_recorded_run(self):
        repo = make_repo(self.tmp)
        server = self.serve([chat(tool_calls=[FIX_EDIT]), chat("fixed")])
        code, out, err = run_cli(["fix", "-dir", repo, "-test", TEST_CMD, "-provider",
                                  "openai", "-base-url", server.url, "-sandbox", "none",
                                  "-trace", self.trace])
        self.assertEqual(code, 0, err)
        code, shown, trace_err = run_cli(["trace", self.trace])
        self.assertEqual(code, 0, trace_err)
        # stderr as it was, then the verdict where stdout had it, once
        self.assertEqual(shown, err + out)
        self.assertIn("edit_file", shown)
        self.assertIn(" calc.py |    2 +-", shown)
        self.assertEqual(shown.count("VERIFIED"), 1)

    def test_missing_trace_file(self):
        missing = os.path.join(self.tmp, "nope.jsonl")
        code, out, err = run_cli(["trace", missing])
        self.assertEqual(code, 2)
        self.assertIn(missing, err)

    def test_not_a_trace(self):
        path = os.path.join(self.tmp, "bad.jsonl")
        write_files(self.tmp, {"bad.jsonl": '{"event": "note", "time": "x"}\nnot json\n'})
        code, out, err = run_cli(["trace", path])
        self.assertEqual(code, 2)
        self.assertIn(":2", err)


class UndoAndPatchTest(GolemCase):
    def fix_run(self, repo, replies, *extra):
        server = self.serve(replies)
        code, out, err = run_cli(["fix", "-dir", repo, "-test", TEST_CMD, "-provider",
                                  "openai", "-base-url", server.url, "-sandbox", "none",
                                  "-json", *extra])
        return code, last_json(out)

    def test_undo_restores_edits_and_removes_created_files(self):
        repo = make_repo(self.tmp)
        code, report = self.fix_run(repo, [
            chat(tool_calls=[FIX_EDIT, ("write_file", {"path": "helper.py",
                                                       "content": HELPER})]),
            chat("fixed")])
        self.assertEqual(report["verdict"], "VERIFIED")
        self.assertEqual(read(os.path.join(repo, "calc.py")), FIXED_CALC)
        code, out, err = run_cli(["undo", "-dir", repo])
        self.assertEqual(code, 0, err)
        self.assertEqual(read(os.path.join(repo, "calc.py")), BUGGY_CALC)
        self.assertFalse(os.path.exists(os.path.join(repo, "helper.py")))
        self.assertEqual(sorted(os.listdir(repo)), ["calc.py", "tests"])
        self.assertIn(report["run_id"], out)
        code, out, err = run_cli(["undo", "-dir", repo])
        self.assertEqual(code, 2)

    def test_undo_brings_back_uncommitted_work_by_run_id(self):
        repo = make_repo(self.tmp, git_repo=True)
        dirty = "# work in progress\n" + BUGGY_CALC
        write_files(repo, {"calc.py": dirty, "notes.txt": "untracked\n"})
        code, report = self.fix_run(repo, [
            chat(tool_calls=[FIX_EDIT, ("write_file", {"path": "notes.txt",
                                                       "content": "replaced\n"})]),
            chat("fixed")])
        self.assertEqual(report["verdict"], "VERIFIED")
        code, out, err = run_cli(["undo", report["run_id"], "--dir", repo])
        self.assertEqual(code, 0, err)
        self.assertEqual(read(os.path.join(repo, "calc.py")), dirty)
        self.assertEqual(read(os.path.join(repo, "notes.txt")), "untracked\n")

    def test_patch_applies_to_a_pristine_copy_and_leaves_out_protected_changes(self):
        repo = make_repo(self.tmp, {**BUGGY_FILES_WITH_README}, git_repo=True)
        write_files(repo, {"README.md": "my own uncommitted notes\n"})
        patch = os.path.join(self.tmp, "run.patch")
        code, report = self.fix_run(repo, [
            chat(tool_calls=[FIX_EDIT,
                             ("write_file", {"path": "pkg/helper.py", "content": HELPER}),
                             ("write_file", {"path": "tests/test_calc.py",
                                             "content": CALC_TESTS + "# touched\n"})]),
            chat("fixed")], "-patch", patch)
        self.assertEqual(report["verdict"], "REJECTED")
        self.assertEqual(code, 3)
        self.assertEqual(report["patch"], patch)
        text = read(patch)
        self.assertIn("a/calc.py", text)
        self.assertIn("b/pkg/helper.py", text)
        self.assertNotIn("test_calc.py", text)
        self.assertNotIn("README.md", text)
        pristine = os.path.join(self.tmp, "pristine")
        git(self.tmp, "clone", "-q", repo, pristine)
        git(pristine, "apply", "--check", patch)
        git(pristine, "apply", patch)
        self.assertEqual(read(os.path.join(pristine, "calc.py")), FIXED_CALC)
        self.assertEqual(read(os.path.join(pristine, "pkg", "helper.py")), HELPER)
        self.assertEqual(read(os.path.join(pristine, "tests", "test_calc.py")), CALC_TESTS)
        self.assertEqual(read(os.path.join(pristine, "README.md")), "readme\n")

    def test_patch_of_a_verified_run_applies_in_the_workspace_after_undo(self):
        repo = make_repo(self.tmp, git_repo=True)
        patch = os.path.join(self.tmp, "run.patch")
        code, report = self.fix_run(repo, [chat(tool_calls=[FIX_EDIT]), chat("fixed")],
                                    "--patch", patch)
        self.assertEqual(code, 0)
        code, out, err = run_cli(["undo", "-dir", repo])
        self.assertEqual(code, 0, err)
        self.assertEqual(read(os.path.join(repo, "calc.py")), BUGGY_CALC)
        git(repo, "apply", patch)
        self.assertEqual(read(os.path.join(repo, "calc.py")), FIXED_CALC)


BUGGY_FILES_WITH_README = {"calc.py": BUGGY_CALC, "tests/test_calc.py": CALC_TESTS,
                           "README.md": "readme\n"}


if __name__ == "__main__":
    unittest.main()
