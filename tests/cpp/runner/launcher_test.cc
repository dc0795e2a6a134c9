// LocalNetnsLauncher: ranks run in their host's namespace (checked against /proc), exit
// codes and signals are reported, the watchdog kills hung ranks at the deadline, a whole world
// starts at once (all or nothing), fork launches run a body with a channel to the parent, and
// no process outlives the launcher.
#include "runner/exec/launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/clock.h"
#include "injector/netns.h"
#include "runner/exec/topology.h"
#include "tests/cpp/runner/net_test_util.h"

namespace faultline::runner::testing {
namespace {

constexpr int64_t kSecond = 1'000'000'000;

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Processes (zombies included) whose parent is this process, from /proc.
int ChildrenOfThisProcess() {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string stat = ReadFile(e.path().string() + "/stat");
    size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream rest(stat.substr(paren + 2));
    char state;
    int ppid = 0;
    rest >> state >> ppid;
    if (ppid == ::getpid()) ++n;
  }
  return n;
}

LaunchSpec Spec(std::vector<std::string> argv, int host = 0, int rank = 0) {
  LaunchSpec s;
  s.argv = std::move(argv);
  s.placement.host = host;
  s.placement.global_rank = rank;
  return s;
}

// A launcher whose single host is the test's own namespace.
std::unique_ptr<LocalNetnsLauncher> HereLauncher(const TempDir& logs) {
  auto l = LocalNetnsLauncher::Create({""}, logs.path());
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  return l.ok() ? std::move(l).value() : nullptr;
}

TEST(Launcher, RankRunsInItsHostNamespace) {
  TempDir journal, logs;
  TopologyOptions o;
  o.run_id = NewRunId();
  o.hosts = 2;
  o.rails = 1;
  o.rail_gbps = 0;
  o.management = false;
  std::string skip;
  auto topo = BuildOrSkip(o, journal.path(), &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  ASSERT_NE(topo, nullptr);
  auto launcher =
      LocalNetnsLauncher::Create({topo->host(0).netns, topo->host(1).netns}, logs.path());
  ASSERT_TRUE(launcher.ok());
  auto ino0 = NetnsInode(topo->host(0).netns);
  auto ino1 = NetnsInode(topo->host(1).netns);
  ASSERT_TRUE(ino0.ok() && ino1.ok());
  ASSERT_NE(*ino0, *ino1);

  // Seen from inside: the rank reads its own /proc/self/ns/net.
  auto a = (*launcher)->Start(Spec({"readlink", "/proc/self/ns/net"}, 0, 0));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto sa = (*launcher)->Wait(*a, MonoNow() + 5 * kSecond);
  ASSERT_TRUE(sa.ok());
  EXPECT_TRUE(sa->success()) << sa->ToString();
  EXPECT_EQ(ReadFile((*launcher)->StdoutPath(*a)), "net:[" + std::to_string(*ino0) + "]\n");
  EXPECT_EQ((*launcher)->StdoutPath(*a), logs.path() + "/rank0.out");

  // Seen from outside: /proc/PID/ns/net of a running rank on host 1.
  auto b = (*launcher)->Start(Spec({"sleep", "30"}, 1, 1));
  ASSERT_TRUE(b.ok());
  auto pid = (*launcher)->LocalPid(*b);
  ASSERT_TRUE(pid.has_value());
  auto inode = ProcessNetnsInode(*pid);
  ASSERT_TRUE(inode.ok());
  EXPECT_EQ(*inode, *ino1);
  // The rank sees only its host's links.
  auto c = (*launcher)->Start(Spec({"cat", "/proc/net/dev"}, 1, 2));
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*launcher)->Wait(*c, MonoNow() + 5 * kSecond)->success());
  std::string devs = ReadFile((*launcher)->StdoutPath(*c));
  EXPECT_NE(devs.find(" r0:"), std::string::npos) << devs;
  EXPECT_EQ(devs.find("h1r0"), std::string::npos) << devs;

  EXPECT_TRUE((*launcher)->Kill(*b, SIGTERM).ok());
  auto sb = (*launcher)->Wait(*b, MonoNow() + 5 * kSecond);
  ASSERT_TRUE(sb.ok());
  EXPECT_EQ(sb->state, ExitStatus::State::kSignaled);
  EXPECT_EQ(sb->signal, SIGTERM);
  EXPECT_EQ(sb->ToString(), "killed by SIGTERM");
  // Killing an exited rank is fine.
  EXPECT_TRUE((*launcher)->Kill(*b, SIGKILL).ok());
}

