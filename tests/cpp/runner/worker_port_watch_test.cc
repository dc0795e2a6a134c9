// A rank's own port state: PortWatch (runner/worker/port_watch.h) over a fake port source
// (ports down, gone, flapped between two looks, no source at all), and LinkWatch
// (base/link_watch.h) against this namespace's loopback and a name that does not exist.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "base/link_watch.h"
#include "runner/worker/port_watch.h"

namespace faultline::runner {
namespace {

struct FakePorts {
  std::map<std::string, PortState> ports;  // a name not here is gone
  int opened = 0;
};

class FakeSource final : public PortSource {
 public:
  explicit FakeSource(FakePorts* ports) : ports_(ports) {}
  Result<PortState> Get(const std::string& name) override {
    auto it = ports_->ports.find(name);
    if (it == ports_->ports.end()) return Status(Code::kNotFound, "no link named " + name);
    return it->second;
  }

 private:
  FakePorts* ports_;
};

PortWatch WatchOf(FakePorts* ports) {
  return PortWatch(
      0,
      [ports]() -> Result<std::unique_ptr<PortSource>> {
        ++ports->opened;
        return std::unique_ptr<PortSource>(std::make_unique<FakeSource>(ports));
      },
      [] {
        return std::vector<std::string>{"r0", "r1"};
      });
}

TEST(WorkerPortWatch, APortThatFlappedDuringTheFaultIsDownUntilTheFaultIsOver) {
  FakePorts f;
  f.ports["r0"] = {true, 2};
  f.ports["r1"] = {true, 4};
  PortWatch w = WatchOf(&f);
  w.Look(/*fault_on=*/false);
  EXPECT_FALSE(w.own_port_down());
  w.Look(true);  // a fault, but this rank's ports never moved
  EXPECT_FALSE(w.own_port_down());
  f.ports["r1"].carrier_changes = 6;  // down and back up between two looks
  w.Look(true);
  EXPECT_TRUE(w.own_port_down());
  w.Look(true);  // sticky while the fault goes on
  EXPECT_TRUE(w.own_port_down());
  w.Look(false);
  EXPECT_FALSE(w.own_port_down());
  EXPECT_EQ(f.opened, 1);
}

TEST(WorkerPortWatch, APortNotRunningOrGoneIsDown) {
  FakePorts f;
  f.ports["r0"] = {true, 2};
  f.ports["r1"] = {true, 2};
  PortWatch w = WatchOf(&f);
  w.Look(false);
  f.ports["r0"].running = false;
  w.Look(true);
  EXPECT_TRUE(w.own_port_down());
  PortWatch g = WatchOf(&f);
  f.ports["r0"].running = true;
  g.Look(false);
  f.ports.erase("r1");
  g.Look(true);
  EXPECT_TRUE(g.own_port_down());
  // Without a fault a port down is only noted.
  PortWatch h = WatchOf(&f);
  h.Look(false);
  EXPECT_FALSE(h.own_port_down());
}

TEST(WorkerPortWatch, WithoutAPortSourceTheWatchIsOffForGood) {
  int opened = 0;
  PortWatch w(
      3,
      [&opened]() -> Result<std::unique_ptr<PortSource>> {
        ++opened;
        return Status(Code::kPermissionDenied, "no netlink here");
      },
      [] { return std::vector<std::string>{"r0"}; });
  w.Look(true);
  w.Look(true);
  EXPECT_TRUE(w.off());
  EXPECT_FALSE(w.own_port_down());
  EXPECT_EQ(opened, 1);
}

TEST(WorkerLinkWatch, ReadsLoopbackAndNamesAMissingLink) {
  auto watch = LinkWatch::Open();
  if (!watch.ok()) GTEST_SKIP() << "no rtnetlink socket: " << watch.status().ToString();
  auto lo = watch->Get("lo");
  ASSERT_TRUE(lo.ok()) << lo.status().ToString();
  EXPECT_TRUE(lo->running);
  auto gone = watch->Get("flnotthere0");
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().code(), Code::kNotFound);
  // The socket keeps answering after an error.
  EXPECT_TRUE(watch->Get("lo").ok());
  EXPECT_EQ(watch->Get("").status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace faultline::runner
