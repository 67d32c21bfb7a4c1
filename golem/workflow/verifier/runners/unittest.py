"""unittest: `python3 -m unittest ...`, run under golem's driver (helpers/unittest_driver.py),
which streams one sealed record per finished test; suite.py's `_StreamReader` reads them.

Detection: a `tests/` or `test/` directory holding Python files (discovered from there, with
`-t .` when it is a package), `test*.py` files at the top, or a test directory inside the
project's package (`pkg/tests`, `src/pkg/tests`), discovered with the top-level directory
that makes the package importable as itself.
"""

from __future__ import annotations

import os

from golem.workflow.verifier.runners.base import Call, Candidate, Outcomes, Tree, is_python

DISCOVER = ["python3", "-m", "unittest", "discover"]


def isolated(call: Call) -> list[str]:
    """The test interpreter as golem starts it: isolated from the user's site and the
    working directory, its bytecode in golem's cache (written only by a baseline)."""
    return [call.program, "-I", *([] if call.write_cache else ["-B"]), "-X",
            f"pycache_prefix={call.scratch.pycache}"]


class Unittest:
    name = "unittest"
    evidence = "unittest-json"
    reads = "stream"
    python = True
    trust = ""
    looks_for = ("python3 -m unittest discover (Python files in tests/ or test/, test*.py, "
                 "pkg/tests/)")
    homes: dict[str, str] = {}

    def claims(self, argv: list[str]) -> bool:
        return is_python(argv[0]) and argv[1:3] == ["-m", "unittest"]

    def detect(self, tree: Tree) -> list[Candidate]:
        found = []
        for folder in ("tests", "test"):
            if tree.isdir(folder) and tree.holds_python(folder):
                argv = [*DISCOVER, "-s", folder]
                if tree.exists(f"{folder}/__init__.py"):
                    argv += ["-t", "."]
                found.append(Candidate(argv, f"{folder}/ directory", 70))
                break
        if any(n.startswith("test") and n.endswith(".py") for n in tree.listing()):
            found.append(Candidate(list(DISCOVER), "test*.py files", 65))
        inside = tree.package_tests()
        if inside:
            found.append(self._inside(tree, inside))
        return found

    def _inside(self, tree: Tree, inside: list[tuple[str, str]]) -> Candidate:
        """The discovery that finds the tests inside the packages: from the one test
        directory, with the package's parent as the top-level directory (so `pkg.tests`
        imports as itself, and relative imports work) when it is a package; from that
        parent when several packages hold tests and each test directory is a package."""
        packaged = [(top, folder) for top, folder in inside
                    if tree.exists(f"{folder}/__init__.py")]
        top, folder = inside[0]
        if len(inside) > 1 and len(packaged) == len(inside) and \
                len({t for t, _ in inside}) == 1:
            start = top or "."
            return Candidate([*DISCOVER, "-s", start, "-t", start],
                             " and ".join(f"{f}/" for _, f in inside) + " inside packages", 50)
        argv = [*DISCOVER, "-s", folder]
        if (top, folder) in packaged:
            argv += ["-t", top or "."]
        return Candidate(argv, f"{folder}/ inside a package", 50)

    def argv(self, call: Call) -> list[str]:
        selection = [f"--golem-only={call.only}"] if call.only is not None else []
        return [*isolated(call), os.path.join(call.helpers, "unittest_driver.py"), *selection,
                *call.command[3:]]

    def parse(self, text: str, cwd: str) -> Outcomes:
        raise TypeError("unittest's evidence is golem's record stream (suite.py)")

    def alone(self, test_id: str, files: dict[str, str]) -> str | None:
        return test_id


RUNNER = Unittest()
