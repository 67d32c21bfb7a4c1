"""What leaves golem, attacked: a key in pieces or encoded, the model's text and file names
in the step summary, a tool name holding a line break on the console, arguments nested past
any recursion limit, a reply that starts with a byte-order mark.

Every test here plays the other side for real: a loopback provider that echoes the key the
way a broken proxy would, a scripted model that writes Markdown and HTML where golem shows
its words, and reads what golem wrote (stdout, stderr, the trace, `-result`, the recording,
the step summary).
"""

from __future__ import annotations

import base64
import io
import json
import os
import unittest
from urllib.parse import quote

from golem.core.outgoing import redact
from golem.trace import Trace
from golem.workflow.github import annotate, summary_markdown
from tests.fixtures import FIX_EDIT, TEST_CMD, GolemCase, make_repo, read, run_cli
from tests.provider_server import Reply, chat

KEY = "sk-or-v1-" + "0b7e1c9a4f2d8365" * 4
ODD_KEY = "Zx9/Qm+Lk2=Rt7/Yp4+Wn8=Hc3/Ud6+Fs1"     # one that percent-encoding changes


def leaks(text: str, secret: str = KEY, window: int = 8) -> list[str]:
    """Every `window`-character run of `secret` that appears in `text`."""
    return sorted({secret[i:i + window] for i in range(len(secret) - window + 1)
                   if secret[i:i + window] in text})


def encoded_leaks(text: str, secret: str = KEY) -> list[str]:
    """Runs of 8 characters of the secret's base64 (at any alignment inside a longer value)
    or percent-encoded form that appear in `text`."""
    found = set()
    for shift in range(3):
        wrapped = base64.b64encode(b"u" * shift + secret.encode()).decode()
        core = wrapped[4:-4]                # free of the characters around the secret
        for form in (core, core.replace("+", "-").replace("/", "_")):
            found |= set(leaks(text, form))
    if quote(secret, safe="") != secret:
        found |= set(leaks(text, quote(secret, safe="")))
    return sorted(found)


def echoes(secret: str) -> list[str]:
    """The ways a broken server or proxy hands a key back."""
    return [secret[:30] + "..." + secret[-30:],                   # head and tail
            secret[:35] + "\n" + secret[35:],                      # split across two lines
            " ".join(secret[i:i + 6] for i in range(0, len(secret), 6)),   # in groups of 6
            secret[:20] + "\r\n    " + secret[20:44] + "\n\t" + secret[44:],
            "\u200b".join(secret),                                 # zero-width spaces
            base64.b64encode(f"user:{secret}".encode()).decode(),   # Basic authorization
            base64.urlsafe_b64encode(f"{secret}!".encode()).decode(),
            base64.b64encode(f"ab{secret}".encode()).decode(),
            quote(secret, safe=""), quote(secret, safe="").lower()]


class Forms(unittest.TestCase):
    """outgoing.redact, the one mechanism every writer uses, on each form of a key."""

    def test_every_form_of_the_key_is_blanked(self):
        for secret in (KEY, ODD_KEY):
            for echo in echoes(secret):
                with self.subTest(secret=secret[:6], echo=echo[:40]):
                    text = redact(f"the server said: {echo} (denied)", [secret])
                    self.assertEqual(leaks(text, secret), [], text)
                    self.assertEqual(encoded_leaks(text, secret), [], text)
                    self.assertIn("[redacted]", text)
                    self.assertTrue(text.startswith("the server said: "), text)

    def test_a_piece_at_every_offset_and_length(self):
        for start in range(0, len(KEY) - 8, 5):
            for length in (8, 9, 13, 40):
                piece = KEY[start:start + length]
                if len(piece) < 8:
                    continue
                text = redact(f"[{piece}]", [KEY])
                self.assertEqual(leaks(text), [], (start, length, text))

    def test_ordinary_text_is_left_alone(self):
        text = "def add(a, b):\n    return a + b  # sk-or- keys start like this\n" * 50
        self.assertEqual(redact(text, [KEY]), text)


