"""Keeping the conversation lean: observation masking, and trimming to the context limit.

Tool results older than the newest `window` are replaced by a one-line placeholder (tool,
arguments, size); the model's own messages stay whole. Masking moves in batches of `window`
results, so the visible window grows from `window` to `2 * window - 1` and then drops back:
between batches every request extends the previous one byte for byte, and providers' prompt
caches keep hitting.

When the conversation still nears the model's context limit, `Lean` hides more of the oldest
results, then leaves out the oldest turns whole, in one batch down to well below the limit,
so that the requests after it append again. A conversation that cannot fit is never sent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

from golem.llm.types import Message, ToolCall, ToolSpec

CHARS_PER_TOKEN = 4     # a rough estimate; the trigger below leaves room for its error
TRIGGER = 0.9           # trim once the estimate passes this share of the room
TARGET = 0.7            # and trim down to this share, so later requests append for a while
DEFAULT_RESERVE = 8192  # tokens kept free for the reply when no max_tokens is set
DROPPED_NOTE = ("[{n} earlier step(s) were left out to fit the context window; their tool "
                "results are gone. Call the tools again for anything you still need.]")


def placeholder(name: str, arguments: dict, size: int) -> str:
    """The one line that stands for a hidden tool result: the call and how big it was."""
    args = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
    if len(args) > 200:
        args = args[:197] + "..."
    return (f"[older {name} result hidden to save context: {args} gave {size} characters; "
            "call again if needed]")


def masked_count(results: int, window: int) -> int:
    """How many of the oldest tool results are hidden when there are `results` in all."""
    if window <= 0 or results < 2 * window:
        return 0
    return ((results - window) // window) * window


def mask(messages: list[Message], window: int, at_least: int = 0,
         memo: dict[int, tuple[Message, Message]] | None = None) -> list[Message]:
    """The messages to send: old tool results replaced by placeholders (a new list).

    `at_least` hides that many of the oldest results even when the window would show them;
    `memo` keeps placeholders between calls on a growing conversation.
    """
    tool_indexes = [i for i, m in enumerate(messages) if m.role == "tool"]
    hide = set(tool_indexes[:max(masked_count(len(tool_indexes), window), at_least)])
    if not hide:
        return messages
    memo = {} if memo is None else memo
    calls: dict[str, ToolCall] = {}
    out = []
    for i, message in enumerate(messages):
        if message.tool_calls:
            # the nearest call before a result: some servers reuse ids ("0", "1") every turn
            calls.update((c.id, c) for c in message.tool_calls)
        if i in hide:
            original, hidden = memo.get(i, (None, None))
            if original is not message:
                call = calls.get(message.tool_call_id or "")
                text = placeholder(message.name or "tool", call.arguments if call else {},
                                   len(message.content))
                original, hidden = message, replace(message, content=text)
                memo[i] = (original, hidden)
            message = hidden
        out.append(message)
    return out


def tools_chars(specs: list[ToolSpec]) -> int:
    """The size of the tool list as it goes over the wire, near enough."""
    return len(json.dumps([{"type": "function", "function": {
        "name": s.name, "description": s.description, "parameters": s.parameters}}
        for s in specs]))


def message_chars(message: Message) -> int:
    """The size of one message as it goes over the wire, near enough."""
    size = len(message.content) + 32
    for call in message.tool_calls:
        size += len(call.id) + len(call.name) + 64 + len(
            json.dumps(call.arguments, ensure_ascii=False))
    if message.extra:
        size += len(json.dumps(message.extra, default=str))
    return size


def estimate_tokens(messages: list[Message], tools: int = 0) -> int:
    """Tokens of a request: characters over CHARS_PER_TOKEN, `tools` characters included."""
    return (tools + sum(message_chars(m) for m in messages)) // CHARS_PER_TOKEN


class ContextFull(Exception):
    """Even trimmed, the conversation would not fit the context limit."""


@dataclass
class Lean:
    """What the model is sent of the conversation: masked, and trimmed to `limit` tokens.

    `limit` is the model's context window (0: no limit); `reserve` tokens of it stay free for
    the reply. The trimming only grows (`hidden`, `dropped`), so the prefix of the requests
    that follow stays the same until the next trim.
    """

    window: int = 10
    limit: int = 0
    tools: int = 0              # characters of the tool list
    reserve: int = DEFAULT_RESERVE
    hidden: int = 0             # oldest tool results hidden to fit, beyond the window
    dropped: int = 0            # oldest turns left out whole
    _memo: dict = field(default_factory=dict, repr=False)     # index -> placeholder
    _sizes: dict = field(default_factory=dict, repr=False)    # id -> (message, characters)
    _note: Message | None = field(default=None, repr=False)

    def view(self, messages: list[Message]) -> tuple[list[Message], dict | None]:
        """The messages to send, and what a new trim changed (None when nothing did).

        Raises ContextFull when even the last turn alone does not fit.
        """
        sent = self._build(messages)
        if self.limit <= 0:
            return sent, None
        room = self.limit - min(self.reserve, self.limit // 4)
        size = self._tokens(sent)
        if size <= room * TRIGGER:
            return sent, None
        before, goal = size, room * TARGET
        results = sum(1 for m in messages if m.role == "tool")
        self.hidden = max(self.hidden, masked_count(results, self.window))
        turns = [i for i, m in enumerate(messages) if m.role == "assistant"]
        last = turns[-1] if turns else len(messages)
        older = sum(1 for m in messages[:last] if m.role == "tool")
        # Oldest results first, then whole turns, and the newest results only if nothing else
        # makes it fit: the model has not seen those yet.
        for attr, most, want in (("hidden", older, goal), ("dropped", len(turns) - 1, goal),
                                 ("hidden", results, room)):
            while size > want and getattr(self, attr) < most:
                setattr(self, attr, getattr(self, attr) + 1)
                sent = self._build(messages)
                size = self._tokens(sent)
        if size > room:
            raise ContextFull(f"the conversation needs about {size} tokens even with every "
                              f"older result hidden, more than the context limit of "
                              f"{self.limit} allows; raise -context")
        return sent, {"tokens_before": before, "tokens_after": size, "limit": self.limit,
                      "hidden": self.hidden, "dropped": self.dropped}

    def _tokens(self, sent: list[Message]) -> int:
        """estimate_tokens, remembering each message's size: the conversation only grows."""
        total = self.tools
        for message in sent:
            known = self._sizes.get(id(message))
            if known is None or known[0] is not message:
                known = self._sizes[id(message)] = (message, message_chars(message))
            total += known[1]
        return total // CHARS_PER_TOKEN

    def _build(self, messages: list[Message]) -> list[Message]:
        sent = mask(messages, self.window, self.hidden, self._memo)
        if self.dropped <= 0:
            return sent
        starts = [i for i, m in enumerate(sent) if m.role == "assistant"]
        if not starts:
            return sent
        cut = starts[self.dropped] if self.dropped < len(starts) else len(sent)
        text = DROPPED_NOTE.format(n=self.dropped)
        if self._note is None or self._note.content != text:
            self._note = Message("user", text)
        return sent[:starts[0]] + [self._note] + sent[cut:]
