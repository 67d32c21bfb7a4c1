"""golem's own conversation types. Wire formats never leave the provider modules."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

# Bounds on what one reply may report. Servers have sent 400-digit counts, negative costs and
# Infinity; none of it may crash golem, switch a budget off or reach the -json output.
MAX_TOKENS = 10 ** 9            # tokens in one reply's count
MAX_COST = 1_000_000.0          # dollars for one reply


def count(value: Any) -> int:
    """A token count from the wire: an int from 0 to MAX_TOKENS (0 for anything that is not
    a number, is negative, or is not finite)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    if isinstance(value, float):
        if not math.isfinite(value):
            return MAX_TOKENS if value > 0 else 0
        value = int(value)
    return min(max(value, 0), MAX_TOKENS)


def dollars(value: Any) -> float | None:
    """A cost from the wire: a float from 0 to MAX_COST, or None when it is not a number.

    A negative cost counts as 0 (it must not hand budget back); one too large to be true,
    infinite included, as MAX_COST (the -cost budget then stops the run rather than
    overspend); NaN as not reported.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, int):      # compared as an int: a 400-digit one overflows float()
        return float(min(max(value, 0), int(MAX_COST)))
    if math.isnan(value):
        return None
    return min(max(value, 0.0), MAX_COST)


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the model sees it: a name, what it does, and a JSON Schema for its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass
class ToolCall:
    """One tool call requested by the model.

    `arguments` is always a dict. When the provider sent arguments that are not a JSON object,
    `arguments` is empty and `error` says why, so the tool is not run and the model is told.
    """

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


@dataclass
class Message:
    """One message of the conversation.

    role is `system`, `user`, `assistant` or `tool`. An assistant message may carry tool calls;
    a tool message answers one call (`tool_call_id`). `extra` holds provider data that must be
    sent back unchanged on later requests (reasoning details, thinking blocks), keyed by the
    provider that produced it.
    """

    role: str
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Usage:
    """Tokens and dollars for one or more model calls. `cost` is None when nobody reported it;
    `cached` and `written` are the prompt tokens read from and written to the prompt cache."""

    prompt: int = 0
    completion: int = 0
    cached: int = 0
    cost: float | None = None
    written: int = 0

    @property
    def total(self) -> int:
        return self.prompt + self.completion

    def to_json(self) -> dict[str, int]:
        """The token counts as the `-json` result reports them."""
        return {"prompt": self.prompt, "completion": self.completion, "cached": self.cached,
                "total": self.total}

    def __add__(self, other: Usage) -> Usage:
        if self.cost is None and other.cost is None:
            cost = None
        else:
            cost = (self.cost or 0.0) + (other.cost or 0.0)
        return Usage(self.prompt + other.prompt, self.completion + other.completion,
                     self.cached + other.cached, cost, self.written + other.written)


@dataclass
class Request:
    """Everything a provider needs for one completion.

    `deadline` is a `time.monotonic()` instant (or None): no HTTP call, retry wait or read may
    run past it; a provider raises `OutOfTime` instead.
    """

    model: str
    messages: list[Message]
    tools: list[ToolSpec]
    max_tokens: int | None = None
    deadline: float | None = None

    def remaining(self) -> float | None:
        """Seconds left before the deadline, or None when there is none."""
        if self.deadline is None:
            return None
        return self.deadline - time.monotonic()


@dataclass
class Response:
    """A provider's reply in golem's terms.

    `finish` is normalised: `tool_calls` when the message carries tool calls (whatever the
    provider said), `stop` for a plain answer, `length` for a reply cut off by a token limit,
    `refusal`, or the provider's own word for anything else.
    """

    message: Message
    finish: str
    usage: Usage = field(default_factory=Usage)
    raw_finish: str | None = None

    @property
    def cut_off(self) -> bool:
        return self.finish == "length"
