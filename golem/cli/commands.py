"""The commands around a run: `tools`, `trace`, `undo`, `runs`, `config` and `demo`."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Callable

from golem import config
from golem.core.errors import UsageError
from golem.llm import KEYS
from golem.trace.text import printable


def tools(args: argparse.Namespace) -> int:
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


def trace(args: argparse.Namespace) -> int:
    from golem.core.outgoing import redact_value
    from golem.trace import read_events, render
    # golem's own traces hold no key; one written by something else might hold the key of
    # this environment, which is blanked out before anything is shown or cut
    secrets = [os.environ[v].strip() for v, _ in KEYS.values() if os.environ.get(v, "").strip()]
    if args.html:
        from golem.trace.html import write_report
        write_report(args.file, args.html, secrets)
        print(f"wrote {args.html}", file=sys.stderr)
        return 0
    from golem.trace.console import Console, Style
    console = Console(sys.stdout, Style(color="never"), replay=True)
    for record in redact_value(read_events(args.file), secrets):
        text = render(record)
        console.show(record, None if text is None else printable(text))
    console.close()
    return 0


def undo(args: argparse.Namespace) -> int:
    from golem.workflow import runs
    root = os.path.realpath(args.dir)
    path = runs.find_run(root, args.run)
    restored, skipped = runs.undo(path, force=args.force)
    for rel in restored:
        print(f"restored {printable(rel, newlines=False)}", file=sys.stderr)
    for rel in skipped:
        print(f"kept {printable(rel, newlines=False)}: it changed after the run (use -force "
              "to put it back anyway)", file=sys.stderr)
    print(f"undid run {os.path.basename(path)}: {len(restored)} path(s) put back"
          + (f", {len(skipped)} kept" if skipped else ""))
    return 1 if skipped else 0


def runs(args: argparse.Namespace) -> int:
    """`golem runs [-prune] [-json]`: the kept runs, newest first, and the policy."""
    from golem.workflow import retention
    keep_runs, keep_size = retention.policy()
    if args.prune:
        done = retention.prune(keep_runs, keep_size)
        print(f"pruned {len(done.runs)} run(s) and {done.stored} stored file(s), "
              f"{config.show('keep-size', done.freed) if done.freed else '0 B'} freed",
              file=sys.stderr)
    found = retention.list_runs()
    freed = retention.sizes(found)
    rows = [{"id": r.id, "workspace": r.workspace, "started": _when(r.started),
             "command": r.command, "verdict": _verdict(r), "size": freed[r.id],
             "undone": r.undone} for r in found]
    if args.json:
        print(json.dumps(rows))
        return 0
    policy = (f"keeping the newest {keep_runs or 'unlimited'} run(s) and at most "
              f"{config.show('keep-size', keep_size)} (settings keep-runs, keep-size)")
    if not rows:
        print(f"no runs kept in {os.path.join(_state(), 'runs')}; {policy}")
        return 0
    table = [("ID", "WORKSPACE", "STARTED", "COMMAND", "VERDICT", "SIZE")] + [
        (r["id"], r["workspace"], r["started"], r["command"], r["verdict"],
         config.show("keep-size", r["size"]) if r["size"] else "0 B") for r in rows]
    widths = [max(len(printable(str(row[i]), newlines=False)) for row in table)
              for i in range(6)]
    for row in table:
        print("  ".join(printable(str(v), newlines=False).ljust(w)
                        for v, w in zip(row, widths)).rstrip())
    kept = retention.footprint(found)
    size = lambda n: config.show("keep-size", n) if n else "0 B"      # noqa: E731
    print(f"{len(rows)} run(s), {size(kept.total)} in {_state()} (runs {size(kept.runs)}, "
          f"content store {size(kept.store)} of which {size(kept.unreferenced)} no run "
          f"refers to, bytecode cache {size(kept.pycache)}); {policy}", file=sys.stderr)
    return 0


def _state() -> str:
    from golem.workflow.runs import state_dir
    return state_dir()


def _when(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(seconds)) if seconds else "?"


def _verdict(run) -> str:
    if run.damaged:
        return "(damaged)"
    text = run.verdict or ("(running)" if run.in_progress else "(interrupted)")
    return text + (" (undone)" if run.undone else "")


def show_config(args: argparse.Namespace) -> int:
    """`golem config [-dir DIR] [-json]`: every setting, its value and where it came from."""
    if not os.path.isdir(args.dir):
        raise UsageError(f"workspace directory not found: {args.dir}")
    settings = config.resolve({}, os.path.realpath(args.dir))
    from golem.llm import prices
    from golem.workflow.runs import state_dir
    rows = [(name, config.show(name, settings[name]), settings.origin(name))
            for name in config.SETTINGS]
    if settings["test"] is None:
        # what `fix` would run, found the way it finds it
        from golem.workflow.verifier.suite import detect
        try:
            found = detect(os.path.realpath(args.dir))
            shown = (found.text, found.origin)
        except UsageError:
            shown = ("(none)", "nothing to detect it from: fix needs -test")
        rows = [("test", *shown) if name == "test" else (name, value, origin)
                for name, value, origin in rows]
    provider = settings["provider"]
    pricing = prices.choose(provider, settings["model"], settings["base-url"], settings["price"])
    rows.append(("cost source", pricing.source, pricing.note.removeprefix("price: ")
                 or prices.no_price_warning(provider, settings["model"], settings["cost"])))
    if provider in KEYS:
        variable, required = KEYS[provider]
        present = bool(os.environ.get(variable, "").strip())
        rows.append(("key", f"{variable} {'set' if present else 'not set'}",
                     "environment (never a file or a flag)"))
    state_origin = "environment (GOLEM_STATE_DIR)" if os.environ.get("GOLEM_STATE_DIR") \
        else "environment (XDG_STATE_HOME)" if os.environ.get("XDG_STATE_HOME") else "default"
    rows.append(("state dir", state_dir(), state_origin))
    layers = settings.layers
    files = {"user": layers.user_file if os.path.exists(layers.user_file) else None,
             "repository": layers.repo_file}
    if args.json:
        print(json.dumps({"settings": {n: {"value": v, "from": o} for n, v, o in rows},
                          "files": files, "notes": layers.notes}, default=str))
        return 0
    width = max(len(name) for name, _, _ in rows)
    value_width = min(40, max(len(value) for _, value, _ in rows))
    for name, value, origin in rows:
        print(f"{name.ljust(width)}  {printable(value, newlines=False).ljust(value_width)}  "
              f"{printable(origin, newlines=False)}")
    print(f"files: {layers.user_file} ({'read' if files['user'] else 'absent'}), "
          f"{os.path.join(os.path.realpath(args.dir), 'pyproject.toml')} [tool.golem] "
          f"({'read' if files['repository'] else 'absent'})", file=sys.stderr)
    for note in layers.notes:
        print(f"note: {printable(note, newlines=False)}", file=sys.stderr)
    return 0


def demo(args: argparse.Namespace, agent_command: Callable[..., int]) -> int:
    """`golem demo [-dir DIR] [-attempts N]`: the bundled broken calculator, fixed offline by
    the scripted model, in a temporary copy (removed afterwards, with its run) or in DIR
    (kept); with -attempts, N scripted attempts of which the verified one is chosen.
    `agent_command` is the CLI's `fix` (the CLI dispatches here, so it passes it in)."""
    from golem.llm.demo import copy_example
    from golem.cli.flags import build_parser
    keep = args.dir
    if keep and os.path.lexists(keep):
        raise UsageError(f"-dir {keep}: already exists; give a new directory for the copy")
    if keep and not os.path.isdir(os.path.dirname(os.path.abspath(keep))):
        raise UsageError(f"-dir {keep}: its parent directory does not exist")
    tmp = None if keep else tempfile.mkdtemp(prefix="golem-demo-")
    saved = os.environ.get("GOLEM_STATE_DIR")
    try:
        target = copy_example(keep or os.path.join(tmp, "broken-calculator"))
        argv = ["fix", "-dir", target, "-provider", "demo", "-sandbox", "auto"]
        for flag in ("trace",):
            if getattr(args, flag):
                argv += [f"-{flag}", getattr(args, flag)]
        for switch in ("json", "quiet", "verbose"):
            if getattr(args, switch):
                argv.append(f"-{switch}")
        if args.color:
            argv += ["-color", args.color]
        if args.attempts > 1:
            argv += ["-attempts", str(args.attempts)]
        fix_args = build_parser().parse_args(argv)
        fix_args.command = "fix"
        if tmp:     # the copy goes, and so does its run: nothing to undo afterwards
            os.environ["GOLEM_STATE_DIR"] = os.path.join(tmp, "state")
        if keep and not args.quiet:
            print(f"copied the example to {target}", file=sys.stderr)
        code = agent_command(fix_args, undo_hint=bool(keep))
        if keep and not args.quiet:
            print(f"the fixed copy stays in {target}; `golem undo -dir {target}` puts the "
                  "bugs back", file=sys.stderr)
        return code
    finally:
        if tmp:
            if saved is None:
                os.environ.pop("GOLEM_STATE_DIR", None)
            else:
                os.environ["GOLEM_STATE_DIR"] = saved
            shutil.rmtree(tmp, ignore_errors=True)
