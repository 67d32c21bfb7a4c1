"""The command line: parse flags, build the pieces, turn every error into one line and an
exit code, in one place (`main`). The flags are in golem/cli/flags.py, the settings and where
they come from in golem/config/__init__.py, the smaller commands in golem/cli/commands.py."""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import os
import shutil
import signal
import sys
import unicodedata
from urllib.parse import urlsplit

from golem import config
from golem.core import signals
from golem.core.errors import Abort, UsageError
from golem.cli.flags import COMMANDS, build_parser, unknown
from golem.llm import KEYS, ProviderConfig, Secret, make_provider, provider_names

# the settings each command reads (config.SETTINGS); the rest do not apply to it
AGENT_SETTINGS = ["provider", "model", "base-url", "steps", "tokens", "wall", "cost", "price",
                  "sandbox", "max-tokens", "retries", "window", "context", "color", "quiet",
                  "verbose", "keep-runs", "keep-size"]
SETTINGS_OF = {"fix": AGENT_SETTINGS + ["test", "allow", "strict", "repeat", "env",
                                      "allow-change", "known-failing"],
               "run": AGENT_SETTINGS + ["test", "allow", "env"],
               "ask": AGENT_SETTINGS,
               "verify": ["test", "sandbox", "strict", "repeat", "color", "quiet", "verbose",
                          "env", "allow-change", "known-failing"],
               "pick": ["test", "sandbox", "strict", "repeat", "color", "quiet", "verbose",
                        "env", "allow-change", "known-failing"]}


def settings_for(args: argparse.Namespace) -> config.Effective:
    """The command's settings: flag, environment, repository, user, default."""
    names = SETTINGS_OF[args.command]
    flags = {name: getattr(args, name.replace("-", "_"), None) for name in names}
    for name in ("allow", "allow-change", "env", "known-failing"):    # repeatable
        if flags.get(name) is not None:
            flags[name] = [p for group in flags[name] for p in group]
    workspace = args.dir if os.path.isdir(args.dir) else None
    replay = getattr(args, "replay", None)
    recorded: dict[str, str] = {}
    if replay and os.path.isfile(replay):
        # a replay asks for what was recorded, unless a flag says otherwise
        from golem.llm.recording import recorded_identity
        provider, model = recorded_identity(replay)
        from golem.llm import PROVIDERS
        provider = provider if provider in PROVIDERS else None
        for name, value in (("provider", provider), ("model", model)):
            if name in names and value and flags.get(name) is None:
                flags[name] = recorded[name] = value
    settings = config.resolve(flags, workspace, names)
    for name in recorded:
        settings.origins[name] = f"-replay {replay}"
    return settings


def provider_config(settings: config.Effective, args: argparse.Namespace) -> ProviderConfig:
    """How to reach the provider: the key from the environment (only), checked."""
    name = settings["provider"]
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
                             "or try golem offline with golem demo")
        _check_key(variable, value)
        key = Secret(value) if value else None
    base_url = settings["base-url"]
    if base_url is not None:
        origin = settings.origin("base-url")
        _check_url("-base-url" if origin in ("flag", "default") else origin, base_url)
    return ProviderConfig(name=name, model=settings["model"], api_key=key, base_url=base_url,
                          max_attempts=settings["retries"] + 1,
                          max_tokens=settings["max-tokens"],
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


def check_output(flag: str, path: str | None) -> None:
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
    # what permissions cannot tell (a file system that takes no new files, such as /proc):
    # golem writes its outputs through a fresh file beside them, so try making one now
    probe = os.path.join(parent, f".{os.path.basename(path)[:100]}.golem-probe-{os.getpid()}")
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
        os.unlink(probe)
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot write a file in {parent} "
                         f"({exc.strerror or exc})") from None


