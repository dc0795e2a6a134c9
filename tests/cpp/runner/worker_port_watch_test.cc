// A rank's own port state: PortWatch (runner/worker/port_watch.h) over a fake port source
// (ports down, gone, flapped between two looks, no source at all), and LinkWatch
// (base/link_watch.h) against this namespace's loopback and a name that does not exist, and
// both against a real veth pair whose peer goes down and up, in a private network namespace
// (skipped with the reason where one cannot be made).
#include <gtest/gtest.h>
#include <sched.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>

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

// Runs `body` on a thread of its own in a new network namespace (children it starts share it);
// *skip gets the reason when there is none to be had.
template <typename F>
void InPrivateNetns(std::string* skip, F&& body) {
  std::thread t([&] {
    if (unshare(CLONE_NEWNET) != 0) {
      *skip = std::string("no private network namespace: ") + std::strerror(errno);
      return;
    }
    body();
  });
  t.join();
}

int Sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()); }

TEST(WorkerLinkWatch, FollowsAVethWhosePeerGoesDownAndUp) {
  std::string skip;
  InPrivateNetns(&skip, [&] {
    if (Sh("ip link add flw0 type veth peer name flw1 && ip link set flw0 up && "
           "ip link set flw1 up && ip addr add 198.18.200.1/24 dev flw0") != 0) {
      skip = "cannot create a veth pair here";
      return;
    }
    auto watch = LinkWatch::Open();
    ASSERT_TRUE(watch.ok()) << watch.status().ToString();
    auto before = watch->Get("flw0");
    ASSERT_TRUE(before.ok()) << before.status().ToString();
    EXPECT_TRUE(before->running);
    // The rank's port watch over the same kernel: its rail is flw0's address.
    PortWatch ports = PortWatch::ForRails(0, {"198.18.200.1"});
    ports.Look(/*fault_on=*/false);
    ASSERT_EQ(Sh("ip link set flw1 down"), 0);
    auto down = watch->Get("flw0");
    ASSERT_TRUE(down.ok());
    EXPECT_FALSE(down->running);
    EXPECT_GT(down->carrier_changes, before->carrier_changes);
    ASSERT_EQ(Sh("ip link set flw1 up"), 0);
    auto up = watch->Get("flw0");
    ASSERT_TRUE(up.ok());
    EXPECT_GT(up->carrier_changes, down->carrier_changes);
    // Down and back by the next look: the port still counts as having gone down.
    ports.Look(/*fault_on=*/true);
    EXPECT_FALSE(ports.off());
    EXPECT_TRUE(ports.own_port_down());
    ports.Look(/*fault_on=*/false);
    EXPECT_FALSE(ports.own_port_down());
    Sh("ip link del flw0");
  });
  if (!skip.empty()) GTEST_SKIP() << skip;
}

}  // namespace
}  // namespace faultline::runner
