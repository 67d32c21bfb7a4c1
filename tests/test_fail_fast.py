"""Fail fast, before anything is spent: keys, URLs and output paths checked at start, and the
preflight request that finds a rejected key or an unreachable host beside the baseline."""

from __future__ import annotations

import os
import sys
import time
import unittest

from golem.core.errors import UsageError
from golem.llm.preflight import Preflight, Probe
from tests.fixtures import (GREEN, TEST_CMD, GolemCase, make_repo, read, read_trace,
                            run_cli)
from tests.provider_server import ProviderServer, Reply, chat
from tests.test_redaction import KEY, leaks

SLEEPER = "import time; time.sleep(60.125)"   # a baseline that would take a minute
BOUND = 10.0        # seconds: "within seconds", generous for a loaded machine


class StartCase(GolemCase):
    def assertUsageError(self, code, out, err, *fragments, key=KEY):
        self.assertEqual(code, 2, err)
        self.assertEqual(out, "")
        lines = err.splitlines()
        self.assertEqual(len(lines), 1, err)
        self.assertTrue(lines[0].startswith("golem: "), err)
        for fragment in fragments:
            self.assertIn(fragment, lines[0])
        self.assertEqual(leaks(err, key), [])

    def assertNothingRan(self, server=None):
        self.assertFalse(os.path.exists(self.trace))
        self.assertFalse(os.path.exists(os.environ["GOLEM_STATE_DIR"]))
        if server is not None:
            self.assertEqual((server.requests, server.probes), ([], []))

    def cli(self, repo, *extra, env=None, provider="openrouter"):
        return run_cli(["fix", "-dir", repo, "-test", TEST_CMD, "-provider", provider,
                        "-sandbox", "none", "-trace", self.trace, *extra], env)


class Keys(StartCase):
    def test_copy_paste_accidents_are_one_line_without_the_key(self):
        repo = make_repo(self.tmp)
        server = self.serve([chat("never")])
        cases = (("a trailing zero-width space", KEY + "\u200b", "U+200B"),
                 ("an embedded newline", KEY[:30] + "\n" + KEY[30:], "U+000A"),
                 ("a space inside", KEY[:20] + " " + KEY[20:], "U+0020"),
                 ("a non-breaking space inside", KEY[:10] + "\u00a0" + KEY[10:], "U+00A0"))
        for what, value, named in cases:
            with self.subTest(what):
                code, out, err = self.cli(repo, "-base-url", server.url,
                                          env={"OPENROUTER_API_KEY": value})
                self.assertUsageError(code, out, err, "OPENROUTER_API_KEY", named,
                                      "printable ASCII")
                self.assertNothingRan(server)

    def test_every_provider_checks_its_key(self):
        repo = make_repo(self.tmp)
        for provider, variable in (("openai", "OPENAI_API_KEY"),
                                   ("anthropic", "ANTHROPIC_API_KEY")):
            with self.subTest(provider):
                code, out, err = self.cli(repo, provider=provider,
                                          env={variable: KEY + "\u200b"})
                self.assertUsageError(code, out, err, variable, "U+200B")
                self.assertNothingRan()

    def test_surrounding_blanks_are_forgiven(self):
        repo = make_repo(self.tmp, GREEN)
        server = self.serve([])
        code, out, err = self.cli(repo, "-base-url", server.url,
                                  env={"OPENROUTER_API_KEY": f"  {KEY}\n"})
        self.assertEqual(code, 0, err)
        self.assertEqual(server.probes[0]["headers"]["Authorization"], f"Bearer {KEY}")


class Urls(StartCase):
    def test_bad_base_urls(self):
        repo = make_repo(self.tmp)
        for url in ("not-a-url", "ftp://example.com/v1", "http://", "https:///v1",
                    "http://127.0.0.1:99999/v1", "http://host/v1?key=1",
                    "http://exa mple.com/v1", "localhost:8080/v1"):
            with self.subTest(url=url):
                code, out, err = self.cli(repo, "-base-url", url,
                                          env={"OPENROUTER_API_KEY": KEY})
                self.assertUsageError(code, out, err, "-base-url")
                self.assertNothingRan()

    def test_a_bad_openai_base_url_from_the_environment_is_named(self):
        repo = make_repo(self.tmp)
        code, out, err = self.cli(repo, provider="openai",
                                  env={"OPENAI_BASE_URL": "127.0.0.1:8080"})
        self.assertUsageError(code, out, err, "OPENAI_BASE_URL", "http://")
        self.assertNothingRan()


