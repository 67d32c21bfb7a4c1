"""The scripts golem runs in the test interpreter with `-c`: kept as files beside the
helpers (helpers/compile_sources.py, rewrite_tests.py, discover.py, probe.py), so `make check`
parses them with the rest of golem, and read as text from the package (an install or the
`.pyz` alike)."""

from __future__ import annotations

from functools import cache
from importlib import resources


@cache
def script(name: str) -> str:
    """The text of the helper script `name`."""
    return resources.files("golem.workflow.verifier.helpers").joinpath(name) \
        .read_text(encoding="utf-8")
