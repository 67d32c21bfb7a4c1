"""What every tool shares: the `Context` it may touch and the `Tool` pairing a spec with its
function. The registry in `golem.tools` runs them; the tool modules import them from here."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from golem.core import cancel
from golem.core.errors import OutOfTime
from golem.llm.types import ToolSpec


@dataclass
class Context:
    """What tools may touch: the workspace, how commands run, and the test command."""

    workspace: Any                      # golem.tools.workspace.Workspace
    test_argv: list[str] | None = None
    allow: set[str] = field(default_factory=set)
    env: dict[str, str] = field(default_factory=dict)
    wrap: Callable[[list[str]], list[str]] | None = None
    command_timeout: float = 300.0
    output_cap: int = 20_000
    deadline: float | None = None
    test_runner: str = ""               # the result format of test_argv (verifier.suite.runner_of)

    def timeout(self) -> float:
        """The command timeout, shortened so no command outlives the wall budget."""
        cancel.check()
        if self.deadline is None:
            return self.command_timeout
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise OutOfTime("wall-clock budget spent")
        return min(self.command_timeout, left)


@dataclass(frozen=True)
class Tool:
    spec: ToolSpec
    run: Callable[..., str]
