"""Redact first, then cut: a key echoed anywhere in what golem shows never survives in part.

Every place that shortens text (error snippets of 200 and 500 characters, retry events, the
console's 80-, 120-, 160- and 200-character cuts, the CI summary's 500) is tried with the
key at every offset, so that each cut falls inside the key at least once.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
import unittest

from golem.core.errors import ProviderError
from golem.llm.http import post_json
from golem.trace import Trace
from tests.fixtures import FIX_EDIT, GolemCase, make_repo, read, run_cli
from tests.provider_server import ProviderServer, Reply, chat

# the shape of a real OpenRouter key: 73 characters
KEY = "sk-or-v1-" + "9f3ab27c5d04e1f8" * 4
MODELS_OK = {"/v1/models": Reply({"object": "list", "data": [{"id": "m"}]})}


def leaks(text: str, key: str = KEY, window: int = 8) -> list[str]:
    """Every `window`-character piece of `key` that appears in `text`."""
    return sorted({key[i:i + window] for i in range(len(key) - window + 1)
                   if key[i:i + window] in text})


def call(server: ProviderServer, attempts: int = 1, records: list | None = None):
    """post_json once against `server`; the ProviderError it ends with."""
    try:
        post_json(server.url + "/chat/completions", {"model": "m"},
                  {"Authorization": f"Bearer {KEY}"}, timeout=5.0, deadline=None,
                  max_bytes=1 << 20, max_attempts=attempts, retry_base=0.0, retry_cap=0.0,
                  retry_after_cap=60.0, on_retry=(records or []).append, sleep=lambda _: None,
                  label="openrouter", key_name="OPENROUTER_API_KEY")
    except ProviderError as err:
        return err
    raise AssertionError("the call succeeded")


class ErrorBodies(unittest.TestCase):
    """The key at every offset of each kind of error body, through a real loopback server."""

    def each_offset(self, make_reply, offsets, attempts: int = 1):
        replies = [r for offset in offsets for r in [make_reply(offset)] * attempts]
        with ProviderServer(replies) as server:
            for offset in offsets:
                records: list[dict] = []
                err = call(server, attempts, records)
                texts = [str(err)] + [r["error"] for r in records]
                for text in texts:
                    self.assertEqual(leaks(text), [], f"offset {offset}: {text!r}")
                if offset < 150:    # further in, the cut takes the marker away too
                    self.assertIn("***", str(err), f"offset {offset}")

    def test_json_error_message_cut_at_500(self):
        self.each_offset(lambda n: Reply({"error": {"message": "x" * n + KEY + " is invalid"}},
                                         status=401), range(0, 520))

    def test_upstream_raw_cut_at_200(self):
        self.each_offset(lambda n: Reply({"error": {"message": "upstream failed",
                                                    "metadata": {"provider_name": "p",
                                                                 "raw": "y" * n + KEY}}},
                                         status=400), range(0, 220))

    def test_html_page_from_a_proxy_cut_at_200_and_retried(self):
        page = ("<html><head><title>502 Bad Gateway</title></head><body><h1>502</h1>"
                "<p>{pad}{key}</p></body></html>")
        self.each_offset(lambda n: Reply(page.format(pad="z" * n, key=KEY), status=502),
                         range(0, 220), attempts=2)

    def test_plain_text_and_error_inside_a_200(self):
        self.each_offset(lambda n: Reply("w" * n + KEY, status=500,
                                         headers={"Content-Type": "text/plain"}),
                         range(0, 220, 3))
        self.each_offset(lambda n: Reply({"error": {"code": 400, "message": "v" * n + KEY},
                                          "choices": None}), range(0, 520, 7))


class Console(unittest.TestCase):
    """The console renderer's cuts (tool arguments at 160, errors at 80, 120 and 200)."""

    def render(self, event: str, **fields) -> str:
        stream = io.StringIO()
        with Trace(None, stream, [KEY]) as trace:
            trace.emit(event, **fields)
        return stream.getvalue()

    def test_every_offset_of_every_cut(self):
        for offset in range(0, 220):
            pad = "p" * offset
            lines = [
                self.render("tool_call", step=1, name="write_file",
                            arguments={"path": "deploy.txt", "content": pad + KEY}),
                self.render("tool_result", step=1, name="run_command", error=True,
                            content=f"Error: {pad}{KEY}"),
                self.render("retry", status=502, wait=1.0, attempt=1, max_attempts=3,
                            error=pad + KEY),
                self.render("run_end", stop="provider_error", steps=1, tool_calls=0,
                            tokens={}, tokens_total=0, cost=None, elapsed_s=1.0,
                            error=pad + KEY),
            ]
            for line in lines:
                self.assertTrue(line.strip(), offset)
                self.assertEqual(leaks(line), [], f"offset {offset}: {line!r}")

    def test_a_key_json_would_escape_is_still_found(self):
        odd = 'sk-odd"quote\\back-0123456789'
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        stream, path = io.StringIO(), os.path.join(tmp.name, "t.jsonl")
        with Trace(path, stream, [odd]) as trace:
            trace.emit("tool_call", step=1, name="write_file", arguments={"content": odd})
        for text in (stream.getvalue(), read(path)):
            self.assertNotIn(odd, text)
            self.assertNotIn(json.dumps(odd)[1:-1], text)
            self.assertIn("[redacted]", text)


