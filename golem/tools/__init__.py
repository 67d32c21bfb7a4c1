"""The tools the model may call, and the registry that runs them.

A tool is a `ToolSpec` (what the model sees) plus a function `(Context, **arguments) -> str`.
Every failure a model can recover from comes back as text starting with `Error:`; the
registry never lets a tool end the run (only `OutOfTime` and Ctrl-C pass through).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from golem.core.errors import Cancelled, OutOfTime, ToolError
from golem.llm.types import ToolCall, ToolSpec
from golem.core.outgoing import redact
from golem.tools.base import Context, Tool

__all__ = ["Context", "Registry", "Tool", "ToolResult", "default_registry"]


@dataclass
class ToolResult:
    text: str
    ok: bool = True


_JSON_TYPES = {"string": str, "integer": int, "array": list, "object": dict, "boolean": bool}


MAX_DEPTH = 32     # nesting of tool arguments; golem's tools take at most a list of strings


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """True when `value` nests lists and objects more than `limit` deep (found without
    recursion, so no depth crashes it)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list, tuple)):
            if depth >= limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return False


def _check_arguments(spec: ToolSpec, args: dict[str, Any]) -> str | None:
    """A reason the arguments do not fit the schema, or None."""
    if not isinstance(args, dict):
        return f"arguments must be a JSON object, not {type(args).__name__}"
    if too_deep(args):
        return f"arguments nested more than {MAX_DEPTH} levels deep; send a flat JSON object"
    props = spec.parameters.get("properties", {})
    for name in spec.parameters.get("required", []):
        if name not in args:
            return f"missing required argument {name!r}"
    for name, value in args.items():
        if name not in props:
            return f"unknown argument {name!r}; {spec.name} takes: {', '.join(props) or 'nothing'}"
        want = props[name].get("type")
        kind = _JSON_TYPES.get(want)
        if kind and (not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
            return f"argument {name!r} must be a JSON {want}"
        if want == "array" and not all(isinstance(v, str) for v in value):
            return f"argument {name!r} must be a list of strings"
    return None


class Registry:
    """Name -> Tool; `call` runs one model tool call and always returns a ToolResult."""

    def __init__(self, context: Context, tools: list[Tool], secrets: list[str] | None = None):
        self.context = context
        self.tools = {tool.spec.name: tool for tool in tools}
        self.secrets = secrets or []

    @property
    def specs(self) -> list[ToolSpec]:
        return [tool.spec for tool in self.tools.values()]

    def call(self, call: ToolCall, deadline: float | None = None) -> ToolResult:
        self.context.deadline = deadline
        tool = self.tools.get(call.name)
        if tool is None:
            return ToolResult(f"Error: unknown tool {call.name!r}; the tools are: "
                              + ", ".join(self.tools), ok=False)
        problem = call.error or _check_arguments(tool.spec, call.arguments)
        if problem:
            if not call.error:
                # what the model is answered about is not echoed back to it whole: nested
                # that deep, it could not be written into the next request
                call.arguments, call.error = {}, problem
            return ToolResult(f"Error: {call.name}: {problem}", ok=False)
        try:
            text, ok = tool.run(self.context, **call.arguments), True
        except ToolError as exc:
            text, ok = f"Error: {exc}", False
        except (OutOfTime, Cancelled, KeyboardInterrupt):
            raise
        except Exception as exc:  # a bug in a tool must not end an unattended run
            text, ok = f"Error: {call.name} failed unexpectedly: {type(exc).__name__}: {exc}", False
        # lone surrogates (bytes that were not UTF-8) must not reach a JSON request
        text = text.encode("utf-8", errors="replace").decode("utf-8")
        return ToolResult(redact(text, self.secrets), ok)


def default_registry(context: Context, secrets: list[str] | None = None,
                     read_only: bool = False) -> Registry:
    """The registry golem gives the model: every tool, or only the reading ones."""
    from golem.tools import commands, files
    tools = files.READ_TOOLS if read_only else files.READ_TOOLS + files.WRITE_TOOLS + commands.TOOLS
    return Registry(context, tools, secrets)
