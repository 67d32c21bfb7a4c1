"""The security acceptance suite, end to end: what an untrusted model (and the repository's own
test code) can and cannot do through `Registry.call`, the CLI, and the bubblewrap wrapper.

Unit-level cases (path walking, FIFOs, process groups, output caps, the environment filter)
live in test_workspace.py and test_process.py; these tests attack the assembled pieces for
real. The cases that need bubblewrap skip, saying so, where it is missing or cannot create
namespaces. docs/security.md is the prose version of what is asserted here.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import random
import re
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import unittest
from urllib.parse import urlsplit

from golem.llm.types import ToolCall
from golem.tools import Context, default_registry, process, sandbox
from golem.tools.workspace import Workspace
from tests.fixtures import (BUGGY, FIX_EDIT, GREEN, REPO_ROOT, TEST_CMD, GolemCase, git,
                            make_repo, read, read_trace, run_cli, tool_messages, write_files)
from tests.provider_server import Reply, chat

KEY = "sk-test-SECURITY-0123456789abcdef"
OTHER_SECRETS = {"OPENROUTER_API_KEY": "sk-or-v1-OTHER-SECRET-111111",
                 "AWS_SECRET_ACCESS_KEY": "aws-SECRET-ACCESS-222222",
                 "GITHUB_TOKEN": "ghp_SECRETTOKEN333333",
                 "MY_PASSWORD": "hunter2-PASSWORD-444444"}

# Runs inside the sandbox: `attempt(fn)` is "ok" or the errno name of the failure.
PROBE = """\
import errno, json, os, socket, sys
def attempt(fn):
    try:
        fn()
        return "ok"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc))
def write(path, text="planted"):
    def go():
        with open(path, "w") as handle:
            handle.write(text)
    return go
def read(path):
    with open(path) as handle:
        return handle.read()
"""


def bwrap_or_skip(case: unittest.TestCase) -> str:
    """The bwrap binary, or skip `case` saying why it cannot run here."""
    bwrap = shutil.which("bwrap")
    why = "no bwrap on PATH" if not bwrap else sandbox.usable(bwrap)
    if why:
        case.skipTest(f"bubblewrap not installed or cannot create namespaces here ({why})")
    return bwrap


def _hidden_in_sandbox(path: str) -> bool:
    home = os.path.expanduser("~")
    return any(path == top or path.startswith(top + "/")
               for top in ("/tmp", "/run", "/root", "/home", home))


def host_dir_outside(case: unittest.TestCase) -> str | None:
    """A fresh directory outside any workspace that the sandbox still sees (read-only)."""
    parent = "/var/tmp"
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK) \
            or _hidden_in_sandbox(os.path.realpath(parent)):
        return None
    path = tempfile.mkdtemp(prefix="golem-sec-", dir=parent)
    case.addCleanup(shutil.rmtree, path, True)
    return path


def remove_later(case: unittest.TestCase, *paths: str) -> None:
    """Delete `paths` after the test if a failing sandbox let them be created."""
    for path in paths:
        case.addCleanup(lambda p=path: os.path.lexists(p) and os.unlink(p))


def tree(root: str, dirs: bool = False) -> dict[str, tuple]:
    """Every file and link below `root` except `.git`, with kind, mode and content hash.

    With `dirs`, directories are listed too (an empty one left behind counts).
    """
    found: dict[str, tuple] = {}
    for top, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d != ".git")
        for name in sorted(subdirs + files):
            full = os.path.join(top, name)
            rel = os.path.relpath(full, root)
            info = os.lstat(full)
            if stat.S_ISLNK(info.st_mode):
                found[rel] = ("link", os.readlink(full))
            elif stat.S_ISDIR(info.st_mode):
                if dirs:
                    found[rel] = ("dir", stat.S_IMODE(info.st_mode))
            else:
                with open(full, "rb") as handle:
                    digest = hashlib.sha256(handle.read()).hexdigest()
                found[rel] = ("file", stat.S_IMODE(info.st_mode), digest)
    return found


def call(registry, name: str, **arguments) -> str:
    """One tool call through the registry, as the model would make it; returns the text."""
    return registry.call(ToolCall(f"call_{name}", name, arguments)).text


# -- bubblewrap: what a sandboxed command can reach -----------------------------------------


class SandboxCase(unittest.TestCase):
    """A workspace, golem's scratch directory, and commands run through `sandbox.wrapper`."""

    def setUp(self):
        bwrap_or_skip(self)
        tmp = tempfile.TemporaryDirectory(prefix="golem-sec-")
        self.addCleanup(tmp.cleanup)
        self.tmp = os.path.realpath(tmp.name)
        self.ws = os.path.join(self.tmp, "ws")
        self.scratch = os.path.join(self.tmp, "scratch")
        for path in (self.ws, self.scratch, os.path.join(self.scratch, "home"),
                     os.path.join(self.scratch, "tmp")):
            os.mkdir(path)
        self.env = process.command_env(os.path.join(self.scratch, "home"),
                                       os.path.join(self.scratch, "tmp"))

    def wrap(self, env_path: str | None = None):
        wrap, how = sandbox.wrapper("bwrap", self.ws, self.scratch, env_path)
        self.assertTrue(how.startswith("bwrap"), how)
        return wrap

    def probe(self, code: str, wrap=None, timeout: float = 20.0) -> dict:
        """Run PROBE + `code` with the project's Python under bwrap; `code` prints JSON last."""
        done = process.run([sys.executable, "-c", PROBE + code], cwd=self.ws, env=self.env,
                           timeout=timeout, wrap=wrap or self.wrap())
        self.assertEqual(done.exit_code, 0, done.output)
        return json.loads(done.output.strip().splitlines()[-1])


