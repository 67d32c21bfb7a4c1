"""`golem run -goal TEXT` and `golem ask QUESTION`: the same loop, without a verdict."""

from __future__ import annotations

from golem import agent
from golem.agent import prompts
from golem.core.errors import interrupted
from golem.llm import Provider
from golem.tools import default_registry, process, tree
from golem.trace import Trace
from golem.workflow import present, runs
from golem.workflow.patch import file_diffs
from golem.workflow.setup import Options, Setup
from golem.workflow.verifier import agent_scratch
from golem.workflow.verifier.snapshot import Snapshot, compare, fingerprint

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


class Kept:
    """What `golem run` keeps so that `golem undo` can put its changes back, as for `fix`."""

    def __init__(self, root: str):
        self.root = root
        self.id, self.dir = runs.new_run(root, "run")
        self.snap = Snapshot.take(root, self.dir, runs.store_dir())
        runs.record_root(self.dir, self.snap.root_id)

    def finish(self, trace: Trace, options: Options) -> list[str]:
        """Record what the run changed; the changed paths (none when golem cannot tell)."""
        try:
            after = fingerprint(self.root, deps=self.snap.deps)
        except tree.TreeError:
            runs.finish_run(self.dir, None, None)
            return []
        from golem.workflow.fix import _own_files
        changes = compare(self.snap.entries, after.entries).without(
            _own_files(self.root, options))
        runs.finish_run(self.dir, changes, after.entries)
        present.emit_diff(trace, file_diffs(self.root, self.snap, changes.all))
        if changes.all and options.undo_hint:
            trace.emit("note", message=f"run {self.id} changed {len(changes.all)} file(s); "
                       f"`golem undo {self.id}` puts them back", run_id=self.id)
        return changes.all


def _converse(options: Options, provider: Provider, trace: Trace, model: str, system: str,
              task: str, secrets: list[str], read_only: bool) -> dict:
    with Setup(options, trace, need_tests=False) as setup:
        if not read_only:
            trace.emit("phase", name="snapshot")
        kept = None if read_only else Kept(setup.workspace.root)
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
            phase.close()
        report = _report(outcome, options)
        if kept is not None:
            report.update(run_id=kept.id, changed_files=kept.finish(trace, options))
        if outcome.stop == "interrupted":
            raise interrupted(outcome.interrupt, report)
        return report


def run_goal(options: Options, provider: Provider, trace: Trace, model: str, goal: str,
             secrets: list[str]) -> dict:
    """Work on a free-form goal with every tool; exit 0 when the model answered."""
    return _converse(options, provider, trace, model, prompts.RUN, goal, secrets, False)


def ask(options: Options, provider: Provider, trace: Trace, model: str, question: str,
        secrets: list[str]) -> dict:
    """Answer a question from the files in -dir, with the reading tools only."""
    return _converse(options, provider, trace, model, ASK, question, secrets, True)
