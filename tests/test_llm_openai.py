"""OpenAICompatible against a real loopback server: what it sends and how it reads replies."""

from __future__ import annotations

import json
import os
import re
import time
import unittest
from unittest import mock

from golem.core.errors import OutOfTime, ProviderError
from golem.llm import (Message, ProviderConfig, Request, Secret, ToolCall, ToolSpec,
                       make_provider)
from golem.llm.openai import OpenAICompatible
from tests.provider_server import ProviderServer, Reply, chat

KEY = "sk-or-v1-SECRET-abcdef0123456789"
TOOLS = [ToolSpec("read_file", "Read a file.",
                  {"type": "object", "properties": {"path": {"type": "string"}}}),
         ToolSpec("finish", "Say you are done.", {"type": "object", "properties": {}})]


def provider(server, name="openrouter", key=KEY, **overrides):
    settings = {"retry_base": 0.01, "max_attempts": 3, **overrides}
    config = ProviderConfig(name=name, model="test/model", base_url=server.url + "/",
                            api_key=Secret(key) if key else None, **settings)
    return make_provider(config)


def ask(prov, messages=None, tools=TOOLS, **kwargs):
    messages = messages or [Message("system", "be brief"), Message("user", "hi")]
    return prov.complete(Request(model="test/model", messages=messages, tools=tools, **kwargs))


def reply_with(message: dict, finish="stop", usage=None, **top):
    """A completion body whose assistant message is exactly `message`."""
    body = {"id": "x", "choices": [{"index": 0, "message": {"role": "assistant", **message},
                                    "finish_reason": finish}],
            "usage": usage or {"prompt_tokens": 1, "completion_tokens": 1}}
    body.update(top)
    return body


def call(name, arguments=None, call_id="call_1", **function):
    fn = {"name": name, **function}
    if arguments is not None:
        fn["arguments"] = arguments
    return {"id": call_id, "type": "function", "function": fn}


