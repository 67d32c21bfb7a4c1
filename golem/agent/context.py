"""Keeping the conversation lean: observation masking.

Tool results older than the newest `window` are replaced by a one-line placeholder (tool,
arguments, size); the model's own messages stay whole. Masking moves in batches of `window`
results, so the visible window grows from `window` to `2 * window - 1` and then drops back:
between batches every request extends the previous one byte for byte, and providers' prompt
caches keep hitting.
"""

from __future__ import annotations

import json
from dataclasses import replace

from golem.llm.types import Message


def placeholder(name: str, arguments: dict, size: int) -> str:
    args = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
    if len(args) > 200:
        args = args[:197] + "..."
    return (f"[older {name} result hidden to save context: {name} {args} returned "
            f"{size} characters; call it again if you need it]")


def masked_count(results: int, window: int) -> int:
    """How many of the oldest tool results are hidden when there are `results` in all."""
    if window <= 0 or results < 2 * window:
        return 0
    return ((results - window) // window) * window


def mask(messages: list[Message], window: int) -> list[Message]:
    """The messages to send: old tool results replaced by placeholders (a new list)."""
    tool_indexes = [i for i, m in enumerate(messages) if m.role == "tool"]
    hide = set(tool_indexes[:masked_count(len(tool_indexes), window)])
    if not hide:
        return messages
    calls = {c.id: c for m in messages if m.role == "assistant" for c in m.tool_calls}
    out = []
    for i, message in enumerate(messages):
        if i in hide:
            call = calls.get(message.tool_call_id or "")
            text = placeholder(message.name or "tool", call.arguments if call else {},
                               len(message.content))
            message = replace(message, content=text)
        out.append(message)
    return out