def _options(args: argparse.Namespace, settings: config.Effective):
    from golem.agent.budget import Budget
    from golem.workflow.setup import Options
    if not os.path.isdir(args.dir):
        raise UsageError(f"workspace directory not found: {args.dir}")
    for flag in ("trace", "patch", "record", "result"):
        check_output(f"-{flag}", getattr(args, flag, None))
    replay = getattr(args, "replay", None)
    if replay and not (os.path.isfile(replay) and os.access(replay, os.R_OK)):
        raise UsageError(f"cannot read recording {replay}: no readable file there (write "
                         "one with -record FILE)")
    values = settings.values
    if values.get("quiet") and values.get("verbose"):
        raise UsageError(f"-quiet ({settings.origin('quiet')}) and -verbose "
                         f"({settings.origin('verbose')}) contradict each other; keep one")
    for program in values.get("allow") or []:
        if shutil.which(program) is None:
            where = "-allow" if settings.origin("allow") == "flag" else settings.origin("allow")
            raise UsageError(f"{where}: no program {program!r} on PATH; run_command could "
                             "never start it")
    budget = Budget(steps=values["steps"], tokens=values["tokens"], wall=values["wall"],
                    cost=values["cost"])
    options = Options(provider=provider_config(settings, args), dir=args.dir,
                      test=values.get("test"), budget=budget, allow=values.get("allow", []),
                      sandbox=values["sandbox"], trace=args.trace,
                      patch=getattr(args, "patch", None), window=values["window"],
                      context=values["context"], strict=values.get("strict", False),
                      repeat=values.get("repeat", 0), env=_env(values))
    return allowing_changes(options, values)


def _env(values: dict) -> dict[str, str]:
    """-env's variables, the user's own looked up now."""
    from golem.config.values import environment
    return environment(values.get("env") or [], dict(os.environ))


def allowing_changes(options, values: dict):
    """`options` carrying -allow-change (flag or user config): the files other tools run
    that the change may touch; and -known-failing: the tests the verdict is not judged on."""
    options.allow_change = list(values.get("allow-change") or [])
    options.known_failing = list(values.get("known-failing") or [])
    return options


def console_style(settings: config.Effective):
    from golem.trace.console import Style
    return Style(color=settings["color"], quiet=settings["quiet"], verbose=settings["verbose"])