class RequestShape(unittest.TestCase):
    def test_openrouter_request(self):
        with ProviderServer([chat("a"), chat("b")]) as server:
            prov = provider(server)
            ask(prov, max_tokens=321)
            ask(prov)
        first, second = server.requests
        self.assertEqual(first["path"], "/v1/chat/completions")
        headers = {k.lower(): v for k, v in first["headers"].items()}  # names are caseless
        self.assertEqual(headers["authorization"], f"Bearer {KEY}")
        self.assertEqual(headers["http-referer"], "https://github.com/golem-agent/golem")
        self.assertEqual(headers["x-title"], "golem")
        self.assertIn("application/json", headers["content-type"])
        body = first["body"]
        self.assertEqual(body["model"], "test/model")
        self.assertEqual(body["max_tokens"], 321)
        self.assertEqual(body["usage"], {"include": True})
        self.assertEqual(body["messages"], [{"role": "system", "content": "be brief"},
                                            {"role": "user", "content": "hi"}])
        for request in (first, second):
            self.assertEqual(request["body"]["tools"][0], {
                "type": "function",
                "function": {"name": "read_file", "description": "Read a file.",
                             "parameters": TOOLS[0].parameters}})
            self.assertEqual(len(request["body"]["tools"]), 2)
        self.assertNotIn("max_tokens", second["body"])

    def test_openai_without_key_sends_no_auth_and_no_attribution(self):
        with ProviderServer([chat("a")]) as server:
            ask(provider(server, name="openai", key=None), tools=[])
        request = server.requests[0]
        names = {k.lower() for k in request["headers"]}
        self.assertNotIn("authorization", names)
        self.assertNotIn("http-referer", names)
        self.assertNotIn("usage", request["body"])
        self.assertNotIn("tools", request["body"])

    def test_openai_base_url_from_environment(self):
        with ProviderServer([chat("a")]) as server:
            with mock.patch.dict(os.environ, {"OPENAI_BASE_URL": server.url}):
                prov = make_provider(ProviderConfig(name="openai", model="m"))
            self.assertEqual(prov.base_url, server.url)
            ask(prov)
        self.assertEqual(len(server.requests), 1)
        with mock.patch.dict(os.environ, {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}):
            explicit = OpenAICompatible(ProviderConfig("openai", "m", base_url="http://x/v1/"),
                                        default_base="http://d/v1", name="openai")
            self.assertEqual(explicit.base_url, "http://x/v1")
            router = OpenAICompatible(ProviderConfig("openrouter", "m"),
                                      default_base="http://d/v1", name="openrouter")
            self.assertEqual(router.base_url, "http://d/v1")

    def test_conversation_is_echoed_with_tool_calls_before_results(self):
        details = [{"type": "reasoning.text", "text": "think", "signature": "sig=="},
                   {"type": "reasoning.encrypted", "data": "opaque"}]
        history = [
            Message("system", "sys"), Message("user", "fix it"),
            Message("assistant", "", tool_calls=[
                ToolCall("call_a", "read_file", {"path": "x.py"}),
                ToolCall("call_b", "finish", {}, error="arguments were not a JSON object")],
                extra={"reasoning_details": details, "reasoning_content": "hmm"}),
            Message("tool", "print(1)", tool_call_id="call_a", name="read_file"),
            Message("tool", "Error: bad", tool_call_id="call_b", name="finish", is_error=True),
            Message("assistant", "done"),
        ]
        with ProviderServer([chat("ok")]) as server:
            ask(provider(server), messages=history)
        sent = server.requests[0]["body"]["messages"]
        self.assertEqual(sent[2], {
            "role": "assistant", "content": None,
            "tool_calls": [
                {"id": "call_a", "type": "function",
                 "function": {"name": "read_file", "arguments": '{"path": "x.py"}'}},
                {"id": "call_b", "type": "function",
                 "function": {"name": "finish", "arguments": "{}"}}],
            "reasoning_details": details, "reasoning_content": "hmm"})
        self.assertEqual(sent[3], {"role": "tool", "tool_call_id": "call_a",
                                   "content": "print(1)"})
        self.assertEqual(sent[4], {"role": "tool", "tool_call_id": "call_b",
                                   "content": "Error: bad"})
        self.assertEqual(sent[5], {"role": "assistant", "content": "done"})


