"""`golem trace FILE -html OUT`: one self-contained page, with everything from the data escaped."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import unittest
from html.parser import HTMLParser

from tests import fixtures
from tests.fixtures import REPO_ROOT, GolemCase, read, read_trace, run_cli

CALCULATOR = fixtures.CALCULATOR
NOTES = os.path.join(REPO_ROOT, "examples", "notes")
PLANTED = "<script>alert(1)</script>"
BROWSERS = ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome")
# Tags that make a browser fetch or run something.
FETCHING = {"script", "link", "img", "iframe", "object", "embed", "source", "video", "audio",
            "base", "form"}


class Tags(HTMLParser):
    """The real tags of a page (escaped text is not a tag), and the text of its <style>."""

    def __init__(self, page: str):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.style = ""
        self._in_style = False
        self.feed(page)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_style = tag == "style"

    def handle_endtag(self, tag):
        self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            self.style += data


def assertSelfContained(case, page: str) -> None:
    """No tag that loads or runs anything, no event handlers, links only as plain links."""
    case.assertNotIn("<script", page.lower())
    parsed = Tags(page)
    for tag, attrs in parsed.tags:
        case.assertNotIn(tag, FETCHING)
        for name, value in attrs.items():
            case.assertFalse(name.startswith("on") or name in ("src", "srcset"), (tag, name))
            if name == "href":
                case.assertEqual(tag, "a")
                case.assertFalse((value or "").lower().startswith("javascript:"), value)
    case.assertNotIn("url(", parsed.style)
    case.assertNotIn("@import", parsed.style)


class RecordedRunTest(GolemCase):
    def setUp(self):
        super().setUp()
        self.repo = os.path.join(self.tmp, "repo")
        shutil.copytree(CALCULATOR, self.repo)
        code, out, err = run_cli(["fix", "-dir", self.repo, "-provider", "demo",
                                  "-trace", self.trace])
        self.assertEqual(code, 0, err)
        self.events = read_trace(self.trace)
        self.out = os.path.join(self.tmp, "report.html")

    def render(self) -> str:
        code, out, err = run_cli(["trace", self.trace, "-html", self.out])
        self.assertEqual((code, out), (0, ""), err)
        return read(self.out)

    def test_page_shows_the_run(self):
        page = self.render()
        verdict = [e for e in self.events if e["event"] == "verdict"][-1]
        self.assertIn("VERIFIED", page)
        self.assertIn(verdict["summary"], page)
        for call in (e for e in self.events if e["event"] == "tool_call"):
            self.assertIn(f"<h3>{call['name']}</h3>", page)
        self.assertIn("edited calculator/core.py at line 20", page)   # a tool result
        baseline = [e for e in self.events if e["event"] == "baseline"][0]
        self.assertTrue(baseline["failing"])
        for test_id in baseline["failing"]:
            self.assertIn(test_id, page)
        self.assertIn("calculator/core.py", page)                     # changed files
        self.assertIn("Fixed two defects in calculator/core.py", page)  # the claim
        self.assertIn("<details>", page)
        for fact in ("demo", "tool calls", "tokens", "elapsed", "answered", "step 7"):
            self.assertIn(fact, page)
        assertSelfContained(self, page)

    def test_the_wall_budget_is_shown_as_given(self):
        # the agent's share is -wall less what is kept for the verification; the page shows
        # the budget the user gave
        code, out, err = run_cli(["fix", "-dir", self.repo, "-provider", "demo", "-wall", "30m",
                                  "-trace", self.trace])
        self.assertEqual(code, 0, err)
        page = self.render()
        self.assertIn("wall 30m,", page)
        self.assertNotIn("wall 29m", page)

    def test_page_has_the_diff_the_test_table_the_date_and_durations(self):
        page = self.render()
        # the unified diff of the allowed change, coloured line by line
        self.assertIn("<h2>The allowed changes</h2>", page)
        self.assertIn("<span class=head>diff --git a/calculator/core.py b/calculator/core.py"
                      "</span>", page)
        self.assertIn("<span class=del>-    return sum(values) / (len(values) - 1)</span>",
                      page)
        self.assertIn("<span class=add>+    return sum(values) / len(values)</span>", page)
        self.assertNotIn("old_string&quot;: &quot;return sum", page.split("<h2>Timeline")[0])
        # every test before and after, the changed ones first and marked
        outcomes = [e for e in self.events if e["event"] == "outcomes"][-1]
        self.assertEqual(len(outcomes["before"]), 10)
        table = page.split("<table class=tests>", 1)[1].split("</table>", 1)[0]
        rows = table.split("<tr")[2:]
        self.assertEqual(len(rows), 10)
        changed = [r for r in rows if r.startswith(" class=changed")]
        self.assertEqual(len(changed), 3)
        self.assertEqual(rows[:3], changed)
        for test_id, before in outcomes["before"].items():
            self.assertIn(f"<code>{test_id}</code>", table)
        self.assertIn("<td class=add>passed</td>", changed[0])
        # when, and how long each part took
        start = [e for e in self.events if e["event"] == "run_start"][0]
        self.assertIn(start["time"][:10], page)
        for part in ("baseline", "agent", "verification"):
            self.assertRegex(page, rf"{part} \d+(\.\d+)?m?s")
        # the baseline was broken, so its output is there to read
        self.assertIn("the baseline's output", page)
        self.assertIn("ZeroDivisionError", page)
        self.assertNotIn("; evidence: None", page)
        assertSelfContained(self, page)

    def test_a_real_browser_renders_the_page(self):
        browser = next(filter(None, map(shutil.which, BROWSERS)), None)
        if browser is None:
            self.skipTest(f"no headless browser here ({', '.join(BROWSERS)})")
        page = self.render()
        shot = os.path.join(self.tmp, "report.png")
        done = subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             f"--user-data-dir={os.path.join(self.tmp, 'profile')}", "--window-size=1200,2000",
             f"--screenshot={shot}", "file://" + self.out],
            cwd=self.tmp, capture_output=True, text=True, timeout=120,
            env={**os.environ, "HOME": self.tmp})
        self.assertEqual(done.returncode, 0, done.stderr)
        with open(shot, "rb") as handle:
            png = handle.read()
        self.assertEqual(png[:8], b"\x89PNG\r\n\x1a\n")
        self.assertGreater(len(png), 20_000)    # a page with text, not a blank one
        self.assertIn("VERIFIED", page)

    def test_console_stream_unchanged_without_html(self):
        code, out, err = run_cli(["trace", self.trace])
        self.assertEqual(code, 0, err)
        self.assertIn("1 | list_files", out)
        self.assertIn("* run finished [stop=answered", out)

    def test_write_replaces_the_file_atomically(self):
        with open(self.out, "w", encoding="utf-8") as handle:
            handle.write("old")
        page = self.render()
        self.assertTrue(page.startswith("<!DOCTYPE html>"))
        self.assertEqual(sorted(os.listdir(self.tmp)),
                         sorted(["repo", "state", "trace.jsonl", "report.html"]))

    def test_a_trace_appended_to_twice_shows_both_runs(self):
        code, _, err = run_cli(["fix", "-dir", self.repo, "-provider", "demo",
                                "-trace", self.trace])
        self.assertEqual(code, 0, err)
        page = self.render()
        self.assertIn("Run 1 of 2", page)
        self.assertIn("Run 2 of 2", page)
        self.assertIn("ALREADY_GREEN", page)


class AttemptsReportTest(GolemCase):
    """`fix -attempts 3` with the scripted models: attempt 1 rewrites the test (REJECTED),
    2 fixes half (FAILED), 3 fixes both (VERIFIED, chosen). Its state directory is removed
    before the report is written, as a demo's is and a pruned run's."""

    @classmethod
    def setUpClass(cls):
        import tempfile
        cls.scratch = tempfile.mkdtemp()
        repo = os.path.join(cls.scratch, "repo")
        shutil.copytree(CALCULATOR, repo)
        trace = os.path.join(cls.scratch, "trace.jsonl")
        state = os.path.join(cls.scratch, "state")
        code, out, err = run_cli(["fix", "-dir", repo, "-provider", "demo", "-attempts", "3",
                                  "-models", "m1,m2,m3", "-jobs", "1", "-sandbox", "none",
                                  "-trace", trace, "-json"], env={"GOLEM_STATE_DIR": state})
        assert code == 0, err
        cls.result = json.loads(out.strip().splitlines()[-1])
        shutil.rmtree(state)
        report = os.path.join(cls.scratch, "report.html")
        code, out, err = run_cli(["trace", trace, "-html", report])
        assert code == 0, err
        cls.page = read(report)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.scratch)

    def test_the_header_is_about_the_chosen_attempt(self):
        self.assertEqual(self.result["chosen"], 3)
        header = self.page[:self.page.index("<h2>Attempts</h2>")]
        self.assertIn("<tr><th>attempt</th><td>3 (chosen;", header)
        self.assertIn("<tr><th>model</th><td>m3</td></tr>", header)
        # the other attempts' models, as the page names them (a temporary path may hold "m1")
        self.assertNotIn("<td>m1</td>", header)
        self.assertNotIn("<td>m2</td>", header)

    def test_a_rejected_attempt_counts_the_lines_it_changed(self):
        rejected = next(a for a in self.result["attempts"] if a["verdict"] == "REJECTED")
        self.assertEqual(rejected["lines_changed"], 2)
        card = self.page[self.page.index("attempt 1: m1"):]
        card = card[:card.index("</div>")]
        self.assertIn("; 2 lines changed", card)

    def test_the_patch_links_resolve_after_the_run_directory_is_gone(self):
        import base64
        import re
        hrefs = re.findall(r"href='([^']*)'", self.page)
        anchors = [h for h in hrefs if h.startswith("#")]
        self.assertEqual(sorted(anchors), ["#patch-1", "#patch-2", "#patch-3"])
        ids = set(re.findall(r" id='([^']*)'", self.page))
        self.assertEqual([a for a in anchors if a[1:] not in ids], [])
        downloads = [h for h in hrefs if h.startswith("data:text/x-diff;base64,")]
        self.assertEqual(len(downloads), 3)
        texts = [base64.b64decode(h.split(",", 1)[1]).decode() for h in downloads]
        self.assertTrue(any("# golem: protected change, never applied: tests/test_core.py"
                            in t and "mean([1, 2, 3]), 3)" in t for t in texts), texts)
        # no link into the removed state directory
        self.assertEqual([h for h in hrefs if h.startswith("file:")], [])
        self.assertIn("(removed with its run)", self.page)
        assertSelfContained(self, self.page)


class NarrowScreenTest(unittest.TestCase):
    """The report from 360 px up: side-by-side boxes stack, and nothing asks for more width
    than a phone has (checked on the stylesheet; a browser test needs a browser)."""

    def test_the_stylesheet_stacks_the_cards_below_a_tablets_width(self):
        import re
        from golem.trace.html import STYLE
        media = re.search(r"@media \(max-width:(\d+(?:\.\d+)?)(rem|px)\)\{(.*)\}\s*$", STYLE,
                          re.S)
        self.assertIsNotNone(media, STYLE)
        limit = float(media.group(1)) * (16 if media.group(2) == "rem" else 1)
        self.assertGreaterEqual(limit, 420)      # a 420 px viewport is inside it
        rules = media.group(3)
        self.assertRegex(rules, r"\.grid,\.attempts\{grid-template-columns:1fr\}")
        self.assertRegex(rules, r"table\{[^}]*overflow-x:auto")
        # no fixed width wider than 360 px anywhere
        for number, unit in re.findall(r"(?:min-width|(?<![-\w])width|minmax\()\s*:?\s*(\d+(?:\.\d+)?)"
                                       r"(rem|px)", STYLE):
            self.assertLessEqual(float(number) * (16 if unit == "rem" else 1), 360)


class BadInputTest(GolemCase):
    def assertOneLine(self, args, *fragments):
        code, out, err = run_cli(args)
        self.assertEqual((code, out), (2, ""))
        self.assertEqual(len(err.splitlines()), 1, err)
        for fragment in fragments:
            self.assertIn(fragment, err)

    def test_missing_file(self):
        missing = os.path.join(self.tmp, "nope.jsonl")
        self.assertOneLine(["trace", missing, "-html", os.path.join(self.tmp, "o.html")],
                           "nope.jsonl")

    def test_not_json(self):
        with open(self.trace, "w", encoding="utf-8") as handle:
            handle.write('{"event": "note", "time": "x"}\nnot json\n')
        out = os.path.join(self.tmp, "o.html")
        self.assertOneLine(["trace", self.trace, "-html", out], ":2:")
        self.assertFalse(os.path.exists(out))

    def test_not_text(self):
        with open(self.trace, "wb") as handle:
            handle.write(b"\xff\xfe\x00binary")
        self.assertOneLine(["trace", self.trace, "-html", os.path.join(self.tmp, "o.html")],
                           "UTF-8")
        self.assertOneLine(["trace", self.trace], "UTF-8")

    def test_no_events(self):
        with open(self.trace, "w", encoding="utf-8") as handle:
            handle.write("[1, 2]\n")
        self.assertOneLine(["trace", self.trace, "-html", os.path.join(self.tmp, "o.html")],
                           "no golem events")

    def test_unwritable_output(self):
        with open(self.trace, "w", encoding="utf-8") as handle:
            handle.write('{"event": "note", "time": "x", "message": "hi"}\n')
        self.assertOneLine(["trace", self.trace, "-html",
                            os.path.join(self.tmp, "no", "such", "dir.html")], "cannot write")


class EscapingTest(GolemCase):
    def test_planted_script_in_a_file_the_model_read(self):
        notes = os.path.join(self.tmp, "notes")
        shutil.copytree(NOTES, notes)
        with open(os.path.join(notes, "CHANGELOG.md"), "a", encoding="utf-8") as handle:
            handle.write(f"\n{PLANTED}\n")
        code, _, err = run_cli(["ask", "-dir", notes, "-provider", "demo", "-trace", self.trace,
                                "which release added rate limiting?"])
        self.assertEqual(code, 0, err)
        results = [e["content"] for e in read_trace(self.trace) if e["event"] == "tool_result"]
        self.assertTrue(any(PLANTED in text for text in results))
        out = os.path.join(self.tmp, "ask.html")
        self.assertEqual(run_cli(["trace", self.trace, "-html", out])[0], 0)
        page = read(out)
        self.assertIn("&lt;script&gt;alert(1)&lt;/script&gt;", page)
        assertSelfContained(self, page)

    def test_every_field_is_escaped(self):
        evil = "<img src=x onerror=alert(1)><script>alert(2)</script>\"'&"
        events = [
            {"event": "run_start", "time": "2026-01-01T00:00:00.000+00:00", "provider": evil,
             "model": evil, "budget": {"steps": 5, "tokens": 0, "wall_s": 90, "cost": 1},
             "task": evil},
            {"event": "baseline", "time": "2026-01-01T00:00:00.100+00:00", "summary": evil,
             "failing": [evil], "counts": {evil: 1}, "evidence": evil},
            {"event": "request", "time": "2026-01-01T00:00:01.000+00:00", "step": 1,
             "messages": 2},
            {"event": "response", "time": "2026-01-01T00:00:02.500+00:00", "step": 1,
             "content": evil, "finish": evil, "usage": {"prompt": 10, "completion": 2}},
            {"event": "tool_call", "time": "2026-01-01T00:00:02.500+00:00", "step": 1,
             "id": "c1", "name": evil, "arguments": {evil: evil}},
            {"event": "tool_result", "time": "2026-01-01T00:00:03.000+00:00", "step": 1,
             "id": "c1", "name": evil, "error": True, "content": evil},
            {"event": "run_end", "time": "2026-01-01T00:00:04.000+00:00", "stop": evil,
             "steps": 1, "tool_calls": 1, "tokens": {"prompt": 10, "completion": 2},
             "tokens_total": 12, "cost": None, "elapsed_s": 3.0, "claimed": evil, "error": evil},
            {"event": "verdict", "time": "2026-01-01T00:00:05.000+00:00", "verdict": evil,
             "summary": evil, "fixed": [evil], "changed_files": [evil], "claimed": evil,
             "protected_changes": [{"path": evil, "reason": evil}],
             "diff": f"--- a/x\n+++ b/x\n@@ -1 +1 @@\n-{evil}\n+{evil}\n"},
        ]
        with open(self.trace, "w", encoding="utf-8") as handle:
            handle.write("".join(json.dumps(e) + "\n" for e in events))
        out = os.path.join(self.tmp, "evil.html")
        code, _, err = run_cli(["trace", self.trace, "-html", out])
        self.assertEqual(code, 0, err)
        page = read(out)
        assertSelfContained(self, page)
        self.assertNotIn("<img", page)
        self.assertIn("&lt;img src=x onerror=alert(1)&gt;", page)
        self.assertIn("took 3.0s (model 1.5s)", page)   # step timing from event times
        self.assertIn("<h2>Diff</h2>", page)
        self.assertIn("wall 1m30s", page)
