#include "runner/requirements.h"

#include <cstdio>

#include "injector/netem.h"

namespace faultline::runner {

std::optional<std::string> RequirementChecker::Missing(const std::vector<std::string>& features) {
  for (const auto& f : features) {
    auto it = cache_.find(f);
    if (it == cache_.end()) it = cache_.emplace(f, Probe(f)).first;
    if (it->second) return it->second;
  }
  return std::nullopt;
}

std::optional<std::string> RequirementChecker::Probe(const std::string& feature) {
  if (feature == "sch_netem") {
    Status st = ProbeNetem();
    if (st.ok()) return std::nullopt;
    if (st.code() == Code::kUnavailable) return std::string("kernel lacks sch_netem");
    return "cannot tell whether the kernel has sch_netem: " + st.ToString();
  }
  if (feature == "fault_hook") {
    const std::string cmd = "'" + worker_path_ + "' --help 2>&1";
    FILE* p = ::popen(cmd.c_str(), "r");
    if (p == nullptr) return "cannot run " + worker_path_ + " --help";
    std::string help;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) help.append(buf, n);
    ::pclose(p);
    if (help.find("--fault-hook") != std::string::npos) return std::nullopt;
    return "ftccl ranks serve no fault hook yet (faultline-worker has no --fault-hook option; "
           "see injector/FAULT_HOOK.md)";
  }
  return "unknown requirement '" + feature + "'";
}

}  // namespace faultline::runner