class OutputPaths(StartCase):
    def test_missing_or_unusable_output_places(self):
        repo = make_repo(self.tmp)
        missing = os.path.join(self.tmp, "no", "such", "dir")
        env = {"OPENROUTER_API_KEY": KEY}
        for flag, value, named in (
                ("-trace", os.path.join(missing, "t.jsonl"), "does not exist"),
                ("-patch", os.path.join(missing, "p.diff"), "does not exist"),
                ("-record", os.path.join(missing, "r.jsonl"), "does not exist"),
                ("-patch", self.tmp, "is a directory")):
            with self.subTest(flag=flag, value=value):
                args = ["fix", "-dir", repo, "-test", TEST_CMD, "-provider", "openrouter",
                        flag, value]
                code, out, err = run_cli(args, env)
                self.assertUsageError(code, out, err, flag, named)
                self.assertFalse(os.path.exists(os.environ["GOLEM_STATE_DIR"]))
        self.assertEqual(read(os.path.join(repo, "calc.py")), "def add(a, b):\n    return a - b\n")

    def test_an_unwritable_directory(self):
        if os.geteuid() == 0:
            self.skipTest("root writes anywhere")
        locked = os.path.join(self.tmp, "locked")
        os.mkdir(locked, 0o500)
        self.addCleanup(os.chmod, locked, 0o700)
        code, out, err = self.cli(make_repo(self.tmp), "-patch", os.path.join(locked, "p.diff"),
                                  env={"OPENROUTER_API_KEY": KEY})
        self.assertUsageError(code, out, err, "-patch", "not writable")

    def test_other_flags(self):
        repo = make_repo(self.tmp)
        env = {"OPENROUTER_API_KEY": KEY}
        for extra, named in ((["-max-tokens", "0"], "-max-tokens"),
                             (["-allow", "./evil"], "-allow"),
                             (["-replay", os.path.join(self.tmp, "none.jsonl")], "recording")):
            with self.subTest(extra=extra):
                code, out, err = self.cli(repo, *extra, env=env)
                self.assertUsageError(code, out, err, named)
                self.assertNothingRan()


class WallTooSmall(StartCase):
    def test_a_wall_that_leaves_the_model_nothing_is_a_usage_error_not_a_verdict(self):
        # a baseline of about two seconds: with -wall 6s, half is kept for the verification,
        # and the rest goes to golem's start and the baseline
        slow = {"calc.py": "import time\ntime.sleep(2)\n\ndef add(a, b):\n    return a - b\n",
                "tests/test_calc.py": "import unittest\nfrom calc import add\n\n\n"
                "class T(unittest.TestCase):\n    def test_add(self):\n"
                "        self.assertEqual(add(2, 3), 5)\n"}
        repo = make_repo(self.tmp, slow)
        server = self.serve([chat("nothing to do")])
        code, out, err = run_cli(["fix", "-dir", repo, "-test", TEST_CMD, "-provider",
                                  "openai", "-base-url", server.url, "-sandbox", "none",
                                  "-wall", "6s"])
        self.assertEqual(code, 2, err)
        self.assertEqual(out, "")
        self.assertEqual(server.requests, [])
        # under heavy load the baseline itself may not fit: a usage error naming -wall too
        self.assertRegex(err.splitlines()[-1], r"^golem: (-wall 6s leaves no time for the "
                                               r"model: the baseline took [\d.]+s and 3.0s are "
                                               r"kept for the verification; give -wall \d+s "
                                               r"or more|the baseline did not finish within "
                                               r"-wall)")


