"""golem's flags: exact names only, one dash or two, and every mistake one line.

The parser never abbreviates (`-d` is not `-dir`), checks every value as it reads it
(finite numbers, no empty test command, bare program names), and raises `UsageError`
instead of printing usage, so the CLI says what is wrong in one `golem:` line and exits 2.
Flags that take a setting default to None: the value comes from config.resolve (flag,
environment, repository, user, default), which also says where it came from.
"""

from __future__ import annotations

import argparse
import difflib
from typing import Any, Callable

from golem import __version__, config
from golem.config import values
from golem.core.errors import UsageError

EXAMPLES = {
    "fix": """examples:
  golem demo                                        # offline: the bundled example, fixed
  OPENROUTER_API_KEY=... golem fix -dir myrepo
  golem fix -dir myrepo -test 'python3 -m pytest -q' -steps 30 -cost 1.50 -json
  golem fix -provider openai -base-url http://127.0.0.1:8080/v1 -model qwen3-coder
  golem fix -dir myrepo -attempts 3 -models gpt-4.1-mini,gpt-4.1 -first""",
    "run": """examples:
  golem run -dir myrepo -goal 'add type hints to utils.py and keep the tests green'
  golem undo -dir myrepo            # put back what the run changed""",
    "ask": """examples:
  golem ask -dir docs 'which release added rate limiting, and what is the default?'""",
    "verify": """examples:
  golem verify -dir . -test 'python3 -m unittest' -base origin/main""",
    "undo": """examples:
  golem undo                     # the last run in this directory's workspace
  golem undo 20261202-101500-ab12cd""",
    "demo": """examples:
  golem demo                     # in a temporary copy, removed afterwards
  golem demo -dir /tmp/calc      # keep the copy (then: golem undo -dir /tmp/calc)""",
    "runs": """examples:
  golem runs                     # every kept run, newest first
  golem runs -prune              # apply the retention policy now""",
    "pick": """examples:
  golem pick -dir . results/*/result.json    # each job's patch beside its result
  golem pick -print job1/result.json job2/result.json > chosen.patch
  golem pick -patch /tmp/chosen.patch results/*/result.json""",
    "config": """examples:
  golem config -dir myrepo       # what a run in myrepo would use, and why""",
}
# flags `golem ask`, which only reads, refuses by name, with the reason
WRITING = {"allow": "it runs no commands", "patch": "it changes no files",
           "test": "it runs no tests", "strict": "it gives no verdict",
           "repeat": "it gives no verdict", "goal": "it takes a QUESTION",
           "prune": "it removes nothing", "force": "it changes no files",
           "env": "it runs no commands"}
# the reason where another command refuses the same flag for a reason of its own
REFUSED = {("fix", "goal"): "its goal is the failing suite; for a free-form goal use "
                            "golem run -goal TEXT",
           ("run", "patch"): "it writes no patch (its changes stay in the workspace, and "
                             "golem undo puts them back)",
           ("run", "strict"): "it gives no verdict", ("run", "repeat"): "it gives no verdict"}


class Parser(argparse.ArgumentParser):
    """An ArgumentParser that matches flag names exactly and raises UsageError."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("add_help", False)
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)
        self.add_argument("-h", "-help", "--help", action="help",
                          help="show this help and exit")

    def _get_option_tuples(self, option_string: str) -> list:
        return []   # no prefix matching at all, with one dash or two (Python 3.11 did)

    def error(self, message: str):
        raise UsageError(_one_line(message, self.prog))


def _one_line(message: str, prog: str) -> str:
    """argparse's message, said the way golem says things."""
    command = prog.split()[-1] if " " in prog else ""
    see = f"golem help {command}" if command else "golem help"
    if message.startswith("argument "):
        names, _, what = message[len("argument "):].partition(": ")
        return f"{names.split('/')[0]}: {what}"
    if message.startswith("the following arguments are required: "):
        names = [n.split("/")[0] for n in message.split(": ", 1)[1].split(", ")]
        # a positional argument is named as the usage line names it (QUESTION, RESULT)
        missing = ", ".join(n if n.startswith("-") else "a " + n.rstrip(".").upper()
                            for n in names)
        return f"golem {command} needs {missing} (see {see})"
    return f"{message} (see {see})"


def _value(parse: Callable[[Any], Any], metavar: str) -> Callable[[str], Any]:
    """An argparse type from a config parser: its ValueError becomes the message."""
    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    convert.__name__ = metavar
    return convert


def _flag(parser: argparse.ArgumentParser, name: str, **kwargs) -> None:
    """A long flag that works with one dash or two (`-dir` and `--dir`)."""
    parser.add_argument(f"-{name}", f"--{name}", **kwargs)


