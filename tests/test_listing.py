"""list_files and search_files: what they skip (git's ignore rules included), depth, caps,
time limits, and running git in a repository golem does not trust."""

import os
import shutil
import subprocess
import tempfile
import unittest

from golem.tools.workspace import Workspace
from tests.test_tools import SECRET, ToolCase

GIT = shutil.which("git")


def git(root: str, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                   cwd=root, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env={"PATH": os.environ.get("PATH", ""), "HOME": root,
                        "GIT_CONFIG_NOSYSTEM": "1"})


class DepthTest(ToolCase):
    def setUp(self):
        super().setUp()
        for rel in ("a.py", "pkg/b.py", "pkg/sub/c.py", "pkg/sub/deep/d.py", "docs/x.md",
                    ".venv/lib/site.py", "node_modules/m/index.js"):
            self.put(rel, "")

    def test_one_level_shows_files_and_directories(self):
        self.assertEqual(self.ok("list_files", depth=1).splitlines(),
                         ["a.py", "docs/", "pkg/"])
        self.assertEqual(self.ok("list_files", path="pkg", depth=1).splitlines(),
                         ["pkg/b.py", "pkg/sub/"])
        self.assertEqual(self.ok("list_files", path="pkg", depth=2).splitlines(),
                         ["pkg/b.py", "pkg/sub/c.py", "pkg/sub/deep/"])

    def test_no_depth_lists_every_file(self):
        self.assertEqual(self.ok("list_files").splitlines(),
                         ["a.py", "docs/x.md", "pkg/b.py", "pkg/sub/c.py", "pkg/sub/deep/d.py"])

    def test_negative_depth_is_an_error(self):
        self.assertIn("depth counts directory levels", self.err("list_files", depth=-1))

    def test_cap_counts_what_was_left_out(self):
        for i in range(410):
            self.put(f"wide/d{i:03}/f.txt", "")
        lines = self.ok("list_files", path="wide", depth=1).splitlines()
        self.assertEqual(len(lines), 401)
        self.assertEqual(lines[0], "wide/d000/")
        self.assertIn("10 more entries not shown", lines[-1])


@unittest.skipUnless(GIT, "git is not installed")
class GitListingTest(ToolCase):
    def setUp(self):
        super().setUp()
        git(self.root, "init", "-q")
        self.put(".gitignore", "*.log\ngenerated/\n")
        self.put("src/app.py", "needle = 1\n")
        self.put("src/gone.py", "needle = 2\n")
        self.put("debug.log", "needle in a log\n")
        self.put("generated/out.py", "needle = 3\n")
        git(self.root, "add", "-A")
        git(self.root, "commit", "-q", "-m", "one")
        os.remove(os.path.join(self.root, "src/gone.py"))
        self.put("notes.txt", "needle, untracked\n")

    def test_listing_follows_git(self):
        # tracked and untracked files, not ignored ones, not deleted ones, never .git
        self.assertEqual(self.ok("list_files").splitlines(),
                         [".gitignore", "notes.txt", "src/app.py"])
        self.assertEqual(self.ok("list_files", depth=1).splitlines(),
                         [".gitignore", "notes.txt", "src/"])

    def test_search_follows_git(self):
        self.assertEqual(self.ok("search_files", pattern="needle").splitlines(),
                         ["notes.txt:1: needle, untracked", "src/app.py:1: needle = 1"])

    def test_an_ignored_directory_asked_for_by_name_is_listed(self):
        self.assertEqual(self.ok("list_files", path="generated"), "generated/out.py")
        self.assertEqual(self.ok("search_files", pattern="needle", path="generated"),
                         "generated/out.py:1: needle = 3")

    def test_skip_rules_apply_to_tracked_files_too(self):
        self.put("node_modules/lib/index.js", "needle\n")
        git(self.root, "add", "-f", "node_modules")
        self.assertNotIn("node_modules", self.ok("list_files"))

    def test_repository_configuration_runs_nothing_and_lists_no_other_tree(self):
        marker = os.path.join(os.path.dirname(self.root), "fsmonitor-ran")
        hook = self.put("hook.sh", f"#!/bin/sh\ntouch {marker}\n")
        os.chmod(hook, 0o755)
        outside = os.path.join(os.path.dirname(self.root), "elsewhere")
        os.makedirs(outside)
        with open(os.path.join(outside, "private.txt"), "w") as handle:
            handle.write("needle outside\n")
        git(self.root, "config", "core.fsmonitor", hook)
        git(self.root, "config", "core.worktree", outside)
        listed = self.ok("list_files")
        self.assertIn("src/app.py", listed)
        self.assertNotIn("private.txt", listed)
        self.assertNotIn("outside", self.ok("search_files", pattern="needle"))
        self.assertFalse(os.path.exists(marker), "git ran a program named by the repository")

    def test_a_link_listed_by_git_is_still_confined(self):
        os.symlink("/etc/passwd", os.path.join(self.root, "passwd"))
        os.symlink("src/app.py", os.path.join(self.root, "inside.py"))
        self.assertIn("passwd", self.ok("list_files"))   # the name, from git
        found = self.ok("search_files", pattern="root|needle")
        self.assertIn("inside.py:1: needle = 1", found)
        self.assertNotIn("passwd:", found)


