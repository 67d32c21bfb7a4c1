import json
import os
import tempfile
import unittest

from golem.agent import Budget, run
from golem.agent.context import TARGET, ContextFull, Lean, estimate_tokens, mask, masked_count
from golem.llm import ProviderConfig
from golem.llm.openai import OpenAICompatible
from golem.llm.types import Message, ToolCall
from golem.tools import Context, default_registry
from golem.tools.workspace import Workspace
from golem.trace import Trace
from tests.provider_server import ProviderServer, chat


def conversation(results: int) -> list[Message]:
    messages = [Message("system", "sys"), Message("user", "task")]
    for i in range(results):
        call = ToolCall(f"c{i}", "read_file", {"path": f"f{i}.py"})
        messages.append(Message("assistant", f"thinking {i}", tool_calls=[call]))
        messages.append(Message("tool", f"content of f{i} " + "x" * 100, tool_call_id=f"c{i}",
                                name="read_file"))
    return messages


def render(messages: list[Message]) -> list[str]:
    return [f"{m.role}:{m.content}" for m in messages]


class MaskTest(unittest.TestCase):
    def test_window_grows_then_drops_back(self):
        visible = [n - masked_count(n, 10) for n in range(1, 45)]
        self.assertEqual(visible[:19], list(range(1, 20)))    # nothing hidden below 20
        self.assertEqual(visible[19], 10)                    # at 20 results: back to 10
        self.assertEqual(max(visible), 19)
        self.assertEqual(min(visible[19:]), 10)

    def test_zero_window_keeps_everything(self):
        messages = conversation(50)
        self.assertIs(mask(messages, 0), messages)

    def test_old_results_become_placeholders_naming_tool_arguments_and_size(self):
        messages = conversation(25)
        sent = mask(messages, 10)
        tools = [m for m in sent if m.role == "tool"]
        hidden = [m for m in tools if m.content.startswith("[older")]
        self.assertEqual(len(hidden), 10)
        self.assertIn("read_file", hidden[0].content)
        self.assertIn('"path":"f0.py"', hidden[0].content)
        self.assertIn(str(len(messages[3].content)), hidden[0].content)
        self.assertTrue(tools[-1].content.startswith("content of f24"))
        self.assertEqual(hidden[0].tool_call_id, "c0")   # still answers its call

    def test_model_messages_are_never_changed(self):
        messages = conversation(40)
        sent = mask(messages, 10)
        for before, after in zip(messages, sent):
            if before.role != "tool":
                self.assertIs(before, after)
        self.assertTrue(all(not m.content.startswith("[older") for m in messages))

    def test_placeholders_name_their_own_call_when_ids_repeat(self):
        messages = [Message("system", "sys"), Message("user", "task")]
        for i in range(20):
            call = ToolCall("0", "read_file", {"path": f"f{i}.py"})
            messages.append(Message("assistant", "", tool_calls=[call]))
            messages.append(Message("tool", "x" * 50, tool_call_id="0", name="read_file"))
        hidden = [m.content for m in mask(messages, 10) if m.content.startswith("[older")]
        self.assertEqual(len(hidden), 10)
        for i, text in enumerate(hidden):
            self.assertIn(f'"path":"f{i}.py"', text)

    def test_requests_extend_the_previous_one_except_at_batch_boundaries(self):
        changes = 0
        previous = render(mask(conversation(1), 10))
        for n in range(2, 61):
            current = render(mask(conversation(n), 10))
            if current[:len(previous)] != previous:
                changes += 1
            previous = current
        self.assertEqual(changes, 5)   # at 20, 30, 40, 50 and 60 results



# -- trimming to the context limit -------------------------------------------------------------


def big_conversation(results: int, size: int = 4000, say: int = 10) -> list[Message]:
    messages = [Message("system", "sys"), Message("user", "task")]
    for i in range(results):
        call = ToolCall(f"c{i}", "read_file", {"path": f"f{i}.py"})
        messages.append(Message("assistant", "s" * say, tool_calls=[call]))
        messages.append(Message("tool", f"r{i} " + "x" * size, tool_call_id=f"c{i}",
                                name="read_file"))
    return messages


def answered(sent: list[Message]) -> bool:
    """Every tool message answers a call made earlier in the same request."""
    calls = set()
    for message in sent:
        calls.update(c.id for c in message.tool_calls)
        if message.role == "tool" and message.tool_call_id not in calls:
            return False
    return True


