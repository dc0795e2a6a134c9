// Refusals: each a clear error and no change to the system (links, qdiscs, journal).
#include <unistd.h>

#include "base/units.h"
#include "injector/injection.h"
#include "injector/netem.h"
#include "injector/netns.h"
#include "injector/registry.h"
#include "tests/cpp/injector/test_util.h"

namespace faultline::testing {
namespace {

Status ArmStatus(TwoHosts& t, const std::string& kind, const nlohmann::json& params,
                 const TargetPolicy& policy) {
  auto fault = CreateFault(kind, params);
  if (!fault.ok()) return fault.status();
  auto inj = Injection::Arm(std::move(fault).value(), &t.journal(), policy);
  return inj.ok() ? Status::Ok() : inj.status();
}

size_t JournalSize(TwoHosts& t) {
  auto e = t.journal().List();
  return e.ok() ? e->size() : 999;
}

TEST(Refusal, UnknownInterface) {
  FL_SKIP_WITHOUT_NETNS(t);
  std::string before = Sh("ip -n " + t->a() + " -j link");
  Status st = ArmStatus(*t, "link_down", {{"netns", t->a()}, {"dev", "nope0"}}, t->policy());
  EXPECT_EQ(st.code(), Code::kNotFound);
  EXPECT_NE(st.message().find("unknown interface 'nope0'"), std::string::npos) << st.message();
  EXPECT_EQ(before, Sh("ip -n " + t->a() + " -j link"));
  EXPECT_EQ(JournalSize(*t), 0u);
}

TEST(Refusal, UnknownNamespace) {
  FL_SKIP_WITHOUT_NETNS(t);
  Status st =
      ArmStatus(*t, "link_down", {{"netns", "fl-does-not-exist"}, {"dev", "va"}}, t->policy());
  EXPECT_EQ(st.code(), Code::kNotFound);
  EXPECT_NE(st.message().find("does not exist"), std::string::npos) << st.message();
}

TEST(Refusal, InterfaceOutsideTheAllowlist) {
  FL_SKIP_WITHOUT_NETNS(t);
  // A namespace without the project prefix and not in the journal: the user's.
  std::string name = "user" + std::to_string(::getpid());
  auto ns = OwnedNetns::Create(name);
  ASSERT_TRUE(ns.ok()) << ns.status().ToString();
  std::string before = Sh("ip -n " + name + " -j link");
  Status st = ArmStatus(*t, "link_flap", {{"netns", name}, {"dev", "lo"}}, t->policy());
  EXPECT_EQ(st.code(), Code::kPermissionDenied);
  EXPECT_NE(st.message().find("outside the allowlist"), std::string::npos) << st.message();
  auto other = TargetPolicy::Create({name + "/eth9"}, &t->journal(), false);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(ArmStatus(*t, "link_down", {{"netns", name}, {"dev", "lo"}}, *other).code(),
            Code::kPermissionDenied);
  EXPECT_EQ(before, Sh("ip -n " + name + " -j link"));
  EXPECT_EQ(JournalSize(*t), 0u);
  // Allowlisted, the same interface is accepted (loopback is down: nothing to take down).
  auto allowed = TargetPolicy::Create({name + "/lo"}, &t->journal(), false);
  ASSERT_TRUE(allowed.ok());
  EXPECT_TRUE(allowed->CheckInterface(name, "lo").ok());
  EXPECT_FALSE(TargetPolicy::Create({"no-slash"}, nullptr, false).ok());
}

// "." is the caller's own namespace (a real host's interfaces): usable by that name, allowed
// only through the allowlist ("./DEV"), never created or deleted; NameOfOwnNetns says which
// named namespace it is where one names it.
TEST(Refusal, OwnNamespaceIsReachedOnlyThroughTheAllowlist) {
  FL_SKIP_WITHOUT_NETNS(t);
  EXPECT_TRUE(ValidateNetnsName(kOwnNetns).ok());
  EXPECT_FALSE(ValidateNetnsName("..").ok());
  EXPECT_TRUE(NetnsExists(kOwnNetns));
  EXPECT_EQ(CreateNetns(kOwnNetns).code(), Code::kInvalidArgument);
  EXPECT_EQ(DeleteNetns(kOwnNetns).code(), Code::kInvalidArgument);
  EXPECT_TRUE(NetnsExists(kOwnNetns));
  std::string name = "own" + std::to_string(::getpid());
  auto ns = OwnedNetns::Create(name);
  ASSERT_TRUE(ns.ok()) << ns.status().ToString();
  EXPECT_NE(NameOfOwnNetns(), name);
  {
    auto in = ScopedNetns::Enter(name);
    ASSERT_TRUE(in.ok()) << in.status().ToString();
    // This (the main) thread is in `name` now: "." is that namespace, and its name is found.
    EXPECT_EQ(NameOfOwnNetns(), name);
    auto own = NetnsInode(kOwnNetns);
    auto named = NetnsInode(name);
    ASSERT_TRUE(own.ok() && named.ok());
    EXPECT_EQ(*own, *named);
    const std::string before = Sh("ip -n " + name + " -j link");
    // Not allowlisted: refused, whatever the interface.
    Status st = ArmStatus(*t, "link_down", {{"netns", kOwnNetns}, {"dev", "lo"}}, t->policy());
    EXPECT_EQ(st.code(), Code::kPermissionDenied) << st.ToString();
    auto other = TargetPolicy::Create({"./eth9"}, &t->journal(), false);
    ASSERT_TRUE(other.ok()) << other.status().ToString();
    EXPECT_EQ(other->CheckInterface(kOwnNetns, "lo").code(), Code::kPermissionDenied);
    auto allowed = TargetPolicy::Create({"./lo"}, &t->journal(), false);
    ASSERT_TRUE(allowed.ok());
    EXPECT_TRUE(allowed->CheckInterface(kOwnNetns, "lo").ok());
    EXPECT_EQ(allowed->CheckInterface(kOwnNetns, "nope0").code(), Code::kPermissionDenied);
    auto all = TargetPolicy::Create({"./*"}, &t->journal(), false);
    ASSERT_TRUE(all.ok());
    EXPECT_EQ(all->CheckInterface(kOwnNetns, "nope0").code(), Code::kNotFound);
    EXPECT_EQ(before, Sh("ip -n " + name + " -j link"));  // the refusals changed nothing
    // A fault on "." acts on this namespace's interface: loopback goes down and comes back.
    Sh("ip -n " + name + " link set lo up");
    auto f = CreateFault("link_down", {{"netns", kOwnNetns}, {"dev", "lo"}});
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    auto inj = Injection::Arm(std::move(f).value(), &t->journal(), *allowed);
    ASSERT_TRUE(inj.ok()) << inj.status().ToString();
    ASSERT_TRUE((*inj)->ApplyAt(0).ok());
    EXPECT_EQ(Sh("ip -n " + name + " -o link show lo").find("state UP"), std::string::npos);
    EXPECT_EQ(JournalSize(*t), 1u);
    ASSERT_TRUE((*inj)->RevertAt(0).ok());
    EXPECT_EQ(JournalSize(*t), 0u);
    EXPECT_NE(Sh("ip -n " + name + " -o link show lo").find("UP"), std::string::npos);
  }
  EXPECT_EQ(JournalSize(*t), 0u);
}

TEST(Refusal, JournaledNamespaceCountsAsProjectOwned) {
  FL_SKIP_WITHOUT_NETNS(t);
  std::string name = "topo" + std::to_string(::getpid());
  ASSERT_TRUE(JournalNetns(t->journal(), name).ok());
  auto ns = OwnedNetns::Create(name);
  ASSERT_TRUE(ns.ok());
  EXPECT_TRUE(t->policy().CheckInterface(name, "lo").ok());
  CleanupReport r = CleanupJournal(t->journal());
  EXPECT_EQ(r.undone, 1);
  EXPECT_FALSE(NetnsExists(name));
}

TEST(Refusal, UnknownKindAndUnknownParameter) {
  auto f = CreateFault("meteor_strike", {{"netns", "fl-x"}});
  EXPECT_EQ(f.status().code(), Code::kNotFound);
  EXPECT_NE(f.status().message().find("unknown fault kind 'meteor_strike'"), std::string::npos);
  auto g = CreateFault("link_down", {{"netns", "fl-x"}, {"dev", "a"}, {"sidee", "host"}});
  EXPECT_EQ(g.status().code(), Code::kInvalidArgument);
  EXPECT_NE(g.status().message().find("unknown parameter 'sidee'"), std::string::npos);
}

TEST(Refusal, MalformedDurations) {
  for (const char* bad : {"10", "abc", "5 parsecs", "-1s", "1.2.3ms", ""}) {
    auto d = ParseDuration(bad);
    EXPECT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.status().code(), Code::kInvalidArgument);
  }
  auto f = CreateFault("link_flap", {{"netns", "fl-x"}, {"dev", "a"}, {"down", "20"}});
  EXPECT_EQ(f.status().code(), Code::kInvalidArgument);
  EXPECT_NE(f.status().message().find("malformed duration"), std::string::npos)
      << f.status().message();
}

TEST(Refusal, NetemMissingIsAClearErrorAndChangesNothing) {
  FL_SKIP_WITHOUT_NETNS(t);
  std::string before = TcQdiscs(t->a(), "va");
  for (const char* kind : {"delay", "jitter", "corrupt", "reorder"}) {
    nlohmann::json p = {{"netns", t->a()}, {"dev", "va"}};
    if (std::string(kind) == "delay") p["delay"] = "10ms";
    if (std::string(kind) == "jitter") p["jitter"] = "5ms";
    if (std::string(kind) == "corrupt" || std::string(kind) == "reorder") p["percent"] = "5";
    if (ProbeNetem().ok()) {
      // The kernel has netem: the fault must work instead.
      auto fault = CreateFault(kind, p);
      ASSERT_TRUE(fault.ok());
      auto inj = Injection::Arm(std::move(fault).value(), &t->journal(), t->policy());
      ASSERT_TRUE(inj.ok()) << inj.status().ToString();
      ASSERT_TRUE((*inj)->ApplyAt().ok());
      EXPECT_NE(TcQdiscs(t->a(), "va").find("netem"), std::string::npos);
      ASSERT_TRUE((*inj)->RevertAt().ok());
    } else {
      Status st = ArmStatus(*t, kind, p, t->policy());
      EXPECT_EQ(st.code(), Code::kUnavailable) << kind;
      EXPECT_NE(st.message().find("sch_netem"), std::string::npos) << st.message();
    }
    EXPECT_EQ(before, TcQdiscs(t->a(), "va")) << kind;
    EXPECT_EQ(JournalSize(*t), 0u) << kind;
  }
}

TEST(Units, ParsesDurationsRatesSizesAndPercentages) {
  EXPECT_EQ(*ParseDuration("200ms"), 200'000'000);
  EXPECT_EQ(*ParseDuration("1.5s"), 1'500'000'000);
  EXPECT_EQ(*ParseDuration("250us"), 250'000);
  EXPECT_EQ(*ParseDuration("2m"), 120'000'000'000);
  EXPECT_EQ(*ParseRate("100mbit"), 100'000'000u);
  EXPECT_EQ(*ParseRate("25Gbps"), 25'000'000'000u);
  EXPECT_FALSE(ParseRate("100").ok());
  EXPECT_EQ(*ParseSize("64KiB"), 65536u);
  EXPECT_DOUBLE_EQ(*ParsePercent("12.5%"), 12.5);
  EXPECT_FALSE(ParsePercent("101").ok());
}

}  // namespace
}  // namespace faultline::testing
