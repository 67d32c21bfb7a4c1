"""The command line: parse flags, build the pieces, turn every error into one line and an
exit code, in one place (`main`)."""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import os
import signal
import sys
import unicodedata
from urllib.parse import urlsplit

from golem import __version__, signals
from golem.errors import Abort, UsageError
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
    _attempt_flags(fix)
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
    pick = command("pick", "re-verify the patches of attempts run elsewhere (a CI matrix) "
                   "and apply the first that verifies here")
    pick.add_argument("results", nargs="+", metavar="RESULT",
                      help="a -json result of `golem fix -attempt K/N -patch FILE`, its patch "
                           "beside it")
    _flag(pick, "dir", default=".", help="the workspace, a clean checkout (default .)")
    _flag(pick, "test", metavar="CMD", help="the suite (default: detected from the repo)")
    _flag(pick, "sandbox", default="auto", choices=["auto", "bwrap", "none"],
          help="OS isolation of the test runs (default auto)")
    _flag(pick, "print", action="store_true",
          help="print the chosen patch instead of applying it")
    _flag(pick, "trace", metavar="FILE", help="write the JSONL event stream here")
    _flag(pick, "json", action="store_true", help="print the result as one JSON object last")
    _flag(pick, "strict", action="store_true",
          help="REJECTED when the scan of a patch finds anything suspicious")
    _repeat_flag(pick)
    trace = command("trace", "render a recorded JSONL trace for a person")
    trace.add_argument("file", help="a trace written with -trace")
    _flag(trace, "html", metavar="OUT", help="write one self-contained HTML page to OUT")
    undo = command("undo", "put the workspace back as it was before a run")
    undo.add_argument("run", nargs="?", help="run id (default: the last run in -dir)")
    _flag(undo, "dir", default=".", help="the workspace (default .)")
    _flag(undo, "force", action="store_true",
          help="also put back files edited after the run (their later edits are lost)")
    return parser


def _attempt_flags(parser: argparse.ArgumentParser) -> None:
    _flag(parser, "attempts", type=int, default=1, metavar="N",
          help="N independent attempts in private copies, each verified; the best verified "
               "one is applied (default 1: the agent edits the workspace itself)")
    _flag(parser, "jobs", type=int, default=0, metavar="J",
          help="attempts at once (default: the number of cores, at most N)")
    _flag(parser, "models", metavar="A,B,...",
          help="models for the attempts, round robin; PROVIDER:MODEL picks a provider")
    _flag(parser, "first", action="store_true",
          help="stop the other attempts as soon as one is VERIFIED")
    _flag(parser, "escalate", metavar="A,B,...",
          help="attempts one after another, the next model only when the last did not "
               "verify")
    _flag(parser, "attempt", metavar="K/N",
          help="run only attempt K of N (one CI matrix job), in the workspace itself")


def _attempt_plan(args: argparse.Namespace) -> dict | None:
    """The attempts the flags ask for, or None for a plain single run; UsageError for
    flags that do not go together."""
    attempts, escalate = args.attempts, args.escalate
    single = args.attempt
    if attempts < 1:
        raise UsageError("-attempts must be 1 or more")
    if args.jobs < 0:
        raise UsageError("-jobs must be 1 or more (0: the number of cores)")
    if escalate and (args.models or attempts != 1 or single):
        raise UsageError("-escalate names the models itself; leave out -models, -attempts "
                         "and -attempt")
    if single and attempts != 1:
        raise UsageError("-attempt K/N runs one attempt; leave out -attempts")
    if not (escalate or attempts > 1 or single or args.models or args.first):
        return None
    from golem.workflow.attempts import parse_models
    names = provider_names()
    if escalate:
        models = parse_models(escalate, names)
        return {"models": models, "count": len(models), "jobs": 1, "first": True}
    models = parse_models(args.models, names) if args.models else [(None, None)]
    if single:
        try:
            index, total = (int(part) for part in single.split("/"))
        except ValueError:
            raise UsageError(f"-attempt {single!r}: give K/N, like 2/3") from None
        if not 1 <= index <= total:
            raise UsageError(f"-attempt {single!r}: K must be between 1 and N")
        return {"models": models, "single": (index, total)}
    if attempts < 2 and args.first:
        raise UsageError("-first needs -attempts 2 or more (or -escalate)")
    jobs = args.jobs or os.cpu_count() or 1
    return {"models": models, "count": attempts, "jobs": min(jobs, attempts),
            "first": args.first}


