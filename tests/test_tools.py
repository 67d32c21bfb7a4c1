import os
import sys
import tempfile
import time
import unittest

from golem.core.errors import ToolError
from golem.llm.types import ToolCall, ToolSpec
from golem.tools import Context, Registry, Tool, ToolResult, default_registry
from golem.tools.process import command_env
from golem.tools.workspace import Workspace
from tests.fixtures import wait_gone

SECRET = "sk-test-0123456789abcdef"
PY_DIR = os.path.dirname(sys.executable)
PY_NAME = os.path.basename(sys.executable)


class ToolCase(unittest.TestCase):
    """A real workspace in a temporary directory and the registry golem gives the model."""

    allow: set[str] = set()
    test_argv: list[str] | None = None

    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        base = os.path.realpath(tmp.name)
        self.root = os.path.join(base, "ws")
        home = os.path.join(base, "home")
        os.mkdir(self.root)
        os.mkdir(home)
        env = command_env(home, home)
        env["PATH"] = PY_DIR + os.pathsep + env["PATH"]
        self.context = Context(Workspace(self.root), test_argv=self.test_argv,
                               allow=set(self.allow), env=env, command_timeout=30.0)
        self.registry = default_registry(self.context, secrets=[SECRET])
        self.ids = 0

    def put(self, rel: str, data: str | bytes) -> str:
        full = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as fh:
            fh.write(data.encode() if isinstance(data, str) else data)
        return full

    def get(self, rel: str) -> bytes:
        with open(os.path.join(self.root, rel), "rb") as fh:
            return fh.read()

    def call(self, name: str, error: str | None = None, **arguments) -> ToolResult:
        self.ids += 1
        result = self.registry.call(ToolCall(f"c{self.ids}", name, arguments, error))
        self.assertIsInstance(result, ToolResult)
        self.assertEqual(result.ok, not result.text.startswith("Error:"), result.text)
        return result

    def ok(self, name: str, **arguments) -> str:
        result = self.call(name, **arguments)
        self.assertTrue(result.ok, result.text)
        return result.text

    def err(self, name: str, error: str | None = None, **arguments) -> str:
        result = self.call(name, error, **arguments)
        self.assertFalse(result.ok, result.text)
        self.assertTrue(result.text.startswith("Error:"), result.text)
        return result.text


class ListFilesTest(ToolCase):
    def test_lists_files_and_skips_vcs_and_caches(self):
        self.put("a.py", "")
        self.put("pkg/b.py", "")
        self.put(".git/config", "")
        self.put("pkg/__pycache__/b.cpython-311.pyc", b"\0")
        self.put("node_modules/x/index.js", "")
        lines = self.ok("list_files").splitlines()
        self.assertEqual(lines, ["a.py", "pkg/b.py"])
        self.assertEqual(self.ok("list_files", path="pkg").splitlines(), ["pkg/b.py"])

    def test_cap_note(self):
        for i in range(405):
            self.put(f"many/f{i:03}.txt", "")
        lines = self.ok("list_files", path="many").splitlines()
        self.assertEqual(len(lines), 401)
        self.assertEqual(lines[0], "many/f000.txt")
        self.assertIn("5 more files not shown", lines[-1])

    def test_missing_directory_is_an_error(self):
        self.assertIn("no such directory", self.err("list_files", path="nope"))

    def test_outside_is_refused(self):
        self.assertIn("outside the workspace", self.err("list_files", path="../"))


