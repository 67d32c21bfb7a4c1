"""GitHub Actions integration: a Markdown step summary and `::error` annotations."""

from __future__ import annotations

import os
from typing import TextIO

from golem.tools.tree import open_append
from golem.trace.text import printable


def _escape(text: str) -> str:
    """Workflow-command data escaping (%, CR, LF), so a test id cannot inject a command;
    other control characters and undecodable bytes become visible escapes."""
    text = printable(text.replace("%", "%25"))
    return text.replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape(text).replace(":", "%3A").replace(",", "%2C")


def annotate(report: dict, out: TextIO) -> None:
    """`::error` lines for tests still failing, newly failing or missing, and protected files;
    `::warning` lines for suspicious findings."""
    for key, label in (("still_failing", "still failing"), ("newly_failing", "newly failing"),
                       ("missing", "went missing")):
        for test in report.get(key) or []:
            out.write(f"::error title=golem: test {label}::{_escape(test)}\n")
    for item in report.get("protected_changes") or []:
        out.write(f"::error file={_escape_property(item['path'])},title=golem: protected file "
                  f"changed::{_escape(item['reason'])}\n")
    for item in report.get("suspicious") or []:   # advice: a warning, not an error
        out.write(f"::warning file={_escape_property(str(item['path']))},"
                  f"line={_escape_property(str(item['line']))},title=golem: suspicious "
                  f"{_escape_property(str(item['kind']))}::{_escape(str(item['detail']))}\n")


def summary_markdown(report: dict) -> str:
    before = (report.get("tests") or {}).get("before") or {}
    after = (report.get("tests") or {}).get("after") or {}
    lines = [f"### golem: {report.get('verdict')}", "", report.get("summary", ""), "",
             "| | before | after |", "|---|---|---|",
             f"| failing tests | {len(before.get('failing') or [])} | "
             f"{len(after.get('failing') or []) if after else '-'} |"]
    if "cost" in report:
        tokens = report.get("tokens") or {}
        lines += ["", f"Cost: ${report['cost']:.4f}, {tokens.get('total', 0)} tokens, "
                      f"{report.get('steps', 0)} steps."]
    for key, label in (("fixed", "Fixed"), ("still_failing", "Still failing"),
                       ("newly_failing", "Newly failing"), ("missing", "Missing")):
        if report.get(key):
            lines += ["", f"**{label}:**"] + [f"- `{t}`" for t in report[key][:50]]
    if report.get("protected_changes"):
        lines += ["", "**Protected files changed:**"] + [
            f"- `{p['path']}`: {p['reason']}" for p in report["protected_changes"]]
    if report.get("suspicious"):
        lines += ["", "**Suspicious (advisory):**"] + [
            f"- `{f['path']}:{f['line']}` {f['kind']}: {f['detail']}"
            for f in report["suspicious"][:50]]
    if report.get("claimed"):
        claim = " ".join(str(report["claimed"]).split())
        lines += ["", f"**The model claimed** (golem's evidence is above): "
                      f"{claim[:500]}{'...' if len(claim) > 500 else ''}"]
    stat = report.get("diffstat") or {}
    if stat:
        lines += ["", "| file | + | - |", "|---|---|---|"] + [
            f"| `{path}` | {added} | {removed} |" for path, (added, removed) in sorted(stat.items())]
    elif report.get("changed_files"):
        lines += ["", f"Changed files: {len(report['changed_files'])}"]
    return "\n".join(lines) + "\n"


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