def _agent_command(args: argparse.Namespace, undo_hint: bool = True) -> int:
    from golem.llm import prices
    from golem.trace import Trace
    from golem.workflow import fix, run
    from golem.workflow.fix import resolved
    settings = settings_for(args)
    options = _options(args, settings)
    options.undo_hint = undo_hint
    plan = _attempt_plan(args) if args.command == "fix" else None
    if plan and "single" in plan:
        index, _ = plan["single"]
        provider_name, model = plan["models"][(index - 1) % len(plan["models"])]
        options.provider = _attempt_config(options.provider, provider_name, model, index,
                                           plan["seed"])
        options.notes.append({"message": f"attempt {index}/{plan['single'][1]}: seed "
                              f"{options.provider.seed}", "seed": options.provider.seed})
    config_ = options.provider
    secrets = [config_.api_key] if config_.api_key else []
    result_path = resolved(getattr(args, "result", None))
    style = console_style(settings)
    if args.command == "ask" and not style.quiet:
        print(f"question: {' '.join(args.question)}", file=sys.stderr)
    checked = provider = None
    try:
        with Trace(options.trace, sys.stderr, secrets, style=style,
                   clock=(options.budget.started, options.budget.wall)) as trace:
            options.notes += [{"message": note} for note in settings.layers.notes]
            config_.on_retry = lambda info: trace.emit("retry", **info)
            config_.on_event = lambda kind, info: trace.emit(kind, **info)
            inner = make_provider(config_)
            pricing = prices.choose(config_.name, config_.model,
                                    getattr(inner, "base_url", None), settings["price"],
                                    "-price" if settings.origin("price") == "flag"
                                    else settings.origin("price"))
            provider = prices.Priced(inner, pricing)
            options.notes.append({"message": pricing.note or prices.no_price_warning(
                config_.name, config_.model, options.budget.cost), "cost_source": pricing.source})
            plan = _attempt_plan(args) if args.command == "fix" else None
            if plan and "count" in plan and (config_.record or config_.replay):
                raise UsageError("-record and -replay take one conversation; use them "
                                 "without -attempts")
            checked = _with_preflight(provider, config_)
            try:
                if hasattr(checked, "preflight"):
                    checked.preflight.arm()     # an abort from here on is reported
                if plan and "count" in plan:
                    report = _fix_attempts(options, plan, trace, secrets, settings)
                    line = report["summary"]
                elif args.command == "fix":
                    report = fix.fix(options, checked, trace, config_.model, secrets)
                    if plan:
                        report["attempt"] = "{}/{}".format(*plan["single"])
                        report["model"] = config_.model
                        report["seed"] = config_.seed
                    line = report["summary"]
                elif args.command == "run":
                    report = run.run_goal(options, checked, trace, config_.model, args.goal,
                                          secrets)
                    line = _answer_line(report)
                else:
                    report = run.ask(options, checked, trace, config_.model,
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
        if provider is not None:
            exc.report = {**(getattr(exc, "report", None) or {}),
                          "cost_source": provider.cost_source}
        return _interrupted(args, exc, options, secrets, result_path)
    finally:
        if checked is not None and hasattr(checked, "preflight"):
            checked.preflight.cancel()
    report.setdefault("cost_source", provider.cost_source)
    from golem.workflow import runs
    runs.record_result(report.get("run_id"), verdict=report.get("verdict"),
                       stop=report.get("stop"), cost=report.get("cost"))
    if args.command != "ask":
        return finish(args, report, line, secrets, result_path, style, trace.diff)
    tokens = report["tokens"]
    if not style.quiet:
        print(f"cost: {report['steps']} model call(s), {report['tool_calls']} tool call(s), "
              f"{tokens['prompt']} tokens in, {tokens['completion']} out, "
              f"${report['cost']:.4f}", file=sys.stderr)
    code = finish(args, report, line, secrets, result_path, style)
    if not style.quiet:
        print(f"({report['messages']} messages)", file=sys.stderr)
    return code


def _attempt_plan(args: argparse.Namespace) -> dict | None:
    """The attempts the flags ask for, or None for a plain single run; UsageError for
    flags that do not go together."""
    attempts, escalate, single = args.attempts, args.escalate, args.attempt
    if attempts < 1:
        raise UsageError("-attempts must be 1 or more")
    if args.jobs < 0:
        raise UsageError("-jobs must be 1 or more (0: one per attempt, at most 8)")
    if escalate and (args.models or attempts != 1 or single):
        raise UsageError("-escalate names the models itself; leave out -models, -attempts "
                         "and -attempt")
    if single and attempts != 1:
        raise UsageError("-attempt K/N runs one attempt; leave out -attempts")
    if args.models and attempts == 1 and not single:
        raise UsageError("-models names the models of several attempts: add -attempts N "
                         "(or give one model with -model)")
    if not (escalate or attempts > 1 or single or args.models or args.first):
        return None
    from golem.workflow.attempts import parse_models, seed_base
    names = provider_names()
    seed = seed_base()      # a new draw on every run; recorded in the trace and the result
    if escalate:
        models = parse_models(escalate, names)
        return {"models": models, "count": len(models), "jobs": 1, "first": True,
                "seed": seed}
    models = parse_models(args.models, names) if args.models else [(None, None)]
    if single:
        try:
            index, total = (int(part) for part in single.split("/"))
        except ValueError:
            raise UsageError(f"-attempt {single!r}: give K/N, like 2/3") from None
        if not 1 <= index <= total:
            raise UsageError(f"-attempt {single!r}: K must be between 1 and N")
        return {"models": models, "single": (index, total), "seed": seed}
    if attempts < 2 and args.first:
        raise UsageError("-first needs -attempts 2 or more (or -escalate)")
    # attempts mostly wait on the model: one job each (at most 8); the cores bound only the
    # verification runs (golem/workflow/attempts.py)
    jobs = args.jobs or min(attempts, MAX_JOBS)
    return {"models": models, "count": attempts, "jobs": min(jobs, attempts),
            "first": args.first, "seed": seed}


MAX_JOBS = 8     # attempts at once when -jobs is not given


def _attempt_config(base: ProviderConfig, provider: str | None, model: str | None,
                    index: int, seed: int) -> ProviderConfig:
    """The provider configuration of attempt `index`: its provider and model, a key for that
    provider from the environment, and a seed of its own (`seed` + `index`)."""
    name = provider or base.name
    config_ = dataclasses.replace(base, name=name, model=model or base.model,
                                  seed=seed + index, attempt=index, transport=None)
    if name != base.name:
        config_.base_url = None
        config_.model = model or config.DEFAULT_MODELS.get(name, "")
        config_.api_key = None
        if name in KEYS:
            variable, required = KEYS[name]
            value = os.environ.get(variable, "").strip()
            if required and not value:
                raise UsageError(f"{variable} is not set: export it to use {name}:"
                                 f"{config_.model} in -models")
            _check_key(variable, value)
            config_.api_key = Secret(value) if value else None
    return config_


def _fix_attempts(options, plan: dict, trace, secrets: list, settings) -> dict:
    """`golem fix -attempts N` (or -escalate): one priced provider per attempt, then the
    attempts."""
    from golem.llm import prices
    from golem.workflow.attempts import fix_attempts, make_specs
    base = options.provider
    origin = "-price" if settings.origin("price") == "flag" else settings.origin("price")
    sources = []

    def factory(provider: str | None, model: str | None, index: int):
        config_ = _attempt_config(base, provider, model, index, plan["seed"])
        if config_.api_key and config_.api_key not in secrets:
            secrets.append(config_.api_key)
        tagged = trace.tagged(index)
        config_.on_retry = lambda info: tagged.emit("retry", **info)
        config_.on_event = lambda kind, info: tagged.emit(kind, **info)
        inner = make_provider(config_)
        pricing = prices.choose(config_.name, config_.model, getattr(inner, "base_url", None),
                                settings["price"], origin)
        priced = prices.Priced(inner, pricing)
        sources.append(priced)
        checked = _with_preflight(priced, config_)
        if hasattr(checked, "preflight"):
            checked.preflight.arm()     # an attempt's failed preflight stops the run as before
        return checked

    specs = make_specs(plan["models"], plan["count"], factory)
    for spec in specs:
        spec.model = spec.model or base.model
        spec.seed = plan["seed"] + spec.index
    report = fix_attempts(options, specs, trace, secrets, jobs=plan["jobs"],
                          first=plan["first"])
    report["seed"] = plan["seed"]
    kinds = {p.cost_source for p in sources}
    report["cost_source"] = kinds.pop() if len(kinds) == 1 else "mixed"
    return report


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


def _with_preflight(provider, config_: ProviderConfig):
    """`provider` with its preflight started (beside the baseline), when it has one."""
    probe = getattr(provider, "probe", None)
    if probe is None or config_.replay:
        return provider
    from golem.llm.preflight import Checked, Preflight

    def on_event(kind: str, info: dict) -> None:
        if config_.on_event is not None:
            config_.on_event(kind, info)
    return Checked(provider, Preflight(provider.name, probe(), on_event=on_event).start())


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _interrupted(args: argparse.Namespace, exc: KeyboardInterrupt, options, secrets: list,
                 result_path: str | None) -> int:
    """Ctrl-C, SIGTERM or SIGHUP: the result so far (with -json), one line, 128 + signal."""
    signals.kill_strays()
    signum = getattr(exc, "signum", signal.SIGINT)
    name = _signal_name(signum)
    report = dict(getattr(exc, "report", None) or {})
    report.pop("exit_code", None)
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
                       ("trace", options.trace), ("cost_source", "unknown")):
        report.setdefault(key, value)
    try:
        clean = _outgoing(report, secrets)
        if result_path:
            _write_result(args, result_path, clean)
        if args.json:
            print(json.dumps(clean, default=str), flush=True)
        print(f"golem: interrupted by {name}", file=sys.stderr, flush=True)
    except (OSError, ValueError, UsageError):
        pass    # a terminal that hung up takes stdout and stderr with it
    return 128 + int(signum)


