"""Flags: exact names only, `golem help`, and every mistake one `golem:` line and exit 2,
found before anything runs (no baseline, no model call, no file written)."""

from __future__ import annotations

import os

from tests.fixtures import TEST_CMD, GolemCase, git, make_repo, run_cli


class Mistakes(GolemCase):
    def setUp(self):
        super().setUp()
        self.repo = make_repo(self.tmp, git_repo=True)
        self.server = self.serve([])

    def refused(self, *argv: str, says: str) -> None:
        code, out, err = run_cli(list(argv), {"OPENROUTER_API_KEY": "sk-or-test"})
        self.assertEqual(code, 2, err)
        self.assertEqual(out, "")
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertTrue(err.startswith("golem: "), err)
        self.assertIn(says, err)

    def test_abbreviations_are_unknown_flags(self):
        for short, full in (("-d", "-dir"), ("--di", "-dir"), ("-pat", "-patch"),
                            ("-ste", "-steps")):
            with self.subTest(short=short):
                self.refused("fix", short, self.repo, says=f"unknown flag {short}")
        self.refused("fix", "-dri", ".", says="did you mean -dir?")

    def test_bad_values(self):
        fix = ["fix", "-dir", self.repo, "-test", TEST_CMD]
        for flag, value, says in (("-cost", "nan", "finite"), ("-cost", "inf", "finite"),
                                  ("-cost", "-1", "finite"), ("-steps", "1.5", "whole"),
                                  ("-steps", "-3", "0 or more"), ("-max-tokens", "-5", "1 or more"),
                                  ("-max-tokens", "0", "1 or more"), ("-wall", "soon", "duration"),
                                  ("-test", "", "command"), ("-test", "   ", "command"),
                                  ("-sandbox", "maybe", "choose one of"),
                                  ("-color", "purple", "choose one of"),
                                  ("-price", "3", "IN,OUT"), ("-price", "nan,1", "finite"),
                                  ("-allow", "/bin/sh", "bare program name"),
                                  ("-provider", "nosuch", "unknown provider")):
            with self.subTest(flag=flag, value=value):
                self.refused(*fix, flag, value, says=flag)
                self.refused(*fix, flag, value, says=says)
        self.refused("run", "-dir", self.repo, "-goal", " ", says="-goal")

    def test_read_only_commands_refuse_writing_flags(self):
        self.refused("ask", "-allow", "ls", "what?", says="-allow does not apply to golem ask")
        self.refused("ask", "-patch", "x.diff", "what?", says="it changes no files")
        self.refused("ask", "-test", "true", "what?", says="it runs no tests")
        self.refused("runs", "-force", says="-force is not a flag of golem runs; golem undo "
                                            "takes it")
        self.refused("config", "-steps", "3", says="-steps is not a flag of golem config; "
                                                   "golem fix, run, ask take it")

    def test_each_refusal_says_what_is_true(self):
        fix = ["fix", "-dir", self.repo, "-test", TEST_CMD]
        self.refused("fix", "-goal", "x", says="for a free-form goal use golem run -goal")
        self.refused("run", "-goal", "y", "-patch", "x", says="golem undo puts them back")
        self.refused("fix", "-base", "HEAD", says="golem verify takes it")
        self.refused("ask", says="golem ask needs a QUESTION")
        self.refused(*fix, "-models", "a,b", says="add -attempts N")
        self.refused(*fix, "-quiet", "-verbose", says="contradict each other")
        self.refused(*fix, "-allow", "nosuchprog-golem", says="no program 'nosuchprog-golem'")
        for flag in ("-patch", "-result", "-trace"):
            self.refused(*fix, flag, "/proc/golem-x.out", says=f"{flag} /proc/golem-x.out: "
                                                              "cannot write a file in /proc")

    def test_unknown_command_flag_and_argument(self):
        self.refused("fxi", says="did you mean 'fix'?")
        self.refused("-nosuch", says="unknown flag -nosuch for golem")
        self.refused("tools", "extra", says="takes no argument 'extra'")
        self.refused("help", "fxi", says="did you mean 'fix'?")
        self.refused("run", "-dir", self.repo, says="golem run needs -goal")

    def test_verify_names_the_revision_before_anything_runs(self):
        self.refused("verify", "-dir", self.repo, "-test", TEST_CMD, "-base", "nosuchrev",
                     says="-base 'nosuchrev' is not a commit")
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "state")))
        plain = make_repo(self.tmp, name="not-git")
        self.refused("verify", "-dir", plain, "-test", TEST_CMD, "-base", "HEAD",
                     says="needs a git checkout")

    def test_nothing_ran_and_nothing_was_written(self):
        self.refused("fix", "-dir", self.repo, "-test", TEST_CMD, "-provider", "openai",
                     "-base-url", self.server.url, "-cost", "nan", "-trace", self.trace,
                     says="-cost")
        self.assertEqual(self.server.requests, [])
        self.assertFalse(os.path.exists(self.trace))
        self.assertEqual(git(self.repo, "status", "--porcelain"), "")


class Help(GolemCase):
    def test_help_forms_agree(self):
        for topic in ("fix", "demo", "runs", "config"):
            with self.subTest(topic=topic):
                code, by_help, _ = run_cli(["help", topic])
                self.assertEqual(code, 0)
                code, by_flag, _ = run_cli([topic, "--help"])
                self.assertEqual(code, 0)
                code, by_dash, _ = run_cli([topic, "-help"])
                self.assertEqual((by_help, by_flag), (by_dash, by_dash))
                self.assertIn(f"usage: golem {topic}", by_help)
        code, top, _ = run_cli(["help"])
        self.assertEqual(code, 0)
        code, dash, _ = run_cli(["-help"])
        self.assertEqual((code, dash), (0, top))

    def test_top_help_points_to_the_demo_and_the_reference(self):
        code, out, _ = run_cli(["--help"])
        self.assertIn("golem demo", out)
        self.assertIn("golem help cli", out)
        for command in ("demo", "runs", "config", "help", "verify", "undo"):
            self.assertIn(command, out)
        code, out, _ = run_cli(["fix", "--help"])
        self.assertIn("golem demo", out)
        self.assertNotIn("examples/broken-calculator", out)
