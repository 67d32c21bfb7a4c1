"""File tools: list_files, read_file, write_file, edit_file, search_files."""

from __future__ import annotations

import difflib
import fnmatch
import re

from golem.core.errors import ToolError
from golem.llm.types import ToolSpec
from golem.tools import search
from golem.tools.base import Context, Tool

READ_LINES = 200            # lines read_file shows when no limit is given
READ_CHARS = 40_000         # characters read_file returns at most
MAX_FILE = 16 * 1024 * 1024 # bytes read_file, edit_file and search_files will load
LIST_MAX = 400              # entries list_files shows
SEARCH_MAX = 50             # matches search_files shows
LINE_CHARS = 240            # characters of one matching line search_files shows
READ_LINE_CHARS = 2_000     # characters of one line read_file shows
SEARCH_SECONDS = 10.0       # search_files gives up after this long, with what it found
_KEYISH = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=._-")


def _load_text(ctx: Context, path: str, errors: str = "replace") -> str:
    data, size = ctx.workspace.read_bytes(path, MAX_FILE)
    if size > MAX_FILE:
        raise ToolError(f"{path} is {size} bytes, too large to load whole; "
                        "use read_file with offset and limit, or search_files")
    if b"\0" in data[:8192]:
        raise ToolError(f"{path} is a binary file ({size} bytes); it cannot be shown as text")
    # surrogateescape keeps bytes that are not UTF-8 intact through an edit
    return data.decode("utf-8", errors=errors)


def _cut(line: str, limit: int) -> str:
    """`line` cut to `limit` characters, with a note saying how long it was.

    A run of key-like characters that the cut would split is dropped whole: the registry
    redacts secrets it sees whole, and half a key must not slip past it.
    """
    if len(line) <= limit:
        return line
    end = limit
    if line[end] in _KEYISH:
        while end > 0 and line[end - 1] in _KEYISH:
            end -= 1
    return line[:end] + f" [... line cut: {len(line)} characters]"


def _to_depth(files: list[str], rel: str, depth: int) -> list[str]:
    """Files at most `depth` levels below `rel`, and the directories at that level with '/'."""
    start = 0 if rel == "." else len(rel) + 1
    out, dirs = [], set()
    for path in files:
        parts = path[start:].split("/")
        if len(parts) <= depth:
            out.append(path)
        else:
            dirs.add(path[:start] + "/".join(parts[:depth]) + "/")
    return sorted(out + list(dirs))


def list_files(ctx: Context, path: str = ".", depth: int = 0) -> str:
    """The files below `path`, one per line (with `depth`: that many levels, directories
    ending in '/'), skipping VCS, dependencies, build output and what .gitignore lists."""
    rel = ctx.workspace.resolve(path)
    if depth < 0:
        raise ToolError("depth counts directory levels (1: just this directory); "
                        "leave it out to list every file")
    if not ctx.workspace.is_dir(rel):
        if ctx.workspace.exists(rel):
            return rel
        raise ToolError(f"no such directory: {path}; call list_files with path '.' to see the tree")
    files = search.files_below(ctx.workspace, rel)
    entries = _to_depth(files, rel, depth) if depth else files
    if not entries:
        return f"(no files below {rel})"
    names = entries[:LIST_MAX]
    if len(entries) > LIST_MAX:
        what = "entries" if depth else "files"
        names.append(f"[{len(entries) - LIST_MAX} more {what} not shown; list a subdirectory"
                     + ("" if depth else " or give a depth") + "]")
    return "\n".join(names)


