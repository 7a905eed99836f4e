"""sanitizer_coverage.py on made-up lcov files whose answer is known."""

import contextlib
import io
import os
import tempfile
import unittest

import sanitizer_coverage


def write(directory, test, lines):
    """An lcov file as bench/sanitizer_coverage.sh keeps it: SF and the reached DA lines."""
    with open(os.path.join(directory, sanitizer_coverage.file_name(test) + ".lcov"), "w") as f:
        for source, numbers in lines.items():
            f.write("SF:%s\n" % source)
            f.writelines("DA:%d,%d\n" % (n, 3) for n in numbers)


class SanitizerCoverageTest(unittest.TestCase):
    def run_main(self, covered_elsewhere, uninstrumented=""):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = sanitizer_coverage.main(self.dir, covered_elsewhere, uninstrumented)
        return code, out.getvalue()

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        write(self.dir, "//core:unit_test", {"/proc/self/cwd/core/a.cc": [1, 2, 3], "external/x/y.cc": [9]})
        write(self.dir, "//experiments:e2e_test", {"/proc/self/cwd/core/a.cc": [2, 3]})
        # Reaches b.cc, which nothing else reaches, and a LibTorch header, which is not ddplab's.
        write(self.dir, "//experiments:cli_test", {"core/b.cc": [7, 8], "/usr/include/torch/x.h": [1]})

    def tearDown(self):
        self.tmp.cleanup()

    def test_left_out_where_the_pass_reaches_every_line(self):
        code, out = self.run_main("//experiments:e2e_test")
        self.assertEqual(code, 0, out)
        self.assertIn("3 tests reach 5 lines of ddplab", out)
        self.assertIn("the sanitizer pass reaches every line the 1 tests tagged covered_elsewhere reach", out)

    def test_a_line_only_a_left_out_test_reaches_fails_and_is_named(self):
        code, out = self.run_main("//experiments:e2e_test //experiments:cli_test")
        self.assertEqual(code, 1, out)
        self.assertIn("FAIL: 2 lines reached by tests tagged covered_elsewhere", out)
        self.assertIn("core/b.cc: 2 (7, 8)", out)

    def test_an_uninstrumented_test_does_not_count_for_the_pass(self):
        code, out = self.run_main("//experiments:e2e_test", "//core:unit_test")
        self.assertEqual(code, 1, out)
        self.assertIn("core/a.cc: 2 (2, 3)", out)

    def test_a_tagged_test_without_profiles_fails(self):
        code, out = self.run_main("//experiments:gone_test")
        self.assertEqual(code, 1, out)
        self.assertIn("no profile for __experiments_gone_test", out)

    def test_lines_only_one_test_reaches(self):
        _, out = self.run_main("")
        self.assertRegex(out, r"\n\s+3\s+1  __core_unit_test\n")
        self.assertRegex(out, r"\n\s+2\s+2  __experiments_cli_test\n")


if __name__ == "__main__":
    unittest.main()
