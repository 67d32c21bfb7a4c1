"""cargo test (golem/workflow/verifier/runners/cargo.py): the harness's human output read test
by test against recorded output, the command golem starts, and real crates run and judged
the way golem runs a suite (the tests say when cargo is missing and they skip)."""

from __future__ import annotations

import os
import shutil
import unittest

from golem.tools.process import command_env
from golem.workflow.verifier.runners import cargo, toolchain_homes
from golem.workflow.verifier.runners.base import Call
from golem.workflow.verifier.scratch import Phase
from golem.workflow.verifier.suite import parse_command, plan_for, run_suite
from tests import layouts
from tests.fixtures import GolemCase, last_json, run_cli, write_files

CARGO = shutil.which("cargo")
NO_CARGO = "cargo is not installed: the crate tests need cargo (and a toolchain) on PATH"

# Recorded from `cargo test --no-fail-fast` (cargo 1.95), trimmed: a library's unit tests,
# an integration test file and two doc tests of one item, each binary failing once.
RECORDED = """\
   Compiling adder v0.1.0 (/tmp/cg/adder)
    Finished `test` profile [unoptimized + debuginfo] target(s) in 1.10s
     Running unittests src/lib.rs (target/debug/deps/adder-c3bb584dd17800fd)

running 4 tests
test tests::prints ... ok
test tests::slow ... ignored
test tests::zero ... ok
test tests::adds ... FAILED

failures:

---- tests::adds stdout ----
test tests::adds ... ok
thread 'tests::adds' (4863) panicked at src/lib.rs:16:17:
assertion `left == right` failed

failures:
    tests::adds

test result: FAILED. 2 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.22s

error: test failed, to rerun pass `--lib`
     Running tests/integ.rs (target/debug/deps/integ-0b701eb4c7e18ef6)

running 2 tests
test it_zero ... ok
test it_adds ... FAILED

failures:
    it_adds

test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.07s

error: test failed, to rerun pass `--test integ`
   Doc-tests adder

running 2 tests
test src/lib.rs - add (line 7) ... ok
test src/lib.rs - add (line 3) ... FAILED

failures:
    src/lib.rs - add (line 3)

test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.10s

error: doctest failed, to rerun pass `--doc`
error: 3 targets failed:
"""
RECORDED_IDS = {
    "src/lib.rs [adder]::tests::prints": "passed",
    "src/lib.rs [adder]::tests::slow": "skipped",
    "src/lib.rs [adder]::tests::zero": "passed",
    "src/lib.rs [adder]::tests::adds": "failed",
    "tests/integ.rs [integ]::it_zero": "passed",
    "tests/integ.rs [integ]::it_adds": "failed",
    "doctests [adder]::src/lib.rs - add (example 1)": "failed",
    "doctests [adder]::src/lib.rs - add (example 2)": "passed",
}


