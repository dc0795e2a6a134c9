// rank_pause and rank_kill on a real child process that lives in a test namespace: its state
// is read from /proc (T while paused) and its death from waitpid.
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "injector/injection.h"
#include "injector/registry.h"
#include "tests/cpp/injector/test_util.h"

namespace faultline::testing {
namespace {

// A child that enters `netns` and sleeps until killed.
pid_t SpawnRank(const std::string& netns) {
  auto fd = OpenNetns(netns);
  if (!fd.ok()) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::setns(fd->get(), CLONE_NEWNET) != 0) ::_exit(1);
    for (;;) ::pause();
  }
  // Wait until the child is in the namespace.
  for (int i = 0; i < 2000; ++i) {
    auto a = ProcessNetnsInode(pid);
    auto b = NetnsInode(netns);
    if (a.ok() && b.ok() && *a == *b) break;
    ::usleep(1000);
  }
  return pid;
}

struct ChildGuard {
  pid_t pid;
  ~ChildGuard() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

TEST(RankPause, ProcessIsStoppedThenContinued) {
  FL_SKIP_WITHOUT_NETNS(t);
  ChildGuard child{SpawnRank(t->a())};
  ASSERT_GT(child.pid, 0);
  auto fault = CreateFault("rank_pause", {{"netns", t->a()}, {"pid", child.pid}});
  ASSERT_TRUE(fault.ok()) << fault.status().ToString();
  auto inj = Injection::Arm(std::move(fault).value(), &t->journal(), t->policy());
  ASSERT_TRUE(inj.ok()) << inj.status().ToString();
  ASSERT_TRUE((*inj)->ApplyAt().ok());
  EXPECT_EQ(ProcState(child.pid), 'T');
  ASSERT_TRUE((*inj)->RevertAt().ok());
  EXPECT_NE(ProcState(child.pid), 'T');
}

TEST(RankPause, ProcessOutsideTheNamespaceIsRefused) {
  FL_SKIP_WITHOUT_NETNS(t);
  ChildGuard child{SpawnRank(t->b())};
  ASSERT_GT(child.pid, 0);
  auto fault = CreateFault("rank_pause", {{"netns", t->a()}, {"pid", child.pid}});
  ASSERT_TRUE(fault.ok());
  auto inj = Injection::Arm(std::move(fault).value(), &t->journal(), t->policy());
  ASSERT_FALSE(inj.ok());
  EXPECT_EQ(inj.status().code(), Code::kPermissionDenied) << inj.status().ToString();
  EXPECT_NE(ProcState(child.pid), 'T');
}

TEST(RankKill, ProcessDiesOfSigkill) {
  FL_SKIP_WITHOUT_NETNS(t);
  ChildGuard child{SpawnRank(t->a())};
  ASSERT_GT(child.pid, 0);
  auto fault = CreateFault("rank_kill", {{"netns", t->a()}, {"pid", child.pid}});
  ASSERT_TRUE(fault.ok());
  auto inj = Injection::Arm(std::move(fault).value(), &t->journal(), t->policy());
  ASSERT_TRUE(inj.ok()) << inj.status().ToString();
  ASSERT_TRUE((*inj)->ApplyAt().ok());
  int status = 0;
  ASSERT_EQ(::waitpid(child.pid, &status, 0), child.pid);
  child.pid = -1;
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  ASSERT_TRUE((*inj)->RevertAt().ok());
}

}  // namespace
}  // namespace faultline::testing