def _verify_command(args: argparse.Namespace) -> int:
    from golem.trace import Trace
    from golem.workflow.fix import resolved
    from golem.workflow.setup import Options
    from golem.workflow.verify import resolve_base, verify
    if not os.path.isdir(args.dir):
        raise UsageError(f"workspace directory not found: {args.dir}")
    for flag in ("trace", "result"):
        check_output(f"-{flag}", getattr(args, flag))
    resolve_base(os.path.realpath(args.dir), args.base)    # before anything runs
    settings = settings_for(args)
    values = settings.values
    options = Options(provider=ProviderConfig(name="none", model=""), dir=args.dir,
                      test=values["test"], sandbox=values["sandbox"], trace=args.trace,
                      strict=values["strict"], repeat=values["repeat"], env=_env(values))
    allowing_changes(options, values)
    style = console_style(settings)
    result_path = resolved(args.result)
    options.notes += [{"message": note} for note in settings.layers.notes]
    with Trace(options.trace, sys.stderr, style=style) as trace:
        report = verify(options, trace, args.base)
    return finish(args, report, report["summary"], (), result_path, style)


def _pick_command(args: argparse.Namespace) -> int:
    from golem.trace import Trace
    from golem.workflow.fix import resolved
    from golem.workflow.pick import pick
    from golem.workflow.setup import Options
    if not os.path.isdir(args.dir):
        raise UsageError(f"workspace directory not found: {args.dir}")
    for flag in ("trace", "result", "patch"):
        check_output(f"-{flag}", getattr(args, flag))
    settings = settings_for(args)
    values = settings.values
    options = Options(provider=ProviderConfig(name="none", model=""), dir=args.dir,
                      test=values["test"], sandbox=values["sandbox"], trace=args.trace,
                      strict=values["strict"], repeat=values["repeat"], env=_env(values))
    allowing_changes(options, values)
    style = console_style(settings)
    options.notes += [{"message": note} for note in settings.layers.notes]
    with Trace(options.trace, sys.stderr, style=style) as trace:
        report = pick(options, trace, args.results, print_only=args.print,
                      patch_path=resolved(args.patch))
    if not args.json and "diff" in report:
        sys.stdout.write(report.pop("diff"))
    return finish(args, report, report["summary"], (), resolved(args.result), style)


