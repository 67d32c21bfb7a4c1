"""The docs say what golem does: docs/cli.md names every command, flag, stop and JSON field
that --help and a real run show (and nothing they do not), every relative link in the docs
leads to a file (and heading) the repository has, the README's two commands stay, and the
top level holds what the design names."""

from __future__ import annotations

import os
import re
import subprocess
import unittest

from golem.cli.flags import COMMANDS, build_parser, flag_names, subparser
from tests.fixtures import REPO_ROOT, GolemCase, last_json, read, run_cli

CLI_MD = os.path.join(REPO_ROOT, "docs", "cli.md")
# flags of other programs that cli.md quotes (unittest's -t, go test's -count)
FOREIGN = {"-t", "-count"}
TOP_LEVEL = {"pyproject.toml", "README.md", "LICENSE", "Makefile", "golem", "tests",
             "examples", "docs", ".github", ".ci", ".gitignore"}


def mentions(text: str, flag: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text) is not None


class CliReference(unittest.TestCase):
    def setUp(self):
        self.doc = read(CLI_MD)
        self.parser = build_parser()

    def test_every_command_is_in_the_synopsis(self):
        synopsis = self.doc.split("\n## ", 1)[0]
        listed = set(re.findall(r"^    golem (\w+)", synopsis, re.M))
        self.assertEqual(listed, set(COMMANDS))

    def test_every_flag_of_every_command_is_documented(self):
        for command in COMMANDS:
            for flag in sorted(flag_names(subparser(self.parser, command)) - {"-h", "-help"}):
                with self.subTest(command=command, flag=flag):
                    self.assertTrue(mentions(self.doc, flag), f"{flag} of golem {command}")

    def test_no_flag_is_documented_that_golem_lacks(self):
        real = set().union(*(flag_names(subparser(self.parser, c)) for c in COMMANDS))
        quoted = set(re.findall(r"`(-[a-z][a-z-]*)", self.doc))
        self.assertEqual(sorted(quoted - real - FOREIGN - {"-d"}), [])
        # `-d` appears only to say that it is not -dir
        self.assertIn("(`-d` is not `-dir`)", self.doc)

    def test_every_stop_is_documented(self):
        for stop in ("answered", "declined", "refused", "steps", "tokens", "wall", "cost",
                     "cut_off", "provider_error", "interrupted"):
            self.assertIn(f"`{stop}`", self.doc)

    def test_every_verdict_and_exit_code(self):
        for verdict in ("VERIFIED", "ALREADY_GREEN", "FAILED", "REJECTED"):
            self.assertIn(f"| `{verdict}` |", self.doc)
        for code in ("0", "1", "2", "3", "4", "130, 143, 129"):
            self.assertIn(f"\n| {code} |", self.doc)


class JsonFields(GolemCase):
    def test_every_field_of_a_real_fix_is_documented(self):
        code, out, err = run_cli(["demo", "-json", "-quiet"])
        self.assertEqual(code, 0, err)
        report = last_json(out)
        doc = read(CLI_MD)
        fields = doc[doc.index("## The `-json` object"):]
        for key in report:
            with self.subTest(key=key):
                self.assertIn(f"`{key}`", fields)
        for key in report["tokens"]:
            self.assertIn(f"`{key}`", fields)


class Links(unittest.TestCase):
    @staticmethod
    def slugs(path: str) -> set[str]:
        out = set()
        for heading in re.findall(r"^#+ (.+)$", read(path), re.M):
            slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
            out.add(slug)
        return out

    def test_relative_links_lead_somewhere(self):
        pages = [os.path.join(REPO_ROOT, "README.md")] + [
            os.path.join(REPO_ROOT, "docs", n) for n in sorted(os.listdir(
                os.path.join(REPO_ROOT, "docs"))) if n.endswith(".md")]
        checked = 0
        for page in pages:
            for target in re.findall(r"\]\(([^)\s]+)\)", read(page)):
                if re.match(r"[a-z]+:", target):
                    continue
                path, _, anchor = target.partition("#")
                full = os.path.normpath(os.path.join(os.path.dirname(page), path)) \
                    if path else page
                with self.subTest(page=os.path.basename(page), target=target):
                    self.assertTrue(os.path.exists(full), target)
                    if anchor and full.endswith(".md"):
                        self.assertIn(anchor, self.slugs(full))
                checked += 1
        self.assertGreater(checked, 20)

    def test_readme_keeps_its_two_commands(self):
        readme = read(os.path.join(REPO_ROOT, "README.md"))
        block = readme.split("## Try it: two commands", 1)[1].split("```sh\n", 1)[1]
        block = block.split("```", 1)[0]
        self.assertEqual([line.split("#")[0].strip() for line in block.strip().splitlines()],
                         ["make demo", "make test"])

    def test_the_models_page_prices_come_from_the_table(self):
        from golem.llm import prices
        page = read(os.path.join(REPO_ROOT, "docs", "models.md"))
        self.assertIn(prices.checked(), page)
        rows = re.findall(r"^\| `([^`]+)` \| (\w+) \| [^|]+\| \$([\d.]+) \| \$([\d.]+) \|$",
                          page, re.M)
        self.assertGreater(len(rows), 8)
        for model, vendor, cold, warm in rows:
            price = prices.lookup(vendor, model)
            self.assertIsNotNone(price, model)
            self.assertEqual(f"{price.cost(300_000, 10_000):.2f}", cold, model)
            self.assertEqual(f"{price.cost(300_000, 10_000, 240_000):.2f}", warm, model)


class Layout(unittest.TestCase):
    def test_top_level_is_what_the_design_names(self):
        try:
            listed = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True,
                                    text=True, check=True).stdout.splitlines()
        except (OSError, subprocess.CalledProcessError):
            self.skipTest("not a git checkout")
        tracked = {path.split("/", 1)[0] for path in listed
                   if os.path.lexists(os.path.join(REPO_ROOT, path))}
        self.assertEqual(sorted(tracked - TOP_LEVEL), [])
        self.assertFalse(os.path.exists(os.path.join(REPO_ROOT, "bench")))
        self.assertFalse(os.path.exists(os.path.join(REPO_ROOT, "tools")))


if __name__ == "__main__":
    unittest.main()
