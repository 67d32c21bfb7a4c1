"""The console stream: colour and a live budget line on a terminal, plain text anywhere else."""

from __future__ import annotations

import io
import os
import re
import unittest

from golem.trace import Trace, render

SGR = re.compile(r"\x1b\[[0-9;]*m")
CLEAR = "\r\x1b[K"


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def run_events(verdict: str = "VERIFIED") -> list[tuple[str, dict]]:
    """A short run: one step with a failing tool call, then a verdict."""
    return [
        ("note", {"message": "sandbox: none"}),
        ("run_start", {"provider": "demo", "model": "demo", "tools": [],
                       "budget": {"steps": 50, "tokens": 1000, "wall_s": 600, "cost": 2.0}}),
        ("request", {"step": 1, "messages": 2}),
        ("response", {"step": 1, "content": "", "usage": {"prompt": 120, "completion": 30,
                                                           "cached": 0, "cost": 0.25}}),
        ("tool_call", {"step": 1, "id": "c", "name": "read_file", "arguments": {"path": "x"}}),
        ("tool_result", {"step": 1, "id": "c", "name": "read_file", "error": True,
                         "content": "Error: no such file: x"}),
        ("request", {"step": 2, "messages": 4}),
        ("response", {"step": 2, "content": "done", "usage": {"prompt": 150, "completion": 5,
                                                               "cached": 0, "cost": 0.25}}),
        ("run_end", {"stop": "answered", "steps": 2, "tool_calls": 1, "tokens_total": 305,
                     "elapsed_s": 0.1}),
        ("verdict", {"verdict": verdict, "summary": f"{verdict}: something"}),
    ]


def emit_all(stream, verdict: str = "VERIFIED") -> str:
    with Trace(None, stream) as trace:
        for event, fields in run_events(verdict):
            trace.emit(event, **fields)
    return stream.getvalue()


def expected_lines(verdict: str = "VERIFIED") -> list[str]:
    """The lines a run shows on stderr: every event's rendering but the verdict's, which is
    the result on stdout (printed once, there)."""
    lines = (render({"event": e, **f}) for e, f in run_events(verdict) if e != "verdict")
    return [line for line in lines if line is not None]


def as_seen(output: str) -> tuple[list[str], str]:
    """What a terminal keeps: finished lines (colour removed) and the line still showing."""
    lines, current = [], ""
    for piece in re.split(r"(\r\x1b\[K|\n)", SGR.sub("", output)):
        if piece == CLEAR:
            current = ""
        elif piece == "\n":
            lines.append(current)
            current = ""
        else:
            current += piece
    return lines, current


class WrapTest(unittest.TestCase):
    def test_every_character_stays_and_no_row_passes_the_width(self):
        from golem.trace.console import wrap
        cases = ["1 : " + "word " * 40, "x" * 130, ". a note with a-very-long-" + "y" * 60,
                 "[2] 3 : " + "text, " * 30, "+" + " " * 50 + "indented code"]
        for text in cases:
            for width in (20, 39, 59):
                with self.subTest(text=text[:20], width=width):
                    rows = wrap(text, width)
                    self.assertTrue(all(len(row) <= width for row in rows), rows)
                    self.assertEqual("".join(text.split()), "".join("".join(rows).split()))

    def test_a_wall_reads_as_it_was_given(self):
        from golem.trace.console import duration
        self.assertEqual([duration(s) for s in (1800, 5400, 90, 0.25, 45)],
                         ["30m", "1h30m", "1m30s", "250ms", "45s"])


class ConsoleTest(unittest.TestCase):
    def setUp(self):
        saved = dict(os.environ)
        self.addCleanup(lambda: (os.environ.clear(), os.environ.update(saved)))
        os.environ.pop("NO_COLOR", None)
        os.environ["TERM"] = "xterm-256color"

    def test_plain_stream_gets_plain_lines_only(self):
        output = emit_all(io.StringIO())
        self.assertNotIn("\x1b", output)
        self.assertNotIn("\r", output)
        self.assertEqual(output, "".join(line + "\n" for line in expected_lines()))

    def test_terminal_gets_colour(self):
        output = emit_all(FakeTTY())
        self.assertIn("\x1b[2m1 > asking model", output)            # requests dim
        self.assertIn("\x1b[33m1 ! read_file", output)              # tool errors yellow
        self.assertIn("\x1b[2m2 : done", output)                    # the model's words dim
        self.assertNotIn("verdict", output)                         # stdout has it, once

    def test_status_line_updates_in_place_and_never_stays(self):
        output = emit_all(FakeTTY())
        self.assertIn("\r", output)
        self.assertIn("[model 0s | step 1/50 | tokens 150/1,000 | $0.2500/2.00 | 0s/10m]",
                      SGR.sub("", output))
        self.assertIn("[read_file 0s | step 1/50 |", SGR.sub("", output))
        self.assertIn("| step 2/50 | tokens 305/1,000 | $0.5000/2.00", SGR.sub("", output))
        lines, showing = as_seen(output)
        self.assertEqual(lines, expected_lines())   # the status never lands in a line
        self.assertEqual(showing, "")

    def test_status_line_is_erased_when_the_trace_closes_mid_run(self):
        stream = FakeTTY()
        with Trace(None, stream) as trace:
            for event, fields in run_events()[:4]:
                trace.emit(event, **fields)
            self.assertRegex(as_seen(stream.getvalue())[1], r"^\[\w+ \d+s \| step 1/50")
        self.assertEqual(as_seen(stream.getvalue())[1], "")

    def test_no_color_keeps_the_status_but_drops_colour(self):
        os.environ["NO_COLOR"] = "1"
        output = emit_all(FakeTTY())
        self.assertIsNone(SGR.search(output))
        self.assertIn("| step 1/50", output)
        self.assertEqual(as_seen(output), (expected_lines(), ""))

    def test_dumb_terminal_is_plain(self):
        os.environ["TERM"] = "dumb"
        output = emit_all(FakeTTY())
        self.assertNotIn("\x1b", output)
        self.assertNotIn("\r", output)

    def test_secrets_are_redacted_on_a_terminal_too(self):
        stream = FakeTTY()
        with Trace(None, stream, ["sk-secret-value-123"]) as trace:
            trace.emit("note", message="key sk-secret-value-123")
        self.assertNotIn("sk-secret-value-123", stream.getvalue())
        self.assertIn("[redacted]", stream.getvalue())


if __name__ == "__main__":
    unittest.main()