TEST(Launcher, ExitCodesSignalsEnvironmentAndLogs) {
  TempDir logs;
  auto l = HereLauncher(logs);
  ASSERT_NE(l, nullptr);
  auto seven = l->Start(Spec({"sh", "-c", "exit 7"}, 0, 0));
  LaunchSpec env_spec = Spec({"sh", "-c", "exit $FL_LAUNCHER_TEST_CODE"}, 0, 1);
  env_spec.env = {"FL_LAUNCHER_TEST_CODE=42"};
  auto env = l->Start(env_spec);
  LaunchSpec logs_spec = Spec({"sh", "-c", "echo to-out; echo to-err >&2; cat"}, 0, 2);
  logs_spec.name = "talker";
  auto talk = l->Start(logs_spec);
  auto sig = l->Start(Spec({"sh", "-c", "kill -USR1 $$"}, 0, 3));
  ASSERT_TRUE(seven.ok() && env.ok() && talk.ok() && sig.ok());
  EXPECT_EQ(l->size(), 4);

  const int64_t deadline = MonoNow() + 5 * kSecond;
  auto s7 = l->Wait(*seven, deadline);
  auto s42 = l->Wait(*env, deadline);
  auto st = l->Wait(*talk, deadline);
  auto ss = l->Wait(*sig, deadline);
  ASSERT_TRUE(s7.ok() && s42.ok() && st.ok() && ss.ok());
  EXPECT_EQ(s7->state, ExitStatus::State::kExited);
  EXPECT_EQ(s7->code, 7);
  EXPECT_EQ(s7->ToString(), "exited 7");
  EXPECT_FALSE(s7->success());
  EXPECT_EQ(s42->code, 42);
  // stdin is /dev/null: `cat` ends at once.
  EXPECT_TRUE(st->success()) << st->ToString();
  EXPECT_EQ(ReadFile(logs.path() + "/talker.out"), "to-out\n");
  EXPECT_EQ(ReadFile(logs.path() + "/talker.err"), "to-err\n");
  EXPECT_EQ(ss->state, ExitStatus::State::kSignaled);
  EXPECT_EQ(ss->signal, SIGUSR1);
  EXPECT_EQ(l->status(*seven).code, 7);
}

TEST(Launcher, StartFailuresLeaveNoProcess) {
  TempDir logs;
  auto l = LocalNetnsLauncher::Create({"", "fl-no-such-namespace-x"}, logs.path());
  ASSERT_TRUE(l.ok());
  auto missing = (*l)->Start(Spec({"faultline-no-such-program"}));
  EXPECT_EQ(missing.status().code(), Code::kNotFound) << missing.status().ToString();
  auto not_exec = (*l)->Start(Spec({"/etc/hostname"}));
  EXPECT_FALSE(not_exec.ok());
  auto bad_host = (*l)->Start(Spec({"true"}, 2));
  EXPECT_EQ(bad_host.status().code(), Code::kInvalidArgument);
  auto no_ns = (*l)->Start(Spec({"true"}, 1));
  EXPECT_EQ(no_ns.status().code(), Code::kNotFound) << no_ns.status().ToString();
  EXPECT_FALSE((*l)->Start(Spec({})).ok());
  EXPECT_EQ((*l)->size(), 0);
  EXPECT_EQ((*l)->Wait(0, MonoNow()).status().code(), Code::kInvalidArgument);
  // No child of this process is left, not even a zombie.
  EXPECT_EQ(ChildrenOfThisProcess(), 0);
}

TEST(Launcher, WaitHonoursItsDeadline) {
  TempDir logs;
  auto l = HereLauncher(logs);
  ASSERT_NE(l, nullptr);
  auto h = l->Start(Spec({"sleep", "30"}));
  ASSERT_TRUE(h.ok());
  MonoNs t0 = MonoNow();
  auto s = l->Wait(*h, t0 + 200'000'000);
  MonoNs waited = MonoNow() - t0;
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->running());
  EXPECT_GE(waited, 190'000'000);
  EXPECT_LT(waited, 2 * kSecond);
  EXPECT_TRUE(l->Wait(*h, 0)->running()) << "a past deadline polls";
  ASSERT_TRUE(l->Kill(*h, SIGKILL).ok());
  auto k = l->Wait(*h, MonoNow() + 5 * kSecond);
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->signal, SIGKILL);
  EXPECT_FALSE(k->killed_by_watchdog);
}

