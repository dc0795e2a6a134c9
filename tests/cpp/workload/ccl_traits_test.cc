// The one table of CCL traits: one row per library with a name of its own, found by that name
// and no other; built_here is what the adapter registry of this build creates; and every row of
// a library built here says what its adapter says or does (EmitsEvents, CanShrink, its refusal
// of a fault hook or of a missing store directory).
#include "workload/adapters/ccl_traits.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "workload/adapters/ccl_adapter.h"

namespace faultline::workload::adapters {
namespace {

TEST(CclTraitsTest, NamesAreUniqueAndRowsAreInIdOrder) {
  std::set<std::string> seen;
  int index = 0;
  for (const CclTraits& t : AllCclTraits()) {
    EXPECT_FALSE(t.name.empty());
    EXPECT_TRUE(seen.insert(std::string(t.name)).second) << "two rows named " << t.name;
    EXPECT_EQ(static_cast<int>(t.id), index++) << t.name;
    EXPECT_EQ(&CclTraitsOf(t.id), &t) << t.name;
    EXPECT_EQ(FindCclTraits(t.name), &t) << t.name;
  }
  EXPECT_EQ(CclNames(), (std::vector<std::string>{"ftccl", "gloo", "nccl", "openmpi", "mpich"}));
  EXPECT_EQ(CclTraitsOf(CclId::kFtccl).name, "ftccl");
  EXPECT_EQ(CclTraitsOf(CclId::kGloo).name, "gloo");
  EXPECT_EQ(CclTraitsOf(CclId::kNccl).name, "nccl");
  EXPECT_EQ(CclTraitsOf(CclId::kOpenmpi).name, "openmpi");
  EXPECT_EQ(CclTraitsOf(CclId::kMpich).name, "mpich");
}

TEST(CclTraitsTest, UnknownNamesAreNotFound) {
  for (const char* name : {"", "mpi", "OpenMPI", "FTCCL", "ftccl ", "gloo\n", "nccl2"}) {
    EXPECT_EQ(FindCclTraits(name), nullptr) << "'" << name << "'";
  }
}

TEST(CclTraitsTest, NamesWhereJoinsTheRowsThatHaveIt) {
  EXPECT_EQ(CclNamesWhere([](const CclTraits&) { return true; }),
            "ftccl, gloo, nccl, openmpi, mpich");
  EXPECT_EQ(CclNamesWhere([](const CclTraits&) { return false; }), "");
  EXPECT_EQ(CclNamesWhere([](const CclTraits& t) { return t.serves_fault_hook; }), "ftccl");
}

// This test links faultline-worker's adapters: the rows it runs. A row with a rank program of
// its own is checked against that program's registry (mpich_adapter_test).
TEST(CclTraitsTest, BuiltHereIsWhatTheRegistryCreates) {
  EXPECT_TRUE(CclTraitsOf(CclId::kFtccl).built_here);
  std::vector<std::string> built;
  for (const CclTraits& t : AllCclTraits()) {
    if (t.rank_program != "faultline-worker") {
      EXPECT_FALSE(CreateCclAdapter(t.name).ok()) << t.name << " is not faultline-worker's";
      EXPECT_EQ(t.rank_program, "faultline-worker-" + std::string(t.name));
      continue;
    }
    auto a = CreateCclAdapter(t.name);
    EXPECT_EQ(a.ok(), t.built_here) << t.name << ": " << a.status().ToString();
    if (t.built_here) {
      built.emplace_back(t.name);
    } else {
      EXPECT_FALSE(t.built_from.empty()) << t.name;
      EXPECT_NE(t.how_to_build.find("-DFAULTLINE_WITH_"), std::string::npos) << t.name;
    }
  }
  EXPECT_EQ(AvailableCcls(), built);
}

// Init options that an adapter refuses before it touches the network or a device.
CclInit RefusableInit() {
  CclInit init;
  init.rank = 0;
  init.size = 2;
  init.bootstrap = "127.0.0.1:1";
  init.rails = {"127.0.0.1"};
  init.store_dir = "/nonexistent/faultline-ccl-traits-test";
  init.init_timeout = std::chrono::milliseconds(100);
  return init;
}

TEST(CclTraitsTest, EveryRowBuiltHereAgreesWithItsAdapter) {
  for (const CclTraits& t : AllCclTraits()) {
    if (!t.built_here || t.rank_program != "faultline-worker") continue;
    SCOPED_TRACE(std::string(t.name));
    auto created = CreateCclAdapter(t.name);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    CclAdapter& a = **created;
    EXPECT_EQ(a.Name(), t.name);
    EXPECT_EQ(a.EmitsEvents(), t.emits_path_events);
    EXPECT_EQ(a.CanShrink(), t.can_shrink);
    EXPECT_EQ(a.CanGrow(), t.can_grow);
    // Every adapter is one forked rank of faultline-worker but the MPIs', whose own launcher
    // starts the world.
    EXPECT_EQ(t.launch == LaunchStyle::kMpiLauncher,
              t.id == CclId::kOpenmpi || t.id == CclId::kMpich);
    // A library that serves no fault hook refuses a hook path at once. (One that serves it
    // opens it in Init, which needs a whole group: ccl_adapter_test and the fault-hook tests.)
    if (!t.serves_fault_hook) {
      CclInit init = RefusableInit();
      init.fault_hook = "/nonexistent/faultline-ccl-traits-test.hook";
      const Status st = a.Init(init);
      EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.ToString();
      EXPECT_NE(st.message().find("fault hook"), std::string::npos) << st.ToString();
    }
    // A library that meets through a store directory refuses to start without one.
    if (t.needs_store_dir) {
      auto fresh = CreateCclAdapter(t.name);
      ASSERT_TRUE(fresh.ok());
      CclInit init = RefusableInit();
      init.store_dir.clear();
      const Status st = (*fresh)->Init(init);
      EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.ToString();
      EXPECT_NE(st.message().find("store directory"), std::string::npos) << st.ToString();
    }
  }
}

}  // namespace
}  // namespace faultline::workload::adapters
