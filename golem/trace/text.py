"""Text from a run made safe to show: what a test id, a file name or the model's words can
carry (carriage returns, escape sequences, bytes that are not UTF-8, bidirectional overrides)
is shown as a visible escape, never acted on by a terminal or a CI log."""

from __future__ import annotations

import re

# C0 controls but newline and tab, DEL, C1 controls, the line and paragraph separators,
# bidirectional embeddings, overrides and isolates, and lone surrogates (bytes that were not
# UTF-8, kept by surrogateescape)
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e"
                     "\u2066-\u2069\ud800-\udfff]")


def _escape(match: re.Match) -> str:
    char = match.group()
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"      # the raw byte it stands for
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, newlines: bool = True) -> str:
    """`text` with every character a terminal would act on shown as an escape; newlines
    kept when `newlines`, else escaped too."""
    text = _UNSAFE.sub(_escape, text)
    return text if newlines else text.replace("\n", "\\n")
