"""What a run's stop adds to a FAILED verdict: the evidence decides the verdict, but a person
reading `FAILED` should also learn when the model could not be reached or would not answer."""

from __future__ import annotations

from typing import Any

# the labels provider errors start with ("openai: HTTP 401: ...")
_LABELS = ("openrouter: ", "openai: ", "anthropic: ", "replay: ", "demo: ")


def explain(verdict: Any, outcome: Any) -> None:
    """Fold the stop into a FAILED verdict's summary: a provider error leads the line
    (`FAILED: provider error: HTTP 401 ...`; the exit code is then 4), a refusal is named
    after the test results."""
    if verdict.name != "FAILED":
        return
    if outcome.stop == "provider_error" and outcome.error:
        rest = verdict.summary.removeprefix("FAILED: ")
        verdict.summary = f"FAILED: provider error: {provider_detail(outcome.error)}; {rest}"
    elif outcome.stop == "refused":
        verdict.summary += f"; {outcome.error or 'the model refused'}"


def provider_detail(error: str) -> str:
    """A provider error without the provider's name in front (the run named it already)."""
    for label in _LABELS:
        if error.startswith(label):
            return error[len(label):]
    return error
