"""The OpenAI chat-completions wire format, spoken to OpenRouter, OpenAI and compatible servers.

Replies vary a lot between servers (see the field notes on reply shapes), so parsing goes by
what is present rather than by what `finish_reason` claims.
"""

from __future__ import annotations

import json
import os
import secrets
import string
from typing import Any

from golem.core.errors import ProviderError
from golem.llm.base import KEYS, ProviderConfig
from golem.llm.http import RETRY_STATUSES, error_code, error_detail, post_json
from golem.llm.preflight import Probe
from golem.llm.types import Message, Request, Response, ToolCall, Usage, count, dollars

__all__ = ["OpenAICompatible"]

_ATTRIBUTION = {"HTTP-Referer": "https://github.com/golem-agent/golem", "X-Title": "golem"}
_ID_CHARS = string.ascii_letters + string.digits
# Keys of an assistant message that golem builds itself; `extra` never overrides them.
_OWN_KEYS = frozenset({"role", "content", "tool_calls", "tool_call_id", "name"})


class OpenAICompatible:
    """A provider for any server that speaks OpenAI's `/chat/completions`."""

    def __init__(self, config: ProviderConfig, *, default_base: str, name: str):
        self.name = name
        self._config = config
        base = config.base_url
        if not base and name == "openai":
            base = os.environ.get("OPENAI_BASE_URL") or None
        self.base_url = (base or default_base).rstrip("/")
        self._url = self.base_url + "/chat/completions"

    def __repr__(self) -> str:
        return (f"OpenAICompatible(name={self.name!r}, base_url={self.base_url!r}, "
                f"model={self._config.model!r})")

    def complete(self, request: Request) -> Response:
        """Send the conversation and return the model's next message in golem's terms."""
        config = self._config
        key_name = KEYS.get(self.name, (None, False))[0]
        _, _, data = post_json(
            self._url, self._body(request), self._headers(),
            timeout=config.timeout, deadline=request.deadline,
            max_bytes=config.max_response_bytes, max_attempts=config.max_attempts,
            retry_base=config.retry_base, retry_cap=config.retry_cap,
            retry_after_cap=config.retry_after_cap, on_retry=config.on_retry,
            label=self.name, key_name=key_name, transport=config.transport)
        return self._parse(data)

    def probe(self) -> Probe:
        """The preflight: OpenRouter's key endpoint (it needs the key; its models list does
        not), else the models list, which OpenAI and most local servers have."""
        headers = {"Accept": "application/json"}
        if self._config.api_key:
            headers["Authorization"] = f"Bearer {self._config.api_key}"
        path, official = (("/key", "openrouter.ai") if self.name == "openrouter"
                          else ("/models", "api.openai.com"))
        return Probe(self.base_url + path, headers, official,
                     KEYS.get(self.name, ("the API key", False))[0],
                     bool(self._config.api_key))

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._config.api_key:
            headers["Authorization"] = f"Bearer {self._config.api_key}"
        if self.name == "openrouter":
            headers.update(_ATTRIBUTION)
        return headers

    def _body(self, request: Request) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": request.model or self._config.model,
            "messages": [_wire_message(m) for m in request.messages],
        }
        if self.name == "openrouter" and body["model"].startswith("anthropic/"):
            # OpenRouter passes a breakpoint on a content part through to Anthropic's prompt
            # cache; the system prompt is the part that never changes.
            for wire in body["messages"]:
                if wire["role"] == "system" and wire["content"]:
                    wire["content"] = [{"type": "text", "text": wire["content"],
                                        "cache_control": {"type": "ephemeral"}}]
                    break
        if request.tools:
            body["tools"] = [{"type": "function",
                              "function": {"name": t.name, "description": t.description,
                                           "parameters": t.parameters}}
                             for t in request.tools]
        max_tokens = request.max_tokens or self._config.max_tokens
        if max_tokens:
            body["max_tokens"] = max_tokens
        if self.name == "openrouter":
            body["usage"] = {"include": True}  # asks OpenRouter to report the cost
        if self._config.seed is not None:
            body["seed"] = self._config.seed   # attempts sample differently
        return body

    def _parse(self, data: Any) -> Response:
        fail = f"{self.name}: "
        if not isinstance(data, dict):
            raise ProviderError(fail + f"reply was not a JSON object but {type(data).__name__}")
        secrets = [str(self._config.api_key)] if self._config.api_key else []
        if data.get("error"):
            raise _error(fail, data, secrets=secrets)
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise ProviderError(fail + "reply had no choices")
        choice = choices[0]
        raw_finish = choice.get("finish_reason")
        if raw_finish == "error":
            raise _error(fail, data, "generation failed (finish_reason error)", secrets)
        wire = choice.get("message")
        if not isinstance(wire, dict):
            raise ProviderError(fail + "reply had no message")
        message = Message(role="assistant", content=_text(wire.get("content")),
                          tool_calls=_tool_calls(wire.get("tool_calls")))
        details = wire.get("reasoning_details")
        if isinstance(details, list) and details:
            message.extra["reasoning_details"] = details
        thinking = wire.get("reasoning_content")
        if isinstance(thinking, str) and thinking:
            message.extra["reasoning_content"] = thinking
        refusal = wire.get("refusal")   # OpenAI's own field for a refusal
        if message.tool_calls:
            finish = "tool_calls"
        elif raw_finish == "length":
            finish = "length"
        elif raw_finish == "content_filter" or (isinstance(refusal, str) and refusal.strip()):
            finish = "refusal"
            message.content = message.content or (refusal if isinstance(refusal, str) else "")
        else:
            finish = "stop"
        return Response(message=message, finish=finish, usage=_usage(data.get("usage")),
                        raw_finish=raw_finish if isinstance(raw_finish, str) else None)


