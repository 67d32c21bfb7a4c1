"""post_json against a real loopback server: which failures are retried, how long it waits."""

from __future__ import annotations

import email.utils
import socket
import time
import unittest

from golem.core.errors import OutOfTime, ProviderError
from golem.llm.http import post_json
from tests.provider_server import ProviderServer, Reply, chat

KEY = "sk-test-SECRET-0123456789"
OK = chat("hello")


class Caller:
    """Calls post_json with a recording `sleep` and `on_retry`, so no test really waits."""

    def __init__(self, server: ProviderServer | None, url: str | None = None):
        self.url = url or server.url + "/chat/completions"
        self.waits: list[float] = []
        self.records: list[dict] = []

    def __call__(self, *, attempts: int = 4, timeout: float = 5.0,
                 deadline: float | None = None, retry_base: float = 0.01,
                 retry_cap: float = 8.0, max_bytes: int = 1 << 20, key_name=None):
        return post_json(self.url, {"model": "m"}, {"Authorization": f"Bearer {KEY}"},
                         timeout=timeout, deadline=deadline, max_bytes=max_bytes,
                         max_attempts=attempts, retry_base=retry_base, retry_cap=retry_cap,
                         retry_after_cap=60.0, on_retry=self.records.append,
                         sleep=self.waits.append, label="testprov", key_name=key_name)


def run(replies, **kwargs):
    """Serve `replies`, call once; return (result or exception, caller, request count)."""
    with ProviderServer(replies) as server:
        caller = Caller(server)
        try:
            result = caller(**kwargs)
        except (ProviderError, OutOfTime) as err:
            result = err
    return result, caller, len(server.requests)


class RetriedStatuses(unittest.TestCase):
    def test_429_then_success(self):
        result, caller, count = run([Reply({"error": {"message": "slow down"}}, 429), OK])
        status, headers, data = result
        self.assertEqual((status, count), (200, 2))
        self.assertEqual(data["choices"][0]["message"]["content"], "hello")
        self.assertEqual(headers["content-type"], "application/json")
        self.assertEqual(len(caller.waits), 1)
        record = caller.records[0]
        self.assertEqual((record["status"], record["attempt"], record["max_attempts"]),
                         (429, 1, 4))
        self.assertIn("slow down", record["error"])
        self.assertEqual(record["wait"], caller.waits[0])

    def test_transient_statuses_are_retried(self):
        for status in (408, 409, 500, 502, 503, 504, 529):
            with self.subTest(status=status):
                result, caller, count = run([Reply({"error": {"message": "x"}}, status), OK])
                self.assertIsInstance(result, tuple)
                self.assertEqual((count, caller.records[0]["status"]), (2, status))

    def test_anthropic_overloaded_gives_up_readably(self):
        body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
        result, caller, count = run([Reply(body, 529)] * 3, attempts=3)
        self.assertIsInstance(result, ProviderError)
        self.assertEqual((count, result.status, result.retryable), (3, 529, True))
        self.assertIn("Overloaded", str(result))
        self.assertIn("3 attempts", str(result))
        self.assertEqual(len(caller.waits), 2)

    def test_error_inside_200_with_transient_code_is_retried(self):
        body = {"error": {"code": 502, "message": "upstream died"}, "choices": None}
        result, caller, count = run([body, OK])
        self.assertIsInstance(result, tuple)
        self.assertEqual((count, caller.records[0]["status"]), (2, 502))

    def test_error_inside_200_with_client_code_is_not_retried(self):
        body = {"error": {"code": 400, "message": "bad tool schema"}}
        result, caller, count = run([body, OK])
        self.assertIsInstance(result, ProviderError)
        self.assertEqual((count, result.status), (1, 400))
        self.assertIn("bad tool schema", str(result))


