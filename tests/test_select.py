import os
import shutil
import tempfile
import unittest

from golem.llm.types import ToolCall
from golem.tools import Context, default_registry, process
from golem.tools.workspace import Workspace
from golem.workflow.verifier.suite import runner_of
from tests import fixtures

EXAMPLE = fixtures.CALCULATOR


class RunTestsSelectTest(unittest.TestCase):
    def registry(self, argv):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        shutil.copytree(EXAMPLE, os.path.join(tmp, "repo"))
        env = process.command_env(tmp, tmp)
        return default_registry(Context(Workspace(os.path.join(tmp, "repo")), argv, set(), env,
                                        test_runner=runner_of(argv)))

    def call(self, registry, **args):
        return registry.call(ToolCall("1", "run_tests", args))

    def test_select_runs_only_matching_tests(self):
        registry = self.registry(["python3", "-m", "unittest", "discover", "-s", "tests"])
        whole = self.call(registry).text
        some = self.call(registry, select="test_mean_of_one").text
        self.assertIn("Ran 10 tests", whole)
        self.assertIn("Ran 1 test", some)
        self.assertIn("-k test_mean_of_one", some)

    def test_select_on_a_runner_without_selection_is_an_error(self):
        registry = self.registry(["python3", "-c", "print('ok')"])
        result = self.call(registry, select="x")
        self.assertFalse(result.ok)
        self.assertTrue(result.text.startswith("Error:"))
        self.assertTrue(self.call(registry).ok)

    def test_select_cannot_smuggle_an_option(self):
        registry = self.registry(["python3", "-m", "unittest", "discover", "-s", "tests"])
        result = self.call(registry, select="--help")
        self.assertFalse(result.ok)


if __name__ == "__main__":
    unittest.main()