def _setting(parser: argparse.ArgumentParser, name: str, metavar: str, help_text: str,
             **kwargs) -> None:
    """A flag for a setting of config.SETTINGS (default None: see config.resolve)."""
    setting = config.SETTINGS[name]
    default = setting.default
    shown = config.show(name, default) if default not in (None, [], False) else None
    _flag(parser, name, dest=name.replace("-", "_"), metavar=metavar, default=None,
          type=_value(setting.parse, metavar),
          help=help_text + (f" (default {shown})" if shown else ""), **kwargs)


def _switch(parser: argparse.ArgumentParser, name: str, help_text: str) -> None:
    _flag(parser, name, dest=name.replace("-", "_"), action="store_true", default=None,
          help=help_text)


def _console_flags(parser: argparse.ArgumentParser) -> None:
    _switch(parser, "quiet", "print only the result and errors")
    _switch(parser, "verbose", "also print tool results and the model's whole texts")
    _setting(parser, "color", "auto|always|never", "colour (NO_COLOR and FORCE_COLOR too)")


def _agent_flags(parser: argparse.ArgumentParser, tests: bool = True) -> None:
    from golem.llm import provider_names
    _flag(parser, "dir", default=".", help="the workspace and sandbox boundary (default .)")
    if tests:
        _setting(parser, "test", "CMD", "the command that defines success (default: "
                 "detected from the repo)")
    _setting(parser, "model", "NAME", "model id (env GOLEM_MODEL; default per provider)")
    _setting(parser, "provider", "NAME", f"{' | '.join(provider_names())} (env "
             "GOLEM_PROVIDER)")
    _setting(parser, "base-url", "URL", "endpoint override (env OPENAI_BASE_URL for openai)")
    _setting(parser, "steps", "N", "model calls at most (0: no limit)")
    _setting(parser, "tokens", "N", "prompt+completion tokens at most (0: no limit)")
    _setting(parser, "wall", "DUR", "wall-clock time at most, like 90s or 10m (0: no limit)")
    _setting(parser, "cost", "USD", "dollars at most (0: no limit)")
    _setting(parser, "price", "IN,OUT[,CACHE_READ]",
             "dollars per million tokens, over golem's price table")
    if tests:
        _flag(parser, "allow", action="append", default=None, metavar="PROG[,PROG]",
              type=_value(config.programs, "PROG"),
              help="programs run_command may start (repeatable; default none)")
        _setting(parser, "sandbox", "auto|bwrap|none", "OS isolation of commands")
        _env_flag(parser)
    else:
        _setting(parser, "sandbox", "auto|bwrap|none", "OS isolation of the test runs")
    _flag(parser, "trace", metavar="FILE", help="write the JSONL event stream here")
    _flag(parser, "json", action="store_true", help="print the result as one JSON object last")
    _flag(parser, "result", metavar="FILE",
          help="also write the JSON result to FILE (atomically); stdout stays the log")
    _setting(parser, "max-tokens", "N", "completion tokens per model reply (default: the "
             "provider's)")
    _setting(parser, "retries", "N", "provider retries per call")
    _flag(parser, "record", metavar="FILE",
          help="save the run's HTTP exchanges with the provider (no key in them) as JSONL")
    _flag(parser, "replay", metavar="FILE",
          help="serve the provider's replies from a -record file: no key, no network")
    _flag(parser, "replay-strict", dest="replay_strict", action="store_true",
          help="with -replay: a request that differs from the recording is an error")
    _setting(parser, "window", "N", "recent tool results the model sees whole; older ones "
             "become one-line placeholders (0: keep all)")
    _setting(parser, "context", "N", "the model's context window in tokens: older results "
             "are hidden and old turns left out before a request would pass it (0: no limit)")
    _console_flags(parser)


def _env_flag(parser: argparse.ArgumentParser) -> None:
    _flag(parser, "env", action="append", default=None, metavar="NAME[=VALUE][,...]",
          type=_value(config.variables, "NAME[=VALUE]"),
          help="variables the project needs (PYTHONPATH=src, a settings module), passed to "
          "test runs and commands; NAME alone takes your value; never a key (repeatable)")


def _grading_flags(parser: argparse.ArgumentParser) -> None:
    _flag(parser, "strict", action="store_true", default=None,
          help="REJECTED when the scan of the diff finds anything suspicious")
    _flag(parser, "allow-change", dest="allow_change", action="append", default=None,
          metavar="GLOB[,GLOB]", type=_value(config.globs, "GLOB"),
          help="files other tools run (CI, hooks, task runners, build scripts) that the "
               "change may touch (repeatable; default none: such a change is REJECTED)")
    _flag(parser, "known-failing", dest="known_failing", action="append", default=None,
          metavar="ID[,ID]", type=_value(config.test_ids, "ID"),
          help="tests that fail for reasons outside the change (a test id, or its file, "
               "module or class): still run and reported, but the verdict is not judged on "
               "them (repeatable)")
    _setting(parser, "repeat", "N", "after grading, re-run each previously failing test N "
             "more times alone; a changed outcome is flaky and not VERIFIED")