def read_file(ctx: Context, path: str, offset: int = 1, limit: int = 0) -> str:
    """Lines of a text file, numbered, from `offset` (1-based) for `limit` lines."""
    rel = ctx.workspace.resolve(path)
    data, size = ctx.workspace.read_bytes(rel, MAX_FILE)
    if b"\0" in data[:8192]:
        raise ToolError(f"{rel} is a binary file ({size} bytes); it cannot be shown as text")
    if size > len(data):   # only the first MAX_FILE bytes can be read: end on a whole line
        data = data[:data.rfind(b"\n") + 1]
    lines = data.decode("utf-8", errors="replace").splitlines()
    if offset < 1:
        raise ToolError("offset is the first line to show, counting from 1")
    if limit < 0:
        raise ToolError("limit is a number of lines; leave it out for the default")
    if not lines:
        return f"({rel} is empty)"
    if offset > len(lines):
        where = (f"the first {len(lines)} lines (16 MiB) of {rel} can be read" if size > MAX_FILE
                 else f"{rel} has {len(lines)} lines")
        raise ToolError(f"{where}; offset {offset} is past the end")
    end = min(len(lines), offset - 1 + (limit or READ_LINES))
    out, size = [], 0
    for number in range(offset, end + 1):
        line = lines[number - 1]
        line = _cut(line, READ_LINE_CHARS)
        row = f"{number:6}\t{line}"
        if size + len(row) > READ_CHARS and out:
            end = number - 1
            break
        out.append(row)
        size += len(row) + 1
    if end < len(lines):
        out.append(f"[lines {offset}-{end} of {len(lines)}; call read_file with "
                   f"offset={end + 1} to read on]")
    return "\n".join(out)


def _syntax_note(rel: str, text: str) -> str:
    """A warning when a Python file no longer compiles, so the model hears at once."""
    if not rel.endswith(".py"):
        return ""
    try:
        compile(text, rel, "exec")
    except SyntaxError as exc:
        return f"\nWarning: {rel} now has a syntax error at line {exc.lineno}: {exc.msg}"
    except ValueError:
        return ""
    return ""


def write_file(ctx: Context, path: str, content: str) -> str:
    """Create or replace a file atomically."""
    rel = ctx.workspace.resolve(path)
    if ctx.workspace.is_dir(rel):
        raise ToolError(f"{rel} is a directory; give a file path")
    created = ctx.workspace.write_bytes(rel, content.encode("utf-8"))
    verb = "created" if created else "replaced"
    return f"{verb} {rel} ({len(content.splitlines())} lines)" + _syntax_note(rel, content)


def _closest(text: str, needle: str) -> str:
    """The lines of `text` that look most like the first line of `needle`, numbered."""
    lines = text.splitlines()
    first = next((l for l in needle.splitlines() if l.strip()), needle).strip()
    scored = sorted(((difflib.SequenceMatcher(None, first, line.strip()).ratio(), i)
                     for i, line in enumerate(lines)), reverse=True)[:3]
    rows = [f"{i + 1:6}\t{lines[i]}" for ratio, i in sorted(scored, key=lambda s: s[1])
            if ratio > 0.5]
    return ("; the closest lines are:\n" + "\n".join(rows)) if rows else ""


def edit_file(ctx: Context, path: str, old_string: str, new_string: str) -> str:
    """Replace the one occurrence of `old_string` with `new_string`."""
    rel = ctx.workspace.resolve(path)
    text = _load_text(ctx, rel, errors="surrogateescape")
    if not old_string:
        raise ToolError("old_string is empty; to create a file use write_file")
    count = text.count(old_string)
    if count == 0 and "\r\n" in text and "\r\n" not in old_string:
        # the model writes \n; the file uses \r\n: match and replace in the file's convention
        old_string = old_string.replace("\n", "\r\n")
        new_string = new_string.replace("\r\n", "\n").replace("\n", "\r\n")
        count = text.count(old_string)
    if count == 0:
        raise ToolError(f"old_string was not found in {rel}{_closest(text, old_string)}\n"
                        "Copy the text exactly, including indentation (read_file shows it).")
    if count > 1:
        starts = [m.start() for m in re.finditer(re.escape(old_string), text)]
        lines = ", ".join(str(text.count("\n", 0, s) + 1) for s in starts[:10])
        raise ToolError(f"old_string occurs {count} times in {rel} (lines {lines}); "
                        "include more surrounding lines so it occurs exactly once")
    updated = text.replace(old_string, new_string, 1)
    ctx.workspace.write_bytes(rel, updated.encode("utf-8", errors="surrogateescape"))
    line = text.count("\n", 0, text.index(old_string)) + 1
    return f"edited {rel} at line {line}" + _syntax_note(rel, updated)