class FilesystemTest(SandboxCase):
    def test_writes_land_only_in_the_workspace_scratch_and_a_private_tmp(self):
        mark = secrets.token_hex(6)
        targets = {"sibling of the workspace": os.path.join(self.tmp, f"outside-{mark}"),
                   "/etc": f"/etc/golem-sec-{mark}",
                   "golem's checkout": os.path.join(REPO_ROOT, f"golem-sec-{mark}")}
        visible = host_dir_outside(self)
        if visible:
            targets["a directory the sandbox can see"] = os.path.join(visible, "planted")
        tmp_file = f"/tmp/golem-sec-private-{mark}"
        remove_later(self, tmp_file, *targets.values())
        result = self.probe(f"""
targets = {targets!r}
out = {{name: attempt(write(path)) for name, path in targets.items()}}
out["workspace"] = attempt(write("inside.txt", "from the sandbox"))
out["tmpdir"] = attempt(write(os.path.join(os.environ["TMPDIR"], "t"), "x"))
out["/tmp"] = attempt(write({tmp_file!r}, "private"))
out["/tmp read back"] = read({tmp_file!r})
print(json.dumps(out))
""")
        for name, path in targets.items():
            with self.subTest(target=name):
                # Under /tmp a write may succeed, into the sandbox's own tmpfs, never the host's.
                if not path.startswith(self.tmp + "/"):
                    self.assertNotEqual(result[name], "ok")
                self.assertFalse(os.path.lexists(path), path)
        if visible:
            self.assertEqual(result["a directory the sandbox can see"], "EROFS")
            self.assertEqual(os.listdir(visible), [])
        self.assertEqual(result["workspace"], "ok")
        self.assertEqual(read(os.path.join(self.ws, "inside.txt")), "from the sandbox")
        self.assertEqual(result["tmpdir"], "ok")
        self.assertEqual(result["/tmp"], "ok")
        self.assertEqual(result["/tmp read back"], "private")
        self.assertFalse(os.path.exists(tmp_file), "the sandbox's /tmp is the host's /tmp")

    def test_the_python_on_path_still_runs_through_pyenv_style_homes(self):
        # What run_command does: resolve the bare name on the command PATH, then wrap it.
        python = process.resolve_program("python3", {"python3"}, self.env["PATH"])
        done = process.run([python, "-c", "import sys; print('prefix', sys.prefix)"],
                           cwd=self.ws, env=self.env, timeout=20, wrap=self.wrap())
        self.assertEqual(done.exit_code, 0, done.output)
        self.assertIn("prefix /", done.output)
        done = process.run([sys.executable, "-c", "import json, sqlite3, ssl; print('ok')"],
                           cwd=self.ws, env=self.env, timeout=20, wrap=self.wrap())
        self.assertEqual((done.exit_code, done.output), (0, "ok\n"))

    def test_a_file_planted_in_the_real_home_is_invisible(self):
        home = os.path.realpath(os.path.expanduser("~"))
        if home == "/" or not os.access(home, os.W_OK):
            self.skipTest(f"cannot plant a file in the home directory {home!r}")
        name = f".golem-test-secret-{secrets.token_hex(6)}"
        planted = os.path.join(home, name)
        with open(planted, "w") as handle:
            handle.write("aws_secret_access_key = PLANTED\n")
        self.addCleanup(os.unlink, planted)
        ssh = os.path.join(home, ".ssh")
        result = self.probe(f"""
home = {home!r}
print(json.dumps({{"read": attempt(lambda: read({planted!r})),
                   "listed": {name!r} in os.listdir(home),
                   "ssh": os.path.exists({ssh!r}),
                   "HOME": os.environ["HOME"]}}))
""")
        self.assertEqual(result["read"], "ENOENT")
        self.assertFalse(result["listed"])
        self.assertFalse(result["ssh"], "~/.ssh is visible in the sandbox")
        self.assertEqual(result["HOME"], os.path.join(self.scratch, "home"))

    def test_git_directory_is_read_only(self):
        subprocess.run(["git", "init", "-q", self.ws], check=True, capture_output=True)
        config = os.path.join(self.ws, ".git", "config")
        before = read(config)
        hook = os.path.join(self.ws, ".git", "hooks", "pre-commit")
        result = self.probe(f"""
def append():
    with open({config!r}, "a") as handle:
        handle.write("[core]\\n\\thooksPath = /tmp\\n")
print(json.dumps({{"config": attempt(append), "hook": attempt(write({hook!r}, "#!/bin/sh\\n")),
                   "tree": attempt(write("tracked.txt"))}}))
""")
        self.assertEqual(result["config"], "EROFS")
        self.assertEqual(result["hook"], "EROFS")
        self.assertEqual(result["tree"], "ok")
        self.assertEqual(read(config), before)
        self.assertFalse(os.path.exists(hook))

    def test_toolchains_in_a_home_run_but_credentials_beside_them_stay_hidden(self):
        # A stand-in home under /home, so the real one is left alone.
        if not os.path.isdir("/home") or not os.access("/home", os.W_OK):
            self.skipTest("/home is not writable here, so no stand-in home can be made")
        fake = tempfile.mkdtemp(prefix="golem-sec-", dir="/home")
        self.addCleanup(shutil.rmtree, fake, True)
        files = {".pyenv/shims/python3": "shim", ".pyenv/versions/3.99/lib/marker": "tree",
                 ".cargo/bin/cargo": "bin", ".cargo/registry/cache/crate": "cache",
                 ".cargo/credentials.toml": "[registry]\ntoken = \"CARGO-SECRET\"\n",
                 ".local/bin/tool": "bin",
                 ".local/state/golem/runs/r/store/abc": "SNAPSHOT-OF-ANOTHER-REPO",
                 ".local/share/keyrings/login.keyring": "KEYRING",
                 ".ssh/id_ed25519": "PRIVATE KEY", ".aws/credentials": "AWS",
                 ".config/gh/hosts.yml": "oauth_token: GH", ".netrc": "password NETRC"}
        write_files(fake, files)
        saved = dict(os.environ)

        def restore():
            os.environ.clear()
            os.environ.update(saved)
        self.addCleanup(restore)
        os.environ["HOME"] = fake          # the wrapper hides the home it finds here
        env_path = os.pathsep.join([os.path.join(fake, ".pyenv", "shims"),
                                    os.path.join(fake, ".cargo", "bin"),
                                    os.path.join(fake, ".local", "bin"),
                                    self.env["PATH"]])
        wrap = self.wrap(env_path)
        paths = {rel: os.path.join(fake, rel) for rel in files}
        result = self.probe(f"""
paths = {paths!r}
out = {{}}
for rel, path in paths.items():
    try:
        out[rel] = read(path)
    except OSError as exc:
        out[rel] = errno.errorcode.get(exc.errno, str(exc))
print(json.dumps(out))
""", wrap=wrap)
        for rel in (".pyenv/shims/python3", ".pyenv/versions/3.99/lib/marker",
                    ".cargo/bin/cargo", ".cargo/registry/cache/crate", ".local/bin/tool"):
            with self.subTest(needed=rel):
                self.assertEqual(result[rel], files[rel])
        for rel in (".cargo/credentials.toml", ".local/state/golem/runs/r/store/abc",
                    ".local/share/keyrings/login.keyring", ".ssh/id_ed25519",
                    ".aws/credentials", ".config/gh/hosts.yml", ".netrc"):
            with self.subTest(secret=rel):
                self.assertNotEqual(result[rel], files[rel])
                self.assertIn(result[rel], ("", "ENOENT", "EACCES"))


