"""Cost on every provider: the shipped price table, -price, local servers, and a -cost budget
that stops the run whichever provider answers (`cost_source` in -json says whence)."""

from __future__ import annotations

import datetime
import unittest

from golem.llm import prices
from tests.fixtures import TEST_CMD, GolemCase, last_json, make_repo, run_cli
from tests.provider_server import anthropic_reply, chat

KEY = "sk-test-pricing-0123456789"


def openai_turns(count: int, **usage) -> list[dict]:
    body = {"prompt_tokens": 100_000, "completion_tokens": 10_000, **usage}
    return [chat(tool_calls=[("list_files", {})], usage=body) for _ in range(count)]


def anthropic_turns(count: int, **usage) -> list[dict]:
    body = {"input_tokens": 100_000, "output_tokens": 10_000, **usage}
    return [anthropic_reply(tool_uses=[("list_files", {})], usage=body) for _ in range(count)]


class Table(unittest.TestCase):
    def test_the_table_is_dated_and_covers_both_vendors(self):
        checked = datetime.date.fromisoformat(prices.checked())
        self.assertGreaterEqual(checked, datetime.date(2026, 1, 1))
        for vendor in ("anthropic", "openai"):
            models = prices.table()["models"][vendor]
            self.assertGreater(len(models), 5)
            for name, row in models.items():
                self.assertEqual(len(row), 4, name)
                self.assertTrue(all(v >= 0 for v in row), name)
                self.assertLessEqual(row[2], row[0], name)      # a cache read costs less

    def test_lookup_by_name_snapshot_and_openrouter_id(self):
        sonnet = prices.lookup("anthropic", "claude-sonnet-4-5")
        self.assertEqual((sonnet.input, sonnet.output, sonnet.cache_read), (3.0, 15.0, 0.3))
        self.assertEqual(prices.lookup("anthropic", "claude-sonnet-4-5-20250929"), sonnet)
        self.assertEqual(prices.lookup("openai", "gpt-4.1-2025-04-14"),
                         prices.lookup("openai", "gpt-4.1"))
        self.assertIsNone(prices.lookup("openai", "no-such-model"))
        via = prices.choose("openrouter", "anthropic/claude-sonnet-4.5", None, None)
        self.assertEqual((via.source, via.price), ("provider", sonnet))

    def test_cost_of_fresh_cached_and_written_tokens(self):
        price = prices.Price(3.0, 15.0, 0.3, 3.75)
        # 1M in, of which 400k read from the cache and 100k written to it; 100k out
        self.assertAlmostEqual(price.cost(1_000_000, 100_000, 400_000, 100_000),
                               (500_000 * 3 + 400_000 * 0.3 + 100_000 * 3.75
                                + 100_000 * 15) / 1e6)

    def test_price_flag_values(self):
        self.assertEqual(prices.parse_price("3,15"), prices.Price(3.0, 15.0, 3.0, 3.0))
        self.assertEqual(prices.parse_price(" 1, 2, 0.1"), prices.Price(1.0, 2.0, 0.1, 1.0))
        for bad in ("3", "3,15,1,2", "a,b", "nan,1", "inf,1", "-1,2", "3,,1", ""):
            with self.assertRaises(ValueError, msg=bad):
                prices.parse_price(bad)

    def test_local_servers_are_free_unless_the_model_is_the_vendors(self):
        local = prices.choose("openai", "qwen3-coder", "http://127.0.0.1:8080/v1", None)
        self.assertEqual((local.source, local.price), ("table", prices.FREE))
        lan = prices.choose("openai", "llama", "http://192.168.1.20:11434/v1", None)
        self.assertEqual(lan.price, prices.FREE)
        proxy = prices.choose("openai", "gpt-4.1", "http://localhost:4000", None)
        self.assertEqual(proxy.price, prices.lookup("openai", "gpt-4.1"))
        remote = prices.choose("openai", "mystery", "https://api.example.com/v1", None)
        self.assertEqual((remote.source, remote.price), ("unknown", None))


