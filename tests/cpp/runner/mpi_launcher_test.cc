#include "runner/exec/mpi_launcher.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

namespace faultline::runner {
namespace {

MpiLauncherOptions Good() {
  MpiLauncherOptions o;
  o.run_id = "mt" + std::to_string(::getpid() % 100000);
  o.hosts = {{"fl-x-h0", "mgmt"}, {"fl-x-h1", "mgmt"}};
  o.data_interfaces = "r0,r1";
  return o;
}

// Bad input is refused before anything is written, each with what to write instead.
TEST(MpiLauncher, RefusesBadOptions) {
  auto o = Good();
  o.pml = "psm2";
  auto l = MpiLauncher::Create(o);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), Code::kInvalidArgument);
  EXPECT_NE(l.status().message().find("ccl_options.pml: 'psm2'"), std::string::npos);
  o = Good();
  o.errors = "abort";
  l = MpiLauncher::Create(o);
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("ccl_options.errors"), std::string::npos);
  o = Good();
  o.hosts.clear();
  EXPECT_EQ(MpiLauncher::Create(o).status().code(), Code::kInvalidArgument);
  o = Good();
  o.run_id = "../x";
  EXPECT_EQ(MpiLauncher::Create(o).status().code(), Code::kInvalidArgument);
  o = Good();
  o.hosts[1].mgmt_dev = "";
  l = MpiLauncher::Create(o);
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("management"), std::string::npos);
}

// What mpirun cannot start is refused whole, before mpirun runs; the private directory goes
// with the launcher.
TEST(MpiLauncher, RefusesWorldsMpirunCannotStart) {
  if (!CheckOpenMpiPml("ob1").ok()) GTEST_SKIP() << "Open MPI is not installed";
  const auto o = Good();
  const std::string dir = "/tmp/fl-mpi-" + o.run_id;
  {
    auto l = MpiLauncher::Create(o);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    EXPECT_TRUE(std::filesystem::is_directory(dir));
    LaunchSpec s;
    s.argv = {"/bin/true"};
    s.placement = {0, 0, 0};
    LaunchSpec body = s;
    body.body = [](int) { return 0; };
    EXPECT_EQ((*l)->StartWorld({body}).status().code(), Code::kInvalidArgument);
    LaunchSpec blank = s;
    blank.argv = {"/bin/echo", "a b"};
    auto st = (*l)->StartWorld({blank}).status();
    EXPECT_NE(st.message().find("blank or a quote"), std::string::npos) << st.ToString();
    LaunchSpec colon = s;
    colon.argv = {"/bin/echo", ":"};
    EXPECT_EQ((*l)->StartWorld({colon}).status().code(), Code::kInvalidArgument);
    LaunchSpec order = s;
    order.placement = {0, 0, 1};
    st = (*l)->StartWorld({order}).status();
    EXPECT_NE(st.message().find("start order"), std::string::npos) << st.ToString();
    LaunchSpec far = s;
    far.placement = {5, 0, 0};
    EXPECT_EQ((*l)->StartWorld({far}).status().code(), Code::kInvalidArgument);
    EXPECT_EQ((*l)->size(), 0);
    EXPECT_EQ((*l)->LocalPid(0), std::nullopt);
  }
  EXPECT_FALSE(std::filesystem::exists(dir));
}

// Hydra fills its hostfile's hosts in order: a world whose ranks of one host are not together
// is refused before mpiexec runs, and nothing of it is left.
TEST(MpiLauncher, RefusesWorldsHydraCannotPlace) {
  if (!CheckMpichHydra().ok()) GTEST_SKIP() << "MPICH is not installed";
  auto o = Good();
  o.flavour = MpiFlavour::kMpich;
  o.mpirun = "mpiexec.hydra";
  o.pml = "not-used-by-mpich";  // Open MPI's option; MPICH has no PML to choose
  const std::string dir = "/tmp/fl-mpi-" + o.run_id;
  {
    auto l = MpiLauncher::Create(o);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    std::vector<LaunchSpec> specs(3);
    const int hosts[] = {0, 1, 0};
    for (int i = 0; i < 3; ++i) {
      specs[i].argv = {"/bin/true"};
      specs[i].placement = {hosts[i], 0, i};
    }
    auto st = (*l)->StartWorld(specs).status();
    EXPECT_EQ(st.code(), Code::kInvalidArgument);
    EXPECT_NE(st.message().find("host by host"), std::string::npos) << st.ToString();
    EXPECT_EQ((*l)->LocalPid(0), std::nullopt);
    EXPECT_TRUE((*l)->command().empty());
  }
  EXPECT_FALSE(std::filesystem::exists(dir));
  EXPECT_FALSE(MpichInfo("Version").empty());
}

}  // namespace
}  // namespace faultline::runner
