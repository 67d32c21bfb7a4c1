"""`golem ask` with the demo provider on examples/notes: read-only, naming the files it used."""

from __future__ import annotations

import os
import shutil

from tests.fixtures import REPO_ROOT, GolemCase, last_json, read_trace, run_cli

NOTES = os.path.join(REPO_ROOT, "examples", "notes")
QUESTION = "which release added rate limiting, and what is the default?"
READ_TOOLS = {"list_files", "read_file", "search_files"}


def tree(root: str) -> dict[str, bytes]:
    """Every file below root, by relative path, with its bytes."""
    files = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            with open(path, "rb") as handle:
                files[os.path.relpath(path, root)] = handle.read()
    return files


class AskDemoTest(GolemCase):
    def setUp(self):
        super().setUp()
        self.notes = os.path.join(self.tmp, "notes")
        shutil.copytree(NOTES, self.notes)

    def ask(self, *extra: str):
        return run_cli(["ask", "-dir", self.notes, "-provider", "demo", "-trace", self.trace,
                        *extra, QUESTION])

    def test_answer_names_the_files_the_release_and_the_default(self):
        code, out, err = self.ask()
        self.assertEqual(code, 0, err)
        for fact in ("CHANGELOG.md", "config/defaults.toml", "1.4.0", "60"):
            self.assertIn(fact, out)

    def test_only_reading_tools_offered_and_called(self):
        self.assertEqual(self.ask()[0], 0)
        events = read_trace(self.trace)
        start = [e for e in events if e["event"] == "run_start"][0]
        self.assertTrue(set(start["tools"]) <= READ_TOOLS, start["tools"])
        calls = [e for e in events if e["event"] == "tool_call"]
        self.assertEqual([c["name"] for c in calls], ["search_files", "read_file", "read_file"])
        self.assertEqual(calls[0]["arguments"], {"pattern": "rate"})
        self.assertEqual({c["arguments"].get("path") for c in calls[1:]},
                         {"CHANGELOG.md", "config/defaults.toml"})
        self.assertFalse(any(e["event"] == "tool_result" and e["error"] for e in events))
        self.assertEqual(tree(self.notes), tree(NOTES))   # nothing written

    def test_console_shows_question_tool_calls_cost_and_message_count(self):
        code, out, err = self.ask()
        lines = err.splitlines()
        self.assertEqual(lines[0], f"question: {QUESTION}")
        self.assertIn('1 | search_files [args={"pattern":"rate"}]', lines)
        cost = [line for line in lines if line.startswith("cost: ")]
        self.assertEqual(len(cost), 1)
        self.assertRegex(cost[0], r"^cost: 3 model call\(s\), 3 tool call\(s\), \d+ tokens in, "
                                  r"\d+ out, \$0\.0000$")
        self.assertGreater(lines.index(cost[0]),
                           max(i for i, line in enumerate(lines) if line.startswith("* run")))
        self.assertRegex(lines[-1], r"^\(\d+ messages\)$")
        self.assertEqual(len(out.splitlines()), 1)    # the answer alone on stdout

    def test_json_result(self):
        code, out, err = self.ask("-json")
        report = last_json(out)
        self.assertEqual((code, report["stop"], report["answered"]), (0, "answered", True))
        self.assertEqual(report["tool_calls"], 3)
        self.assertIn("config/defaults.toml", report["answer"])
