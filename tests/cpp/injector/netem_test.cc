// netem on a rail the runner shapes: where the netem goes (pure plan and the netlink request),
// and, on the kernel, that revert gives the shaping tbf exactly its previous child back and
// that a bandwidth fault on the same tbf composes with a child in either order. Kernels
// without sch_netem (no real netem can be created) check the tbf side with a stand-in child
// qdisc (htb, not a fifo: the kernel treats a fifo child differently when the tbf changes);
// the real netem test runs where the kernel has it and says so where it does not.
#include "injector/netem.h"

#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <netlink/msg.h>
#include <unistd.h>

#include "injector/injection.h"
#include "injector/qdisc.h"
#include "injector/registry.h"
#include "tests/cpp/injector/test_util.h"

namespace faultline::testing {
namespace {

QdiscInfo Q(const std::string& kind, uint32_t handle, uint32_t parent) {
  QdiscInfo q;
  q.kind = kind;
  q.handle = handle;
  q.parent = parent;
  q.is_root = parent == TC_H_ROOT;
  return q;
}

const std::string kWhere = "'r0' in 'fl-t-h0'";

TEST(NetemPlan, OnlyTheKernelsDefaultRootMeansTheRoot) {
  auto none = PlanNetemParent({}, kWhere);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(*none, uint32_t{TC_H_ROOT});
  auto dflt = PlanNetemParent({Q("noqueue", 0, TC_H_ROOT)}, kWhere);
  ASSERT_TRUE(dflt.ok()) << dflt.status().ToString();
  EXPECT_EQ(*dflt, uint32_t{TC_H_ROOT});
}

TEST(NetemPlan, TheRunnersShapingTbfGetsTheNetemAsItsChild) {
  auto p = PlanNetemParent({Q("tbf", kShapingHandle, TC_H_ROOT)}, kWhere);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(*p, kShapingClass);
  EXPECT_EQ(ClassString(*p), "f1a0:1");
}

TEST(NetemPlan, EverythingElseIsRefusedWithItsReason) {
  struct Case {
    std::vector<QdiscInfo> qdiscs;
    std::string reason;
  };
  const Case cases[] = {
      // The user's root (even a tbf): never replaced.
      {{Q("tbf", 0x00010000, TC_H_ROOT)}, "root qdisc tbf 1: that this fault would replace"},
      // The shaping handle on something that is not a tbf is not the runner's.
      {{Q("htb", kShapingHandle, TC_H_ROOT)}, "root qdisc htb f1a0: that this fault would"},
      // A netem fault already there, at the root or under the tbf.
      {{Q("netem", kFaultHandle, TC_H_ROOT)}, "a netem fault is already active on " + kWhere},
      {{Q("tbf", kShapingHandle, TC_H_ROOT), Q("netem", kFaultHandle, kShapingClass)},
       "a netem fault is already active on " + kWhere},
      // The user's child under the runner's tbf.
      {{Q("tbf", kShapingHandle, TC_H_ROOT), Q("sfq", 0x00050000, kShapingClass)},
       "qdisc sfq 5: under the runner's tbf f1a0: that this fault would replace"},
      // A bandwidth fault's own root tbf (unshaped interface): both would need the root.
      {{Q("tbf", kFaultHandle, TC_H_ROOT)}, "root qdisc tbf f1a1: of a bandwidth fault"},
  };
  for (const Case& c : cases) {
    auto p = PlanNetemParent(c.qdiscs, kWhere);
    ASSERT_FALSE(p.ok()) << c.reason;
    EXPECT_EQ(p.status().code(), Code::kAlreadyExists) << c.reason;
    EXPECT_NE(p.status().message().find(c.reason), std::string::npos) << p.status().message();
  }
}

struct Request {
  int type = 0;
  int flags = 0;
  tcmsg tcm{};
  std::string kind;
};

Request Decode(nl_msg* msg) {
  Request r;
  nlmsghdr* h = nlmsg_hdr(msg);
  r.type = h->nlmsg_type;
  r.flags = h->nlmsg_flags;
  r.tcm = *static_cast<tcmsg*>(nlmsg_data(h));
  nlattr* tb[TCA_MAX + 1];
  if (nlmsg_parse(h, sizeof(tcmsg), tb, TCA_MAX, nullptr) == 0 && tb[TCA_KIND]) {
    r.kind = nla_get_string(tb[TCA_KIND]);
  }
  return r;
}

TEST(NetemRequest, CreatesUnderTheShapingClassWithoutReplacing) {
  NetemParams p;
  p.kind = "delay";
  p.delay_ns = 20'000'000;
  for (uint32_t parent : {kShapingClass, uint32_t{TC_H_ROOT}}) {
    auto msg = BuildNetemAdd(7, parent, p);
    ASSERT_TRUE(msg.ok()) << msg.status().ToString();
    Request r = Decode(msg->get());
    EXPECT_EQ(r.type, RTM_NEWQDISC);
    EXPECT_EQ(r.flags & (NLM_F_CREATE | NLM_F_EXCL), NLM_F_CREATE | NLM_F_EXCL);
    EXPECT_EQ(r.flags & NLM_F_REPLACE, 0);
    EXPECT_EQ(r.tcm.tcm_ifindex, 7);
    EXPECT_EQ(r.tcm.tcm_parent, parent);
    EXPECT_EQ(r.tcm.tcm_handle, kFaultHandle);
    EXPECT_EQ(r.kind, "netem");
  }
}

// Every qdisc of `dev`, the kernel's hidden default ones included (a tbf's default child),
// without htb's packet counter (stray packets such as IPv6 solicitations move it).
std::string AllQdiscs(const std::string& netns, const std::string& dev) {
  return Sh("tc -n " + netns + " qdisc show dev " + dev +
            " invisible | sed 's/direct_packets_stat [0-9]*//'");
}

// A root shaping tbf like the topology's on A's va.
void Shape(TwoHosts& t, uint64_t bits_per_s) {
  auto sock = NlSock::ConnectInNetns(t.a());
  ASSERT_TRUE(sock.ok()) << sock.status().ToString();
  auto link = GetLink(*sock, "va");
  ASSERT_TRUE(link.ok());
  TbfConfig c;
  c.rate_bits_per_s = bits_per_s;
  Status st = CreateRootTbf(*sock, link->ifindex, kShapingHandle, c);
  ASSERT_TRUE(st.ok()) << st.ToString();
}

// Stands in for the netem on a kernel without it: a non-fifo qdisc with the fault's handle.
void GraftStandIn(TwoHosts& t) {
  int rc = 0;
  Sh("tc -n " + t.a() + " qdisc add dev va parent f1a0:1 handle f1a1: htb 2>&1", &rc);
  ASSERT_EQ(rc, 0);
}

bool Connects(TwoHosts& t, uint16_t port) {
  int l = TcpListen(t.b(), TwoHosts::kAddrB, port);
  if (l < 0) return false;
  int c = TcpConnect(t.a(), TwoHosts::kAddrB, port, 1000);
  ::close(l);
  if (c < 0) return false;
  ::close(c);
  return true;
}

const nlohmann::json& ShapedUndo(TwoHosts& t) {
  static nlohmann::json undo;
  undo = {{"netns", t.a()}, {"dev", "va"}, {"parent", kShapingClass}};
  return undo;
}

TEST(NetemShaped, UndoGivesTheTbfItsDefaultChildBack) {
  FL_SKIP_WITHOUT_NETNS(t);
  Shape(*t, 1'000'000'000);
  std::string before = AllQdiscs(t->a(), "va");
  ASSERT_NE(before.find("bfifo 0: parent f1a0:1"), std::string::npos) << before;
  GraftStandIn(*t);
  ASSERT_EQ(AllQdiscs(t->a(), "va").find("bfifo"), std::string::npos);
  Status st = NetemFault::Undo(ShapedUndo(*t));
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(AllQdiscs(t->a(), "va"), before);
  EXPECT_TRUE(Connects(*t, 5301));
  // Idempotent: a second undo (cleanup after a revert) changes nothing.
  st = NetemFault::Undo(ShapedUndo(*t));
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(AllQdiscs(t->a(), "va"), before);
}

TEST(NetemShaped, UndoAfterACrashBetweenItsStepsStillHealsTheRail) {
  FL_SKIP_WITHOUT_NETNS(t);
  Shape(*t, 1'000'000'000);
  std::string before = AllQdiscs(t->a(), "va");
  GraftStandIn(*t);
  // The child deleted but the tbf not yet changed: the kernel leaves it childless, which
  // drops every packet.
  int rc = 0;
  Sh("tc -n " + t->a() + " qdisc del dev va parent f1a0:1 handle f1a1:", &rc);
  ASSERT_EQ(rc, 0);
  EXPECT_FALSE(Connects(*t, 5302));
  Status st = NetemFault::Undo(ShapedUndo(*t));
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(AllQdiscs(t->a(), "va"), before);
  EXPECT_TRUE(Connects(*t, 5303));
}

TEST(NetemShaped, UndoLeavesTheUsersChildAndAnUnshapedRailAlone) {
  FL_SKIP_WITHOUT_NETNS(t);
  // Unshaped: nothing of ours, nothing done.
  std::string bare = AllQdiscs(t->a(), "va");
  ASSERT_TRUE(NetemFault::Undo(ShapedUndo(*t)).ok());
  EXPECT_EQ(AllQdiscs(t->a(), "va"), bare);
  // A child with another handle under the runner's tbf is the user's.
  Shape(*t, 1'000'000'000);
  int rc = 0;
  Sh("tc -n " + t->a() + " qdisc add dev va parent f1a0:1 handle 5: htb", &rc);
  ASSERT_EQ(rc, 0);
  std::string before = AllQdiscs(t->a(), "va");
  ASSERT_TRUE(NetemFault::Undo(ShapedUndo(*t)).ok());
  EXPECT_EQ(AllQdiscs(t->a(), "va"), before);
  // A malformed parent is refused, not guessed.
  nlohmann::json bad = ShapedUndo(*t);
  bad["parent"] = uint32_t{0x00050001};  // a class that is not the shaping tbf's
  EXPECT_EQ(NetemFault::Undo(bad).code(), Code::kInvalidArgument);
  bad["parent"] = "f1a0:1";
  EXPECT_EQ(NetemFault::Undo(bad).code(), Code::kInvalidArgument);
}

std::unique_ptr<Injection> ArmBandwidth(TwoHosts& t, const char* rate) {
  auto fault = CreateFault("bandwidth", {{"netns", t.a()}, {"dev", "va"}, {"rate", rate}});
  EXPECT_TRUE(fault.ok());
  if (!fault.ok()) return nullptr;
  auto inj = Injection::Arm(std::move(fault).value(), &t.journal(), t.policy());
  EXPECT_TRUE(inj.ok()) << inj.status().ToString();
  return inj.ok() ? std::move(inj).value() : nullptr;
}

TEST(NetemShaped, BandwidthWhileAChildHoldsKeepsTheChild) {
  FL_SKIP_WITHOUT_NETNS(t);
  Shape(*t, 1'000'000'000);
  std::string original = AllQdiscs(t->a(), "va");
  GraftStandIn(*t);
  std::string with_child = AllQdiscs(t->a(), "va");
  auto bw = ArmBandwidth(*t, "100mbit");
  ASSERT_NE(bw, nullptr);
  ASSERT_TRUE(bw->ApplyAt().ok());
  std::string during = AllQdiscs(t->a(), "va");
  EXPECT_NE(during.find("rate 100Mbit"), std::string::npos) << during;
  EXPECT_NE(during.find("htb f1a1: parent f1a0:1"), std::string::npos) << during;
  ASSERT_TRUE(bw->RevertAt().ok());
  EXPECT_EQ(AllQdiscs(t->a(), "va"), with_child);
  ASSERT_TRUE(NetemFault::Undo(ShapedUndo(*t)).ok());
  EXPECT_EQ(AllQdiscs(t->a(), "va"), original);
}

TEST(NetemShaped, ChildRevertedWhileBandwidthHoldsThenBandwidthRevertedIsTheOriginal) {
  FL_SKIP_WITHOUT_NETNS(t);
  Shape(*t, 1'000'000'000);
  std::string original = AllQdiscs(t->a(), "va");
  auto bw = ArmBandwidth(*t, "100mbit");
  ASSERT_NE(bw, nullptr);
  ASSERT_TRUE(bw->ApplyAt().ok());
  std::string slowed = AllQdiscs(t->a(), "va");
  GraftStandIn(*t);
  ASSERT_TRUE(NetemFault::Undo(ShapedUndo(*t)).ok());
  // The default child is back, sized for the tbf as it is now (the bandwidth fault's).
  EXPECT_EQ(AllQdiscs(t->a(), "va"), slowed);
  EXPECT_TRUE(Connects(*t, 5304));
  ASSERT_TRUE(bw->RevertAt().ok());
  EXPECT_EQ(AllQdiscs(t->a(), "va"), original);
}

TEST(NetemShaped, BandwidthRefusesANetemAtTheRootOfAnUnshapedInterface) {
  FL_SKIP_WITHOUT_NETNS(t);
  // A root qdisc with the fault handle that is not a tbf: what a netem fault leaves on an
  // unshaped interface (htb stands in for it where the kernel has no netem).
  int rc = 0;
  Sh("tc -n " + t->a() + " qdisc add dev va root handle f1a1: htb", &rc);
  ASSERT_EQ(rc, 0);
  std::string before = AllQdiscs(t->a(), "va");
  auto fault = CreateFault("bandwidth", {{"netns", t->a()}, {"dev", "va"}, {"rate", "10mbit"}});
  ASSERT_TRUE(fault.ok());
  auto inj = Injection::Arm(std::move(fault).value(), &t->journal(), t->policy());
  ASSERT_FALSE(inj.ok());
  EXPECT_EQ(inj.status().code(), Code::kAlreadyExists);
  EXPECT_NE(inj.status().message().find("a htb fault holds the root qdisc f1a1:"),
            std::string::npos)
      << inj.status().message();
  EXPECT_EQ(AllQdiscs(t->a(), "va"), before);
}

// The real thing, where the kernel has netem: each kind under the runner's tbf, read back by
// Observe, together with a bandwidth fault, and reverted to exactly the tbf with its default
// child.
TEST(NetemShaped, RealNetemComposesWithTheShapingTbf) {
  if (!ProbeNetem().ok()) GTEST_SKIP() << "kernel lacks sch_netem: " << ProbeNetem().ToString();
  FL_SKIP_WITHOUT_NETNS(t);
  Shape(*t, 1'000'000'000);
  std::string original = AllQdiscs(t->a(), "va");
  for (const char* kind : {"delay", "jitter", "corrupt", "reorder"}) {
    nlohmann::json p = {{"netns", t->a()}, {"dev", "va"}};
    if (std::string(kind) == "delay") p["delay"] = "20ms";
    if (std::string(kind) == "jitter") p["jitter"] = "5ms";
    if (std::string(kind) == "corrupt" || std::string(kind) == "reorder") p["percent"] = "5";
    auto fault = CreateFault(kind, p);
    ASSERT_TRUE(fault.ok());
    auto inj = Injection::Arm(std::move(fault).value(), &t->journal(), t->policy());
    ASSERT_TRUE(inj.ok()) << kind << ": " << inj.status().ToString();
    auto entries = t->journal().List();
    ASSERT_TRUE(entries.ok());
    ASSERT_EQ(entries->size(), 1u);
    ASSERT_TRUE((*inj)->ApplyAt().ok()) << kind;  // fails unless Observe finds the netem
    std::string during = AllQdiscs(t->a(), "va");
    EXPECT_NE(during.find("qdisc tbf f1a0: root"), std::string::npos) << during;
    EXPECT_NE(during.find("rate 1Gbit"), std::string::npos) << during;
    EXPECT_NE(during.find("qdisc netem f1a1: parent f1a0:1"), std::string::npos) << during;
    // A second netem fault on the same rail is refused.
    auto second = CreateFault(kind, p);
    ASSERT_TRUE(second.ok());
    auto refused = Injection::Arm(std::move(second).value(), &t->journal(), t->policy());
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find("already active"), std::string::npos);
    // bandwidth while the netem holds: the rate changes, the netem stays.
    auto bw = ArmBandwidth(*t, "100mbit");
    ASSERT_NE(bw, nullptr);
    ASSERT_TRUE(bw->ApplyAt().ok());
    during = AllQdiscs(t->a(), "va");
    EXPECT_NE(during.find("rate 100Mbit"), std::string::npos) << during;
    EXPECT_NE(during.find("qdisc netem f1a1: parent f1a0:1"), std::string::npos) << during;
    ASSERT_TRUE((*inj)->RevertAt().ok()) << kind;
    EXPECT_TRUE(Connects(*t, 5305));
    ASSERT_TRUE(bw->RevertAt().ok());
    EXPECT_EQ(AllQdiscs(t->a(), "va"), original) << kind;
    entries = t->journal().List();
    ASSERT_TRUE(entries.ok());
    EXPECT_TRUE(entries->empty());
  }
}

}  // namespace
}  // namespace faultline::testing