class EndToEnd(GolemCase):
    """Through `golem fix`: the -json error, the trace's retry and run_end, stderr, stdout,
    the CI summary and the recording, with the key echoed where each cut falls."""

    def test_echoed_key_never_leaves_in_part(self):
        summary = os.path.join(self.tmp, "summary.md")
        recording = os.path.join(self.tmp, "rec.jsonl")
        for offset in (0, 190, 196, 470, 495):    # around the 200 and 500 cuts
            with self.subTest(offset=offset):
                repo = make_repo(self.tmp, name=f"repo{offset}")
                page = f"<html><body><p>{'q' * offset}{KEY}</p></body></html>"
                body = {"error": {"message": "m" * offset + KEY,
                                  "metadata": {"raw": "r" * offset + KEY}}}
                server = self.serve([Reply(page, status=502, headers={"retry-after-ms": "1"}),
                                     Reply(body, status=401)])
                server.gets.update(MODELS_OK)
                code, out, err, report = self.fix(
                    repo, server, "-provider", "openrouter", "-retries", "1",
                    "-record", recording,
                    env={"OPENROUTER_API_KEY": KEY, "GITHUB_STEP_SUMMARY": summary,
                         "GITHUB_ACTIONS": "true"})
                self.assertEqual(report["stop"], "provider_error")
                self.assertEqual(code, 4)
                for where, text in (("stdout", out), ("stderr", err),
                                    ("trace", read(self.trace)), ("summary", read(summary)),
                                    ("recording", read(recording))):
                    self.assertEqual(leaks(text), [], f"{where} at offset {offset}")
                self.assertIn("HTTP 401", report["error"])
                if offset < 400:
                    self.assertIn("***", report["error"])

    def test_the_model_quoting_the_key_in_its_claim(self):
        summary = os.path.join(self.tmp, "summary.md")
        for offset in (495, 499):
            with self.subTest(offset=offset):
                repo = make_repo(self.tmp, name=f"repo{offset}")
                claim = "c" * offset + KEY
                server = self.serve([chat(tool_calls=[FIX_EDIT]), chat(claim)])
                code, out, err, report = self.fix(
                    repo, server, "-provider", "openrouter",
                    env={"OPENROUTER_API_KEY": KEY, "GITHUB_STEP_SUMMARY": summary})
                self.assertEqual(report["verdict"], "VERIFIED")
                for where, text in (("stdout", out), ("stderr", err),
                                    ("trace", read(self.trace)), ("summary", read(summary))):
                    self.assertEqual(leaks(text), [], f"{where} at offset {offset}")
                self.assertIn("[redacted]", report["claimed"])


class TraceViews(GolemCase):
    """`golem trace` and `golem trace -html` of a trace that holds the key (written by
    something else): the key of the environment is blanked out before anything is cut."""

    def test_console_and_html(self):
        trace = os.path.join(self.tmp, "foreign.jsonl")
        with open(trace, "w", encoding="utf-8") as handle:
            for offset in range(0, 210, 5):
                for record in (
                        {"event": "request", "time": "2026-01-01T00:00:00+00:00", "step": 1,
                         "messages": 2},
                        {"event": "tool_call", "time": "2026-01-01T00:00:01+00:00",
                         "step": 1, "id": "c", "name": "write_file",
                         "arguments": {"content": "a" * offset + KEY}},
                        {"event": "run_end", "time": "2026-01-01T00:00:02+00:00",
                         "stop": "provider_error", "steps": 1, "tool_calls": 1,
                         "tokens": {}, "tokens_total": 0, "cost": None, "elapsed_s": 2,
                         "claimed": "", "error": "e" * offset + KEY}):
                    handle.write(json.dumps(record) + "\n")
        env = {"OPENROUTER_API_KEY": KEY}
        code, out, err = run_cli(["trace", trace], env)
        self.assertEqual(code, 0, err)
        self.assertIn("[redacted]", out)
        self.assertEqual(leaks(out), [])
        page = os.path.join(self.tmp, "page.html")
        code, out, err = run_cli(["trace", trace, "-html", page], env)
        self.assertEqual(code, 0, err)
        self.assertIn("[redacted]", read(page))
        self.assertEqual(leaks(read(page)), [])


if __name__ == "__main__":
    unittest.main()