class ParseCargoTest(unittest.TestCase):
    def test_recorded_output(self):
        read = cargo.parse_cargo(RECORDED)
        # the test's own output under `failures:` (a line like a pass) is not evidence
        self.assertEqual(read.tests, RECORDED_IDS)
        self.assertEqual((read.pseudo, read.problem), (set(), None))

    def test_doc_tests_keep_their_ids_when_lines_move(self):
        moved = RECORDED.replace("(line 7)", "(line 12)").replace("(line 3)", "(line 8)")
        self.assertEqual(cargo.parse_cargo(moved).tests, RECORDED_IDS)

    def test_colours_are_no_part_of_the_lines(self):
        coloured = RECORDED.replace("     Running", "\x1b[1m\x1b[92m     Running\x1b[0m") \
            .replace(" ... ok", " ... \x1b[32mok\x1b[0m")
        self.assertEqual(cargo.parse_cargo(coloured).tests, RECORDED_IDS)

    def test_a_binary_that_ends_without_its_summary_is_a_failing_pseudo_test(self):
        out = ("     Running unittests src/lib.rs (target/debug/deps/odd-ae7fad7c518d3bc3)\n\n"
               "running 2 tests\ntest tests::fine ... ok\n"
               "error: test failed, to rerun pass `--lib`\n\nCaused by:\n  process didn't "
               "exit successfully: `...` (signal: 6, SIGABRT: process abort signal)\n")
        read = cargo.parse_cargo(out)
        self.assertEqual(read.tests, {"src/lib.rs [odd]::tests::fine": "passed",
                                      "src/lib.rs [odd] [binary]": "error"})
        self.assertEqual(read.pseudo, {"src/lib.rs [odd] [binary]"})

    def test_lines_that_do_not_add_up_are_a_problem(self):
        forged = RECORDED.replace("test it_adds ... FAILED\n", "")
        self.assertIn("the output of tests/integ.rs [integ] does not add up",
                      cargo.parse_cargo(forged).problem)

    def test_a_crate_that_does_not_build(self):
        out = ("error[E0277]: cannot add `&str` to `i32`\n"
               "error: could not compile `odd` (lib) due to 1 previous error\n"
               "error: could not compile `odd` (lib test) due to 1 previous error\n")
        read = cargo.parse_cargo(out)
        self.assertEqual((read.tests, read.pseudo), ({"[odd] [build]": "error"},
                                                     {"[odd] [build]"}))

    def test_a_target_with_its_own_harness_is_judged_by_cargo(self):
        out = ("     Running tests/own.rs (target/debug/deps/own-f22d6bb09910a6a2)\n"
               "my harness\nerror: test failed, to rerun pass `--test own`\n"
               "     Running tests/fine.rs (target/debug/deps/fine-f22d6bb09910a6a3)\n"
               "all good\n")
        self.assertEqual(cargo.parse_cargo(out).tests, {"tests/own.rs [own]::(target)": "failed",
                                                        "tests/fine.rs [fine]::(target)":
                                                        "passed"})

    def test_output_between_a_test_and_its_outcome(self):
        out = ("     Running unittests src/lib.rs (target/debug/deps/a-ae7fad7c518d3bc3)\n"
               "running 1 test\ntest tests::talks ... hello from the test\nok\n\n"
               "test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured\n")
        self.assertEqual(cargo.parse_cargo(out).tests, {"src/lib.rs [a]::tests::talks": "passed"})

    def test_two_crates_binaries_of_one_name(self):
        one = ("     Running unittests src/lib.rs (target/debug/deps/a-3110576fc3c3c96d)\n"
               "running 1 test\ntest t::x ... ok\ntest result: ok. 1 passed; 0 failed; "
               "0 ignored\n")
        read = cargo.parse_cargo(one + one.replace("ok\n", "FAILED\n", 1)
                                 .replace("ok. 1 passed; 0 failed", "FAILED. 0 passed; 1 failed"))
        self.assertEqual(read.tests, {"src/lib.rs [a]::t::x": "passed",
                                      "src/lib.rs [a] #2::t::x": "failed"})


class CargoCommandTest(unittest.TestCase):
    def call(self, text: str, only: str | None = None) -> list[str]:
        return cargo.RUNNER.argv(Call(parse_command(text).argv, "/bin/cargo", "/w", None, "/h",
                                      only))

    def test_no_fail_fast_and_one_test_alone(self):
        self.assertEqual(self.call("cargo test"), ["/bin/cargo", "test", "--no-fail-fast"])
        self.assertEqual(self.call("cargo test --no-fail-fast -p a -- --test-threads=1",
                                   "t::x"),
                         ["/bin/cargo", "test", "--no-fail-fast", "-p", "a", "--",
                          "--test-threads=1", "--exact", "t::x"])
        # a command that picks its own tests runs whole; the test is read from that run
        self.assertEqual(self.call("cargo test api", "t::x"),
                         ["/bin/cargo", "test", "--no-fail-fast", "api"])

    def test_which_tests_run_alone(self):
        alone = cargo.RUNNER.alone
        self.assertEqual(alone("src/lib.rs [a]::tests::adds", {}), "tests::adds")
        self.assertEqual(alone("src/lib.rs [a]::tests::boom - should panic", {}),
                         "tests::boom")
        for whole in ("doctests [a]::src/lib.rs - add (example 1)", "[a] [build]",
                      "tests/own.rs [own]::(target)", "src/lib.rs [a] [binary]"):
            self.assertIsNone(alone(whole, {}), whole)