class PreflightRuns(StartCase):
    """The preflight against a loopback server: what it sends, and what each answer does."""

    def test_a_rejected_key_is_exit_2_and_no_model_call(self):
        rejected = Reply({"error": {"message": f"Incorrect API key provided: {KEY}",
                                    "type": "invalid_request_error",
                                    "code": "invalid_api_key"}}, status=401)
        for provider, variable, path, base in (
                ("openai", "OPENAI_API_KEY", "/v1/models", "url"),
                ("openrouter", "OPENROUTER_API_KEY", "/v1/key", "url"),
                ("anthropic", "ANTHROPIC_API_KEY", "/v1/models", "root")):
            with self.subTest(provider):
                repo = make_repo(self.tmp, name=f"repo-{provider}")
                server = self.serve([chat("never")])
                server.gets[path] = rejected
                started = time.monotonic()
                code, out, err = self.cli(repo, "-base-url", getattr(server, base), "-json",
                                          provider=provider, env={variable: KEY})
                took = time.monotonic() - started
                self.assertEqual(code, 2, err)
                self.assertEqual(out, "")
                last = err.splitlines()[-1]
                self.assertTrue(last.startswith(f"golem: {provider}: the key in {variable} "
                                                "was rejected (HTTP 401: Incorrect API key"),
                                last)
                self.assertIn("before any model call", last)
                self.assertEqual(leaks(err), [])
                self.assertEqual(server.requests, [])       # no model call
                self.assertEqual([p["path"] for p in server.probes], [path])
                self.assertLess(took, BOUND)
                events = read_trace(self.trace)
                self.assertEqual([e["outcome"] for e in events if e["event"] == "preflight"],
                                 ["failed"])
                os.unlink(self.trace)

    def test_what_each_provider_sends(self):
        for provider, variable, path, base, header in (
                ("openai", "OPENAI_API_KEY", "/v1/models", "url", "Authorization"),
                ("openrouter", "OPENROUTER_API_KEY", "/v1/key", "url", "Authorization"),
                ("anthropic", "ANTHROPIC_API_KEY", "/v1/models", "root", "x-api-key")):
            with self.subTest(provider):
                server = self.serve([])
                server.gets[path] = Reply({"data": {"label": "ok"}})
                repo = make_repo(self.tmp, GREEN, name=f"green-{provider}")
                code, out, err = self.cli(repo, "-base-url", getattr(server, base),
                                          provider=provider, env={variable: KEY})
                self.assertEqual(code, 0, err)
                (probe,) = server.probes
                headers = {k.lower(): v for k, v in probe["headers"].items()}
                self.assertEqual(probe["path"], path)
                self.assertIn(KEY, headers[header.lower()])
                self.assertEqual(headers["accept-encoding"], "identity")
                if provider == "anthropic":
                    self.assertEqual(headers["anthropic-version"], "2023-06-01")
                self.assertEqual(server.requests, [])       # nothing but the GET

    def test_an_unknown_host_is_exit_2_within_seconds(self):
        repo = make_repo(self.tmp)
        started = time.monotonic()
        code, out, err = self.cli(repo, "-base-url", "http://golem-preflight.invalid/v1",
                                  "-json", env={"OPENROUTER_API_KEY": KEY})
        took = time.monotonic() - started
        self.assertEqual(code, 2, err)
        self.assertEqual(out, "")
        last = err.splitlines()[-1]
        self.assertTrue(last.startswith("golem: openrouter: cannot reach "
                                        "http://golem-preflight.invalid/v1/key"), last)
        self.assertIn("check the base URL and the network", last)
        self.assertLess(took, BOUND)

    def test_a_keyless_local_server_without_a_models_endpoint_works(self):
        repo = make_repo(self.tmp)
        from tests.fixtures import FIX_EDIT
        server = self.serve([chat(tool_calls=[FIX_EDIT]), chat("fixed")])
        code, out, err, report = self.fix(repo, server)     # -provider openai, no key
        self.assertEqual((code, report["verdict"]), (0, "VERIFIED"), err)
        (probe,) = server.probes
        self.assertEqual(probe["path"], "/v1/models")
        self.assertNotIn("Authorization", probe["headers"])
        (event,) = [e for e in read_trace(self.trace) if e["event"] == "preflight"]
        self.assertEqual((event["outcome"], event["status"]), ("unsure", 404))
        self.assertIn(". preflight [GET ", err)
        self.assertIn("carrying on]", err)

    def test_a_local_server_that_wants_a_key(self):
        repo = make_repo(self.tmp)
        server = self.serve([chat("never")])
        server.gets["/v1/models"] = Reply({"error": {"message": "Unauthorized"}}, status=401)
        code, out, err = run_cli(["fix", "-dir", repo, "-test", TEST_CMD, "-provider",
                                  "openai", "-base-url", server.url, "-sandbox", "none"])
        self.assertEqual(code, 2, err)
        self.assertIn("the server wants a key", err.splitlines()[-1])
        self.assertIn("set OPENAI_API_KEY", err.splitlines()[-1])
        self.assertEqual(server.requests, [])

    def test_a_redirect_and_a_web_page_mean_a_wrong_base_url(self):
        for name, reply, named in (
                ("redirect", Reply("", status=301,
                                   headers={"Location": "https://example.test/api/v1/models"}),
                 "redirected to https://example.test/api/v1/models"),
                ("web page", Reply("<html><body>Models</body></html>"), "not the API")):
            with self.subTest(name):
                repo = make_repo(self.tmp, name=name.replace(" ", "-"))
                server = self.serve([chat("never")])
                server.gets["/v1/models"] = reply
                code, out, err = self.cli(repo, "-base-url", server.url, provider="openai")
                self.assertEqual(code, 2, err)
                self.assertIn(named, err.splitlines()[-1])
                self.assertEqual(server.requests, [])

    def test_a_rejected_key_stops_a_long_baseline_at_once(self):
        repo = make_repo(self.tmp)
        server = self.serve([chat("never")])
        server.gets["/v1/key"] = Reply({"error": {"code": 401, "message": "No auth"}},
                                       status=401)
        started = time.monotonic()
        code, out, err = run_cli(["fix", "-dir", repo, "-test",
                                  f"{sys.executable} -c '{SLEEPER}'", "-provider",
                                  "openrouter", "-base-url", server.url, "-sandbox", "none",
                                  "-trace", self.trace], {"OPENROUTER_API_KEY": KEY})
        took = time.monotonic() - started
        self.assertEqual(code, 2, err)
        self.assertLess(took, BOUND)
        self.assertIn("the key in OPENROUTER_API_KEY was rejected", err.splitlines()[-1])
        self.assertFalse(sleeper_running())
        self.assertEqual(server.requests, [])
        self.assertNotIn("baseline", [e["event"] for e in read_trace(self.trace)])

    def test_a_rejected_key_fails_even_a_green_suite(self):
        repo = make_repo(self.tmp, GREEN)
        server = self.serve([])
        server.gets["/v1/key"] = Reply({"error": {"message": "No auth"}}, status=401)
        code, out, err = self.cli(repo, "-base-url", server.url,
                                  env={"OPENROUTER_API_KEY": KEY})
        self.assertEqual(code, 2, err)
        self.assertIn("was rejected", err.splitlines()[-1])