def _attempt_config(base: ProviderConfig, provider: str | None, model: str | None,
                    index: int) -> ProviderConfig:
    """The provider configuration of attempt `index`: its provider and model, a key for that
    provider from the environment, and a seed of its own."""
    name = provider or base.name
    config = dataclasses.replace(base, name=name, model=model or base.model, seed=index,
                                 attempt=index, transport=None)
    if name != base.name:
        config.base_url = None
        config.model = model or DEFAULT_MODELS.get(name, "")
        config.api_key = None
        if name in KEYS:
            variable, required = KEYS[name]
            value = os.environ.get(variable, "").strip()
            if required and not value:
                raise UsageError(f"{variable} is not set: export it to use {name}:"
                                 f"{config.model} in -models")
            _check_key(variable, value)
            config.api_key = Secret(value) if value else None
    return config


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
        _check_key(variable, value)
        key = Secret(value) if value else None
    if args.base_url is not None:
        _check_url("-base-url", args.base_url)
    elif name == "openai" and os.environ.get("OPENAI_BASE_URL"):
        _check_url("OPENAI_BASE_URL", os.environ["OPENAI_BASE_URL"])
    model = args.model or os.environ.get("GOLEM_MODEL") or DEFAULT_MODELS.get(name, "")
    if args.retries < 0:
        raise UsageError("-retries must be 0 or more")
    if args.max_tokens is not None and args.max_tokens <= 0:
        raise UsageError("-max-tokens must be 1 or more (leave it out for the provider's "
                         "default)")
    return ProviderConfig(name=name, model=model, api_key=key, base_url=args.base_url,
                          max_attempts=args.retries + 1, max_tokens=args.max_tokens,
                          record=getattr(args, "record", None), replay=replay,
                          replay_strict=getattr(args, "replay_strict", False))


def _check_key(variable: str, value: str) -> None:
    """A key is printable ASCII without spaces; say where it is not, never what it is."""
    for position, char in enumerate(value, 1):
        if not ("!" <= char <= "~"):
            name = unicodedata.name(char, "a control character")
            raise UsageError(f"{variable} holds U+{ord(char):04X} ({name.lower()}) at "
                             f"character {position} of {len(value)}: a key is printable "
                             "ASCII without spaces; copy it again")


def _check_url(where: str, url: str) -> None:
    """An endpoint is http or https with a host, and nothing a path can be appended to badly."""
    hint = "like https://openrouter.ai/api/v1 or http://127.0.0.1:8080/v1"
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in url):
        raise UsageError(f"{where} {url.strip()!r} has a space or a control character in it; "
                         f"give a URL {hint}")
    try:
        parts = urlsplit(url)
        port_ok = parts.port is None or 0 < parts.port
    except ValueError:
        parts, port_ok = None, False
    if parts is None or parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise UsageError(f"{where} {url!r} is not a URL golem can use: it needs http:// or "
                         f"https:// and a host, {hint}")
    if not port_ok:
        raise UsageError(f"{where} {url!r} has a bad port; give a URL {hint}")
    if parts.query or parts.fragment or url.rstrip().endswith(("?", "#")):
        raise UsageError(f"{where} {url!r} has a query or fragment; golem appends the API "
                         f"path to it, so give the base alone, {hint}")


