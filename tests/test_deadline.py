"""-wall holds against servers that answer too slowly: a status line, headers or a body that
trickle in a byte at a time, or `100 Continue` forever, on every provider.

Each slow server gives up after 30 s, so without a hard deadline these tests fail late
instead of hanging.
"""

from __future__ import annotations

import os
import time
import unittest

from golem.core.errors import OutOfTime, ProviderError
from golem.llm import Message, ProviderConfig, Request, Secret, make_provider
from tests.fixtures import TEST_CMD, GolemCase, last_json, make_repo, read_trace, run_cli
from tests.provider_server import Reply, chat
from tests.slow_server import MODES, SlowServer

KEY = "sk-test-deadline-0123456789abcdef"
PROVIDERS = ("openai", "openrouter", "anthropic")
# generous for a loaded 2-core machine; the servers would keep a client 30 s
CALL_BOUND = 4.0        # a 1 s deadline on one call


def provider(name: str, server: SlowServer, **config):
    base = server.root if name == "anthropic" else server.url
    return make_provider(ProviderConfig(name=name, model="m", api_key=Secret(KEY),
                                        base_url=base, **config))


def closed_within(server: SlowServer, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while not server.closed_after and time.monotonic() < end:
        time.sleep(0.02)
    return bool(server.closed_after)


class OneCall(unittest.TestCase):
    def test_every_provider_every_slow_server(self):
        for name in PROVIDERS:
            for mode in MODES:
                with self.subTest(provider=name, mode=mode), SlowServer(mode) as server:
                    started = time.monotonic()
                    request = Request("m", [Message("user", "hi")], [],
                                      deadline=started + 0.6)
                    with self.assertRaises(OutOfTime) as caught:
                        provider(name, server).complete(request)
                    took = time.monotonic() - started
                    self.assertLess(took, CALL_BOUND)
                    self.assertGreaterEqual(took, 0.5)
                    self.assertIn("wall-clock budget ran out during the model call",
                                  str(caught.exception))
                    self.assertEqual(server.posts, 1)   # no retry past the deadline
                    # the connection itself was shut down, not left to a reader in the back
                    self.assertTrue(closed_within(server, CALL_BOUND))
                    self.assertLess(server.closed_after[0], CALL_BOUND)

    def test_the_per_call_timeout_also_holds_and_is_retried(self):
        # no wall budget: the 300 s call timeout (here 0.5 s) bounds each attempt the same way
        with SlowServer("body") as server:
            started = time.monotonic()
            with self.assertRaises(ProviderError) as caught:
                provider("openai", server, timeout=0.5, max_attempts=2,
                         retry_base=0.01).complete(Request("m", [Message("user", "hi")], []))
            took = time.monotonic() - started
        self.assertLess(took, CALL_BOUND)
        self.assertEqual(server.posts, 2)
        self.assertIn("no reply", str(caught.exception))
        self.assertIn("gave up after 2 attempts", str(caught.exception))


class WholeRun(GolemCase):
    """`golem fix -wall` against each slow server: a model call the wall runs out in is cut
    off there, with stop `wall`, long before the server would have let go."""

    # -wall starts at 2 s and doubles while the model call was never reached: on a loaded
    # machine the set-up and the baseline can spend the agent's whole share of a short wall,
    # and then "ran out before model call 1" is the right answer to another question
    WALLS = (2, 4, 8, 16, 32, 64)

    def fix_against(self, name: str, mode: str):
        env = {"OPENROUTER_API_KEY": KEY, "ANTHROPIC_API_KEY": KEY}
        tried = []
        for wall in self.WALLS:
            repo = make_repo(self.tmp, name=f"repo-{name}-{mode}-{wall}")
            self.trace = os.path.join(self.tmp, f"trace-{wall}.jsonl")
            # the server trickles for longer than any wall, so only golem can end the call
            with SlowServer(mode, limit=wall + 30.0) as server:
                base = server.root if name == "anthropic" else server.url
                code, out, err = run_cli(
                    ["fix", "-dir", repo, "-test", TEST_CMD, "-provider", name,
                     "-base-url", base, "-sandbox", "none", "-trace", self.trace, "-json",
                     "-wall", f"{wall}s"], env)
            report = last_json(out) if out.strip() else {}
            if server.posts:
                return code, out, err, report, server
            tried.append(f"-wall {wall}s: exit {code}, {err.strip().splitlines()[-1:]}")
        self.fail("the model call was never reached:\n" + "\n".join(tried))

    def check(self, name: str, mode: str):
        code, out, err, report, server = self.fix_against(name, mode)
        self.assertEqual(code, 1, err)
        self.assertEqual(report["stop"], "wall")
        self.assertEqual(report["verdict"], "FAILED")
        self.assertIn("wall-clock budget ran out during the model call", report["error"])
        self.assertEqual(out.splitlines()[-2], report["summary"])     # the verdict, once
        self.assertNotIn(report["summary"], err)
        end = [e for e in read_trace(self.trace) if e["event"] == "run_end"]
        self.assertEqual([e["stop"] for e in end], ["wall"])
        # one call, and golem hung up on it: the server never had to give up trickling
        self.assertEqual(server.posts, 1)
        self.assertEqual(len(server.closed_after), 1)
        self.assertLess(server.closed_after[0], server.limit)

    def test_openai_status_line(self):
        self.check("openai", "status")

    def test_openai_headers(self):
        self.check("openai", "headers")

    def test_openai_body(self):
        self.check("openai", "body")

    def test_openai_endless_continue(self):
        self.check("openai", "continue")

    def test_openrouter_body(self):
        self.check("openrouter", "body")

    def test_anthropic_body(self):
        self.check("anthropic", "body")


class _Base:
    """What GolemCase.fix needs of a server: its base URL (the provider flag comes later)."""

    def __init__(self, url: str):
        self.url = url


class RetryWaits(GolemCase):
    def test_a_retry_wait_that_would_pass_the_wall_is_not_started(self):
        # -wall doubles while the first model call was never reached, as in WholeRun; the
        # server asks to wait longer than any wall tried
        for wall in (3, 6, 12, 24, 48):
            repo = make_repo(self.tmp, name=f"repo-{wall}")
            server = self.serve([Reply({"error": {"message": "busy"}}, 429,
                                       headers={"Retry-After": "50"}), chat("late")])
            code, out, err = run_cli(
                ["fix", "-dir", repo, "-test", TEST_CMD, "-provider", "openai",
                 "-base-url", server.url, "-sandbox", "none", "-trace", self.trace, "-json",
                 "-wall", f"{wall}s"])
            report = last_json(out) if out.strip() else {}
            if server.requests:
                break
        self.assertEqual((code, report.get("stop")), (1, "wall"), err)
        self.assertIn("waiting 50.0s to retry would pass the deadline", report["error"])
        self.assertEqual(len(server.requests), 1)


if __name__ == "__main__":
    unittest.main()