TEST(Launcher, WatchdogKillsHungRanksAtTheDeadline) {
  TempDir logs;
  auto l = HereLauncher(logs);
  ASSERT_NE(l, nullptr);
  auto done = l->Start(Spec({"true"}, 0, 0));
  auto hung = l->Start(Spec({"sleep", "30"}, 0, 1));
  // Ignores SIGTERM: only SIGKILL stops it.
  auto stubborn = l->Start(Spec({"sh", "-c", "trap '' TERM; sleep 30; exit 3"}, 0, 2));
  auto late = l->Start(Spec({"sh", "-c", "sleep 0.2; exit 5"}, 0, 3));
  ASSERT_TRUE(done.ok() && hung.ok() && stubborn.ok() && late.ok());
  std::vector<pid_t> pids;
  for (int h = 0; h < l->size(); ++h) pids.push_back(*l->LocalPid(h));

  MonoNs t0 = MonoNow();
  WaitAllReport report = l->WaitAll(t0 + 800'000'000);
  MonoNs took = MonoNow() - t0;
  EXPECT_GE(took, 790'000'000);
  EXPECT_LT(took, 3 * kSecond);
  EXPECT_TRUE(report.hung());
  EXPECT_EQ(report.killed, (std::vector<int>{1, 2}));
  ASSERT_EQ(report.statuses.size(), 4u);
  EXPECT_TRUE(report.statuses[0].success());
  for (int h : {1, 2}) {
    EXPECT_EQ(report.statuses[h].state, ExitStatus::State::kSignaled);
    EXPECT_EQ(report.statuses[h].signal, SIGKILL);
    EXPECT_TRUE(report.statuses[h].killed_by_watchdog);
    EXPECT_EQ(report.statuses[h].ToString(), "killed by SIGKILL (watchdog)");
    EXPECT_EQ(ProcState(pids[h]), 'X') << "rank " << h << " still there";
  }
  EXPECT_EQ(report.statuses[3].code, 5);
  EXPECT_FALSE(report.statuses[3].killed_by_watchdog);

  // Without hung ranks WaitAll returns as soon as all have exited.
  TempDir logs2;
  auto quick = HereLauncher(logs2);
  ASSERT_NE(quick, nullptr);
  ASSERT_TRUE(quick->Start(Spec({"true"})).ok());
  t0 = MonoNow();
  WaitAllReport ok = quick->WaitAll(t0 + 30 * kSecond);
  EXPECT_LT(MonoNow() - t0, 5 * kSecond);
  EXPECT_FALSE(ok.hung());
}

TEST(Launcher, DestructorKillsRanksAndTheirHelpers) {
  TempDir logs;
  pid_t rank_pid = 0;
  int helper_pid = 0;
  {
    auto l = HereLauncher(logs);
    ASSERT_NE(l, nullptr);
    auto h = l->Start(Spec({"sh", "-c", "sleep 30 & echo $!; wait"}));
    ASSERT_TRUE(h.ok());
    rank_pid = *l->LocalPid(*h);
    const MonoNs give_up = MonoNow() + 5 * kSecond;
    while (helper_pid == 0 && MonoNow() < give_up) {
      std::string out = ReadFile(l->StdoutPath(*h));
      if (!out.empty() && out.back() == '\n') helper_pid = std::stoi(out);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_GT(helper_pid, 0);
    // The helper is alive and asleep (it may still be starting `sleep` when its pid is out).
    char st = ProcState(helper_pid);
    while (st == 'R' && MonoNow() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      st = ProcState(helper_pid);
    }
    EXPECT_EQ(st, 'S');
  }
  // The rank is reaped by the destructor; the helper is killed with its group (it may stay a
  // zombie for a moment until its new parent reaps it).
  EXPECT_EQ(ProcState(rank_pid), 'X');
  const MonoNs give_up = MonoNow() + 5 * kSecond;
  char state = ProcState(helper_pid);
  while (state != 'X' && state != 'Z' && MonoNow() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    state = ProcState(helper_pid);
  }
  EXPECT_TRUE(state == 'X' || state == 'Z') << "helper state " << state;
}

std::vector<LaunchSpec> SleepWorld(int ranks) {
  std::vector<LaunchSpec> world;
  for (int g = 0; g < ranks; ++g) world.push_back(Spec({"sleep", "30"}, 0, g));
  return world;
}

TEST(Launcher, StartWorldStartsEveryRankAndReportsTheOneKilled) {
  TempDir logs;
  auto l = HereLauncher(logs);
  ASSERT_NE(l, nullptr);
  auto handles = l->StartWorld(SleepWorld(4));
  ASSERT_TRUE(handles.ok()) << handles.status().ToString();
  EXPECT_EQ(*handles, (std::vector<int>{0, 1, 2, 3}));
  ASSERT_EQ(l->size(), 4);
  std::vector<pid_t> pids;
  for (int h : *handles) {
    auto pid = l->LocalPid(h);
    ASSERT_TRUE(pid.has_value());
    EXPECT_NE(ProcState(*pid), 'X') << "rank " << h << " not running";
    EXPECT_TRUE(l->status(h).running());
    EXPECT_EQ(l->StdoutPath(h), logs.path() + "/rank" + std::to_string(h) + ".out");
    pids.push_back(*pid);
  }
  EXPECT_EQ(ChildrenOfThisProcess(), 4);

  // One rank dies (a rank_kill): reported as killed by SIGKILL, not by the watchdog.
  ASSERT_TRUE(l->Kill(2, SIGKILL).ok());
  auto dead = l->Wait(2, MonoNow() + 5 * kSecond);
  ASSERT_TRUE(dead.ok());
  EXPECT_EQ(dead->state, ExitStatus::State::kSignaled);
  EXPECT_EQ(dead->signal, SIGKILL);
  for (int h : {0, 1, 3}) EXPECT_TRUE(l->Wait(h, 0)->running()) << "rank " << h;

  // The others are still there until the watchdog ends them; then none is left.
  WaitAllReport report = l->WaitAll(MonoNow() + 200'000'000);
  EXPECT_EQ(report.killed, (std::vector<int>{0, 1, 3}));
  ASSERT_EQ(report.statuses.size(), 4u);
  EXPECT_EQ(report.statuses[2].signal, SIGKILL);
  EXPECT_FALSE(report.statuses[2].killed_by_watchdog);
  EXPECT_EQ(report.statuses[2].ToString(), "killed by SIGKILL");
  for (int h : {0, 1, 3}) EXPECT_TRUE(report.statuses[h].killed_by_watchdog);
  for (pid_t pid : pids) EXPECT_EQ(ProcState(pid), 'X');
  EXPECT_EQ(ChildrenOfThisProcess(), 0);
}

TEST(Launcher, StartWorldIsAllOrNothing) {
  TempDir logs;
  auto l = HereLauncher(logs);
  ASSERT_NE(l, nullptr);
  ASSERT_TRUE(l->Start(Spec({"sleep", "30"}, 0, 9)).ok());  // an earlier start stays
  std::vector<LaunchSpec> world = SleepWorld(4);
  world[2].argv = {"faultline-no-such-program"};
  auto handles = l->StartWorld(world);
  EXPECT_EQ(handles.status().code(), Code::kNotFound) << handles.status().ToString();
  EXPECT_EQ(l->size(), 1);
  // Ranks 0 and 1 of the world were started, then killed and reaped: only the earlier one is
  // a child of this process.
  EXPECT_EQ(ChildrenOfThisProcess(), 1);
  auto again = l->StartWorld(SleepWorld(2));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, (std::vector<int>{1, 2}));
}

