"""Which changed paths touch the tests or the test machinery (and so cannot count as a fix).

Protected: existing test files and test data, `conftest.py` anywhere, `__init__.py` in test
packages, test-runner configuration and build files the test command uses, interpreter
start-up hooks (`sitecustomize.py`, `usercustomize.py`, `*.pth`), and new files that shadow a
standard-library or test-runner module. New test files are allowed.
"""

from __future__ import annotations

import fnmatch
import os
import sys

from golem.workflow.snapshot import Changes

TEST_DIRS = {"test", "tests", "testing", "__tests__", "spec"}
TEST_FILES = ("test_*.py", "*_test.py", "test*.py", "*_test.go", "*.test.js", "*.test.ts",
              "*.spec.js", "*.spec.ts", "*.test.mjs", "*.test.cjs", "*.test.jsx", "*.test.tsx")
# read by pytest wherever they sit between the root and the tests, so protected at any depth
NESTED_CONFIG = {"pytest.ini", "tox.ini", "setup.cfg"}
RUNNER_CONFIG = {"pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml", "noxfile.py",
                 ".coveragerc", "go.mod", "go.sum", "jest.config.js", "jest.config.ts",
                 "vitest.config.js", "vitest.config.ts", ".mocharc.json", ".mocharc.js",
                 "package.json", "Cargo.toml", "setup.py"}
BUILD_FILES = {"Makefile", "makefile", "GNUmakefile", "tox.ini", "noxfile.py", "package.json"}
HOOKS = {"sitecustomize.py", "usercustomize.py"}
RUNNER_MODULES = {"pytest", "_pytest", "py", "pluggy", "unittest", "nose", "nose2", "conftest"}


def is_test_path(rel: str) -> bool:
    """A file that belongs to the tests: in a test directory, or named like a test."""
    parts = rel.split("/")
    return any(p in TEST_DIRS for p in parts[:-1]) or _named_like_test(parts[-1])


def _named_like_test(name: str) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in TEST_FILES)


def _shadowed_module(rel: str) -> str | None:
    """The module a new file would shadow when imported (`unittest.py`, `pytest/__init__.py`)."""
    parts = rel.split("/")
    name = parts[-1]
    if name == "__init__.py" and len(parts) > 1:
        module = parts[-2]
    elif name.endswith(".py"):
        module = name[:-3]
    else:
        return None
    if module in sys.stdlib_module_names or module in RUNNER_MODULES:
        return module
    return None


def reason(rel: str, kind: str, test_argv: list[str]) -> str | None:
    """Why a change of `kind` (added/modified/removed) to `rel` is protected, or None."""
    name = rel.rsplit("/", 1)[-1]
    programs = {os.path.basename(a) for a in test_argv[:1]}
    if name == "conftest.py":
        return "conftest.py changes how pytest collects and reports tests"
    if name in HOOKS or name.endswith(".pth"):
        return f"{name} runs code at interpreter start-up"
    if name in NESTED_CONFIG or (name in RUNNER_CONFIG and "/" not in rel) or \
            (name == "pyproject.toml" and is_test_path(rel)):
        return f"{name} is test-runner or build configuration"
    if any(p.endswith((".egg-info", ".dist-info")) for p in rel.split("/")[:-1]):
        return "package metadata: its entry points can load test-runner plugins"
    if name in BUILD_FILES and (programs & {"make", "tox", "nox", "npm", "yarn", "pnpm"}):
        return f"{name} is used by the test command"
    if kind == "added":
        shadow = _shadowed_module(rel)
        if shadow:
            return f"a new {rel} shadows the {shadow!r} module"
        if name == "__init__.py" and is_test_path(rel):
            return "a new __init__.py changes how the test package is imported"
        return None
    if is_test_path(rel):
        verb = "deleted" if kind == "removed" else "modified"
        return f"existing test file {verb}"
    return None


def protected_changes(changes: Changes, test_argv: list[str]) -> list[tuple[str, str]]:
    """(path, reason) for every protected path among the changes, sorted by path."""
    found = []
    for kind, paths in (("added", changes.added), ("modified", changes.modified),
                        ("removed", changes.removed)):
        for rel in paths:
            why = reason(rel, kind, test_argv)
            if why:
                found.append((rel, why))
    return sorted(found)


def new_tests(changes: Changes) -> list[str]:
    """Added files that are tests (allowed, and reported)."""
    return [p for p in changes.added if is_test_path(p)]
