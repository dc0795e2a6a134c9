// The mpich adapter in its own rank program's registry (faultline_ccl_adapters_mpich, which
// faultline-worker-mpich links): the registry creates it and nothing of Open MPI's; the traits
// row says what the adapter says or does; the adapter names MPICH's version and device, and
// refuses what it cannot serve before it touches MPI (a fault hook, a rank that Hydra did not
// start). The collectives themselves run under Hydra: tests/py/test_peer_mpich.py.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "workload/adapters/ccl_adapter.h"
#include "workload/adapters/ccl_traits.h"

namespace faultline::workload::adapters {
namespace {

TEST(MpichAdapterTest, ItsProgramCreatesItAndNoOtherMpi) {
  const CclTraits& t = CclTraitsOf(CclId::kMpich);
  EXPECT_TRUE(t.built_here);
  EXPECT_EQ(t.rank_program, "faultline-worker-mpich");
  EXPECT_EQ(t.launch, LaunchStyle::kMpiLauncher);
  EXPECT_EQ(AvailableCcls(), (std::vector<std::string>{"mpich"}));
  EXPECT_FALSE(CreateCclAdapter("openmpi").ok());
}

TEST(MpichAdapterTest, TheRowAgreesWithTheAdapter) {
  const CclTraits& t = CclTraitsOf(CclId::kMpich);
  auto created = CreateCclAdapter("mpich");
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  CclAdapter& a = **created;
  EXPECT_EQ(a.Name(), t.name);
  EXPECT_EQ(a.EmitsEvents(), t.emits_path_events);
  EXPECT_EQ(a.CanShrink(), t.can_shrink);
  EXPECT_EQ(a.CanGrow(), t.can_grow);
  // MPI_Get_library_version, which MPI allows before MPI_Init.
  const std::string v = a.Version();
  ASSERT_FALSE(v.empty());
  EXPECT_TRUE(v[0] >= '1' && v[0] <= '9') << v;
  EXPECT_EQ(v.find('\n'), std::string::npos) << v;
  std::string device, errors;
  for (const auto& [k, value] : a.Knobs()) {
    if (k == "device") device = value;
    if (k == "errors") errors = value;
  }
  EXPECT_EQ(device.rfind("ch", 0), 0u) << "'" << device << "'";  // ch4:ucx on Debian 12
  EXPECT_EQ(errors, "MPI_ERRORS_RETURN");
}

CclInit TwoRanks() {
  CclInit init;
  init.rank = 0;
  init.size = 2;
  init.bootstrap = "127.0.0.1:1";
  init.rails = {"127.0.0.1"};
  init.init_timeout = std::chrono::milliseconds(100);
  return init;
}

TEST(MpichAdapterTest, RefusesWhatItCannotServeBeforeTouchingMpi) {
  auto a = CreateCclAdapter("mpich");
  ASSERT_TRUE(a.ok());
  CclInit hook = TwoRanks();
  hook.fault_hook = "/nonexistent/mpich-adapter-test.hook";
  Status st = (*a)->Init(hook);
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("fault hook"), std::string::npos) << st.ToString();

  // Started by hand, not by Hydra: refused with what is missing, not a singleton MPI world.
  ::unsetenv("PMI_RANK");
  auto b = CreateCclAdapter("mpich");
  ASSERT_TRUE(b.ok());
  st = (*b)->Init(TwoRanks());
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("mpich: this rank was not started by MPICH's Hydra mpiexec"),
            std::string::npos)
      << st.ToString();

  ::setenv("FAULTLINE_MPI_ERRORS", "ignore", 1);
  auto c = CreateCclAdapter("mpich");
  ASSERT_TRUE(c.ok());
  st = (*c)->Init(TwoRanks());
  ::unsetenv("FAULTLINE_MPI_ERRORS");
  EXPECT_NE(st.message().find("ccl_options.errors"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace faultline::workload::adapters