class NotRetried(unittest.TestCase):
    def test_client_errors_fail_at_once(self):
        for status in (400, 401, 403, 404, 422):
            with self.subTest(status=status):
                body = {"error": {"message": f"nope {status}", "type": "invalid_request_error",
                                  "param": None, "code": None}}
                result, caller, count = run([Reply(body, status), OK])
                self.assertIsInstance(result, ProviderError)
                self.assertEqual((count, result.status, result.retryable), (1, status, False))
                self.assertIn(f"nope {status}", str(result))
                self.assertEqual(caller.waits, [])

    def test_401_names_the_key_variable(self):
        body = {"error": {"code": 401, "message": "User not found."}}
        result, _, _ = run([Reply(body, 401)], key_name="OPENROUTER_API_KEY")
        self.assertIn("testprov: HTTP 401: User not found.", str(result))
        self.assertIn("OPENROUTER_API_KEY", str(result))

    def test_insufficient_quota_is_not_retried(self):
        body = {"error": {"message": "You exceeded your current quota",
                          "type": "insufficient_quota", "param": None,
                          "code": "insufficient_quota"}}
        result, _, count = run([Reply(body, 429), OK])
        self.assertIsInstance(result, ProviderError)
        self.assertEqual((count, result.status), (1, 429))
        self.assertIn("quota", str(result))

    def test_402_retried_only_with_retry_after(self):
        body = {"error": {"code": 402, "message": "Insufficient credits"}}
        result, _, count = run([Reply(body, 402), OK])
        self.assertIsInstance(result, ProviderError)
        self.assertEqual(count, 1)
        self.assertIn("credit", str(result))
        result, caller, count = run([Reply(body, 402, {"Retry-After": "1"}), OK])
        self.assertEqual((count, caller.waits), (2, [1.0]))

    def test_should_retry_header_overrides(self):
        result, _, count = run([Reply({"error": "boom"}, 500, {"x-should-retry": "false"}), OK])
        self.assertIsInstance(result, ProviderError)
        self.assertEqual((count, result.retryable), (1, False))
        result, _, count = run([Reply({"error": "busy"}, 400, {"x-should-retry": "true"}), OK])
        self.assertIsInstance(result, tuple)
        self.assertEqual(count, 2)

    def test_redirect_is_not_followed(self):
        # Following it would send the key to wherever the redirect points.
        with ProviderServer() as server:
            server.replies[:] = [Reply("", 302, {"Location": server.url + "/elsewhere"}), OK]
            with self.assertRaises(ProviderError) as ctx:
                Caller(server)()
        self.assertEqual((len(server.requests), ctx.exception.status), (1, 302))
        self.assertIn("redirected to " + server.url + "/elsewhere", str(ctx.exception))


class Waits(unittest.TestCase):
    def wait_for(self, headers):
        result, caller, count = run([Reply({"error": "later"}, 429, headers), OK],
                                    retry_base=0.01)
        self.assertIsInstance(result, tuple)
        self.assertEqual(count, 2)
        self.assertEqual(len(caller.waits), 1)
        return caller.waits[0]

    def test_retry_after_seconds(self):
        self.assertEqual(self.wait_for({"Retry-After": "2"}), 2.0)

    def test_retry_after_fractional(self):
        self.assertEqual(self.wait_for({"Retry-After": "0.25"}), 0.25)

    def test_retry_after_http_date(self):
        when = email.utils.formatdate(time.time() + 30, usegmt=True)
        self.assertTrue(27.0 <= self.wait_for({"Retry-After": when}) <= 31.0)

    def test_retry_after_ms_wins(self):
        self.assertEqual(self.wait_for({"retry-after-ms": "1500", "Retry-After": "9"}), 1.5)

    def test_absurd_values_fall_back_to_backoff(self):
        for value in ("99999", "-3", "0", "nan", "inf", "soon"):
            with self.subTest(value=value):
                wait = self.wait_for({"Retry-After": value})
                self.assertTrue(0.0075 <= wait <= 0.01, wait)

    def test_backoff_doubles_with_jitter_up_to_cap(self):
        replies = [Reply({"error": "x"}, 500)] * 5 + [OK]
        result, caller, count = run(replies, attempts=6, retry_base=0.01, retry_cap=0.03)
        self.assertIsInstance(result, tuple)
        self.assertEqual(count, 6)
        fulls = (0.01, 0.02, 0.03, 0.03, 0.03)
        for wait, full in zip(caller.waits, fulls):
            self.assertTrue(0.75 * full <= wait <= full, (wait, full))
        self.assertNotEqual(tuple(caller.waits), fulls)  # jittered, so clients spread out
        self.assertEqual([r["attempt"] for r in caller.records], [1, 2, 3, 4, 5])

    def test_wait_past_deadline_is_out_of_time(self):
        reply = Reply({"error": "later"}, 429, {"Retry-After": "30"})
        result, caller, count = run([reply, OK], deadline=time.monotonic() + 5)
        self.assertIsInstance(result, OutOfTime)
        self.assertEqual((count, caller.waits, caller.records), (1, [], []))

    def test_no_time_left_sends_nothing(self):
        result, _, count = run([OK], deadline=time.monotonic() - 1)
        self.assertIsInstance(result, OutOfTime)
        self.assertEqual(count, 0)


