// NCCL's view of a rank's rails (workload/adapters/nccl_env.h): addresses resolved to this
// namespace's interfaces and to RDMA ports from a sysfs tree, the variables that point NCCL
// at them, and what a job's own environment keeps.
#include "workload/adapters/nccl_env.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

namespace faultline::workload::adapters {
namespace {

namespace fs = std::filesystem;

void Write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text << "\n";
}

class NcclEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("nccl-env-test-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

TEST_F(NcclEnvTest, LoopbackResolvesToItsInterfaceWithoutRdma) {
  auto r = ResolveRails({"127.0.0.1", "127.0.0.1"}, root_.string());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].netdev, "lo");
  EXPECT_EQ((*r)[0].address, "127.0.0.1");
  EXPECT_TRUE((*r)[0].rdma_device.empty());
  EXPECT_EQ((*r)[0].rdma_port, 0);
  // One interface for both rails: named once; no RDMA anywhere, so no NCCL_IB_HCA.
  const auto env = NcclRailEnv(*r);
  ASSERT_EQ(env.size(), 1u);
  EXPECT_EQ(env[0].first, "NCCL_SOCKET_IFNAME");
  EXPECT_EQ(env[0].second, "=lo");
}

TEST_F(NcclEnvTest, AnAddressOnNoInterfaceIsNamed) {
  auto r = ResolveRails({"127.0.0.1", "198.19.255.254"}, root_.string());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_NE(r.status().message().find("198.19.255.254"), std::string::npos);
  EXPECT_FALSE(ResolveRails({"not-an-address"}, root_.string()).ok());
}

TEST_F(NcclEnvTest, RdmaPortsComeFromGidNetdevsOrTheIpoibLink) {
  // A RoCE port whose GID table names the interface (mlx5, rxe), and an IPoIB interface of a
  // device's second port.
  Write(root_ / "class/infiniband/mlx5_1/ports/1/gid_attrs/ndevs/0", "lo");
  Write(root_ / "class/infiniband/mlx5_1/ports/1/gid_attrs/ndevs/1", "lo");
  auto r = ResolveRails({"127.0.0.1"}, root_.string());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].rdma_device, "mlx5_1");
  EXPECT_EQ((*r)[0].rdma_port, 1);
  fs::remove_all(root_);
  Write(root_ / "class/net/lo/device/infiniband/mlx5_3/.keep", "");
  Write(root_ / "class/net/lo/dev_port", "1");
  r = ResolveRails({"127.0.0.1"}, root_.string());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].rdma_device, "mlx5_3");
  EXPECT_EQ((*r)[0].rdma_port, 2);
}

TEST_F(NcclEnvTest, RailEnvNamesEachInterfaceAndPortExactlyOnce) {
  std::vector<RailInterface> rails = {{"10.0.0.1", "ens1f0np0", "mlx5_0", 1},
                                      {"10.0.1.1", "ens1f1np1", "mlx5_1", 1},
                                      {"10.0.2.1", "ens1f1np1", "mlx5_1", 1}};
  auto env = NcclRailEnv(rails);
  ASSERT_EQ(env.size(), 2u);
  EXPECT_EQ(env[0],
            (std::pair<std::string, std::string>{"NCCL_SOCKET_IFNAME", "=ens1f0np0,ens1f1np1"}));
  EXPECT_EQ(env[1], (std::pair<std::string, std::string>{"NCCL_IB_HCA", "=mlx5_0:1,mlx5_1:1"}));
  // One rail without RDMA: NCCL is not restricted to a partial HCA list.
  rails[2].rdma_device.clear();
  rails[2].rdma_port = 0;
  env = NcclRailEnv(rails);
  ASSERT_EQ(env.size(), 1u);
  EXPECT_EQ(env[0].first, "NCCL_SOCKET_IFNAME");
  EXPECT_TRUE(NcclRailEnv({}).empty());
}

TEST_F(NcclEnvTest, TheJobsOwnSettingWinsAndEveryKnobIsReported) {
  unsetenv("NCCL_SOCKET_IFNAME");
  unsetenv("NCCL_IB_TIMEOUT");
  setenv("NCCL_IB_HCA", "=mlx5_7", 1);
  const auto knobs = ApplyNcclEnv({{"NCCL_SOCKET_IFNAME", "=r0,r1"}, {"NCCL_IB_HCA", "=mlx5_0:1"}});
  EXPECT_STREQ(getenv("NCCL_SOCKET_IFNAME"), "=r0,r1");
  EXPECT_STREQ(getenv("NCCL_IB_HCA"), "=mlx5_7");  // set by the job: kept
  ASSERT_EQ(knobs.size(), std::size(kNcclKnobs));
  std::map<std::string, std::string> m(knobs.begin(), knobs.end());
  EXPECT_EQ(m["NCCL_SOCKET_IFNAME"], "=r0,r1");
  EXPECT_EQ(m["NCCL_IB_HCA"], "=mlx5_7");
  EXPECT_EQ(m["NCCL_IB_TIMEOUT"], "");  // unset
  EXPECT_TRUE(m.count("NCCL_IB_RESILIENCY_PORT_FAILOVER"));
  unsetenv("NCCL_SOCKET_IFNAME");
  unsetenv("NCCL_IB_HCA");
}

}  // namespace
}  // namespace faultline::workload::adapters
