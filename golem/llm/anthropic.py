"""Anthropic's native Messages API: `POST {base}/v1/messages`.

The system prompt and the tool list go first in every request, byte-identical, each ending in a
`cache_control` breakpoint, so the prompt cache holds that stable prefix. Thinking blocks come
back on later requests complete and unmodified, as the API requires.
"""

from __future__ import annotations

import secrets
from typing import Any

from golem.core.errors import ProviderError
from golem.llm.base import KEYS, ProviderConfig
from golem.llm.http import error_detail, post_json
from golem.llm.preflight import Probe
from golem.llm.types import Message, Request, Response, ToolCall, Usage, count

__all__ = ["Anthropic", "BLOCKS"]

DEFAULT_BASE = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 8192       # the API has no default: max_tokens is required
MAX_CONTINUATIONS = 5           # pause_turn re-requests for one reply at most
BLOCKS = "anthropic_blocks"     # Message.extra key: thinking blocks to send back unchanged
_KEPT = frozenset({"thinking", "redacted_thinking"})
_CACHE = {"type": "ephemeral"}
_CUT_OFF = frozenset({"max_tokens", "model_context_window_exceeded"})
_PLACEHOLDER = "(no content)"   # the API rejects empty messages and empty text blocks


class Anthropic:
    """A provider for the Anthropic Messages API."""

    name = "anthropic"

    def __init__(self, config: ProviderConfig):
        self._config = config
        self.base_url = (config.base_url or DEFAULT_BASE).rstrip("/")
        self._url = self.base_url + "/v1/messages"

    def __repr__(self) -> str:
        return f"Anthropic(base_url={self.base_url!r}, model={self._config.model!r})"

    def complete(self, request: Request) -> Response:
        """Send the conversation and return the model's next message in golem's terms.

        A reply that stops with `pause_turn` is sent back as it is so the model carries on;
        the pieces are merged into one message (at most MAX_CONTINUATIONS re-requests).
        """
        body = self._body(request)
        blocks: list[dict[str, Any]] = []
        usage = Usage()
        for _ in range(MAX_CONTINUATIONS + 1):
            content, stop, part = self._read(self._post(body, request))
            blocks.extend(content)
            usage += part
            if stop != "pause_turn":
                return _response(blocks, stop, usage)
            body = {**body, "messages": [*body["messages"],
                                         {"role": "assistant", "content": list(blocks)}]}
        raise ProviderError(f"anthropic: the model paused its turn {MAX_CONTINUATIONS + 1} "
                            "times in a row (stop_reason pause_turn); giving up on this reply")

    def _post(self, body: dict[str, Any], request: Request) -> Any:
        config = self._config
        _, _, data = post_json(
            self._url, body, self._headers(), timeout=config.timeout,
            deadline=request.deadline, max_bytes=config.max_response_bytes,
            max_attempts=config.max_attempts, retry_base=config.retry_base,
            retry_cap=config.retry_cap, retry_after_cap=config.retry_after_cap,
            on_retry=config.on_retry, label=self.name, key_name=KEYS[self.name][0],
            transport=config.transport)
        return data

    def probe(self) -> Probe:
        """The preflight: the models list, which needs the key and costs nothing."""
        headers = {k: v for k, v in self._headers().items() if k != "content-type"}
        return Probe(self.base_url + "/v1/models", headers, "api.anthropic.com",
                     KEYS[self.name][0], bool(self._config.api_key))

    def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": "application/json",
                   "anthropic-version": API_VERSION}
        if self._config.api_key:
            headers["x-api-key"] = str(self._config.api_key)
        return headers

    def _body(self, request: Request) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": request.model or self._config.model,
            "max_tokens": request.max_tokens or self._config.max_tokens or DEFAULT_MAX_TOKENS,
        }
        system = "\n\n".join(m.content for m in request.messages
                             if m.role == "system" and m.content)
        if system:
            body["system"] = [{"type": "text", "text": system, "cache_control": _CACHE}]
        if request.tools:
            tools = [{"name": t.name, "description": t.description,
                      "input_schema": t.parameters} for t in request.tools]
            tools[-1]["cache_control"] = _CACHE  # the breakpoint closes the stable prefix
            body["tools"] = tools
        body["messages"] = wire_messages(request.messages)
        return body

    def _read(self, data: Any) -> tuple[list[dict[str, Any]], str | None, Usage]:
        """The content blocks, stop_reason and usage of one reply, or ProviderError."""
        if not isinstance(data, dict):
            raise ProviderError(f"anthropic: reply was not a JSON object but "
                                f"{type(data).__name__}")
        if data.get("type") == "error" or data.get("error"):
            secrets = [str(self._config.api_key)] if self._config.api_key else []
            raise ProviderError(f"anthropic: {error_detail(data, secrets)}")
        content = data.get("content")
        if not isinstance(content, list):
            raise ProviderError("anthropic: reply had no content list")
        stop = data.get("stop_reason")
        return ([b for b in content if isinstance(b, dict)],
                stop if isinstance(stop, str) else None, _usage(data.get("usage")))


