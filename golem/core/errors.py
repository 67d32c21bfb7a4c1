"""golem's exceptions, all in one place.

Three families, sorted by who can recover:

- `UsageError`: the person running golem must change something (a flag, a key, a path).
  The CLI turns it into one line on stderr and exit 2.
- `ProviderError`: the model's service failed in a way retries did not cure. It ends the run
  with stop `provider_error`; the verdict still rests on golem's own evidence.
- `ToolError`: the model asked for something it may not have or that cannot be done. It goes
  back to the model as text starting with `Error:` and costs one step.

`OutOfTime` is raised wherever a wait would overrun the wall-clock budget, so the loop can
stop with `wall` instead of blocking.

Two are BaseExceptions, so that no `except Exception` on the way can swallow them: `Interrupted`
(SIGTERM or SIGHUP, handled like Ctrl-C, whose KeyboardInterrupt it extends) and `Abort` (a
usage error found by another thread, raised in the main thread to stop what it is doing).
"""

import signal


class GolemError(Exception):
    """Base of every error golem raises on purpose."""


class UsageError(GolemError):
    """Bad flags, a missing key, a missing directory: exit 2 with one clear line."""


class ProviderError(GolemError):
    """The provider failed and retrying will not (or did not) help."""

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False,
                 retry_after: float | None = None):
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after


class ToolError(GolemError):
    """A tool could not do what the model asked; the message is shown to the model."""


class OutOfTime(GolemError):
    """The wall-clock budget ran out during a wait (a model call, a retry delay, a command)."""


class Cancelled(GolemError):
    """Another attempt already won (or the command is ending): this one stops where it is."""


class Interrupted(KeyboardInterrupt):
    """A signal (SIGINT, SIGTERM, SIGHUP) ended the run; exit 128 + `signum`.

    `report` is the result so far, when a workflow had one to give (printed with -json).
    """

    def __init__(self, signum: int = signal.SIGINT, report: dict | None = None):
        super().__init__(signum)
        self.signum = signum
        self.report = report


def interrupted(cause: BaseException | None, report: dict | None = None) -> Interrupted:
    """An Interrupted for the KeyboardInterrupt `cause` (its signal kept), carrying `report`."""
    return Interrupted(getattr(cause, "signum", signal.SIGINT), report)


class Abort(BaseException):
    """A usage error found in another thread (the preflight), raised in the main thread while
    it runs something else (the baseline). The CLI treats it as a UsageError: exit 2."""