class ReplyShapes(unittest.TestCase):
    def parse(self, *bodies):
        with ProviderServer(list(bodies)) as server:
            prov = provider(server)
            return [ask(prov) for _ in bodies]

    def test_content_null_empty_absent(self):
        for message in ({"content": None}, {"content": ""}, {}):
            with self.subTest(message=message):
                (response,) = self.parse(reply_with(message))
                self.assertEqual(response.message.content, "")
                self.assertEqual(response.message.tool_calls, [])
                self.assertEqual(response.finish, "stop")

    def test_arguments_variants(self):
        tool_calls = [call("finish", call_id="c0"), call("finish", "", call_id="c1"),
                      call("finish", "{}", call_id="c2"),
                      call("read_file", '{"path": "a.py"}', call_id="c3"),
                      call("read_file", '{"path": ', call_id="c4"),
                      call("read_file", "[1, 2]", call_id="c5"),
                      call("read_file", '"a.py"', call_id="c6")]
        (response,) = self.parse(reply_with({"content": None, "tool_calls": tool_calls},
                                            finish="tool_calls"))
        calls = response.message.tool_calls
        self.assertEqual([c.id for c in calls], [f"c{i}" for i in range(7)])
        for good in calls[:3]:
            self.assertEqual((good.name, good.arguments, good.error), ("finish", {}, None))
        self.assertEqual((calls[3].arguments, calls[3].error), ({"path": "a.py"}, None))
        for bad in calls[4:]:
            self.assertEqual(bad.arguments, {})
            self.assertTrue(bad.error.startswith("arguments were not a JSON object: "))
        self.assertIn("list", calls[5].error)

    def test_empty_ids_are_made_up_and_kept(self):
        tool_calls = [call("finish", "{}", call_id=""), call("read_file", "{}", call_id="")]
        body = reply_with({"tool_calls": tool_calls}, finish="tool_calls")
        with ProviderServer([body, chat("done")]) as server:
            prov = provider(server)
            response = ask(prov)
            ids = [c.id for c in response.message.tool_calls]
            history = [Message("user", "hi"), response.message]
            history += [Message("tool", "ok", tool_call_id=i) for i in ids]
            ask(prov, messages=history)
        for call_id in ids:
            self.assertRegex(call_id, r"^[A-Za-z0-9]{9}$")
        self.assertNotEqual(ids[0], ids[1])
        sent = server.requests[1]["body"]["messages"]
        self.assertEqual([c["id"] for c in sent[1]["tool_calls"]], ids)
        self.assertEqual([m["tool_call_id"] for m in sent[2:]], ids)

    def test_finish_follows_tool_calls_not_the_label(self):
        with_calls = reply_with({"tool_calls": [call("finish", "{}")]}, finish="stop")
        empty_calls = reply_with({"content": "hi", "tool_calls": []}, finish="tool_calls")
        first, second = self.parse(with_calls, empty_calls)
        self.assertEqual((first.finish, first.raw_finish), ("tool_calls", "stop"))
        self.assertEqual(len(first.message.tool_calls), 1)
        self.assertEqual((second.finish, second.message.tool_calls), ("stop", []))
        self.assertEqual(second.message.content, "hi")

    def test_length_filter_and_odd_finishes(self):
        bodies = [reply_with({"content": "cut"}, finish=f)
                  for f in ("length", "content_filter", "", None, "end_turn")]
        finishes = [r.finish for r in self.parse(*bodies)]
        self.assertEqual(finishes, ["length", "refusal", "stop", "stop", "stop"])

    def test_usage_shapes(self):
        usages = [
            {"prompt_tokens": 10, "completion_tokens": None, "prompt_tokens_details": None},
            {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 99,
             "prompt_tokens_details": {"cached_tokens": 7}, "cost": 0.00125,
             "is_byok": False, "cost_details": {"upstream_inference_cost": None}},
            {"prompt_tokens": 10, "completion_tokens": 5, "cached_tokens": 4, "cost": 0},
            {"prompt_tokens": 10, "completion_tokens": 5, "prompt_cache_hit_tokens": 3,
             "prompt_tokens_details": {"cached_tokens": None}},
        ]
        bodies = [reply_with({"content": "x"}, usage=u) for u in usages]
        got = [(r.usage.prompt, r.usage.completion, r.usage.cached, r.usage.cost)
               for r in self.parse(*bodies)]
        self.assertEqual(got, [(10, 0, 0, None), (10, 5, 7, 0.00125), (10, 5, 4, 0.0),
                               (10, 5, 3, None)])

    def test_missing_usage(self):
        body = reply_with({"content": "x"})
        del body["usage"]
        (response,) = self.parse(body)
        self.assertEqual((response.usage.total, response.usage.cost), (0, None))

    def test_reasoning_kept_for_echo(self):
        details = [{"type": "reasoning.summary", "summary": "s"}]
        body = reply_with({"content": "x", "reasoning": "plain", "reasoning_details": details,
                           "reasoning_content": "deep", "provider": "X",
                           "native_finish_reason": "end_turn"}, system_fingerprint="fp")
        (response,) = self.parse(body)
        self.assertEqual(response.message.extra,
                         {"reasoning_details": details, "reasoning_content": "deep"})
        (plain,) = self.parse(reply_with({"content": "x", "reasoning": "only"}))
        self.assertEqual(plain.message.extra, {})


