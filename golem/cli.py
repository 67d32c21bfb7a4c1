"""The command line: parse flags, build the pieces, turn every error into one line and an
exit code, in one place (`main`)."""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys

from golem import __version__
from golem.errors import UsageError
from golem.llm import KEYS, ProviderConfig, Secret, make_provider, provider_names

DEFAULT_MODELS = {"openrouter": "anthropic/claude-sonnet-4.5", "openai": "gpt-4.1",
                  "anthropic": "claude-sonnet-4-5", "demo": "demo"}
DEFAULT_BUDGET = {"steps": 50, "tokens": 2_000_000, "wall": "30m", "cost": 5.0}

EXAMPLES = {
    "fix": """examples:
  golem fix -dir . -provider demo                  # offline, scripted (the bundled example)
  OPENROUTER_API_KEY=... golem fix -dir myrepo
  golem fix -dir myrepo -test 'python3 -m pytest -q' -steps 30 -cost 1.50 -json
  golem fix -provider openai -base-url http://127.0.0.1:8080/v1 -model qwen3-coder""",
    "run": """examples:
  golem run -dir myrepo -goal 'add type hints to utils.py and keep the tests green'""",
    "ask": """examples:
  golem ask -dir docs 'which release added rate limiting, and what is the default?'""",
    "verify": """examples:
  golem verify -dir . -test 'python3 -m unittest' -base origin/main""",
    "undo": """examples:
  golem undo                     # the last run in this directory's workspace
  golem undo 20261202-101500-ab12cd""",
}


def _flag(parser: argparse.ArgumentParser, name: str, **kwargs) -> None:
    """A long flag that works with one dash or two (`-dir` and `--dir`)."""
    parser.add_argument(f"-{name}", f"--{name}", **kwargs)


def _agent_flags(parser: argparse.ArgumentParser, tests: bool = True) -> None:
    _flag(parser, "dir", default=".", help="the workspace and sandbox boundary (default .)")
    if tests:
        _flag(parser, "test", metavar="CMD",
              help="the command that defines success (default: detected from the repo)")
    _flag(parser, "model", help="model id (env GOLEM_MODEL; default per provider)")
    _flag(parser, "provider", help=f"{' | '.join(provider_names())} (env GOLEM_PROVIDER; "
          "default openrouter)")
    _flag(parser, "base-url", dest="base_url", metavar="URL", help="endpoint override")
    _flag(parser, "steps", type=int, default=DEFAULT_BUDGET["steps"],
          help="model calls at most (0: no limit; default %(default)s)")
    _flag(parser, "tokens", type=int, default=DEFAULT_BUDGET["tokens"],
          help="prompt+completion tokens at most (default %(default)s)")
    _flag(parser, "wall", default=DEFAULT_BUDGET["wall"], metavar="DUR",
          help="wall-clock time at most, like 90s or 10m (default %(default)s)")
    _flag(parser, "cost", type=float, default=DEFAULT_BUDGET["cost"], metavar="USD",
          help="dollars at most, as the provider reports them (default %(default)s)")
    _flag(parser, "allow", action="append", default=[], metavar="PROG[,PROG]",
          help="programs run_command may start (repeatable; default none)")
    _flag(parser, "sandbox", default="auto", choices=["auto", "bwrap", "none"],
          help="OS isolation of commands (default auto: bwrap when installed)")
    _flag(parser, "trace", metavar="FILE", help="write the JSONL event stream here")
    _flag(parser, "json", action="store_true", help="print the result as one JSON object last")
    _flag(parser, "max-tokens", dest="max_tokens", type=int, default=None,
          help="completion tokens per model reply (default: the provider's)")
    _flag(parser, "retries", type=int, default=5, help="provider retries per call (default 5)")
    _flag(parser, "record", metavar="FILE",
          help="save the run's HTTP exchanges with the provider (no key in them) as JSONL")
    _flag(parser, "replay", metavar="FILE",
          help="serve the provider's replies from a -record file: no key, no network")
    _flag(parser, "replay-strict", dest="replay_strict", action="store_true",
          help="with -replay: a request that differs from the recording is an error")
    _flag(parser, "window", type=int, default=10, metavar="N",
          help="recent tool results the model sees whole; older ones become one-line "
               "placeholders (0: keep all; default %(default)s)")
    _flag(parser, "context", type=int, default=200_000, metavar="N",
          help="the model's context window in tokens: older results are hidden and old "
               "turns left out before a request would pass it (0: no limit; default "
               "%(default)s)")


