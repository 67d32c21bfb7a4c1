"""What a setting's value may be, and how `golem config` shows it.

Each parser takes what a flag or a configuration file gave (text from a flag; a string,
number, boolean or list from TOML) and returns the value, or raises ValueError saying what a
person should write instead. The flags (golem/cli/flags.py) and the files (golem/config/__init__.py) use
the same parsers, so a value means the same wherever it is given.
"""

from __future__ import annotations

import math
import re
import os
from typing import Any, Callable

from golem.core.errors import UsageError

UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 1000 ** 2, "mb": 1000 ** 2,
         "mib": 1024 ** 2, "g": 1000 ** 3, "gb": 1000 ** 3, "gib": 1024 ** 3,
         "t": 1000 ** 4, "tb": 1000 ** 4, "tib": 1024 ** 4}


def whole(value: Any, least: int = 0) -> int:
    if isinstance(value, bool):
        raise ValueError(f"give a whole number, not {value!r}")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"give a whole number (got {value!r})")
        value = int(value)
    if isinstance(value, str):
        try:
            value = int(value.strip().replace("_", ""))
        except ValueError:
            raise ValueError(f"give a whole number (got {value!r})") from None
    if not isinstance(value, int):
        raise ValueError(f"give a whole number (got {value!r})")
    if value < least:
        raise ValueError(f"give {least} or more (got {value})")
    return value


def budget_count(value: Any) -> int:
    try:
        return whole(value)
    except ValueError as exc:
        raise ValueError(f"{exc}; 0 means no limit") from None


def positive(value: Any) -> int:
    return whole(value, 1)


def dollars(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError(f"give a number of dollars, not {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"give a number of dollars like 2 or 0.50 (got {value!r})") from None
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"give a finite number of dollars, 0 or more (got {value!r}); "
                         "0 means no limit")
    return number


def duration(value: Any) -> float:
    from golem.agent.budget import parse_duration
    if isinstance(value, bool):
        raise ValueError(f"give a duration like 90s, 10m or 1h30m, not {value!r}")
    try:
        return parse_duration(str(value))
    except UsageError as exc:
        raise ValueError(str(exc)) from None


def size(value: Any) -> int:
    """Bytes, from a number or text like 1GiB, 500MB, 2g."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        text = str(value)
    elif isinstance(value, str):
        text = value
    else:
        raise ValueError(f"give a size like 1GiB or 500MB (got {value!r})")
    number = text.strip().lower().replace(" ", "")
    unit = number.lstrip("0123456789.")
    digits = number[:len(number) - len(unit)]
    try:
        amount = float(digits)
    except ValueError:
        raise ValueError(f"give a size like 1GiB or 500MB (got {value!r})") from None
    if unit not in UNITS or not math.isfinite(amount) or amount < 0:
        raise ValueError(f"give a size like 1GiB or 500MB (got {value!r})")
    return int(amount * UNITS[unit])


def text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"give a non-empty text (got {value!r})")
    return value.strip()


def command(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"give the command that runs the tests, like 'python3 -m pytest -q' "
                         f"(got {value!r})")
    return value.strip()


def choice(values: tuple[str, ...]) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        if value not in values:
            raise ValueError(f"choose one of {', '.join(values)} (got {value!r})")
        return value
    return parse


def programs(value: Any) -> list[str]:
    """Program names: a list, or one text with commas (a flag may be given several times)."""
    items = value if isinstance(value, list) else [value]
    found = []
    for item in items:
        if not isinstance(item, str):
            raise ValueError(f"give program names, like pytest,python3 (got {item!r})")
        for name in (p.strip() for p in item.split(",")):
            if not name:
                continue
            if "/" in name or "\0" in name:
                raise ValueError(f"{name!r}: give a bare program name found on PATH, like "
                                 f"{os.path.basename(name) or 'pytest'!r}")
            found.append(name)
    return found


def globs(value: Any) -> list[str]:
    """Path patterns relative to the workspace (`*` also crosses `/`): a list, or one text
    with commas (a flag may be given several times)."""
    items = value if isinstance(value, list) else [value]
    found = []
    for item in items:
        if not isinstance(item, str):
            raise ValueError(f"give path patterns, like .github/workflows/*.yml (got {item!r})")
        for pattern in (p.strip() for p in item.split(",")):
            if not pattern:
                continue
            if "\0" in pattern or pattern.startswith("/"):
                raise ValueError(f"{pattern!r}: give a pattern relative to the workspace, "
                                 "like .github/workflows/*.yml")
            found.append(pattern[2:] if pattern.startswith("./") else pattern)
    return found


def test_ids(value: Any) -> list[str]:
    """Test ids as the verdict names them (`tests/test_x.py::test_y`, `test_x.T.test_y`), or
    a file, module or class holding them: a list, or one text with commas (a flag may be
    given several times); a comma inside a parameter set (`test_y[1,2]`) stays in the id."""
    items = value if isinstance(value, list) else [value]
    found = []
    for item in items:
        if not isinstance(item, str):
            raise ValueError(f"give test ids, like tests/test_x.py::test_y (got {item!r})")
        depth, start, pieces = 0, 0, []
        for at, char in enumerate(item):
            if char == "[":
                depth += 1
            elif char == "]" and depth:
                depth -= 1
            elif char == "," and not depth:
                pieces.append(item[start:at])
                start = at + 1
        pieces.append(item[start:])
        for test_id in (p.strip() for p in pieces):
            if not test_id:
                continue
            if "\0" in test_id or "\n" in test_id or test_id.startswith("golem:"):
                raise ValueError(f"{test_id!r}: give a test id as the verdict names it, like "
                                 "tests/test_x.py::test_y (golem's own findings cannot be "
                                 "set apart)")
            found.append(test_id)
    return found


def flag_bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"give true or false (got {value!r})")
    return value


def price(value: Any):
    from golem.llm.prices import parse_price
    if isinstance(value, list):
        value = ",".join(str(v) for v in value)
    if not isinstance(value, str):
        raise ValueError(f"give IN,OUT[,CACHE_READ] (got {value!r})")
    return parse_price(value)


def provider_name(value: Any) -> str:
    from golem.llm import provider_names
    if value not in provider_names():
        raise ValueError(f"unknown provider {value!r}; choose one of: "
                         + ", ".join(provider_names()))
    return value


def plain(value: Any) -> str:
    """A value as a person writes it: true/false, a,b,c, (none)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(value) or "(none)"
    if value is None:
        return "(none)"
    if hasattr(value, "describe"):
        return value.describe()
    return str(value)


def show(name: str, value: Any) -> str:
    """A setting's value as `golem config` prints it."""
    if name == "keep-size":
        return "no limit" if not value else _bytes(value)
    if name in ("steps", "tokens", "cost", "wall", "keep-runs") and value in (0, 0.0):
        return "0 (no limit)"
    if name == "wall":
        return clock(value)
    if name == "cost":
        return f"${value:.2f}"
    return plain(value)


def clock(seconds: float) -> str:
    """A duration as a person writes it: 90s, 30m, 1h30m, 250ms."""
    if 0 < seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    whole_seconds = int(seconds)
    hours, rest = divmod(whole_seconds, 3600)
    minutes, secs = divmod(rest, 60)
    out = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "") + \
        (f"{secs}s" if secs else "")
    return out or "0s"


