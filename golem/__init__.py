"""golem: point an LLM agent at a failing test suite, then verify the result itself."""

__version__ = "0.1.0"