class NetworkAndProcessTest(SandboxCase):
    def test_no_tcp_even_to_a_loopback_server_that_is_listening(self):
        with socket.create_server(("127.0.0.1", 0)) as server:
            port = server.getsockname()[1]
            with socket.create_connection(("127.0.0.1", port), timeout=5):
                accepted, _ = server.accept()       # proof that the server listens
                accepted.close()
            result = self.probe(f"""
def connect():
    socket.create_connection(("127.0.0.1", {port}), timeout=3).close()
def resolve():
    socket.getaddrinfo("localhost", {port})
    socket.create_connection(("localhost", {port}), timeout=3).close()
print(json.dumps({{"ip": attempt(connect), "name": attempt(resolve)}}))
""")
            server.setblocking(False)
            with self.assertRaises(BlockingIOError):
                server.accept()[0].close()
        self.assertNotEqual(result["ip"], "ok")
        self.assertNotEqual(result["name"], "ok")

    def test_host_unix_sockets_under_run_are_unreachable(self):
        if not os.access("/run", os.W_OK):
            self.skipTest("/run is not writable here, so no socket can be planted in it")
        path = f"/run/golem-sec-{secrets.token_hex(6)}.sock"
        with socket.socket(socket.AF_UNIX) as server:
            server.bind(path)
            self.addCleanup(os.unlink, path)
            server.listen()
            result = self.probe(f"""
def connect():
    with socket.socket(socket.AF_UNIX) as client:
        client.settimeout(3)
        client.connect({path!r})
print(json.dumps({{"connect": attempt(connect)}}))
""")
            server.setblocking(False)
            with self.assertRaises(BlockingIOError):
                server.accept()[0].close()
        self.assertNotEqual(result["connect"], "ok")

    def test_own_pid_namespace(self):
        result = self.probe("""
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
print(json.dumps({"pid": os.getpid(), "pids": pids}))
""")
        self.assertLess(result["pid"], 10)
        self.assertLess(len(result["pids"]), 10, result["pids"])
        self.assertNotIn(os.getpid(), result["pids"])

    def test_no_capabilities_so_the_mounts_cannot_be_undone(self):
        # As root, bubblewrap keeps capabilities unless told otherwise; with CAP_SYS_ADMIN a
        # command could unmount the tmpfs hiding the home or remount / read-write.
        home = os.path.realpath(os.path.expanduser("~"))
        mark = f"/etc/golem-sec-{secrets.token_hex(6)}"
        remove_later(self, mark)
        result = self.probe(f"""
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def call(fn, *args):
    if fn(*args) != 0:
        raise OSError(ctypes.get_errno(), "refused")
MS_REMOUNT, MS_BIND = 32, 4096
status = dict(line.split(":\\t", 1) for line in read("/proc/self/status").splitlines()
              if ":\\t" in line)
print(json.dumps({{
    "caps": int(status["CapEff"], 16),
    "umount home": attempt(lambda: call(libc.umount2, {home.encode()!r}, 2)),
    "remount rw": attempt(lambda: call(libc.mount, b"none", b"/", None, MS_REMOUNT | MS_BIND,
                                       None)),
    "write /etc": attempt(write({mark!r}))}}))
""")
        self.assertEqual(result["caps"], 0)
        self.assertIn(result["umount home"], ("EPERM", "EINVAL"))
        self.assertEqual(result["remount rw"], "EPERM")
        self.assertNotEqual(result["write /etc"], "ok")
        self.assertFalse(os.path.lexists(mark))

    def test_other_processes_environments_are_out_of_sight(self):
        # golem's own environment holds the API key; a same-user process can read another's
        # /proc/PID/environ unless it cannot see that process at all.
        token = f"GOLEM-PARENT-SECRET-{secrets.token_hex(8)}"
        holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                                  env={**os.environ, "GOLEM_TEST_API_KEY": token})
        self.addCleanup(holder.wait)
        self.addCleanup(holder.kill)
        deadline, seen = time.monotonic() + 5, b""
        while token.encode() not in seen and time.monotonic() < deadline:
            with open(f"/proc/{holder.pid}/environ", "rb") as handle:
                seen = handle.read()                         # empty until exec is done
            time.sleep(0.01)
        self.assertIn(token.encode(), seen)                  # visible from the host
        result = self.probe(f"""
found = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        with open(f"/proc/{{pid}}/environ", "rb") as handle:
            if {token.encode()!r} in handle.read():
                found.append(pid)
    except OSError:
        pass
print(json.dumps({{"found": found}}))
""")
        self.assertEqual(result["found"], [])

    def test_a_grandchild_that_leaves_the_process_group_dies_with_the_sandbox(self):
        # The grandchild holds a lock on a workspace file for as long as it lives, and says so
        # in a second file: the host can take the lock once it is gone, and not before. No
        # fixed sleep, so a busy machine slows the test down but cannot change its answer.
        lock, held = os.path.join(self.ws, "lock"), os.path.join(self.ws, "held")
        grandchild = ("import fcntl, sys, time\n"
                      "handle = open(sys.argv[1], 'w')\n"
                      "fcntl.flock(handle, fcntl.LOCK_EX)\n"
                      "open(sys.argv[2], 'w').close()\n"
                      "time.sleep(60)\n")
        result = self.probe(f"""
import subprocess, time
child = subprocess.Popen([sys.executable, "-c", {grandchild!r}, {lock!r}, {held!r}],
                         start_new_session=True, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
deadline = time.monotonic() + 15
while not os.path.exists({held!r}) and child.poll() is None and time.monotonic() < deadline:
    time.sleep(0.01)
print(json.dumps({{"started": child.pid, "held": os.path.exists({held!r})}}))
""")
        self.assertTrue(result["started"])
        self.assertTrue(result["held"], "the grandchild never took its lock")
        with open(lock, "w") as handle:
            deadline, free = time.monotonic() + 10, False
            while not free and time.monotonic() < deadline:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    free = True
                except BlockingIOError:
                    time.sleep(0.02)
        self.assertTrue(free, "a setsid() grandchild outlived the sandbox")


