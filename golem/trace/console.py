"""The console side of the trace: what a person watching a run sees.

Pipes, files and CI logs get plain lines and nothing else: no escape codes, no carriage
returns, nothing cut (the model's words whole). On a terminal the lines are coloured
(`-color`, NO_COLOR, FORCE_COLOR) and wrapped at its width, never cut; the model's own words
between tool calls are shown dimmed, and one status line (what is happening now: the
baseline, the snapshot, a model call, a command, the verification; then steps, tokens,
dollars, and the time since golem started against `-wall` as given) is redrawn in place
below them every second, erased before each normal line and at the end, so it never lands
between the lines a person reads. At the end come the diff stat and the diff of the allowed
changes, coloured; the verdict itself is the result on stdout, printed once.

`-quiet` shows no lines here (the result and errors still appear); on a terminal the status
line alone stays, so the screen is never blank while golem works. `-verbose` adds the first
lines of every tool result and shows the model's texts and the diff whole.
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass
from typing import Any, TextIO

from golem.trace.text import printable

DIM, YELLOW, GREEN, RED, BOLD, CYAN, RESET = "\x1b[2m", "\x1b[33m", "\x1b[32m", "\x1b[31m", \
    "\x1b[1m", "\x1b[36m", "\x1b[0m"
CLEAR = "\r\x1b[K"      # back to the start of the line and erase it
GOOD = ("VERIFIED", "ALREADY_GREEN")
BAD = ("FAILED", "REJECTED")
TEXT_LINES = 3          # lines of the model's text shown between tool calls
DIFF_LINES = 120        # lines of the diff shown at the end (-verbose: all)
RESULT_LINES = 6        # lines of a tool result shown with -verbose
TICK = 1.0              # seconds between redraws of the status line


@dataclass(frozen=True)
class Style:
    """How much the console shows: `color` is auto, always or never."""

    color: str = "auto"
    quiet: bool = False
    verbose: bool = False


def is_terminal(stream: TextIO) -> bool:
    """True when `stream` is an interactive terminal that understands escape codes."""
    try:
        tty = bool(stream.isatty())
    except (AttributeError, OSError, ValueError):
        return False
    return tty and os.environ.get("TERM") != "dumb"


def wants_color(stream: TextIO, style: Style | None = None) -> bool:
    """Colour: always, never, or (auto) on a terminal unless NO_COLOR is set
    (https://no-color.org); FORCE_COLOR asks for it anywhere."""
    choice = (style or Style()).color
    if choice == "always":
        return True
    if choice == "never" or os.environ.get("NO_COLOR"):
        return False
    force = os.environ.get("FORCE_COLOR")
    if force is not None and force not in ("", "0", "false"):
        return True
    return is_terminal(stream)


def width_of(stream: TextIO) -> int:
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        columns = 0
    # one short of the width: a line that fills it would wrap, and \r only goes back one row
    return max(20, columns - 1) if columns > 0 else 79


def cut(text: str, width: int) -> str:
    """`text` cut to `width` columns, with an ellipsis where it was cut (the status line
    only: it must stay one row to be redrawn in place)."""
    return text if len(text) <= width else text[:max(width - 1, 1)] + "…"


# what starts a console line and is not its text: `[K] ` (an attempt), then `N : ` (a step
# and its mark) or `. ` (a note); a wrapped line's next rows are indented to past it
_LEAD = re.compile(r"(?:\[\d+\] )?(?:\S{1,6} [:|!>=~] |[.*] |  ~ )?")


def wrap(text: str, width: int, indent: int | None = None) -> list[str]:
    """`text` as rows of at most `width` columns, broken at blanks where it can be, never
    cut: every character is on some row. Rows after the first are indented to past the
    line's lead (`N : `, `. `), so they read as one line's continuation."""
    if len(text) <= width:
        return [text]
    if indent is None:
        indent = len(_LEAD.match(text).group())
    indent = min(indent, width // 2)
    rows, rest, room = [], text, width
    while len(rest) > room:
        cut_at = rest.rfind(" ", 1, room + 1)
        if cut_at <= 0:
            cut_at = room       # one long word: broken where the row ends
        rows.append(rest[:cut_at].rstrip(" ") or rest[:cut_at])
        rest = rest[cut_at:].lstrip(" ") if cut_at < len(rest) and rest[cut_at] == " " \
            else rest[cut_at:]
        room = width - indent
    rows.append(rest)
    return [rows[0]] + [" " * indent + row for row in rows[1:]]


def color_of(record: dict[str, Any]) -> str | None:
    """The colour for one event's line, or None for the terminal's own."""
    event = record.get("event")
    if event in ("request", "response"):
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


def diff_color(line: str) -> str | None:
    if line.startswith(("+++", "---", "diff --git")):
        return BOLD
    if line.startswith("@@"):
        return CYAN
    if line.startswith("+"):
        return GREEN
    if line.startswith("-"):
        return RED
    return None


def verdict_line(line: str, verdict: str | None, stream: TextIO, style: Style | None) -> str:
    """The result line for stdout, coloured by its verdict when colour is on there."""
    if verdict is None or not wants_color(stream, style):
        return line
    color = GREEN if verdict in GOOD else RED if verdict in BAD else BOLD
    return f"{color}{line}{RESET}"


def _number(value: Any) -> float:
    try:
        return float(value or 0)
    except (TypeError, ValueError, OverflowError):
        return 0.0


def _limit(value: float, limit: float, fmt: str, limit_fmt: str = "") -> str:
    return fmt.format(value) + (("/" + (limit_fmt or fmt).format(limit)) if limit else "")


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def duration(seconds: float) -> str:
    """A budget as a person would write it: `30m`, `1h30m`, `90s` is `1m30s`, `250ms`."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    whole = round(seconds)
    hours, minutes, secs = whole // 3600, whole // 60 % 60, whole % 60
    return "".join(f"{n}{unit}" for n, unit in ((hours, "h"), (minutes, "m"), (secs, "s"))
                   if n) or "0s"


# what is happening after each event, for the status line (None: nothing in particular)
def _activity(record: dict[str, Any]) -> str | None:
    event = record.get("event")
    if event == "phase":
        return str(record.get("name"))
    if event == "request":
        return "model"
    if event == "tool_call":
        return str(record.get("name"))
    return None


class Console:
    """Writes rendered lines to a stream; on a terminal, adds colour and the status line."""

    def __init__(self, stream: TextIO, style: Style | None = None, replay: bool = False,
                 clock: tuple[float, float] | None = None):
        """`clock`: when golem started (a time.monotonic() instant) and its `-wall` as
        given (0: none), for the status line; without it, the agent run's own."""
        self.stream = stream
        self.style = style or Style()
        self.replay = replay            # `golem trace FILE`: the verdict line too, no status
        # -quiet on a terminal keeps the status line: no lines, but never a blank screen
        self.live = is_terminal(stream) and not replay
        self.color = wants_color(stream, self.style)
        self._lock = threading.RLock()
        self._shown = False
        self._running = False
        self._clock = clock
        self._started = clock[0] if clock else 0.0
        self._budget: dict[str, Any] = {}
        self._steps = self._tokens = 0
        self._cost = 0.0
        self._doing: str | None = None
        self._since = time.monotonic()
        self._attempts: dict[int, tuple[str, float]] = {}     # attempt -> doing, since
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    # -- lines

    def show(self, record: dict[str, Any], text: str | None) -> None:
        """Print one event's lines (text may be None), then redraw the status line."""
        if self.style.quiet and not self.live:
            return
        with self._lock:
            self._count(record)
            lines = [] if self.style.quiet else self._lines(record, text)
            if not lines and not self.live:
                return
            out = []
            if self._shown:
                out.append(CLEAR)
                self._shown = False
            out += lines
            if self.live and self._doing is not None:
                out.append(self.status())
                self._shown = True
                self._tick()
            self._write("".join(out))

    def _lines(self, record: dict[str, Any], text: str | None) -> list[str]:
        event = record.get("event")
        if event == "verdict":
            # the verdict is the result on stdout, printed once, there; a replay shows it
            # where stdout had it, last
            return [f"{printable(str(record.get('summary')), newlines=False)}\n"] \
                if self.replay else []
        if event == "diff":
            return self._diff(record)
        if event == "response":
            text = self._model_text(record, text)
        if event == "tool_result" and self.style.verbose and not record.get("error"):
            text = self._result(record)
        if text is None:
            return []
        color = color_of(record) if self.color else None
        out = []
        for line in text.split("\n"):
            for row in self._rows(line):
                out.append(f"{color}{row}{RESET}\n" if color else row + "\n")
        return out

    def _rows(self, line: str, indent: int | None = None) -> list[str]:
        """One line as the console shows it: wrapped at a terminal's width, else whole."""
        return wrap(line, width_of(self.stream), indent) if self.live else [line]

    def _model_text(self, record: dict[str, Any], text: str | None) -> str | None:
        """The model's words: whole in a log; on a terminal, the first TEXT_LINES lines
        (wrapped, never cut) and how many more there are."""
        if text is None or self.style.verbose or not self.live:
            return text
        lines = text.split("\n")
        more = len(lines) - TEXT_LINES
        if more > 0:
            lead = re.match(r"(?:\[\d+\] )?", lines[0]).group()
            lines = lines[:TEXT_LINES] + [f"{lead}{' ' * len(str(record.get('step', '')))} : "
                                          f"... {more} more line(s) (-verbose shows them)"]
        return "\n".join(lines)

    def _result(self, record: dict[str, Any]) -> str | None:
        content = printable(str(record.get("content", ""))).rstrip("\n")
        if not content:
            return None
        lines = content.split("\n")
        shown = [f"{record.get('step', '')} = {line}" for line in lines[:RESULT_LINES]]
        if len(lines) > RESULT_LINES:
            shown.append(f"{record.get('step', '')} = ... {len(lines) - RESULT_LINES} more "
                         "line(s)")
        return "\n".join(shown)

    def _diff(self, record: dict[str, Any]) -> list[str]:
        stat = record.get("stat") if isinstance(record.get("stat"), dict) else {}
        if not stat:
            return []
        # file names and lines from the repository: shown, never acted on by a terminal
        stat = {printable(str(path), newlines=False): counts for path, counts in stat.items()}
        out = []
        width = max(len(path) for path in stat)
        added = removed = 0
        for path, counts in sorted(stat.items()):
            plus, minus = (int(counts[0]), int(counts[1])) if isinstance(counts, list) \
                and len(counts) == 2 else (0, 0)
            added, removed = added + plus, removed + minus
            bar = ("+" * min(plus, 30), "-" * min(minus, 30))
            rows = self._rows(f" {path.ljust(width)} | {plus + minus:>4} {bar[0]}{bar[1]}",
                              indent=1)
            if self.color and len(rows) == 1:
                bar = (f"{GREEN}{bar[0]}{RESET}" if bar[0] else "",
                       f"{RED}{bar[1]}{RESET}" if bar[1] else "")
                rows = [f" {path.ljust(width)} | {plus + minus:>4} {bar[0]}{bar[1]}"]
            out += [row + "\n" for row in rows]
        out += [row + "\n" for row in self._rows(
            f" {len(stat)} file(s) changed, {added} insertion(s)(+), {removed} "
            f"deletion(s)(-)", indent=1)]
        lines = printable(str(record.get("text") or "")).split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        limit = len(lines) if self.style.verbose else DIFF_LINES
        for line in lines[:limit]:
            color = diff_color(line) if self.color else None
            for row in self._rows(line, indent=1):
                out.append(f"{color}{row}{RESET}\n" if color else row + "\n")
        if len(lines) > limit:
            out += [row + "\n" for row in self._rows(
                f"... {len(lines) - limit} more diff line(s) (-verbose shows them all; "
                "-patch FILE writes the diff)", indent=4)]
        if record.get("truncated"):
            out += [row + "\n" for row in self._rows(
                "... the diff was cut short; -patch FILE writes it whole", indent=4)]
        return out

    # -- the status line

    def status(self) -> str:
        """The live line: what is happening now and for how long (first, so a narrow
        terminal still shows it), then steps, tokens, dollars and elapsed against their
        limits."""
        now = time.monotonic()
        doing = f"{self._doing} {_clock(now - self._since)}"
        if self._attempts:      # one part per attempt: `1 thinking 3s | 2 FAILED | ...`
            doing = " | ".join(
                f"{n} {what}" + ("" if what.isupper() else f" {_clock(now - since)}")
                for n, (what, since) in sorted(self._attempts.items()))
        budget = self._budget
        # (priority, text): on a narrow terminal the least needed parts go first, so the
        # line stays one row (it is redrawn in place) without cutting what it keeps
        parts = [(0, doing)]
        if self._running:
            parts += [(2, f"step {_limit(self._steps, budget.get('steps') or 0, '{:.0f}')}"),
                      (4, f"tokens {_limit(self._tokens, budget.get('tokens') or 0, '{:,.0f}')}"),
                      (3, f"${_limit(self._cost, budget.get('cost') or 0, '{:.4f}', '{:.2f}')}")]
        if self._clock or self._running:
            # since golem started, as `elapsed_s` counts; the wall as it was given
            wall = self._clock[1] if self._clock else _number(budget.get("wall_s"))
            parts.append((1, _clock(now - self._started) + (f"/{duration(wall)}" if wall
                                                            else "")))
        width = width_of(self.stream)
        line = "[" + " | ".join(text for _, text in parts) + "]"
        while len(line) > width and len(parts) > 1:
            parts.remove(max(parts, key=lambda part: part[0]))
            line = "[" + " | ".join(text for _, text in parts) + "]"
        line = cut(line, width)     # one part alone wider than the terminal
        return f"{DIM}{line}{RESET}" if self.color else line

    def _tick(self) -> None:
        """Start the thread that redraws the status line every second, once."""
        if self._ticker is None:
            self._ticker = threading.Thread(target=self._ticking, name="golem-status",
                                            daemon=True)
            self._ticker.start()

    def _ticking(self) -> None:
        while not self._stop.wait(TICK):
            with self._lock:
                if self._shown and self._doing is not None:
                    self._write(CLEAR + self.status())

    def close(self) -> None:
        """Stop the ticking and erase the status line, so what follows starts clean."""
        self._stop.set()
        if self._ticker is not None and self._ticker is not threading.current_thread():
            self._ticker.join(timeout=2 * TICK)
        with self._lock:
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
        if isinstance(record.get("attempt"), int):
            self._tally_attempt(record)
            return
        doing = _activity(record)
        if doing is not None:
            self._doing, self._since = doing, time.monotonic()
        elif event in ("tool_result", "baseline", "verification", "new tests", "run_end",
                       "verdict"):
            self._doing = "thinking" if event == "tool_result" else None
            self._since = time.monotonic()
        if event == "run_start":
            self._running = True
            if not self._clock:
                self._started = time.monotonic()
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

    def _tally_attempt(self, record: dict[str, Any]) -> None:
        """One attempt among several: what it is doing, for its own part of the line."""
        event, number = record.get("event"), record["attempt"]
        doing = _activity(record)
        if doing is None and event in ("tool_result", "run_end", "attempt"):
            doing = {"tool_result": "thinking", "run_end": "verifying"}.get(
                event, str(record.get("verdict") or "done"))
        if doing is not None:
            self._attempts[number] = (doing, time.monotonic())
            if self._doing is None:
                self._doing, self._since = "attempts", time.monotonic()

    def _write(self, text: str) -> None:
        if not text:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            pass  # a closed console must not end the run
