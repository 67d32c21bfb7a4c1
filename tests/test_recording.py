"""-record and -replay: HTTP exchanges saved below the provider and served back offline.

Run this module as a script to regenerate the shipped recording of the example:
    python3 -m tests.test_recording
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import unittest

from golem.llm.demo import CALCULATOR_FIX
from golem.llm.recording import Recorder, Replayer, differences, first_difference
from tests import fixtures
from tests.fixtures import (AMBIENT, REPO_ROOT, TEST_CMD, GolemCase, last_json, make_repo,
                            read_trace, run_cli)
from tests.provider_server import ProviderServer, Reply, chat

EXAMPLE = fixtures.CALCULATOR
FIXTURE = os.path.join(REPO_ROOT, "tests", "fixtures", "calculator.record.jsonl")
KEY = "sk-rec-SECRET-0123456789abcdef"
USAGE = {"prompt_tokens": 1000, "completion_tokens": 50, "total_tokens": 1050}


def demo_replies() -> list[dict]:
    """The demo script's turns as chat-completion bodies, as a real server would send them."""
    return [chat(turn.get("say"), turn.get("call"), usage=USAGE) for turn in CALCULATOR_FIX]


def copy_example(tmp: str, name: str = "broken-calculator") -> str:
    target = os.path.join(tmp, name)
    shutil.copytree(EXAMPLE, target)
    return target


def fix_args(repo: str, trace: str, *extra: str) -> list[str]:
    return ["fix", "-dir", repo, "-test", TEST_CMD, "-provider", "openai", "-sandbox", "none",
            "-trace", trace, "-json", *extra]


def record_calculator(tmp: str, recording: str, trace: str) -> tuple[int, str, str]:
    """`golem fix -record` on a copy of the example, against a server playing the demo."""
    repo = copy_example(tmp)
    with ProviderServer(demo_replies()) as server:
        return run_cli(fix_args(repo, trace, "-base-url", server.url, "-record", recording),
                       {"OPENAI_API_KEY": KEY})


def recorded_tool_calls(path: str) -> list[tuple[str, str, dict]]:
    """(id, name, arguments) of every tool call in the replies of a recording, in order."""
    calls = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            body = json.loads(line)["response"].get("body") or {}
            for choice in body.get("choices", [])[:1]:
                for call in choice["message"].get("tool_calls") or []:
                    calls.append((call["id"], call["function"]["name"],
                                  json.loads(call["function"]["arguments"])))
    return calls


def traced_calls(trace: list[dict]) -> list[tuple[str, str, dict]]:
    return [(e["id"], e["name"], e["arguments"]) for e in trace if e["event"] == "tool_call"]


def kinds(trace: list[dict]) -> list[str]:
    return [e["event"] for e in trace if e["event"] != "replay_mismatch"]


class ShippedRecording(GolemCase):
    def test_replay_of_the_example_is_verified_offline(self):
        repo = copy_example(self.tmp)
        code, out, err = run_cli(fix_args(repo, self.trace, "-replay", FIXTURE))
        self.assertEqual(code, 0, err)
        report = last_json(out)
        self.assertEqual(report["verdict"], "VERIFIED")
        self.assertEqual(report["steps"], 7)
        trace = read_trace(self.trace)
        expected = recorded_tool_calls(FIXTURE)
        self.assertEqual([(name, args) for _, name, args in expected],
                         [(name, dict(args)) for name, args in
                          (c for turn in CALCULATOR_FIX for c in turn.get("call", []))])
        self.assertEqual(traced_calls(trace), expected)

    def test_shipped_recording_holds_no_key_or_headers(self):
        with open(FIXTURE, encoding="utf-8") as handle:
            text = handle.read()
        self.assertNotIn(KEY, text)
        self.assertNotIn("Bearer", text)
        for line in text.splitlines():
            exchange = json.loads(line)
            self.assertEqual(set(exchange), {"request", "response"})
            self.assertEqual(set(exchange["request"]), {"path", "body"})
            self.assertEqual(exchange["request"]["path"], "/v1/chat/completions")


