"""What a setting's value may be, and how `golem config` shows it.

Each parser takes what a flag or a configuration file gave (text from a flag; a string,
number, boolean or list from TOML) and returns the value, or raises ValueError saying what a
person should write instead. The flags (golem/flags.py) and the files (golem/config.py) use
the same parsers, so a value means the same wherever it is given.
"""

from __future__ import annotations

import math
import os
from typing import Any, Callable

from golem.errors import UsageError

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
