// A real rail's capacity from the kernel's sysfs text: netdev speeds and RDMA port rates
// parsed (unknown values stay unknown), and read from a fake sysfs tree, the RDMA rate taken
// before the netdev speed, null in the report's JSON when nothing is known.
#include "runner/exec/rail_capacity.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace faultline::runner {
namespace {

TEST(RailCapacity, NetdevSpeed) {
  EXPECT_EQ(ParseNetdevSpeed("25000\n"), 25e9);
  EXPECT_EQ(ParseNetdevSpeed("100000"), 1e11);
  EXPECT_EQ(ParseNetdevSpeed("10"), 1e7);
  EXPECT_EQ(ParseNetdevSpeed("-1\n"), std::nullopt);          // SPEED_UNKNOWN
  EXPECT_EQ(ParseNetdevSpeed("4294967295\n"), std::nullopt);  // the same, printed unsigned
  EXPECT_EQ(ParseNetdevSpeed("0"), std::nullopt);
  EXPECT_EQ(ParseNetdevSpeed(""), std::nullopt);
  EXPECT_EQ(ParseNetdevSpeed("fast"), std::nullopt);
  EXPECT_EQ(ParseNetdevSpeed("100 Mb/s"), std::nullopt);
}

TEST(RailCapacity, RdmaRate) {
  EXPECT_EQ(ParseRdmaRate("100 Gb/sec (4X EDR)\n"), 1e11);
  EXPECT_EQ(ParseRdmaRate("200 Gb/sec (2X HDR)"), 2e11);
  EXPECT_EQ(ParseRdmaRate("2.5 Gb/sec (1X SDR)\n"), 2.5e9);
  EXPECT_EQ(ParseRdmaRate("25 Gb/sec"), 25e9);
  EXPECT_EQ(ParseRdmaRate("0 Gb/sec (1X SDR)"), std::nullopt);
  EXPECT_EQ(ParseRdmaRate("100 Mb/sec (4X EDR)"), std::nullopt);
  EXPECT_EQ(ParseRdmaRate("100 Gb/sec junk"), std::nullopt);
  EXPECT_EQ(ParseRdmaRate("100"), std::nullopt);
  EXPECT_EQ(ParseRdmaRate("Gb/sec"), std::nullopt);
  EXPECT_EQ(ParseRdmaRate(""), std::nullopt);
}

class FakeSysfs : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/faultline_sysfs_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    roots_.net = dir_ + "/net";
    roots_.infiniband = dir_ + "/infiniband";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& rel, const std::string& text) {
    const std::filesystem::path p = dir_ + "/" + rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  std::string dir_;
  SysfsRoots roots_;
};

TEST_F(FakeSysfs, ReadsSpeedAndRate) {
  Write("net/ens1f0np0/speed", "100000\n");
  Write("net/eth1/speed", "-1\n");
  Write("infiniband/mlx5_0/ports/1/rate", "200 Gb/sec (2X HDR)\n");
  EXPECT_EQ(ReadNetdevSpeed("ens1f0np0", roots_), 1e11);
  EXPECT_EQ(ReadNetdevSpeed("eth1", roots_), std::nullopt);
  EXPECT_EQ(ReadNetdevSpeed("eth9", roots_), std::nullopt);  // no such device
  EXPECT_EQ(ReadRdmaPortRate("mlx5_0", 1, roots_), 2e11);
  EXPECT_EQ(ReadRdmaPortRate("mlx5_0", 2, roots_), std::nullopt);

  InventoryRail rdma{"ens1f0np0", "mlx5_0", 1, ""};
  RailCapacity c = ReadRailCapacity(rdma, roots_);
  EXPECT_EQ(c.bps, 2e11);  // the port's rate, not the netdev's speed
  EXPECT_EQ(c.source, "rdma_rate");
  // An RDMA port whose rate the kernel does not give: the netdev's speed.
  InventoryRail other_port{"ens1f0np0", "mlx5_0", 2, ""};
  c = ReadRailCapacity(other_port, roots_);
  EXPECT_EQ(c.bps, 1e11);
  EXPECT_EQ(c.source, "netdev_speed");
  InventoryRail unknown{"eth1", "", 0, ""};
  c = ReadRailCapacity(unknown, roots_);
  EXPECT_EQ(c.bps, std::nullopt);
  EXPECT_EQ(c.source, "");
  const nlohmann::json j = RailCapacityJson(unknown, c);
  EXPECT_TRUE(j.at("capacity_bps").is_null()) << j.dump();
  EXPECT_TRUE(j.at("capacity_source").is_null()) << j.dump();
  EXPECT_FALSE(j.contains("rdma"));
  const nlohmann::json k = RailCapacityJson(rdma, ReadRailCapacity(rdma, roots_));
  EXPECT_EQ(k.at("capacity_bps"), 2e11);
  EXPECT_EQ(k.at("rdma"), "mlx5_0");
  EXPECT_EQ(k.at("port"), 1);
}

}  // namespace
}  // namespace faultline::runner
