"""The Anthropic Messages API provider against a real loopback server."""

from __future__ import annotations

import os
import unittest

from golem.core.errors import ProviderError
from golem.llm import Message, ProviderConfig, Request, Secret, ToolCall, ToolSpec, make_provider
from golem.llm.anthropic import BLOCKS, MAX_CONTINUATIONS
from tests.fixtures import FIX_EDIT, TEST_CMD, GolemCase, make_repo, read, read_trace, run_cli
from tests.provider_server import ProviderServer, Reply, anthropic_reply

KEY = "sk-ant-api03-SECRET-0123456789abcdef"
TOOLS = [ToolSpec("read_file", "Read a file.",
                  {"type": "object", "properties": {"path": {"type": "string"}}}),
         ToolSpec("run_tests", "Run the tests.", {"type": "object", "properties": {}})]
CACHE = {"type": "ephemeral"}
THINKING = {"type": "thinking", "thinking": "The bug is in add.", "signature": "EqQBCkgIARAB=="}
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT"}


def provider(server, key=KEY, **overrides):
    settings = {"retry_base": 0.001, "max_attempts": 3, **overrides}
    config = ProviderConfig(name="anthropic", model="claude-test", base_url=server.root + "/",
                            api_key=Secret(key) if key else None, **settings)
    return make_provider(config)


def ask(prov, messages=None, tools=TOOLS, **kwargs):
    messages = messages or [Message("system", "be brief"), Message("user", "hi")]
    return prov.complete(Request(model="claude-test", messages=messages, tools=tools, **kwargs))


def serve_and_ask(*bodies, **kwargs):
    """Serve `bodies`, ask once; return (response, the server's requests)."""
    with ProviderServer(list(bodies)) as server:
        response = ask(provider(server), **kwargs)
    return response, server.requests


class RequestShape(unittest.TestCase):
    def test_headers_system_tools_and_max_tokens(self):
        _, (request,) = serve_and_ask(anthropic_reply("hello"))
        self.assertEqual(request["path"], "/v1/messages")
        headers = {k.lower(): v for k, v in request["headers"].items()}
        self.assertEqual(headers["x-api-key"], KEY)
        self.assertEqual(headers["anthropic-version"], "2023-06-01")
        self.assertIn("application/json", headers["content-type"])
        self.assertNotIn("authorization", headers)
        body = request["body"]
        self.assertEqual(body["model"], "claude-test")
        self.assertEqual(body["max_tokens"], 8192)
        self.assertEqual(body["system"], [{"type": "text", "text": "be brief",
                                           "cache_control": CACHE}])
        self.assertEqual(body["tools"], [
            {"name": "read_file", "description": "Read a file.",
             "input_schema": TOOLS[0].parameters},
            {"name": "run_tests", "description": "Run the tests.",
             "input_schema": TOOLS[1].parameters, "cache_control": CACHE}])
        self.assertEqual(body["messages"], [{"role": "user",
                                             "content": [{"type": "text", "text": "hi"}]}])

    def test_max_tokens_from_request_or_config_and_no_tools(self):
        with ProviderServer([anthropic_reply("a"), anthropic_reply("b")]) as server:
            ask(provider(server, max_tokens=1000), tools=[])
            ask(provider(server, max_tokens=1000), tools=[], max_tokens=77)
        first, second = (r["body"] for r in server.requests)
        self.assertEqual((first["max_tokens"], second["max_tokens"]), (1000, 77))
        self.assertNotIn("tools", first)

    def test_default_base_url(self):
        prov = make_provider(ProviderConfig(name="anthropic", model="m", api_key=Secret(KEY)))
        self.assertEqual(prov.base_url, "https://api.anthropic.com")


