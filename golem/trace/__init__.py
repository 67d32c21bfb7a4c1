"""The run's record: a JSONL event stream on disk and a readable stream on the console.

Every event is written and flushed the moment it happens, so a run that crashes or is killed
still leaves a complete record up to that point. The sink never raises on an odd value (it
falls back to `repr`) and never writes a secret: every registered secret value is replaced
before a line reaches a file or the console.
"""

from __future__ import annotations

import datetime as _dt
import json
import sys
import threading
from typing import Any, Iterable, TextIO

from golem.trace import encode
from golem.core.errors import UsageError
from golem.core.outgoing import REDACTED, cleaned, clip, redact
from golem.trace.console import Console, Style
from golem.trace.text import printable

__all__ = ["REDACTED", "Trace", "read_events", "redact", "render", "null_trace",
           "stderr_trace"]


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


def _compact(value: Any, limit: int = 160) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, default=repr, separators=(",", ":"))
    except (RecursionError, ValueError, TypeError):
        text = f"({type(value).__name__} nested too deeply to show)"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _repr(value: Any) -> str:
    try:
        return repr(value)
    except RecursionError:
        return f"({type(value).__name__} nested too deeply to show)"


def _number(value: Any) -> float:
    try:
        return float(value or 0)
    except (TypeError, ValueError, OverflowError):
        return 0.0


def render(record: dict[str, Any]) -> str | None:
    """The console lines for one event, or None for events a person need not see live.

    Each value from the run is one line's worth (`golem.trace.encode.line`): a tool name, a test
    id or a message holding a line break cannot print a line of its own. Only the model's
    text keeps its lines, each one marked as the model's.
    """
    event = record.get("event")
    one = _one_line
    step = one(record.get("step", ""))
    if event == "request":
        return f"{step} > asking model [messages={one(record.get('messages'))}]"
    if event == "response" and str(record.get("content") or "").strip():
        return "\n".join(f"{step} : {line}" for line in
                         str(record["content"]).strip("\n").splitlines())
    if event == "tool_call":
        return (f"{step} | {one(record.get('name'))} "
                f"[args={_compact(record.get('arguments', {}))}]")
    if event == "tool_result" and record.get("error"):
        first = str(record.get("content", "")).splitlines()[:1]
        return f"{step} ! {one(record.get('name'))} [{_compact(first[0] if first else '', 120)}]"
    if event == "retry":
        wait = _number(record.get("wait"))
        # `try`, never `attempt`: the word and the `[K]` lead belong to -attempts
        return (f"~ model call failed, retrying in {wait:.1f}s (try "
                f"{one(record.get('try', record.get('attempt')))} of "
                f"{one(record.get('max_attempts'))}) [status={one(record.get('status'))} "
                f"error={_compact(record.get('error', ''), 80)}]")
    if event == "run_end":
        ms = round(1000 * _number(record.get("elapsed_s")))
        extra = f" error={_compact(record['error'], 200)}" if record.get("error") else ""
        tokens = record.get("tokens") if isinstance(record.get("tokens"), dict) else {}
        cached = f" cached={one(tokens['cached'])}" if tokens.get("cached") else ""
        cost = record.get("cost")
        cost_text = f" cost=${cost:.4f}" if isinstance(cost, (int, float)) else ""
        return (f"* run finished [stop={one(record.get('stop'))} "
                f"steps={one(record.get('steps'))} tool_calls={one(record.get('tool_calls'))} "
                f"tokens={one(record.get('tokens_total'))}{cached}{cost_text} "
                f"elapsed={ms}ms{extra}]")
    if event == "baseline":
        return f". baseline [{one(record.get('summary'))}]"
    if event == "suspicious" and isinstance(record.get("findings"), list):
        return "\n".join(f". suspicious [{one(f.get('path'))}:{one(f.get('line'))} "
                         f"{one(f.get('kind'))}: {one(f.get('detail'))}]"
                         for f in record["findings"] if isinstance(f, dict)) or None
    if event == "attempt":
        return f". {one(record.get('summary'))}"
    if event == "verdict":
        return f". verdict [summary={one(record.get('summary'))}]"
    if event == "context_trimmed":
        fields = {k: v for k, v in record.items() if k not in ("event", "time", "step")}
        return f"{step} ~ context trimmed [{_compact(fields, 160)}]"
    if event == "note":
        return f". {one(record.get('message'))}"
    if event == "preflight":
        outcome = {"ok": "", "unsure": "; carrying on", "failed": "; stopping"}.get(
            str(record.get("outcome")), "")
        return (f". preflight [GET {one(record.get('url'))}: "
                f"{clip(one(record.get('detail')), 160)}{outcome}]")
    return None


