"""`golem trace FILE -html OUT`: a recorded run as one self-contained HTML page.

The page loads nothing: the styles are inline and there is no script (steps and tool results
fold with `<details>`). Every value that came from the model, the repository or a command
is escaped, so a file holding `<script>` shows up as text. The page is written to a
temporary file beside OUT and moved into place, so OUT is never half-written.
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
import os
import re
from typing import Any, Callable, Iterable

from golem.trace import encode
from golem.core.errors import UsageError
from golem.core.outgoing import redact_value
from golem.trace import read_events

Event = dict[str, Any]

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:72rem;padding:1rem 1.5rem;
 color:#1d1d1f;background:#fff}
h1{font-size:1.5rem;margin:.2rem 0}h2{font-size:1.1rem;margin:1.6rem 0 .5rem;
 border-bottom:1px solid #ddd}h3{font-size:1rem;margin:.4rem 0}
pre{background:#f6f6f6;padding:.5rem;overflow-x:auto;white-space:pre-wrap;
 word-break:break-word;margin:.3rem 0;font-size:12.5px}
table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:.25rem .6rem;
 text-align:left;vertical-align:top}th{background:#fafafa}
.verdict{display:inline-block;padding:.15rem .6rem;border-radius:.3rem;color:#fff;
 background:#666;font-weight:600}
.VERIFIED,.ALREADY_GREEN,.answered{background:#1a7f37}.FAILED,.REJECTED{background:#cf222e}
.grid{display:grid;grid-template-columns:1fr 1fr;gap:1rem}
.box{border:1px solid #ddd;border-radius:.3rem;padding:.5rem .8rem}
.step{border-left:3px solid #0969da;padding:.2rem .8rem;margin:.8rem 0}
.meta{color:#666;font-size:12.5px}.error{color:#9a6700;font-weight:600}
.add{color:#1a7f37}.del{color:#cf222e}.hunk{color:#8250df}.head{font-weight:600}
pre .add{background:#e6ffec;display:inline-block;width:100%}
pre .del{background:#ffebe9;display:inline-block;width:100%}
table.tests td{font-size:12.5px}tr.changed{background:#fff8c5}
ul.ids{margin:.2rem 0;padding-left:1.2rem;font-family:monospace;font-size:12.5px}
summary{cursor:pointer}
.attempts{display:grid;grid-template-columns:repeat(auto-fit,minmax(14rem,1fr));gap:1rem}
.chosen{border:2px solid #1a7f37}
@media (max-width:40rem){
 body{padding:.5rem .6rem}.grid,.attempts{grid-template-columns:1fr}
 table{display:block;overflow-x:auto;max-width:100%}td,th{padding:.2rem .4rem}
 code{word-break:break-all}}
"""


def e(value: Any) -> str:
    """Escape anything for HTML text or an attribute value (`golem.trace.encode.html`)."""
    return encode.html(value)


def split_runs(events: list[Event]) -> list[list[Event]]:
    """One list per run: a trace file is appended to, so it may hold several."""
    runs: list[list[Event]] = [[]]
    for record in events:
        # an attempt's own events (tagged with its number) never end the run they are part of
        kinds = {r["event"] for r in runs[-1] if "attempt" not in r}
        closed = "verdict" in kinds or ("run_end" in kinds and "baseline" not in kinds)
        restart = "run_end" in kinds and record["event"] in ("baseline", "run_start") and \
            "attempt" not in record
        if runs[-1] and (closed or restart):
            runs.append([])
        runs[-1].append(record)
    return runs


def _time(record: Event | None) -> _dt.datetime | None:
    try:
        return _dt.datetime.fromisoformat(str(record["time"])) if record else None
    except (KeyError, ValueError):
        return None


def _seconds(start: Event | None, end: Event | None) -> float | None:
    a, b = _time(start), _time(end)
    if a is None or b is None:
        return None
    try:
        return max(0.0, (b - a).total_seconds())
    except TypeError:       # one time with a zone, one without
        return None


def _dur(seconds: Any) -> str:
    try:
        seconds = float(seconds)
    except (TypeError, ValueError):
        return "?"
    return f"{seconds * 1000:.0f}ms" if seconds < 1 else f"{seconds:.1f}s"


