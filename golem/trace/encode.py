"""Text from a run, encoded for the place it goes to.

Whatever golem writes may carry text it did not choose: the model's words, file names and
test ids from the repository, a provider's error message. Each destination has its own
syntax that such text could speak, so each has one function here, and every writer uses it:

- `line`: one console or log line. Control characters, escape sequences and bidirectional
  overrides become visible escapes, and so do line breaks, so a value can never start a line
  of its own (a line of the model's choosing, or a workflow command in a CI log).
- `markdown` and `code`: text, and a file name or test id, in the Markdown of a GitHub step
  summary. In text, every character Markdown or HTML could act on is escaped, so no tag,
  image, link, heading, emphasis, table cell or code span can be opened; a code span's
  fence is longer than any run of backticks inside it, so nothing in it can close it.
- `html`: text or an attribute value in golem's HTML report.
- `command_data` and `command_property`: the message and the properties of a GitHub
  workflow command (`::error file=...::message`), escaped the way GitHub's toolkit does.
"""

from __future__ import annotations

import html as _html
import re

from golem.trace.text import printable

__all__ = ["line", "markdown", "code", "html", "command_data", "command_property"]

# what Markdown, GitHub's extensions (tables, strikethrough, math) and inline HTML act on:
# backslash escapes (CommonMark lets any ASCII punctuation be escaped), and character
# references for what starts a tag or a reference, which no Markdown reader takes as markup
_MARKDOWN = {ord(c): "\\" + c for c in "\\`*_[]{}#|~$!"}
_MARKDOWN.update({ord("<"): "&lt;", ord(">"): "&gt;", ord("&"): "&amp;"})
_LONGEST_TICKS = re.compile("`+")


def line(text: object) -> str:
    """`text` as part of one line on a console or in a log: nothing in it can act on the
    terminal, and no line break survives."""
    return printable(str(text), newlines=False)


def markdown(text: object) -> str:
    """`text` as inert Markdown text on one line (blanks collapsed)."""
    return " ".join(line(text).split()).translate(_MARKDOWN)


def code(text: object, cell: bool = False) -> str:
    """`text` (a path, a test id) as a Markdown code span, on one line, in which nothing is
    markup: the fence is longer than any run of backticks in it, so none can end the span
    early. In a table `cell`, `|` is escaped, which GitHub's tables honour inside a span
    too."""
    text = line(text)
    if cell:
        text = text.replace("|", "\\|")
    ticks = max((len(run) for run in _LONGEST_TICKS.findall(text)), default=0)
    fence = "`" * (ticks + 1)
    pad = " " if text.startswith(("`", " ")) or text.endswith(("`", " ")) else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def html(text: object) -> str:
    """`text` for HTML text or a quoted attribute value."""
    return _html.escape("" if text is None else str(text), quote=True)


def command_data(text: object) -> str:
    """The message of a workflow command: `%`, CR and LF escaped (so it cannot end the
    command and start another), other control characters as visible escapes."""
    text = printable(str(text).replace("%", "%25"))
    return text.replace("\r", "%0D").replace("\n", "%0A")


def command_property(text: object) -> str:
    """A property value of a workflow command: as `command_data`, and `:` and `,` too."""
    return command_data(text).replace(":", "%3A").replace(",", "%2C")
