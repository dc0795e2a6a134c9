#include "base/exec_args.h"

#include <unistd.h>

#include <set>

namespace faultline {

ExecArgs::ExecArgs(std::vector<std::string> argv, const std::vector<std::string>& extra_env)
    : args_(std::move(argv)) {
  std::set<std::string> replaced;
  for (const std::string& e : extra_env) replaced.insert(e.substr(0, e.find('=')));
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    if (replaced.count(entry.substr(0, entry.find('='))) == 0) env_.push_back(entry);
  }
  env_.insert(env_.end(), extra_env.begin(), extra_env.end());
  for (std::string& a : args_) argv_.push_back(a.data());
  argv_.push_back(nullptr);
  for (std::string& e : env_) envp_.push_back(e.data());
  envp_.push_back(nullptr);
}

}  // namespace faultline
