"""GitHub Actions integration: a Markdown step summary and `::error` annotations.

Every value from the run (the model's words, file names, test ids, reasons) is encoded for
where it goes by `golem.trace.encode`: inert Markdown in the summary, escaped data and properties
in the workflow commands.
"""

from __future__ import annotations

import os
from typing import TextIO

from golem.trace import encode
from golem.tools.tree import open_append
from golem.trace.text import printable

CLAIM = 500     # characters of the model's final text shown in the summary
DIFF = 60_000   # characters of the diff shown in the summary (GitHub keeps 1 MiB of it)


def annotate(report: dict, out: TextIO) -> None:
    """`::error` lines for tests still failing, newly failing or missing, and protected files;
    `::warning` lines for suspicious findings. A test id or a file name cannot end the
    command or start another."""
    data, prop = encode.command_data, encode.command_property
    for key, label in (("still_failing", "still failing"), ("newly_failing", "newly failing"),
                       ("missing", "went missing"),
                       ("ran_changed_code", "ran code the change made in place of its own")):
        for test in report.get(key) or []:
            out.write(f"::error title=golem: test {label}::{data(test)}\n")
    for item in report.get("protected_changes") or []:
        out.write(f"::error file={prop(item['path'])},title=golem: protected file "
                  f"changed::{data(item['reason'])}\n")
    for item in report.get("suspicious") or []:   # advice: a warning, not an error
        out.write(f"::warning file={prop(item['path'])},line={prop(item['line'])},"
                  f"title=golem: suspicious {prop(item['kind'])}::{data(item['detail'])}\n")


def summary_markdown(report: dict, diff: str | None = None) -> str:
    """The step summary: golem's own words as Markdown, everything from the run inert, and
    the diff of the change (`diff`), collapsed."""
    text, code = encode.markdown, encode.code
    before = (report.get("tests") or {}).get("before") or {}
    after = (report.get("tests") or {}).get("after") or {}
    lines = [f"### golem: {text(report.get('verdict'))}", "", text(report.get("summary", "")),
             "", "| | before | after |", "|---|---|---|",
             f"| failing tests | {len(before.get('failing') or [])} | "
             f"{len(after.get('failing') or []) if after else '-'} |"]
    if "cost" in report:
        tokens = report.get("tokens") or {}
        lines += ["", f"Cost: ${_number(report['cost']):.4f}, "
                      f"{_number(tokens.get('total')):.0f} tokens, "
                      f"{_number(report.get('steps')):.0f} steps."]
    for key, label in (("fixed", "Fixed"), ("still_failing", "Still failing"),
                       ("failing_before_untouched", "Of those, failing before the same way, "
                                                    "their test code untouched"),
                       ("newly_failing", "Newly failing"), ("missing", "Missing"),
                       ("ran_changed_code", "Ran code the change made in place of their own"),
                       ("known_failing", "Known failing, not judged (-known-failing)")):
        if report.get(key):
            lines += ["", f"**{label}:**"] + [f"- {code(t)}" for t in report[key][:50]]
    if report.get("protected_changes"):
        lines += ["", "**Protected files changed:**"] + [
            f"- {code(p.get('path'))}: {text(p.get('reason'))}"
            for p in report["protected_changes"]]
    if report.get("suspicious"):
        lines += ["", "**Suspicious (advisory):**"] + [
            f"- {code(str(item.get('path')) + ':' + str(item.get('line')))} "
            f"{text(item.get('kind'))}: {text(item.get('detail'))}"
            for item in report["suspicious"][:50]]
    if report.get("claimed"):
        claim = " ".join(str(report["claimed"]).split())
        cut = claim[:CLAIM] + ("..." if len(claim) > CLAIM else "")
        lines += ["", f"**The model claimed** (golem's evidence is above): {text(cut)}"]
    stat = report.get("diffstat") or {}
    if stat:
        lines += ["", "| file | + | - |", "|---|---|---|"] + [
            f"| {code(path, cell=True)} | {_counts(counts)[0]} | {_counts(counts)[1]} |"
            for path, counts in sorted(stat.items())]
    elif report.get("changed_files"):
        lines += ["", f"Changed files: {len(report['changed_files'])}"]
    if diff:
        lines += ["", *collapsed_diff(diff)]
    return "\n".join(lines) + "\n"


def collapsed_diff(diff: str) -> list[str]:
    """The diff as a `<details>` block holding an HTML `<pre>`: every character of the
    change that HTML or Markdown acts on is a character reference, so nothing in it can
    open a tag, close the block or end the `<pre>` early."""
    shown = diff[:DIFF]
    more = "" if len(diff) <= DIFF else (f"\n... {len(diff) - DIFF} more character(s): "
                                         "-patch FILE writes it whole")
    body = "\n".join(encode.html(printable(text)).replace("`", "&#96;")
                      .replace("|", "&#124;").replace("\\", "&#92;")
                      for text in (shown + more).split("\n"))
    added = sum(1 for text in shown.split("\n") if text.startswith("+")
                and not text.startswith("+++"))
    removed = sum(1 for text in shown.split("\n") if text.startswith("-")
                  and not text.startswith("---"))
    # a blank line after <summary> and before </details>: GitHub renders the block as HTML
    return [f"<details><summary>The diff (+{added} -{removed})</summary>", "",
            f"<pre>{body}</pre>", "", "</details>"]


def _number(value) -> float:
    try:
        return float(value or 0)
    except (TypeError, ValueError, OverflowError):
        return 0.0


def _counts(counts) -> tuple[int, int]:
    try:
        added, removed = counts
        return int(added), int(removed)
    except (TypeError, ValueError):
        return 0, 0


def publish(report: dict, out: TextIO, diff: str | None = None) -> None:
    """Annotate under GitHub Actions; append the step summary wherever one is asked for."""
    if os.environ.get("GITHUB_ACTIONS") == "true":
        annotate(report, out)
    _append_summary(summary_markdown(report, diff))


def publish_error(command: str, message: str, out: TextIO) -> None:
    """A command that stopped before it could run (a missing key, a bad flag): under GitHub
    Actions an `::error` line, and a step summary saying why, so the job's page shows it."""
    if os.environ.get("GITHUB_ACTIONS") != "true":
        return
    out.write(f"::error title=golem {encode.command_property(command)} did not run::"
              f"{encode.command_data(message)}\n")
    _append_summary(f"### golem {encode.markdown(command)}: did not run\n\n"
                    f"{encode.markdown(message)}\n")


def _append_summary(text: str) -> None:
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if path:
        try:
            with open_append(path) as handle:      # never through a link
                handle.write(printable(text))
        except OSError:
            pass  # a summary we cannot write must not change the verdict