def _check_output(flag: str, path: str | None) -> None:
    """An output file golem will write: its directory exists and is writable, and it is not
    a directory itself (found now, not after the run)."""
    if not path:
        return
    parent = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise UsageError(f"{flag} {path}: is a directory; give a file name")
    if not os.path.isdir(parent):
        raise UsageError(f"{flag} {path}: the directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {path}: the directory {parent} is not writable")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise UsageError(f"{flag} {path}: the file is not writable")


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
    for flag in ("trace", "patch", "record"):
        _check_output(f"-{flag}", getattr(args, flag, None))
    replay = getattr(args, "replay", None)
    if replay and not (os.path.isfile(replay) and os.access(replay, os.R_OK)):
        raise UsageError(f"cannot read recording {replay}: no readable file there (write "
                         "one with -record FILE)")
    from golem.agent.budget import Budget, parse_duration   # the agent loads only to run
    budget = Budget(steps=args.steps, tokens=args.tokens, wall=parse_duration(args.wall),
                    cost=args.cost)
    allow = [p.strip() for item in args.allow for p in item.split(",") if p.strip()]
    for program in allow:
        if "/" in program or "\0" in program:
            raise UsageError(f"-allow {program!r}: give a bare program name found on PATH, "
                             f"like {os.path.basename(program) or 'pytest'!r}")
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
    checked = None
    try:
        with Trace(options.trace, sys.stderr, secrets) as trace:
            config.on_retry = lambda info: trace.emit("retry", **info)
            config.on_event = lambda kind, info: trace.emit(kind, **info)
            plan = _attempt_plan(args) if args.command == "fix" else None
            if plan and "count" in plan and (config.record or config.replay):
                raise UsageError("-record and -replay take one conversation; use them "
                                 "without -attempts")
            if plan and "single" in plan:
                index, total = plan["single"]
                provider_name, model = plan["models"][(index - 1) % len(plan["models"])]
                config = options.provider = _attempt_config(config, provider_name, model,
                                                            index)
            provider = checked = _with_preflight(make_provider(config), config)
            try:
                if plan and "count" in plan:
                    report = _fix_attempts(options, plan, trace, secrets)
                    line = report["summary"]
                elif args.command == "fix":
                    report = fix.fix(options, provider, trace, config.model, secrets)
                    if plan and "single" in plan:
                        report["attempt"] = f"{plan['single'][0]}/{plan['single'][1]}"
                        report["model"] = config.model
                    line = report["summary"]
                elif args.command == "run":
                    report = run.run_goal(options, provider, trace, config.model, args.goal,
                                          secrets)
                    line = _answer_line(report)
                else:
                    report = run.ask(options, provider, trace, config.model,
                                     " ".join(args.question), secrets)
                    line = _answer_line(report)
            except Abort:   # the preflight failed while the baseline ran
                if hasattr(checked, "preflight"):
                    checked.preflight.report()
                raise
            except KeyboardInterrupt as exc:
                if trace.end is None:   # stopped before the agent loop ran
                    trace.emit("run_end", stop="interrupted", steps=0, tool_calls=0,
                               tokens={}, tokens_total=0, cost=None,
                               elapsed_s=round(options.budget.elapsed(), 3), claimed="",
                               error=None)
                elif not getattr(exc, "report", None):  # stopped after it (verification)
                    exc.report = _from_run_end(trace.end)
                raise
    except KeyboardInterrupt as exc:
        return _interrupted(args, exc, options, secrets)
    finally:
        if checked is not None and hasattr(checked, "preflight"):
            checked.preflight.cancel()
    if args.command != "ask":
        return _finish(args, report, line, secrets)
    tokens = report["tokens"]
    print(f"cost: {report['steps']} model call(s), {report['tool_calls']} tool call(s), "
          f"{tokens['prompt']} tokens in, {tokens['completion']} out, ${report['cost']:.4f}",
          file=sys.stderr)
    code = _finish(args, report, line, secrets)
    print(f"({report['messages']} messages)", file=sys.stderr)
    return code


def _fix_attempts(options, plan: dict, trace, secrets: list) -> dict:
    """`golem fix -attempts N` (or -escalate): one provider per attempt, then the attempts."""
    from golem.workflow.attempts import fix_attempts, make_specs
    base = options.provider

    def factory(provider: str | None, model: str | None, index: int):
        config = _attempt_config(base, provider, model, index)
        if config.api_key and config.api_key not in secrets:
            secrets.append(config.api_key)
        tagged = trace.tagged(index)
        config.on_retry = lambda info: tagged.emit("retry", **info)
        config.on_event = lambda kind, info: tagged.emit(kind, **info)
        return _with_preflight(make_provider(config), config)

    specs = make_specs(plan["models"], plan["count"], factory)
    for spec in specs:
        spec.model = spec.model or base.model
    return fix_attempts(options, specs, trace, secrets, jobs=plan["jobs"],
                        first=plan["first"])


def _from_run_end(end: dict) -> dict:
    """The result so far, as the trace's run_end event recorded it."""
    tokens = end.get("tokens") if isinstance(end.get("tokens"), dict) else {}
    prompt, completion = tokens.get("prompt") or 0, tokens.get("completion") or 0
    return {"steps": end.get("steps", 0), "tool_calls": end.get("tool_calls", 0),
            "tokens": {"prompt": prompt, "completion": completion,
                       "cached": tokens.get("cached") or 0, "total": prompt + completion},
            "cost": round(end.get("cost") or 0.0, 6), "elapsed_s": end.get("elapsed_s", 0.0),
            "claimed": end.get("claimed", ""), "error": end.get("error")}


def _answer_line(report: dict) -> str:
    """What `run` and `ask` print on stdout: the answer, or why there is none."""
    if report["stop"] in ("answered", "declined") and report["answer"]:
        return report["answer"]
    return f"(no answer: stop={report['stop']})"