class ReadFileTest(ToolCase):
    def test_numbered_lines(self):
        self.put("f.txt", "alpha\nbeta\ngamma\n")
        self.assertEqual(self.ok("read_file", path="f.txt"),
                         "     1\talpha\n     2\tbeta\n     3\tgamma")

    def test_offset_and_limit(self):
        self.put("f.txt", "".join(f"line {i}\n" for i in range(1, 11)))
        text = self.ok("read_file", path="f.txt", offset=4, limit=2)
        lines = text.splitlines()
        self.assertEqual(lines[:2], ["     4\tline 4", "     5\tline 5"])
        self.assertIn("offset=6", lines[2])
        self.assertEqual(len(lines), 3)
        tail = self.ok("read_file", path="f.txt", offset=9)
        self.assertEqual(tail, "     9\tline 9\n    10\tline 10")
        self.assertIn("past the end", self.err("read_file", path="f.txt", offset=11))
        self.assertIn("counting from 1", self.err("read_file", path="f.txt", offset=0))

    def test_default_window_says_how_to_read_on(self):
        self.put("big.txt", "".join(f"row {i}\n" for i in range(1, 451)))
        lines = self.ok("read_file", path="big.txt").splitlines()
        self.assertEqual(len(lines), 201)
        self.assertEqual(lines[199], "   200\trow 200")
        self.assertIn("lines 1-200 of 450", lines[200])
        self.assertIn("offset=201 to read on", lines[200])

    def test_binary_file_is_described_not_dumped(self):
        self.put("blob.bin", b"\x7fELF\0\0\x01\x02garbage")
        text = self.err("read_file", path="blob.bin")
        self.assertIn("binary", text)
        self.assertNotIn("garbage", text)

    def test_missing_file_is_an_error(self):
        text = self.err("read_file", path="nope.txt")
        self.assertIn("nope.txt", text)
        self.assertIn("does not exist", text)

    def test_missing_file_error_names_a_real_tool(self):
        text = self.err("read_file", path="nope.txt")
        self.assertNotIn("list_dir", text)
        self.assertIn("list_files", text)
        os.mkdir(os.path.join(self.root, "d"))
        text = self.err("read_file", path="d")
        self.assertNotIn("list_dir", text)
        self.assertIn("list_files", text)

    def test_empty_file(self):
        self.put("empty.txt", "")
        self.assertIn("is empty", self.ok("read_file", path="empty.txt"))

    def test_one_huge_line_is_capped(self):
        self.put("min.js", "x" * 200_000 + "\ny = 1\n")
        text = self.ok("read_file", path="min.js")
        self.assertLess(len(text), 50_000)
        self.assertIn("200000 characters", text)
        self.assertIn("     2\ty = 1", text)

    def test_many_long_lines_stop_at_the_character_cap(self):
        self.put("wide.txt", ("y" * 1_500 + "\n") * 100)
        lines = self.ok("read_file", path="wide.txt").splitlines()
        self.assertLess(sum(len(l) for l in lines), 45_000)
        self.assertLess(len(lines), 100)
        last = len(lines) - 1
        self.assertIn(f"offset={last + 1} to read on", lines[-1])


class WriteFileTest(ToolCase):
    def test_creates_parents_then_replaces(self):
        text = self.ok("write_file", path="deep/er/new.txt", content="one\ntwo\n")
        self.assertIn("created deep/er/new.txt (2 lines)", text)
        self.assertEqual(self.get("deep/er/new.txt"), b"one\ntwo\n")
        text = self.ok("write_file", path="deep/er/new.txt", content="three\n")
        self.assertIn("replaced deep/er/new.txt", text)
        self.assertEqual(self.get("deep/er/new.txt"), b"three\n")

    def test_replace_is_atomic_and_keeps_mode(self):
        full = self.put("run.sh", "#!/bin/sh\necho old\n")
        os.chmod(full, 0o750)
        before = os.stat(full).st_ino
        self.ok("write_file", path="run.sh", content="#!/bin/sh\necho new\n")
        after = os.stat(full)
        # a new inode renamed into place, never the old file truncated and rewritten
        self.assertNotEqual(after.st_ino, before)
        self.assertEqual(after.st_mode & 0o777, 0o750)
        self.assertEqual(sorted(os.listdir(self.root)), ["run.sh"])

    def test_syntax_warning_for_broken_python(self):
        text = self.ok("write_file", path="bad.py", content="def f(:\n    pass\n")
        self.assertIn("Warning: bad.py now has a syntax error at line 1", text)
        self.assertEqual(self.get("bad.py"), b"def f(:\n    pass\n")
        self.assertNotIn("Warning", self.ok("write_file", path="good.py", content="x = 1\n"))
        self.assertNotIn("Warning", self.ok("write_file", path="notes.txt", content="def f(:\n"))

    def test_directory_and_git_are_refused(self):
        os.makedirs(os.path.join(self.root, "d"))
        self.assertIn("directory", self.err("write_file", path="d", content="x"))
        os.makedirs(os.path.join(self.root, ".git"))
        self.assertIn(".git", self.err("write_file", path=".git/config", content="x"))
        self.assertEqual(os.listdir(os.path.join(self.root, ".git")), [])


