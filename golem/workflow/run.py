"""`golem run -goal TEXT` and `golem ask QUESTION`: the same loop, without a verdict."""

from __future__ import annotations

from golem import agent
from golem.agent import prompts
from golem.errors import interrupted
from golem.llm import Provider
from golem.tools import default_registry, process
from golem.trace import Trace
from golem.workflow.setup import Options, Setup
from golem.workflow.verifier import agent_scratch

ASK = """\
You answer questions about the files in a directory, using only what the files say. Use \
list_files, search_files and read_file to find the answer. Name every file you used, with \
line numbers where they help. If the files do not answer the question, say so plainly; do not \
guess. When you have the answer, reply without calling a tool."""


def _report(outcome: agent.Outcome, options: Options) -> dict:
    usage = outcome.usage
    ok = outcome.stop == "answered"
    return {"stop": outcome.stop, "answered": ok, "steps": outcome.steps,
            "tool_calls": outcome.tool_calls,
            "tokens": usage.to_json(),
            "cost": round(usage.cost or 0.0, 6), "elapsed_s": round(outcome.elapsed, 3),
            "claimed": outcome.claimed, "answer": outcome.claimed, "error": outcome.error,
            "messages": len(outcome.messages), "trace": options.trace,
            "exit_code": 0 if ok else 1}


def _converse(options: Options, provider: Provider, trace: Trace, model: str, system: str,
              task: str, secrets: list[str], read_only: bool) -> dict:
    with Setup(options, trace, need_tests=False) as setup:
        phase, env, wrap = agent_scratch(setup.verifier, None, setup.workspace.root)
        setup.keep(phase)
        registry = default_registry(setup.context(env, wrap), secrets, read_only=read_only)
        if setup.command is None:
            registry.tools.pop("run_tests", None)
        try:
            outcome = agent.run(provider, registry, model=model, system=system, task=task,
                                budget=options.budget, trace=trace,
                                max_tokens=options.provider.max_tokens, window=options.window,
                                context=options.context)
        finally:
            process.reap_strays()
        if outcome.stop == "interrupted":
            raise interrupted(outcome.interrupt, _report(outcome, options))
        return _report(outcome, options)


def run_goal(options: Options, provider: Provider, trace: Trace, model: str, goal: str,
             secrets: list[str]) -> dict:
    """Work on a free-form goal with every tool; exit 0 when the model answered."""
    return _converse(options, provider, trace, model, prompts.RUN, goal, secrets, False)


def ask(options: Options, provider: Provider, trace: Trace, model: str, question: str,
        secrets: list[str]) -> dict:
    """Answer a question from the files in -dir, with the reading tools only."""
    return _converse(options, provider, trace, model, ASK, question, secrets, True)
