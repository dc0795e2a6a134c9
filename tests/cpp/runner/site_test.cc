// The Site factory (runner/exec/site.h) and the target resolution the sites share
// (site_common.h ResolveFaultParams), where neither touches the kernel.
#include "runner/exec/site.h"

#include <gtest/gtest.h>

#include "exec_test_util.h"
#include "runner/exec/site_common.h"
#include "runner/exec/site_inventory.h"
#include "runner/exec/site_netns.h"
#include "runner/exec/site_slurm_fleet.h"

namespace faultline::runner {
namespace {

using testing::ScenarioFrom;

Scenario TwoHosts(const std::string& faults = "") {
  return ScenarioFrom(
      "name: t\n"
      "topology: {hosts: 2, ranks_per_host: 2, rails: 2}\n"
      "workload: {op: allreduce, bytes: 1MiB, duration: 20s}\n" +
      (faults.empty() ? "" : "faults:\n" + faults));
}

TEST(SiteFactory, PicksTheSiteFromLauncherAndTopology) {
  Scenario sc = TwoHosts();
  RunOptions o;
  o.launcher = "local";
  auto local = MakeSite(SiteContext{&sc, &o, "r1", "/tmp/x"});
  ASSERT_TRUE(local.ok());
  EXPECT_NE(dynamic_cast<NetnsSite*>(local->get()), nullptr);
  o.launcher = "slurm";
  auto slurm = MakeSite(SiteContext{&sc, &o, "r1", "/tmp/x"});
  ASSERT_TRUE(slurm.ok());
  EXPECT_NE(dynamic_cast<SlurmFleetSite*>(slurm->get()), nullptr);
  o.launcher = "k8s";
  auto bad = MakeSite(SiteContext{&sc, &o, "r1", "/tmp/x"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().ToString().find("unknown launcher 'k8s' (local or slurm)"),
            std::string::npos);
}

TEST(ResolveFaultParams, RankTargetsGoToTheSiteAndHookTargetsToTheRanksHook) {
  Scenario sc = TwoHosts(
      "  - {id: k, at: 1s, type: rank_kill, target: {host: 1, rank: 1}}\n"
      "  - {id: q, at: 2s, type: qp_error, target: {host: 1, rank: 0, rail: 0}, peer: 0}\n");
  Timeline tl = BuildTimeline(sc, sc.seed);
  ASSERT_EQ(tl.actions.size(), 2u);
  std::vector<std::string> hooks = {"", "", "/h/rank2.hook", ""};
  std::vector<int> handles = {0, 1, 2, 3};
  int asked = -1;
  auto rank = [&](int g, nlohmann::json* p) {
    asked = g;
    (*p)["pid"] = 4242;
    return Status();
  };
  auto kill =
      ResolveFaultParams(tl.actions[0], sc, RankRefs{&hooks, &handles}, nullptr, "ns1", rank);
  ASSERT_TRUE(kill.ok()) << kill.status().ToString();
  EXPECT_EQ(asked, 3);
  EXPECT_EQ((*kill)["pid"], 4242);
  auto qp = ResolveFaultParams(tl.actions[1], sc, RankRefs{&hooks, &handles}, nullptr, "ns1", rank);
  ASSERT_TRUE(qp.ok()) << qp.status().ToString();
  EXPECT_EQ((*qp)["hook"], "/h/rank2.hook");
  hooks[2] = "";  // a library that serves no hook
  auto none =
      ResolveFaultParams(tl.actions[1], sc, RankRefs{&hooks, &handles}, nullptr, "ns1", rank);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Code::kUnavailable);
  EXPECT_NE(none.status().ToString().find("serves no fault hook"), std::string::npos);
}

}  // namespace
}  // namespace faultline::runner
