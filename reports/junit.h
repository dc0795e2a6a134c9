// JUnit XML for CI systems (Jenkins, GitLab, GitHub test reporters): one <testsuite> per
// report, in the order given, inside one <testsuites>. Pure; thread-safe.
//
// Each suite is named after the scenario (with "[ccl, seed N]" added when two reports share
// a name) and carries the ccl, seed, sha256 and outcome as <properties>. Its testcases:
//  - "outcome": the run itself. <error> when the harness failed (harness_errors, a fault that
//    could not be injected): the run says nothing about the CCL then; <failure> when the
//    outcome is hung or crashed, which no scenario accepts; else it passes.
//  - "expect.<name>" for every expectation, in the report's order; a failed one has a
//    <failure> whose message holds the measured value and the limit.
//  - A report with "skipped" (a string: why the run was not started, e.g. the kernel lacks a
//    feature the scenario requires) has one testcase "outcome" with <skipped message=...>.
// Element order and attributes follow the JUnit schema that these readers accept (testsuite:
// name, tests, failures, errors, skipped; testcase: name, classname).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace faultline::reports {

// REQUIRES: every element is a report.json object (CheckReport passes); missing optional
// keys are written as absent, never invented.
std::string JUnitXml(const std::vector<nlohmann::json>& reports);

}  // namespace faultline::reports