class RecordThenReplay(GolemCase):
    def test_replay_gives_the_same_trace(self):
        recording = os.path.join(self.tmp, "run.record.jsonl")
        first_trace = os.path.join(self.tmp, "first.jsonl")
        code, out, err = record_calculator(os.path.join(self.tmp, "a"), recording, first_trace)
        self.assertEqual((code, last_json(out)["verdict"]), (0, "VERIFIED"), err)
        with open(recording, encoding="utf-8") as handle:
            text = handle.read()
        self.assertEqual(len(text.splitlines()), 7)
        self.assertNotIn(KEY, text)
        self.assertNotIn("authorization", text.lower())

        repo = copy_example(os.path.join(self.tmp, "b"))
        second_trace = os.path.join(self.tmp, "second.jsonl")
        code, out, err = run_cli(fix_args(repo, second_trace, "-replay", recording))
        self.assertEqual((code, last_json(out)["verdict"]), (0, "VERIFIED"), err)
        first, second = read_trace(first_trace), read_trace(second_trace)
        # the recorded run made a preflight request; a replay makes none
        self.assertIn("preflight", kinds(first))
        self.assertEqual(kinds(second), [k for k in kinds(first) if k != "preflight"])
        self.assertEqual(traced_calls(second), traced_calls(first))
        self.assertEqual(len(traced_calls(first)), 6)

    def test_a_replay_takes_provider_and_model_from_the_recording_and_ignores_timings(self):
        recording = os.path.join(self.tmp, "run.record.jsonl")
        repo = copy_example(os.path.join(self.tmp, "a"))
        with ProviderServer(demo_replies()) as server:
            code, out, err = run_cli(fix_args(repo, self.trace, "-base-url", server.url,
                                              "-model", "recorded-model-7", "-record",
                                              recording), {"OPENAI_API_KEY": KEY})
        self.assertEqual(code, 0, err)
        # the suite's own timings and temporary names change from run to run
        with open(recording, encoding="utf-8") as handle:
            self.assertRegex(handle.read(), r"Ran \d+ tests? in \d+\.\d+s")
        shutil.rmtree(repo)     # replayed where it was recorded: only the volatile differs
        repo = copy_example(os.path.join(self.tmp, "a"))
        trace = os.path.join(self.tmp, "replay.jsonl")
        args = [a for a in fix_args(repo, trace, "-replay", recording)
                if a not in ("-provider", "openai")]
        code, out, err = run_cli(args, {"GOLEM_PROVIDER": None, "GOLEM_MODEL": None})
        self.assertEqual((code, last_json(out)["verdict"]), (0, "VERIFIED"), err)
        self.assertNotIn("differs from the recording", err)
        start = next(e for e in read_trace(trace) if e["event"] == "run_start")
        self.assertEqual((start["provider"], start["model"]), ("openai", "recorded-model-7"))

    def test_masking_keeps_real_differences(self):
        from golem.llm.recording import masked
        self.assertEqual(masked("Ran 10 tests in 0.004s"), masked("Ran 10 tests in 1.250s"))
        self.assertNotEqual(masked("Ran 10 tests in 0.004s"), masked("Ran 11 tests in 0.004s"))
        self.assertEqual(masked("/tmp/golem-base-ab12cd34/x.py"),
                         masked("/tmp/golem-base-zz99yy88/x.py"))
        self.assertNotEqual(masked("assert 3 == 4"), masked("assert 3 == 5"))

    def test_failures_and_retries_are_replayed_without_waiting(self):
        repo = make_repo(self.tmp)
        recording = os.path.join(self.tmp, "retry.jsonl")
        overloaded = Reply({"error": {"message": "busy", "code": 503}}, status=503,
                           headers={"Retry-After": "0.01", "X-Other-Header": "x"})
        with ProviderServer([overloaded, chat("nothing to do")]) as server:
            code, _, err = run_cli(["ask", "-dir", repo, "-provider", "openai", "-base-url",
                                    server.url, "-record", recording, "-sandbox", "none",
                                    "what is this?"], {"OPENAI_API_KEY": KEY})
        self.assertEqual(code, 0, err)
        with open(recording, encoding="utf-8") as handle:
            lines = [json.loads(line) for line in handle]
        self.assertEqual([line["response"]["status"] for line in lines], [503, 200])
        self.assertEqual(lines[0]["response"]["headers"],
                         {"content-type": "application/json", "retry-after": "0.01"})
        lines[0]["response"]["headers"]["retry-after"] = "30"
        with open(recording, "w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(line) + "\n" for line in lines)
        started = time.monotonic()
        code, out, err = run_cli(["ask", "-dir", repo, "-provider", "openai", "-replay",
                                  recording, "-sandbox", "none", "-trace", self.trace,
                                  "what is this?"])
        self.assertEqual(code, 0, err)
        self.assertEqual(out.strip(), "nothing to do")
        retries = [e for e in read_trace(self.trace) if e["event"] == "retry"]
        self.assertEqual([(r["status"], r["wait"]) for r in retries], [(503, 30.0)])
        self.assertLess(time.monotonic() - started, 20)


class Mismatches(GolemCase):
    def record_ask(self, question: str) -> tuple[str, str]:
        repo = make_repo(self.tmp)
        recording = os.path.join(self.tmp, "ask.jsonl")
        replies = [chat(tool_calls=[("read_file", {"path": "calc.py"})]), chat("it subtracts")]
        with ProviderServer(replies) as server:
            code, _, err = run_cli(["ask", "-dir", repo, "-provider", "openrouter",
                                    "-base-url", server.url, "-record", recording,
                                    "-sandbox", "none", question],
                                   {"OPENROUTER_API_KEY": KEY})
        self.assertEqual(code, 0, err)
        return repo, recording

    def replay_ask(self, repo, recording, question, *extra):
        args = ["ask", "-dir", repo, "-provider", "openrouter", "-replay", recording,
                "-sandbox", "none", "-trace", self.trace, "-json", *extra, question]
        return run_cli(args)

    def test_identical_requests_replay_strictly_without_a_key(self):
        repo, recording = self.record_ask("what does add do?")
        code, out, err = self.replay_ask(repo, recording, "what does add do?", "-replay-strict")
        self.assertEqual(code, 0, err)
        self.assertEqual(last_json(out)["answer"], "it subtracts")
        self.assertNotIn("replay_mismatch", [e["event"] for e in read_trace(self.trace)])
        self.assertNotIn("differs", err)

    def test_a_different_request_is_named_then_served(self):
        repo, recording = self.record_ask("what does add do?")
        code, out, err = self.replay_ask(repo, recording, "what does sub do?")
        self.assertEqual(code, 0, err)
        self.assertIn("request 1 differs from the recording at messages[1].content", err)
        # The same difference in request 2's history is not reported again.
        self.assertEqual(err.count("differs from the recording"), 1)
        events = [e for e in read_trace(self.trace) if e["event"] == "replay_mismatch"]
        self.assertEqual(len(events), 1)
        self.assertEqual(events[0]["at"], "messages[1].content")
        self.assertEqual(events[0]["recorded"], "what does add do?")
        self.assertEqual(events[0]["sent"], "what does sub do?")

    def test_strict_mismatch_is_a_provider_error(self):
        repo, recording = self.record_ask("what does add do?")
        code, out, err = self.replay_ask(repo, recording, "what does sub do?", "-replay-strict")
        self.assertNotEqual(code, 0)
        report = last_json(out)
        self.assertEqual(report["stop"], "provider_error")
        self.assertIn("messages[1].content", report["error"])

    def test_running_out_of_exchanges_is_a_provider_error(self):
        repo, recording = self.record_ask("what does add do?")
        with open(recording, encoding="utf-8") as handle:
            first = handle.readline()
        with open(recording, "w", encoding="utf-8") as handle:
            handle.write(first)
        code, out, err = self.replay_ask(repo, recording, "what does add do?")
        self.assertNotEqual(code, 0)
        self.assertIn("all were used", last_json(out)["error"])


class Flags(GolemCase):
    def test_usage_errors(self):
        repo = make_repo(self.tmp)
        missing = os.path.join(self.tmp, "nope.jsonl")
        bad = os.path.join(self.tmp, "bad.jsonl")
        with open(bad, "w", encoding="utf-8") as handle:
            handle.write('{"event": "run_start"}\n')
        cases = [(["-record", bad, "-replay", FIXTURE], "cannot be used together"),
                 (["-replay-strict"], "needs -replay"),
                 (["-replay", missing], "cannot read recording"),
                 (["-replay", bad], "not a recorded exchange")]
        for extra, message in cases:
            with self.subTest(extra=extra):
                code, _, err = run_cli(["fix", "-dir", repo, "-provider", "anthropic",
                                        "-sandbox", "none", *extra])
                self.assertEqual(code, 2, err)
                self.assertIn(message, err)


class FirstDifference(unittest.TestCase):
    def test_paths(self):
        base = {"model": "m", "messages": [{"role": "user", "content": "a"}], "n": 1}
        self.assertIsNone(first_difference(base, json.loads(json.dumps(base))))
        cases = [({**base, "model": "x"}, ("model", "m", "x")),
                 ({**base, "messages": [{"role": "user", "content": "b"}]},
                  ("messages[0].content", "a", "b")),
                 ({**base, "messages": []}, ("messages[0]", base["messages"][0], "(absent)")),
                 ({**base, "extra": True}, ("extra", "(absent)", True)),
                 ({**base, "n": 1.0}, ("n", 1, 1.0)),
                 ([], ("", base, []))]
        for sent, expected in cases:
            with self.subTest(sent=sent):
                self.assertEqual(first_difference(base, sent), expected)

    def test_all_differences_in_order(self):
        recorded = {"a": [1, 2], "b": "x"}
        self.assertEqual(list(differences(recorded, {"a": [1, 3, 4], "b": "y"})),
                         [("a[1]", 2, 3), ("a[2]", "(absent)", 4), ("b", "x", "y")])

    def test_recorder_redacts_the_key_everywhere(self):
        def inner(url, payload, headers, budget, max_bytes):
            return 401, {"content-type": "application/json", "set-cookie": "s=1"}, \
                json.dumps({"error": {"message": f"bad key {KEY}"}}).encode()
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "r.jsonl")
            recorder = Recorder(path, inner=inner)
            recorder("http://h/v1/x?key=" + KEY, json.dumps({"note": KEY}).encode(),
                     {"Authorization": f"Bearer {KEY}"}, 1.0, 1000)
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        self.assertNotIn(KEY, text)
        exchange = json.loads(text)
        self.assertEqual(exchange["request"], {"path": "/v1/x", "body": {"note": "[redacted]"}})
        self.assertEqual(exchange["response"]["headers"], {"content-type": "application/json"})
        self.assertEqual(exchange["response"]["body"]["error"]["message"], "bad key [redacted]")

    def test_replayer_reads_the_shipped_fixture(self):
        replayer = Replayer(FIXTURE)
        self.assertEqual(len(replayer.exchanges), len(CALCULATOR_FIX))
        self.assertTrue(replayer.instant)


def regenerate() -> None:
    """Write tests/fixtures/calculator.record.jsonl afresh."""
    for name in AMBIENT:
        os.environ.pop(name, None)
    with tempfile.TemporaryDirectory(prefix="golem-record-") as tmp:
        os.environ["GOLEM_STATE_DIR"] = os.path.join(tmp, "state")
        os.makedirs(os.path.dirname(FIXTURE), exist_ok=True)
        code, out, err = record_calculator(tmp, FIXTURE, os.path.join(tmp, "trace.jsonl"))
    sys.stderr.write(err)
    print(out.splitlines()[0] if out else f"exit {code}")


if __name__ == "__main__":
    regenerate()