def _repeat_flag(parser: argparse.ArgumentParser) -> None:
    _flag(parser, "repeat", type=int, default=0, metavar="N",
          help="after grading, re-run each previously failing test N more times alone; a "
               "changed outcome is flaky and not VERIFIED (default 0)")


def _check_repeat(args: argparse.Namespace) -> int:
    if getattr(args, "repeat", 0) < 0:
        raise UsageError("-repeat must be 0 (no re-runs) or more")
    return getattr(args, "repeat", 0)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="golem", allow_abbrev=False,
        description="Point an LLM agent at a failing test suite, then verify the result "
                    "independently.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="start offline:  golem fix -dir examples/broken-calculator -provider demo\n"
               "help on one command:  golem CMD --help")
    parser.add_argument("--version", "-version", action="version",
                        version=f"golem {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help_text, description=help_text, allow_abbrev=False,
                              epilog=EXAMPLES.get(name),
                              formatter_class=argparse.RawDescriptionHelpFormatter)

    fix = command("fix", "fix a failing test suite, then verify the result independently")
    _agent_flags(fix)
    _flag(fix, "patch", metavar="FILE", help="write the run's allowed changes as a diff")
    _flag(fix, "strict", action="store_true",
          help="REJECTED when the scan of the diff finds anything suspicious")
    _repeat_flag(fix)
    run = command("run", "run the agent on a free-form goal, same loop, tools and budgets")
    _agent_flags(run)
    _flag(run, "goal", required=True, help="what the agent should do")
    ask = command("ask", "read-only: answer a question from the files in -dir, naming them")
    _agent_flags(ask, tests=False)
    ask.add_argument("question", nargs="+", help="the question")
    tools = command("tools", "print the tool schemas the model sees")
    _flag(tools, "json", action="store_true", help="as JSON")
    verify = command("verify", "run the verifier alone on changes made since a git revision")
    _flag(verify, "dir", default=".", help="the workspace, a git checkout (default .)")
    _flag(verify, "test", metavar="CMD", help="the suite (default: detected from the repo)")
    _flag(verify, "base", required=True, metavar="REV", help="the revision to compare with")
    _flag(verify, "sandbox", default="auto", choices=["auto", "bwrap", "none"],
          help="OS isolation of the test runs (default auto)")
    _flag(verify, "trace", metavar="FILE", help="write the JSONL event stream here")
    _flag(verify, "json", action="store_true", help="print the result as one JSON object last")
    _flag(verify, "strict", action="store_true",
          help="REJECTED when the scan of the diff finds anything suspicious")
    _repeat_flag(verify)
    trace = command("trace", "render a recorded JSONL trace for a person")
    trace.add_argument("file", help="a trace written with -trace")
    _flag(trace, "html", metavar="OUT", help="write one self-contained HTML page to OUT")
    undo = command("undo", "put the workspace back as it was before a run")
    undo.add_argument("run", nargs="?", help="run id (default: the last run in -dir)")
    _flag(undo, "dir", default=".", help="the workspace (default .)")
    _flag(undo, "force", action="store_true",
          help="also put back files edited after the run (their later edits are lost)")
    return parser