def _one_line(value: Any) -> str:
    return encode.line(value)


def read_events(path: str) -> list[dict[str, Any]]:
    """The events of a JSONL trace; UsageError (one line) when it is not one."""
    events = []
    try:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    raise UsageError(f"{path}:{number}: not a JSON line") from None
                except RecursionError:
                    raise UsageError(f"{path}:{number}: nested too deeply to be a golem "
                                     "event") from None
                if isinstance(record, dict) and isinstance(record.get("event"), str):
                    events.append(record)
    except FileNotFoundError:
        raise UsageError(f"no trace at {path}: the run wrote none (a run that stops before "
                         "it starts, on a missing key or a bad flag, writes no trace; its "
                         "own error says why)") from None
    except OSError as exc:
        raise UsageError(f"cannot read trace {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not a golem trace (not UTF-8 text)") from None
    if not events:
        raise UsageError(f"{path}: no golem events in it; write one with -trace FILE")
    return events


class Trace:
    """Writes events to a JSONL file (optional) and renders them on a console stream (optional)."""

    def __init__(self, path: str | None = None, console: TextIO | None = None,
                 secrets: Iterable[str] = (), style: Style | None = None,
                 clock: tuple[float, float] | None = None):
        self.path = path
        self.console = console
        self.secrets = [s for s in secrets if s]
        self.end: dict[str, Any] | None = None     # the last run_end event, as written
        self.diff: str | None = None                # the run's diff text, as written
        self._console = Console(console, style, clock=clock) if console is not None else None
        self._lock = threading.RLock()              # attempts emit from threads of their own
        # backslashreplace: a lone surrogate from a model reply must not crash the run
        from golem.tools.tree import open_append    # golem.tools imports this module
        try:
            self._file = open_append(path) if path else None
        except OSError as exc:
            why = "it is a symbolic link" if exc.errno == 40 else exc.strerror
            raise UsageError(f"cannot write the trace {path}: {why}") from None

    def emit(self, event: str, **fields: Any) -> dict[str, Any]:
        """Record one event now; returns the record as written (before redaction)."""
        if event == "retry" and "attempt" in fields and "try" not in fields:
            fields["try"] = fields.pop("attempt")   # the HTTP try, not an attempt of -attempts
        record = {"event": event, "time": _now(), **fields}
        # redacted before anything is cut (the console shortens long values), and finite,
        # since Infinity and NaN are not JSON
        clean = cleaned(record, self.secrets)
        with self._lock:
            self._write(event, record, clean, fields)
        return record

    def _write(self, event: str, record: dict, clean: dict, fields: dict) -> None:
        if event == "run_end" and "attempt" not in clean:
            self.end = clean
        if event == "diff" and "attempt" not in clean:
            self.diff = redact(str(clean.get("text") or ""), self.secrets)
        if self._file is not None:
            try:
                line = json.dumps(clean, ensure_ascii=False, default=repr)
            except (TypeError, ValueError, RecursionError):   # tuple keys, deep nesting
                line = json.dumps({"event": event, "time": record["time"],
                                   "repr": redact(_repr(fields), self.secrets)},
                                  ensure_ascii=False)
            self._file.write(redact(line, self.secrets) + "\n")
            self._file.flush()
        if self._console is not None:
            text = render(clean)
            if text is not None and "attempt" in clean:
                text = "\n".join(f"[{clean['attempt']}] {line}" for line in text.split("\n"))
            self._console.show(clean, None if text is None
                               else printable(redact(text, self.secrets)))

    def tagged(self, attempt: int) -> Tagged:
        """This trace as one attempt writes it: every event carries `attempt`."""
        return Tagged(self, attempt)

    def close(self) -> None:
        if self._console is not None:
            self._console.close()
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> Trace:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Tagged:
    """The trace of one attempt among several: its events carry `attempt`, and its console
    lines start with `[K]`."""

    def __init__(self, trace: Trace, attempt: int):
        self.trace = trace
        self.attempt = attempt
        self.end: dict[str, Any] | None = None

    def emit(self, event: str, **fields: Any) -> dict[str, Any]:
        if "attempt" in fields:     # a provider retry's own count becomes `try`
            fields["try"] = fields.pop("attempt")
        record = self.trace.emit(event, attempt=self.attempt, **fields)
        if event == "run_end":
            self.end = record
        return record


def null_trace() -> Trace:
    """A trace that records nothing (for library callers that want no output)."""
    return Trace()


def stderr_trace(path: str | None, secrets: Iterable[str] = ()) -> Trace:
    return Trace(path, sys.stderr, secrets)