def _wire_message(message: Message) -> dict[str, Any]:
    """One golem message in the chat-completions shape."""
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id or "",
                "content": message.content}
    if message.role != "assistant":
        return {"role": message.role, "content": message.content}
    wire: dict[str, Any] = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        wire["content"] = message.content or None
        wire["tool_calls"] = [
            {"id": call.id, "type": "function",
             "function": {"name": call.name, "arguments": json.dumps(call.arguments)}}
            for call in message.tool_calls]
    for key, value in message.extra.items():
        if key not in _OWN_KEYS:
            wire[key] = value
    return wire


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
        return "".join(part.get("text") or "" for part in content
                       if isinstance(part, dict) and isinstance(part.get("text"), str))
    return ""


def _tool_calls(raw: Any) -> list[ToolCall]:
    if not isinstance(raw, list):
        return []
    calls = []
    for item in raw:
        if not isinstance(item, dict):
            continue
        function = item.get("function")
        function = function if isinstance(function, dict) else {}
        arguments, error = _arguments(function.get("arguments"))
        call_id = item.get("id")
        if not isinstance(call_id, str) or not call_id.strip():
            call_id = _new_id()
        calls.append(ToolCall(id=call_id, name=str(function.get("name") or ""),
                              arguments=arguments, error=error))
    return calls


def _arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    """The arguments as a dict, or ({}, why) when they are not a JSON object."""
    if raw is None:
        return {}, None
    if isinstance(raw, dict):  # a few servers send the object itself
        return raw, None
    if not isinstance(raw, str):
        return {}, f"arguments were not a JSON object: got {type(raw).__name__}"
    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except ValueError as err:
        return {}, f"arguments were not a JSON object: invalid JSON ({err})"
    except RecursionError:
        return {}, "arguments were nested too deeply to read; send a flat JSON object"
    if not isinstance(value, dict):
        return {}, f"arguments were not a JSON object: got {type(value).__name__}"
    return value, None


def _new_id() -> str:
    # Nine alphanumerics: the one id shape every server accepts (Mistral templates demand it).
    return "".join(secrets.choice(_ID_CHARS) for _ in range(9))


def _usage(raw: Any) -> Usage:
    """Usage from the wire, every number clamped (types.count, types.dollars)."""
    if not isinstance(raw, dict):
        return Usage()
    details = raw.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    if not _is_number(cached):
        cached = raw.get("cached_tokens")
    if not _is_number(cached):
        cached = raw.get("prompt_cache_hit_tokens")
    written = details.get("cache_write_tokens") if isinstance(details, dict) else None
    if not _is_number(written):
        written = raw.get("cache_write_tokens")     # OpenRouter
    return Usage(prompt=count(raw.get("prompt_tokens")),
                 completion=count(raw.get("completion_tokens")),
                 cached=count(cached), cost=dollars(raw.get("cost")), written=count(written))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _error(prefix: str, data: dict, fallback: str = "error in the reply",
           secrets: list[str] | None = None) -> ProviderError:
    """A ProviderError for an error reported inside a 200 reply (the key blanked out)."""
    code = error_code(data)
    has_error = code is not None
    detail = error_detail(data, secrets or ()) if has_error else fallback
    status = code if isinstance(code, int) else None
    retryable = status is not None and (status in RETRY_STATUSES or status >= 500)
    return ProviderError(prefix + detail, status=status, retryable=retryable)