TEST(Launcher, ForkLaunchRunsBodiesWithAChannelToTheParent) {
  // No log directory: the ranks keep the test's stdout and stderr.
  auto created = LocalNetnsLauncher::Create({""}, "");
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  LocalNetnsLauncher& l = **created;
  std::vector<LaunchSpec> world(3);
  for (int g = 0; g < 3; ++g) {
    world[g].placement.global_rank = g;
    world[g].body = [g](int channel_fd) {
      const std::string said = "rank " + std::to_string(g);
      if (::write(channel_fd, said.data(), said.size()) < 0) return 99;
      if (g == 1) ::pause();  // hangs until killed
      return 10 + g;
    };
  }
  auto handles = l.StartWorld(world);
  ASSERT_TRUE(handles.ok()) << handles.status().ToString();
  EXPECT_EQ(l.StdoutPath(0), "");
  // Each channel carries only its own rank's words and ends when that rank ends.
  auto read_all = [&](int h) {
    std::string got;
    char buf[64];
    ssize_t n;
    while ((n = ::read(l.ChannelFd(h), buf, sizeof(buf))) > 0) got.append(buf, n);
    return got;
  };
  EXPECT_EQ(read_all(0), "rank 0");
  EXPECT_EQ(read_all(2), "rank 2");
  ::fcntl(l.ChannelFd(1), F_SETFL, O_NONBLOCK);
  const MonoNs give_up = MonoNow() + 5 * kSecond;
  std::string one;
  while (one.size() < 6 && MonoNow() < give_up) {
    char buf[64];
    const ssize_t n = ::read(l.ChannelFd(1), buf, sizeof(buf));
    if (n > 0) one.append(buf, n);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(one, "rank 1");
  WaitAllReport report = l.WaitAll(MonoNow() + 300'000'000);
  EXPECT_EQ(report.killed, (std::vector<int>{1}));
  EXPECT_EQ(report.statuses[0].code, 10);
  EXPECT_EQ(report.statuses[2].code, 12);
  EXPECT_TRUE(report.statuses[1].killed_by_watchdog);
  EXPECT_EQ(ChildrenOfThisProcess(), 0);
}

}  // namespace
}  // namespace faultline::runner::testing
