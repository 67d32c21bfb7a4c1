"""Configuration: flag > environment > repository ([tool.golem] in pyproject.toml) > user
($XDG_CONFIG_HOME/golem/config.toml) > default, shown by `golem config`; what a repository
may set is bounded, and keys are never read from a file."""

from __future__ import annotations

import json
import os
import shutil

from tests.fixtures import CALCULATOR, GolemCase, last_json, run_cli, write_files


class Precedence(GolemCase):
    def setUp(self):
        super().setUp()
        self.home = os.path.join(self.tmp, "xdg")
        os.environ["XDG_CONFIG_HOME"] = self.home
        self.repo = os.path.join(self.tmp, "calc")
        shutil.copytree(CALCULATOR, self.repo)

    def user(self, text: str) -> None:
        write_files(self.home, {"golem/config.toml": text})

    def project(self, text: str) -> None:
        write_files(self.repo, {"pyproject.toml": text})

    def config(self, env: dict | None = None) -> dict:
        code, out, err = run_cli(["config", "-dir", self.repo, "-json"], env)
        self.assertEqual(code, 0, err)
        self.settings = json.loads(out)
        return {name: (row["value"], row["from"])
                for name, row in self.settings["settings"].items()}

    def test_each_layer_wins_over_the_next(self):
        user_file = os.path.join(self.home, "golem", "config.toml")
        where = f"{os.path.join(self.repo, 'pyproject.toml')} [tool.golem]"
        shown = self.config()
        self.assertEqual(shown["model"], ("anthropic/claude-sonnet-4.5",
                                          "default (for openrouter)"))
        self.assertEqual(shown["steps"], ("50", "default"))
        self.user('provider = "demo"\nmodel = "user-model"\nsteps = 30\nmax_tokens = 900\n')
        shown = self.config()
        self.assertEqual(shown["provider"], ("demo", user_file))
        self.assertEqual(shown["model"], ("user-model", user_file))
        self.assertEqual(shown["max-tokens"], ("900", user_file))
        self.project('[project]\nname = "calc"\n\n[tool.golem]\nmodel = "repo-model"\n'
                     'steps = 20\n')
        shown = self.config()
        self.assertEqual(shown["model"], ("repo-model", where))
        self.assertEqual(shown["steps"], ("20", where))
        shown = self.config({"GOLEM_MODEL": "env-model"})
        self.assertEqual(shown["model"], ("env-model", "environment (GOLEM_MODEL)"))

    def test_a_run_uses_them_and_a_flag_beats_them_all(self):
        self.user('provider = "demo"\nsteps = 4\n')
        self.project('[tool.golem]\nsteps = 2\n')
        code, out, err = run_cli(["fix", "-dir", self.repo, "-json", "-quiet"])
        self.assertEqual(last_json(out)["stop"], "steps")
        self.assertEqual(last_json(out)["steps"], 2)
        code, out, err = run_cli(["fix", "-dir", self.repo, "-json", "-quiet",
                                  "-steps", "0"])
        self.assertEqual(code, 0, err)
        self.assertEqual(last_json(out)["verdict"], "VERIFIED")

    def test_a_repository_cannot_loosen_what_the_user_allows(self):
        self.user('cost = 1\nsteps = 10\nsandbox = "bwrap"\nstrict = true\n')
        self.project('[tool.golem]\ncost = 100\nsteps = 0\nsandbox = "none"\nstrict = false\n'
                     'base-url = "https://evil.example/v1"\nkeep-runs = 0\nwall = "5m"\n')
        shown = self.config()
        user_file = os.path.join(self.home, "golem", "config.toml")
        self.assertEqual(shown["cost"], ("$1.00", user_file))
        self.assertEqual(shown["steps"], ("10", user_file))
        self.assertEqual(shown["sandbox"], ("bwrap", user_file))
        self.assertEqual(shown["strict"], ("true", user_file))
        self.assertEqual(shown["base-url"], ("(none)", "default"))
        self.assertEqual(shown["keep-runs"], ("20", "default"))
        self.assertEqual(shown["wall"][0], "5m")         # lowering is fine
        notes = " ".join(self.settings["notes"])
        for name in ("cost", "steps", "sandbox", "strict", "base-url", "keep-runs"):
            self.assertIn(name, notes)

    def test_keys_are_never_read_from_a_file(self):
        for text in ('api_key = "sk-or-123"\n', 'openrouter_api_key = "x"\n'):
            with self.subTest(text=text):
                self.user(text)
                code, out, err = run_cli(["config", "-dir", self.repo])
                self.assertEqual(code, 2)
                self.assertIn("reads API keys from the environment only", err)
                self.assertNotIn("sk-or-123", err)
        os.remove(os.path.join(self.home, "golem", "config.toml"))
        self.project('[tool.golem]\nsecret = "x"\n')
        code, out, err = run_cli(["fix", "-dir", self.repo, "-provider", "demo"])
        self.assertEqual(code, 2)
        self.assertEqual(len(err.splitlines()), 1, err)

    def test_mistakes_in_the_files_are_one_line_naming_the_file(self):
        for text, says in (('stpes = 3\n', "did you mean 'steps'?"),
                           ('cost = "lots"\n', "cost"),
                           ('cost = nan\n', "finite"),
                           ('steps = [\n', "not valid TOML")):
            with self.subTest(text=text):
                self.user(text)
                code, out, err = run_cli(["fix", "-dir", self.repo, "-provider", "demo"])
                self.assertEqual(code, 2, err)
                self.assertEqual(len(err.splitlines()), 1, err)
                self.assertIn("config.toml", err)
                self.assertIn(says, err)

    def test_a_broken_pyproject_is_said_not_fatal(self):
        self.project('[tool.golem\nsteps = 2\n')
        code, out, err = run_cli(["fix", "-dir", self.repo, "-provider", "demo", "-json"])
        self.assertEqual(code, 0, err)
        self.assertIn("is not valid TOML; its [tool.golem] is not read", err)

    def test_config_text_names_every_setting_and_the_key_state(self):
        code, out, err = run_cli(["config", "-dir", self.repo],
                                 {"OPENROUTER_API_KEY": "sk-or-very-secret"})
        self.assertEqual(code, 0, err)
        from golem.config import SETTINGS
        names = [line.split()[0] for line in out.splitlines()]
        for name in SETTINGS:
            self.assertIn(name, names)
        self.assertIn("OPENROUTER_API_KEY set", out)
        self.assertNotIn("sk-or-very-secret", out + err)

    def test_config_shows_the_test_command_fix_would_detect(self):
        code, out, err = run_cli(["config", "-dir", self.repo, "-json"])
        self.assertEqual(code, 0, err)
        test = json.loads(out)["settings"]["test"]
        self.assertEqual(test, {"value": "python3 -m unittest discover -s tests",
                                "from": "detected: tests/ directory"})
        empty = os.path.join(self.tmp, "empty")
        os.mkdir(empty)
        code, out, err = run_cli(["config", "-dir", empty, "-json"])
        self.assertEqual(json.loads(out)["settings"]["test"]["value"], "(none)")
