"""The offline demo provider: a scripted model that needs no key and no network.

`ScriptedProvider` replays a fixed list of turns, chosen by how many assistant turns the
conversation already holds, so it answers the same way however the tools behave. It proves
the machinery (the loop, the tools, the sandbox, the verifier), not a model's intelligence.
`DemoProvider` is the script that fixes `examples/broken-calculator`.
"""

from __future__ import annotations

from typing import Any

from golem.llm.types import Message, Request, Response, ToolCall, Usage

Turn = dict[str, Any]   # {"say": text} or {"call": [(tool, arguments), ...], "say": optional}

CALCULATOR_FIX: list[Turn] = [
    {"say": "Let me look at the project layout.", "call": [("list_files", {"path": "."})]},
    {"say": "Reproducing the failure first.", "call": [("run_tests", {})]},
    {"say": "mean and power fail; reading the implementation.",
     "call": [("read_file", {"path": "calculator/core.py"})]},
    {"say": "mean divides by len - 1; it should divide by the number of values.",
     "call": [("edit_file", {"path": "calculator/core.py",
                             "old_string": "return sum(values) / (len(values) - 1)",
                             "new_string": "return sum(values) / len(values)"})]},
    {"say": "power runs its loop one time too few; the exponent is the number of factors.",
     "call": [("edit_file", {"path": "calculator/core.py",
                             "old_string": "for _ in range(exponent - 1):",
                             "new_string": "for _ in range(exponent):"})]},
    {"say": "Re-running the whole suite.", "call": [("run_tests", {})]},
    {"say": "Fixed two defects in calculator/core.py: mean divided by len(values) - 1 instead "
            "of len(values), and power multiplied exponent - 1 times instead of exponent "
            "times. The whole suite passes."},
]


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


class ScriptedProvider:
    """Replays `turns` in order; after the last one it keeps giving the last answer."""

    def __init__(self, turns: list[Turn], name: str = "scripted"):
        self.name = name
        self.turns = turns

    def complete(self, request: Request) -> Response:
        done = sum(1 for m in request.messages if m.role == "assistant")
        turn = self.turns[min(done, len(self.turns) - 1)]
        calls = [ToolCall(f"call_{done}_{i}", name, dict(args))
                 for i, (name, args) in enumerate(turn.get("call", []))]
        message = Message("assistant", turn.get("say", ""), tool_calls=calls)
        prompt = sum(_estimate_tokens(m.content) for m in request.messages)
        usage = Usage(prompt=prompt, completion=_estimate_tokens(message.content) + 10 * len(calls),
                      cost=0.0)
        return Response(message, "tool_calls" if calls else "stop", usage, raw_finish="scripted")


class DemoProvider(ScriptedProvider):
    """`-provider demo`: fixes the bundled broken-calculator example."""

    def __init__(self, config: Any = None):
        super().__init__(CALCULATOR_FIX, name="demo")
