"""A small calculator library (with two deliberate defects, for golem's demo)."""

from calculator.core import add, divide, mean, power

__all__ = ["add", "divide", "mean", "power"]
