"""Projects as developers have them: a git repository with a `.venv` inside holding an
editable install of the project itself.

Everything is built offline. `python3 -m venv --without-pip --system-site-packages` makes the
environment (the system's pytest stays importable, as a developer's would be), and the
editable install is written the way setuptools writes it for `pip install -e .`:

- "src-pth": a src/ layout, `__editable__.calc-0.1.pth` holding the absolute path of `src/`
  (setuptools' choice when the layout maps onto one directory);
- "src-finder": a src/ layout installed through an import hook,
  `__editable___calc_0_1_finder.py` with a MAPPING from `calc` to `/abs/src/calc`, and the
  `.pth` line that installs it (setuptools' choice for layouts a path entry cannot express);
- "flat": the package at the top (`calc/`), installed through the import hook too.

The files match what `pip install -e .` with setuptools 65 wrote for these layouts, byte for
byte apart from the paths. `env(layout, active=...)` gives the variables of a shell with the
environment activated (VIRTUAL_ENV and PATH) or not.
"""

from __future__ import annotations

import os
import subprocess
import sysconfig
from dataclasses import dataclass

from tests.fixtures import git, write_files

LAYOUTS = ("src-pth", "src-finder", "flat")
NAME, VERSION = "calc", "0.1"

BUGGY_CORE = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a + b\n"
HALF_CORE = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a + b\n"
FIXED_CORE = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
INIT = "from calc.core import add, mul\n"
TESTS = """\
import unittest

from calc import add, mul


class CalcTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_mul(self):
        self.assertEqual(mul(2, 3), 6)

    def test_zero(self):
        self.assertEqual(add(0, 0), 0)
"""
PYPROJECT = f"""\
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "{NAME}"
version = "{VERSION}"
"""
GITIGNORE = ".venv/\n__pycache__/\n*.egg-info/\n"

# setuptools' editable finder (setuptools/command/editable_wheel.py, _FINDER_TEMPLATE)
FINDER = '''\
import sys
from importlib.machinery import ModuleSpec
from importlib.machinery import all_suffixes as module_suffixes
from importlib.util import spec_from_file_location
from itertools import chain
from pathlib import Path

MAPPING = {mapping!r}
NAMESPACES = {{}}
PATH_PLACEHOLDER = {placeholder!r} + ".__path_hook__"


class _EditableFinder:  # MetaPathFinder
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        for pkg, pkg_path in reversed(list(MAPPING.items())):
            if fullname == pkg or fullname.startswith(f"{{pkg}}."):
                rest = fullname.replace(pkg, "", 1).strip(".").split(".")
                return cls._find_spec(fullname, Path(pkg_path, *rest))

        return None

    @classmethod
    def _find_spec(cls, fullname, candidate_path):
        init = candidate_path / "__init__.py"
        candidates = (candidate_path.with_suffix(x) for x in module_suffixes())
        for candidate in chain([init], candidates):
            if candidate.exists():
                return spec_from_file_location(fullname, candidate)


class _EditableNamespaceFinder:  # PathEntryFinder
    @classmethod
    def _path_hook(cls, path):
        if path == PATH_PLACEHOLDER:
            return cls
        raise ImportError

    @classmethod
    def _paths(cls, fullname):
        # Ensure __path__ is not empty for the spec to be considered a namespace.
        return NAMESPACES[fullname] or MAPPING.get(fullname) or [PATH_PLACEHOLDER]

    @classmethod
    def find_spec(cls, fullname, target=None):
        if fullname in NAMESPACES:
            spec = ModuleSpec(fullname, None, is_package=True)
            spec.submodule_search_locations = cls._paths(fullname)
            return spec
        return None

    @classmethod
    def find_module(cls, fullname):
        return None


def install():
    if not any(finder == _EditableFinder for finder in sys.meta_path):
        sys.meta_path.append(_EditableFinder)

    if not NAMESPACES:
        return

    if not any(hook == _EditableNamespaceFinder._path_hook for hook in sys.path_hooks):
        # PathEntryFinder is needed to create NamespaceSpec without private APIS
        sys.path_hooks.append(_EditableNamespaceFinder._path_hook)
    if PATH_PLACEHOLDER not in sys.path:
        sys.path.append(PATH_PLACEHOLDER)  # Used just to trigger the path hook
'''


