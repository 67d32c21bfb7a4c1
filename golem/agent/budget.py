"""Run budgets: steps, tokens, wall clock and dollars. Zero means no limit."""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field

from golem.core import cancel
from golem.core.errors import UsageError
from golem.llm.types import Usage


@dataclass
class Budget:
    """Limits for one run; `check` is the single place where they are enforced."""

    steps: int = 0
    tokens: int = 0
    wall: float = 0.0       # seconds
    cost: float = 0.0       # dollars
    started: float = field(default_factory=time.monotonic)

    @property
    def deadline(self) -> float | None:
        """The monotonic instant the wall budget ends, or None."""
        return self.started + self.wall if self.wall > 0 else None

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def check(self, steps: int, usage: Usage) -> str | None:
        """The name of the first exhausted budget, or None while all have room left
        (`cancelled` when another attempt already won)."""
        if cancel.cancelled():
            return "cancelled"
        if self.steps and steps >= self.steps:
            return "steps"
        if self.tokens and usage.total >= self.tokens:
            return "tokens"
        if self.cost and (usage.cost or 0.0) >= self.cost:
            return "cost"
        if self.wall and self.elapsed() >= self.wall:
            return "wall"
        return None


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")


def parse_duration(text: str) -> float:
    """Seconds in `90s`, `10m`, `1h30m`, `250ms` or a bare number of seconds."""
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(value):
            raise UsageError(f"duration must be a finite number of seconds: {text!r}")
        if value < 0:
            raise UsageError(f"duration must not be negative: {text!r}")
        return value
    pos, total = 0, 0.0
    scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    for match in _DURATION.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * scale[match.group(2)]
        pos = match.end()
    if pos != len(text) or not text:
        raise UsageError(f"bad duration {text!r}; use forms like 90s, 10m, 1h30m or 0")
    return total