class EditFileTest(ToolCase):
    def test_unique_replace(self):
        self.put("m.py", "a = 1\nb = 2\nc = 3\n")
        text = self.ok("edit_file", path="m.py", old_string="b = 2", new_string="b = 20")
        self.assertIn("edited m.py at line 2", text)
        self.assertEqual(self.get("m.py"), b"a = 1\nb = 20\nc = 3\n")

    def test_not_found_shows_closest_lines(self):
        self.put("m.py", "def mean(values):\n    return sum(values) / (len(values) - 1)\n")
        text = self.err("edit_file", path="m.py",
                        old_string="return sum(values) / len(values) - 1",
                        new_string="return 0")
        self.assertIn("not found in m.py", text)
        self.assertIn("closest lines", text)
        self.assertIn("     2\t    return sum(values) / (len(values) - 1)", text)
        self.assertEqual(self.get("m.py"),
                         b"def mean(values):\n    return sum(values) / (len(values) - 1)\n")

    def test_ambiguous_names_line_numbers(self):
        self.put("m.py", "x = 0\ny = 1\nx = 0\nz = 2\nx = 0\n")
        text = self.err("edit_file", path="m.py", old_string="x = 0", new_string="x = 9")
        self.assertIn("3 times", text)
        self.assertIn("lines 1, 3, 5", text)
        self.assertEqual(self.get("m.py"), b"x = 0\ny = 1\nx = 0\nz = 2\nx = 0\n")

    def test_crlf_file_keeps_crlf(self):
        self.put("w.py", b"def f():\r\n    return 1\r\n\r\nprint(f())\r\n")
        self.ok("edit_file", path="w.py", old_string="def f():\n    return 1",
                new_string="def f():\n    # two\n    return 2")
        self.assertEqual(self.get("w.py"),
                         b"def f():\r\n    # two\r\n    return 2\r\n\r\nprint(f())\r\n")

    def test_empty_old_string_is_refused(self):
        self.put("m.py", "a\n")
        self.assertIn("write_file", self.err("edit_file", path="m.py", old_string="",
                                             new_string="b"))

    def test_syntax_warning_after_edit(self):
        self.put("m.py", "x = (1,\n     2)\n")
        text = self.ok("edit_file", path="m.py", old_string="     2)", new_string="     2")
        self.assertIn("Warning: m.py now has a syntax error", text)

    def test_edit_leaves_other_bytes_alone(self):
        self.put("legacy.py", b"# caf\xe9\nx = 1\n")
        self.ok("edit_file", path="legacy.py", old_string="x = 1", new_string="x = 2")
        self.assertEqual(self.get("legacy.py"), b"# caf\xe9\nx = 2\n")