class Errors(unittest.TestCase):
    def fail(self, *replies, name="openrouter"):
        with ProviderServer(list(replies)) as server:
            with self.assertRaises(ProviderError) as ctx:
                ask(provider(server, name=name))
        return ctx.exception, len(server.requests)

    def test_bad_key(self):
        body = {"error": {"code": 401, "message": "No auth credentials found"}}
        err, count = self.fail(Reply(body, 401))
        self.assertEqual((err.status, count), (401, 1))
        self.assertIn("openrouter: HTTP 401: No auth credentials found", str(err))
        self.assertIn("OPENROUTER_API_KEY", str(err))
        err, _ = self.fail(Reply(body, 401), name="openai")
        self.assertIn("OPENAI_API_KEY", str(err))

    def test_error_inside_200(self):
        body = {"error": {"code": 400, "message": "context too long"}, "choices": None}
        err, count = self.fail(body)
        self.assertIn("context too long", str(err))
        self.assertEqual((err.status, count), (400, 1))

    def test_finish_error_in_choice(self):
        body = reply_with({"content": "par"}, finish="error")
        body["choices"][0]["error"] = {"code": 400, "message": "model refused tool"}
        err, _ = self.fail(body)
        self.assertIn("model refused tool", str(err))
        self.assertFalse(err.retryable)
        err, _ = self.fail(reply_with({"content": "par"}, finish="error"))
        self.assertIn("finish_reason error", str(err))

    def test_no_choices(self):
        for choices in (None, [], "absent"):
            with self.subTest(choices=choices):
                body = {"id": "x", "usage": {}}
                if choices != "absent":
                    body["choices"] = choices
                err, _ = self.fail(body)
                self.assertIn("no choices", str(err))

    def test_bad_json_and_non_object(self):
        err, _ = self.fail(Reply('{"choices": [{"mess', 200,
                                 {"Content-Type": "application/json"}))
        self.assertIn("invalid JSON", str(err))
        err, _ = self.fail([1, 2])
        self.assertIn("not a JSON object", str(err))

    def test_html_502_retried_then_reported(self):
        page = "<html><body><h1>502 Bad Gateway</h1>cloudflare</body></html>"
        err, count = self.fail(*[Reply(page, 502)] * 3)
        self.assertEqual((count, err.status, err.retryable), (3, 502, True))
        self.assertIn("non-JSON body (text/html)", str(err))


class Retries(unittest.TestCase):
    def test_429_then_success_reports_retries(self):
        records = []
        with ProviderServer([Reply({"error": {"code": 429, "message": "rate"}}, 429),
                             Reply(drop=True), chat("fine")]) as server:
            response = ask(provider(server, on_retry=records.append))
        self.assertEqual(response.message.content, "fine")
        self.assertEqual([r["status"] for r in records], [429, None])
        self.assertTrue(all(0 < r["wait"] <= 0.02 for r in records))
        self.assertEqual(len(server.requests), 3)

    def test_hung_server_fails_after_attempts(self):
        # the reply would come long after the timeout, however slowly this process runs
        with ProviderServer([Reply(chat("late"), delay=10)] * 2) as server:
            prov = provider(server, timeout=0.1, max_attempts=2)
            with self.assertRaises(ProviderError) as ctx:
                ask(prov)
        self.assertTrue(ctx.exception.retryable)
        self.assertEqual(len(server.requests), 2)

    def test_deadline(self):
        with ProviderServer([chat("x")]) as server:
            prov = provider(server)
            with self.assertRaises(OutOfTime):
                ask(prov, deadline=time.monotonic() - 0.1)
            retry_later = Reply({"error": "busy"}, 503, {"Retry-After": "30"})
            server.replies[:] = [retry_later]
            with self.assertRaises(OutOfTime):
                ask(prov, deadline=time.monotonic() + 5)
        self.assertEqual(len(server.requests), 1)


class KeyNeverShown(unittest.TestCase):
    def test_repr_and_errors_hide_the_key(self):
        echo = {"error": {"message": f"bad key {KEY}", "code": "invalid_api_key"}}
        with ProviderServer([Reply(echo, 401)]) as server:
            prov = provider(server)
            with self.assertRaises(ProviderError) as ctx:
                ask(prov)
        for text in (repr(prov), str(prov), str(ctx.exception), repr(ctx.exception),
                     repr(prov._config), json.dumps(vars(ctx.exception), default=str)):
            self.assertNotIn(KEY, text)
            self.assertIsNone(re.search("SECRET", text), text)
        self.assertIn("openrouter", repr(prov))


if __name__ == "__main__":
    unittest.main()