def sleeper_running() -> bool:
    marker = SLEEPER.encode()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    if marker in handle.read().replace(b"\0", b" "):
                        return True
            except OSError:
                continue
    return False


class PreflightUnit(unittest.TestCase):
    """The preflight object alone, against a loopback server."""

    def probe(self, server, path="/v1/models", official="api.openai.com"):
        return Probe(server.url.removesuffix("/v1") + path, {}, official, "OPENAI_API_KEY",
                     False)

    def test_a_404_from_the_providers_own_host_is_a_wrong_base_url(self):
        with ProviderServer([]) as server:
            check = Preflight("openai", self.probe(server, official="127.0.0.1")).start()
            with self.assertRaises(UsageError) as caught:
                check.wait()
        self.assertIn("HTTP 404", str(caught.exception))
        self.assertIn("check the base URL", str(caught.exception))

    def test_a_slow_answer_proves_nothing_and_holds_no_one_up(self):
        with ProviderServer([], {"/v1/models": Reply({"data": []}, delay=3.0)}) as server:
            check = Preflight("openai", self.probe(server), timeout=0.5).start()
            started = time.monotonic()
            check.wait()        # no error: the run may go on
            took = time.monotonic() - started
        self.assertEqual(check.result.outcome, "unsure")
        self.assertLess(took, 2.5)

    def test_an_answer_that_is_not_needed_is_cancelled(self):
        with ProviderServer([], {"/v1/models": Reply({"error": {"message": "no"}},
                                                      status=401)}) as server:
            check = Preflight("openai", self.probe(server))
            check.cancel()
            check.start()
            check._done.wait(5)
        self.assertEqual(check.result.outcome, "failed")   # found, but no one is stopped


if __name__ == "__main__":
    unittest.main()
