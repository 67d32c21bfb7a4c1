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


def annotate(report: dict, out: TextIO) -> None:
    """`::error` lines for tests still failing, newly failing or missing, and protected files;
    `::warning` lines for suspicious findings. A test id or a file name cannot end the
    command or start another."""
    data, prop = encode.command_data, encode.command_property
    for key, label in (("still_failing", "still failing"), ("newly_failing", "newly failing"),
                       ("missing", "went missing")):
        for test in report.get(key) or []:
            out.write(f"::error title=golem: test {label}::{data(test)}\n")
    for item in report.get("protected_changes") or []:
        out.write(f"::error file={prop(item['path'])},title=golem: protected file "
                  f"changed::{data(item['reason'])}\n")
    for item in report.get("suspicious") or []:   # advice: a warning, not an error
        out.write(f"::warning file={prop(item['path'])},line={prop(item['line'])},"
                  f"title=golem: suspicious {prop(item['kind'])}::{data(item['detail'])}\n")


def summary_markdown(report: dict) -> str:
    """The step summary: golem's own words as Markdown, everything from the run inert."""
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
                       ("newly_failing", "Newly failing"), ("missing", "Missing")):
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
    return "\n".join(lines) + "\n"


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


def publish(report: dict, out: TextIO) -> None:
    """Annotate under GitHub Actions; append the step summary wherever one is asked for."""
    if os.environ.get("GITHUB_ACTIONS") == "true":
        annotate(report, out)
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if path:
        try:
            with open_append(path) as handle:      # never through a link
                handle.write(printable(summary_markdown(report)))
        except OSError:
            pass  # a summary we cannot write must not change the verdict
