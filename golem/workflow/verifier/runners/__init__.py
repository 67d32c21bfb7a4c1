"""The runner seam: every test runner golem knows, by name, and the two questions asked of
all of them together: which runner reads a given command (`runner_of`), and which command a
tree's tests run with (`detect`).

A runner (runners/base.py, `Runner`) says whether a command is its own, what it proposes for
a tree and how strongly, the command line golem starts for one run, how its evidence is
read and how one of its tests runs alone. `RUNNERS` maps each name to its runner object;
the first that claims a command, among those with evidence, reads it, and a command none
claims is judged by its exit code alone. docs/architecture.md, "Adding a runner", says how
to add one.
"""

from __future__ import annotations

import os
import shlex

from golem.core.errors import UsageError
from golem.workflow.verifier.runners import cargo, go, jest, make, node, npm, pytest, unittest
from golem.workflow.verifier.runners.base import (Call, Candidate, Outcomes, Runner,
                                                  TestCommand, Tree, is_python)

__all__ = ["RUNNERS", "Call", "Candidate", "Outcomes", "Runner", "TestCommand", "Tree",
           "detect", "is_python", "parse_command", "runner_of", "toolchain_homes", "trust_of"]

# The order breaks ties: between two proposals of one strength, and between two runners that
# claim one command, the first listed wins.
RUNNERS: dict[str, Runner] = {
    "pytest": pytest.RUNNER,
    "unittest": unittest.RUNNER,
    "go": go.RUNNER,
    "node": node.RUNNER,
    "jest": jest.RUNNER,
    "cargo": cargo.RUNNER,
    "npm": npm.RUNNER,
    "make": make.RUNNER,
}


def runner_of(argv: list[str]) -> str:
    """Which runner's evidence golem reads for this command ("exit-code": none)."""
    if not argv:
        return "exit-code"
    for name, runner in RUNNERS.items():
        if runner.evidence and runner.claims(argv):
            return name
    return "exit-code"


def trust_of(evidence: str) -> str:
    """What a verdict built on `evidence` must say about how far it is trusted ("": as far
    as golem's own evidence goes)."""
    for runner in RUNNERS.values():
        if runner.evidence == evidence:
            return runner.trust
    return ""


def toolchain_homes(home: str) -> dict[str, str]:
    """The variables naming the runners' toolchain directories (`Runner.homes`), each set
    to its directory under the user's `home` where that exists: every run gets a HOME of
    its own, where rustup would find no toolchain."""
    found = {}
    for runner in RUNNERS.values():
        for name, rel in runner.homes.items():
            if name not in os.environ and os.path.isdir(os.path.join(home, rel)):
                found[name] = os.path.join(home, rel)
    return found


def parse_command(text: str) -> TestCommand:
    """The `-test` flag: split like a shell would, run without one."""
    try:
        argv = shlex.split(text)
    except ValueError as exc:
        raise UsageError(f"cannot parse -test {text!r}: {exc}") from None
    if not argv:
        raise UsageError("-test is empty; give the command that runs the suite")
    return TestCommand(argv, runner_of(argv), "-test")


def _environment(root: str) -> dict[str, str]:
    """golem's own environment with the project's virtual environment activated, as test
    commands get it (golem/workflow/setup.py builds the real one)."""
    from golem.workflow.verifier.interpreter import activate, find_venv
    env = dict(os.environ)
    venv, _ = find_venv(root, env)
    return activate(env, venv) if venv is not None else env


def detect(root: str, env: dict[str, str] | None = None) -> TestCommand:
    """Choose the test command for the repository at `root`: every runner's proposals, the
    strongest first (docs/cli.md, "Test command detection"). `env` is the environment test
    commands get (the project's virtual environment activated). UsageError naming what was
    looked for when no runner proposes anything."""
    tree = Tree(root, env if env is not None else _environment(root))
    best: Candidate | None = None
    for runner in RUNNERS.values():
        for candidate in runner.detect(tree):
            if best is None or candidate.strength > best.strength:
                best = candidate
    if best is None:
        tried = "; ".join(runner.looks_for for runner in RUNNERS.values())
        raise UsageError(f"cannot tell how to run the tests in {root}; tried: {tried}; "
                         "give -test CMD")
    return TestCommand(best.argv, runner_of(best.argv), f"detected: {best.why}")
