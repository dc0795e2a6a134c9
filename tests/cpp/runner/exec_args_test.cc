// ExecArgs (base/exec_args.h): a child's argv and environment built before fork, an extra
// variable replacing the inherited one of the same name, checked in a real child.
#include "base/exec_args.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>

namespace faultline {
namespace {

TEST(ExecArgs, ExtraVariablesReplaceInheritedOnesAndTheChildSeesThem) {
  ASSERT_EQ(setenv("FL_EXEC_ARGS_T1", "inherited", 1), 0);
  ASSERT_EQ(setenv("FL_EXEC_ARGS_KEEP", "kept", 1), 0);
  const ExecArgs exec({"/bin/sh", "-c", "printf '%s|%s|%s' \"$FL_EXEC_ARGS_T1\" "
                                        "\"$FL_EXEC_ARGS_KEEP\" \"$FL_EXEC_ARGS_T2\""},
                      {"FL_EXEC_ARGS_T1=extra", "FL_EXEC_ARGS_T2=new"});
  const auto& env = exec.env();
  EXPECT_EQ(std::count_if(env.begin(), env.end(),
                          [](const std::string& e) { return e.rfind("FL_EXEC_ARGS_T1=", 0) == 0; }),
            1);
  EXPECT_NE(std::find(env.begin(), env.end(), "FL_EXEC_ARGS_T1=extra"), env.end());
  EXPECT_STREQ(exec.argv()[0], "/bin/sh");
  EXPECT_EQ(exec.argv()[3], nullptr);
  EXPECT_EQ(exec.envp()[env.size()], nullptr);

  int out[2];
  ASSERT_EQ(pipe(out), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(out[1], 1);
    execve(exec.argv()[0], exec.argv(), exec.envp());
    _exit(127);
  }
  close(out[1]);
  std::string got;
  char buf[256];
  for (ssize_t n; (n = read(out[0], buf, sizeof buf)) > 0;) got.append(buf, n);
  close(out[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(got, "extra|kept|new");
  unsetenv("FL_EXEC_ARGS_T1");
  unsetenv("FL_EXEC_ARGS_KEEP");
}

}  // namespace
}  // namespace faultline
