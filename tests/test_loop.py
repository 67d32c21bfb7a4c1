import io
import json
import os
import sys
import tempfile
import time
import unittest

from golem.agent import Budget, parse_duration, run
from golem.llm.demo import ScriptedProvider
from golem.core.errors import OutOfTime, ProviderError, UsageError
from golem.llm.types import Message, Request, Response, ToolCall, Usage
from golem.tools import Context, default_registry
from golem.tools.process import command_env
from golem.tools.workspace import Workspace
from golem.trace import Trace

SECRET = "sk-loop-secret-0123456789"
PY_DIR = os.path.dirname(sys.executable)
PY_NAME = os.path.basename(sys.executable)


class Counting:
    """Wraps a provider and keeps every request it was given."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name
        self.requests: list[Request] = []

    def complete(self, request: Request) -> Response:
        self.requests.append(request)
        # a snapshot of the conversation as it was at this call
        self.requests[-1] = Request(request.model, list(request.messages), request.tools,
                                    request.max_tokens, request.deadline)
        return self.inner.complete(request)


class Fixed:
    """Returns the same kind of reply every time, with a chosen usage."""

    name = "fixed"

    def __init__(self, usage: Usage, finish: str = "tool_calls", content: str = "",
                 calls: bool = True):
        self.usage, self.finish, self.content, self.calls = usage, finish, content, calls
        self.count = 0

    def complete(self, request: Request) -> Response:
        self.count += 1
        calls = [ToolCall(f"t{self.count}", "list_files", {})] if self.calls else []
        return Response(Message("assistant", self.content, tool_calls=calls), self.finish,
                        Usage(self.usage.prompt, self.usage.completion, 0, self.usage.cost))


class Raising:
    name = "raising"

    def __init__(self, exc: BaseException, after: list | None = None):
        self.exc = exc
        self.script = ScriptedProvider(after or [])
        self.count = 0

    def complete(self, request: Request) -> Response:
        self.count += 1
        if self.count > len(self.script.turns):
            raise self.exc
        return self.script.complete(request)


class LoopCase(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        base = os.path.realpath(tmp.name)
        self.root = os.path.join(base, "ws")
        home = os.path.join(base, "home")
        os.mkdir(self.root)
        os.mkdir(home)
        with open(os.path.join(self.root, "hello.txt"), "w") as fh:
            fh.write(f"hello\nkey={SECRET}\n")
        env = command_env(home, home)
        env["PATH"] = PY_DIR + os.pathsep + env["PATH"]
        self.context = Context(Workspace(self.root), allow={PY_NAME}, env=env)
        self.registry = default_registry(self.context, secrets=[SECRET])
        self.trace_path = os.path.join(base, "trace.jsonl")
        self.trace = Trace(self.trace_path, secrets=[SECRET])
        self.addCleanup(self.trace.close)

    def go(self, provider, budget: Budget | None = None):
        return run(provider, self.registry, model="test-model", system="be brief",
                   task="fix it", budget=budget or Budget(), trace=self.trace)

    def events(self) -> list[dict]:
        with open(self.trace_path, encoding="utf-8") as fh:
            return [json.loads(line) for line in fh]


class StopTest(LoopCase):
    def test_answered(self):
        provider = Counting(ScriptedProvider([
            {"say": "looking", "call": [("read_file", {"path": "hello.txt"})]},
            {"say": "All fixed."}]))
        outcome = self.go(provider)
        self.assertEqual(outcome.stop, "answered")
        self.assertEqual(outcome.claimed, "All fixed.")
        self.assertEqual((outcome.steps, outcome.tool_calls), (2, 1))
        self.assertIsNone(outcome.error)
        self.assertEqual(len(provider.requests), 2)
        self.assertGreater(outcome.usage.total, 0)

    def test_declined(self):
        outcome = self.go(ScriptedProvider([{"say": "  declined: the test itself is wrong"}]))
        self.assertEqual(outcome.stop, "declined")
        self.assertEqual(outcome.claimed, "  declined: the test itself is wrong")
        outcome = self.go(ScriptedProvider([{"say": "I have not DECLINED: anything"}]))
        self.assertEqual(outcome.stop, "answered")

    def test_cut_off(self):
        provider = Fixed(Usage(5, 5), finish="length", content="I will now", calls=True)
        outcome = self.go(provider)
        self.assertEqual(outcome.stop, "cut_off")
        self.assertEqual(provider.count, 1)
        # a cut-off reply is no answer, and its tool calls are not run
        self.assertEqual(outcome.claimed, "")
        self.assertEqual(outcome.tool_calls, 0)
        self.assertEqual([m.role for m in outcome.messages], ["system", "user", "assistant"])

    def test_steps_budget_checked_before_each_call(self):
        provider = Counting(ScriptedProvider([{"call": [("list_files", {})]}]))
        outcome = self.go(provider, Budget(steps=3))
        self.assertEqual(outcome.stop, "steps")
        self.assertEqual(len(provider.requests), 3)
        self.assertEqual((outcome.steps, outcome.tool_calls), (3, 3))

    def test_tokens_budget(self):
        provider = Fixed(Usage(60, 50))
        outcome = self.go(provider, Budget(tokens=200))
        self.assertEqual(outcome.stop, "tokens")
        self.assertEqual(provider.count, 2)
        self.assertEqual(outcome.usage.total, 220)

    def test_cost_budget(self):
        provider = Fixed(Usage(1, 1, cost=0.4))
        outcome = self.go(provider, Budget(cost=1.0))
        self.assertEqual(outcome.stop, "cost")
        self.assertEqual(provider.count, 3)
        self.assertAlmostEqual(outcome.usage.cost, 1.2)

    def test_unknown_cost_never_stops_a_cost_budget(self):
        provider = Fixed(Usage(1, 1, cost=None))
        outcome = self.go(provider, Budget(cost=0.01, steps=4))
        self.assertEqual(outcome.stop, "steps")
        self.assertEqual(provider.count, 4)

    def test_wall_when_the_provider_runs_out_of_time(self):
        provider = Raising(OutOfTime("deadline passed while waiting"),
                           after=[{"call": [("list_files", {})]}])
        outcome = self.go(provider, Budget(wall=60))
        self.assertEqual(outcome.stop, "wall")
        self.assertEqual(provider.count, 2)
        self.assertEqual(outcome.steps, 2)
        self.assertEqual(outcome.error, "deadline passed while waiting")  # what was cut short

    def test_wall_cuts_a_slow_tool_short(self):
        slow = [PY_NAME, "-c", "import time; time.sleep(20)"]
        provider = Counting(ScriptedProvider([{"call": [("run_command", {"argv": slow})]}]))
        start = time.monotonic()
        outcome = self.go(provider, Budget(wall=1.0))
        took = time.monotonic() - start
        self.assertEqual(outcome.stop, "wall")
        self.assertLess(took, 8)
        self.assertEqual(len(provider.requests), 1)
        self.assertGreaterEqual(outcome.elapsed, 1.0)
        self.assertIsNotNone(provider.requests[0].deadline)

    def test_provider_error(self):
        provider = Raising(ProviderError("HTTP 401: invalid key", status=401),
                           after=[{"call": [("list_files", {})]}])
        outcome = self.go(provider)
        self.assertEqual(outcome.stop, "provider_error")
        self.assertEqual(outcome.error, "HTTP 401: invalid key")
        self.assertEqual(outcome.steps, 2)
        end = self.events()[-1]
        self.assertEqual(end["event"], "run_end")
        self.assertEqual(end["stop"], "provider_error")
        self.assertEqual(end["error"], "HTTP 401: invalid key")

    def test_interrupted(self):
        outcome = self.go(Raising(KeyboardInterrupt()))
        self.assertEqual(outcome.stop, "interrupted")
        self.assertEqual(self.events()[-1]["stop"], "interrupted")


class ConversationTest(LoopCase):
    def test_assistant_message_precedes_its_tool_results(self):
        provider = Counting(ScriptedProvider([
            {"say": "two at once", "call": [("list_files", {}),
                                            ("read_file", {"path": "hello.txt"})]},
            {"say": "done"}]))
        outcome = self.go(provider)
        roles = [m.role for m in outcome.messages]
        self.assertEqual(roles, ["system", "user", "assistant", "tool", "tool", "assistant"])
        assistant = outcome.messages[2]
        ids = [c.id for c in assistant.tool_calls]
        self.assertEqual([m.tool_call_id for m in outcome.messages[3:5]], ids)
        self.assertEqual([m.name for m in outcome.messages[3:5]], ["list_files", "read_file"])
        self.assertEqual(outcome.messages[3].content, "hello.txt")
        self.assertIn("     1\thello", outcome.messages[4].content)
        # the second request carried exactly that conversation
        second = provider.requests[1].messages
        self.assertEqual([m.role for m in second], roles[:5])
        self.assertEqual(provider.requests[0].model, "test-model")
        self.assertEqual({t.name for t in provider.requests[0].tools},
                         set(self.registry.tools))

    def test_old_tool_results_are_masked_in_requests_not_in_the_record(self):
        turns = [{"call": [("read_file", {"path": "hello.txt", "offset": 1 + i % 2})]}
                 for i in range(20)] + [{"say": "done"}]
        provider = Counting(ScriptedProvider(turns))
        outcome = self.go(provider)
        self.assertEqual((outcome.stop, outcome.steps), ("answered", 21))
        last = [m for m in provider.requests[-1].messages if m.role == "tool"]
        self.assertEqual(len(last), 20)
        hidden = [m for m in last if m.content.startswith("[older read_file result hidden")]
        self.assertEqual(len(hidden), 10)
        self.assertEqual(last[:10], hidden)
        self.assertIn('"path":"hello.txt"', hidden[0].content)
        for message in last[10:]:
            self.assertRegex(message.content, r"^\s+[12]\t(hello|key=\[redacted\])")
        # the run's own record keeps every result whole
        kept = [m for m in outcome.messages if m.role == "tool"]
        self.assertFalse(any(m.content.startswith("[older") for m in kept))
        # assistant messages are never hidden
        self.assertEqual(sum(m.role == "assistant" for m in provider.requests[-1].messages), 20)

    def test_tool_error_costs_one_step_and_the_run_goes_on(self):
        provider = Counting(ScriptedProvider([
            {"call": [("read_file", {"path": "missing.txt"})]},
            {"call": [("no_such_tool", {})]},
            {"say": "gave up politely"}]))
        outcome = self.go(provider)
        self.assertEqual(outcome.stop, "answered")
        self.assertEqual((outcome.steps, outcome.tool_calls), (3, 2))
        tools = [m for m in outcome.messages if m.role == "tool"]
        self.assertEqual(len(tools), 2)
        for message in tools:
            self.assertTrue(message.is_error)
            self.assertTrue(message.content.startswith("Error:"), message.content)
        self.assertIn("the tools are:", tools[1].content)
        results = [e for e in self.events() if e["event"] == "tool_result"]
        self.assertEqual([r["error"] for r in results], [True, True])

    def test_secret_in_a_file_never_reaches_the_model_or_trace(self):
        provider = Counting(ScriptedProvider([
            {"call": [("read_file", {"path": "hello.txt"})]}, {"say": "ok"}]))
        self.go(provider)
        shown = provider.requests[1].messages[-1].content
        self.assertIn("key=[redacted]", shown)
        self.assertNotIn(SECRET, shown)
        with open(self.trace_path, encoding="utf-8") as fh:
            self.assertNotIn(SECRET, fh.read())

    def test_odd_text_from_the_model_does_not_crash_the_run(self):
        outcome = self.go(ScriptedProvider([{"say": "done \ud800"}]))
        self.assertEqual(outcome.stop, "answered")


class TraceEventsTest(LoopCase):
    def test_events_in_order_with_time(self):
        provider = ScriptedProvider([
            {"say": "look", "call": [("list_files", {"path": "."})]},
            {"say": "done"}])
        self.go(provider, Budget(steps=10, wall=60))
        events = self.events()
        self.assertEqual([e["event"] for e in events],
                         ["run_start", "request", "response", "tool_call", "tool_result",
                          "request", "response", "run_end"])
        for event in events:
            self.assertIsInstance(event["time"], str)
            self.assertRegex(event["time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")
        start, call, result, end = events[0], events[3], events[4], events[-1]
        self.assertEqual(start["model"], "test-model")
        self.assertEqual(start["budget"]["steps"], 10)
        self.assertIn("run_tests", start["tools"])
        self.assertEqual(call["name"], "list_files")
        self.assertEqual(call["arguments"], {"path": "."})
        self.assertEqual(result["content"], "hello.txt")
        self.assertEqual(result["id"], call["id"])
        self.assertFalse(result["error"])
        self.assertEqual(end["stop"], "answered")
        self.assertEqual(end["steps"], 2)
        self.assertEqual(end["tool_calls"], 1)
        self.assertEqual(end["claimed"], "done")

    def test_each_event_is_on_disk_at_once(self):
        trace = Trace(os.path.join(self.root, "..", "live.jsonl"))
        self.addCleanup(trace.close)
        trace.emit("note", message="first")
        with open(trace.path, encoding="utf-8") as fh:
            self.assertEqual(json.loads(fh.read())["message"], "first")


class TraceTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.path = os.path.join(tmp.name, "t.jsonl")

    def lines(self) -> list[dict]:
        with open(self.path, encoding="utf-8") as fh:
            return [json.loads(line) for line in fh]

    def test_odd_values_do_not_raise(self):
        class Thing:
            def __repr__(self):
                return "<thing>"

        with Trace(self.path) as trace:
            trace.emit("note", tags={"only"}, obj=Thing(), raw=b"\x00\xff",
                       nested={"x": [Thing(), 1.5, None]})
        (record,) = self.lines()
        self.assertEqual(record["event"], "note")
        self.assertEqual(record["tags"], "{'only'}")
        self.assertEqual(record["obj"], "<thing>")
        self.assertEqual(record["raw"], repr(b"\x00\xff"))
        self.assertEqual(record["nested"], {"x": ["<thing>", 1.5, None]})

    def test_odd_dict_keys_do_not_raise(self):
        with Trace(self.path) as trace:
            trace.emit("note", counts={("a", "b"): 1})
        self.assertEqual(len(self.lines()), 1)

    def test_lone_surrogate_does_not_raise(self):
        with Trace(self.path) as trace:
            trace.emit("response", content="bad \ud800 text")
        self.assertEqual(len(self.lines()), 1)

    def test_secrets_redacted_in_file_and_console(self):
        console = io.StringIO()
        with Trace(self.path, console=console, secrets=[SECRET, "", "short"]) as trace:
            trace.emit("tool_call", step=1, name="run_command",
                       arguments={"argv": ["curl", "-H", f"Authorization: {SECRET}"]})
            trace.emit("run_end", stop="provider_error", steps=1, tool_calls=0,
                       tokens_total=0, elapsed_s=0.1, error=f"401 for key {SECRET}")
            trace.emit("note", message="short is not a secret")
        with open(self.path, encoding="utf-8") as fh:
            text = fh.read()
        self.assertNotIn(SECRET, text)
        self.assertIn("Authorization: [redacted]", text)
        self.assertIn("short is not a secret", text)
        self.assertNotIn(SECRET, console.getvalue())
        self.assertIn("[redacted]", console.getvalue())
        self.assertIn("run_command", console.getvalue())

    def test_closed_console_does_not_raise(self):
        console = io.StringIO()
        console.close()
        with Trace(self.path, console=console) as trace:
            trace.emit("note", message="still recorded")
        self.assertEqual(self.lines()[0]["message"], "still recorded")


class ParseDurationTest(unittest.TestCase):
    def test_forms(self):
        cases = {"90s": 90.0, "10m": 600.0, "1h30m": 5400.0, "250ms": 0.25, "0": 0.0,
                 "45": 45.0, "1.5h": 5400.0, "2m30s": 150.0, " 5s ": 5.0, "1h0m10s": 3610.0}
        for text, seconds in cases.items():
            with self.subTest(text=text):
                self.assertAlmostEqual(parse_duration(text), seconds)

    def test_bad_input(self):
        for text in ("", "abc", "10x", "5s5", "-5", "1h 30m", "m", "10 m", "s10"):
            with self.subTest(text=text):
                with self.assertRaises(UsageError):
                    parse_duration(text)

    def test_non_finite_is_bad_input(self):
        for text in ("nan", "inf", "1e400"):
            with self.subTest(text=text):
                with self.assertRaises(UsageError):
                    parse_duration(text)


class BudgetTest(unittest.TestCase):
    def test_zero_means_no_limit(self):
        budget = Budget()
        self.assertIsNone(budget.deadline)
        self.assertIsNone(budget.check(10_000, Usage(10**9, 10**9, 0, 10**6)))

    def test_each_limit_names_itself(self):
        self.assertEqual(Budget(steps=2).check(2, Usage()), "steps")
        self.assertIsNone(Budget(steps=2).check(1, Usage()))
        self.assertEqual(Budget(tokens=10).check(0, Usage(5, 5)), "tokens")
        self.assertEqual(Budget(cost=0.5).check(0, Usage(cost=0.5)), "cost")
        past = Budget(wall=0.5, started=time.monotonic() - 1)
        self.assertEqual(past.check(0, Usage()), "wall")
        self.assertAlmostEqual(past.deadline, past.started + 0.5)


if __name__ == "__main__":
    unittest.main()