def _first(run: list[Event], kind: str) -> Event | None:
    return next((r for r in run if r["event"] == kind), None)


def _last(run: list[Event], kind: str) -> Event | None:
    return next((r for r in reversed(run) if r["event"] == kind), None)


def _ids(title: str, ids: Iterable[Any]) -> str:
    ids = list(ids or [])
    if not ids:
        return ""
    items = "".join(f"<li>{e(i)}</li>" for i in ids)
    return f"<div><b>{e(title)}</b> ({len(ids)})<ul class=ids>{items}</ul></div>"


def _limit(value: Any, show: Callable[[float], str] = "{:,.0f}".format) -> str:
    try:
        return "no limit" if not value else e(show(float(value)))
    except (TypeError, ValueError, OverflowError):
        return e(value)


def _clock(value: float) -> str:
    """A wall budget as a person writes it: 90s, 30m, 1h30m."""
    seconds = int(value)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "") + \
        (f"{secs}s" if secs else "")
    return text or "0s"


def _phases(run: list[Event]) -> list[tuple[str, float]]:
    """How long the baseline, the agent and the verification took."""
    found = []
    for name, start, end in (("baseline", ("phase", "baseline"), ("baseline", None)),
                             ("agent", ("run_start", None), ("run_end", None)),
                             ("verification", ("phase", "verification"), ("verdict", None))):
        first = next((r for r in run if r["event"] == start[0]
                      and (start[1] is None or r.get("name") == start[1])), None)
        last = _last(run, end[0])
        took = _seconds(first, last) if first and last else None
        if took is not None:
            found.append((name, took))
    return found


def focus(run: list[Event]) -> int | None:
    """The attempt a run with several is about: the chosen one, else the one the verdict
    names as closest; None for a run of one."""
    verdict = _last(run, "verdict") or {}
    if not any(isinstance(r.get("attempt"), int) for r in run):
        return None
    if isinstance(verdict.get("chosen"), int):
        return verdict["chosen"]
    closest = re.search(r"closest, attempt (\d+)", str(verdict.get("summary") or ""))
    return int(closest.group(1)) if closest else None


def _header(run: list[Event]) -> str:
    verdict, end, start = _last(run, "verdict"), _last(run, "run_end"), _first(run, "run_start")
    number = focus(run)
    if number is not None:      # its model, budgets and stop: the attempt the verdict is about
        own = [r for r in run if r.get("attempt") == number]
        end, start = _last(own, "run_end") or end, _first(own, "run_start") or start
    if verdict:
        name, summary = verdict.get("verdict"), verdict.get("summary")
    elif end:
        name, summary = end.get("stop"), f"the run stopped: {end.get('stop')} (no verdict)"
    else:
        name, summary = "INCOMPLETE", "the trace ends before the run did"
    out = [f"<h1><span class='verdict {e(name)}'>{e(name)}</span></h1><p>{e(summary)}</p>"]
    rows = []
    began, ended = (run[0] if run else None), (run[-1] if run else None)
    when = _time(began)
    if when is not None:
        total = _seconds(began, ended)
        rows.append(("date", e(when.strftime("%Y-%m-%d %H:%M:%S %Z").strip())
                     + (f" (took {e(_dur(total))} in all)" if total is not None else "")))
    phases = _phases(run)
    if phases:
        rows.append(("durations", e(", ".join(f"{n} {_dur(t)}" for n, t in phases))))
    if number is not None:
        chosen = (verdict or {}).get("chosen") == number
        rows.append(("attempt", f"{e(number)} ({'chosen' if chosen else 'closest'}; "
                     "below: its provider, model, stop and spending)"))
    if start:
        budget = start.get("budget") or {}
        wall = budget.get("wall_s")
        kept = [r.get("reserve_s") for r in run if r.get("event") == "note"
                and isinstance(r.get("reserve_s"), (int, float))]
        if isinstance(wall, (int, float)) and kept:
            wall = round(wall + kept[0])    # -wall as given: the agent's share and the reserve
        rows += [("provider", e(start.get("provider"))), ("model", e(start.get("model"))),
                 ("budgets", f"steps {_limit(budget.get('steps'))}, tokens "
                  f"{_limit(budget.get('tokens'))}, wall {_limit(wall, _clock)}, "
                  f"cost {_limit(budget.get('cost'), '${:.2f}'.format)}")]
    if end:
        tokens = end.get("tokens") or {}
        try:
            cost = None if end.get("cost") is None else f"${float(end['cost']):.4f}"
        except (TypeError, ValueError):
            cost = str(end.get("cost"))
        rows += [("stop", e(end.get("stop"))), ("steps", e(end.get("steps"))),
                 ("tool calls", e(end.get("tool_calls"))),
                 ("tokens", f"{e(end.get('tokens_total'))} ({e(tokens.get('prompt'))} in, "
                  f"{e(tokens.get('completion'))} out)"),
                 ("cost", "not reported" if cost is None else e(cost)),
                 ("elapsed at the end of the agent run", e(_dur(end.get("elapsed_s"))))]
        if end.get("error"):
            rows.append(("error", f"<span class=error>{e(end['error'])}</span>"))
    notes = [r for r in run if r["event"] == "note"]
    rows += [("note", e(n.get("message"))) for n in notes]
    if rows:
        out.append("<table>" + "".join(f"<tr><th>{e(k)}</th><td>{v}</td></tr>"
                                       for k, v in rows) + "</table>")
    if start and start.get("task"):
        out.append(f"<details><summary>the task given to the model</summary>"
                   f"<pre>{e(start['task'])}</pre></details>")
    return "".join(out)