class RegistryUnderSandboxTest(SandboxCase):
    def registry(self, allow=("python3",)):
        ctx = Context(Workspace(self.ws), ["python3", "-m", "unittest"], set(allow), self.env,
                      self.wrap(), command_timeout=20)
        return default_registry(ctx, [KEY])

    def test_an_allowed_interpreter_can_start_a_shell_but_not_escape(self):
        outside = host_dir_outside(self) or os.path.join(self.tmp, "sibling")
        target = os.path.join(outside, "pwned")
        registry = self.registry()
        refused = call(registry, "run_command", argv=["sh", "-c", f"echo x > {target}"])
        self.assertTrue(refused.startswith("Error:"), refused)
        self.assertIn("not an allowed program", refused)
        etc = f"/etc/golem-sec-{secrets.token_hex(6)}"
        remove_later(self, target, etc)
        script = ("import subprocess; subprocess.run(['sh', '-c', "
                  f"'echo shell-ran; echo x > {target} || echo write-refused; "
                  f"echo y > {etc} || echo etc-refused'])")
        text = call(registry, "run_command", argv=["python3", "-c", script])
        self.assertTrue(text.startswith("exit code 0"), text)
        self.assertIn("shell-ran", text)
        self.assertIn("write-refused", text)
        self.assertIn("etc-refused", text)
        self.assertFalse(os.path.lexists(target))
        self.assertFalse(os.path.lexists(etc))


# -- commands without bubblewrap: argv, allowlist, caps ---------------------------------------


class CommandsTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory(prefix="golem-sec-")
        self.addCleanup(tmp.cleanup)
        self.ws = os.path.realpath(tmp.name)
        self.env = process.command_env(self.ws, self.ws)

    def registry(self, allow, timeout=20.0):
        ctx = Context(Workspace(self.ws), None, set(allow), self.env, None,
                      command_timeout=timeout)
        return default_registry(ctx, [KEY])

    def test_shell_attempts_are_refused_or_passed_literally(self):
        registry = self.registry({"python3"})
        for argv in (["sh", "-c", "touch pwned"], ["bash", "-c", "touch pwned"],
                     ["/bin/sh", "-c", "touch pwned"], ["python3; touch pwned"],
                     ["python3 -c pass"], ["../python3"], []):
            with self.subTest(argv=argv):
                text = call(registry, "run_command", argv=argv)
                self.assertTrue(text.startswith("Error:"), text)
        metachars = ["; touch pwned", "$(touch pwned)", "`touch pwned`", "*", "> pwned",
                     "| cat", "&& touch pwned", "$HOME", "~"]
        text = call(registry, "run_command",
                    argv=["python3", "-c", "import json, sys; print(json.dumps(sys.argv[1:]))",
                          *metachars])
        self.assertTrue(text.startswith("exit code 0"), text)
        self.assertEqual(json.loads(text.splitlines()[1]), metachars)
        self.assertEqual(os.listdir(self.ws), [])

    def test_endless_output_is_capped_and_the_timeout_is_reported_as_such(self):
        registry = self.registry({"yes", "python3"}, timeout=1.0)
        start = time.monotonic()
        text = call(registry, "run_command", argv=["yes", "golem"])
        self.assertLess(time.monotonic() - start, 6)
        self.assertTrue(text.startswith("timed out after 1s; the process group was killed"),
                        text[:200])
        self.assertIn("bytes omitted", text)
        self.assertLess(len(text), 25_000)
        failed = call(registry, "run_command", argv=["python3", "-c", "raise SystemExit(3)"])
        self.assertTrue(failed.startswith("exit code 3"), failed)
        self.assertNotIn("timed out", failed)


