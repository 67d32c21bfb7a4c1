"""The agent loop: ask the model, run the tools it asks for, feed the results back, repeat."""

from __future__ import annotations

from dataclasses import dataclass, field

from golem.agent.budget import Budget
from golem.agent.context import DEFAULT_RESERVE, ContextFull, Lean, tools_chars
from golem.core.errors import Cancelled, OutOfTime, ProviderError
from golem.llm import Provider
from golem.llm.types import Message, Request, Response, Usage
from golem.tools import Registry
from golem.trace import Trace

DECLINE_MARK = "DECLINED:"


def refusal(response: Response) -> str | None:
    """Why a reply without tool calls is no answer (a refusal, a content filter, nothing in
    it at all), or None when it is one."""
    if response.finish == "refusal":
        return f"the model refused (finish {response.raw_finish or 'refusal'})"
    if not response.message.content.strip():
        return (f"the model replied with neither text nor tool calls (finish "
                f"{response.raw_finish or response.finish})")
    return None


@dataclass
class Outcome:
    """How a run ended. `stop` is one of the stop names in docs/cli.md."""

    stop: str
    steps: int
    tool_calls: int
    usage: Usage
    elapsed: float
    claimed: str = ""
    error: str | None = None
    messages: list[Message] = field(default_factory=list, repr=False)
    # the KeyboardInterrupt (or SIGTERM, SIGHUP: errors.Interrupted) that ended the run
    interrupt: KeyboardInterrupt | None = field(default=None, repr=False)


def run(provider: Provider, tools: Registry, *, model: str, system: str, task: str,
        budget: Budget, trace: Trace, max_tokens: int | None = None,
        window: int = 10, context: int = 0) -> Outcome:
    """Drive the model until it answers, a budget runs out, or the provider fails.

    `window` is how many recent tool results the model sees whole (0: all of them);
    `context` is the model's context window in tokens (0: no limit), which no request passes.
    """
    ready = getattr(provider, "ready", None)
    if ready is not None:   # the preflight: a rejected key is a usage error, found here
        ready(budget.deadline)
    messages = [Message("system", system), Message("user", task)]
    lean = Lean(window, context, tools_chars(tools.specs), max_tokens or DEFAULT_RESERVE)
    steps = calls = 0
    usage = Usage()
    claimed, error, interrupt = "", None, None
    trace.emit("run_start", provider=provider.name, model=model, tools=[t.name for t in tools.specs],
               budget={"steps": budget.steps, "tokens": budget.tokens, "wall_s": budget.wall,
                       "cost": budget.cost}, task=task)
    try:
        while True:
            stop = budget.check(steps, usage)
            if stop:
                if stop == "wall":
                    error = f"the wall-clock budget ran out before model call {steps + 1}"
                break
            sent, trim = lean.view(messages)     # ContextFull: nothing is sent
            steps += 1
            if trim:
                trace.emit("context_trimmed", step=steps, **trim)
            trace.emit("request", step=steps, messages=len(messages))
            request = Request(model, sent, tools.specs, max_tokens, budget.deadline)
            response = provider.complete(request)
            usage += response.usage
            reply = response.message
            messages.append(reply)
            trace.emit("response", step=steps, finish=response.finish, raw_finish=response.raw_finish,
                       content=reply.content,
                       tool_calls=[{"id": c.id, "name": c.name} for c in reply.tool_calls],
                       usage=vars(response.usage))
            if response.cut_off:
                stop = "cut_off"
                break
            if not reply.tool_calls:
                claimed, error = reply.content, refusal(response)
                if error:
                    stop = "refused"
                    break
                declined = claimed.lstrip().upper().startswith(DECLINE_MARK)
                stop = "declined" if declined else "answered"
                break
            for call in reply.tool_calls:
                calls += 1
                trace.emit("tool_call", step=steps, id=call.id, name=call.name,
                           arguments=call.arguments)
                result = tools.call(call, budget.deadline)
                trace.emit("tool_result", step=steps, id=call.id, name=call.name,
                           error=not result.ok, content=result.text)
                messages.append(Message("tool", result.text, tool_call_id=call.id,
                                        name=call.name, is_error=not result.ok))
    except Cancelled:
        stop = "cancelled"
    except OutOfTime as exc:
        stop, error = "wall", str(exc)
    except (ProviderError, ContextFull) as exc:
        stop, error = "provider_error", str(exc)
    except KeyboardInterrupt as exc:
        stop, interrupt = "interrupted", exc
    outcome = Outcome(stop, steps, calls, usage, budget.elapsed(), claimed, error, messages,
                      interrupt)
    trace.emit("run_end", stop=stop, steps=steps, tool_calls=calls, tokens=vars(usage),
               tokens_total=usage.total, cost=usage.cost, elapsed_s=round(outcome.elapsed, 3),
               claimed=claimed, error=error)
    return outcome
