"""Command tools: run_command (allowlisted argv, never a shell) and run_tests."""

from __future__ import annotations

import shlex
import shutil

from golem.core.errors import ToolError
from golem.llm.types import ToolSpec
from golem.tools.base import Context, Tool
from golem.tools import process


def describe(result: process.Completed, timeout: float) -> str:
    """A command's result as the model sees it: how it ended, then its (capped) output."""
    if result.timed_out:
        head = f"timed out after {timeout:.0f}s; the process group was killed"
    elif result.exit_code is None:
        head = "could not start"
    else:
        head = f"exit code {result.exit_code}"
    output = result.output
    if result.truncated:
        # the model hears how much it is not seeing, in lines as well as bytes
        cut = f"\n[... {result.omitted_bytes} bytes omitted ...]\n"
        note = (f"\n[... {result.omitted_bytes} bytes omitted: {result.omitted_lines} of "
                f"{result.lines} lines; the head and tail are shown ...]\n")
        output = output.replace(cut, note, 1)
    output = output.rstrip("\n")
    return f"{head}\n{output}" if output else f"{head}\n(no output)"


def _execute(ctx: Context, argv: list[str]) -> tuple[process.Completed, float]:
    timeout = ctx.timeout()
    result = process.run(argv, cwd=ctx.workspace.root, env=ctx.env, timeout=timeout,
                         cap=ctx.output_cap, wrap=ctx.wrap)
    return result, timeout


def run_command(ctx: Context, argv: list[str]) -> str:
    """Run one allowlisted program in the workspace, without a shell."""
    if not argv:
        raise ToolError("argv is empty; give the program and its arguments as a list")
    if not ctx.allow:
        raise ToolError("no programs are allowed for run_command in this run; use run_tests "
                        "(the person running golem can allow programs with -allow)")
    program = process.resolve_program(argv[0], ctx.allow, ctx.env.get("PATH", ""))
    result, timeout = _execute(ctx, [program, *argv[1:]])
    return describe(result, timeout)


def _selected(argv: list[str], runner: str, select: str) -> list[str]:
    """The test command narrowed to tests matching `select` (unittest and pytest: `-k`)."""
    if runner not in ("unittest", "pytest"):
        raise ToolError("this test command cannot select tests; call run_tests without select")
    if select.startswith("-"):
        raise ToolError("select is a test name or a pattern, not an option")
    return [*argv, "-k", select]


def run_tests(ctx: Context, select: str = "") -> str:
    """Run the test command the person chose (or golem detected), or a selection of it."""
    if not ctx.test_argv:
        raise ToolError("this run has no test command")
    argv = _selected(ctx.test_argv, ctx.test_runner, select) if select else list(ctx.test_argv)
    program = shutil.which(argv[0], path=ctx.env.get("PATH")) or argv[0]
    result, timeout = _execute(ctx, [program, *argv[1:]])
    verdict = "passed" if result.exit_code == 0 and not result.timed_out else "failed"
    return f"$ {shlex.join(argv)}\ntests {verdict}: {describe(result, timeout)}"


TOOLS = [
    Tool(ToolSpec("run_command", "Run a program in the workspace root without a shell (no "
                  "pipes, redirection or globbing). argv[0] must be an allowed program.",
                  {"type": "object",
                   "properties": {"argv": {"type": "array", "items": {"type": "string"},
                                           "description": "program and arguments"}},
                   "required": ["argv"], "additionalProperties": False}), run_command),
    Tool(ToolSpec("run_tests", "Run the project's test suite and show the result. Give "
                  "`select` to run only the tests whose names match it (a test id or a "
                  "substring, as the runner's -k takes it) for quick feedback; finish with a "
                  "full run.",
                  {"type": "object",
                   "properties": {"select": {"type": "string",
                                             "description": "only tests matching this"}},
                   "additionalProperties": False}),
         run_tests),
]