def _render(path: str, number: int, line: str) -> str:
    return f"{path}:{number}: {_cut(line.strip(), LINE_CHARS)}"


def search_files(ctx: Context, pattern: str, path: str = ".", glob: str = "") -> str:
    """Lines matching a regular expression, as `path:line: text`, at most SEARCH_MAX."""
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise ToolError(f"bad regular expression {pattern!r}: {exc}") from None
    rel = ctx.workspace.resolve(path)
    if ctx.workspace.exists(rel) and not ctx.workspace.is_dir(rel):
        paths = [rel]
    else:
        paths = [p for p in search.files_below(ctx.workspace, rel)
                 if p.rpartition(".")[2].lower() not in search.BINARY_SUFFIXES]
        if glob:
            wanted = re.compile(fnmatch.translate(glob)).match
            paths = [p for p in paths if wanted(p) or wanted(p.rpartition("/")[2])]
    seconds = min(SEARCH_SECONDS, ctx.timeout())
    found = search.Search(regex, SEARCH_MAX, seconds, _render).run(ctx.workspace, paths,
                                                                     MAX_FILE)
    hits = found.hits or [f"no matches for {pattern!r}"]
    if found.expired:
        hits.append(f"[the search stopped after {seconds:.0f}s, so matches may be missing: "
                    "simplify the pattern (nested repeats backtrack) or narrow the path or glob]")
    elif not found.exact:
        hits.append(f"[{len(hits) + found.more}+ matches; more matches not shown: "
                    "narrow the pattern, path or glob]")
    elif found.more:
        hits.append(f"[{found.more} more matches not shown; narrow the pattern, path or glob]")
    return "\n".join(hits)


def _spec(name: str, description: str, properties: dict, required: list[str]) -> ToolSpec:
    return ToolSpec(name, description, {"type": "object", "properties": properties,
                                        "required": required, "additionalProperties": False})


_PATH = {"type": "string", "description": "a path relative to the workspace root"}

READ_TOOLS = [
    Tool(_spec("list_files", "List the files below a directory of the workspace, recursively "
               f"(at most {LIST_MAX}); VCS, virtual environments, dependencies, build output "
               "and what .gitignore lists are skipped. Give `depth` for an overview.",
               {"path": {**_PATH, "description": "directory to list (default '.')"},
                "depth": {"type": "integer", "description": "directory levels to show "
                          "(1: this directory's files and subdirectories, which end in '/')"}},
               []), list_files),
    Tool(_spec("read_file", f"Read a text file with numbered lines. Shows {READ_LINES} lines "
               "unless `limit` says otherwise; use `offset` to read on.",
               {"path": _PATH,
                "offset": {"type": "integer", "description": "first line to show, from 1"},
                "limit": {"type": "integer", "description": "number of lines to show"}},
               ["path"]), read_file),
    Tool(_spec("search_files", "Search file contents with a regular expression (Python syntax), "
               "skipping what list_files skips and binary files. "
               f"Returns up to {SEARCH_MAX} matches as path:line: text.",
               {"pattern": {"type": "string", "description": "regular expression"},
                "path": {**_PATH, "description": "directory or file to search (default '.')"},
                "glob": {"type": "string", "description": "only files matching, e.g. '*.py'"}},
               ["pattern"]), search_files),
]

WRITE_TOOLS = [
    Tool(_spec("write_file", "Create a file or replace its whole content.",
               {"path": _PATH, "content": {"type": "string", "description": "the new content"}},
               ["path", "content"]), write_file),
    Tool(_spec("edit_file", "Replace one exact occurrence of old_string with new_string in a "
               "file. old_string must occur exactly once: include enough context.",
               {"path": _PATH,
                "old_string": {"type": "string", "description": "exact text to replace"},
                "new_string": {"type": "string", "description": "replacement text"}},
               ["path", "old_string", "new_string"]), edit_file),
]