def _provider_config(args: argparse.Namespace) -> ProviderConfig:
    name = args.provider or os.environ.get("GOLEM_PROVIDER") or "openrouter"
    if name not in provider_names():
        raise UsageError(f"unknown provider {name!r}; choose one of: "
                         + ", ".join(provider_names()))
    replay = getattr(args, "replay", None)
    if replay and getattr(args, "record", None):
        raise UsageError("-record and -replay cannot be used together")
    if getattr(args, "replay_strict", False) and not replay:
        raise UsageError("-replay-strict needs -replay FILE")
    key = None
    if name in KEYS and not replay:  # a replay sends nothing, so it needs no key
        variable, required = KEYS[name]
        value = os.environ.get(variable, "").strip()
        if required and not value:
            raise UsageError(f"{variable} is not set: export it to use -provider {name}, "
                             "or try golem offline with -provider demo")
        key = Secret(value) if value else None
    model = args.model or os.environ.get("GOLEM_MODEL") or DEFAULT_MODELS.get(name, "")
    if args.retries < 0:
        raise UsageError("-retries must be 0 or more")
    return ProviderConfig(name=name, model=model, api_key=key, base_url=args.base_url,
                          max_attempts=args.retries + 1, max_tokens=args.max_tokens,
                          record=getattr(args, "record", None), replay=replay,
                          replay_strict=getattr(args, "replay_strict", False))


def _options(args: argparse.Namespace):
    from golem.workflow.setup import Options
    for flag in ("steps", "tokens"):
        if getattr(args, flag) < 0:
            raise UsageError(f"-{flag} must be 0 (no limit) or more")
    if args.window < 0:
        raise UsageError("-window must be 0 (keep every result) or more")
    if args.context < 0:
        raise UsageError("-context must be 0 (no limit) or a number of tokens")
    if args.cost < 0:
        raise UsageError("-cost must be 0 (no limit) or more")
    if not os.path.isdir(args.dir):
        raise UsageError(f"workspace directory not found: {args.dir}")
    from golem.agent.budget import Budget, parse_duration   # the agent loads only to run
    budget = Budget(steps=args.steps, tokens=args.tokens, wall=parse_duration(args.wall),
                    cost=args.cost)
    allow = [p.strip() for item in args.allow for p in item.split(",") if p.strip()]
    return Options(provider=_provider_config(args), dir=args.dir,
                   test=getattr(args, "test", None), budget=budget, allow=allow,
                   sandbox=args.sandbox, trace=args.trace, patch=getattr(args, "patch", None),
                   window=args.window, context=args.context, strict=getattr(args, "strict", False),
                   repeat=_check_repeat(args))


def _agent_command(args: argparse.Namespace) -> int:
    from golem.trace import Trace
    from golem.workflow import fix, run
    options = _options(args)
    config = options.provider
    secrets = [config.api_key] if config.api_key else []
    if args.command == "ask":
        print(f"question: {' '.join(args.question)}", file=sys.stderr)
    with Trace(options.trace, sys.stderr, secrets) as trace:
        config.on_retry = lambda info: trace.emit("retry", **info)
        config.on_event = lambda kind, info: trace.emit(kind, **info)
        provider = make_provider(config)
        if args.command == "fix":
            report = fix.fix(options, provider, trace, config.model, secrets)
            line = report["summary"]
        elif args.command == "run":
            report = run.run_goal(options, provider, trace, config.model, args.goal, secrets)
            line = report["answer"] or f"(no answer: stop={report['stop']})"
        else:
            report = run.ask(options, provider, trace, config.model, " ".join(args.question),
                             secrets)
            line = report["answer"] or f"(no answer: stop={report['stop']})"
    if args.command != "ask":
        return _finish(args, report, line, secrets)
    tokens = report["tokens"]
    print(f"cost: {report['steps']} model call(s), {report['tool_calls']} tool call(s), "
          f"{tokens['prompt']} tokens in, {tokens['completion']} out, ${report['cost']:.4f}",
          file=sys.stderr)
    code = _finish(args, report, line, secrets)
    print(f"({report['messages']} messages)", file=sys.stderr)
    return code


