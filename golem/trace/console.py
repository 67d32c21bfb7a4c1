"""The console side of the trace: colour and a live budget line, on a terminal only.

Pipes, files and CI logs get the plain lines and nothing else: no escape codes and no
carriage returns. On a terminal, lines are coloured (unless NO_COLOR is set) and one status
line (steps, tokens, dollars, elapsed) is redrawn in place below them; it is erased before
each normal line and when the run ends, so it never ends up between the lines a person reads.
"""

from __future__ import annotations

import os
import time
from typing import Any, TextIO

DIM, YELLOW, GREEN, RED, BOLD, RESET = "\x1b[2m", "\x1b[33m", "\x1b[32m", "\x1b[31m", \
    "\x1b[1m", "\x1b[0m"
CLEAR = "\r\x1b[K"      # back to the start of the line and erase it
GOOD = ("VERIFIED", "ALREADY_GREEN")
BAD = ("FAILED", "REJECTED")


def is_terminal(stream: TextIO) -> bool:
    """True when `stream` is an interactive terminal that understands escape codes."""
    try:
        tty = bool(stream.isatty())
    except (AttributeError, OSError, ValueError):
        return False
    return tty and os.environ.get("TERM") != "dumb"


def wants_color(stream: TextIO) -> bool:
    """Colour on a terminal, unless the user set NO_COLOR (https://no-color.org)."""
    return is_terminal(stream) and not os.environ.get("NO_COLOR")


def _width(stream: TextIO) -> int:
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        columns = 0
    # one short of the width: a line that fills it would wrap, and \r only goes back one row
    return max(20, columns - 1) if columns > 0 else 79


def color_of(record: dict[str, Any]) -> str | None:
    """The colour for one event's line, or None for the terminal's own."""
    event = record.get("event")
    if event == "request":
        return DIM
    if event == "tool_result" and record.get("error"):
        return YELLOW
    if event == "retry":
        return YELLOW
    if event == "verdict":
        verdict = record.get("verdict")
        return GREEN if verdict in GOOD else RED if verdict in BAD else BOLD
    if event == "run_end" and record.get("stop") not in ("answered", None):
        return YELLOW
    return None


def _limit(value: float, limit: float, fmt: str, limit_fmt: str = "") -> str:
    return fmt.format(value) + (("/" + (limit_fmt or fmt).format(limit)) if limit else "")


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class Console:
    """Writes rendered lines to a stream; on a terminal, adds colour and the status line."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.live = is_terminal(stream)
        self.color = wants_color(stream)
        self._shown = False
        self._running = False
        self._started = 0.0
        self._budget: dict[str, Any] = {}
        self._steps = self._tokens = 0
        self._cost = 0.0

    def show(self, record: dict[str, Any], text: str | None) -> None:
        """Print one event's line (text may be None), then redraw the status line."""
        self._count(record)
        if text is None and not self.live:
            return
        out = []
        if self._shown:
            out.append(CLEAR)
            self._shown = False
        if text is not None:
            color = color_of(record) if self.color else None
            out.append(f"{color}{text}{RESET}\n" if color else text + "\n")
        if self.live and self._running:
            out.append(self.status())
            self._shown = True
        self._write("".join(out))

    def status(self) -> str:
        """The live budget line: steps, tokens, dollars and elapsed, each against its limit."""
        budget = self._budget
        elapsed = time.monotonic() - self._started
        line = (f"[step {_limit(self._steps, budget.get('steps') or 0, '{:.0f}')}"
                f" | tokens {_limit(self._tokens, budget.get('tokens') or 0, '{:,.0f}')}"
                f" | ${_limit(self._cost, budget.get('cost') or 0, '{:.4f}', '{:.2f}')}"
                f" | {_clock(elapsed)}"
                + (f"/{_clock(budget['wall_s'])}" if budget.get("wall_s") else "") + "]")
        line = line[:_width(self.stream)]
        return f"{DIM}{line}{RESET}" if self.color else line

    def close(self) -> None:
        """Erase the status line, so whatever is printed next starts on a clean line."""
        if self._shown:
            self._shown = False
            self._write(CLEAR)

    def _count(self, record: dict[str, Any]) -> None:
        try:
            self._tally(record)
        except (TypeError, ValueError, AttributeError):
            pass  # an odd value only makes the status line less exact

    def _tally(self, record: dict[str, Any]) -> None:
        event = record.get("event")
        if event == "run_start":
            self._running, self._started = True, time.monotonic()
            self._budget = record.get("budget") or {}
            self._steps = self._tokens = 0
            self._cost = 0.0
        elif event == "request":
            self._steps = int(record.get("step") or self._steps + 1)
        elif event == "response":
            usage = record.get("usage") or {}
            self._tokens += int(usage.get("prompt") or 0) + int(usage.get("completion") or 0)
            self._cost += float(usage.get("cost") or 0.0)
        elif event == "run_end":
            self._running = False

    def _write(self, text: str) -> None:
        if not text:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            pass  # a closed console must not end the run
