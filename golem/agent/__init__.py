"""The agent: the loop that turns model replies into tool calls, under a budget."""

from golem.agent.budget import Budget, parse_duration
from golem.agent.loop import DECLINE_MARK, Outcome, run

__all__ = ["Budget", "DECLINE_MARK", "Outcome", "parse_duration", "run"]
