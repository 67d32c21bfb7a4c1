"""The interpreter that runs the tests, pinned at the baseline.

`locate` asks the Python a test command names (`python3`, a virtual environment's python, a
pyenv shim, the interpreter of a `pytest` script) where it really is, without running any
workspace code or site hook (`-I -S`), so every later run uses that exact interpreter: a
shim that reads `.python-version`, or a PATH that changed, cannot swap it. The directories it
lives in are bound read-only into every sandbox, wherever they are (under /tmp too).

`probe` then asks it, inside the baseline's sandbox and with the working directory kept off
sys.path (`-I`), which top-level modules it can import from outside the workspace: the
standard library, site-packages, the runner and its dependencies. A change that creates one
of those names where the tests import from is shadowing (golem/workflow/verifier/protect.py).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field

from golem.core.errors import UsageError
from golem.tools import process
from golem.workflow.verifier.scripts import script

LOCATE = ("import sys, json; print(json.dumps({'executable': sys.executable, "
          "'version': list(sys.version_info[:3]), 'base_prefix': sys.base_prefix, "
          "'base_exec_prefix': sys.base_exec_prefix, "
          "'tag': sys.implementation.cache_tag}))")

# the script that asks the interpreter (helpers/probe.py, run with -c)
PROBE = script("probe.py")


@dataclass
class Interpreter:
    """The test interpreter: its absolute path, version, the directories it needs, and the
    module names it imports from outside the workspace (filled by `probe`)."""

    executable: str
    version: tuple[int, ...]
    roots: tuple[str, ...]
    names: frozenset[str] = field(default_factory=frozenset)
    suffixes: tuple[str, ...] = (".py", ".pyc", ".so")
    cache_tag: str | None = None        # names its bytecode files (`cpython-311`)

    def describe(self) -> str:
        return f"{self.executable} (Python {'.'.join(map(str, self.version))})"


def _script_interpreter(path: str) -> str | None:
    """The Python a console script (`pytest`) runs with, from its `#!` line."""
    try:
        with open(path, "rb") as handle:
            first = handle.readline(400)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode("utf-8", errors="replace").split()
    if not words:
        return None
    if os.path.basename(words[0]) == "env" and len(words) > 1:
        words = words[1:]
    name = os.path.basename(words[0])
    return words[0] if name.startswith("python") else None


def locate(program: str, env: dict[str, str], cwd: str, script: bool = False) -> Interpreter:
    """Pin the interpreter `program` names (with `script`, the interpreter of the console
    script `program`). UsageError, saying why, when it cannot be found or started."""
    found = shutil.which(program, path=env.get("PATH")) if "/" not in program else program
    if not found:
        raise UsageError(f"the test command cannot start: {program!r} is not on PATH")
    if script:
        inner = _script_interpreter(found)
        if inner is None:
            raise UsageError(f"cannot tell which Python {found} runs (no python #! line); "
                             "use -test 'python3 -m pytest ...'")
        found = shutil.which(inner, path=env.get("PATH")) if "/" not in inner else inner
        if not found:
            raise UsageError(f"the test command cannot start: {inner!r} is not on PATH")
    done = process.run([found, "-I", "-S", "-c", LOCATE], cwd=cwd, env=env, timeout=60)
    try:
        data = json.loads(done.output.strip().splitlines()[-1])
        executable = os.path.abspath(data["executable"])
        version = tuple(int(v) for v in data["version"])
    except (ValueError, KeyError, IndexError, TypeError):
        last = done.output.strip().splitlines()[-1:] or ["no output"]
        raise UsageError(f"the test command cannot start: {found} did not run as Python 3 "
                         f"({last[0][:200]})") from None
    roots = {os.path.dirname(os.path.realpath(executable)),
             os.path.realpath(data["base_prefix"]), os.path.realpath(data["base_exec_prefix"])}
    venv = os.path.dirname(os.path.dirname(executable))
    if os.path.isfile(os.path.join(venv, "pyvenv.cfg")):
        roots.add(os.path.realpath(venv))
    chosen = sorted(r for r in roots if os.path.isdir(r))
    chosen = [r for r in chosen if not any(r != q and r.startswith(q + "/") for q in chosen)]
    tag = data.get("tag")
    tag = tag if isinstance(tag, str) and tag.replace("-", "").isalnum() else None
    return Interpreter(executable, version, tuple(chosen), cache_tag=tag)


def probe(interp: Interpreter, workspace: str, deps: list[str], env: dict[str, str],
          wrap=None) -> Interpreter:
    """Fill in the names `interp` imports from outside `workspace` (its `deps`, dependency
    trees, count as outside). Run inside the baseline's sandbox, writing no bytecode."""
    argv = [interp.executable, "-I", "-B", "-c", PROBE, workspace,
            *(os.path.join(workspace, d) for d in deps)]
    done = process.run(argv, cwd=workspace, env=env, timeout=120, cap=8_000_000, wrap=wrap)
    try:
        data = json.loads(done.output.strip().splitlines()[-1])
        interp.names = frozenset(str(n) for n in data["names"])
        interp.suffixes = tuple(str(s) for s in data["suffixes"])
    except (ValueError, KeyError, IndexError, TypeError):
        last = done.output.strip().splitlines()[-1:] or ["no output"]
        raise UsageError(f"the test interpreter {interp.executable} cannot run in the sandbox "
                         f"({last[0][:300]})") from None
    return interp