def _outgoing(report: dict, secrets) -> dict:
    """The result as it may leave golem: no key anywhere in it, no Infinity or NaN."""
    from golem.core.outgoing import cleaned
    return cleaned(report, secrets)


def _write_result(args: argparse.Namespace, path: str, report: dict) -> None:
    """-result FILE: the JSON object, written atomically and never through a link."""
    from golem.workflow.fix import write_output
    root = os.path.realpath(getattr(args, "dir", None) or ".")
    try:
        write_output(root, path, json.dumps(report, default=str, allow_nan=False) + "\n")
    except OSError as exc:
        raise UsageError(f"cannot write -result {path}: {exc.strerror or exc}") from None


def finish(args: argparse.Namespace, report: dict, line: str, secrets=(),
           result_path: str | None = None, style=None, diff: str | None = None) -> int:
    """Print the result line (and the JSON object), publish to CI, return the exit code."""
    from golem.core.outgoing import redact
    from golem.trace.console import verdict_line
    from golem.trace.text import printable
    from golem.workflow import github
    code = report.pop("exit_code")
    if code == 1 and report.get("stop") == "provider_error":
        code = 4    # the model could not be reached, which is not the model failing
    # file names and messages on stdout can carry a key found in the workspace
    report = _outgoing(report, secrets)
    line = redact(line, secrets)
    if args.command in ("fix", "verify", "demo", "pick"):
        diff = redact(diff, secrets) if diff else None
        github.publish(report, sys.stderr, diff)    # annotations reach the log however stdout goes
    if result_path:
        _write_result(args, result_path, report)
    # a verdict is one line, whatever test id or file name it quotes; an answer keeps its own
    line = printable(line, newlines=args.command not in ("fix", "verify", "demo", "pick"))
    print(verdict_line(line, report.get("verdict"), sys.stdout, style))
    if args.json:
        print(json.dumps(report, default=str, allow_nan=False))
    return code