def _tests(run: list[Event]) -> str:
    before, after = _last(run, "baseline"), _last(run, "verification")
    if not before and not after:
        return ""
    cells = []
    for label, record in (("before", before), ("after", after)):
        if record is None:
            cells.append(f"<div class=box><h3>{label}</h3><p>not run</p></div>")
            continue
        counts = record.get("counts")
        parts = [", ".join(f"{e(n)} {e(k)}" for k, n in sorted(counts.items()))
                 if isinstance(counts, dict) else "exit code only"]
        if record.get("evidence"):
            parts.append(f"evidence: {e(record['evidence'])}")
        meta = "; ".join(p for p in parts if p)
        cells.append(f"<div class=box><h3>{label}</h3><p>{e(record.get('summary'))}</p>"
                     + (f"<p class=meta>{meta}</p>" if meta else "")
                     + _ids("failing", record.get("failing")) + "</div>")
    verdict = _last(run, "verdict") or {}
    graded = "".join(_ids(title, verdict.get(key)) for key, title in (
        ("fixed", "fixed"), ("still_failing", "still failing"),
        ("failing_before_untouched", "of those, failing before the same way, test code "
                                     "untouched"),
        ("newly_failing", "newly failing"), ("missing", "missing"),
        ("ran_changed_code", "ran code the change made in place of their own"),
        ("known_failing", "known failing, not judged")))
    return (f"<h2>Tests</h2><div class=grid>{''.join(cells)}</div>{graded}"
            + _outcome_table(_last(run, "outcomes")) + _baseline_output(run))


def _diff(text: str) -> str:
    rows = []
    for line in str(text).splitlines():
        kind = "hunk" if line.startswith("@@") else "head" if line.startswith(
            ("+++", "---", "diff --git")) else "add" if line.startswith("+") else "del" \
            if line.startswith("-") else ""
        rows.append(f"<span class={kind}>{e(line)}</span>" if kind else e(line))
    return "<pre>" + "\n".join(rows) + "</pre>"


def _stat(stat: Any) -> str:
    if not isinstance(stat, dict) or not stat:
        return ""
    rows = []
    for path, counts in sorted(stat.items()):
        plus, minus = counts if isinstance(counts, list) and len(counts) == 2 else ("?", "?")
        rows.append(f"<tr><td><code>{e(path)}</code></td><td class=add>+{e(plus)}</td>"
                    f"<td class=del>-{e(minus)}</td></tr>")
    return "<table>" + "".join(rows) + "</table>"