class LargeAndOddFilesTest(unittest.TestCase):
    SIZE = 64 * 1024 * 1024

    @classmethod
    def setUpClass(cls):
        tmp = tempfile.TemporaryDirectory(prefix="golem-sec-")
        cls.addClassCleanup(tmp.cleanup)
        cls.ws = os.path.realpath(tmp.name)
        line = b"0123456789 abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ needle\n"
        with open(os.path.join(cls.ws, "huge.log"), "wb") as handle:
            block = line * (1 << 14)
            while handle.tell() < cls.SIZE:
                handle.write(block)
        os.mkfifo(os.path.join(cls.ws, "pipe"))
        ctx = Context(Workspace(cls.ws), None, set(), {}, None)
        cls.registry = default_registry(ctx, [KEY])

    def timed(self, name: str, **arguments) -> str:
        start = time.monotonic()
        text = call(self.registry, name, **arguments)
        self.assertLess(time.monotonic() - start, 10, f"{name} took too long")
        self.assertLess(len(text.encode()), 50_000, f"{name} returned {len(text)} characters")
        return text

    def test_a_64_mib_file_never_reaches_the_model_whole(self):
        self.assertGreaterEqual(os.path.getsize(os.path.join(self.ws, "huge.log")), self.SIZE)
        text = self.timed("read_file", path="huge.log")   # a capped window, not the file
        self.assertIn("call read_file with offset=", text)
        found = self.timed("search_files", pattern="needle", path="huge.log")
        self.assertIn("huge.log:1:", found)
        self.assertIn("more matches not shown", found)
        self.assertIn("huge.log", self.timed("list_files"))

    def test_a_64_mib_file_can_be_read_a_window_at_a_time(self):
        text = self.timed("read_file", path="huge.log", offset=10, limit=5)
        self.assertFalse(text.startswith("Error:"), text[:200])
        self.assertIn("needle", text)

    def test_a_fifo_is_refused_without_blocking(self):
        text = self.timed("read_file", path="pipe")
        self.assertTrue(text.startswith("Error:"), text)
        self.assertIn("not a regular file", text)
        self.assertTrue(self.timed("edit_file", path="pipe", old_string="a",
                                   new_string="b").startswith("Error:"))
        self.assertTrue(self.timed("write_file", path="pipe",
                                   content="x").startswith("Error:"))
        self.assertTrue(stat.S_ISFIFO(os.lstat(os.path.join(self.ws, "pipe")).st_mode))


# -- nothing lost --------------------------------------------------------------------------


WRITER = """\
import sys
from golem.tools.workspace import Workspace
workspace, size = Workspace(sys.argv[1]), int(sys.argv[2])
contents = [b"a" * size, b"b" * size]
count = 0
while True:
    workspace.write_bytes("target.bin", contents[count % 2])
    count += 1
    print(count, flush=True)
"""


class KilledWriterTest(unittest.TestCase):
    SIZE = 4 * 1024 * 1024

    def test_kill_9_mid_write_leaves_the_old_or_the_new_file_never_half(self):
        tmp = tempfile.TemporaryDirectory(prefix="golem-sec-")
        self.addCleanup(tmp.cleanup)
        ws = os.path.realpath(tmp.name)
        target = os.path.join(ws, "target.bin")
        Workspace(ws).write_bytes("target.bin", b"a" * self.SIZE)
        whole = {hashlib.sha256(c * self.SIZE).hexdigest(): c for c in (b"a", b"b")}
        env = {**os.environ, "PYTHONPATH": REPO_ROOT}
        rng = random.Random(20240607)       # the same kill moments on every run
        for round_ in range(8):
            proc = subprocess.Popen([sys.executable, "-c", WRITER, ws, str(self.SIZE)],
                                    stdout=subprocess.PIPE, env=env)
            try:
                self.assertTrue(proc.stdout.readline(), "the writer never finished a write")
                time.sleep(rng.uniform(0.0, 0.06))
                proc.send_signal(signal.SIGKILL)
            finally:
                proc.wait()
                proc.stdout.close()
            self.assertEqual(proc.returncode, -signal.SIGKILL)
            with open(target, "rb") as handle:
                digest = hashlib.sha256(handle.read()).hexdigest()
            with self.subTest(round=round_):
                self.assertIn(digest, whole, "the target holds a half-written file")
            for name in os.listdir(ws):
                if name != "target.bin":
                    self.assertRegex(name, r"^\.target\.bin\.golem-[0-9a-f]{12}\.tmp$")
        self.assertIn("target.bin", os.listdir(ws))