@dataclass
class Project:
    """A developer's checkout: where it is, its layout, its environment."""

    root: str
    layout: str
    venv: str

    @property
    def package(self) -> str:
        """The package's directory, relative to the root."""
        return "calc" if self.layout == "flat" else "src/calc"

    @property
    def core(self) -> str:
        return f"{self.package}/core.py"

    @property
    def python(self) -> str:
        return os.path.join(self.venv, "bin", "python")

    def site_packages(self) -> str:
        rel = os.path.relpath(sysconfig.get_path("purelib"), sysconfig.get_path("data"))
        return os.path.join(self.venv, rel)

    def env(self, active: bool) -> dict[str, str | None]:
        """The shell's variables for tests.fixtures.run_cli: activated, or not (and no other
        environment active either)."""
        path = os.environ.get("PATH", "/usr/bin:/bin")
        path = os.pathsep.join(p for p in path.split(os.pathsep)
                               if not p.startswith(self.venv))
        if active:
            return {"VIRTUAL_ENV": self.venv, "CONDA_PREFIX": None,
                    "PATH": os.path.join(self.venv, "bin") + os.pathsep + path}
        return {"VIRTUAL_ENV": None, "CONDA_PREFIX": None, "PATH": path}


def _venv(path: str) -> None:
    subprocess.run(["python3", "-m", "venv", "--without-pip", "--system-site-packages", path],
                   check=True, capture_output=True)


def install_editable(project: Project) -> None:
    """What `pip install -e .` leaves in site-packages for the project's layout."""
    site = project.site_packages()
    stem = f"{NAME}-{VERSION}"
    source = os.path.join(project.root, "src") if project.layout != "flat" else project.root
    if project.layout == "src-pth":
        files = {f"__editable__.{stem}.pth": source + "\n"}
    else:
        module = f"__editable___{NAME}_{VERSION.replace('.', '_')}_finder"
        mapping = {NAME: os.path.join(source, NAME)}
        files = {f"__editable__.{stem}.pth": f"import {module}; {module}.install()",
                 f"{module}.py": FINDER.format(mapping=mapping,
                                               placeholder=f"__editable__.{stem}.finder")}
    files[f"{NAME}-{VERSION}.dist-info/METADATA"] = \
        f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n"
    files[f"{NAME}-{VERSION}.dist-info/INSTALLER"] = "pip\n"
    files[f"{NAME}-{VERSION}.dist-info/direct_url.json"] = \
        '{"dir_info": {"editable": true}, "url": "file://%s"}' % project.root
    write_files(site, files)


def make(parent: str, layout: str = "src-pth", core: str = BUGGY_CORE,
         extra: dict[str, str] | None = None, name: str = "proj",
         tests: str = "tests/test_calc.py") -> Project:
    """A committed git repository `parent/name` with `layout`, a `.venv` inside holding its
    editable install, `core` as the code under test and the tests in `tests` (`{package}`
    stands for the package's directory)."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout: one of {LAYOUTS}")
    root = os.path.join(os.path.realpath(parent), name)
    project = Project(root, layout, os.path.join(root, ".venv"))
    package = project.package
    files = {f"{package}/__init__.py": INIT, f"{package}/core.py": core,
             tests.replace("{package}", package): TESTS, "pyproject.toml": PYPROJECT,
             ".gitignore": GITIGNORE, **(extra or {})}
    os.makedirs(root)
    write_files(root, files)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    _venv(project.venv)
    install_editable(project)
    return project