class BudgetOnEveryProvider(GolemCase):
    def run_fix(self, provider: str, server, *extra: str, model: str | None = None):
        url = server.root if provider == "anthropic" else server.url
        args = ["fix", "-dir", make_repo(self.tmp), "-test", TEST_CMD, "-provider", provider,
                "-base-url", url, "-sandbox", "none", "-json", *extra]
        if model:
            args += ["-model", model]
        env = {"ANTHROPIC_API_KEY": KEY, "OPENROUTER_API_KEY": KEY}
        code, out, err = run_cli(args, env)
        return code, err, last_json(out), server

    def test_anthropic_is_priced_from_the_table_and_stopped(self):
        # claude-sonnet-4-5: 100k in at $3/M + 10k out at $15/M = $0.45 a call
        code, err, report, server = self.run_fix("anthropic", self.serve(anthropic_turns(5)),
                                                 "-cost", "1")
        self.assertEqual(report["stop"], "cost")
        self.assertEqual(len(server.requests), 3)
        self.assertAlmostEqual(report["cost"], 1.35)
        self.assertEqual(report["cost_source"], "table")
        self.assertIn("golem's price table, checked", err)
        self.assertEqual(code, 1)

    def test_anthropic_cache_reads_and_writes_are_priced_apart(self):
        usage = {"input_tokens": 10_000, "cache_read_input_tokens": 80_000,
                 "cache_creation_input_tokens": 10_000}
        code, err, report, server = self.run_fix(
            "anthropic", self.serve(anthropic_turns(1, **usage) + [anthropic_reply("done")]),
            "-steps", "1")
        self.assertEqual(report["stop"], "steps")
        self.assertAlmostEqual(report["cost"], (10_000 * 3 + 80_000 * 0.3 + 10_000 * 3.75
                                                + 10_000 * 15) / 1e6)

    def test_openai_model_behind_a_local_proxy_is_priced_and_stopped(self):
        # gpt-4.1: 100k in at $2/M + 10k out at $8/M = $0.28 a call
        code, err, report, server = self.run_fix("openai", self.serve(openai_turns(5)),
                                                 "-cost", "0.5", model="gpt-4.1")
        self.assertEqual(report["stop"], "cost")
        self.assertEqual(len(server.requests), 2)
        self.assertAlmostEqual(report["cost"], 0.56)
        self.assertEqual(report["cost_source"], "table")

    def test_a_local_model_is_free_and_the_run_says_so(self):
        code, err, report, server = self.run_fix("openai", self.serve(openai_turns(3)),
                                                 "-steps", "3", "-cost", "0.01",
                                                 model="qwen3-coder")
        self.assertEqual(report["stop"], "steps")
        self.assertEqual(report["cost"], 0.0)
        self.assertIn("is local, so its tokens count as free", err)

    def test_price_flag_wins_and_holds_on_a_local_server(self):
        code, err, report, server = self.run_fix("openai", self.serve(openai_turns(5)),
                                                 "-price", "1,10", "-cost", "0.5",
                                                 model="qwen3-coder")
        # 100k in at $1/M + 10k out at $10/M = $0.20 a call
        self.assertEqual(report["stop"], "cost")
        self.assertEqual(len(server.requests), 3)
        self.assertAlmostEqual(report["cost"], 0.6)
        self.assertEqual(report["cost_source"], "flag")

    def test_openrouter_reports_its_own_cost(self):
        code, err, report, server = self.run_fix(
            "openrouter", self.serve(openai_turns(5, cost=0.3)), "-cost", "0.5")
        self.assertEqual(report["stop"], "cost")
        self.assertEqual(len(server.requests), 2)
        self.assertAlmostEqual(report["cost"], 0.6)
        self.assertEqual(report["cost_source"], "provider")

    def test_openrouter_reply_without_cost_falls_back_to_the_table(self):
        code, err, report, server = self.run_fix(
            "openrouter", self.serve(openai_turns(5)), "-cost", "1",
            model="anthropic/claude-sonnet-4.5")
        self.assertEqual(report["stop"], "cost")
        self.assertAlmostEqual(report["cost"], 1.35)
        self.assertEqual(report["cost_source"], "table")

    def test_unknown_price_is_said_at_the_start(self):
        code, err, report, server = self.run_fix(
            "anthropic", self.serve(anthropic_turns(2) + [anthropic_reply("done")]),
            "-steps", "2", model="claude-unreleased-9")
        self.assertEqual(report["cost_source"], "unknown")
        self.assertIn("the $5.00 cost budget cannot be enforced", err)
        self.assertLess(err.index("cannot be enforced"), err.index("asking model"))
        self.assertEqual(report["stop"], "steps")


if __name__ == "__main__":
    unittest.main()
