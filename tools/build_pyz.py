"""Build golem.pyz, a single-file zipapp of the golem package: `python3 tools/build_pyz.py OUT`.

Only golem/ goes in (no caches, tests or examples), so the archive runs anywhere a Python 3.11+
does, with nothing installed.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import zipapp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build(out: str) -> str:
    """Write the zipapp to `out` (atomically) and return its path."""
    out = os.path.abspath(out)
    with tempfile.TemporaryDirectory(prefix="golem-pyz-") as tmp:
        shutil.copytree(os.path.join(ROOT, "golem"), os.path.join(tmp, "src", "golem"),
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo"))
        part = os.path.join(tmp, "golem.pyz")
        zipapp.create_archive(os.path.join(tmp, "src"), part, interpreter="/usr/bin/env python3",
                              main="golem.cli:main", compressed=True)
        shutil.move(part, out + ".part")
        os.replace(out + ".part", out)
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: python3 tools/build_pyz.py OUT", file=sys.stderr)
        sys.exit(2)
    print(f"built {build(sys.argv[1])}")
