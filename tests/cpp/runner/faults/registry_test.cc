// The runner's fault registry against the injector's: every kind the injector can create has
// exactly one runner descriptor and no descriptor names a kind the injector lacks; and every
// descriptor is consistent in itself.
#include "runner/faults/registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "injector/registry.h"
#include "runner/faults/common.h"
#include "runner/core/scenario.h"

namespace faultline::runner::faults {
namespace {

TEST(FaultRegistry, EveryInjectorKindHasExactlyOneDescriptorAndViceVersa) {
  std::map<std::string, int> injector, runner;
  for (const FaultKindInfo& k : faultline::FaultKinds()) {
    if (k.create != nullptr) ++injector[std::string(k.name)];  // resources have no create
  }
  for (const FaultDescriptor* d : FaultDescriptors()) ++runner[std::string(d->name)];
  for (const auto& [name, n] : injector) {
    EXPECT_EQ(runner[name], 1) << "injector kind '" << name << "' has " << runner[name]
                               << " runner descriptors (add runner/faults/" << name << "/)";
  }
  for (const auto& [name, n] : runner) {
    EXPECT_EQ(n, 1) << "runner kind '" << name << "' is registered " << n << " times";
    EXPECT_EQ(injector.count(name), 1u) << "runner kind '" << name << "' has no injector kind";
  }
  EXPECT_EQ(injector.size(), runner.size());
}

TEST(FaultRegistry, LookupByName) {
  EXPECT_EQ(FindFaultDescriptor("link_down")->name, "link_down");
  EXPECT_EQ(FindFaultDescriptor("link_dwn"), nullptr);
  EXPECT_EQ(&DescriptorOf("qp_error"), FindFaultDescriptor("qp_error"));
  EXPECT_EQ(FaultKindNames().size(), FaultDescriptors().size());
  EXPECT_EQ(FaultKindNames().front(), "link_down");
}

TEST(FaultRegistry, EveryDescriptorIsConsistent) {
  const std::vector<std::string> known(std::begin(kKnownRequirements),
                                       std::end(kKnownRequirements));
  for (const FaultDescriptor* d : FaultDescriptors()) {
    SCOPED_TRACE(std::string(d->name));
    EXPECT_NE(d->injector_params, nullptr);
    // A kind with its own schedule says when it ends and builds its actions; no other does.
    EXPECT_EQ(d->hold == Hold::kSchedule, d->schedule != nullptr);
    EXPECT_EQ(d->hold == Hold::kSchedule, d->schedule_end != nullptr);
    // A kind that refuses `for` says why.
    EXPECT_EQ(d->takes_for(), d->for_refused_hint.empty());
    EXPECT_EQ(d->capacity == CapacityEffect::kPort, d->port_share != nullptr);
    // A one-shot fault leaves no lasting capacity effect it could measure, except a kill.
    if (d->one_shot() && !d->kills_rank) {
      EXPECT_EQ(d->capacity, CapacityEffect::kNone);
    }
    if (d->rank_target()) {
      EXPECT_NE(d->capacity, CapacityEffect::kPort);
    }
    // Own keys never shadow the common ones, and appear once.
    std::vector<std::string> keys = FaultKeys(*d);
    for (const std::string& k : d->param_keys) {
      EXPECT_EQ(std::count(keys.begin(), keys.end(), k), 1) << k;
      EXPECT_NE(k, "for");
    }
    EXPECT_EQ(d->parse == nullptr, d->param_keys.empty());
    for (const std::string& f : d->requires_features) {
      EXPECT_NE(std::find(known.begin(), known.end(), f), known.end()) << f;
    }
  }
}

}  // namespace
}  // namespace faultline::runner::faults
