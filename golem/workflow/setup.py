"""What every workflow needs before the model is asked anything: the workspace, the test
command, the environment commands get, and the sandbox mode. The scratch directories of each
phase are made later, when the phase starts (golem/workflow/verifier/scratch.py)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from golem.agent.budget import Budget
from golem.core.errors import UsageError
from golem.llm import ProviderConfig
from golem.tools import Context, process, sandbox
from golem.tools.workspace import Workspace
from golem.trace import Trace
from golem.workflow.verifier import Environment
from golem.workflow.verifier.interpreter import activate, find_venv
from golem.workflow.verifier.scratch import Phase
from golem.workflow.verifier.runners import (RUNNERS, TestCommand, detect, parse_command,
                                             toolchain_homes)


@dataclass
class Options:
    """Everything the CLI decided for one run."""

    provider: ProviderConfig
    dir: str = "."
    test: str | None = None
    budget: Budget = field(default_factory=Budget)
    allow: list[str] = field(default_factory=list)
    sandbox: str = "auto"
    trace: str | None = None
    patch: str | None = None
    window: int = 10
    context: int = 200_000          # the model's context window, in tokens (0: no limit)
    strict: bool = False            # -strict: a suspicious finding rejects the change
    repeat: int = 0                 # -repeat: re-runs of each previously failing test
    undo_hint: bool = True          # say how to undo the run (not for a copy about to go)
    notes: list[dict] = field(default_factory=list)     # said after the test command
    env: dict[str, str] = field(default_factory=dict)   # -env: variables the project needs
    allow_change: list[str] = field(default_factory=list)   # -allow-change: files run later
    known_failing: list[str] = field(default_factory=list)  # -known-failing: not judged on

    command_timeout: float = 600.0
    suite_timeout: float = 1800.0


class Setup:
    """The workspace, the test command and the verifier's environment; a context manager
    that removes every phase scratch registered with `keep` on the way out."""

    def __init__(self, options: Options, trace: Trace, need_tests: bool = True):
        self.options = options
        self.trace = trace
        self.workspace = Workspace(options.dir)
        # HOME, TMPDIR and the bytecode cache are set per phase and per run
        self.env = process.command_env("/nonexistent", "/nonexistent",
                                       {**options.env, "PYTHONNOUSERSITE": "1"})
        # the toolchains' own homes (rustup's, cargo's) where the user's are, not under the
        # HOME each run gets
        for name, where in toolchain_homes(os.path.expanduser("~")).items():
            self.env.setdefault(name, where)
        # the project's own virtual environment, as its developer would have it activated
        self.venv, why = find_venv(self.workspace.root, dict(os.environ))
        if self.venv is not None:
            self.env = activate(self.env, self.venv)
        self.command: TestCommand | None = None
        if options.test:
            self.command = parse_command(options.test)
        elif need_tests:
            self.command = detect(self.workspace.root, self.env)
        else:
            try:
                self.command = detect(self.workspace.root, self.env)
            except UsageError:
                self.command = None     # `run` and `ask` can work without a test suite
        _, how = sandbox.wrapper(options.sandbox, self.workspace.root, ())
        self.sealed = how.startswith("bwrap")
        process.become_subreaper()
        self.verifier = Environment(options.sandbox, self.env, trace, options.suite_timeout,
                                    options.budget.deadline, origin=self.workspace.root)
        self._phases: list[Phase] = []
        if self.command is not None:    # the first line of output: what defines success
            trace.emit("note", message=f"test command: {self.command.text} "
                       f"({self.command.origin}; evidence: {self.command.runner})",
                       test_command=self.command.argv, origin=self.command.origin)
        trace.emit("note", message=f"sandbox: {how}", sandbox=options.sandbox)
        runner = RUNNERS.get(self.command.runner) if self.command is not None else None
        if runner is not None and runner.python or self.venv is not None:
            python = os.path.join(self.venv, "bin", "python") if self.venv else "python3 on PATH"
            trace.emit("note", message=f"python: {python} ({why})", venv=self.venv)
        if options.env:
            trace.emit("note", message="environment for test runs and commands: "
                       + ", ".join(sorted(options.env)), env_names=sorted(options.env))
        for note in options.notes:      # the price, what the configuration files said
            trace.emit("note", **note)

    def keep(self, phase: Phase) -> Phase:
        """Remove `phase` when the command ends, whatever happens."""
        self._phases.append(phase)
        return phase

    def context(self, env: dict[str, str], wrap) -> Context:
        """What the model's tools may touch, with the agent phase's environment and sandbox."""
        allow = set(self.options.allow)
        return Context(self.workspace, self.command.argv if self.command else None, allow,
                       env, wrap, self.options.command_timeout,
                       test_runner=self.command.runner if self.command else "")

    def __enter__(self) -> Setup:
        return self

    def __exit__(self, *exc) -> None:
        while self._phases:
            self._phases.pop().close()
