"""Replies that must not be trusted as they come: numbers from the wire, refusals and empty
replies, compressed bodies, and provider errors that end a run."""

from __future__ import annotations

import gzip
import json
import unittest
import zlib

from golem.llm import Message, ProviderConfig, Request, make_provider
from golem.llm.types import MAX_COST, MAX_TOKENS, count, dollars
from tests.fixtures import FIX_EDIT, TEST_CMD, GolemCase, make_repo, read, run_cli
from tests.provider_server import ProviderServer, Reply, anthropic_reply, chat

HUGE = int("9" * 400)
MODELS_OK = {"/v1/models": Reply({"object": "list", "data": []})}


def strict_json(text: str):
    """json.loads that refuses Infinity and NaN, as strict parsers do."""
    def refuse(name):
        raise ValueError(f"{name} is not JSON")
    return json.loads(text, parse_constant=refuse)


def tool_turn(**usage) -> dict:
    return chat(tool_calls=[("list_files", {})], usage={"prompt_tokens": 10,
                                                        "completion_tokens": 5, **usage})


def raw_json(text: str, **headers) -> Reply:
    """A reply whose body is exactly `text` (for numbers json.dumps would not write)."""
    return Reply(text.encode(), headers={"Content-Type": "application/json", **headers})


class Clamps(GolemCase):
    def test_the_clamps_themselves(self):
        self.assertEqual([count(v) for v in (HUGE, -5, 1e400, -1e400, float("nan"), "12",
                                             True, 7.9, 42)],
                         [MAX_TOKENS, 0, MAX_TOKENS, 0, 0, 0, 0, 7, 42])
        self.assertEqual([dollars(v) for v in (HUGE, -HUGE, -99.78, 1e400, "1", None, 0.25)],
                         [MAX_COST, 0.0, 0.0, MAX_COST, None, None, 0.25])
        self.assertIsNone(dollars(float("nan")))

    def test_huge_negative_and_non_finite_usage_over_the_wire(self):
        bodies = [
            '{"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}], '
            f'"usage": {{"prompt_tokens": {HUGE}, "completion_tokens": -5, "cost": {HUGE}}}}}',
            '{"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}], '
            '"usage": {"prompt_tokens": 1e400, "completion_tokens": NaN, "cost": -Infinity}}',
            '{"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}], '
            '"usage": {"prompt_tokens": 3, "completion_tokens": 4, "cost": NaN}}']
        expected = [(MAX_TOKENS, 0, MAX_COST), (MAX_TOKENS, 0, 0.0), (3, 4, None)]
        with ProviderServer([raw_json(b) for b in bodies]) as server:
            provider = make_provider(ProviderConfig(name="openai", model="m",
                                                    base_url=server.url))
            for want in expected:
                usage = provider.complete(Request("m", [Message("user", "hi")], [])).usage
                self.assertEqual((usage.prompt, usage.completion, usage.cost), want)

    def test_anthropic_counts_too(self):
        body = ('{"type": "message", "content": [{"type": "text", "text": "hi"}], '
                f'"stop_reason": "end_turn", "usage": {{"input_tokens": {HUGE}, '
                '"output_tokens": -3, "cache_read_input_tokens": Infinity}}')
        with ProviderServer([raw_json(body)]) as server:
            provider = make_provider(ProviderConfig(name="anthropic", model="m",
                                                    api_key="sk-ant-test-0123456789",
                                                    base_url=server.root))
            usage = provider.complete(Request("m", [Message("user", "hi")], [])).usage
        self.assertEqual((usage.prompt, usage.completion, usage.cached),
                         (2 * MAX_TOKENS, 0, MAX_TOKENS))

    def test_a_negative_cost_does_not_switch_the_cost_budget_off(self):
        repo = make_repo(self.tmp)
        server = self.serve([tool_turn(cost=0.03), tool_turn(cost=-99.78),
                             tool_turn(cost=0.03)] + [tool_turn(cost=0.03)] * 9)
        code, out, err, report = self.fix(repo, server, "-cost", "0.05")
        self.assertEqual((code, report["stop"]), (1, "cost"))
        self.assertEqual(len(server.requests), 3)
        self.assertAlmostEqual(report["cost"], 0.06)

    def test_a_400_digit_count_stops_the_token_budget_and_the_json_stays_strict(self):
        repo = make_repo(self.tmp)
        body = ('{"choices": [{"message": {"content": null, "tool_calls": [{"id": "c1", '
                '"type": "function", "function": {"name": "list_files", "arguments": "{}"}}]},'
                f' "finish_reason": "tool_calls"}}], "usage": {{"prompt_tokens": {HUGE}, '
                f'"completion_tokens": {HUGE}, "cost": 1e400}}}}')
        server = self.serve([raw_json(body), chat("never")])
        code, out, err, report = self.fix(repo, server)
        self.assertEqual((code, report["stop"]), (1, "tokens"))
        strict_json(out.splitlines()[-1])
        self.assertEqual(report["tokens"]["prompt"], MAX_TOKENS)
        self.assertEqual(report["cost"], MAX_COST)
        for line in read(self.trace).splitlines():
            strict_json(line)
        self.assertEqual(len(server.requests), 1)

    def test_nan_and_infinity_never_reach_any_output(self):
        repo = make_repo(self.tmp)
        body = ('{"choices": [{"message": {"content": "done"}, "finish_reason": "stop"}], '
                '"usage": {"prompt_tokens": NaN, "completion_tokens": Infinity, '
                '"cost": NaN}}')
        server = self.serve([raw_json(body)])
        code, out, err, report = self.fix(repo, server)
        self.assertEqual(report["stop"], "answered")
        strict_json(out.splitlines()[-1])
        for line in read(self.trace).splitlines():
            strict_json(line)
        self.assertNotIn("Infinity", out + err)
        self.assertNotIn("NaN", out + err)