class RoundTrip(unittest.TestCase):
    def test_thinking_and_tool_use_then_results_go_back_unchanged(self):
        first = anthropic_reply("Reading it.", [("read_file", {"path": "calc.py"}),
                                                ("run_tests", {})],
                                before=[THINKING, REDACTED])
        with ProviderServer([first, anthropic_reply("done")]) as server:
            prov = provider(server)
            history = [Message("system", "sys"), Message("user", "fix it")]
            response = ask(prov, history)
            reply = response.message
            self.assertEqual(response.finish, "tool_calls")
            self.assertEqual(reply.content, "Reading it.")
            self.assertEqual([(c.id, c.name, c.arguments) for c in reply.tool_calls],
                             [("toolu_0_read_file", "read_file", {"path": "calc.py"}),
                              ("toolu_1_run_tests", "run_tests", {})])
            self.assertEqual(reply.extra[BLOCKS], [THINKING, REDACTED])
            history += [reply,
                        Message("tool", "def add(a, b): ...", tool_call_id="toolu_0_read_file",
                                name="read_file"),
                        Message("tool", "Error: tests failed", tool_call_id="toolu_1_run_tests",
                                name="run_tests", is_error=True),
                        Message("user", "keep going")]
            self.assertEqual(ask(prov, history).message.content, "done")
        sent = server.requests[1]["body"]["messages"]
        self.assertEqual(len(sent), 3)
        self.assertEqual(sent[1], {"role": "assistant", "content": [
            THINKING, REDACTED, {"type": "text", "text": "Reading it."},
            {"type": "tool_use", "id": "toolu_0_read_file", "name": "read_file",
             "input": {"path": "calc.py"}},
            {"type": "tool_use", "id": "toolu_1_run_tests", "name": "run_tests", "input": {}}]})
        self.assertEqual(sent[2], {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_0_read_file",
             "content": "def add(a, b): ...", "is_error": False},
            {"type": "tool_result", "tool_use_id": "toolu_1_run_tests",
             "content": "Error: tests failed", "is_error": True},
            {"type": "text", "text": "keep going"}]})

    def test_tool_only_turn_has_no_empty_text_block(self):
        history = [Message("user", "go"),
                   Message("assistant", "", [ToolCall("toolu_a", "run_tests", {})]),
                   Message("tool", "ok", tool_call_id="toolu_a")]
        _, (request,) = serve_and_ask(anthropic_reply("fine"), messages=history)
        self.assertEqual(request["body"]["messages"][1]["content"],
                         [{"type": "tool_use", "id": "toolu_a", "name": "run_tests",
                           "input": {}}])
        self.assertNotIn("system", request["body"])

    def test_input_that_is_not_an_object_is_a_tool_call_error(self):
        body = anthropic_reply(stop="tool_use")
        body["content"] = [{"type": "tool_use", "id": "toolu_x", "name": "read_file",
                            "input": ["calc.py"]},
                           {"type": "tool_use", "name": "run_tests", "input": {}}]
        response, _ = serve_and_ask(body)
        bad, unnamed = response.message.tool_calls
        self.assertEqual(bad.arguments, {})
        self.assertIn("not a JSON object", bad.error)
        self.assertRegex(unnamed.id, r"^toolu_[0-9a-f]+$")
        self.assertIsNone(unnamed.error)


class StopReasons(unittest.TestCase):
    def test_mapping(self):
        cases = [("end_turn", None, "stop"), ("stop_sequence", None, "stop"),
                 ("max_tokens", None, "length"), ("refusal", None, "refusal"),
                 ("model_context_window_exceeded", None, "length"),
                 ("tool_use", [("run_tests", {})], "tool_calls"),
                 ("end_turn", [("run_tests", {})], "tool_calls"),
                 ("max_tokens", [("run_tests", {})], "length")]
        for stop, calls, finish in cases:
            with self.subTest(stop=stop, calls=calls):
                response, _ = serve_and_ask(anthropic_reply("partial", calls, stop=stop))
                self.assertEqual(response.finish, finish)
                self.assertEqual(response.raw_finish, stop)
                self.assertEqual(response.cut_off, finish == "length")

    def test_pause_turn_is_continued_and_merged(self):
        paused = anthropic_reply("Searching ", stop="pause_turn", before=[THINKING],
                                 usage={"input_tokens": 10, "output_tokens": 5})
        final = anthropic_reply("found it.", [("read_file", {"path": "a.py"})],
                                usage={"input_tokens": 20, "output_tokens": 7})
        response, requests = serve_and_ask(paused, final)
        self.assertEqual(len(requests), 2)
        again = requests[1]["body"]
        self.assertEqual(again["messages"][:-1], requests[0]["body"]["messages"])
        self.assertEqual(again["messages"][-1], {"role": "assistant",
                                                 "content": paused["content"]})
        self.assertEqual(again["system"], requests[0]["body"]["system"])
        self.assertEqual(response.message.content, "Searching found it.")
        self.assertEqual(response.finish, "tool_calls")
        self.assertEqual(response.message.extra[BLOCKS], [THINKING])
        self.assertEqual((response.usage.prompt, response.usage.completion), (30, 12))

    def test_pause_turn_is_bounded(self):
        replies = [anthropic_reply(f"part {i} ", stop="pause_turn")
                   for i in range(MAX_CONTINUATIONS + 2)]
        with ProviderServer(replies) as server:
            with self.assertRaisesRegex(ProviderError, "pause_turn"):
                ask(provider(server))
        self.assertEqual(len(server.requests), MAX_CONTINUATIONS + 1)