class SearchLimitsTest(ToolCase):
    def test_cap_across_files_says_there_are_more(self):
        for i in range(60):
            self.put(f"m/f{i:02}.txt", "hit\n")
        lines = self.ok("search_files", pattern="hit").splitlines()
        self.assertEqual(len(lines), 51)
        self.assertEqual(lines[49], "m/f49.txt:1: hit")
        self.assertIn("50+ matches; more matches not shown", lines[50])

    def test_binary_suffixes_are_not_searched_unless_named(self):
        self.put("logo.png", "needle\n")
        self.assertIn("no matches", self.ok("search_files", pattern="needle"))
        self.assertEqual(self.ok("search_files", pattern="needle", path="logo.png"),
                         "logo.png:1: needle")

    def test_a_runaway_pattern_stops_with_what_it_found(self):
        self.context.command_timeout = 1.0
        self.put("a.txt", "found here\n")
        self.put("b.txt", "a" * 60 + "!\n")
        text = self.ok("search_files", pattern=r"found|(a|aa)+$")
        self.assertEqual(text.splitlines()[0], "a.txt:1: found here")
        self.assertIn("the search stopped after 1s", text)

    def test_a_cut_line_never_shows_part_of_a_key(self):
        self.put("conf.py", "x = 1; " + "y" * 230 + " token=" + SECRET + " and more\n")
        self.put("wide.py", "z" * 236 + " " + SECRET + "\n")
        text = self.ok("search_files", pattern="token|zzz")
        self.assertNotIn(SECRET[:6], text)
        self.assertIn("line cut", text)

    def test_glob_matches_names_and_paths(self):
        self.put("a/x.py", "hit\n")
        self.put("a/y.txt", "hit\n")
        self.assertEqual(self.ok("search_files", pattern="hit", glob="a/*.py"), "a/x.py:1: hit")
        self.assertEqual(self.ok("search_files", pattern="hit", glob="*.txt"), "a/y.txt:1: hit")


if __name__ == "__main__":
    unittest.main()


class ReadManyTest(unittest.TestCase):
    """Workspace.read_many reads what read_bytes would, one directory walk per directory."""

    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        base = os.path.realpath(tmp.name)
        self.root = os.path.join(base, "ws")
        outside = os.path.join(base, "outside")
        os.makedirs(os.path.join(self.root, "a"))
        os.makedirs(outside)
        for rel, text in (("ws/a/b.py", "b"), ("ws/top.txt", "top"),
                          ("outside/secret.txt", "SECRET")):
            with open(os.path.join(base, rel), "w") as handle:
                handle.write(text)
        os.symlink(os.path.join(outside, "secret.txt"), os.path.join(self.root, "out"))
        os.symlink(outside, os.path.join(self.root, "dir_out"))
        os.symlink("a/b.py", os.path.join(self.root, "in"))
        os.symlink("a", os.path.join(self.root, "dir_in"))
        os.mkfifo(os.path.join(self.root, "pipe"))
        self.ws = Workspace(self.root)

    def read(self, paths, stop_after=None):
        got = []

        def visit(path, data, size):
            got.append((path, data.decode(), size))
            return stop_after is None or len(got) < stop_after
        self.ws.read_many(paths, 1 << 20, visit)
        return got

    def test_only_what_is_inside_and_regular(self):
        paths = ["a/b.py", "dir_in/b.py", "dir_out/secret.txt", "in", "missing", "out",
                 "pipe", "top.txt", "../outside/secret.txt", "a/../top.txt", "a"]
        self.assertEqual(self.read(paths), [("a/b.py", "b", 1), ("dir_in/b.py", "b", 1),
                                            ("in", "b", 1), ("top.txt", "top", 3),
                                            ("a/../top.txt", "top", 3)])

    def test_stops_when_asked(self):
        self.assertEqual(len(self.read(["a/b.py", "top.txt", "in"], stop_after=1)), 1)

    def test_a_limit_reads_the_head(self):
        got = []
        self.ws.read_many(["top.txt"], 2, lambda p, d, s: got.append((d, s)))
        self.assertEqual(got, [(b"to", 3)])
