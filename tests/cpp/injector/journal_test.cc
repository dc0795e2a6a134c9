// The journal: a child applies faults and is SIGKILLed; cleanup restores everything, a second
// cleanup is a no-op. State is read with ip/tc/nft, not from the journal.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "injector/injection.h"
#include "injector/registry.h"
#include "tests/cpp/injector/test_util.h"

namespace faultline::testing {
namespace {

bool HasFlag(const nlohmann::json& link, const char* flag) {
  if (link.is_null()) return false;
  for (const auto& f : link.value("flags", nlohmann::json::array())) {
    if (f == flag) return true;
  }
  return false;
}

// In the child: arm and apply, leak the injections (never reverted), report, wait for death.
[[noreturn]] void ChildApplies(TwoHosts& t, int ready_fd) {
  const std::pair<const char*, nlohmann::json> faults[] = {
      {"bandwidth", {{"netns", t.a()}, {"dev", "va"}, {"rate", "10mbit"}}},
      {"loss", {{"netns", t.b()}, {"dev", "vb"}, {"percent", "50"}}},
      {"port_drop", {{"netns", t.a()}, {"dev", "va"}, {"remove", true}}},
      {"link_down", {{"netns", t.b()}, {"dev", "vb"}}},
  };
  auto policy = TargetPolicy::Create({}, nullptr, false);
  for (const auto& [kind, params] : faults) {
    auto f = CreateFault(kind, params);
    if (!f.ok()) ::_exit(10);
    auto inj = Injection::Arm(std::move(f).value(), &t.journal(), *policy);
    if (!inj.ok()) ::_exit(11);
    if (!(*inj)->ApplyAt().ok()) ::_exit(12);
    (void)std::move(inj).value().release();  // leaked on purpose: the kill comes first
  }
  char c = 'r';
  if (::write(ready_fd, &c, 1) != 1) ::_exit(13);
  for (;;) ::pause();
}

TEST(Journal, CleanupAfterSigkillRestoresEverythingAndIsIdempotent) {
  FL_SKIP_WITHOUT_NETNS(t);
  std::string qdisc_before = TcQdiscs(t->a(), "va");
  std::string addr_before = Sh("ip -n " + t->a() + " -4 -o addr show dev va | awk '{print $4}'");
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(pipefd[0]);
    ChildApplies(*t, pipefd[1]);
  }
  ::close(pipefd[1]);
  char c = 0;
  ssize_t n = ::read(pipefd[0], &c, 1);
  ::close(pipefd[0]);
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_EQ(n, 1) << "child failed before applying (exit " << WEXITSTATUS(status) << ")";

  // The faults outlive their process.
  EXPECT_TRUE(IpLink(t->a(), "va").is_null());
  EXPECT_FALSE(HasFlag(IpLink(t->b(), "vb"), "UP"));
  EXPECT_NE(NftTables(t->b()), "");
  EXPECT_NE(Sh("ip netns list").find("fl-park-" + std::to_string(pid)), std::string::npos);
  auto entries = t->journal().List();
  ASSERT_TRUE(entries.ok());
  EXPECT_EQ(entries->size(), 4u);

  CleanupReport first = CleanupJournal(t->journal());
  EXPECT_EQ(first.undone, 4);
  EXPECT_EQ(first.failed, 0) << first.ToJson().dump();
  nlohmann::json va = IpLink(t->a(), "va");
  ASSERT_FALSE(va.is_null());
  EXPECT_TRUE(HasFlag(va, "UP"));
  EXPECT_TRUE(HasFlag(IpLink(t->b(), "vb"), "UP"));
  EXPECT_EQ(NftTables(t->b()), "");
  EXPECT_EQ(qdisc_before, TcQdiscs(t->a(), "va"));
  EXPECT_EQ(addr_before, Sh("ip -n " + t->a() + " -4 -o addr show dev va | awk '{print $4}'"));
  EXPECT_EQ(Sh("ip netns list").find("fl-park-" + std::to_string(pid)), std::string::npos);

  std::string links = Sh("ip -n " + t->a() + " -j link") + Sh("ip -n " + t->b() + " -j link");
  CleanupReport second = CleanupJournal(t->journal());
  EXPECT_EQ(second.undone, 0);
  EXPECT_EQ(second.failed, 0);
  EXPECT_EQ(links, Sh("ip -n " + t->a() + " -j link") + Sh("ip -n " + t->b() + " -j link"));
}

TEST(Journal, EntriesAreDurableFilesRemovedOnRevert) {
  FL_SKIP_WITHOUT_NETNS(t);
  auto id = t->journal().Append("link_down", {{"netns", t->a()}, {"dev", "va"}, {"up", true}});
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(Sh("ls " + t->journal_dir()), *id + ".json\n");
  ASSERT_TRUE(t->journal().Remove(*id).ok());
  EXPECT_EQ(Sh("ls " + t->journal_dir()), "");
  EXPECT_EQ(t->journal().Remove(*id).code(), Code::kNotFound);
}

}  // namespace
}  // namespace faultline::testing

namespace faultline::testing {
namespace {

// Entry files are outside input after a crash (or an edit): a field of the wrong type is an
// error of that entry or reads as 0, never an exception.
TEST(JournalEntry, WrongTypesAreErrorsNotExceptions) {
  auto ok = ParseJournalEntry(R"({"kind":"netns","undo":{"netns":"x"},"pid":"12",
                                  "created_mono_ns":[1]})",
                              "a", "/j/a.json");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->kind, "netns");
  EXPECT_EQ(ok->pid, 0);
  EXPECT_EQ(ok->created_mono_ns, 0);
  EXPECT_EQ(ok->id, "a");
  for (const char* bad : {R"({"kind":7,"undo":{}})", R"({"kind":"netns","undo":3})",
                          R"({"kind":"netns"})", "[1]", "{", ""}) {
    auto r = ParseJournalEntry(bad, "b", "/j/b.json");
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("/j/b.json"), std::string::npos);
    }
  }
  // An undo with a wrong-typed field fails that entry's undo, with the reason.
  Status st = UndoJournalEntry("link_down", {{"netns", 5}, {"dev", "x"}});
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("malformed undo"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace faultline::testing