OUTCOME_CLASS = {"passed": "add", "failed": "del", "error": "del", "missing": "del"}


def _outcome_table(record: Event | None) -> str:
    """Every test with its outcome before and after the run, changed ones first."""
    if not record:
        return ""
    before, after = record.get("before"), record.get("after")
    if not isinstance(before, dict) and not isinstance(after, dict):
        return ""
    before = before if isinstance(before, dict) else {}
    after = after if isinstance(after, dict) else None
    ids = sorted(set(before) | set(after or {}))

    def cell(value: Any) -> str:
        text = "not run" if value is None else str(value)
        kind = OUTCOME_CLASS.get(text, "")
        return f"<td class={kind}>{e(text)}</td>" if kind else f"<td>{e(text)}</td>"
    rows = []
    for test in ids:
        old = before.get(test)
        new = after.get(test) if after is not None else None
        changed = after is not None and old != new
        rows.append((not changed, test, f"<tr{' class=changed' if changed else ''}>"
                     f"<td><code>{e(test)}</code></td>{cell(old)}"
                     f"{cell(new) if after is not None else '<td>-</td>'}</tr>"))
    rows.sort(key=lambda r: (r[0], r[1]))
    took = []
    for key, label in (("before_s", "before"), ("after_s", "after")):
        if record.get(key) is not None:
            took.append(f"{label} {_dur(record[key])}")
    return (f"<details open><summary>every test, before and after ({len(ids)}; changed "
            f"first{'; suite runs: ' + ', '.join(took) if took else ''})</summary>"
            "<table class=tests><tr><th>test</th><th>before</th><th>after</th></tr>"
            + "".join(r[2] for r in rows) + "</table></details>")


def _baseline_output(run: list[Event]) -> str:
    record = _last(run, "outcomes")
    if not record or record.get("baseline_passed") or not record.get("baseline_output"):
        return ""
    return ("<details><summary>the baseline's output (the suite before the run)</summary>"
            f"<pre>{e(record['baseline_output'])}</pre></details>")


def _claim(run: list[Event]) -> str:
    verdict, end = _last(run, "verdict"), _last(run, "run_end")
    claimed = (verdict or {}).get("claimed") or (end or {}).get("claimed") or ""
    if not verdict and not end:
        return ""
    evidence = [f"<p>{e(verdict.get('summary'))}</p>" if verdict else
                "<p>no verdict: golem does not judge this kind of run</p>"]
    if verdict:
        changed = verdict.get("changed_files") or []
        evidence.append(_ids("changed files", changed) or "<p>no files changed</p>")
        for item in verdict.get("protected_changes") or []:
            evidence.append(f"<p class=error>protected: {e(item.get('path'))}: "
                            f"{e(item.get('reason'))}</p>")
        for item in verdict.get("suspicious") or []:
            evidence.append(f"<p class=error>suspicious: {e(item.get('path'))}:"
                            f"{e(item.get('line'))} {e(item.get('kind'))}: "
                            f"{e(item.get('detail'))}</p>")
    out = ("<h2>The model's claim and golem's evidence</h2><div class=grid>"
           f"<div class=box><h3>the model said</h3><pre>{e(claimed) or '(nothing)'}</pre></div>"
           f"<div class=box><h3>golem found</h3>{''.join(evidence)}</div></div>")
    diff = _last(run, "diff")
    if diff and diff.get("text"):
        out += f"<h2>The allowed changes</h2>{_stat(diff.get('stat'))}{_diff(diff['text'])}"
        if diff.get("truncated"):
            out += "<p class=meta>the diff was cut short in the trace; -patch writes it whole</p>"
        for path in diff.get("held") or []:
            out += f"<p class=error>left out (protected): {e(path)}</p>"
    elif verdict and verdict.get("diff"):
        out += f"<h2>Diff</h2>{_diff(verdict['diff'])}"
    return out


def _steps(run: list[Event]) -> list[tuple[Event, list[Event]]]:
    steps: list[tuple[Event, list[Event]]] = []
    for record in run:
        if record["event"] == "request":
            steps.append((record, []))
        elif steps and record["event"] in ("response", "tool_call", "tool_result", "retry"):
            steps[-1][1].append(record)
    return steps