VENV_NAMES = (".venv", "venv")     # where uv, poetry (in-project) and `python -m venv` put it


def _usable_venv(path: str) -> bool:
    """A virtual environment whose python exists and can be started."""
    python = os.path.join(path, "bin", "python")
    return (os.path.isfile(os.path.join(path, "pyvenv.cfg")) and os.path.isfile(python)
            and os.access(python, os.X_OK))


def _repository_top(root: str) -> str:
    """The top of the git checkout holding `root` (where `.git` is), else `root`."""
    path = root
    while True:
        if os.path.exists(os.path.join(path, ".git")):
            return path
        parent = os.path.dirname(path)
        if parent == path:
            return root
        path = parent


def find_venv(root: str, environ: dict[str, str]) -> tuple[str | None, str]:
    """The virtual environment test commands should run in, and why: the active one
    (`VIRTUAL_ENV`, or a conda environment), else the workspace's own (`.venv`, `venv`, the
    directory uv's UV_PROJECT_ENVIRONMENT names, any top-level directory with a
    `pyvenv.cfg`), else one of those at the top of the git checkout `root` is in. None when
    there is none to activate (an active one is already on PATH)."""
    active = environ.get("VIRTUAL_ENV") or environ.get("CONDA_PREFIX")
    if active:
        which = "VIRTUAL_ENV" if environ.get("VIRTUAL_ENV") else "CONDA_PREFIX"
        return None, f"the active virtual environment ({which}={active})"
    names = list(VENV_NAMES)
    uv = environ.get("UV_PROJECT_ENVIRONMENT", "")
    if uv and not os.path.isabs(uv) and "/" not in uv.strip("/"):
        names.insert(0, uv.strip("/"))
    try:
        extra = sorted(e.name for e in os.scandir(root)
                       if e.is_dir(follow_symlinks=False) and e.name not in names
                       and os.path.isfile(os.path.join(e.path, "pyvenv.cfg")))
    except OSError:
        extra = []
    for name in names + extra:
        path = os.path.join(root, name)
        if _usable_venv(path):
            return path, f"the workspace's own {name}; no virtual environment is active"
    top = _repository_top(root)
    if top != root:
        for name in names:
            path = os.path.join(top, name)
            if _usable_venv(path):
                return path, (f"the repository's {name} at {top}; no virtual environment "
                              "is active")
    return None, "no virtual environment is active and the workspace has none"


def activate(env: dict[str, str], venv: str) -> dict[str, str]:
    """`env` as `source VENV/bin/activate` leaves it: the environment's bin first on PATH."""
    path = env.get("PATH", "")
    return {**env, "VIRTUAL_ENV": venv,
            "PATH": os.path.join(venv, "bin") + (os.pathsep + path if path else "")}
