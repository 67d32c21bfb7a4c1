"""The runs golem keeps: `golem run` is undoable like `fix`, `golem runs` lists them,
snapshots share unchanged content between runs (one store, by SHA-256), and the retention
policy (keep-runs, keep-size) prunes old runs by itself and on `golem runs -prune` without
ever breaking the undo of a run it keeps."""

from __future__ import annotations

import hashlib
import json
import os
import time

from tests.fixtures import (BUGGY, BUGGY_CALC, FIX_EDIT, FIXED_CALC, GolemCase, last_json,
                            make_repo, read, run_cli, write_files)
from tests.provider_server import chat

BIG = "".join(f"line {i:07d} of a large file that no run changes\n" for i in range(40_000))


class Runs(GolemCase):
    def setUp(self):
        super().setUp()
        self.home = os.path.join(self.tmp, "xdg")
        os.environ["XDG_CONFIG_HOME"] = self.home
        self.state = os.environ["GOLEM_STATE_DIR"]

    def policy(self, text: str) -> None:
        write_files(self.home, {"golem/config.toml": text})

    def goal(self, repo: str, *extra: str) -> dict:
        server = self.serve([chat(tool_calls=[FIX_EDIT]), chat("add adds now.")])
        code, out, err = run_cli(["run", "-dir", repo, "-goal", "make add add",
                                  "-provider", "openai", "-base-url", server.url,
                                  "-sandbox", "none", "-json", *extra])
        self.assertEqual(code, 0, err)
        return last_json(out)

    def listed(self) -> list[dict]:
        code, out, err = run_cli(["runs", "-json"])
        self.assertEqual(code, 0, err)
        return json.loads(out)

    def store(self) -> set[str]:
        path = os.path.join(self.state, "store")
        return set(os.listdir(path)) if os.path.isdir(path) else set()

    def age_store(self) -> None:
        """Make every stored file older than the grace period a fresh one has."""
        old = time.time() - 7200
        for name in self.store():
            os.utime(os.path.join(self.state, "store", name), (old, old))

    def test_run_can_be_undone_with_the_uncommitted_work_before_it(self):
        repo = make_repo(self.tmp, {**BUGGY, "notes.txt": "my own unsaved notes\n"})
        report = self.goal(repo)
        self.assertTrue(report["run_id"])
        self.assertEqual(report["changed_files"], ["calc.py"])
        self.assertEqual(read(os.path.join(repo, "calc.py")), FIXED_CALC)
        code, out, err = run_cli(["undo", "-dir", repo])
        self.assertEqual(code, 0, err)
        self.assertIn(f"undid run {report['run_id']}", out)
        self.assertEqual(read(os.path.join(repo, "calc.py")), BUGGY_CALC)
        self.assertEqual(read(os.path.join(repo, "notes.txt")), "my own unsaved notes\n")
        code, out, err = run_cli(["undo", "-dir", repo])
        self.assertEqual(code, 2)
        self.assertIn("no run to undo", err)

    def test_runs_lists_fix_and_run_newest_first(self):
        repo = make_repo(self.tmp)
        code, out, err = run_cli(["fix", "-dir", repo, "-provider", "demo", "-json",
                                  "-test", "python3 -m unittest discover -s tests"])
        fixed = last_json(out)
        write_files(repo, {"calc.py": BUGGY_CALC})
        ran = self.goal(repo)
        rows = self.listed()
        self.assertEqual([r["id"] for r in rows], [ran["run_id"], fixed["run_id"]])
        self.assertEqual([r["command"] for r in rows], ["run", "fix"])
        self.assertEqual(rows[0]["verdict"], "answered")
        self.assertEqual(rows[1]["verdict"], fixed["verdict"])
        self.assertEqual({r["workspace"] for r in rows}, {repo})
        self.assertTrue(all(r["size"] > 0 for r in rows[1:]))
        code, out, err = run_cli(["runs"])
        header, first, second = out.splitlines()
        self.assertEqual(header.split(), ["ID", "WORKSPACE", "STARTED", "COMMAND", "VERDICT",
                                          "SIZE"])
        self.assertTrue(first.startswith(ran["run_id"]))
        self.assertIn("keeping the newest 20 run(s) and at most 1 GiB", err)

    def test_a_second_run_stores_only_what_changed(self):
        repo = make_repo(self.tmp, {**BUGGY, "data/big.txt": BIG})
        self.goal(repo)
        first = self.store()
        self.assertIn(hashlib.sha256(BIG.encode()).hexdigest(), first)
        write_files(repo, {"calc.py": BUGGY_CALC})
        self.goal(repo)
        second = self.store()
        # the snapshot before the second run differs from the first's only in calc.py,
        # whose buggy content is stored already: nothing new at all
        self.assertEqual(second, first)
        for run in os.listdir(os.path.join(self.state, "runs")):
            self.assertFalse(os.path.exists(os.path.join(self.state, "runs", run, "store")))
        sizes = sum(os.path.getsize(os.path.join(self.state, "store", n)) for n in second)
        self.assertLess(sizes, len(BIG) * 1.5)
        rows = self.listed()
        # removing either run alone frees little: the big file is shared
        self.assertTrue(all(r["size"] < len(BIG) / 2 for r in rows), rows)

    def test_automatic_retention_keeps_the_newest_runs(self):
        self.policy("keep-runs = 2\n")
        repo = make_repo(self.tmp)
        ids = []
        for _ in range(4):
            write_files(repo, {"calc.py": BUGGY_CALC})
            ids.append(self.goal(repo)["run_id"])
        self.assertEqual([r["id"] for r in self.listed()], ids[:1:-1])
        code, out, err = run_cli(["undo", ids[0]])
        self.assertEqual(code, 2)
        self.assertIn(f"no run {ids[0]!r}", err)
        code, out, err = run_cli(["undo", "-dir", repo])      # the newest still undoes
        self.assertEqual(code, 0, err)
        self.assertEqual(read(os.path.join(repo, "calc.py")), BUGGY_CALC)

    def test_prune_removes_old_runs_and_their_unshared_content(self):
        repos = [make_repo(self.tmp, {**BUGGY, "own.txt": f"only in repo {i}\n" * 500},
                           name=f"repo{i}") for i in range(3)]
        ids = [self.goal(repo)["run_id"] for repo in repos]
        before = self.store()
        self.age_store()
        self.policy("keep-runs = 1\n")
        code, out, err = run_cli(["runs", "-prune", "-json"])
        self.assertEqual(code, 0, err)
        self.assertEqual([r["id"] for r in json.loads(out)], [ids[2]])
        self.assertIn("pruned 2 run(s)", err)
        after = self.store()
        self.assertLess(len(after), len(before))
        # what the kept run needs is all still there: its undo works
        write_files(repos[2], {"later.txt": "x"})
        code, out, err = run_cli(["undo", "-dir", repos[2]])
        self.assertEqual(code, 0, err)
        self.assertEqual(read(os.path.join(repos[2], "calc.py")), BUGGY_CALC)
        self.assertEqual(read(os.path.join(repos[2], "own.txt")), "only in repo 2\n" * 500)

    def test_keep_size_prunes_all_but_the_newest(self):
        repo = make_repo(self.tmp)
        for _ in range(3):
            write_files(repo, {"calc.py": BUGGY_CALC})
            newest = self.goal(repo)["run_id"]
        self.policy('keep-size = "1KB"\n')
        code, out, err = run_cli(["runs", "-prune", "-json"])
        self.assertEqual([r["id"] for r in json.loads(out)], [newest])

    def test_an_unfinished_run_of_another_golem_is_never_pruned(self):
        repo = make_repo(self.tmp)
        from golem.workflow import runs
        running, _ = runs.new_run(repo, "fix")          # started, not ended
        for _ in range(2):
            write_files(repo, {"calc.py": BUGGY_CALC})
            self.goal(repo)
        self.policy("keep-runs = 1\n")
        code, out, err = run_cli(["runs", "-prune", "-json"])
        self.assertIn(running, [r["id"] for r in json.loads(out)])
        self.assertEqual(len(json.loads(out)), 2)