def _attempt_flags(parser: argparse.ArgumentParser) -> None:
    _flag(parser, "attempts", type=_value(lambda t: values.whole(t, 1), "N"), default=1,
          metavar="N", help="N independent attempts in private copies, each verified; the "
          "best verified one is applied (default 1: the agent edits the workspace itself)")
    _flag(parser, "jobs", type=_value(lambda t: values.whole(t, 0), "J"), default=0,
          metavar="J", help="attempts at once (default: N, at most 8; one under -sandbox none)")
    _flag(parser, "models", metavar="A,B,...", type=_value(config.text, "A,B,..."),
          help="models for the attempts, round robin; PROVIDER:MODEL picks a provider")
    _flag(parser, "first", action="store_true",
          help="stop the other attempts as soon as one is VERIFIED")
    _flag(parser, "escalate", metavar="A,B,...", type=_value(config.text, "A,B,..."),
          help="one attempt per model, one after another, the next only when the last did "
          "not verify")
    _flag(parser, "attempt", metavar="K/N", type=_value(config.text, "K/N"),
          help="run only attempt K of N (one CI matrix job), in the workspace itself")


COMMANDS = {
    "fix": "fix a failing test suite, then verify the result independently",
    "run": "run the agent on a free-form goal, same loop, tools and budgets",
    "ask": "read-only: answer a question from the files in -dir, naming them",
    "tools": "print the tool schemas the model sees",
    "trace": "render a recorded JSONL trace for a person",
    "verify": "run the verifier alone on changes made since a git revision",
    "undo": "put the workspace back as it was before a run",
    "demo": "the bundled broken example, fixed offline by the scripted model",
    "pick": "re-verify the patches of attempts run elsewhere (a CI matrix) and apply the "
            "first that verifies here",
    "runs": "list the runs golem keeps; -prune applies the retention policy now",
    "config": "each effective setting and where it came from",
    "help": "the same as --help: golem help [COMMAND]; golem help cli prints the reference",
}


