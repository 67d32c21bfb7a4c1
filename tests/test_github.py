import json
import os
import re
import shutil
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout
from io import StringIO
from unittest import mock

from golem.cli import main
from tests import fixtures

EXAMPLE = fixtures.CALCULATOR


class GitHubOutputTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)
        self.summary = os.path.join(self.tmp, "summary.md")

    def fix(self, repo: str, **env) -> tuple[int, str]:
        """(exit code, stderr + stdout): annotations go to stderr, so they reach the job
        log however stdout is redirected."""
        out, err = StringIO(), StringIO()
        env = {"GOLEM_STATE_DIR": os.path.join(self.tmp, "state"), **env}
        with mock.patch.dict(os.environ, env), redirect_stdout(out), redirect_stderr(err):
            code = main(["fix", "-dir", repo, "-provider", "demo", "-json"])
        self.stdout = out.getvalue()
        self.assertNotIn("::error", self.stdout)    # stdout holds only the result
        return code, err.getvalue() + out.getvalue()

    def copy(self, name: str) -> str:
        repo = os.path.join(self.tmp, name)
        shutil.copytree(EXAMPLE, repo)
        return repo

    def test_verified_run_writes_a_summary_and_no_annotations(self):
        code, out = self.fix(self.copy("a"), GITHUB_ACTIONS="true",
                             GITHUB_STEP_SUMMARY=self.summary)
        self.assertEqual(code, 0)
        self.assertNotIn("::error", out)
        with open(self.summary, encoding="utf-8") as handle:
            text = handle.read()
        self.assertIn("golem: VERIFIED", text)
        self.assertIn("test_core.PowerTest.test_square", text)   # tests fixed, by id
        self.assertIn("| `calculator/core.py` | 2 | 2 |", text)  # diff stat
        self.assertIn("Cost: $", text)
        report = json.loads(out.strip().splitlines()[-1])
        self.assertEqual(report["diffstat"], {"calculator/core.py": [2, 2]})

    def test_failing_tests_and_protected_files_are_annotated(self):
        repo = self.copy("b")
        # the demo's edits cannot land: the suite keeps failing, and a test file is touched
        with open(os.path.join(repo, "calculator", "core.py"), "a") as handle:
            handle.write("\n")
        with open(os.path.join(repo, "calculator", "core.py")) as handle:
            source = handle.read()
        with open(os.path.join(repo, "calculator", "core.py"), "w") as handle:
            handle.write(source.replace("range(exponent - 1)", "range(exponent  - 1)"))
        code, out = self.fix(repo, GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=self.summary)
        self.assertEqual(code, 1)
        self.assertIn("::error title=golem: test still failing::test_core.PowerTest.test_square",
                      out)

    def test_result_file_leaves_stdout_to_the_job_log(self):
        repo = self.copy("d")
        with open(os.path.join(repo, "calculator", "core.py")) as handle:
            source = handle.read()
        with open(os.path.join(repo, "calculator", "core.py"), "w") as handle:
            handle.write(source.replace("range(exponent - 1)", "range(exponent  - 1)"))
        result = os.path.join(self.tmp, "out", "result.json")
        os.makedirs(os.path.dirname(result))
        out, err = StringIO(), StringIO()
        env = {"GOLEM_STATE_DIR": os.path.join(self.tmp, "state"), "GITHUB_ACTIONS": "true",
               "GITHUB_STEP_SUMMARY": self.summary}
        with mock.patch.dict(os.environ, env), redirect_stdout(out), redirect_stderr(err):
            code = main(["fix", "-dir", repo, "-provider", "demo", "-result", result])
        self.assertEqual(code, 1)
        # stdout: the verdict line alone; the annotations went to stderr, the log
        self.assertEqual(len(out.getvalue().splitlines()), 1)
        self.assertTrue(out.getvalue().startswith("FAILED"))
        self.assertIn("::error title=golem: test still failing::", err.getvalue())
        with open(result, encoding="utf-8") as handle:
            report = json.load(handle)
        self.assertEqual(report["verdict"], "FAILED")
        self.assertEqual(report["summary"], out.getvalue().strip())
        self.assertEqual(os.listdir(os.path.dirname(result)), ["result.json"])

    def test_annotation_data_cannot_inject_a_workflow_command(self):
        from golem.workflow.github import annotate
        out = StringIO()
        annotate({"still_failing": ["t%0A::warning::x\n::error::y"],
                  "protected_changes": [{"path": "a,b:c", "reason": "r"}]}, out)
        lines = out.getvalue().splitlines()
        self.assertEqual(len(lines), 2)
        self.assertIn("%250A", lines[0])
        self.assertIn("file=a%2Cb%3Ac,", lines[1])

    def test_summary_carries_the_diff_collapsed(self):
        code, _ = self.fix(self.copy("d"), GITHUB_ACTIONS="true",
                           GITHUB_STEP_SUMMARY=self.summary)
        self.assertEqual(code, 0)
        with open(self.summary, encoding="utf-8") as handle:
            summary = handle.read()
        self.assertIn("<details><summary>The diff (+", summary)
        self.assertRegex(summary, r"<pre>[^<]*\n\+    return sum\(values\) / len\(values\)\n")
        self.assertTrue(summary.rstrip().endswith("</details>"), summary)

    def test_the_diff_in_the_summary_cannot_close_its_block_or_speak_markdown(self):
        from golem.workflow.github import summary_markdown
        hostile = ("+</pre></details><img src=x onerror=alert(1)>\n"
                   "+```\n+| a | b |\n+# heading\n+[link](http://x)\n+&lt;b&gt;\n+\\`x`\n"
                   "+\n+<!-- \n+\x1b[31mred\n")
        text = summary_markdown({"verdict": "VERIFIED", "summary": "s"}, hostile)
        block = text[text.index("<details>"):]
        self.assertEqual(re.findall(r"</?[a-z]+", block),
                         ["<details", "<summary", "</summary", "<pre", "</pre", "</details"])
        for raw in ("`", "|", "\x1b", "&lt;b"):
            self.assertNotIn(raw, block[block.index("<pre>"):block.index("</pre>")])
        self.assertIn("&amp;lt;b&amp;gt;", block)

    def test_a_missing_key_is_an_error_line_and_a_summary_saying_why(self):
        out, err = StringIO(), StringIO()
        env = {"GOLEM_STATE_DIR": os.path.join(self.tmp, "state"), "GITHUB_ACTIONS": "true",
               "GITHUB_STEP_SUMMARY": self.summary}
        with mock.patch.dict(os.environ, env), redirect_stdout(out), redirect_stderr(err):
            os.environ.pop("ANTHROPIC_API_KEY", None)
            code = main(["fix", "-dir", self.copy("e"), "-provider", "anthropic"])
        self.assertEqual(code, 2)
        self.assertRegex(err.getvalue(), r"(?m)^::error title=golem fix did not run::"
                                         r"ANTHROPIC_API_KEY is not set")
        with open(self.summary, encoding="utf-8") as handle:
            summary = handle.read()
        self.assertIn("### golem fix: did not run", summary)
        self.assertIn("ANTHROPIC\\_API\\_KEY is not set", summary)

    def test_the_report_step_without_a_trace_says_why(self):
        err = StringIO()
        missing = os.path.join(self.tmp, "out", "trace.jsonl")
        with redirect_stderr(err):
            code = main(["trace", missing, "-html", os.path.join(self.tmp, "report.html")])
        self.assertEqual(code, 2)
        self.assertIn(f"golem: no trace at {missing}: the run wrote none", err.getvalue())
        self.assertNotIn("cannot read", err.getvalue())

    def test_nothing_outside_github_actions(self):
        code, out = self.fix(self.copy("c"))
        self.assertEqual(code, 0)
        self.assertNotIn("::error", out)
        self.assertFalse(os.path.exists(self.summary))


if __name__ == "__main__":
    unittest.main()
