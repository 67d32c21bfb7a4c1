"""Whether the baseline's test command reached the tests at all.

A command that never got to run a test is no baseline to spend a model on: the module or
script it names does not exist (`python3 -m nosuchmodule`), the runner cannot be imported
(pytest missing from the test interpreter), the collection imported nothing, or every test
failed to import a module the environment lacks. Each is a usage error before any model call,
with a hint at the environment or `-env`.

A missing module is the environment's fault, not the code's, when the tests themselves
import it (a test file or `conftest.py` is the last frame before the error), when it is in
the workspace but not importable (a src/ layout that was never installed), or when the
project declares it (pyproject.toml, setup.cfg, setup.py, requirements files). A misspelt
import in the code under test is none of these, and the model may fix it.
"""

from __future__ import annotations

import os
import re

from golem.workflow.verifier.suite import Plan, SuiteResult, is_python

_MISSING = re.compile(r"No module named '?([A-Za-z_][\w.]*)'?")
_FRAME = re.compile(r'File "([^"\n]+)", line \d+|^([^\s:"][^:\n]*\.py):\d+: in ', re.M)
_TEST_FILE = re.compile(r"(^test_.*|.*_test|^conftest)\.py$")
DECLARATIONS = ("pyproject.toml", "setup.cfg", "setup.py", "requirements.txt",
                "requirements-dev.txt", "requirements-test.txt", "dev-requirements.txt",
                "test-requirements.txt", "Pipfile", "tox.ini")


def _missing(output: str) -> list[tuple[str, str | None]]:
    """(module, the file of the last frame before the error) for each top-level module the
    output says could not be found, once each."""
    found: dict[str, str | None] = {}
    for match in _MISSING.finditer(output):
        name = match.group(1)
        if "." in name or name in found:
            continue
        frames = _FRAME.findall(output, max(0, match.start() - 4000), match.start())
        last = frames[-1] if frames else None
        found[name] = (last[0] or last[1]) if last else None
    return list(found.items())


def _where(root: str, name: str) -> str | None:
    """The top-level directory of `root` holding the package or module `name`: what
    PYTHONPATH would need."""
    try:
        tops = sorted(e.name for e in os.scandir(root) if e.is_dir(follow_symlinks=False)
                      and not e.name.startswith("."))[:500]
    except OSError:
        return None
    for parent in sorted(tops, key=lambda n: n not in ("src", "lib", "python")):
        top = os.path.join(root, parent)
        if os.path.isfile(os.path.join(top, name, "__init__.py")) or \
                os.path.isfile(os.path.join(top, name + ".py")):
            return parent
    return None


def _declared(root: str, name: str) -> bool:
    """Whether the project names `name` among its dependencies (as written, or with - for
    _), in any of its declaration files."""
    forms = {name.lower(), name.lower().replace("_", "-")}
    for file in DECLARATIONS:
        try:
            with open(os.path.join(root, file), "rb") as handle:
                text = handle.read(1_000_000).decode("utf-8", errors="replace").lower()
        except OSError:
            continue
        if any(re.search(rf"(?<![\w.-]){re.escape(f)}(?![\w-])", text) for f in forms):
            return True
    return False


def _hint(cwd: str, name: str) -> str:
    where = _where(cwd, name)
    if where:
        return (f"{where}/{name} is there but not importable: install the project in its "
                f"environment (pip install -e . in .venv) or give -env PYTHONPATH={where}")
    return ("run golem in the environment that has it (activate it, or give the workspace a "
            ".venv with it installed), or pass what the project needs with -env "
            "(e.g. -env PYTHONPATH=src)")


def _environments(cwd: str, missing: list[tuple[str, str | None]]) -> list[str]:
    """The missing modules that are the environment's to provide."""
    return [name for name, frame in missing
            if (frame and _TEST_FILE.match(os.path.basename(frame)))
            or _where(cwd, name) or _declared(cwd, name)]


def never_reached(result: SuiteResult, plan: Plan, cwd: str) -> str | None:
    """Why the baseline's test command never got to run the tests, or None."""
    argv = plan.command.argv
    output = result.output
    python = plan.interpreter.executable if plan.interpreter else argv[0]
    if is_python(argv[0]) and plan.runner == "exit-code" and len(argv) > 1:
        if argv[1] == "-m" and len(argv) > 2 and (
                re.search(rf"No module named {re.escape(argv[2])}\s*$", output, re.M)
                or f"finding module specification for '{argv[2]}'" in output):
            return (f"the test command never reached a test runner: {argv[0]} has no module "
                    f"{argv[2]!r} (check its spelling, or install it in the test interpreter)")
        if not argv[1].startswith("-") and "can't open file" in output:
            return (f"the test command never reached a test runner: {argv[0]} cannot open "
                    f"{argv[1]!r} (check the -test path; it is relative to -dir)")
    if result.tests is None:
        return None
    missing = _missing(output)
    if not result.tests and missing:
        names = [name for name, _ in missing]
        if plan.runner in names:
            return (f"the test runner cannot be imported: {python} has no module "
                    f"{plan.runner!r}; install it there, or activate the environment that "
                    "has it")
        return f"no test ran: the tests cannot import {names[0]!r}; " + _hint(cwd, names[0])
    if result.tests and set(result.tests) <= result.pseudo and \
            len(result.failing) == len(result.tests):
        lacking = _environments(cwd, missing)
        if lacking:
            return (f"every test failed to import: no module named {lacking[0]!r} for "
                    f"{python}; " + _hint(cwd, lacking[0]))
    return None
