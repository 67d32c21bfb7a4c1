"""Every command's `--help` against docs/cli.md, both ways: each flag a command's help lists
is in that command's part of the reference, and each flag the reference writes into a
command's usage (its synopsis line, its usage block, its flag table) is one the command takes.
The package carries the reference (`golem help cli`), the same text as docs/cli.md."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import unittest

from golem.cli.flags import COMMANDS
from tests.fixtures import REPO_ROOT, read

CLI_MD = os.path.join(REPO_ROOT, "docs", "cli.md")
FLAG = re.compile(r"(?<![\w-])--?([a-z][a-z-]*)")
# where each command's flags are written up: the headings of its sections
SECTIONS = {"fix": ["`fix`, `run`, `ask`", "Several attempts"],
            "run": ["`fix`, `run`, `ask`"], "ask": ["`fix`, `run`, `ask`"],
            "verify": ["`verify`"], "pick": ["Several attempts"],
            "tools": ["`tools`, `trace`"], "trace": ["`tools`, `trace`"],
            "undo": ["`tools`, `trace`"], "demo": ["`tools`, `trace`"],
            "runs": ["`tools`, `trace`"], "help": ["`tools`, `trace`"],
            "config": ["Configuration"]}


def help_text(*argv: str) -> str:
    done = subprocess.run([sys.executable, "-m", "golem", *argv], capture_output=True,
                          text=True, cwd=REPO_ROOT, timeout=60,
                          env={**os.environ, "PYTHONPATH": REPO_ROOT, "COLUMNS": "100"})
    assert done.returncode == 0, done.stderr
    return done.stdout


def flags_in(text: str) -> set[str]:
    return {"-" + name for name in FLAG.findall(text)} - {"-h", "-help"}


def section(doc: str, heading: str) -> str:
    start = doc.index("\n## " + heading)
    end = doc.find("\n## ", start + 1)
    return doc[start:end if end > 0 else len(doc)]


class HelpAgainstReference(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.doc = read(CLI_MD)
        cls.helps = {command: help_text(command, "--help") for command in COMMANDS}
        cls.accepted = {command: flags_in(text.split("\noptions:", 1)[-1].split("\nexamples:")[0])
                        | flags_in(text.split("\n\n", 1)[0])
                        for command, text in cls.helps.items()}

    def usages(self) -> dict[str, list[str]]:
        """Each command's usage as the reference writes it: its synopsis line, an indented
        `golem CMD ...` block, a bullet that starts with `golem CMD [...]`."""
        found: dict[str, list[str]] = {c: [] for c in COMMANDS}
        synopsis = self.doc.split("\n## ", 1)[0]
        for command, rest in re.findall(r"(?m)^    golem (\w+) +(\S.*?)(?:  +\S.*)?$",
                                        synopsis):
            found[command].append(rest)
        for block in re.findall(r"(?m)^    golem (\w+) (.*(?:\n {10,}\S.*)*)",
                                self.doc.split("\n## ", 1)[1]):
            found[block[0]].append(block[1])
        for command, usage in re.findall(r"(?m)^- `golem (\w+) ([^`]*)`", self.doc):
            found[command].append(usage)
        return found

    def test_every_flag_in_a_commands_help_is_in_its_part_of_the_reference(self):
        for command in COMMANDS:
            text = "".join(section(self.doc, h) for h in SECTIONS[command])
            for flag in sorted(self.accepted[command]):
                with self.subTest(command=command, flag=flag):
                    self.assertRegex(text, rf"(?<![\w-]){re.escape(flag)}(?![\w-])",
                                     f"golem {command} --help lists {flag}; docs/cli.md's "
                                     f"part on {command} does not")

    def test_every_flag_in_a_documented_usage_is_accepted(self):
        for command, usages in self.usages().items():
            for usage in usages:
                for flag in sorted(flags_in(usage) - {"-version"}):
                    with self.subTest(command=command, usage=usage, flag=flag):
                        self.assertIn(flag, self.accepted[command],
                                      f"docs/cli.md: golem {command} {usage}")

    def test_a_usage_written_out_lists_every_flag(self):
        # a usage that says `[flags]` leaves them to the command's table; one written out
        # (pick's and verify's blocks, demo's and undo's bullets) lists them all
        for command, usages in self.usages().items():
            with self.subTest(command=command):
                self.assertTrue(usages, command)
                full = [u for u in usages if "[flags]" not in u]
                if full:
                    written = set().union(*(flags_in(u) for u in full))
                    self.assertEqual(sorted(self.accepted[command] - written), [],
                                     f"docs/cli.md's usage of golem {command}")

    def test_the_agent_flag_table_holds_only_flags_the_agent_commands_take(self):
        table = section(self.doc, "`fix`, `run`, `ask`")
        rows = re.findall(r"(?m)^\| (`-.*?) \|", table)
        agent = self.accepted["fix"] | self.accepted["run"] | self.accepted["ask"]
        for row in rows:
            for flag in flags_in(row):
                with self.subTest(row=row, flag=flag):
                    self.assertIn(flag, agent)

    def test_golem_help_says_what_the_reference_says_it_lists(self):
        top = help_text("--help")
        for command in COMMANDS:
            self.assertRegex(top, rf"(?m)^    {command} ")
        self.assertIn("`golem --help` lists the commands", self.doc)
        # the footer points at what every copy carries, not at a checkout's file
        self.assertNotIn("docs/cli.md", top)
        self.assertIn("golem help cli", top)


class ReferenceInThePackage(unittest.TestCase):
    def test_golem_help_cli_prints_docs_cli_md(self):
        self.assertEqual(help_text("help", "cli"), read(CLI_MD))

    def test_the_packaged_copy_is_docs_cli_md(self):
        self.assertEqual(read(os.path.join(REPO_ROOT, "golem", "docs", "cli.md")),
                         read(CLI_MD), "copy docs/cli.md to golem/docs/cli.md")


if __name__ == "__main__":
    unittest.main()