def _timeline(run: list[Event]) -> str:
    start = _first(run, "run_start")
    steps = _steps(run)
    if not steps:
        return ""
    out = ["<h2>Timeline</h2>"]
    ends = [request for request, _ in steps[1:]] + [_last(run, "run_end")]
    for (request, events), end in zip(steps, ends):
        response = next((r for r in events if r["event"] == "response"), None)
        usage = (response or {}).get("usage") or {}
        meta = (f"at +{_dur(_seconds(start, request))}, took {_dur(_seconds(request, end))} "
                f"(model {_dur(_seconds(request, response))}); tokens "
                f"{e(usage.get('prompt', '?'))} in, {e(usage.get('completion', '?'))} out")
        if response and response.get("finish") not in (None, "stop", "tool_calls"):
            meta += f"; finish: {e(response.get('finish'))}"
        body = []
        if response and response.get("content"):
            body.append(f"<pre>{e(response['content'])}</pre>")
        results = {r.get("id"): r for r in events if r["event"] == "tool_result"}
        for record in events:
            if record["event"] == "retry":
                body.append(f"<p class=error>provider retry: {e(record.get('error'))}</p>")
            if record["event"] != "tool_call":
                continue
            result = results.get(record.get("id"))
            try:
                args = json.dumps(record.get("arguments", {}), indent=1, ensure_ascii=False,
                                  default=repr)
            except (RecursionError, ValueError, TypeError):
                args = "(arguments nested too deeply to show)"
            body.append(f"<h3>{e(record.get('name'))}</h3><pre>{e(args)}</pre>")
            if result is not None:
                text = str(result.get("content", ""))
                flag = " <span class=error>error</span>" if result.get("error") else ""
                lines = len(text.splitlines())
                body.append(f"<details><summary>result ({lines} line{'' if lines == 1 else 's'})"
                            f"{flag}</summary><pre>{e(text)}</pre></details>")
        out.append(f"<div class=step><h3>step {e(request.get('step'))}</h3>"
                   f"<p class=meta>{meta}</p>{''.join(body)}</div>")
    return "".join(out)


def _attempt_order(run: list[Event]) -> list[int]:
    """The attempts of a `fix -attempts` run, the chosen one first, else in number order."""
    numbers = sorted({r["attempt"] for r in run if isinstance(r.get("attempt"), int)})
    chosen = (_last(run, "verdict") or {}).get("chosen")
    return sorted(numbers, key=lambda n: (n != chosen, n))


def _attempts(run: list[Event]) -> str:
    """The attempts side by side, the chosen one first."""
    verdict = _last(run, "verdict") or {}
    items = verdict.get("attempts")
    if not isinstance(items, list) or not items:
        return ""
    chosen = verdict.get("chosen")
    texts = {r.get("attempt"): r for r in run if r["event"] == "attempt"
             and isinstance(r.get("patch_text"), str)}
    items = sorted((i for i in items if isinstance(i, dict)),
                   key=lambda i: (i.get("attempt") != chosen, str(i.get("attempt"))))
    cards = []
    for item in items:
        name = item.get("verdict") or "none"
        chose = item.get("attempt") == chosen
        tokens = item.get("tokens") if isinstance(item.get("tokens"), dict) else {}
        cost = item.get("cost")
        dollars = f"${cost:.4f}" if isinstance(cost, (int, float)) else "$?"
        protected = "".join(f"<p class=error>protected: {e(p.get('path'))}</p>"
                            for p in item.get("protected_changes") or [] if isinstance(p, dict))
        patch = _patch_links(item, texts.get(item.get("attempt")))
        cards.append(
            f"<div class='box{' chosen' if chose else ''}'><h3>attempt {e(item.get('attempt'))}"
            f"{' (chosen)' if chose else ''}: {e(item.get('model'))}</h3>"
            f"<p><span class='verdict {e(name)}'>{e(name)}</span></p>"
            f"<p>{e(item.get('summary'))}</p><p class=meta>stop {e(item.get('stop'))}; "
            f"{e(item.get('steps'))} steps; {e(tokens.get('total', 0))} tokens; "
            f"{e(dollars)}; {e(item.get('lines_changed'))} lines changed</p>"
            f"{_stat(item.get('diffstat'))}{protected}{patch}</div>")
    patches = "".join(
        f"<details id='patch-{e(n)}'><summary>attempt {e(n)}: its patch</summary>"
        f"{_diff(r['patch_text'])}"
        + ("<p class=meta>cut short in the trace; the file holds it whole</p>"
           if r.get("patch_truncated") else "") + "</details>"
        for n, r in sorted(texts.items(), key=lambda pair: str(pair[0])) if r["patch_text"])
    return (f"<h2>Attempts</h2><div class=attempts>{''.join(cards)}</div>"
            + (f"<h2>The attempts' patches</h2>{patches}" if patches else ""))


