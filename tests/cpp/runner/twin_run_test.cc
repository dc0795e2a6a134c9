// The fault-free twin's key (runner/exec/twin_run.h): what changes the fault-free rate changes
// the key, the faults and the policy do not.
#include "runner/exec/twin_run.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include "exec_test_util.h"

namespace faultline::runner {
namespace {

using testing::ScenarioFrom;

Scenario Train(const std::string& policy, const std::string& fault) {
  return ScenarioFrom(
      "name: t\n"
      "topology: {hosts: 2, ranks_per_host: 1, rails: 2}\n"
      "policy: " +
      policy +
      "\n"
      "workload: {kind: train, steps: 50, batch: 8, compute: 30ms, grad_bytes: 4MiB,\n"
      "           checkpoint_every: 10, wait_bound: 3s}\n"
      "faults:\n"
      "  - " +
      fault + "\n");
}

TEST(TwinKey, LibraryOverridesInTheEnvironmentMakeAnotherTwin) {
  unsetenv("FTCCL_ABORT_TIMEOUT_MS");
  const RunOptions o;
  const Scenario a =
      Train("failover", "{id: k, at: 1s, type: rank_kill, target: {host: 1, rank: 0}}");
  const std::string plain = TwinKey(a, o);
  EXPECT_EQ(plain.size(), 16u);
  // Another policy and another fault: the same fault-free job.
  EXPECT_EQ(
      TwinKey(Train("adaptive", "{id: d, at: 2s, type: link_down, target: {host: 0, rail: 0}}"), o),
      plain);
  setenv("FTCCL_ABORT_TIMEOUT_MS", "5000", 1);
  const std::string overridden = TwinKey(a, o);
  unsetenv("FTCCL_ABORT_TIMEOUT_MS");
  EXPECT_NE(overridden, plain);
  EXPECT_EQ(TwinKey(a, o), plain);
  // The seed sets the job too.
  Scenario b = a;
  b.seed += 1;
  EXPECT_NE(TwinKey(b, o), plain);
}

}  // namespace
}  // namespace faultline::runner
