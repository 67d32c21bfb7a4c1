"""golem's own conversation types. Wire formats never leave the provider modules."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any


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
    """Tokens and dollars for one or more model calls. `cost` is None when nobody reported it."""

    prompt: int = 0
    completion: int = 0
    cached: int = 0
    cost: float | None = None

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
                     self.cached + other.cached, cost)


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
