"""The dollars of `fix -attempts N`: one `-cost` budget shared by every attempt.

Each attempt keeps its own steps and tokens; the dollars of all of them are counted in one
pool, and each model call reserves its cost there before it is made, so attempts side by
side cannot together run past the budget by more than one call.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from golem.core import cancel
from golem.agent.budget import Budget
from golem.llm.types import Usage


class Pool:
    """Dollars spent by all attempts together, for the shared -cost budget.

    A model call reserves its cost before it is made (the dearest call seen so far): a call
    starts only while what is spent plus what the calls in flight may cost leaves room for
    it, or when no other call is in flight and the budget is not yet spent. So the total
    stays within the budget plus at most one call's cost (beyond the estimate)."""

    def __init__(self, limit: float):
        self.limit = limit
        self.spent = 0.0
        self.reserved = 0.0
        self.in_flight = 0
        self.dearest = 0.0          # the largest one call has cost
        self.lock = threading.Condition()

    def add(self, amount: float) -> float:
        with self.lock:
            self.spent += max(0.0, amount)
            return self.spent

    def reserve(self, deadline: float | None) -> float | None:
        """Hold room for one call: the amount held, or None when the budget is spent.
        Waits (cancellably) while calls in flight may still use the room."""
        with self.lock:
            while True:
                if not self.limit:
                    return 0.0
                if self.spent >= self.limit:
                    return None
                estimate = self.dearest
                if self.in_flight == 0 or \
                        self.spent + self.reserved + estimate <= self.limit:
                    self.in_flight += 1
                    self.reserved += estimate
                    return estimate
                if cancel.cancelled() or (deadline and time.monotonic() >= deadline):
                    return None
                self.lock.wait(0.05)

    def release(self, held: float, cost: float) -> None:
        """The call that held `held` is over and cost `cost` (already added)."""
        with self.lock:
            self.in_flight = max(0, self.in_flight - 1)
            self.reserved = max(0.0, self.reserved - held)
            self.dearest = max(self.dearest, cost)
            self.lock.notify_all()


@dataclass
class SharedBudget(Budget):
    """An attempt's budget: its own steps and tokens, the command's wall clock, and dollars
    counted in a pool shared by every attempt (reserved before each call)."""

    pool: Pool | None = None
    _seen: float = 0.0
    _held: float | None = None

    def settle(self, usage: Usage) -> float:
        """Add what this attempt spent since the last call to the pool, and release the
        call's reservation; the pool's total."""
        cost = usage.cost or 0.0
        total = self.pool.add(cost - self._seen) if self.pool else cost
        if self.pool and self._held is not None:
            self.pool.release(self._held, cost - self._seen)
            self._held = None
        self._seen = cost
        return total

    def check(self, steps: int, usage: Usage) -> str | None:
        stop = super().check(steps, usage)
        total = self.settle(usage)
        if stop is None and self.pool and self.pool.limit:
            if total >= self.pool.limit:
                return "cost"
            held = self.pool.reserve(self.deadline)
            if held is None:
                return "cancelled" if cancel.cancelled() else \
                    ("wall" if self.pool.spent < self.pool.limit else "cost")
            self._held = held
        return stop