def _patch_links(item: Event, recorded: Event | None) -> str:
    """Where an attempt's patch is: in this page (from the trace, so the link holds after
    its run's directory is gone), as a download, and the file while it still exists."""
    links = []
    number = item.get("attempt")
    text = (recorded or {}).get("patch_text")
    if text:
        data = base64.b64encode(text.encode("utf-8", "surrogateescape")).decode("ascii")
        links += [f"<a href='#patch-{e(number)}'>shown below</a>",
                  f"<a download='attempt-{e(number)}.patch' "
                  f"href='data:text/x-diff;base64,{data}'>download</a>"]
    path = item.get("patch")
    if isinstance(path, str) and path:
        if os.path.isfile(path):
            links.append(f"<a href='{e(_file_url(path))}'>{e(path)}</a>")
        else:
            links.append(f"{e(path)} (removed with its run)")
    return f"<p class=meta>patch: {'; '.join(links)}</p>" if links else ""


def _file_url(path: str) -> str:
    from urllib.parse import quote
    from urllib.request import pathname2url
    return "file://" + quote(pathname2url(os.path.abspath(path)), safe="/%:")


def _timelines(run: list[Event]) -> str:
    """The timeline; one per attempt (the chosen first) when the run had several."""
    order = _attempt_order(run)
    if not order:
        return _timeline(run)
    out = []
    for number in order:
        own = [r for r in run if r.get("attempt") == number or r["event"] == "run_start"]
        body = _timeline(own)
        if body:
            out.append(body.replace("<h2>Timeline</h2>",
                                    f"<h2>Timeline of attempt {number}</h2>", 1))
    return "".join(out)


def page(events: list[Event], source: str = "") -> str:
    """The whole HTML page for the events of one trace file."""
    runs = split_runs(events)
    sections = []
    for number, run in enumerate(runs, 1):
        title = f"<h2>Run {number} of {len(runs)}</h2>" if len(runs) > 1 else ""
        sections.append(f"<section>{title}{_header(run)}{_attempts(run)}{_tests(run)}"
                        f"{_claim(run)}{_timelines(run)}</section>")
    verdict = _last(runs[-1], "verdict")
    name = (verdict or {}).get("verdict") or ((_last(runs[-1], "run_end") or {}).get("stop"))
    return ("<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
            "<meta name=viewport content='width=device-width,initial-scale=1'>"
            f"<title>golem: {e(name or 'trace')} {e(os.path.basename(source))}</title>"
            f"<style>{STYLE}</style></head><body>{''.join(sections)}"
            f"<p class=meta>rendered by golem trace -html from {e(source)}</p></body></html>\n")


def write_report(trace_path: str, out_path: str, secrets: Iterable[str] = ()) -> None:
    """Render the trace at `trace_path` to `out_path`, atomically; UsageError on bad input.

    `secrets` are blanked out of every event before anything is rendered."""
    from golem.tools.tree import write_output
    text = page(redact_value(read_events(trace_path), secrets), trace_path)
    try:
        # a fresh temporary name (O_EXCL, O_NOFOLLOW) renamed over the output: never a write
        # through a link planted beside it
        write_output(out_path, text.encode("utf-8", errors="replace").decode("utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot write {out_path}: {exc.strerror}") from None