class SearchFilesTest(ToolCase):
    def test_regex_and_format(self):
        self.put("a.py", "import os\ndef alpha():\n    return 1\n")
        self.put("pkg/b.py", "def beta():\n    pass\n")
        self.put("notes.md", "def gamma in prose\n")
        text = self.ok("search_files", pattern=r"^\s*def \w+\(")
        self.assertEqual(text.splitlines(), ["a.py:2: def alpha():", "pkg/b.py:1: def beta():"])

    def test_glob_and_path(self):
        self.put("a.py", "needle\n")
        self.put("b.txt", "needle\n")
        self.put("sub/c.py", "needle\n")
        self.assertEqual(self.ok("search_files", pattern="needle", glob="*.py").splitlines(),
                         ["a.py:1: needle", "sub/c.py:1: needle"])
        self.assertEqual(self.ok("search_files", pattern="needle", path="sub").splitlines(),
                         ["sub/c.py:1: needle"])
        self.assertEqual(self.ok("search_files", pattern="needle", path="b.txt").splitlines(),
                         ["b.txt:1: needle"])
        self.assertIn("no matches", self.ok("search_files", pattern="haystack"))

    def test_cap_at_fifty_with_note(self):
        self.put("many.txt", "hit\n" * 60)
        lines = self.ok("search_files", pattern="hit").splitlines()
        self.assertEqual(len(lines), 51)
        self.assertEqual(lines[49], "many.txt:50: hit")
        self.assertIn("10 more matches not shown", lines[50])

    def test_bad_regex(self):
        self.assertIn("bad regular expression", self.err("search_files", pattern="(unclosed"))

    def test_skips_binary_and_vcs(self):
        self.put("blob.bin", b"needle\0needle")
        self.put(".git/HEAD", "needle\n")
        self.assertIn("no matches", self.ok("search_files", pattern="needle"))


class RunCommandTest(ToolCase):
    allow = {"echo", PY_NAME}

    def test_not_allowed_names_allowed_programs(self):
        text = self.err("run_command", argv=["ls", "-la"])
        self.assertIn("'ls' is not an allowed program", text)
        self.assertIn("echo", text)
        self.assertIn(PY_NAME, text)

    def test_paths_are_refused(self):
        self.assertIn("bare program name", self.err("run_command", argv=["/bin/echo", "x"]))
        self.assertIn("argv is empty", self.err("run_command", argv=[]))

    def test_runs_in_the_workspace(self):
        text = self.ok("run_command", argv=[PY_NAME, "-c", "import os; print(os.getcwd())"])
        self.assertEqual(text, f"exit code 0\n{self.root}")

    def test_no_shell(self):
        self.assertEqual(self.ok("run_command", argv=["echo", "a;b", "$HOME", "|", "x"]),
                         "exit code 0\na;b $HOME | x")

    def test_exit_code_reported(self):
        text = self.ok("run_command", argv=[PY_NAME, "-c", "import sys; print('x'); sys.exit(4)"])
        self.assertEqual(text, "exit code 4\nx")

    def test_long_output_shows_head_tail_and_line_counts(self):
        self.context.output_cap = 2000
        code = "for i in range(1, 10001): print(f'line {i} caf\u00e9')"
        text = self.ok("run_command", argv=[PY_NAME, "-c", code])
        lines = text.splitlines()
        self.assertEqual(lines[:2], ["exit code 0", "line 1 caf\u00e9"])
        self.assertEqual(lines[-1], "line 10000 caf\u00e9")
        self.assertNotIn("\ufffd", text)
        self.assertRegex(text, r"\n\[\.\.\. \d+ bytes omitted: \d+ of 10000 lines; "
                               r"the head and tail are shown \.\.\.\]\n")
        self.assertLess(len(text.encode()), 2300)

    def test_timeout_is_distinct_and_kills_the_group(self):
        # 2 s: time enough for the child to start its grandchild, even on a loaded machine
        self.context.command_timeout = 2.0
        pidfile = os.path.join(self.root, "child.pid")
        code = ("import subprocess, time\n"
                "p = subprocess.Popen(['sleep', '30'])\n"
                f"open({pidfile!r}, 'w').write(str(p.pid))\n"
                "print('started', flush=True)\n"
                "time.sleep(30)\n")
        start = time.monotonic()
        text = self.ok("run_command", argv=[PY_NAME, "-c", code])
        self.assertLess(time.monotonic() - start, 20)       # not after the child's 30 s sleep
        first = text.splitlines()[0]
        self.assertTrue(first.startswith("timed out after 2s"), text)
        self.assertIn("process group was killed", first)
        self.assertNotIn("exit code", first)
        self.assertIn("started", text)
        with open(pidfile) as fh:
            grandchild = int(fh.read())
        self.assertTrue(wait_gone(grandchild), "the grandchild outlived the timeout")