class ErrorsAndUsage(unittest.TestCase):
    def test_overloaded_529_is_retried(self):
        overloaded = Reply({"type": "error", "error": {"type": "overloaded_error",
                                                       "message": "Overloaded"}}, status=529)
        retries = []
        with ProviderServer([overloaded, anthropic_reply("ok")]) as server:
            response = ask(provider(server, on_retry=retries.append))
        self.assertEqual(response.message.content, "ok")
        self.assertEqual(len(server.requests), 2)
        self.assertEqual(retries[0]["status"], 529)
        self.assertIn("Overloaded", retries[0]["error"])

    def test_invalid_request_400_is_not_retried(self):
        bad = Reply({"type": "error", "error": {"type": "invalid_request_error",
                                                "message": "messages: roles must alternate"}},
                    status=400)
        with ProviderServer([bad, anthropic_reply("never")]) as server:
            with self.assertRaises(ProviderError) as caught:
                ask(provider(server))
        self.assertEqual(len(server.requests), 1)
        self.assertEqual(caught.exception.status, 400)
        self.assertFalse(caught.exception.retryable)
        self.assertIn("roles must alternate", str(caught.exception))
        self.assertIn("invalid_request_error", str(caught.exception))

    def test_usage_counts_cache_reads_and_writes_as_prompt(self):
        usage = {"input_tokens": 50, "cache_read_input_tokens": 900,
                 "cache_creation_input_tokens": 40, "output_tokens": 12}
        response, _ = serve_and_ask(anthropic_reply("hi", usage=usage))
        self.assertEqual((response.usage.prompt, response.usage.completion,
                          response.usage.cached), (990, 12, 900))
        self.assertIsNone(response.usage.cost)

    def test_key_never_shown(self):
        refused = Reply({"type": "error", "error": {"type": "authentication_error",
                                                    "message": f"invalid x-api-key {KEY}"}},
                        status=401)
        with ProviderServer([refused]) as server:
            prov = provider(server)
            with self.assertRaises(ProviderError) as caught:
                ask(prov)
        self.assertNotIn(KEY, str(caught.exception))
        self.assertIn("ANTHROPIC_API_KEY", str(caught.exception))
        self.assertNotIn(KEY, repr(prov))
        self.assertNotIn(KEY, repr(prov._config))


class EndToEnd(GolemCase):
    def test_fix_with_anthropic_is_verified(self):
        repo = make_repo(self.tmp)
        server = self.serve([anthropic_reply("Fixing add.", [FIX_EDIT]),
                             anthropic_reply("add subtracted; it adds now.")])
        code, out, err = run_cli(["fix", "-dir", repo, "-test", TEST_CMD,
                                  "-provider", "anthropic", "-base-url", server.root,
                                  "-sandbox", "none", "-trace", self.trace],
                                 {"ANTHROPIC_API_KEY": KEY})
        self.assertEqual(code, 0, err)
        self.assertTrue(out.startswith("VERIFIED"), out)
        self.assertEqual(read(os.path.join(repo, "calc.py")), "def add(a, b):\n    return a + b\n")
        first, second = server.requests
        self.assertEqual(first["body"]["model"], "claude-sonnet-4-5")
        result = second["body"]["messages"][-1]["content"][0]
        self.assertEqual((result["type"], result["tool_use_id"]),
                         ("tool_result", "toolu_0_edit_file"))
        with open(self.trace, encoding="utf-8") as handle:
            self.assertNotIn(KEY, handle.read())
        self.assertIn("tool_call", [e["event"] for e in read_trace(self.trace)])

    def test_missing_key_is_a_usage_error(self):
        repo = make_repo(self.tmp)
        code, _, err = run_cli(["fix", "-dir", repo, "-provider", "anthropic"])
        self.assertEqual(code, 2)
        self.assertIn("ANTHROPIC_API_KEY", err)


if __name__ == "__main__":
    unittest.main()