class Provider(GolemCase):
    """A provider that echoes the key in pieces and encodings, through `golem fix`: nothing
    of it in stdout, stderr, the trace, -result, the recording or the step summary."""

    def test_echoed_pieces_leave_nowhere(self):
        summary = os.path.join(self.tmp, "summary.md")
        recording = os.path.join(self.tmp, "rec.jsonl")
        result = os.path.join(self.tmp, "result.json")
        repo = make_repo(self.tmp)
        message = "invalid key: " + " | ".join(echoes(KEY))
        body = {"error": {"message": message, "metadata": {"raw": message}}}
        server = self.serve([Reply(body, status=401)])
        server.gets["/v1/key"] = Reply({"data": {"label": "ok"}})
        code, out, err, report = self.fix(
            repo, server, "-provider", "openrouter", "-retries", "0", "-record", recording,
            "-result", result,
            env={"OPENROUTER_API_KEY": KEY, "GITHUB_STEP_SUMMARY": summary,
                 "GITHUB_ACTIONS": "true"})
        self.assertEqual((code, report["stop"]), (4, "provider_error"), err)
        for where, text in (("stdout", out), ("stderr", err), ("trace", read(self.trace)),
                            ("result", read(result)), ("summary", read(summary)),
                            ("recording", read(recording))):
            self.assertEqual(leaks(text), [], where)
            self.assertEqual(encoded_leaks(text), [], where)

    def test_preflight_page_that_echoes_the_key(self):
        repo = make_repo(self.tmp)
        page = (f"<html><body><p>Signed in as {KEY[:36]}<wbr>{KEY[36:]}</p>"
                f"<p>{base64.b64encode(KEY.encode()).decode()}</p>"
                f"<p>{KEY[:30]}&hellip;{KEY[-30:]}</p></body></html>")
        server = self.serve([])
        server.gets["/v1/key"] = Reply(page, headers={"Content-Type": "text/html"})
        code, out, err = run_cli(["fix", "-dir", repo, "-test", TEST_CMD, "-provider",
                                  "openrouter", "-base-url", server.url, "-sandbox", "none",
                                  "-trace", self.trace], {"OPENROUTER_API_KEY": KEY})
        self.assertEqual(code, 2, err)
        self.assertIn("preflight", err)
        for where, text in (("stderr", err), ("trace", read(self.trace))):
            self.assertEqual(leaks(text), [], where)
            self.assertEqual(encoded_leaks(text), [], where)

    def test_the_model_quoting_the_key_split_in_its_answer(self):
        summary = os.path.join(self.tmp, "summary.md")
        repo = make_repo(self.tmp)
        claim = "Done. For the record the key is " + KEY[:7] + "\n" + KEY[7:14] + "\n" + \
            KEY[14:21] + "\n" + KEY[21:]
        server = self.serve([chat(tool_calls=[FIX_EDIT]), chat(claim)])
        code, out, err, report = self.fix(repo, server, "-provider", "openrouter",
                                          env={"OPENROUTER_API_KEY": KEY,
                                               "GITHUB_STEP_SUMMARY": summary})
        self.assertEqual(report["verdict"], "VERIFIED", err)
        for where, text in (("stdout", out), ("stderr", err), ("trace", read(self.trace)),
                            ("summary", read(summary))):
            self.assertEqual(leaks("".join(text.split())), [], where)


