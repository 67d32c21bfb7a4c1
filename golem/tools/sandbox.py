"""OS-level isolation for every command golem starts, test runs included (bubblewrap).

With `bwrap` the command sees the whole filesystem read-only, except the workspace and
golem's scratch directory; `/tmp` is private and `/run` empty; home directories are hidden
behind empty tmpfs mounts, with read-only binds back for the Python installation and the
toolchains on PATH that live there; `.git` is read-only; there is no network and no view of
other processes. docs/security.md says what this does and does not promise.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from typing import Callable

from golem.core.errors import UsageError

MODES = ("auto", "bwrap", "none")
HIDDEN = ("/root", "/home")
# Toolchain trees under a home that are bound back whole when one of their directories is on
# PATH (pyenv shims need the version tree beside them). `.local` is not one of them: it holds
# application data and golem's own run snapshots, and only its `bin` on PATH is bound back.
TOOL_TREES = (".pyenv", ".cargo", ".rustup", ".nvm")
# Credentials kept inside those trees, masked with an empty file (cargo's registry token).
TREE_SECRETS = {".cargo": ("credentials", "credentials.toml")}


def _hidden_under(path: str, hidden: list[str]) -> bool:
    return any(path == h or path.startswith(h + "/") for h in hidden)


def _binds_back(hidden: list[str], env_path: str, wanted: tuple[str, ...] = ()) -> list[str]:
    """Directories under a hidden tree that commands still need: Pythons, PATH entries (a
    virtual environment whole, when one is on PATH) and the `wanted` directories."""
    keep = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix,
                                          *wanted) if os.path.isdir(p)}
    for entry in env_path.split(os.pathsep):
        if entry and os.path.isdir(entry):
            real = os.path.realpath(entry)
            keep.add(real)
            # pyenv-style shims and version trees live next to each other; a virtual
            # environment's bin needs the environment around it
            parent = os.path.dirname(real)
            if os.path.basename(parent) in TOOL_TREES or \
                    os.path.isfile(os.path.join(parent, "pyvenv.cfg")):
                keep.add(parent)
            # rustup's proxies in .cargo/bin run the toolchains kept in .rustup beside it
            if os.path.basename(parent) == ".cargo" and \
                    os.path.isdir(os.path.join(os.path.dirname(parent), ".rustup")):
                keep.add(os.path.join(os.path.dirname(parent), ".rustup"))
    chosen = sorted(p for p in keep if _hidden_under(p, hidden))
    # drop any path already covered by a shorter one
    return [p for p in chosen if not any(p != q and p.startswith(q + "/") for q in chosen)]


def bwrap_argv(bwrap: str, root: str, scratch: str | tuple[str, ...], env_path: str,
               read_only: tuple[str, ...] = (), hidden: tuple[str, ...] = (),
               tools: tuple[str, ...] = ()) -> list[str]:
    """The bubblewrap prefix for commands in `root` (bound read-write, as are the `scratch`
    directories). `read_only` directories are bound back read-only, wherever they are;
    `hidden` ones are covered with an empty tmpfs first (the real workspace, while a copy of
    it is graded); `tools` are directories a command needs (the test interpreter's), bound
    read-only where /tmp, /run or a home would hide them."""
    covered = [h for h in HIDDEN if os.path.isdir(h)]
    home = os.path.expanduser("~")
    if os.path.isdir(home) and not _hidden_under(home, covered) and home != "/":
        covered.append(home)
    # --cap-drop ALL matters when golem runs as root: bubblewrap then keeps the capabilities,
    # and CAP_SYS_ADMIN would let the command unmount the tmpfs over /root or remount / rw.
    args = [bwrap, "--new-session", "--die-with-parent", "--cap-drop", "ALL", "--unshare-pid",
            "--unshare-net", "--unshare-ipc", "--unshare-uts", "--ro-bind", "/", "/",
            "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    # /run is hidden as well: the host's Unix sockets (docker, dbus, ssh and gpg agents under
    # /run/user) would otherwise stay reachable, since --unshare-net does not cover them.
    if os.path.isdir("/run"):
        args += ["--tmpfs", "/run"]
    for path in covered:
        args += ["--tmpfs", path]
    for path in _binds_back(covered + ["/tmp", "/run"], env_path, tools):
        args += ["--ro-bind", path, path]
        for name in TREE_SECRETS.get(os.path.basename(path), ()):
            secret = os.path.join(path, name)
            if os.path.isfile(secret) and not os.path.islink(secret):
                args += ["--ro-bind", "/dev/null", secret]
    for path in hidden:
        if os.path.isdir(path):
            args += ["--tmpfs", path]
    for path in read_only:
        args += ["--ro-bind", path, path]
    for path in (scratch,) if isinstance(scratch, str) else scratch:
        args += ["--bind", path, path]
    args += ["--bind", root, root]
    git = os.path.join(root, ".git")
    if os.path.islink(git):
        # bubblewrap cannot mount onto a link; bind where it leads (the verification copy's
        # `.git` leads to the workspace's, which was checked to be a real directory)
        git = os.path.realpath(git)
    if os.path.exists(git):
        args += ["--ro-bind", git, git]
    return args + ["--chdir", root, "--"]


@functools.lru_cache(maxsize=4)
def usable(bwrap: str) -> str | None:
    """None when bubblewrap can build its namespaces here, else why not (e.g. AppArmor)."""
    probe = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--cap-drop",
             "ALL", "--unshare-pid", "--unshare-net", "--new-session", "--die-with-parent",
             "true"]
    try:
        done = subprocess.run(probe, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if done.returncode != 0:
        return done.stderr.decode(errors="replace").strip().splitlines()[-1:][0] \
            if done.stderr.strip() else f"exit {done.returncode}"
    return None


def wrapper(mode: str, root: str, scratch: str | tuple[str, ...], env_path: str | None = None,
            read_only: tuple[str, ...] = (), hidden: tuple[str, ...] = (),
            tools: tuple[str, ...] = ()) -> tuple[Callable[[list[str]], list[str]] | None, str]:
    """The argv transformer for `mode`, and a sentence saying what it promises.

    `read_only` names directories outside `root` that commands may read (never write),
    `hidden` directories they must not see, `tools` directories they need to run at all;
    see `bwrap_argv`."""
    if mode not in MODES:
        raise UsageError(f"unknown -sandbox {mode!r}; choose one of: {', '.join(MODES)}")
    bwrap = shutil.which("bwrap") if mode != "none" else None
    if mode == "bwrap" and not bwrap:
        raise UsageError("-sandbox bwrap: bubblewrap is not installed (apt-get install "
                         "bubblewrap), or use -sandbox none")
    broken = usable(bwrap) if bwrap else None
    if mode == "bwrap" and broken:
        raise UsageError(f"-sandbox bwrap: bubblewrap cannot run here ({broken}); "
                         "or use -sandbox none")
    if not bwrap or broken:
        why = ("-sandbox none" if mode == "none" else
               f"bubblewrap cannot run here: {broken}" if broken else "bubblewrap not installed")
        return None, f"none ({why}): commands run unconfined, with a scrubbed environment"
    prefix = bwrap_argv(bwrap, root, scratch, env_path or os.environ.get("PATH", ""),
                        tuple(read_only), tuple(hidden), tuple(tools))
    return (lambda argv: prefix + argv), "bwrap: read-only system, no network, homes hidden"