def _with_preflight(provider, config: ProviderConfig):
    """`provider` with its preflight started (beside the baseline), when it has one."""
    probe = getattr(provider, "probe", None)
    if probe is None or config.replay:
        return provider
    from golem.llm.preflight import Checked, Preflight

    def on_event(kind: str, info: dict) -> None:
        if config.on_event is not None:
            config.on_event(kind, info)
    return Checked(provider, Preflight(provider.name, probe(), on_event=on_event).start())


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _interrupted(args: argparse.Namespace, exc: KeyboardInterrupt, options,
                 secrets: list) -> int:
    """Ctrl-C, SIGTERM or SIGHUP: the result so far (with -json), one line, 128 + signal."""
    signals.kill_strays()
    signum = getattr(exc, "signum", signal.SIGINT)
    name = _signal_name(signum)
    report = dict(getattr(exc, "report", None) or {})
    report.pop("exit_code", None)
    report.setdefault("stop", "interrupted")
    report.update(stop="interrupted")
    if args.command == "fix":
        report.setdefault("verdict", None)
        report["summary"] = f"interrupted by {name} before a verdict"
    else:
        report.setdefault("answered", False)
        report.setdefault("answer", "")
    for key, value in (("steps", 0), ("tool_calls", 0), ("cost", 0.0), ("error", None),
                       ("tokens", {"prompt": 0, "completion": 0, "cached": 0, "total": 0}),
                       ("elapsed_s", round(options.budget.elapsed(), 3)),
                       ("trace", options.trace)):
        report.setdefault(key, value)
    try:
        if args.json:
            print(json.dumps(_outgoing(report, secrets), default=str), flush=True)
        print(f"golem: interrupted by {name}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass    # a terminal that hung up takes stdout and stderr with it
    return 128 + int(signum)


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


def _pick_command(args: argparse.Namespace) -> int:
    from golem.trace import Trace
    from golem.workflow.pick import pick
    from golem.workflow.setup import Options
    if not os.path.isdir(args.dir):
        raise UsageError(f"workspace directory not found: {args.dir}")
    options = Options(provider=ProviderConfig(name="none", model=""), dir=args.dir,
                      test=args.test, sandbox=args.sandbox, trace=args.trace,
                      strict=args.strict, repeat=_check_repeat(args))
    with Trace(options.trace, sys.stderr) as trace:
        report = pick(options, trace, args.results, print_only=args.print)
    if not args.json and "diff" in report:
        sys.stdout.write(report.pop("diff"))
    return _finish(args, report, report["summary"])


def _outgoing(report: dict, secrets) -> dict:
    """The result as it may leave golem: no key anywhere in it, no Infinity or NaN."""
    from golem.outgoing import finite, redact_value
    return finite(redact_value(report, secrets))


def _finish(args: argparse.Namespace, report: dict, line: str, secrets=()) -> int:
    """Print the result line (and the JSON object), publish to CI, return the exit code."""
    from golem.outgoing import redact
    from golem.trace.text import printable
    from golem.workflow import github
    code = report.pop("exit_code")
    if code == 1 and report.get("stop") == "provider_error":
        code = 4    # the model could not be reached, which is not the model failing
    # file names and messages on stdout can carry a key found in the workspace
    report = _outgoing(report, secrets)
    line = redact(line, secrets)
    if args.command in ("fix", "verify", "pick"):
        github.publish(report, sys.stdout)
    print(printable(line))
    if args.json:
        print(json.dumps(report, default=str, allow_nan=False))
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
    from golem.outgoing import redact_value
    from golem.trace import read_events, render
    # golem's own traces hold no key; one written by something else might hold the key of
    # this environment, which is blanked out before anything is shown or cut
    secrets = [os.environ[v].strip() for v, _ in KEYS.values() if os.environ.get(v, "").strip()]
    if args.html:
        from golem.trace.html import write_report
        write_report(args.file, args.html, secrets)
        print(f"wrote {args.html}", file=sys.stderr)
        return 0
    from golem.trace.text import printable
    for record in redact_value(read_events(args.file), secrets):
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
            "tools": _tools_command, "verify": _verify_command, "trace": _trace_command,
            "undo": _undo_command, "pick": _pick_command}


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
        with signals.handled():     # SIGTERM and SIGHUP end a run the way Ctrl-C does
            try:
                return HANDLERS[args.command](args)
            except (KeyboardInterrupt, Abort):
                signals.kill_strays()
                raise
    except (UsageError, Abort) as exc:
        from golem.trace.text import printable
        print(f"golem: {printable(str(exc), newlines=False)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        signum = getattr(exc, "signum", signal.SIGINT)
        print(f"golem: interrupted by {_signal_name(signum)}", file=sys.stderr)
        return 128 + int(signum)
    except BrokenPipeError:
        # the reader went away (`golem tools | head`): not an error worth a traceback
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 0