def _help_command(args: argparse.Namespace) -> int:
    parser = build_parser()
    if not args.topic:
        parser.print_help()
        return 0
    if args.topic == "cli":     # the reference, as the package carries it
        from importlib import resources
        sys.stdout.write(resources.files("golem").joinpath("docs").joinpath("cli.md")
                         .read_text(encoding="utf-8"))
        return 0
    if args.topic not in COMMANDS:
        close = difflib.get_close_matches(args.topic, list(COMMANDS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UsageError(f"no command {args.topic!r}{hint} (golem help lists them)")
    from golem.cli.flags import subparser
    subparser(parser, args.topic).print_help()
    return 0


def _handlers() -> dict:
    from golem.cli import commands
    return {"fix": _agent_command, "run": _agent_command, "ask": _agent_command,
            "verify": _verify_command, "help": _help_command, "tools": commands.tools,
            "trace": commands.trace, "undo": commands.undo,
            "demo": lambda args: commands.demo(args, _agent_command),
            "runs": commands.runs, "config": commands.show_config, "pick": _pick_command}


def parse(argv: list[str]) -> argparse.Namespace:
    """The command and its flags; UsageError (one line) for anything golem does not take."""
    if argv and not argv[0].startswith("-") and argv[0] not in COMMANDS:
        close = difflib.get_close_matches(argv[0], list(COMMANDS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UsageError(f"unknown command {argv[0]!r}{hint} (see golem help)")
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:
        raise unknown(parser, args.command, extras)
    return args


def _unkeyed(text: str) -> str:
    """`text` with every provider key of the environment blanked, in any form: the last
    guard on a message that reaches stderr."""
    from golem.core.outgoing import redact
    keys = [os.environ.get(variable, "").strip() for variable, _ in KEYS.values()]
    return redact(text, [k for k in keys if k])


def main(argv: list[str] | None = None) -> int:
    """Run golem with `argv` (default: sys.argv[1:]) and return the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    from golem.trace.text import printable
    try:
        args = parse(argv)
    except UsageError as exc:
        print(f"golem: {printable(str(exc), newlines=False)}", file=sys.stderr)
        return 2
    except SystemExit as exc:     # --help and --version print and exit 0
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    if not args.command:
        build_parser().print_help(sys.stderr)
        return 2
    try:
        with signals.handled():     # SIGTERM and SIGHUP end a run the way Ctrl-C does
            try:
                return _handlers()[args.command](args)
            except (KeyboardInterrupt, Abort):
                signals.kill_strays()
                raise
            finally:
                from golem.workflow import runs
                runs.release_all()      # the command's runs have ended, however it ended
    except (UsageError, Abort) as exc:
        message = printable(_unkeyed(str(exc)), newlines=False)
        print(f"golem: {message}", file=sys.stderr)
        if args.command in ("fix", "verify", "pick", "run", "ask", "demo"):
            from golem.workflow import github
            github.publish_error(args.command, message, sys.stderr)
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
