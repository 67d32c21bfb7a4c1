"""What every workflow needs before the model is asked anything: the workspace, the test
command, a scratch directory for commands, their environment and their sandbox."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field

from golem.agent.budget import Budget
from golem.errors import UsageError
from golem.llm import ProviderConfig
from golem.tools import Context, process, sandbox
from golem.tools.workspace import Workspace
from golem.trace import Trace
from golem.workflow.suite import TestCommand, detect, parse_command


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
    command_timeout: float = 600.0
    suite_timeout: float = 1800.0


class Setup:
    """The scratch directory (HOME and TMPDIR for commands) and everything built around it.

    Use as a context manager: the scratch directory is removed on the way out.
    """

    def __init__(self, options: Options, trace: Trace, need_tests: bool = True):
        self.options = options
        self.trace = trace
        self.workspace = Workspace(options.dir)
        self.command: TestCommand | None = None
        if options.test:
            self.command = parse_command(options.test)
        elif need_tests:
            self.command = detect(self.workspace.root)
        else:
            try:
                self.command = detect(self.workspace.root)
            except UsageError:
                self.command = None     # `run` and `ask` can work without a test suite
        self.scratch = tempfile.mkdtemp(prefix="golem-")
        try:
            home = os.path.join(self.scratch, "home")
            tmp = os.path.join(self.scratch, "tmp")
            os.mkdir(home)
            os.mkdir(tmp)
            # bytecode comes from golem's scratch, never from __pycache__ in the workspace,
            # where a forged .pyc could stand in for a test file that looks untouched
            self.env = process.command_env(home, tmp, {
                "PYTHONPYCACHEPREFIX": os.path.join(self.scratch, "pycache"),
                "PYTHONNOUSERSITE": "1"})
            self.wrap, how = sandbox.wrapper(options.sandbox, self.workspace.root, self.scratch)
        except BaseException:
            shutil.rmtree(self.scratch, ignore_errors=True)
            raise
        if self.command is not None:    # the first line of output: what defines success
            trace.emit("note", message=f"test command: {self.command.text} "
                       f"({self.command.origin}; evidence: {self.command.runner})",
                       test_command=self.command.argv, origin=self.command.origin)
        trace.emit("note", message=f"sandbox: {how}", sandbox=options.sandbox)

    def context(self) -> Context:
        allow = set(self.options.allow)
        return Context(self.workspace, self.command.argv if self.command else None, allow,
                       self.env, self.wrap, self.options.command_timeout)

    def __enter__(self) -> Setup:
        return self

    def __exit__(self, *exc) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)
