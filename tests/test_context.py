import unittest

from golem.agent.context import mask, masked_count
from golem.llm.types import Message, ToolCall


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

    def test_requests_extend_the_previous_one_except_at_batch_boundaries(self):
        changes = 0
        previous = render(mask(conversation(1), 10))
        for n in range(2, 61):
            current = render(mask(conversation(n), 10))
            if current[:len(previous)] != previous:
                changes += 1
            previous = current
        self.assertEqual(changes, 5)   # at 20, 30, 40, 50 and 60 results


if __name__ == "__main__":
    unittest.main()
