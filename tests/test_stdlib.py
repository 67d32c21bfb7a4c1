"""golem has no dependencies: every module under golem/ (and the benchmark under tests/bench/)
parses and imports only the standard library and golem itself. `make check` runs this alone."""

from __future__ import annotations

import ast
import os
import sys
import unittest

from tests.fixtures import REPO_ROOT

ALLOWED = set(sys.stdlib_module_names) | {"golem", "__future__"}
# the bundled example is a project golem works on, not part of golem
EXAMPLES = os.path.join(REPO_ROOT, "golem", "examples")
# the verifier's helpers run under the project's own interpreter, where its pytest lives
HELPERS = os.path.join(REPO_ROOT, "golem", "workflow", "verifier", "helpers")


def modules(top: str):
    for base, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__"
                         and os.path.join(base, d) != EXAMPLES)
        for name in sorted(files):
            if name.endswith(".py"):
                yield os.path.join(base, name)


def problems(path: str, allowed: set[str]) -> list[str]:
    """What in the module at `path` is not the standard library (or does not parse)."""
    with open(path, encoding="utf-8") as handle:
        source = handle.read()
    rel = os.path.relpath(path, REPO_ROOT)
    try:
        tree = ast.parse(source, rel)
    except SyntaxError as exc:
        return [f"{rel}:{exc.lineno}: does not parse: {exc.msg}"]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [f"{rel}:{node.lineno}: imports {name} (not the standard library)"
                  for name in names if name.split(".")[0] not in allowed]
    return found


class StandardLibraryOnlyTest(unittest.TestCase):
    def test_golem_imports_only_the_standard_library(self):
        paths = list(modules(os.path.join(REPO_ROOT, "golem")))
        self.assertGreater(len(paths), 40)
        found = [p for path in paths for p in problems(
            path, ALLOWED | ({"pytest"} if path.startswith(HELPERS + os.sep) else set()))]
        self.assertEqual(found, [])

    def test_the_benchmark_imports_only_the_standard_library_golem_and_tests(self):
        paths = list(modules(os.path.join(REPO_ROOT, "tests", "bench")))
        self.assertTrue(paths)
        found = [p for path in paths for p in problems(path, ALLOWED | {"tests"})]
        self.assertEqual(found, [])

    def test_the_check_sees_a_third_party_import_and_a_syntax_error(self):
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            bad = os.path.join(tmp, "bad.py")
            with open(bad, "w", encoding="utf-8") as handle:
                handle.write("import os\nimport requests\nfrom yaml import safe_load\n")
            self.assertEqual(len(problems(bad, ALLOWED)), 2)
            with open(bad, "w", encoding="utf-8") as handle:
                handle.write("def broken(:\n")
            self.assertIn("does not parse", problems(bad, ALLOWED)[0])

    def test_the_distribution_declares_no_dependencies(self):
        import tomllib
        with open(os.path.join(REPO_ROOT, "pyproject.toml"), "rb") as handle:
            project = tomllib.load(handle)["project"]
        self.assertEqual(project["dependencies"], [])


if __name__ == "__main__":
    unittest.main()