class Refusals(GolemCase):
    def check_fix(self, reply, why: str):
        repo = make_repo(self.tmp)
        server = self.serve([reply, chat("unused")])
        code, out, err, report = self.fix(repo, server)
        self.assertEqual((code, report["stop"], report["verdict"]), (1, "refused", "FAILED"))
        self.assertIn(why, report["summary"])
        self.assertEqual(out.splitlines()[0], report["summary"])
        self.assertEqual(len(server.requests), 1)
        return report

    def test_content_filter(self):
        report = self.check_fix(chat(None, finish="content_filter"),
                                "the model refused (finish content_filter)")
        self.assertTrue(report["summary"].startswith("FAILED: 1 still failing"))

    def test_a_reply_with_neither_text_nor_tool_calls(self):
        self.check_fix(chat("   ", finish="stop"), "neither text nor tool calls")

    def test_openai_refusal_field(self):
        self.check_fix(chat(None, refusal="I can't help with that."), "the model refused")

    def test_anthropic_refusal(self):
        repo = make_repo(self.tmp)
        server = self.serve([anthropic_reply("I won't do that.", stop="refusal")])
        code, out, err = run_cli(["fix", "-dir", repo, "-test", TEST_CMD, "-provider",
                                  "anthropic", "-base-url", server.root, "-sandbox", "none",
                                  "-json"], {"ANTHROPIC_API_KEY": "sk-ant-test-0123456789"})
        report = json.loads(out.splitlines()[-1])
        self.assertEqual((code, report["stop"]), (1, "refused"))
        self.assertIn("the model refused (finish refusal)", report["summary"])
        self.assertEqual(report["claimed"], "I won't do that.")

    def test_a_refusal_after_a_real_fix_is_still_verified(self):
        repo = make_repo(self.tmp)
        server = self.serve([chat(tool_calls=[FIX_EDIT]), chat(None, finish="content_filter")])
        code, out, err, report = self.fix(repo, server)
        self.assertEqual((code, report["stop"], report["verdict"]), (0, "refused", "VERIFIED"))

    def test_run_and_ask_exit_1(self):
        for command, tail in (("run", ["-goal", "tidy up"]), ("ask", ["what is this?"])):
            with self.subTest(command):
                repo = make_repo(self.tmp, name=f"repo-{command}")
                server = self.serve([chat(None, finish="content_filter")])
                code, out, err = run_cli([command, "-dir", repo, "-provider", "openai",
                                          "-base-url", server.url, "-sandbox", "none",
                                          "-json", *tail])
                report = json.loads(out.splitlines()[-1])
                self.assertEqual(code, 1, err)
                self.assertEqual((report["stop"], report["answered"]), ("refused", False))
                self.assertEqual(out.splitlines()[0], "(no answer: stop=refused)")
                self.assertIn("the model refused", report["error"])