class NoProgramsAllowedTest(ToolCase):
    def test_explains_how_to_allow(self):
        text = self.err("run_command", argv=["echo", "x"])
        self.assertIn("no programs are allowed", text)
        self.assertIn("-allow", text)


class RunTestsTest(ToolCase):
    def test_passed(self):
        self.context.test_argv = [sys.executable, "-c", "print('all good')"]
        text = self.ok("run_tests")
        self.assertIn("tests passed: exit code 0", text)
        self.assertIn("all good", text)
        self.assertTrue(text.startswith("$ "), text)

    def test_failed(self):
        self.context.test_argv = [sys.executable, "-c", "import sys; print('bad'); sys.exit(3)"]
        text = self.ok("run_tests")
        self.assertIn("tests failed: exit code 3", text)
        self.assertIn("bad", text)

    def test_runs_in_the_workspace(self):
        self.put("marker.txt", "here")
        self.context.test_argv = [sys.executable, "-c", "print(open('marker.txt').read())"]
        self.assertIn("here", self.ok("run_tests"))

    def test_select_narrows_a_unittest_run(self):
        self.put("tests/test_sel.py", "import unittest\n"
                 "class A(unittest.TestCase):\n"
                 "    def test_good(self): pass\n"
                 "    def test_bad(self): self.fail('no')\n")
        self.context.test_argv = [sys.executable, "-m", "unittest", "discover", "-s", "tests"]
        self.context.test_runner = "unittest"
        text = self.ok("run_tests", select="test_good")
        self.assertIn("-k test_good", text.splitlines()[0])
        self.assertIn("tests passed: exit code 0", text)
        self.assertIn("tests failed: exit code 1", self.ok("run_tests"))
        self.assertIn("not an option", self.err("run_tests", select="--help"))

    def test_select_needs_a_runner_that_can_select(self):
        self.context.test_argv = [sys.executable, "-c", "pass"]
        self.assertIn("cannot select", self.err("run_tests", select="x"))

    def test_no_test_command(self):
        self.context.test_argv = None
        self.assertIn("no test command", self.err("run_tests"))