class LeanTest(unittest.TestCase):
    def test_below_the_limit_it_is_plain_masking(self):
        messages = big_conversation(25)
        lean = Lean(window=10, limit=200_000)
        sent, trim = lean.view(messages)
        self.assertIsNone(trim)
        self.assertEqual(render(sent), render(mask(messages, 10)))

    def test_near_the_limit_the_oldest_results_go_first_in_one_batch(self):
        lean = Lean(window=0, limit=20_000, reserve=2_000)   # room: 18,000 tokens
        messages = big_conversation(15)                      # about 15,000 tokens
        sent, trim = lean.view(messages)
        self.assertIsNone(trim)
        messages = big_conversation(18)                      # about 18,000: past 90 %
        sent, trim = lean.view(messages)
        self.assertIsNotNone(trim)
        self.assertLessEqual(trim["tokens_after"], TARGET * 18_000)
        self.assertEqual(trim["tokens_after"], estimate_tokens(sent))
        self.assertEqual(trim["dropped"], 0)
        tools = [m for m in sent if m.role == "tool"]
        hidden = [m for m in tools if m.content.startswith("[older")]
        self.assertEqual(tools[:len(hidden)], hidden)            # oldest first
        self.assertTrue(tools[-1].content.startswith("r17 "))    # the newest is whole
        self.assertTrue(answered(sent))

    def test_after_a_trim_requests_append_until_the_next_one(self):
        lean = Lean(window=0, limit=20_000, reserve=2_000)
        previous, trims = None, 0
        for n in range(1, 60):
            sent, trim = lean.view(big_conversation(n))
            trims += trim is not None
            if previous is not None and trim is None:
                self.assertEqual(render(sent)[:len(previous)], render(previous))
            self.assertLessEqual(estimate_tokens(sent), 18_000)
            previous = sent
        self.assertGreater(trims, 0)
        self.assertLess(trims, 20)          # batches, not a change on every request

    def test_whole_turns_go_when_hiding_results_is_not_enough(self):
        # the model's own long messages cannot be hidden, only left out
        messages = big_conversation(30, size=100, say=4000)
        lean = Lean(window=10, limit=20_000, reserve=2_000)
        sent, trim = lean.view(messages)
        self.assertGreater(trim["dropped"], 0)
        self.assertLessEqual(estimate_tokens(sent), 18_000)
        self.assertEqual([m.role for m in sent[:3]], ["system", "user", "user"])
        self.assertIn(f"{trim['dropped']} earlier step(s) were left out", sent[2].content)
        self.assertEqual(sent[-1].tool_call_id, "c29")
        self.assertTrue(answered(sent))

    def test_a_conversation_that_cannot_fit_is_never_sent(self):
        messages = big_conversation(2, size=10, say=100_000)
        with self.assertRaises(ContextFull) as caught:
            Lean(window=10, limit=10_000).view(messages)
        self.assertIn("raise -context", str(caught.exception))


class LoopbackCase(unittest.TestCase):
    """A real workspace, the real OpenAI-compatible provider and a loopback server."""

    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.root = os.path.join(os.path.realpath(tmp.name), "ws")
        os.mkdir(self.root)
        for i in range(30):
            with open(os.path.join(self.root, f"m{i}.py"), "w") as handle:
                handle.write("".join(f"value_{i}_{j} = {j}\n" for j in range(200)))
        self.registry = default_registry(Context(Workspace(self.root)))
        self.trace_path = os.path.join(os.path.realpath(tmp.name), "trace.jsonl")

    def go(self, replies, *, name="openai", model="test-model", window=10, context=0):
        with ProviderServer(replies) as server, Trace(self.trace_path) as trace:
            config = ProviderConfig(name=name, model=model, base_url=server.url)
            provider = OpenAICompatible(config, default_base=server.url, name=name)
            outcome = run(provider, self.registry, model=model, system="be brief",
                          task="read", budget=Budget(), trace=trace, window=window,
                          context=context)
        with open(self.trace_path, encoding="utf-8") as handle:
            events = [json.loads(line) for line in handle]
        return outcome, [r["body"] for r in server.requests], events


def reads(steps: int) -> list[dict]:
    return [chat(tool_calls=[("read_file", {"path": f"m{i % 30}.py"})])
            for i in range(steps)] + [chat("done")]


class AppendOnlyTest(LoopbackCase):
    def test_requests_keep_their_prefix_byte_for_byte(self):
        # the scripted server reuses one call id every turn, as some local servers do
        outcome, bodies, _ = self.go(reads(25))
        self.assertEqual(outcome.stop, "answered")
        self.assertEqual(len(bodies), 26)
        first = bodies[0]
        changed = []
        for step, (before, after) in enumerate(zip(bodies, bodies[1:]), 2):
            self.assertEqual(json.dumps(after["messages"][0]), json.dumps(first["messages"][0]))
            self.assertEqual(json.dumps(after["tools"]), json.dumps(first["tools"]))
            prefix = json.dumps(after["messages"][:len(before["messages"])])
            if prefix != json.dumps(before["messages"]):
                changed.append(step)
        self.assertEqual(changed, [21])     # the one masking batch: 20 results, 10 hidden

    def test_trimming_keeps_every_request_under_the_limit_and_is_traced(self):
        outcome, bodies, events = self.go(reads(25), window=0, context=30_000)
        self.assertEqual(outcome.stop, "answered")
        for body in bodies:
            chars = len(json.dumps(body["messages"])) + len(json.dumps(body["tools"]))
            self.assertLess(chars / 4, 30_000 - 8192)
        trims = [e for e in events if e["event"] == "context_trimmed"]
        self.assertTrue(trims)
        self.assertEqual(set(trims[0]), {"event", "time", "step", "tokens_before",
                                         "tokens_after", "limit", "hidden", "dropped"})
        self.assertLess(len(trims), 6)

    def test_a_request_that_cannot_fit_is_not_sent(self):
        outcome, bodies, events = self.go(reads(3), context=500)
        self.assertEqual(outcome.stop, "provider_error")
        self.assertIn("raise -context", outcome.error)
        self.assertEqual((bodies, outcome.steps), ([], 0))
        self.assertEqual(events[-1]["event"], "run_end")

    def test_openrouter_marks_the_system_prompt_for_anthropic_models(self):
        _, bodies, _ = self.go(reads(1), name="openrouter", model="anthropic/claude-sonnet-4.5")
        for body in bodies:
            self.assertEqual(body["messages"][0], {
                "role": "system", "content": [{"type": "text", "text": "be brief",
                                               "cache_control": {"type": "ephemeral"}}]})
        _, bodies, _ = self.go(reads(1), name="openrouter", model="openai/gpt-4.1")
        self.assertEqual(bodies[0]["messages"][0], {"role": "system", "content": "be brief"})
        _, bodies, _ = self.go(reads(1), name="openai", model="anthropic/claude-sonnet-4.5")
        self.assertEqual(bodies[0]["messages"][0], {"role": "system", "content": "be brief"})


if __name__ == "__main__":
    unittest.main()