def _bytes(count: int) -> str:
    for unit, scale in (("GiB", 1024 ** 3), ("MiB", 1024 ** 2), ("KiB", 1024)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}".replace(".0 ", " ")
    return f"{count} B"


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# golem sets these itself for every command and test run
OWN_VARIABLES = ("HOME", "TMPDIR", "PYTHONPYCACHEPREFIX", "PYTHONNOUSERSITE",
                 "PYTHONDONTWRITEBYTECODE", "VIRTUAL_ENV")


def variables(value: Any) -> list[str]:
    """`NAME=VALUE` or `NAME` items: a list, or text with commas (a piece that is neither
    belongs to the value before it, so `A=x,y z` keeps its comma)."""
    from golem.tools.process import SECRET_WORDS
    items = value if isinstance(value, list) else [value]
    found: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise ValueError(f"give NAME=VALUE or NAME, like PYTHONPATH=src (got {item!r})")
        pieces: list[str] = []
        for piece in item.split(","):
            name = piece.split("=", 1)[0].strip()
            if pieces and ("=" in pieces[-1]) and not _NAME.fullmatch(name):
                pieces[-1] += "," + piece
            else:
                pieces.append(piece)
        for piece in pieces:
            name, eq, text = piece.partition("=")
            name = name.strip()
            if not name and not eq:
                continue
            if not _NAME.fullmatch(name):
                raise ValueError(f"{piece!r}: give NAME=VALUE or NAME, like PYTHONPATH=src")
            if any(word in name.upper() for word in SECRET_WORDS):
                raise ValueError(f"{name}: golem never passes a variable that may hold a key "
                                 "to commands")
            if name in OWN_VARIABLES or name.startswith("GOLEM_"):
                raise ValueError(f"{name}: golem sets this variable itself")
            if "\0" in text:
                raise ValueError(f"{name}: the value holds a NUL byte")
            found.append(f"{name}={text}" if eq else name)
    return found


def environment(items: list[str], environ: dict[str, str]) -> dict[str, str]:
    """The variables `items` (of `variables`) give: NAME=VALUE as written, NAME from
    `environ`. UsageError for a NAME that is not set, or a value that is a key's."""
    from golem.llm import KEYS
    keys = {environ.get(variable, "").strip() for variable, _ in KEYS.values()} - {""}
    found = {}
    for item in items:
        name, eq, text = item.partition("=")
        if not eq:
            if name not in environ:
                raise UsageError(f"-env {name}: it is not set in your environment; give "
                                 f"{name}=VALUE")
            text = environ[name]
        if text.strip() and text.strip() in keys:
            raise UsageError(f"-env {name}: its value is an API key; golem never passes a key "
                             "to commands")
        found[name] = text
    return found