def build_parser() -> Parser:
    """The whole command line; `golem CMD --help` shows one command."""
    parser = Parser(
        prog="golem",
        description="Point an LLM agent at a failing test suite, then verify the result "
                    "independently.",
        epilog="try it offline, no key needed:  golem demo\n"
               "help on one command:  golem help CMD   (or golem CMD --help)\n"
               "every command, flag, exit code and JSON field:  golem help cli")
    parser.add_argument("-version", "--version", action="version",
                        version=f"golem {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)

    def command(name: str) -> Parser:
        return sub.add_parser(name, help=COMMANDS[name], description=COMMANDS[name],
                              epilog=EXAMPLES.get(name))

    fix = command("fix")
    _agent_flags(fix)
    _flag(fix, "patch", metavar="FILE", help="write the run's allowed changes as a diff")
    _grading_flags(fix)
    _attempt_flags(fix)
    run = command("run")
    _agent_flags(run)
    _flag(run, "goal", required=True, type=_value(config.text, "TEXT"), metavar="TEXT",
          help="what the agent should do")
    ask = command("ask")
    _agent_flags(ask, tests=False)
    ask.add_argument("question", nargs="+", help="the question")
    tools = command("tools")
    _flag(tools, "json", action="store_true", help="as JSON")
    verify = command("verify")
    _flag(verify, "dir", default=".", help="the workspace, a git checkout (default .)")
    _setting(verify, "test", "CMD", "the suite (default: detected from the repo)")
    _flag(verify, "base", required=True, metavar="REV", type=_value(config.text, "REV"),
          help="the revision to compare with")
    _setting(verify, "sandbox", "auto|bwrap|none", "OS isolation of the test runs")
    _env_flag(verify)
    _flag(verify, "trace", metavar="FILE", help="write the JSONL event stream here")
    _flag(verify, "json", action="store_true", help="print the result as one JSON object last")
    _flag(verify, "result", metavar="FILE",
          help="also write the JSON result to FILE (atomically); stdout stays the log")
    _grading_flags(verify)
    _console_flags(verify)
    pick = command("pick")
    pick.add_argument("results", nargs="+", metavar="RESULT",
                      help="a -json result of `golem fix -attempt K/N -patch FILE`, its patch "
                           "beside it")
    _flag(pick, "dir", default=".", help="the workspace, a clean checkout (default .)")
    _setting(pick, "test", "CMD", "the suite (default: detected from the repo)")
    _setting(pick, "sandbox", "auto|bwrap|none", "OS isolation of the test runs")
    _env_flag(pick)
    _flag(pick, "print", action="store_true",
          help="print the chosen patch instead of applying it")
    _flag(pick, "patch", metavar="FILE",
          help="write the chosen change whole (added, removed, renamed files, modes) as a "
               "diff `git apply` takes")
    _flag(pick, "trace", metavar="FILE", help="write the JSONL event stream here")
    _flag(pick, "json", action="store_true", help="print the result as one JSON object last")
    _flag(pick, "result", metavar="FILE",
          help="also write the JSON result to FILE (atomically); stdout stays the log")
    _grading_flags(pick)
    _console_flags(pick)
    trace = command("trace")
    trace.add_argument("file", help="a trace written with -trace")
    _flag(trace, "html", metavar="OUT", help="write one self-contained HTML page to OUT")
    undo = command("undo")
    undo.add_argument("run", nargs="?", help="run id (default: the last run in -dir)")
    _flag(undo, "dir", default=".", help="the workspace (default .)")
    _flag(undo, "force", action="store_true",
          help="also put back files edited after the run (their later edits are lost)")
    demo = command("demo")
    _flag(demo, "dir", metavar="DIR", help="copy the example to DIR (a new directory) and "
          "keep it (default: a temporary copy, removed afterwards)")
    _flag(demo, "trace", metavar="FILE", help="write the JSONL event stream here")
    _flag(demo, "json", action="store_true", help="print the result as one JSON object last")
    _flag(demo, "attempts", type=_value(lambda t: values.whole(t, 1), "N"), default=1,
          metavar="N", help="N scripted attempts (3: one rewrites the test, one fixes half, "
          "one fixes the bug), the verified one chosen")
    _console_flags(demo)
    runs = command("runs")
    _flag(runs, "prune", action="store_true",
          help="remove runs beyond the retention policy now (keep-runs, keep-size)")
    _flag(runs, "json", action="store_true", help="as a JSON array")
    conf = command("config")
    _flag(conf, "dir", default=".", help="the repository whose pyproject.toml is read "
          "(default .)")
    _flag(conf, "json", action="store_true", help="as one JSON object")
    help_ = command("help")
    help_.add_argument("topic", nargs="?", metavar="COMMAND",
                       help="the command to explain, or `cli` for the whole reference")
    return parser


def subparser(parser: Parser, name: str) -> Parser:
    """The parser of command `name`."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[name]
    raise KeyError(name)


def _commands(parser: Parser) -> list[str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices)
    return []


def flag_names(parser: argparse.ArgumentParser) -> set[str]:
    """Every flag `parser` takes, by its one-dash name."""
    return {opt for action in parser._actions for opt in action.option_strings
            if opt.startswith("-") and not opt.startswith("--")}


def unknown(parser: Parser, command: str | None, extras: list[str]) -> UsageError:
    """The one-line error for arguments `command` does not take."""
    first = extras[0]
    name = first.split("=", 1)[0]
    if not name.startswith("-"):
        where = f"golem {command}" if command else "golem"
        return UsageError(f"{where} takes no argument {first!r} (see golem help "
                          f"{command or ''})".replace(" )", ")"))
    bare = name.lstrip("-")
    own = flag_names(subparser(parser, command)) if command else flag_names(parser)
    if command and f"-{bare}" not in own and (command, bare) in REFUSED:
        return UsageError(f"-{bare} does not apply to golem {command}: "
                          f"{REFUSED[command, bare]} (see golem help {command})")
    if command == "ask" and bare in WRITING and f"-{bare}" not in own:
        return UsageError(f"-{bare} does not apply to golem {command}: "
                          f"{WRITING[bare]} (see golem help {command})")
    if command:
        # a flag of another command: name that command rather than a look-alike flag here
        owners = [name for name in _commands(parser)
                  if name != command and f"-{bare}" in flag_names(subparser(parser, name))]
        if owners:
            takes = "takes" if len(owners) == 1 else "take"
            return UsageError(f"-{bare} is not a flag of golem {command}; golem "
                              f"{', '.join(owners)} {takes} it (see golem help {owners[0]})")
    close = difflib.get_close_matches(f"-{bare}", sorted(own), n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    where = f"golem {command}" if command else "golem"
    return UsageError(f"unknown flag {name} for {where}{hint} (see golem help "
                      f"{command or ''})".replace(" )", ")"))
