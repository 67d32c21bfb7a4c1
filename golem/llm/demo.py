"""The offline demo provider: a scripted model that needs no key and no network.

`ScriptedProvider` replays a fixed list of turns, chosen by how many assistant turns the
conversation already holds, so it answers the same way however the tools behave. It proves
the machinery (the loop, the tools, the sandbox, the verifier), not a model's intelligence.
`DemoProvider` is the script that fixes the bundled broken calculator (`golem demo`,
golem/examples/broken-calculator), or, offered only the reading tools (`golem ask`), the one
that answers a question about `examples/notes`.
"""

from __future__ import annotations

import os
from importlib import resources
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

# `golem ask` on examples/notes: read-only, so it is chosen when write_file is not offered.
NOTES_ASK: list[Turn] = [
    {"say": "Searching the files for rate limiting.",
     "call": [("search_files", {"pattern": "rate"})]},
    {"say": "The changelog and the defaults both mention it; reading them.",
     "call": [("read_file", {"path": "CHANGELOG.md"}),
              ("read_file", {"path": "config/defaults.toml"})]},
    {"say": "Rate limiting was added in release 1.4.0 (CHANGELOG.md, line 10). The default is "
            "60 requests per minute per client: `rate_limit = 60` in config/defaults.toml "
            "(line 8), where 0 turns rate limiting off."},
]


EXAMPLE = "broken-calculator"


def copy_example(target: str) -> str:
    """Copy the bundled broken calculator into `target` (a new directory) and return it.
    Read through importlib.resources, so it works from an installed copy and from the .pyz."""
    source = resources.files("golem").joinpath("examples", EXAMPLE)
    if not source.is_dir():
        raise FileNotFoundError(f"the bundled example {EXAMPLE} is missing from this golem")
    os.mkdir(target, 0o755)
    pending = [(source, target)]
    while pending:
        folder, into = pending.pop()
        for item in sorted(folder.iterdir(), key=lambda i: i.name):
            if item.name == "__pycache__" or item.name.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(into, item.name)
            if item.is_dir():
                os.mkdir(path, 0o755)
                pending.append((item, path))
            else:
                with open(path, "xb") as handle:
                    handle.write(item.read_bytes())
    return target


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


# `golem fix -provider demo -attempts 3`: three attempts that go three ways.
WEAKEN_TEST: list[Turn] = [
    {"say": "Reproducing the failure first.", "call": [("run_tests", {})]},
    {"say": "The expectations look wrong to me; changing them to what the code returns.",
     "call": [("edit_file", {"path": "tests/test_core.py",
                             "old_string": "self.assertEqual(mean([1, 2, 3]), 2)",
                             "new_string": "self.assertEqual(mean([1, 2, 3]), 3)"})]},
    {"say": "Fixed: the suite passes."},
]
HALF_FIX: list[Turn] = [
    {"say": "Reading the implementation.", "call": [("read_file",
                                                     {"path": "calculator/core.py"})]},
    CALCULATOR_FIX[3],
    {"say": "Fixed mean in calculator/core.py."},
]
ATTEMPT_SCRIPTS = (WEAKEN_TEST, HALF_FIX, CALCULATOR_FIX)


class DemoProvider(ScriptedProvider):
    """`-provider demo`: fixes the bundled broken-calculator example. As attempt K of
    several, it plays ATTEMPT_SCRIPTS[K - 1] (round robin): one attempt rewrites the test,
    one fixes half, one fixes the bug."""

    def __init__(self, config: Any = None):
        super().__init__(CALCULATOR_FIX, name="demo")
        self.attempt = getattr(config, "attempt", 0) or 0

    def complete(self, request: Request) -> Response:
        """The fix script when the model may write, else the read-only `ask` script."""
        writes = any(spec.name == "write_file" for spec in request.tools)
        script = CALCULATOR_FIX if writes else NOTES_ASK
        if writes and self.attempt:
            script = ATTEMPT_SCRIPTS[(self.attempt - 1) % len(ATTEMPT_SCRIPTS)]
        return ScriptedProvider(script, self.name).complete(request)
