// FindSlurmTaskPid (runner/exec/agent.h): the agent looks for a Slurm task's rank in its
// host's network namespace only. Job ids are unique per Slurm controller, not per machine: a
// process of another cluster's job with the same ids, in another namespace, is not the task.
// Needs root (a network namespace); skips with the reason otherwise.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "base/status.h"
#include "injector/netns.h"
#include "runner/exec/agent.h"

namespace faultline::runner {
namespace {

// A stand-in for task 0 of step `job`.0: `sleep 30` with the task's Slurm environment, in a
// network namespace of its own when `own_netns` (through unshare(1), which execs sleep).
pid_t StartTask(const std::string& job, bool own_netns) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  const std::string id = "SLURM_JOB_ID=" + job;
  char* env[] = {const_cast<char*>("SLURM_PROCID=0"), const_cast<char*>(id.c_str()),
                 const_cast<char*>("SLURM_STEP_ID=0"), const_cast<char*>("PATH=/usr/bin:/bin"),
                 nullptr};
  if (own_netns) {
    char* argv[] = {const_cast<char*>("unshare"), const_cast<char*>("--net"),
                    const_cast<char*>("sleep"), const_cast<char*>("30"), nullptr};
    execve("/usr/bin/unshare", argv, env);
  } else {
    char* argv[] = {const_cast<char*>("sleep"), const_cast<char*>("30"), nullptr};
    execve("/bin/sleep", argv, env);
  }
  _exit(127);
}

// Whether `pid` runs sleep by now (unshare has made the namespace and exec'ed it).
bool RunsSleep(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
  std::string argv0;
  std::getline(in, argv0, '\0');
  return argv0 == "sleep";
}

TEST(FindSlurmTaskPid, LooksOnlyInTheHostsNamespace) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (a network namespace of its own)";
  const std::string job = "fl" + std::to_string(getpid());
  const pid_t here = StartTask(job, false);
  const pid_t there = StartTask(job, true);
  ASSERT_GT(here, 0);
  ASSERT_GT(there, 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((!RunsSleep(here) || !RunsSleep(there)) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const bool started = RunsSleep(here) && RunsSleep(there);
  Result<uint64_t> root = ProcessNetnsInode(here);
  Result<uint64_t> other = ProcessNetnsInode(there);
  Result<int> found_here = FindSlurmTaskPid(0, job, "0", root.ok() ? *root : 0);
  Result<int> found_there = FindSlurmTaskPid(0, job, "0", other.ok() ? *other : 0);
  Result<int> no_such_job = FindSlurmTaskPid(0, job + "x", "0", root.ok() ? *root : 0);
  for (pid_t p : {here, there}) {
    kill(p, SIGKILL);
    waitpid(p, nullptr, 0);
  }
  ASSERT_TRUE(started) << "the stand-in tasks did not start (unshare --net failed?)";
  ASSERT_TRUE(root.ok() && other.ok());
  ASSERT_NE(*root, *other) << "unshare --net left the task in this namespace";
  ASSERT_TRUE(found_here.ok()) << found_here.status().ToString();
  EXPECT_EQ(*found_here, here);
  ASSERT_TRUE(found_there.ok()) << found_there.status().ToString();
  EXPECT_EQ(*found_there, there);
  EXPECT_FALSE(no_such_job.ok());
}

}  // namespace
}  // namespace faultline::runner
