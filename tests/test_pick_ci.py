"""The CI path as a user pastes it: docs/ci.md's workflows run step by step, and `golem pick`.

`WorkflowRun` reads a workflow out of docs/ci.md (a small parser for the YAML those blocks
use), then runs each job's shell steps in order with bash, as a GitHub runner would: the
`${{ }}` expressions and `if:` conditions evaluated, the variables a runner sets
(`GITHUB_ACTIONS`, `RUNNER_TEMP`, `GITHUB_STEP_SUMMARY`, ...), `actions/checkout` a fresh
clone, `setup-python` the interpreter running these tests, the artifact actions a shared
directory. Models are scripted (a loopback server routes each request by the model it
names); `sudo` is a no-op, as the packages it installs are this machine's.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from tests.fixtures import REPO_ROOT, GolemCase, git, run_cli, write_files
from tests.provider_server import ProviderServer
from tests.test_attempts import CALC, FILES, FIX_ADD, TESTS, WEAKEN, script

CI_DOC = os.path.join(REPO_ROOT, "docs", "ci.md")
UNITTEST = ".venv/bin/python -m unittest discover -s tests"

# the honest fix adds a module and uses it: the applied tree must hold the new file
HONEST = script(FIX_ADD,
                ("write_file", {"path": "ops/product.py",
                                "content": "def product(a, b):\n    return a * b\n"}),
                ("write_file", {"path": "ops/__init__.py", "content": ""}),
                ("edit_file", {"path": "calc.py",
                               "old_string": "def mul(a, b):\n    return a + b",
                               "new_string": "def mul(a, b):\n    from ops.product import "
                                             "product\n    return product(a, b)"}))


# --- a YAML reader for the shapes the documented workflows use -----------------------------

def _strip_comment(text: str) -> str:
    quote = None
    for i, char in enumerate(text):
        if quote:
            quote = None if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char == "#" and (i == 0 or text[i - 1].isspace()):
            return text[:i].rstrip()
    return text.rstrip()


def _scalar(text: str):
    text = _strip_comment(text).strip()
    if text.startswith('"'):
        return json.loads(text)
    if text.startswith("'"):
        return text[1:-1].replace("''", "'")
    if text.startswith("[") and text.endswith("]"):
        return [_scalar(part) for part in text[1:-1].split(",") if part.strip()]
    if text in ("true", "false"):
        return text == "true"
    if text in ("", "null", "~"):
        return None
    return int(text) if re.fullmatch(r"-?\d+", text) else text


_KEY = re.compile(r"([A-Za-z_][\w.\-]*):(?:\s+(.*))?$")


class _Yaml:
    def __init__(self, text: str):
        self.lines = text.split("\n")

    def _indent(self, i: int) -> int:
        return len(self.lines[i]) - len(self.lines[i].lstrip(" "))

    def _skip(self, i: int) -> int:
        while i < len(self.lines) and not _strip_comment(self.lines[i]).strip():
            i += 1
        return i

    def node(self, i: int, least: int):
        i = self._skip(i)
        if i >= len(self.lines) or self._indent(i) < least:
            return None, i
        indent = self._indent(i)
        if self.lines[i][indent:].startswith("-"):
            return self.sequence(i, indent)
        return self.mapping(i, indent)

    def sequence(self, i: int, indent: int):
        items = []
        while True:
            i = self._skip(i)
            if i >= len(self.lines) or self._indent(i) != indent or \
                    not self.lines[i][indent:].startswith("-"):
                return items, i
            rest = self.lines[i][indent + 1:].lstrip(" ")
            self.lines[i] = " " * (indent + 2) + rest
            if not _strip_comment(rest).strip():
                item, i = self.node(i + 1, indent + 1)
            elif _KEY.match(rest):
                item, i = self.mapping(i, indent + 2)
            else:
                item, i = _scalar(rest), i + 1
            items.append(item)

    def mapping(self, i: int, indent: int):
        found = {}
        while True:
            i = self._skip(i)
            if i >= len(self.lines) or self._indent(i) != indent or \
                    self.lines[i][indent:].startswith("-"):
                if i < len(self.lines) and self._indent(i) > indent:
                    raise ValueError(f"line {i + 1}: unexpected indentation")
                return found, i
            matched = _KEY.match(self.lines[i][indent:])
            if not matched:
                raise ValueError(f"line {i + 1}: not a key: {self.lines[i]!r}")
            key, rest = matched.group(1), _strip_comment(matched.group(2) or "").strip()
            if rest[:1] in ("|", ">"):
                found[key], i = self.block(i + 1, indent, folded=rest[0] == ">")
            elif rest:
                found[key], i = _scalar(rest), i + 1
            else:
                after = self._skip(i + 1)
                same_level_list = after < len(self.lines) and self._indent(after) == indent \
                    and self.lines[after][indent:].startswith("- ")
                found[key], i = self.node(i + 1, indent if same_level_list else indent + 1)

    def block(self, i: int, indent: int, folded: bool):
        rows = []
        while i < len(self.lines) and (not self.lines[i].strip() or self._indent(i) > indent):
            rows.append(self.lines[i])
            i += 1
        while rows and not rows[-1].strip():
            rows.pop()
        cut = min(len(r) - len(r.lstrip(" ")) for r in rows if r.strip())
        rows = [r[cut:] for r in rows]
        if not folded:
            return "\n".join(rows) + "\n", i
        return re.sub(r"(?<!\n)\n(?!\n)", " ", "\n".join(rows)) + "\n", i


def load_yaml(text: str):
    """The YAML document `text`, for block mappings and sequences, plain, quoted, flow-list
    and `|`/`>` scalars; anything else is a ValueError."""
    value, end = _Yaml(text).node(0, 0)
    return value


def documented_workflow(filename: str) -> dict:
    """The workflow docs/ci.md shows under the comment `# .github/workflows/FILENAME`."""
    with open(CI_DOC, encoding="utf-8") as handle:
        blocks = re.findall(r"```yaml\n(.*?)```", handle.read(), re.S)
    for block in blocks:
        if block.startswith(f"# .github/workflows/{filename}\n"):
            return load_yaml(block)
    raise AssertionError(f"docs/ci.md shows no .github/workflows/{filename}")


# --- GitHub expressions ---------------------------------------------------------------------

_TOKEN = re.compile(r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<op>&&|\|\||==|!=|!|\(|\))|"
                    r"(?P<num>\d+)|(?P<name>[A-Za-z_][\w.\-*]*(?:\(\))?))")
_STATUS = ("success()", "failure()", "always()", "cancelled()")


def evaluate(expr: str, context: dict, failed: bool, condition: bool = False):
    """A GitHub expression: contexts looked up, status functions from `failed`; a condition
    without a status function is `success() && (...)`, as on GitHub."""
    expr = expr.strip()
    if expr.startswith("${{") and expr.endswith("}}"):
        expr = expr[3:-2].strip()
    out, pos = [], 0
    while pos < len(expr):
        matched = _TOKEN.match(expr, pos)
        if not matched or matched.end() == pos:
            raise ValueError(f"cannot read the expression {expr!r} at {pos}")
        pos = matched.end()
        if matched.group("str"):
            out.append(repr(matched.group("str")[1:-1].replace("''", "'")))
        elif matched.group("op"):
            out.append({"&&": " and ", "||": " or ", "!": " not "}.get(matched.group("op"),
                                                                     matched.group("op")))
        elif matched.group("num"):
            out.append(matched.group("num"))
        else:
            name = matched.group("name")
            status = {"success()": not failed, "failure()": failed, "always()": True,
                      "cancelled()": False}
            if name in status:
                out.append(repr(status[name]))
            else:
                value = context
                for part in name.split("."):
                    value = value.get(part, "") if isinstance(value, dict) else ""
                out.append(repr(value))
    value = eval("".join(out), {"__builtins__": {}}, {})  # noqa: S307 (our own tokens)
    if condition and not any(s in expr for s in _STATUS):
        return (not failed) and bool(value)
    return value


def substitute(text, context: dict):
    """`${{ ... }}` in a value replaced, as the runner does before a step sees it."""
    if not isinstance(text, str):
        return text
    return re.sub(r"\$\{\{(.*?)\}\}",
                  lambda m: str(evaluate(m.group(1), context, False)), text)


# --- a runner -------------------------------------------------------------------------------

class WorkflowRun:
    """One workflow run: jobs in the order `needs` gives, each on its own fresh runner."""

    def __init__(self, workflow: dict, origin: str, tmp: str, env: dict[str, str],
                 replace: dict[str, str] | None = None):
        self.workflow, self.origin, self.tmp = workflow, origin, tmp
        self.env = env              # the machine's environment plus the test's settings
        self.replace = replace or {}    # step name -> the script run instead (job-qualified)
        self.artifacts = os.path.join(tmp, "artifacts")
        os.makedirs(self.artifacts)
        self.sha = git(origin, "rev-parse", "HEAD").strip()
        self.results: dict[str, str] = {}
        self.runs: dict[str, list[dict]] = {}      # job -> one record per matrix entry
        shims = os.path.join(tmp, "shims")
        os.makedirs(shims)
        for name in ("python", "python3"):
            os.symlink(sys.executable, os.path.join(shims, name))
        with open(os.path.join(shims, "sudo"), "w", encoding="utf-8") as handle:
            handle.write("#!/bin/sh\nexit 0\n")
        os.chmod(os.path.join(shims, "sudo"), 0o755)
        self.path = shims + os.pathsep + env.get("PATH", os.defpath)

    def run_job(self, job_id: str) -> str:
        job = self.workflow["jobs"][job_id]
        needs = job.get("needs") or []
        needs = [needs] if isinstance(needs, str) else needs
        context = {"needs": {n: {"result": self.results[n]} for n in needs},
                   "secrets": {}, "github": {"sha": self.sha}}
        failed = any(self.results[n] != "success" for n in needs)
        if "if" in job and not evaluate(job["if"], context, failed, condition=True):
            self.results[job_id] = "skipped"
            return "skipped"
        if not ("if" in job) and failed:
            self.results[job_id] = "skipped"
            return "skipped"
        matrix = (job.get("strategy") or {}).get("matrix") or {}
        entries = [{}]
        for key, values in matrix.items():
            entries = [{**e, key: v} for e in entries for v in values]
        records = [self._one(job_id, job, entry, context) for entry in entries]
        self.runs[job_id] = records
        result = "failure" if any(r["result"] == "failure" for r in records) else "success"
        self.results[job_id] = result
        return result

    def _one(self, job_id: str, job: dict, matrix: dict, context: dict) -> dict:
        label = job_id + "".join(f"-{v}" for v in matrix.values())
        home = os.path.join(self.tmp, "runners", label)
        temp, workspace = os.path.join(home, "temp"), os.path.join(home, "work", "repo")
        os.makedirs(temp)
        os.makedirs(os.path.dirname(workspace))
        summary = os.path.join(home, "step_summary.md")
        context = {**context, "matrix": matrix, "runner": {"temp": temp, "os": "Linux"},
                   "steps": {}}
        env = {**self.env, "PATH": self.path, "CI": "true", "GITHUB_ACTIONS": "true",
               "RUNNER_TEMP": temp, "RUNNER_OS": "Linux", "GITHUB_WORKSPACE": workspace,
               "GITHUB_SHA": self.sha, "GITHUB_REF": "refs/heads/main",
               "GITHUB_REPOSITORY": "acme/project", "GITHUB_JOB": job_id,
               "GITHUB_STEP_SUMMARY": summary, "GITHUB_ENV": os.path.join(home, "env"),
               "GITHUB_PATH": os.path.join(home, "path"),
               "GITHUB_OUTPUT": os.path.join(home, "output")}
        for key, value in (self.workflow.get("env") or {}).items():
            env[key] = self.env.get(f"WORKFLOW_{key}", substitute(str(value), context))
        record = {"workspace": workspace, "temp": temp, "summary": summary, "steps": [],
                  "matrix": matrix}
        failed = False
        for number, step in enumerate(job["steps"], 1):
            name = step.get("name") or step.get("uses") or step.get("run", "").split("\n")[0]
            name = substitute(name, context)
            if "if" in step and not evaluate(step["if"], context, failed, condition=True) \
                    or "if" not in step and failed:
                outcome, output = "skipped", ""
            elif "uses" in step:
                outcome, output = self._action(step, workspace, context)
            else:
                outcome, output = self._shell(job_id, step, name, workspace, temp, env,
                                              context)
            record["steps"].append({"name": name, "outcome": outcome, "output": output})
            if step.get("id"):
                context["steps"][step["id"]] = {"outcome": outcome, "conclusion": outcome}
            failed = failed or outcome == "failure"
        record["result"] = "failure" if failed else "success"
        return record

    def _shell(self, job_id, step, name, workspace, temp, env, context):
        script = self.replace.get(f"{job_id}: {name}", step["run"])
        script = substitute(script, context)
        path = os.path.join(temp, f"step-{abs(hash(name))}.sh")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(script)
        step_env = {**env, **{k: substitute(str(v), context)
                              for k, v in (step.get("env") or {}).items()}}
        cwd = os.path.join(workspace, step.get("working-directory", "."))
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", path],
                              cwd=cwd, env=step_env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=900)
        return ("success" if done.returncode == 0 else "failure",
                f"exit {done.returncode}\n{done.stdout}\n{done.stderr}")

    def _action(self, step, workspace, context):
        action = step["uses"].partition("@")[0]
        given = {k: substitute(v, context) for k, v in (step.get("with") or {}).items()}
        if action == "actions/checkout":
            subprocess.run(["git", "clone", "-q", self.origin, workspace], check=True)
            git(workspace, "checkout", "-q", "--detach", self.sha)
            return "success", ""
        if action == "actions/setup-python":
            return "success", ""        # `python` on PATH is the interpreter running these
        if action == "actions/upload-artifact":
            source = given["path"].rstrip("/")
            if not os.path.isdir(source) or not os.listdir(source):
                return ("success" if given.get("if-no-files-found") == "ignore"
                        else "failure"), "no files"
            shutil.copytree(source, os.path.join(self.artifacts, given["name"]))
            return "success", ""
        if action == "actions/download-artifact":
            pattern = given.get("pattern") or given.get("name") or "*"
            for name in sorted(os.listdir(self.artifacts)):
                if fnmatch.fnmatch(name, pattern):
                    shutil.copytree(os.path.join(self.artifacts, name),
                                    os.path.join(given["path"], name))
            return "success", ""
        raise AssertionError(f"the test runner does not know {step['uses']}")


# --- layouts --------------------------------------------------------------------------------

def build_pyz(target: str) -> None:
    """golem as the one file docs/ci.md has users commit (`make pyz`)."""
    subprocess.run(["make", "-s", "-C", REPO_ROOT, "pyz", f"PYZ={target}"], check=True,
                   capture_output=True)


def origin_repository(tmp: str, pyz: str, files: dict[str, str] | None = None) -> str:
    """The repository the workflow runs on: the calculator, its (empty) requirements, a
    `.gitignore` naming `.venv`, and golem at `.github/golem.pyz`, committed."""
    root = os.path.join(tmp, "origin")
    os.makedirs(os.path.join(root, ".github"))
    write_files(root, {**(files or FILES), ".gitignore": ".venv/\n",
                       "requirements.txt": "# the project's test dependencies (none)\n"})
    shutil.copy(pyz, os.path.join(root, ".github", "golem.pyz"))
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    return root


def fresh_clone(origin: str, target: str) -> str:
    subprocess.run(["git", "clone", "-q", origin, target], check=True)
    return target


def tree_files(root: str) -> dict[str, bytes]:
    """Every file under `root` but `.git`, `.venv` and bytecode caches: path -> content."""
    found = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in (".git", ".venv", "__pycache__")]
        for name in files:
            full = os.path.join(folder, name)
            with open(full, "rb") as handle:
                found[os.path.relpath(full, root)] = handle.read()
    return found


class DocumentedWorkflowTest(GolemCase):
    """docs/ci.md's workflows, run as pasted on a fresh repository with a `.venv` inside."""

    @classmethod
    def setUpClass(cls):
        cls.build = tempfile.TemporaryDirectory(prefix="golem-pyz-")
        cls.pyz = os.path.join(cls.build.name, "golem.pyz")
        build_pyz(cls.pyz)

    @classmethod
    def tearDownClass(cls):
        cls.build.cleanup()

    def environment(self, server: ProviderServer) -> dict[str, str]:
        """The runner's environment: the machine's PATH, no key, the scripted models, the
        suite of this project in place of the doc's pytest example."""
        return {"PATH": os.environ.get("PATH", os.defpath), "LANG": "C.UTF-8",
                "HOME": os.path.join(self.tmp, "home"),
                "GOLEM_STATE_DIR": os.path.join(self.tmp, "state"),
                "GOLEM_PROVIDER": "openai", "OPENAI_BASE_URL": server.url,
                "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                "WORKFLOW_TEST_CMD": UNITTEST, "WORKFLOW_MODELS": "cheat,half,honest"}

    def attempts_and_pick(self, venv: bool):
        """docs/ci.md's golem-attempts.yml, three attempts (a cheat, half a fix, the honest
        fix that adds a module) and the pick job: the honest fix applied whole."""
        server = self.enterContext(ProviderServer(by_model={
            "cheat": script(FIX_ADD, WEAKEN), "half": script(FIX_ADD), "honest": HONEST}))
        origin = origin_repository(self.tmp, self.pyz)
        workflow = documented_workflow("golem-attempts.yml")
        env = self.environment(server)
        install = "Install the project's test dependencies"
        if venv:
            # the `test` job runs the documented install itself; the other jobs make their
            # `.venv` without pip (offline and quick)
            quick = "python -m venv --without-pip .venv\n"
            replace = {f"{job}: {install}": quick for job in ("attempt", "pick")}
        else:
            replace = {f"{job}: {install}": "true\n" for job in ("test", "attempt", "pick")}
            env["WORKFLOW_TEST_CMD"] = "python3 -m unittest discover -s tests"
        run = WorkflowRun(workflow, origin, self.tmp, env, replace)
        for job in ("test", "attempt", "pick"):
            run.run_job(job)
        steps = lambda job, k=0: {s["name"]: s for s in run.runs[job][k]["steps"]}
        self.assertEqual(run.results["test"], "failure")     # the suite failed: red
        self.assertEqual(steps("test")[install]["outcome"], "success", steps("test")[install])
        self.assertEqual(os.path.isdir(os.path.join(run.runs["pick"][0]["workspace"], ".venv")),
                         venv)
        verdicts = {}
        for k, record in enumerate(run.runs["attempt"]):
            with open(os.path.join(record["temp"], "golem", "result.json")) as handle:
                result = json.load(handle)
            verdicts[record["matrix"]["k"]] = (result["verdict"], record["result"])
            self.assertEqual(result["base"], run.sha)
            with open(record["summary"], encoding="utf-8") as handle:
                self.assertIn(f"golem: {result['verdict']}", handle.read())
        self.assertEqual(verdicts, {1: ("REJECTED", "failure"), 2: ("FAILED", "failure"),
                                    3: ("VERIFIED", "success")})
        pick = run.runs["pick"][0]
        self.assertEqual(run.results["pick"], "success",
                         [s["output"][-3000:] for s in pick["steps"]])
        with open(os.path.join(pick["temp"], "chosen", "picked.json")) as handle:
            picked = json.load(handle)
        self.assertEqual((picked["verdict"], picked["base"]), ("VERIFIED", run.sha))
        self.assertTrue(picked["picked"].endswith("attempt-3/result.json"), picked)
        # the pick job's checkout holds the honest fix, the module it added included
        applied = tree_files(pick["workspace"])
        self.assertEqual(applied["ops/product.py"], b"def product(a, b):\n    return a * b\n")
        self.assertIn(b"return a + b", applied["calc.py"])
        self.assertEqual(applied["tests/test_calc.py"], TESTS.encode())
        # and chosen.patch, applied with git to another fresh clone, makes the same tree
        other = fresh_clone(origin, os.path.join(self.tmp, "reviewer"))
        subprocess.run(["git", "apply", os.path.join(run.artifacts, "chosen", "chosen.patch")],
                       cwd=other, check=True)
        self.assertEqual(tree_files(other), applied)
        done = subprocess.run([sys.executable, "-m", "unittest", "discover", "-s", "tests"],
                              cwd=other, capture_output=True)
        self.assertEqual(done.returncode, 0, done.stderr)

    def test_three_attempts_and_pick_on_a_checkout(self):
        self.attempts_and_pick(venv=False)

    def test_three_attempts_and_pick_on_a_checkout_with_a_venv_inside(self):
        self.attempts_and_pick(venv=True)

    def test_the_suite_job_stays_red_when_golem_verifies_a_fix(self):
        server = self.enterContext(ProviderServer(by_model={"honest": HONEST}))
        origin = origin_repository(self.tmp, self.pyz)
        env = {**self.environment(server), "GOLEM_MODEL": "honest"}
        run = WorkflowRun(documented_workflow("tests.yml"), origin, self.tmp, env,
                          {"test: Install the project's test dependencies":
                           "python -m venv --without-pip .venv\n"})
        self.assertEqual(run.run_job("test"), "failure")
        steps = {s["name"]: s for s in run.runs["test"][0]["steps"]}
        self.assertEqual(steps["Run the tests"]["outcome"], "failure")
        self.assertEqual(steps["Let golem fix it"]["outcome"], "success",
                         steps["Let golem fix it"]["output"][-2000:])
        self.assertEqual(steps["Keep the trace, the report and the patch"]["outcome"],
                         "success")
        self.assertEqual(sorted(os.listdir(os.path.join(run.artifacts, "golem"))),
                         ["fix.patch", "report.html", "result.json", "trace.jsonl"])

    def test_no_documented_step_hides_a_red_suite(self):
        with open(CI_DOC, encoding="utf-8") as handle:
            blocks = "\n".join(re.findall(r"```yaml\n(.*?)```", handle.read(), re.S))
        self.assertNotIn("continue-on-error", blocks)
        self.assertNotRegex(blocks, r"golem\.pyz (fix|pick)[^\n]*(\\\n[^\n]*)*\|\| true")
        self.assertNotIn("git diff >", blocks)
        for name in ("tests.yml", "golem-attempts.yml", "golem-sweep.yml"):
            workflow = documented_workflow(name)
            self.assertIsInstance(workflow["jobs"], dict, name)


# --- golem pick on its own ------------------------------------------------------------------

FIXED_CALC = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
EXTRA = {"docs/notes.txt": "notes\n", "old.txt": "to be removed\n",
         "tools/gen.py": "print('gen')\n"}


class PickTest(GolemCase):
    """`golem pick` on a git checkout: base commits, whole patches, links and binaries."""

    def setUp(self):
        super().setUp()
        self.origin = os.path.join(self.tmp, "origin")
        os.makedirs(self.origin)
        write_files(self.origin, {**FILES, **EXTRA})
        git(self.origin, "init", "-q")
        git(self.origin, "add", "-A")
        git(self.origin, "commit", "-q", "-m", "initial")
        self.head = git(self.origin, "rev-parse", "HEAD").strip()
        self.count = 0

    def made_with_git(self, change) -> str:
        """The patch git writes for what `change(clone)` does to a fresh clone."""
        self.count += 1
        work = fresh_clone(self.origin, os.path.join(self.tmp, f"made{self.count}"))
        change(work)
        git(work, "add", "-A")
        return git(work, "diff", "--cached", "--binary")

    def result(self, patch: str, **fields) -> str:
        """A job's artifacts: a result claiming VERIFIED on this base, its patch beside it."""
        self.count += 1
        folder = os.path.join(self.tmp, "artifacts", f"attempt-{self.count}")
        os.makedirs(folder)
        with open(os.path.join(folder, "fix.patch"), "w", encoding="utf-8") as handle:
            handle.write(patch)
        path = os.path.join(folder, "result.json")
        with open(path, "w", encoding="utf-8") as handle:
            json.dump({"verdict": "VERIFIED", "patch": "fix.patch", "attempt": f"{self.count}/3",
                       "suspicious": [], "cost": 0.0, "base": self.head, **fields}, handle)
        return path

    def pick(self, checkout: str, *args: str):
        code, out, err = run_cli(["pick", "-dir", checkout, "-test", "python3 -m unittest "
                                  "discover -s tests", "-sandbox", "none", "-json", *args])
        return code, (json.loads(out.splitlines()[-1]) if out.strip() else None), err

    def fix(self, work: str) -> None:
        write_files(work, {"calc.py": FIXED_CALC})

    def test_a_result_made_on_another_commit_is_refused_in_one_line(self):
        other = self.result(self.made_with_git(self.fix), base="1" * 40)
        checkout = fresh_clone(self.origin, os.path.join(self.tmp, "checkout"))
        code, report, err = self.pick(checkout, other)
        self.assertEqual((code, report), (2, None), err)
        self.assertEqual(err.strip().splitlines(),
                         [f"golem: {other} was made on commit 111111111111, and {checkout} is "
                          f"at {self.head[:12]}: check out the commit the attempts ran on"])
        unnamed = self.result(self.made_with_git(self.fix), base=None)
        code, report, err = self.pick(checkout, unnamed)
        self.assertEqual(code, 2)
        self.assertIn(f"golem: {unnamed} names no base commit", err)
        self.assertEqual(git(checkout, "status", "--porcelain"), "")
        # on its own base the same patch is picked
        code, report, err = self.pick(checkout, self.result(self.made_with_git(self.fix)))
        self.assertEqual((code, report["verdict"], report["base"]), (0, "VERIFIED", self.head),
                         err)

    def test_the_chosen_patch_carries_added_removed_renamed_files_and_modes(self):
        def change(work):
            self.fix(work)
            write_files(work, {"ops/product.py": "def product(a, b):\n    return a * b\n"})
            os.remove(os.path.join(work, "old.txt"))
            os.rename(os.path.join(work, "docs", "notes.txt"),
                      os.path.join(work, "docs", "notes.md"))
            os.chmod(os.path.join(work, "tools", "gen.py"), 0o755)
        candidate = self.result(self.made_with_git(change))
        checkout = fresh_clone(self.origin, os.path.join(self.tmp, "checkout"))
        chosen = os.path.join(self.tmp, "chosen.patch")
        code, report, err = self.pick(checkout, "-patch", chosen, candidate)
        self.assertEqual((code, report["verdict"], report["chosen_patch"]),
                         (0, "VERIFIED", chosen), err)
        reviewer = fresh_clone(self.origin, os.path.join(self.tmp, "reviewer"))
        subprocess.run(["git", "apply", chosen], cwd=reviewer, check=True)
        self.assertEqual(tree_files(reviewer), tree_files(checkout))
        self.assertNotIn("old.txt", tree_files(reviewer))
        self.assertIn("docs/notes.md", tree_files(reviewer))
        self.assertIn("ops/product.py", tree_files(reviewer))
        for root in (reviewer, checkout):
            self.assertTrue(os.stat(os.path.join(root, "tools", "gen.py")).st_mode & 0o100)

    def test_a_link_leaving_the_repository_is_refused_and_named(self):
        def leaving(work):
            self.fix(work)
            os.makedirs(os.path.join(work, "ledger"))
            os.symlink("/etc/passwd", os.path.join(work, "ledger", "passwd"))
        def climbing(work):
            self.fix(work)
            os.symlink("../../..", os.path.join(work, "docs", "up"))
        bad = self.result(self.made_with_git(leaving), attempt="1/3")
        up = self.result(self.made_with_git(climbing), attempt="2/3")
        inside = lambda work: (self.fix(work), os.symlink("notes.txt", os.path.join(
            work, "docs", "latest")))
        good = self.result(self.made_with_git(inside), attempt="3/3")
        checkout = fresh_clone(self.origin, os.path.join(self.tmp, "checkout"))
        code, report, err = self.pick(checkout, bad, up, good)
        self.assertEqual((code, report["picked"]), (0, good), err)
        why = {c["result"]: c["summary"] for c in report["candidates"]}
        self.assertEqual(why[bad], "FAILED: refused: the patch makes a link that leaves the "
                                   "repository: ledger/passwd -> /etc/passwd")
        self.assertIn("docs/up -> ../../..", why[up])
        lines = [line for line in err.splitlines() if "ledger/passwd -> /etc/passwd" in line]
        self.assertEqual(len(lines), 1, err)
        self.assertFalse(os.path.lexists(os.path.join(checkout, "ledger")))
        self.assertEqual(os.readlink(os.path.join(checkout, "docs", "latest")), "notes.txt")
        code, report, err = self.pick(fresh_clone(self.origin, os.path.join(self.tmp, "c2")),
                                      bad)
        self.assertEqual((code, report["verdict"]), (1, "FAILED"))

    def test_binary_changes_are_named_before_they_are_applied(self):
        blob = bytes(range(256)) * 4
        def change(work):
            self.fix(work)
            os.makedirs(os.path.join(work, "assets"))
            with open(os.path.join(work, "assets", "logo.bin"), "wb") as handle:
                handle.write(blob)
        candidate = self.result(self.made_with_git(change))
        checkout = fresh_clone(self.origin, os.path.join(self.tmp, "checkout"))
        chosen = os.path.join(self.tmp, "chosen.patch")
        code, report, err = self.pick(checkout, "-patch", chosen, candidate)
        self.assertEqual((code, report["binary_files"]), (0, ["assets/logo.bin"]), err)
        named = err.index("binary file(s), verified with the rest; review them before "
                          "committing: assets/logo.bin")
        self.assertLess(named, err.index("applied "))
        with open(os.path.join(checkout, "assets", "logo.bin"), "rb") as handle:
            self.assertEqual(handle.read(), blob)
        reviewer = fresh_clone(self.origin, os.path.join(self.tmp, "reviewer"))
        subprocess.run(["git", "apply", chosen], cwd=reviewer, check=True)
        self.assertEqual(tree_files(reviewer), tree_files(checkout))

    def test_a_submodule_the_tests_import_is_in_the_private_copy(self):
        library = os.path.join(self.tmp, "mathlib")
        write_files(library, {"mathlib/__init__.py": "def twice(x):\n    return 2 * x\n"})
        git(library, "init", "-q")
        git(library, "add", "-A")
        git(library, "commit", "-q", "-m", "library")
        write_files(self.origin, {"tests/test_vendor.py": (
            "import os\nimport sys\nimport unittest\n\nsys.path.insert(0, os.path.join("
            "os.path.dirname(__file__), '..', 'vendor'))\nfrom mathlib import twice\n\n\n"
            "class VendorTest(unittest.TestCase):\n    def test_twice(self):\n"
            "        self.assertEqual(twice(2), 4)\n")})
        git(self.origin, "-c", "protocol.file.allow=always", "submodule", "add", "-q", library,
            "vendor")
        git(self.origin, "add", "-A")
        git(self.origin, "commit", "-q", "-m", "vendor")
        self.head = git(self.origin, "rev-parse", "HEAD").strip()
        candidate = self.result(self.made_with_git(self.fix))
        checkout = os.path.join(self.tmp, "checkout")
        subprocess.run(["git", "-c", "protocol.file.allow=always", "clone", "-q",
                        "--recurse-submodules", self.origin, checkout], check=True)
        code, report, err = self.pick(checkout, candidate)
        self.assertEqual((code, report["verdict"]), (0, "VERIFIED"), err)
        self.assertNotIn("test_vendor.VendorTest.test_twice", report["still_failing"])
        self.assertEqual(report["tests"]["after"]["counts"], {"passed": 4}, report["tests"])

    def test_a_file_too_large_for_the_chosen_patch_is_named(self):
        blob = os.urandom(4_100_000)
        def change(work):
            self.fix(work)
            with open(os.path.join(work, "data.bin"), "wb") as handle:
                handle.write(blob)
        candidate = self.result(self.made_with_git(change))
        checkout = fresh_clone(self.origin, os.path.join(self.tmp, "checkout"))
        chosen = os.path.join(self.tmp, "chosen.patch")
        code, report, err = self.pick(checkout, "-patch", chosen, candidate)
        self.assertEqual((code, report["binary_files"]), (0, ["data.bin"]), err)
        self.assertIn(f"{chosen} cannot carry 1 file(s) too large for a diff, so git apply "
                      "refuses it: data.bin", err)
        reviewer = fresh_clone(self.origin, os.path.join(self.tmp, "reviewer"))
        done = subprocess.run(["git", "apply", chosen], cwd=reviewer, capture_output=True)
        self.assertNotEqual(done.returncode, 0)
        self.assertEqual(git(reviewer, "status", "--porcelain"), "")


if __name__ == "__main__":
    unittest.main()