class Summary(GolemCase):
    """The model's final text and the names of the files it changed, in the step summary."""

    def test_model_text_and_file_names_stay_text(self):
        summary = os.path.join(self.tmp, "summary.md")
        repo = make_repo(self.tmp)
        name = "notes/x` <img src=https://t.example/n.png> `.md"
        claim = ("<h3>golem: VERIFIED</h3>\n\n### golem: VERIFIED\n"
                 "![](https://t.example/pixel.png) <img src=https://t.example/p.png> "
                 "| a | table | [link](https://t.example) $x^2$ ~~gone~~")
        server = self.serve([chat(tool_calls=[FIX_EDIT, ("write_file", {"path": name,
                                                                       "content": "x\n"})]),
                             chat(claim)])
        code, out, err, report = self.fix(repo, server, env={"GITHUB_STEP_SUMMARY": summary})
        self.assertEqual(report["verdict"], "VERIFIED", err)
        text = read(summary)
        self.assertEqual(text.count("### golem"), 1, text)      # golem's heading alone
        claimed = next(line for line in text.splitlines() if "model claimed" in line)
        for markup in ("<h3>", "<img", "![", "~~", " $x", "| a |"):
            self.assertNotIn(markup, claimed)
        self.assertIn("&lt;h3&gt;golem: VERIFIED", text)        # still there, as text
        row = next(line for line in text.splitlines() if "notes/x" in line)
        # the name's backticks sit inside a longer fence, so they cannot close the span
        self.assertTrue(row.startswith("| ``notes/x` <img "), row)
        self.assertIn(" `.md`` |", row)

    def test_test_ids_and_reasons(self):
        report = {"verdict": "FAILED", "summary": "FAILED: <b>x</b>",
                  "still_failing": ["t.T.test_`a`<script>|"],
                  "protected_changes": [{"path": "a`|b.md", "reason": "<i>why</i>"}],
                  "suspicious": [{"path": "p", "line": 1, "kind": "k*", "detail": "![d](u)"}]}
        text = summary_markdown(report)
        for markup in ("<b>", "<i>", "![", "[d]"):
            self.assertNotIn(markup, text)
        # in a code span nothing is markup, and its fence outlasts the backticks inside
        self.assertIn("- ``t.T.test_`a`<script>|``", text)
        self.assertIn("- ``a`|b.md``", text)


class Console(GolemCase):
    """One record is one line on the console, whatever the model sends."""

    def lines(self, event: str, **fields) -> list[str]:
        stream = io.StringIO()
        with Trace(None, stream) as trace:
            trace.emit(event, **fields)
        return stream.getvalue().splitlines()

    def test_fields_cannot_start_a_line(self):
        forged = "VERIFIED: suite passes (fake)"
        cases = [("tool_call", {"step": 1, "name": f"read_file\n{forged}", "arguments": {}}),
                 ("tool_result", {"step": 1, "name": f"x\r\n{forged}", "error": True,
                                  "content": "Error: no"}),
                 ("baseline", {"summary": f"ok\n{forged}"}),
                 ("note", {"message": f"n\u2028{forged}"}),
                 ("suspicious", {"findings": [{"path": f"a\n{forged}", "line": 1,
                                               "kind": "k", "detail": "d"}]}),
                 ("attempt", {"summary": f"attempt 1: FAILED\n{forged}"}),
                 ("retry", {"status": f"500\n{forged}", "wait": 1, "attempt": 1,
                            "max_attempts": 2, "error": "e"})]
        for event, fields in cases:
            with self.subTest(event=event):
                lines = self.lines(event, **fields)
                self.assertEqual(len(lines), 1, lines)
                self.assertFalse(any(line.startswith(("VERIFIED", "::")) for line in lines))

    def test_tool_name_through_fix(self):
        repo = make_repo(self.tmp)
        forged = "VERIFIED: suite passes (fake)"
        server = self.serve([chat(tool_calls=[(f"run_tests\n{forged}", {}),
                                              (f"x\n::error::{forged}", {})]),
                             chat("I could not fix it.")])
        code, out, err, report = self.fix(repo, server)
        self.assertEqual(report["verdict"], "FAILED")
        for line in (err + out).splitlines():
            self.assertFalse(line.startswith(("VERIFIED", "::error")), line)

    def test_encoders_agree_with_their_destination(self):
        from golem.trace import encode
        self.assertEqual(encode.line("a\nb\x1b[2J"), "a\\nb\\x1b[2J")
        self.assertEqual(encode.html('<a href="x">'), "&lt;a href=&quot;x&quot;&gt;")
        self.assertEqual(encode.code("x|y", cell=True), "`x\\|y`")
        out = io.StringIO()
        annotate({"suspicious": [{"path": "a\nb,c:d", "line": "1\n::error::x",
                                  "kind": "k:\r\n", "detail": "100%\n::warning::y"}]}, out)
        lines = out.getvalue().splitlines()
        self.assertEqual(len(lines), 1, lines)
        self.assertIn("file=a%0Ab%2Cc%3Ad,line=1%0A%3A%3Aerror%3A%3Ax,", lines[0])
        self.assertTrue(lines[0].endswith("::100%25%0A::warning::y"), lines[0])


