"""The benchmark's measurements run, at a tiny size, and report what they measured.

Timings are not asserted: speed targets belong to `make bench`, not to the test suite.
"""

import json
import os
import sys
import tempfile
import unittest
from unittest import mock

from tests.bench import run as bench
from tests.bench import suites

BENCH_DIR = os.path.dirname(bench.__file__)


class MeasurementsTest(unittest.TestCase):
    def check(self, figure):
        self.assertIsInstance(figure, bench.Figure)
        self.assertIn(figure.ok, (True, False, None))
        self.assertTrue(figure.name and figure.measured and figure.target)

    def test_startup(self):
        self.check(bench.startup(runs=1))

    def test_loop_overhead(self):
        figure = bench.loop_overhead(steps=5, repeats=1)
        self.check(figure)
        self.assertIn("a step", figure.measured)

    def test_attempts_overhead(self):
        ratio, memory = bench.attempts_overhead(attempts=2, seconds=0.2, repeats=1)
        self.check(ratio)
        self.check(memory)
        self.assertTrue(memory.measured.endswith("MiB"))

    def test_attempts_model_bound(self):
        figure = bench.attempts_model_bound(attempts=2, delay=0.1, repeats=1)
        self.check(figure)
        self.assertIn("default `-jobs`", figure.name)

    def test_a_full_report_keeps_the_sections_other_tools_wrote(self):
        old = ("# old\n\n| a | 1 | 2 | pass |\n\n<!-- realworld:start -->\nmatrix\n"
               "<!-- realworld:end -->\n\ntail\n")
        text = bench.keep_sections("# new\n\n| a | 3 | 2 | pass |\n", old)
        self.assertIn("| a | 3 |", text)
        self.assertNotIn("| a | 1 |", text)
        self.assertIn("<!-- realworld:start -->\nmatrix\n<!-- realworld:end -->", text)
        self.assertNotIn("tail", text)

    def test_one_measurement_updates_its_rows_only(self):
        page = ("| figure | measured | target | result |\n|---|---|---|---|\n"
                "| a | 1 | 2 | pass |\n\nHow:\n\n- **a**: old.\n\nEnd.\n")
        figure = bench.Figure("b", "3", "4", False, "new")
        text = bench.update(bench.update(page, [figure]), [figure])
        self.assertEqual(text.count("| b | 3 | 4 | miss |"), 1)
        self.assertLess(text.index("| a |"), text.index("| b |"))
        self.assertLess(text.index("- **a**: old."), text.index("- **b**: new."))
        self.assertTrue(text.endswith("End.\n"))

    def test_a_new_row_goes_into_the_pages_own_table_not_a_section(self):
        section = ("<!-- make-test:start -->\n| runner | wall time |\n|---|---|\n| x | 1 s |\n\n"
                   "- **y**: a note.\n<!-- make-test:end -->\n")
        page = ("| figure | measured | target | result |\n|---|---|---|---|\n"
                "| a | 1 | 2 | pass |\n\nHow:\n\n- **a**: old.\n\nEnd.\n\n" + section)
        text = bench.update(page, [bench.Figure("b", "3", "4", True, "new")])
        self.assertTrue(text.endswith(section))
        self.assertLess(text.index("| b | 3 | 4 | pass |"), text.index("How:"))
        self.assertLess(text.index("- **b**: new."), text.index("End."))

    def test_the_first_row_and_note_go_below_their_headers(self):
        page = ("| figure | measured | target | result |\n|---|---|---|---|\n\n"
                "How each figure is taken:\n\nEnd.\n")
        text = bench.update(page, [bench.Figure("b", "3", "4", True, "new")])
        self.assertIn("|---|---|---|---|\n| b | 3 | 4 | pass |\n", text)
        self.assertIn("How each figure is taken:\n\n- **b**: new.\n", text)

    def test_redaction_speed(self):
        for figure in bench.redaction_speed(mib=1, repeats=1):
            self.check(figure)
            self.assertIn("ms per MiB", figure.measured)

    def test_deadline_overshoot(self):
        figure = bench.deadline_overshoot(wall=0.3, repeats=1)
        self.check(figure)
        self.assertTrue(figure.measured.endswith(" ms"))
        for mode in ("status", "headers", "body", "continue"):
            self.assertIn(mode, figure.how)

    def test_context_economy(self):
        size, price = bench.context_economy(steps=5, file_bytes=512)
        self.check(size)
        self.check(price)
        self.assertLessEqual(float(size.measured), 1.0)   # masking never sends more

    def test_search_speed(self):
        for figure in bench.search_speed(files=200, repeats=1):
            self.check(figure)

    def test_peak_memory(self):
        figure = bench.peak_memory(mib=4)
        self.check(figure)
        self.assertTrue(figure.measured.endswith("MiB"))

    def test_snapshot_sharing(self):
        figure = bench.snapshot_sharing(files=50, size=400)
        self.check(figure)
        self.assertIn("MiB added", figure.measured)

    def test_evidence_cost(self):
        figures = bench.evidence_cost(methods=30, tests=100, repeats=1)
        self.assertEqual(len(figures), 2)
        for figure in figures:
            self.check(figure)
        self.assertIn("(30 tests)", figures[0].name)
        self.assertIn("(100 tests)", figures[1].name)

    def test_every_measurement_can_be_run_by_name(self):
        for name in bench.MEASURES:
            self.assertTrue(callable(bench._measure(name)), name)

    def test_suite_one_class(self):
        graded, fix = suites.suite_one_class(methods=30, repeats=1)
        for figure in (graded, fix):
            self.check(figure)
            self.assertIn("one class (33 tests)", figure.name)   # and the defect's three
        self.assertIn("graded / bare run", graded.name)
        self.assertIn("three bare runs", fix.name)
        self.assertIn("load average", graded.how)

    def test_suite_many_tests(self):
        graded, fix = suites.suite_many_tests(tests=100, repeats=1)
        for figure in (graded, fix):
            self.check(figure)
            self.assertIn("many small tests (103 tests)", figure.name)

    def test_attempts_disk(self):
        figures = suites.attempts_disk(files=60, counts=(1, 2))
        self.assertEqual(len(figures), 2)
        for figure, count in zip(figures, (1, 2)):
            self.check(figure)
            self.assertIn(f"`fix -attempts {count}`", figure.name)
            self.assertNotIn("reflinks", figure.name)
            self.assertIn("MiB", figure.measured)
            self.assertNotEqual(figure.measured.split()[0], "0.0")   # the copies were seen
        self.assertIn("no private copy", figures[0].measured)
        self.assertIn("private copies", figures[1].measured)

    def test_reflinked_disk_is_not_measured_without_a_file_system_that_has_them(self):
        with mock.patch.dict(os.environ, {"GOLEM_BENCH_REFLINK_DIR": ""}):
            figures = suites.attempts_disk_reflink(files=60, counts=(1,))
        self.assertEqual([f.ok for f in figures], [None])
        self.assertIn("GOLEM_BENCH_REFLINK_DIR is not set", figures[0].how)
        with tempfile.TemporaryDirectory() as where:
            if suites._reflinks(where):
                self.skipTest("this machine's temporary directory has reflinks")
            with mock.patch.dict(os.environ, {"GOLEM_BENCH_REFLINK_DIR": where}):
                figures = suites.attempts_disk_reflink(files=60, counts=(1,))
        self.assertEqual([f.measured for f in figures], ["not measured"])
        self.assertIn("no reflinks", figures[0].how)

    def test_the_real_project_is_not_measured_without_its_sdist(self):
        with tempfile.TemporaryDirectory() as cache, \
                mock.patch.dict(os.environ, {"GOLEM_BENCH_CACHE": cache}):
            figures = suites.suite_real_project(fetch=False)
            self.assertEqual(os.listdir(cache), [])
        self.assertEqual(len(figures), 2)
        for figure in figures:
            self.check(figure)
            self.assertIsNone(figure.ok)
            self.assertEqual(figure.measured, "not measured")
            self.assertIn("not in", figure.how)

    def test_a_cached_sdist_with_another_hash_is_not_used(self):
        with tempfile.TemporaryDirectory() as cache, \
                mock.patch.dict(os.environ, {"GOLEM_BENCH_CACHE": cache}):
            name, version, _ = suites.REAL
            with open(os.path.join(cache, f"{name}-{version}.tar.gz"), "wb") as handle:
                handle.write(b"not the sdist")
            path, why = suites.real_sdist(fetch=False)
            figures = suites.suite_real_project(fetch=False)
        self.assertIsNone(path)
        self.assertIn("sha256", why)
        self.assertEqual([f.ok for f in figures], [None, None])

    @unittest.skipUnless(suites.real_sdist(fetch=False)[0],
                         "the real project's sdist is not cached (`make bench` fetches it)")
    def test_suite_real_project_from_the_cache(self):
        for measure, runner in ((suites.suite_real_project, "pytest"),
                                (suites.suite_real_project_unittest, "unittest")):
            graded, fix = measure(repeats=1, tests=("tests/test_idna_compat.py",), fetch=False)
            for figure in (graded, fix):
                self.check(figure)
                self.assertIsNotNone(figure.ok)
                self.assertIn("(3 tests)", figure.how)
            self.assertEqual(graded.name, "suite: graded / bare run, real project: idna 3.20 "
                                          f"under {runner}")
            self.assertIn(f"python3 -m {runner}", graded.how)

    def test_trace_times_reads_the_phases(self):
        events = [("phase", "06:00:00.000", {"name": "baseline"}),
                  ("baseline", "06:00:01.500", {}),
                  ("tool_call", "06:00:02.000", {"name": "run_tests"}),
                  ("tool_result", "06:00:02.750", {"name": "run_tests"}),
                  ("phase", "06:00:03.000", {"name": "verification"}),
                  ("note", "06:00:03.250", {"applied": ["calc.py"]}),
                  ("verification", "06:00:04.000", {})]
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "trace.jsonl")
            with open(path, "w", encoding="utf-8") as handle:
                for kind, when, extra in events:
                    handle.write(json.dumps({"event": kind, "time": f"2026-12-04T{when}+00:00",
                                             **extra}) + "\n")
            times = suites.trace_times(path)
        self.assertEqual(times, {"baseline": 1.5, "agent_tests": 0.75, "verification": 1.0,
                                 "prepare": 0.25})

    def test_disk_usage_counts_a_linked_file_once(self):
        with tempfile.TemporaryDirectory() as tmp:
            os.makedirs(os.path.join(tmp, "a"))
            with open(os.path.join(tmp, "a", "f"), "wb") as handle:
                handle.write(b"x" * 100_000)
            one, _ = suites._usage([tmp])
            os.link(os.path.join(tmp, "a", "f"), os.path.join(tmp, "g"))
            linked, _ = suites._usage([tmp])
            with open(os.path.join(tmp, "h"), "wb") as handle:
                handle.write(b"x" * 100_000)
            copied, _ = suites._usage([tmp])
        self.assertGreaterEqual(one, 100_000)
        self.assertEqual(linked, one)
        self.assertGreaterEqual(copied, one + 100_000)

    def test_traffic_prices_the_shared_prefix_at_a_tenth(self):
        first = b'{"messages": [{"role": "user", "content": "aaaa"}]}'
        second = (b'{"messages": [{"role": "user", "content": "aaaa"}, '
                  b'{"role": "user", "content": "bbbb"}]}')
        sent, price = bench._traffic([first, first, second])
        self.assertEqual(sent, 2 * len(first) + len(second))
        self.assertLess(price, len(first) * 1.5 + len(second))

    def test_report_has_the_table_and_the_machine(self):
        figures = [bench.Figure("a", "1.0x", "under 2x", True, "how a"),
                   bench.Figure("b", "3.0x", "under 2x", False),
                   bench.Figure("c", "not measured", "within 3x", None)]
        text = bench.report(figures, bench.machine())
        self.assertIn("| a | 1.0x | under 2x | pass |", text)
        self.assertIn("| b | 3.0x | under 2x | miss |", text)
        self.assertIn("| c | not measured | within 3x | n/a |", text)
        self.assertIn(f"Python {sys.version.split()[0]}", text)
        self.assertIn(f"{os.cpu_count()} CPUs", text)


if __name__ == "__main__":
    unittest.main()