def _verify_command(args: argparse.Namespace) -> int:
    from golem.trace import Trace
    from golem.workflow.setup import Options
    from golem.workflow.verify import verify
    if not os.path.isdir(args.dir):
        raise UsageError(f"workspace directory not found: {args.dir}")
    options = Options(provider=ProviderConfig(name="none", model=""), dir=args.dir,
                      test=args.test, sandbox=args.sandbox, trace=args.trace,
                      strict=args.strict, repeat=_check_repeat(args))
    with Trace(options.trace, sys.stderr) as trace:
        report = verify(options, trace, args.base)
    return _finish(args, report, report["summary"])


def _finish(args: argparse.Namespace, report: dict, line: str, secrets=()) -> int:
    """Print the result line (and the JSON object), publish to CI, return the exit code."""
    from golem.trace import redact
    from golem.trace.text import printable
    from golem.workflow import github
    code = report.pop("exit_code")
    if secrets:   # file names and messages on stdout can carry a key found in the workspace
        report = json.loads(redact(json.dumps(report, default=str), secrets))
        line = redact(line, secrets)
    if args.command in ("fix", "verify"):
        github.publish(report, sys.stdout)
    print(printable(line))
    if args.json:
        print(json.dumps(report, default=str))
    return code


def _tools_command(args: argparse.Namespace) -> int:
    from golem.tools import commands, files
    specs = [t.spec for t in files.READ_TOOLS + files.WRITE_TOOLS + commands.TOOLS]
    if args.json:
        print(json.dumps([{"name": s.name, "description": s.description,
                           "parameters": s.parameters} for s in specs], indent=2))
        return 0
    for spec in specs:
        props = spec.parameters.get("properties", {})
        required = set(spec.parameters.get("required", []))
        params = ", ".join(p if p in required else f"[{p}]" for p in props)
        print(f"{spec.name}({params})\n    {spec.description}")
    return 0


def _trace_command(args: argparse.Namespace) -> int:
    from golem.trace import read_events, render
    if args.html:
        from golem.trace.html import write_report
        write_report(args.file, args.html)
        print(f"wrote {args.html}", file=sys.stderr)
        return 0
    from golem.trace.text import printable
    for record in read_events(args.file):
        text = render(record)
        if text:
            print(printable(text))
    return 0


def _undo_command(args: argparse.Namespace) -> int:
    from golem.workflow import runs
    root = os.path.realpath(args.dir)
    path = runs.find_run(root, args.run)
    restored, skipped = runs.undo(path, force=args.force)
    from golem.trace.text import printable
    for rel in restored:
        print(f"restored {printable(rel, newlines=False)}", file=sys.stderr)
    for rel in skipped:
        print(f"kept {printable(rel, newlines=False)}: it changed after the run (use -force "
              "to put it back anyway)", file=sys.stderr)
    print(f"undid run {os.path.basename(path)}: {len(restored)} path(s) put back"
          + (f", {len(skipped)} kept" if skipped else ""))
    return 1 if skipped else 0


HANDLERS = {"fix": _agent_command, "run": _agent_command, "ask": _agent_command,
            "tools": _tools_command, "verify": _verify_command, "trace": _trace_command, "undo": _undo_command}


def main(argv: list[str] | None = None) -> int:
    """Run golem with `argv` (default: sys.argv[1:]) and return the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and not argv[0].startswith("-") and argv[0] not in HANDLERS:
        close = difflib.get_close_matches(argv[0], list(HANDLERS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        print(f"golem: unknown command {argv[0]!r}{hint} (see golem --help)", file=sys.stderr)
        return 2
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    if not args.command:
        parser.print_help()
        return 2
    try:
        return HANDLERS[args.command](args)
    except UsageError as exc:
        from golem.trace.text import printable
        print(f"golem: {printable(str(exc), newlines=False)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("golem: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`golem tools | head`): not an error worth a traceback
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 0