class RegistryTest(ToolCase):
    def test_unknown_tool_lists_every_tool(self):
        text = self.err("delete_everything", path=".")
        self.assertTrue(text.startswith("Error: unknown tool 'delete_everything'"), text)
        tools = text.split("the tools are: ", 1)[1].split(", ")
        self.assertEqual(sorted(tools), sorted(["list_files", "read_file", "search_files",
                                                "write_file", "edit_file", "run_command",
                                                "run_tests"]))

    def test_specs_are_the_surface(self):
        specs = {s.name: s.parameters for s in self.registry.specs}
        self.assertEqual(set(specs["read_file"]["properties"]), {"path", "offset", "limit"})
        self.assertEqual(specs["read_file"]["required"], ["path"])
        self.assertEqual(set(specs["edit_file"]["properties"]),
                         {"path", "old_string", "new_string"})
        self.assertEqual(set(specs["search_files"]["properties"]), {"pattern", "path", "glob"})
        self.assertEqual(set(specs["run_command"]["properties"]), {"argv"})
        self.assertEqual(specs["run_tests"].get("required", []), [])
        ro = default_registry(self.context, read_only=True)
        self.assertEqual(sorted(ro.tools), ["list_files", "read_file", "search_files"])

    def test_missing_required_argument(self):
        text = self.err("write_file", path="x.txt")
        self.assertIn("missing required argument 'content'", text)
        self.assertFalse(os.path.exists(os.path.join(self.root, "x.txt")))

    def test_wrong_type(self):
        text = self.err("write_file", path="x.txt", content=["not", "a", "string"])
        self.assertIn("'content' must be a JSON string", text)
        self.assertFalse(os.path.exists(os.path.join(self.root, "x.txt")))
        self.put("f.txt", "a\n")
        self.assertIn("must be a JSON integer",
                      self.err("read_file", path="f.txt", offset=True))
        self.assertIn("must be a JSON integer",
                      self.err("read_file", path="f.txt", offset="2"))
        self.assertIn("list of strings", self.err("run_command", argv=["echo", 1]))

    def test_unknown_argument(self):
        text = self.err("write_file", path="x.txt", content="x", mode="0777")
        self.assertIn("unknown argument 'mode'", text)
        self.assertIn("path, content", text)
        self.assertFalse(os.path.exists(os.path.join(self.root, "x.txt")))

    def test_call_error_is_reported_and_tool_not_run(self):
        runs = []
        spec = ToolSpec("probe", "records calls", {"type": "object", "properties": {}})
        registry = Registry(self.context, [Tool(spec, lambda ctx, **kw: runs.append(kw) or "ran")])
        result = registry.call(ToolCall("c1", "probe", {}, "arguments were not valid JSON"))
        self.assertFalse(result.ok)
        self.assertEqual(result.text, "Error: probe: arguments were not valid JSON")
        self.assertEqual(runs, [])
        self.assertEqual(registry.call(ToolCall("c2", "probe", {})).text, "ran")
        self.assertEqual(runs, [{}])

    def test_unexpected_exception_becomes_error_text(self):
        def broken(ctx):
            raise ZeroDivisionError("division by zero")

        def refusing(ctx):
            raise ToolError("not like that; do this instead")

        spec = lambda name: ToolSpec(name, "", {"type": "object", "properties": {}})
        registry = Registry(self.context, [Tool(spec("broken"), broken),
                                           Tool(spec("refusing"), refusing)])
        result = registry.call(ToolCall("c1", "broken", {}))
        self.assertFalse(result.ok)
        self.assertEqual(result.text, "Error: broken failed unexpectedly: "
                                      "ZeroDivisionError: division by zero")
        result = registry.call(ToolCall("c2", "refusing", {}))
        self.assertEqual((result.ok, result.text),
                         (False, "Error: not like that; do this instead"))

    def test_result_is_always_valid_unicode(self):
        spec = ToolSpec("raw", "", {"type": "object", "properties": {}})
        registry = Registry(self.context, [Tool(spec, lambda ctx: "caf\udce9 ok")])
        text = registry.call(ToolCall("c1", "raw", {})).text
        self.assertEqual(text.encode("utf-8").decode("utf-8"), text)
        self.assertIn(" ok", text)

    def test_secrets_redacted_from_results(self):
        self.put("settings.env", f"API_KEY={SECRET}\nDEBUG=1\n")
        text = self.ok("read_file", path="settings.env")
        self.assertNotIn(SECRET, text)
        self.assertIn("API_KEY=[redacted]", text)
        self.assertIn("DEBUG=1", text)
        text = self.ok("search_files", pattern="API_KEY")
        self.assertEqual(text, "settings.env:1: API_KEY=[redacted]")
        text = self.err("read_file", path=f"{SECRET}.txt")
        self.assertNotIn(SECRET, text)

    def test_secrets_redacted_from_command_output(self):
        self.context.allow = {"echo"}
        text = self.ok("run_command", argv=["echo", f"token={SECRET}"])
        self.assertEqual(text, "exit code 0\ntoken=[redacted]")

    def test_no_secrets_means_nothing_redacted(self):
        registry = Registry(self.context, list(self.registry.tools.values()))
        self.put("f.txt", SECRET)
        self.assertIn(SECRET, registry.call(ToolCall("c", "read_file", {"path": "f.txt"})).text)


if __name__ == "__main__":
    unittest.main()
