"""scripts/test-summary, the closing table of `make test` and `make check`: a failed test's
reason reaches the summary, also from ctest's JUnit (which puts an empty <failure/> beside the
test's output), so that a log's tail says why without the run's files."""
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SUMMARY = os.path.join(ROOT, "scripts", "test-summary")

# What a failing GoogleTest prints: a few hundred log lines from the ranks, then the failure.
NOISE = "".join(f"ftccl[2] WARN NET/TCP: CRC mismatch on chunk {i} from rank 1\n"
                for i in range(300))
GTEST_FAIL = textwrap.dedent("""\
    [ RUN      ] All/FaultLifetimeTest.BuffersUntouchedOnceWaitReturns/corrupt
    lifetime_test.cc:236: Failure
    Value of: result.AllOk()
      Actual: false
    Expected: true
    rank 2: killed by signal 11 (SIGSEGV) after 'waiting for the collective'
    [  FAILED  ] All/FaultLifetimeTest.BuffersUntouchedOnceWaitReturns/corrupt (6690 ms)
    """)


def run_ctest_junit(tmp_path, script):
    """A real ctest run of one test that runs `script`; returns the JUnit file it wrote."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "out.sh").write_text(script)
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.20)\nproject(t NONE)\nenable_testing()\n"
        f"add_test(NAME lifetime COMMAND sh {src / 'out.sh'})\n")
    build = tmp_path / "build"
    subprocess.run(["cmake", "-S", str(src), "-B", str(build)], check=True, capture_output=True)
    results = tmp_path / "results"
    results.mkdir()
    subprocess.run(["ctest", "--output-junit", str(results / "sanitize-tsan-1.xml")],
                   cwd=build, capture_output=True)
    (results / "legs.tsv").write_text("tsan\t1\t74\t\n")
    return results


def summary(results):
    return subprocess.run([sys.executable, SUMMARY, str(results)], capture_output=True,
                          text=True)


def test_a_failed_ctest_test_says_why_in_the_summary(tmp_path):
    out_file = tmp_path / "out.txt"
    out_file.write_text(NOISE + GTEST_FAIL)
    results = run_ctest_junit(tmp_path, f"cat {out_file}; exit 1\n")
    r = summary(results)
    assert r.returncode == 1, r.stdout + r.stderr
    failed = r.stdout[r.stdout.index("Failed:"):]
    assert "- tsan: lifetime" in failed
    assert "lifetime_test.cc:236: Failure" in failed
    assert "killed by signal 11 (SIGSEGV)" in failed
    assert "CRC mismatch" not in failed


def test_a_failure_without_a_gtest_line_gives_the_output_s_last_lines(tmp_path):
    results = run_ctest_junit(tmp_path, "echo starting; echo the daemon never answered; exit 3\n")
    r = summary(results)
    assert r.returncode == 1, r.stdout + r.stderr
    failed = r.stdout[r.stdout.index("Failed:"):]
    assert "the daemon never answered" in failed


def test_a_failure_element_that_only_says_failed_still_gives_the_output(tmp_path):
    # What other CMake versions write: <failure message="Failed"/> beside the output.
    results = tmp_path / "results"
    results.mkdir()
    (results / "sanitize-tsan-1.xml").write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n<testsuite tests="1" failures="1">\n'
        '<testcase name="lifetime" classname="lifetime" time="6.69" status="fail">\n'
        '<failure message="Failed"/>\n<system-out>' + NOISE + GTEST_FAIL +
        '</system-out>\n</testcase>\n</testsuite>\n')
    (results / "legs.tsv").write_text("tsan\t1\t74\t\n")
    r = summary(results)
    failed = r.stdout[r.stdout.index("Failed:"):]
    assert "lifetime_test.cc:236: Failure" in failed
    assert "killed by signal 11 (SIGSEGV)" in failed