LIB = """\
pub fn add(a: i32, b: i32) -> i32 { a - b }

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn adds() { assert_eq!(add(2, 3), 5); }
    #[test]
    fn zero() { assert_eq!(add(0, 0), 0); }
}
"""
CRATE = {"Cargo.toml": "[package]\nname = \"adder\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
         ".gitignore": "target/\n", "src/lib.rs": LIB,
         "tests/api.rs": "#[test]\nfn api_adds() { assert_eq!(adder::add(1, 1), 2); }\n"}


@unittest.skipUnless(CARGO, NO_CARGO)
class CargoCrateTest(GolemCase):
    def setUp(self):
        super().setUp()
        # rustup's proxies find their toolchains through these, not the run's own HOME
        os.environ.update(toolchain_homes(os.path.expanduser("~")))

    def run_once(self, root: str, only: str | None = None):
        home = os.path.join(self.tmp, "home")
        os.makedirs(home, exist_ok=True)
        env = command_env(home, home)
        plan = plan_for(parse_command("cargo test"), env, root)
        with Phase("test") as phase:
            return run_suite(plan, cwd=root, env=env, run=phase.run(), helpers=phase.helpers(),
                             timeout=600, only=only)

    def test_outcomes_per_test_and_one_test_alone(self):
        root = layouts.build("git", self.tmp, CRATE)
        result = self.run_once(root)
        self.assertEqual(result.evidence, "cargo-output")
        self.assertEqual(result.tests, {"src/lib.rs [adder]::tests::adds": "failed",
                                        "src/lib.rs [adder]::tests::zero": "passed",
                                        "tests/api.rs [api]::api_adds": "failed"},
                         result.output)
        self.assertIsNone(result.problem)
        alone = self.run_once(root, only="tests::zero")
        self.assertEqual((alone.tests, alone.exit_code),
                         ({"src/lib.rs [adder]::tests::zero": "passed"}, 0))

    def verify(self, root: str, *extra: str, sandbox: str = "none") -> dict:
        code, out, err = run_cli(["verify", "-dir", root, "-base", "HEAD", "-sandbox", sandbox,
                                  "-json", *extra])
        self.assertTrue(out.strip(), err)
        return last_json(out)

    def test_an_honest_fix_verified_and_a_deleted_test_not(self):
        sandboxes = ["none"] + (["bwrap"] if shutil.which("bwrap") else [])
        for sandbox in sandboxes:
            with self.subTest(sandbox=sandbox):
                root = layouts.build("git", self.tmp, CRATE, name=f"crate-{sandbox}")
                write_files(root, {"src/lib.rs": LIB.replace("a - b", "a + b")})
                report = self.verify(root, "-repeat", "1", sandbox=sandbox)
                self.assertEqual(report["verdict"], "VERIFIED", report["summary"])
                self.assertEqual(report["evidence"], "cargo-output")
                self.assertIn("trusted no further than the exit code", report["summary"])
                self.assertEqual(sorted(report["fixed"]),
                                 ["src/lib.rs [adder]::tests::adds",
                                  "tests/api.rs [api]::api_adds"])
        # judged by the exit code alone, turning the failing inline test into a plain
        # function would pass (cargo exits 0); test by test, it went missing
        inline = {k: v for k, v in CRATE.items() if k != "tests/api.rs"}
        root = layouts.build("git", self.tmp, inline, name="inline")
        write_files(root, {"src/lib.rs": LIB.replace("    #[test]\n    fn adds()",
                                                     "    fn adds()")})
        report = self.verify(root)
        self.assertEqual(report["verdict"], "FAILED", report["summary"])
        self.assertIn("1 went missing: src/lib.rs [adder]::tests::adds", report["summary"])


if __name__ == "__main__":
    unittest.main()
