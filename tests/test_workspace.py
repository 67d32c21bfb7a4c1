import os
import stat
import tempfile
import threading
import time
import unittest

from golem.core.errors import ToolError, UsageError
from golem.tools.workspace import Workspace


class WorkspaceCase(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.base = os.path.realpath(tmp.name)
        self.root = os.path.join(self.base, "ws")
        self.outside = os.path.join(self.base, "outside")
        os.mkdir(self.root)
        os.mkdir(self.outside)
        self.put("outside/secret.txt", "SECRET")
        os.mkdir(os.path.join(self.outside, "d"))
        self.put("outside/d/f.txt", "SECRET")
        self.put("ws/a/b.py", "print(1)\n")
        self.put("ws/top.txt", "top")
        self.ws = Workspace(self.root)

    def put(self, rel, text):
        full = os.path.join(self.base, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as fh:
            fh.write(text)

    def link(self, target, rel):
        os.symlink(target, os.path.join(self.root, rel))

    def assertRefused(self, path, fragment=""):
        with self.assertRaises(ToolError) as cm:
            self.ws.resolve(path)
        self.assertIn(fragment, str(cm.exception))
        self.assertFalse(str(cm.exception).startswith("Error"))
        with self.assertRaises(ToolError):
            self.ws.read_bytes(path, 100)


class ResolveTest(WorkspaceCase):
    def test_missing_root_is_a_usage_error(self):
        with self.assertRaises(UsageError):
            Workspace(os.path.join(self.base, "nope"))

    def test_plain_paths(self):
        self.assertEqual(self.ws.root, self.root)
        self.assertEqual(self.ws.resolve("."), ".")
        self.assertEqual(self.ws.resolve("./"), ".")
        self.assertEqual(self.ws.resolve("a/b.py"), "a/b.py")
        self.assertEqual(self.ws.resolve("./a/./b.py"), "a/b.py")
        self.assertEqual(self.ws.resolve("a/../top.txt"), "top.txt")
        self.assertEqual(self.ws.resolve("a//b.py"), "a/b.py")
        self.assertEqual(self.ws.resolve("a/"), "a")

    def test_missing_parts_are_allowed(self):
        self.assertEqual(self.ws.resolve("new.txt"), "new.txt")
        self.assertEqual(self.ws.resolve("x/y/z.txt"), "x/y/z.txt")
        self.assertEqual(self.ws.resolve("x/../a/b.py"), "a/b.py")

    def test_file_as_directory_is_refused(self):
        self.assertRefused("top.txt/x", "not a directory")
        self.assertRefused("top.txt/", "not a directory")

    def test_bad_strings(self):
        self.assertRefused("", "empty")
        self.assertRefused("/etc/passwd", "absolute")
        self.assertRefused(os.path.join(self.root, "top.txt"), "absolute")
        self.assertRefused("a\0b", "NUL")

    def test_dotdot_past_root(self):
        self.assertRefused("..", "outside the workspace")
        self.assertRefused("../outside/secret.txt", "outside the workspace")
        self.assertRefused("a/../../outside/secret.txt", "outside the workspace")
        self.assertRefused("x/../../y", "outside the workspace")

    def test_reentry_through_root_name(self):
        self.assertRefused("../ws/top.txt", "outside the workspace")

    def test_link_to_file_outside(self):
        self.link("../outside/secret.txt", "rel")
        self.link(os.path.join(self.outside, "secret.txt"), "abs")
        self.assertRefused("rel", "outside the workspace")
        self.assertRefused("abs", "outside the workspace")

    def test_link_to_directory_outside(self):
        self.link("../outside/d", "reld")
        self.link(self.outside + "/d", "absd")
        self.link("..", "up")
        self.assertRefused("reld/f.txt", "outside the workspace")
        self.assertRefused("absd/f.txt", "outside the workspace")
        self.assertRefused("up/outside/secret.txt", "outside the workspace")
        self.assertRefused("up/ws/top.txt", "outside the workspace")

    def test_chained_links_escape(self):
        self.link("l2", "l1")
        self.link("a/l3", "l2")
        self.link("../../outside/secret.txt", "a/l3")
        self.assertRefused("l1", "outside the workspace")

    def test_chained_links_inside(self):
        self.link("l2", "l1")
        self.link("a/l3", "l2")
        self.link("../top.txt", "a/l3")
        self.assertEqual(self.ws.resolve("l1"), "top.txt")
        self.assertEqual(self.ws.read_bytes("l1", 100), (b"top", 3))

    def test_link_loops(self):
        self.link("loop2", "loop1")
        self.link("loop1", "loop2")
        self.link("self", "self")
        self.assertRefused("loop1", "too many levels of symbolic links")
        self.assertRefused("self/x", "too many levels of symbolic links")

    def test_trailing_slash_on_file_link(self):
        self.link("top.txt", "flink")
        self.assertEqual(self.ws.resolve("flink"), "top.txt")
        self.assertRefused("flink/", "not a directory")

    def test_links_inside_are_followed(self):
        self.link("a", "dlink")
        self.link("../top.txt", "a/up")
        self.assertEqual(self.ws.resolve("dlink/b.py"), "a/b.py")
        self.assertEqual(self.ws.resolve("dlink/"), "a")
        self.assertEqual(self.ws.resolve("a/up"), "top.txt")
        self.assertEqual(self.ws.read_bytes("dlink/b.py", 100)[0], b"print(1)\n")

    def test_absolute_link_inside_is_allowed(self):
        self.link(os.path.join(self.root, "a"), "absa")
        self.link(self.root, "absroot")
        self.assertEqual(self.ws.resolve("absa/b.py"), "a/b.py")
        self.assertEqual(self.ws.resolve("absroot/top.txt"), "top.txt")
        self.link(self.root + "/../outside/secret.txt", "sneaky")
        self.assertRefused("sneaky", "outside the workspace")

    def test_exists_and_is_dir(self):
        self.assertTrue(self.ws.exists("top.txt"))
        self.assertTrue(self.ws.exists("."))
        self.assertFalse(self.ws.exists("nope"))
        self.assertFalse(self.ws.exists("nope/deeper"))
        self.assertTrue(self.ws.is_dir("a"))
        self.assertTrue(self.ws.is_dir("a/.."))
        self.assertFalse(self.ws.is_dir("top.txt"))
        self.assertFalse(self.ws.is_dir("nope"))
        with self.assertRaises(ToolError):
            self.ws.exists("../outside/secret.txt")


class ReadTest(WorkspaceCase):
    def test_read_cap_and_size(self):
        self.put("ws/big.txt", "x" * 1000)
        data, size = self.ws.read_bytes("big.txt", 10)
        self.assertEqual((data, size), (b"x" * 10, 1000))
        self.assertEqual(self.ws.read_bytes("big.txt", 5000), (b"x" * 1000, 1000))

    def test_read_missing_and_directory(self):
        with self.assertRaisesRegex(ToolError, "does not exist"):
            self.ws.read_bytes("nope.txt", 10)
        with self.assertRaisesRegex(ToolError, "does not exist"):
            self.ws.read_bytes("nope/x.txt", 10)
        with self.assertRaisesRegex(ToolError, "directory"):
            self.ws.read_bytes("a", 10)
        with self.assertRaisesRegex(ToolError, "directory"):
            self.ws.read_bytes(".", 10)

    def test_fifo_is_refused_at_once(self):
        fifo = os.path.join(self.root, "pipe")
        os.mkfifo(fifo)
        outcome = []

        def attempt():
            try:
                self.ws.read_bytes("pipe", 10)
                outcome.append("read")
            except ToolError as exc:
                outcome.append(str(exc))

        # With no writer, a reader that opened the FIFO would wait for ever: an answer at all
        # shows it did not block, so the limit is generous for a busy machine.
        worker = threading.Thread(target=attempt)
        worker.start()
        worker.join(10)
        if worker.is_alive():
            # Unblock a reader stuck in open() so the thread can end, then fail.
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            worker.join()
            self.fail("reading a FIFO blocked")
        self.assertEqual(len(outcome), 1)
        self.assertIn("not a regular file", outcome[0])

    def test_directory_swapped_for_link_never_reads_outside(self):
        self.put("ws/d/f.txt", "inside")
        real = os.path.join(self.root, "d")
        parked = os.path.join(self.root, "d_parked")
        outside_d = os.path.join(self.outside, "d")
        stop = threading.Event()
        swaps = [0]

        def swapper():
            targets = [outside_d, "../outside/d"]
            while not stop.is_set():
                os.rename(real, parked)
                os.symlink(targets[swaps[0] % 2], real)
                os.unlink(real)
                os.rename(parked, real)
                swaps[0] += 1

        thread = threading.Thread(target=swapper)
        thread.start()
        seen = set()
        reads = 0
        try:
            # a second of reads at least, and as long as it takes a busy machine to swap and
            # read often enough for the race to be tried
            end, give_up = time.monotonic() + 1.0, time.monotonic() + 30.0
            while (time.monotonic() < end or swaps[0] <= 10 or reads <= 10) \
                    and time.monotonic() < give_up:
                reads += 1
                try:
                    data, _ = self.ws.read_bytes("d/f.txt", 100)
                except ToolError:
                    continue
                seen.add(data)
                self.assertNotEqual(data, b"SECRET")
        finally:
            stop.set()
            thread.join()
        self.assertGreater(swaps[0], 10)
        self.assertGreater(reads, 10)
        self.assertLessEqual(seen, {b"inside"})


class WriteTest(WorkspaceCase):
    def test_create_and_replace(self):
        self.assertTrue(self.ws.write_bytes("new.txt", b"hello"))
        self.assertFalse(self.ws.write_bytes("new.txt", b"again"))
        with open(os.path.join(self.root, "new.txt"), "rb") as fh:
            self.assertEqual(fh.read(), b"again")
        self.assertEqual(sorted(os.listdir(self.root)), ["a", "new.txt", "top.txt"])

    def test_creates_parents(self):
        self.assertTrue(self.ws.write_bytes("x/y/z.txt", b"deep"))
        self.assertTrue(os.path.isdir(os.path.join(self.root, "x", "y")))
        self.assertEqual(self.ws.read_bytes("x/y/z.txt", 10), (b"deep", 4))
        self.assertTrue(self.ws.write_bytes("m/../n.txt", b"n"))
        self.assertTrue(os.path.isfile(os.path.join(self.root, "n.txt")))

    def test_mode_is_kept(self):
        path = os.path.join(self.root, "run.sh")
        self.put("ws/run.sh", "#!/bin/sh\n")
        os.chmod(path, 0o750)
        self.ws.write_bytes("run.sh", b"#!/bin/sh\necho hi\n")
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o750)

    def test_refuses_symlink(self):
        self.link("top.txt", "flink")
        with self.assertRaisesRegex(ToolError, "symbolic link.*'top.txt'"):
            self.ws.write_bytes("flink", b"changed")
        self.assertTrue(os.path.islink(os.path.join(self.root, "flink")))
        self.assertEqual(self.ws.read_bytes("top.txt", 10)[0], b"top")
        self.link(os.path.join(self.outside, "secret.txt"), "out")
        with self.assertRaises(ToolError):
            self.ws.write_bytes("out", b"changed")
        self.assertEqual(self.ws.read_bytes("top.txt", 10)[0], b"top")
        with open(os.path.join(self.outside, "secret.txt")) as fh:
            self.assertEqual(fh.read(), "SECRET")

    def test_refuses_outside_and_directories(self):
        for path in ("../outside/new.txt", "/tmp/x", "a", ".", "a/"):
            with self.assertRaises(ToolError, msg=path):
                self.ws.write_bytes(path, b"x")
        self.assertEqual(sorted(os.listdir(self.outside)), ["d", "secret.txt"])

    def test_refuses_git(self):
        os.mkdir(os.path.join(self.root, ".git"))
        self.put("ws/.git/config", "[core]\n")
        self.link(".git", "g")
        for path in (".git/config", "./.git/config", "a/../.git/hooks/pre-commit", "g/config",
                     ".git/new"):
            with self.assertRaisesRegex(ToolError, "git's internal state", msg=path):
                self.ws.write_bytes(path, b"x")
        self.assertEqual(os.listdir(os.path.join(self.root, ".git")), ["config"])
        self.assertTrue(self.ws.write_bytes(".gitignore", b"*.pyc\n"))

    def test_on_change_sees_the_original(self):
        seen = []

        def on_change(rel):
            full = os.path.join(self.root, rel)
            if os.path.exists(full):
                with open(full, "rb") as fh:
                    seen.append((rel, fh.read()))
            else:
                seen.append((rel, None))

        ws = Workspace(self.root, on_change=on_change)
        ws.write_bytes("./a/b.py", b"print(2)\n")
        ws.write_bytes("fresh/f.txt", b"f")
        self.assertEqual(seen, [("a/b.py", b"print(1)\n"), ("fresh/f.txt", None)])

    def test_failed_write_leaves_nothing(self):
        def on_change(rel):
            raise RuntimeError("backup failed")

        ws = Workspace(self.root, on_change=on_change)
        with self.assertRaises(RuntimeError):
            ws.write_bytes("q/new.txt", b"x")
        self.assertFalse(os.path.exists(os.path.join(self.root, "q")))
        self.assertEqual(sorted(os.listdir(self.root)), ["a", "top.txt"])


    def test_failed_write_removes_its_temporary_file(self):
        with self.assertRaises(TypeError):
            self.ws.write_bytes("a/b.py", "not bytes")
        self.assertEqual(os.listdir(os.path.join(self.root, "a")), ["b.py"])
        self.assertEqual(self.ws.read_bytes("a/b.py", 100)[0], b"print(1)\n")


class ListTest(WorkspaceCase):
    def test_list_dir(self):
        self.link("a", "dlink")
        self.put("ws/a/c.txt", "")
        self.assertEqual(self.ws.list_dir("."), [("a", True), ("dlink", False), ("top.txt", False)])
        self.assertEqual(self.ws.list_dir("dlink"), [("b.py", False), ("c.txt", False)])
        with self.assertRaisesRegex(ToolError, "not a directory"):
            self.ws.list_dir("top.txt")
        with self.assertRaisesRegex(ToolError, "does not exist"):
            self.ws.list_dir("nope")
        with self.assertRaises(ToolError):
            self.ws.list_dir("..")

    def test_walk_skips_and_does_not_follow_links(self):
        for rel in (".git/HEAD", "node_modules/m/index.js", "pkg.egg-info/PKG-INFO",
                    "src/__pycache__/x.pyc", "src/z.py", "src/m.py", "build/out.o"):
            self.put("ws/" + rel, "")
        self.link("../outside", "escape")
        self.link("src", "srclink")
        self.assertEqual(list(self.ws.walk()), ["a/b.py", "src/m.py", "src/z.py", "top.txt"])
        self.assertEqual(list(self.ws.walk("src")), ["src/m.py", "src/z.py"])
        self.assertEqual(list(self.ws.walk(".", skip={"src", "*.egg-info"})),
                         [".git/HEAD", "a/b.py", "build/out.o", "node_modules/m/index.js",
                          "top.txt"])


if __name__ == "__main__":
    unittest.main()