class UndoTest(GolemCase):
    """`golem undo` after a scripted run through the CLI that edited, created and deleted."""

    def prepare(self) -> str:
        repo = make_repo(self.tmp, {**BUGGY, "README.md": "committed readme\n",
                                    "data/old.txt": "to be deleted\n",
                                    "tool.sh": "#!/bin/sh\necho tool\n"}, git_repo=True)
        os.chmod(os.path.join(repo, "tool.sh"), 0o755)
        git(repo, "commit", "-qam", "mode")
        # Uncommitted work that existed before golem ran: it must come back exactly.
        write_files(repo, {"README.md": "committed readme\nuncommitted line\n",
                           "notes/draft.txt": "untracked draft\n"})
        os.chmod(os.path.join(repo, "tool.sh"), 0o700)
        os.symlink("README.md", os.path.join(repo, "readme-link"))
        return repo

    def scripted_run(self, repo: str, extra=()) -> dict:
        server = self.serve([
            chat(tool_calls=[FIX_EDIT,
                             ("edit_file", {"path": "README.md", "old_string": "uncommitted",
                                            "new_string": "model-edited"}),
                             ("write_file", {"path": "notes/draft.txt", "content": "clobbered"}),
                             ("write_file", {"path": "data/new.txt", "content": "created\n"}),
                             ("run_command", {"argv": ["rm", "data/old.txt", "tool.sh",
                                                       "readme-link"]}),
                             *extra]),
            chat("fixed")])
        code, out, err, report = self.fix(repo, server, "-allow", "rm")
        self.assertEqual(report["verdict"], "VERIFIED", report.get("summary"))
        for message in tool_messages(server.requests[1]):
            self.assertFalse(message["content"].startswith("Error:"), message["content"])
        return report

    def test_undo_puts_back_edits_creations_deletions_and_earlier_uncommitted_work(self):
        repo = self.prepare()
        before = tree(repo)
        status = git(repo, "status", "--porcelain")
        report = self.scripted_run(repo)
        self.assertEqual(set(report["changed_files"]),
                         {"calc.py", "README.md", "notes/draft.txt", "data/new.txt",
                          "data/old.txt", "tool.sh", "readme-link"})
        self.assertNotEqual(tree(repo), before)
        code, out, err = run_cli(["undo", "-dir", repo])
        self.assertEqual(code, 0, err)
        self.assertIn(f"undid run {report['run_id']}: 7 path(s) put back", out)
        self.assertEqual(tree(repo), before)
        self.assertEqual(git(repo, "status", "--porcelain"), status)
        code, out, err = run_cli(["undo", "-dir", repo])
        self.assertEqual(code, 2)
        self.assertIn("no run to undo", err)

    def test_undo_removes_directories_the_run_created(self):
        repo = self.prepare()
        before = tree(repo, dirs=True)
        self.scripted_run(repo, [("write_file", {"path": "pkg/sub/mod.py", "content": "x = 1\n"})])
        code, out, err = run_cli(["undo", "-dir", repo])
        self.assertEqual(code, 0, err)
        self.assertEqual(tree(repo, dirs=True), before)

    def test_undo_keeps_a_file_edited_after_the_run(self):
        repo = self.prepare()
        original = tree(repo)
        report = self.scripted_run(repo)
        write_files(repo, {"calc.py": "# the user's own later edit\n"})
        code, out, err = run_cli(["undo", "-dir", repo, report["run_id"]])
        self.assertEqual(code, 1)
        self.assertIn("kept calc.py", err)
        self.assertIn("1 kept", out)
        self.assertEqual(read(os.path.join(repo, "calc.py")), "# the user's own later edit\n")
        rest = {p: e for p, e in tree(repo).items() if p != "calc.py"}
        self.assertEqual(rest, {p: e for p, e in original.items() if p != "calc.py"})

    def test_undo_after_golem_itself_was_killed_mid_run(self):
        repo = self.prepare()
        before = tree(repo)
        server = self.serve([chat(tool_calls=[FIX_EDIT, ("write_file", {"path": "data/new.txt",
                                                                        "content": "new\n"})]),
                             Reply(chat("never seen"), delay=5)])
        scratch = os.path.join(self.tmp, "scratch")
        os.mkdir(scratch)
        proc = subprocess.Popen(
            [sys.executable, "-m", "golem", "fix", "-dir", repo, "-test", TEST_CMD,
             "-provider", "openai", "-base-url", server.url, "-sandbox", "none"],
            # a SIGKILL leaves golem's scratch behind: keep it in this test's directory
            env={**os.environ, "PYTHONPATH": REPO_ROOT, "TMPDIR": scratch}, cwd=self.tmp,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 20
            while len(server.requests) < 2 and time.monotonic() < deadline:
                time.sleep(0.02)        # the second request: both tool calls have run
            self.assertEqual(len(server.requests), 2, "golem never got to its second step")
        finally:
            proc.kill()
            proc.wait()
        self.assertEqual(proc.returncode, -signal.SIGKILL)
        self.assertNotEqual(tree(repo), before)
        code, out, err = run_cli(["undo", "-dir", repo])
        self.assertEqual(code, 0, err)
        self.assertEqual(tree(repo), before)

    def test_force_after_a_partial_undo_puts_back_the_kept_file(self):
        repo = self.prepare()
        before = tree(repo)
        report = self.scripted_run(repo)
        write_files(repo, {"calc.py": "# later edit\n"})
        self.assertEqual(run_cli(["undo", "-dir", repo])[0], 1)
        code, out, err = run_cli(["undo", "-dir", repo, "-force", report["run_id"]])
        self.assertEqual(code, 0, err)
        self.assertEqual(tree(repo), before)


# -- the CLI: sandbox modes, the environment, secrets ----------------------------------------


CONFINED_TEST = """\
import os
import unittest


class ConfinedTest(unittest.TestCase):
    def test_cannot_write_outside(self):
        with self.assertRaises(OSError):
            with open({target!r}, "w") as handle:
                handle.write("written by the suite")

    def test_cannot_read_the_home(self):
        self.assertFalse(os.path.exists({secret!r}))
"""


class SandboxModesTest(GolemCase):
    def trace_notes(self) -> list[dict]:
        return [e for e in read_trace(self.trace) if e["event"] == "note"
                and e.get("message", "").startswith("sandbox:")]

    def test_none_says_in_the_trace_that_commands_run_unconfined(self):
        repo = make_repo(self.tmp, GREEN)
        server = self.serve([])
        code, out, err, report = self.fix(repo, server, sandbox="none")
        self.assertEqual(report["verdict"], "ALREADY_GREEN")
        [note] = self.trace_notes()
        self.assertEqual(note["sandbox"], "none")
        self.assertIn("commands run unconfined", note["message"])
        self.assertIn("commands run unconfined", err)

    def test_bwrap_runs_the_suite_and_the_model_commands_inside(self):
        bwrap_or_skip(self)
        outside = host_dir_outside(self) or os.path.join(self.tmp, "sibling")
        home = os.path.realpath(os.path.expanduser("~"))
        secret = os.path.join(home, f".golem-test-secret-{secrets.token_hex(6)}")
        if home != "/" and os.access(home, os.W_OK):
            with open(secret, "w") as handle:
                handle.write("PLANTED\n")
            self.addCleanup(os.unlink, secret)
        target = os.path.join(outside, "from-the-suite")
        repo = make_repo(self.tmp, {**BUGGY, "tests/test_confined.py":
                                    CONFINED_TEST.format(target=target, secret=secret)},
                         git_repo=True)
        head = read(os.path.join(repo, ".git", "HEAD"))
        server = self.serve([])
        address = urlsplit(server.url)
        host, port = address.hostname, address.port
        script = (PROBE + f"print(json.dumps({{'write': attempt(write({outside + '/model'!r})),"
                  f" 'home': attempt(lambda: read({secret!r})),"
                  f" 'net': attempt(lambda: socket.create_connection(({host!r}, {port}), 3)),"
                  f" 'git': attempt(write('.git/HEAD', 'ref: refs/heads/evil'))}}))")
        server.replies += [chat(tool_calls=[("run_command", {"argv": ["python3", "-c", script]})]),
                           chat(tool_calls=[FIX_EDIT]), chat("fixed")]
        code, out, err, report = self.fix(repo, server, "-allow", "python3", sandbox="bwrap")
        [note] = self.trace_notes()
        self.assertEqual(note["sandbox"], "bwrap")
        self.assertTrue(note["message"].startswith("sandbox: bwrap"), note)
        [result] = tool_messages(server.requests[1])
        self.assertTrue(result["content"].startswith("exit code 0"), result["content"])
        outcome = json.loads(result["content"].splitlines()[-1])
        self.assertIn(outcome["write"], ("EROFS", "ENOENT"))
        self.assertEqual(outcome["home"], "ENOENT")
        self.assertNotEqual(outcome["net"], "ok")
        self.assertEqual(outcome["git"], "EROFS")
        self.assertEqual(len(server.requests), 3, "the sandboxed command reached the server")
        self.assertEqual(report["verdict"], "VERIFIED", report["summary"])
        self.assertEqual(report["tests"]["before"]["counts"], {"passed": 3, "failed": 1})
        self.assertEqual(report["tests"]["after"]["counts"], {"passed": 4})
        self.assertFalse(os.path.lexists(target))
        self.assertFalse(os.path.lexists(os.path.join(outside, "model")))
        self.assertEqual(read(os.path.join(repo, ".git", "HEAD")), head)

    def run_without_bwrap(self, repo: str, server, mode: str) -> subprocess.CompletedProcess:
        """golem as a subprocess whose PATH holds python3 and git but no bwrap."""
        bindir = os.path.join(self.tmp, "bin")
        os.makedirs(bindir, exist_ok=True)
        for name, real in (("python3", sys.executable), ("git", shutil.which("git"))):
            if real and not os.path.lexists(os.path.join(bindir, name)):
                os.symlink(real, os.path.join(bindir, name))
        env = {"PATH": bindir, "HOME": self.tmp, "PYTHONPATH": REPO_ROOT,
               "GOLEM_STATE_DIR": os.environ["GOLEM_STATE_DIR"]}
        return subprocess.run([sys.executable, "-m", "golem", "fix", "-dir", repo, "-test",
                               TEST_CMD, "-provider", "openai", "-base-url", server.url,
                               "-sandbox", mode, "-trace", self.trace],
                              env=env, cwd=self.tmp, capture_output=True, text=True, timeout=60)

    def test_bwrap_demanded_but_missing_is_one_line_and_exit_2(self):
        repo = make_repo(self.tmp)
        server = self.serve([chat("should never be asked")])
        done = self.run_without_bwrap(repo, server, "bwrap")
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertEqual(done.stdout, "")
        lines = done.stderr.splitlines()
        self.assertEqual(len(lines), 1, done.stderr)
        self.assertTrue(lines[0].startswith("golem: -sandbox bwrap: bubblewrap is not installed"),
                        lines[0])
        self.assertEqual(server.requests, [])
        self.assertFalse(os.path.exists(os.environ["GOLEM_STATE_DIR"]))

    def test_auto_without_bwrap_runs_unconfined_and_says_so(self):
        repo = make_repo(self.tmp, GREEN)
        server = self.serve([])
        done = self.run_without_bwrap(repo, server, "auto")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("ALREADY_GREEN", done.stdout)
        [note] = self.trace_notes()
        self.assertEqual(note["sandbox"], "auto")
        self.assertIn("bubblewrap not installed", note["message"])
        self.assertIn("commands run unconfined", note["message"])


ENV_TEST = """\
import json
import os
import unittest


class EnvironmentTest(unittest.TestCase):
    def test_dump(self):
        print("TESTENV=" + json.dumps(dict(os.environ)), flush=True)
"""
ENV_DUMP = "import json, os; print('CMDENV=' + json.dumps(dict(os.environ)))"


class SecretsTest(GolemCase):
    def environment(self) -> dict[str, str]:
        return {"OPENAI_API_KEY": KEY, **OTHER_SECRETS, "GOLEM_HARMLESS_SETTING": "visible?"}

    def test_no_secret_reaches_a_command_or_a_test_run(self):
        repo = make_repo(self.tmp, {**BUGGY, "tests/test_env.py": ENV_TEST})
        server = self.serve([chat(tool_calls=[("run_command", {"argv": ["python3", "-c",
                                                                        ENV_DUMP]}),
                                              ("run_tests", {})]),
                             chat(tool_calls=[FIX_EDIT]), chat("fixed")])
        code, out, err, report = self.fix(repo, server, "-allow", "python3",
                                          env=self.environment(), sandbox="auto")
        self.assertEqual(report["verdict"], "VERIFIED", report["summary"])
        command, tests = tool_messages(server.requests[1])
        dumps = []
        for marker, message in (("CMDENV", command), ("TESTENV", tests)):
            found = re.search(marker + r"=(\{.*\})$", message["content"], re.M)
            self.assertIsNotNone(found, message["content"])
            dumps.append(json.loads(found.group(1)))
        for dump in dumps:
            self.assertIn("PATH", dump)
            self.assertNotEqual(dump["HOME"], os.path.expanduser("~"))
            self.assertNotIn("GOLEM_HARMLESS_SETTING", dump)
            self.assertNotIn("GOLEM_STATE_DIR", dump)
            for name, value in self.environment().items():
                self.assertNotIn(name, dump)
                self.assertNotIn(value, json.dumps(dump))
        with open(self.trace, encoding="utf-8") as handle:
            recorded = handle.read()
        sent = json.dumps([r["body"] for r in server.requests])
        for value in (KEY, *OTHER_SECRETS.values()):
            for where, text in (("trace", recorded), ("stdout", out), ("stderr", err),
                                ("requests", sent)):
                self.assertNotIn(value, text, f"{value[:12]}... leaked into {where}")

    def test_the_key_is_redacted_from_tool_results_the_trace_and_errors(self):
        repo = make_repo(self.tmp, {**BUGGY, "deploy.txt": f"token={KEY}\n"})
        # The model never names the key itself: it only finds it in the workspace.
        echo = ("token = open('deploy.txt').read().split('=')[1].strip(); print(token); "
                "raise SystemExit('failed with ' + token)")
        server = self.serve([
            chat(tool_calls=[("read_file", {"path": "deploy.txt"}),
                             ("search_files", {"pattern": "token="}),
                             ("run_command", {"argv": ["python3", "-c", echo]})]),
            Reply({"error": {"message": f"Incorrect API key provided: {KEY}"}}, status=401)])
        code, out, err, report = self.fix(repo, server, "-allow", "python3",
                                          env={"OPENAI_API_KEY": KEY})
        self.assertEqual(report["stop"], "provider_error")
        results = tool_messages(server.requests[1])
        self.assertEqual(len(results), 3)
        for message in results:
            self.assertIn("[redacted]", message["content"])
        for message in results:
            self.assertNotIn(KEY, message["content"])
        with open(self.trace, encoding="utf-8") as handle:
            recorded = handle.read()
        self.assertIn("[redacted]", recorded)
        for where, text in (("trace", recorded), ("stdout", out), ("stderr", err),
                            ("requests", json.dumps([r["body"] for r in server.requests]))):
            self.assertNotIn(KEY, text, f"the key leaked into {where}")

    def test_the_key_never_reaches_stdout_through_a_file_name(self):
        repo = make_repo(self.tmp, {**BUGGY, ".env": f"OPENAI_API_KEY={KEY}\n"})
        plant = "open(open('.env').read().split('=')[1].strip(), 'w').close()"
        server = self.serve([chat(tool_calls=[("run_command", {"argv": ["python3", "-c",
                                                                        plant]})]),
                             chat("done")])
        code, out, err, report = self.fix(repo, server, "-allow", "python3",
                                          env={"OPENAI_API_KEY": KEY})
        self.assertTrue(os.path.exists(os.path.join(repo, KEY)))
        with open(self.trace, encoding="utf-8") as handle:
            self.assertNotIn(KEY, handle.read())
        self.assertNotIn(KEY, err)
        self.assertNotIn(KEY, out)


# -- known holes, kept visible ---------------------------------------------------------------


class VerdictForgeryTest(GolemCase):
    def run_attack(self, script: str) -> dict:
        bwrap_or_skip(self)
        repo = make_repo(self.tmp)
        server = self.serve([chat(tool_calls=[("run_command", {"argv": ["python3", "-c",
                                                                        script]})]),
                             chat("done: the suite passes now")])
        code, out, err, report = self.fix(repo, server, "-allow", "python3", sandbox="bwrap")
        self.assertEqual(read(os.path.join(repo, "calc.py")), BUGGY["calc.py"])
        self.assertNotIn("Error:", tool_messages(server.requests[1])[0]["content"])
        return report

    def test_a_command_cannot_rewrite_the_driver_the_verification_run_uses(self):
        # every driver copy the scratch directory holds is rewritten to report all passed;
        # the verification run must use a fresh one
        script = (
            "import glob, os\n"
            "scratch = os.path.dirname(os.environ['HOME'])\n"
            "for p in glob.glob(os.path.join(scratch, '**', 'golem_unittest_driver*.py'),\n"
            "                   recursive=True):\n"
            "    s = open(p).read()\n"
            "    s = s.replace('OUTCOMES[test_id] = outcome', 'OUTCOMES[test_id] = \"passed\"')\n"
            "    s = s.replace('sys.exit(0 if result.wasSuccessful() and result.testsRun else 1)',"
            " 'sys.exit(0)')\n"
            "    open(p, 'w').write(s)\n")
        report = self.run_attack(script)
        self.assertEqual(report["verdict"], "FAILED", report["summary"])

    def test_a_command_cannot_plant_python_startup_code_in_home(self):
        hook = ("import unittest\n"
                "unittest.TestCase.run = lambda self, result=None: "
                "(result.startTest(self), result.addSuccess(self), result.stopTest(self))\n")
        script = ("import os, site, sys\n"
                  "d = site.getusersitepackages()\n"
                  "os.makedirs(d, exist_ok=True)\n"
                  f"open(os.path.join(d, 'usercustomize.py'), 'w').write({hook!r})\n")
        report = self.run_attack(script)
        self.assertEqual(report["verdict"], "FAILED", report["summary"])


if __name__ == "__main__":
    unittest.main()