class Network(unittest.TestCase):
    def test_dropped_connection_is_retried(self):
        result, caller, count = run([Reply(drop=True), OK])
        self.assertIsInstance(result, tuple)
        self.assertEqual(count, 2)
        self.assertIsNone(caller.records[0]["status"])

    # A delayed reply comes long after the client's timeout, so that a busy machine, slow to
    # run the client, cannot make a timeout look like a reply.
    def test_hung_server_times_out_each_attempt(self):
        started = time.monotonic()
        result, caller, count = run([Reply(OK, delay=10)] * 2, attempts=2, timeout=0.1)
        self.assertIsInstance(result, ProviderError)
        self.assertTrue(result.retryable)
        self.assertEqual((count, len(caller.waits)), (2, 1))
        self.assertIn("no reply", str(result))
        self.assertLess(time.monotonic() - started, 5.0)    # neither attempt waited for its reply

    def test_slow_attempt_then_success(self):
        # 1 s: a prompt reply from a loopback server arrives within it even on a loaded machine
        result, _, count = run([Reply(OK, delay=10), OK], timeout=1.0)
        self.assertIsInstance(result, tuple)
        self.assertEqual(count, 2)

    def test_refused_connection_is_retried(self):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        caller = Caller(None, url=f"http://127.0.0.1:{port}/v1/chat/completions")
        with self.assertRaises(ProviderError) as ctx:
            caller(attempts=2)
        self.assertEqual(len(caller.waits), 1)
        self.assertIn(f"127.0.0.1:{port}", str(ctx.exception))
        self.assertTrue(ctx.exception.__suppress_context__)
        self.assertIsNone(ctx.exception.__cause__)

    def test_oversized_body_fails(self):
        result, _, count = run([chat("x" * 5000), OK], max_bytes=1000)
        self.assertIsInstance(result, ProviderError)
        self.assertIn("larger than 1000 bytes", str(result))
        self.assertEqual(count, 1)


class Bodies(unittest.TestCase):
    def test_html_from_a_proxy(self):
        page = ("<html><head><title>502 Bad Gateway</title><style>body{}</style></head>"
                "<body><h1>Bad gateway</h1><p>cloudflare</p></body></html>")
        result, caller, count = run([Reply(page, 502)] * 2, attempts=2)
        self.assertIsInstance(result, ProviderError)
        self.assertEqual((count, result.status), (2, 502))
        message = str(result)
        self.assertIn("HTTP 502", message)
        self.assertIn("non-JSON body (text/html)", message)
        self.assertIn("Bad gateway cloudflare", message)
        self.assertNotIn("<", message)
        self.assertNotIn("body{}", message)

    def test_error_shapes_read_well(self):
        cases = [
            ({"error": {"code": 400, "message": "Provider returned error",
                        "metadata": {"provider_name": "Groq", "raw": "tool_use_failed"}}},
             ["Provider returned error", "Groq", "tool_use_failed"]),
            ({"error": {"message": "Invalid value", "type": "invalid_request_error",
                        "param": "tools", "code": "invalid_value"}},
             ["Invalid value", "invalid_value"]),
            ([{"error": {"code": 400, "message": "API key not valid", "status": "BAD"}}],
             ["API key not valid"]),
            ({"type": "error", "error": {"type": "invalid_request_error",
                                         "message": "max_tokens too big"}},
             ["max_tokens too big"]),
        ]
        for body, expected in cases:
            with self.subTest(body=body):
                result, _, _ = run([Reply(body, 400)])
                for text in expected:
                    self.assertIn(text, str(result))

    def test_bare_json_string_error(self):
        reply = Reply('"upstream exploded"', 400, {"Content-Type": "application/json"})
        result, _, _ = run([reply])
        self.assertIn("HTTP 400: upstream exploded", str(result))

    def test_bad_json_in_200(self):
        reply = Reply('{"choices": [', 200, {"Content-Type": "application/json"})
        result, _, count = run([reply, OK])
        self.assertIsInstance(result, ProviderError)
        self.assertIn("invalid JSON", str(result))
        self.assertEqual(count, 1)

    def test_empty_200(self):
        result, _, _ = run([Reply(b"", 200)])
        self.assertIn("empty body", str(result))


class KeyNeverShown(unittest.TestCase):
    def test_key_echoed_by_server_is_blanked(self):
        echo = {"error": {"message": f"Incorrect API key provided: {KEY} (Bearer {KEY})"}}
        result, caller, _ = run([Reply(echo, 500), Reply(echo, 401)])
        self.assertIsInstance(result, ProviderError)
        self.assertEqual(result.status, 401)
        shown = [str(result), repr(result), repr(result.args), repr(caller.records)]
        for text in shown:
            self.assertNotIn(KEY, text)
            self.assertNotIn("SECRET", text)
        self.assertIn("***", str(result))

    def test_key_not_in_out_of_time(self):
        echo = {"error": {"message": f"key {KEY}"}}
        reply = Reply(echo, 429, {"Retry-After": "30"})
        result, _, _ = run([reply], deadline=time.monotonic() + 5)
        self.assertIsInstance(result, OutOfTime)
        self.assertNotIn(KEY, str(result))


if __name__ == "__main__":
    unittest.main()
