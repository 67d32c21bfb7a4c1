"""The runs golem keeps: `golem run` is undoable like `fix`, `golem runs` lists them,
snapshots share unchanged content between runs (one store, by SHA-256), and the retention
policy (keep-runs, keep-size) prunes old runs by itself and on `golem runs -prune` without
ever breaking the undo of a run it keeps."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time

from tests.fixtures import (BUGGY, BUGGY_CALC, FIX_EDIT, FIXED_CALC, REPO_ROOT, GolemCase,
                            last_json, make_repo, read, run_cli, write_files)
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

    def another_golem(self, repo: str) -> tuple[subprocess.Popen, str]:
        """A run begun by another golem process, still going until the process ends."""
        proc = subprocess.Popen(
            [sys.executable, "-c", "import sys\nfrom golem.workflow import runs\n"
             "print(runs.new_run(sys.argv[1])[0], flush=True)\nsys.stdin.read()", repo],
            cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.stdout.close)
        self.addCleanup(proc.stdin.close)
        return proc, proc.stdout.readline().strip()

    def test_an_unfinished_run_of_another_golem_is_never_pruned(self):
        repo = make_repo(self.tmp)
        proc, running = self.another_golem(repo)
        for _ in range(2):
            write_files(repo, {"calc.py": BUGGY_CALC})
            self.goal(repo)
        self.policy("keep-runs = 1\n")
        code, out, err = run_cli(["runs", "-prune", "-json"])
        rows = {r["id"]: r for r in json.loads(out)}
        self.assertIn(running, rows)
        self.assertEqual(rows[running]["verdict"], "(running)")
        self.assertEqual(len(rows), 2)

    def test_a_run_whose_process_died_is_interrupted_and_pruned_like_any_other(self):
        repo = make_repo(self.tmp)
        proc, killed = self.another_golem(repo)
        os.kill(proc.pid, signal.SIGKILL)       # no chance to record an end
        proc.wait()
        rows = {r["id"]: r for r in self.listed()}
        self.assertEqual(rows[killed]["verdict"], "(interrupted)")
        write_files(repo, {"calc.py": BUGGY_CALC})
        newest = self.goal(repo)["run_id"]
        self.policy("keep-runs = 1\n")
        code, out, err = run_cli(["runs", "-prune", "-json"])
        self.assertEqual([r["id"] for r in json.loads(out)], [newest])
        self.assertIn("pruned 1 run(s)", err)

    def test_undo_is_refused_while_the_run_is_still_going(self):
        repo = make_repo(self.tmp)
        proc, running = self.another_golem(repo)
        code, out, err = run_cli(["undo", running])
        self.assertEqual(code, 2)
        self.assertIn(f"run {running} is still going", err)
        proc.stdin.close()
        proc.wait()
        code, out, err = run_cli(["undo", running])
        self.assertNotIn("still going", err)

    def test_undo_of_a_file_already_put_back_by_hand_is_done_not_kept(self):
        repo = make_repo(self.tmp)
        report = self.goal(repo)
        write_files(repo, {"calc.py": BUGGY_CALC})      # the user reverted it already
        code, out, err = run_cli(["undo", "-dir", repo])
        self.assertEqual(code, 0, err)
        self.assertNotIn("kept", err)
        self.assertIn(f"undid run {report['run_id']}: 0 path(s) put back", out)
        self.assertEqual(read(os.path.join(repo, "calc.py")), BUGGY_CALC)

    def test_runs_counts_and_prune_frees_everything_golem_keeps(self):
        repos = [make_repo(self.tmp, {**BUGGY, "own.txt": f"only in repo {i}\n" * 5000},
                           name=f"repo{i}") for i in range(2)]
        for repo in repos:      # each fix keeps a bytecode cache for its workspace
            server = self.serve([chat(tool_calls=[FIX_EDIT]), chat("add adds now.")])
            code, out, err, report = self.fix(repo, server)
            self.assertEqual(report["verdict"], "VERIFIED", err)
        caches = os.listdir(os.path.join(self.state, "pycache"))
        self.assertEqual(len([n for n in caches if n.endswith(".owner")]), 2, caches)
        # a stored file no run refers to, as a run killed mid-snapshot leaves
        orphan = os.path.join(self.state, "store", "0" * 64)
        write_files(os.path.dirname(orphan), {os.path.basename(orphan): "x" * 300_000})
        code, out, err = run_cli(["runs"])
        self.assertEqual(code, 0, err)
        self.assertRegex(err, r"content store [\d.]+ [KM]i?B of which [\d.]+ [KM]i?B no run "
                              r"refers to, bytecode cache [\d.]+ [KM]i?B")
        self.policy("keep-runs = 1\n")
        code, out, err = run_cli(["runs", "-prune", "-json"])
        self.assertEqual(code, 0, err)
        self.assertEqual(len(json.loads(out)), 1)
        self.assertFalse(os.path.exists(orphan))      # no run is going: no grace needed
        kept = json.loads(out)[0]["workspace"]
        left = os.listdir(os.path.join(self.state, "pycache"))
        owners = [json.loads(read(os.path.join(self.state, "pycache", n)))["workspace"]
                  for n in left if n.endswith(".owner")]
        self.assertEqual(set(owners), {kept})      # the forgotten workspace's cache is gone
        self.assertEqual(len([n for n in left if not n.endswith((".owner", ".state"))]),
                         len(owners))