class Compression(GolemCase):
    def provider(self, server):
        return make_provider(ProviderConfig(name="openai", model="m", base_url=server.url,
                                            max_attempts=1))

    def ask(self, reply):
        from golem.core.errors import ProviderError
        with ProviderServer([reply]) as server:
            try:
                response = self.provider(server).complete(
                    Request("m", [Message("user", "hi")], []))
            except ProviderError as err:
                return err, server.requests[0]
        return response, server.requests[0]

    def test_gzip_and_deflate_are_decoded_and_identity_is_asked_for(self):
        body = json.dumps(chat("compressed hello")).encode()
        for name, data in (("gzip", gzip.compress(body)), ("deflate", zlib.compress(body)),
                           ("deflate", zlib.compress(body)[2:-4])):     # raw deflate too
            with self.subTest(name):
                response, request = self.ask(Reply(data, headers={"Content-Encoding": name}))
                self.assertEqual(response.message.content, "compressed hello")
                self.assertEqual(request["headers"]["Accept-Encoding"], "identity")

    def test_a_compressed_error_reads_as_text(self):
        body = json.dumps({"error": {"message": "model not found"}}).encode()
        err, _ = self.ask(Reply(gzip.compress(body), status=404,
                                headers={"Content-Encoding": "gzip"}))
        self.assertIn("HTTP 404: model not found", str(err))

    def test_undecodable_bodies_say_what_they_are(self):
        packed = gzip.compress(json.dumps({"error": {"message": "x"}}).encode())
        for reply, named in (
                (Reply(packed, 502, {"Content-Encoding": "br"}), "br-compressed"),
                (Reply(packed, 502, {"Content-Type": "application/octet-stream"}),
                 "a binary body of"),
                (Reply(b"\x1f\x8b not really gzip", 502, {"Content-Encoding": "gzip"}),
                 "claims gzip compression but does not decode")):
            with self.subTest(named):
                err, _ = self.ask(reply)
                self.assertIn(named, str(err))
                self.assertTrue(str(err).isprintable(), str(err))

    def test_a_decompression_bomb_is_capped(self):
        bomb = gzip.compress(b" " * (40 << 20))
        err, _ = self.ask(Reply(bomb, headers={"Content-Encoding": "gzip"}))
        self.assertIn("larger than 8388608 bytes once decompressed", str(err))

    def test_fix_end_to_end_with_a_gzip_server(self):
        repo = make_repo(self.tmp)
        replies = [Reply(gzip.compress(json.dumps(r).encode()),
                         headers={"Content-Encoding": "gzip"})
                   for r in (chat(tool_calls=[FIX_EDIT]), chat("fixed"))]
        code, out, err, report = self.fix(repo, self.serve(replies))
        self.assertEqual((code, report["verdict"]), (0, "VERIFIED"), err)


class ProviderErrors(GolemCase):
    """A run that ends on a provider error says so in the verdict line and exits 4."""

    def test_a_401_mid_run(self):
        repo = make_repo(self.tmp)
        server = self.serve([Reply({"error": {"message": "invalid api key"}}, status=401)])
        server.gets.update(MODELS_OK)
        code, out, err, report = self.fix(repo, server, env={"OPENAI_API_KEY": "sk-0123456789"})
        self.assertEqual((code, report["stop"], report["verdict"]),
                         (4, "provider_error", "FAILED"))
        self.assertTrue(report["summary"].startswith(
            "FAILED: provider error: HTTP 401: invalid api key (check OPENAI_API_KEY); "
            "1 still failing: "), report["summary"])
        self.assertEqual(out.splitlines()[0], report["summary"])
        self.assertEqual(report["error"], "openai: HTTP 401: invalid api key "
                                          "(check OPENAI_API_KEY)")

    def test_retries_that_run_out(self):
        repo = make_repo(self.tmp)
        busy = Reply({"error": {"message": "overloaded"}}, status=503,
                     headers={"retry-after-ms": "1"})
        code, out, err, report = self.fix(repo, self.serve([busy] * 3), "-retries", "2")
        self.assertEqual(code, 4)
        self.assertIn("provider error: HTTP 503: overloaded (gave up after 3 attempts)",
                      report["summary"])

    def test_run_and_ask_exit_4_too(self):
        for command, tail in (("run", ["-goal", "tidy up"]), ("ask", ["what is this?"])):
            with self.subTest(command):
                repo = make_repo(self.tmp, name=f"repo-{command}")
                server = self.serve([Reply({"error": {"message": "bad request"}},
                                           status=400)])
                code, out, err = run_cli([command, "-dir", repo, "-provider", "openai",
                                          "-base-url", server.url, "-sandbox", "none",
                                          "-json", *tail])
                report = json.loads(out.splitlines()[-1])
                self.assertEqual((code, report["stop"]), (4, "provider_error"), err)


if __name__ == "__main__":
    unittest.main()
