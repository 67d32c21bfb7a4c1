"""search_files finds exactly what a plain line-by-line search finds, however the file is made.

The fast path searches whole files as bytes and confirms hits per line; these tests hold it to
a reference that decodes each file, splits it with str.splitlines (as read_file numbers lines)
and runs the pattern on every line.
"""

import os
import random
import re
import tempfile
import unittest

from golem.tools import search
from golem.tools.workspace import Workspace


def reference(files: dict[str, bytes], pattern: str) -> list[str]:
    regex = re.compile(pattern)
    hits = []
    for name in sorted(files):
        data = files[name]
        if b"\0" in data[:8192]:
            continue
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if regex.search(line):
                hits.append(f"{name}:{number}: {line}")
    return hits


def render(path: str, number: int, line: str) -> str:
    return f"{path}:{number}: {line}"


PATTERNS = [
    r"foo", r"^foo", r"foo$", r"^$", r"^\s*$", r"\s+bar", r"bar\s*$", r"o\sb", r"x*",
    r"\bfoo\b", r"foo\B", r"(?i)FOO", r"f.o", r"(?s)foo.bar", r"foo\nbar", r"[^a-z]foo",
    r"(?<=a)foo", r"foo(?![\s\S])", r"\Afoo", r"foo\Z", r"(?>\s*)$", r"caf.", r"\w+é",
    r"é$", r"^\W", r"\x0c", r"\d{2,}", r"(foo|bar)+$", r"\S+$", r"^.{3}$", r"(?-m:^foo)",
    r"\s++$",
]

PIECES = ["foo", "bar", " ", "\t", "\n", "\r\n", "\r", "\x0c", "\x0b", "\x1c", "\x1f",
          "é", "café", "a", "9", "12", "\u2028", "\x85", "-", "foo bar", ""]


class EquivalenceTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.root = os.path.realpath(tmp.name)
        self.ws = Workspace(self.root)

    def write(self, files: dict[str, bytes]) -> None:
        for name, data in files.items():
            with open(os.path.join(self.root, name), "wb") as handle:
                handle.write(data)

    def found(self, files: dict[str, bytes], pattern: str) -> list[str]:
        run = search.Search(re.compile(pattern), 10_000, 30.0, render)
        return run.run(self.ws, sorted(files), 1 << 20).hits

    def test_random_files_match_the_reference(self):
        rng = random.Random(1234)
        ascii_pieces = [p for p in PIECES if p.isascii()]
        files = {}
        for i in range(120):
            pieces = ascii_pieces if i % 2 else PIECES   # half take the bytes path
            text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 40)))
            files[f"f{i:03}.txt"] = text.encode("utf-8")
        files["latin1.txt"] = b"caf\xe9 foo\nfoo bar\n"
        files["binary.bin"] = b"foo\0bar"
        files["cr-crlf.txt"] = b"foo\r\r\nfoo\n"
        self.write(files)
        for pattern in PATTERNS:
            with self.subTest(pattern=pattern):
                self.assertEqual(self.found(files, pattern), reference(files, pattern))

    def test_line_numbers_follow_read_files_count(self):
        files = {"crlf.py": b"a = 1\r\nfoo = 2\r\n", "ff.c": b"int a;\n\x0c\nfoo();\n",
                 "cr.txt": b"one\rfoo\rthree"}
        self.write(files)
        self.assertEqual(self.found(files, "foo"),
                         ["cr.txt:2: foo", "crlf.py:2: foo = 2", "ff.c:4: foo();"])


class TimeLimitTest(unittest.TestCase):
    def test_a_runaway_pattern_is_stopped(self):
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "a.txt"), "w") as handle:
                handle.write("a" * 64 + "!\nfoo\n")
            run = search.Search(re.compile(r"(a|aa)+$|foo"), 50, 0.5, render)
            found = run.run(Workspace(tmp), ["a.txt"], 1 << 20)
            self.assertTrue(found.expired)
            self.assertFalse(found.exact)


if __name__ == "__main__":
    unittest.main()
