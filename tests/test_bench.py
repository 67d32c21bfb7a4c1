"""The benchmark's measurements run, at a tiny size, and report what they measured.

Timings are not asserted: speed targets belong to `make bench`, not to the test suite.
"""

import os
import sys
import unittest

from tests.bench import run as bench

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
