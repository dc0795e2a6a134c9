// Helpers of the fault kind tests: a scenario around fault entries, its diagnostics, and the
// injector parameters the timeline gives a fault.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runner/core/scenario.h"
#include "runner/core/timeline.h"

namespace faultline::runner::testing {

// The run seed of every scenario below.
inline constexpr uint64_t kSeed = 7;

// A 2 hosts x 2 ranks x 2 rails scenario whose `faults:` are `entries`, one "  - ENTRY" line
// each from line 6 on, so that entry i's character k sits at line 6 + i, column 5 + k.
inline std::string ScenarioWith(const std::vector<std::string>& entries,
                                const std::string& nics = "shared") {
  std::string y =
      "name: t\nseed: 7\ntopology: {hosts: 2, ranks_per_host: 2, rails: 2, nics: " + nics +
      "}\nworkload: {op: allreduce, bytes: 1MiB, duration: 20s}\nfaults:\n";
  for (const auto& e : entries) y += "  - " + e + "\n";
  return y;
}

// "t.yaml:LINE:COL" of `needle` in entry `index` of ScenarioWith(entries).
inline std::string Where(const std::vector<std::string>& entries, size_t index,
                         const std::string& needle) {
  const size_t k = entries[index].find(needle);
  EXPECT_NE(k, std::string::npos) << needle << " not in " << entries[index];
  return "t.yaml:" + std::to_string(6 + index) + ":" + std::to_string(5 + k);
}

inline std::vector<std::string> Errors(const std::string& yaml) {
  std::vector<std::string> out;
  for (const auto& d : ParseScenario(yaml, "t.yaml").diagnostics) out.push_back(d.ToString());
  return out;
}

inline std::string Dump(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

// Parses `entries` (which must validate) and returns the scenario.
inline Scenario MustParse(const std::vector<std::string>& entries,
                          const std::string& nics = "shared") {
  ParseOutcome r = ParseScenario(ScenarioWith(entries, nics), "t.yaml");
  EXPECT_TRUE(r.ok()) << Dump(Errors(ScenarioWith(entries, nics)));
  return r.ok() ? *r.scenario : Scenario{};
}

// The timeline's actions of fault `id`, in order.
inline std::vector<TimelineAction> ActionsOf(const Scenario& s, const std::string& id) {
  std::vector<TimelineAction> out;
  for (const auto& a : BuildTimeline(s, kSeed).actions) {
    if (a.fault_id == id) out.push_back(a);
  }
  return out;
}

}  // namespace faultline::runner::testing