def wire_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """golem's conversation as Messages API turns (system messages are left out).

    Tool results join the user turn that follows the assistant's tool calls, first and in
    order; neighbouring messages of one role are merged, since the API wants turns to alternate.
    """
    wire: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": list(blocks)})

    for message in messages:
        if message.role == "system":
            continue
        if message.role == "tool":
            add("user", [{"type": "tool_result", "tool_use_id": message.tool_call_id or "",
                          "content": message.content, "is_error": bool(message.is_error)}])
        elif message.role == "assistant":
            add("assistant", _assistant_blocks(message))
        else:
            add("user", [{"type": "text", "text": message.content}] if message.content else [])
    for turn in wire:
        if not turn["content"]:
            turn["content"] = [{"type": "text", "text": _PLACEHOLDER}]
    return wire


def _assistant_blocks(message: Message) -> list[dict[str, Any]]:
    kept = message.extra.get(BLOCKS)
    blocks = [b for b in kept if isinstance(b, dict)] if isinstance(kept, list) else []
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name,
                       "input": call.arguments})
    return blocks


def _response(blocks: list[dict[str, Any]], stop: str | None, usage: Usage) -> Response:
    """One Response from the content blocks of a (possibly continued) reply."""
    text = "".join(b["text"] for b in blocks
                   if b.get("type") == "text" and isinstance(b.get("text"), str))
    calls = [_tool_call(b) for b in blocks if b.get("type") == "tool_use"]
    message = Message("assistant", text, tool_calls=calls)
    kept = [b for b in blocks if b.get("type") in _KEPT]
    if kept:
        message.extra[BLOCKS] = kept
    if stop in _CUT_OFF:
        # Checked before tool use: the last tool_use block of a cut-off reply may be partial.
        finish = "length"
    elif calls:
        finish = "tool_calls"
    elif stop in (None, "end_turn", "stop_sequence", "tool_use"):
        finish = "stop"
    else:
        finish = stop   # refusal, or a word this module does not know yet
    return Response(message, finish, usage, raw_finish=stop)


def _tool_call(block: dict[str, Any]) -> ToolCall:
    call_id = block.get("id")
    if not isinstance(call_id, str) or not call_id.strip():
        call_id = "toolu_" + secrets.token_hex(12)  # the API accepts [A-Za-z0-9_-] ids
    name = str(block.get("name") or "")
    raw = block.get("input")
    if isinstance(raw, dict):
        return ToolCall(call_id, name, raw)
    if raw is None:
        return ToolCall(call_id, name, {})
    return ToolCall(call_id, name, {},
                    error=f"input was not a JSON object: got {type(raw).__name__}")


def _usage(raw: Any) -> Usage:
    """Usage from the wire, every count clamped (types.count)."""
    if not isinstance(raw, dict):
        return Usage()
    fresh = count(raw.get("input_tokens"))
    read = count(raw.get("cache_read_input_tokens"))
    written = count(raw.get("cache_creation_input_tokens"))
    # Anthropic reports cached input apart from input_tokens; golem's prompt is all of it.
    return Usage(prompt=fresh + read + written, completion=count(raw.get("output_tokens")),
                 cached=read, cost=None, written=written)