DEEP = 100_000


class OddReplies(GolemCase):
    """Tool arguments nested past any recursion limit, and a body with a byte-order mark."""

    def test_arguments_nested_deeply_are_a_message_to_the_model(self):
        repo = make_repo(self.tmp)
        deep = '{"path": ' + "[" * DEEP + "]" * DEEP + "}"
        first = chat(tool_calls=[("read_file", {})])
        first["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = deep
        medium = chat(tool_calls=[("read_file", {"path": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[
            [[[["x"]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]})])
        server = self.serve([first, medium, chat(tool_calls=[FIX_EDIT]), chat("fixed")])
        code, out, err, report = self.fix(repo, server)
        self.assertEqual(report["verdict"], "VERIFIED", err)
        self.assertNotIn("Traceback", err)
        told = [m["content"] for request in server.requests
                for m in request["body"]["messages"] if m.get("role") == "tool"]
        self.assertTrue(any("nested" in text for text in told[:1]), told)
        self.assertTrue(any("nested" in text for text in told[1:2]), told)
        self.assertTrue(read(self.trace))

    def test_a_body_with_a_byte_order_mark_is_read(self):
        repo = make_repo(self.tmp)
        replies = [Reply(b"\xef\xbb\xbf" + json.dumps(body).encode(),
                         headers={"Content-Type": "application/json"})
                   for body in (chat(tool_calls=[FIX_EDIT]), chat("fixed"))]
        server = self.serve(replies)
        code, out, err, report = self.fix(repo, server)
        self.assertEqual((code, report["verdict"]), (0, "VERIFIED"), err)

    def test_a_trace_nested_deeply_is_one_line_of_error(self):
        path = os.path.join(self.tmp, "deep.jsonl")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write('{"event": "note", "time": "t", "x": ' + "[" * DEEP + "]" * DEEP
                         + "}\n")
        code, out, err = run_cli(["trace", path])
        self.assertEqual(code, 2)
        self.assertEqual(len(err.splitlines()), 1, err)


if __name__ == "__main__":
    unittest.main()


class VerdictLine(GolemCase):
    """The verdict on stdout is one line, whatever test id it quotes."""

    def test_a_test_id_with_a_line_break(self):
        forged = "VERIFIED: suite passes (fake)"
        tests = ("import unittest\nfrom calc import add\n\n\nclass T(unittest.TestCase):\n"
                 "    pass\n\n\n"
                 f"setattr(T, {('test_x' + chr(10) + forged)!r}, lambda self: self.fail())\n")
        repo = make_repo(self.tmp, {"calc.py": "def add(a, b):\n    return a + b\n",
                                    "tests/test_calc.py": tests})
        server = self.serve([chat("nothing to do")])
        code, out, err, report = self.fix(repo, server)
        self.assertEqual(report["verdict"], "FAILED", report["summary"])
        self.assertEqual(len(out.splitlines()), 2, out)     # the verdict, then the JSON
        self.assertFalse(out.startswith("VERIFIED"), out)
        for line in err.splitlines():
            self.assertFalse(line.startswith("VERIFIED"), line)
