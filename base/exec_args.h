// ExecArgs: the argv and envp of a program to execve after fork, built before it, so that the
// child allocates nothing between fork and exec (the only safe course in a process with
// threads). The environment is this process's own plus `extra` ("KEY=VALUE"); an extra key
// replaces the inherited entry of the same name (execve's environment has no precedence rule:
// getenv returns the first match, so a duplicate would leave the inherited value in force).
//
// Not thread-safe (reads `environ` once, at construction); the object must outlive the exec.
#pragma once

#include <string>
#include <vector>

namespace faultline {

class ExecArgs final {
 public:
  ExecArgs(std::vector<std::string> argv, const std::vector<std::string>& extra_env);
  ExecArgs(const ExecArgs&) = delete;
  ExecArgs& operator=(const ExecArgs&) = delete;

  // Null-terminated arrays for execve / execvpe.
  char* const* argv() const { return argv_.data(); }
  char* const* envp() const { return envp_.data(); }
  // The environment entries, for tests and logs.
  const std::vector<std::string>& env() const { return env_; }

 private:
  std::vector<std::string> args_;
  std::vector<std::string> env_;
  std::vector<char*> argv_;
  std::vector<char*> envp_;
};

}  // namespace faultline
