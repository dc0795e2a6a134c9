#include "injector/policy.h"

#include <cstdlib>
#include <sstream>

#include "injector/journal.h"
#include "injector/netlink.h"
#include "injector/netns.h"

namespace faultline {

Result<TargetPolicy> TargetPolicy::Create(const std::vector<std::string>& specs,
                                          const Journal* journal, bool use_env) {
  TargetPolicy p;
  p.journal_ = journal;
  std::vector<std::string> all = specs;
  if (use_env) {
    const char* env = std::getenv("FAULTLINE_ALLOW");
    if (env != nullptr) {
      std::stringstream ss(env);
      std::string item;
      while (std::getline(ss, item, ',')) {
        if (!item.empty()) all.push_back(item);
      }
    }
  }
  for (const std::string& s : all) {
    size_t slash = s.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == s.size() ||
        s.find('/', slash + 1) != std::string::npos) {
      return InvalidArgument("malformed allowlist entry '" + s +
                             "': expected NETNS/DEV or NETNS/*");
    }
    p.allow_.emplace_back(s.substr(0, slash), s.substr(slash + 1));
  }
  return p;
}

bool TargetPolicy::ProjectOwned(std::string_view netns) const {
  if (netns.substr(0, std::string_view(kProjectNetnsPrefix).size()) == kProjectNetnsPrefix) {
    return true;
  }
  return journal_ != nullptr && journal_->RecordsNetns(netns);
}

Status TargetPolicy::CheckNetns(std::string_view netns) const {
  FL_RETURN_IF_ERROR(ValidateNetnsName(netns));
  if (!NetnsExists(netns)) {
    return NotFound("network namespace '" + std::string(netns) + "' does not exist");
  }
  if (ProjectOwned(netns)) return Status::Ok();
  for (const auto& [ns, dev] : allow_) {
    if (ns == netns) return Status::Ok();
  }
  return PermissionDenied("network namespace '" + std::string(netns) +
                          "' was not created by faultline and is not allowlisted (use --allow " +
                          std::string(netns) + "/DEV or FAULTLINE_ALLOW)");
}

Status TargetPolicy::CheckInterface(std::string_view netns, std::string_view dev) const {
  FL_RETURN_IF_ERROR(ValidateNetnsName(netns));
  if (!NetnsExists(netns)) {
    return NotFound("network namespace '" + std::string(netns) + "' does not exist");
  }
  if (dev.empty()) return InvalidArgument("no interface given (--dev)");
  bool allowed = ProjectOwned(netns);
  for (const auto& [ns, d] : allow_) {
    if (ns == netns && (d == "*" || d == dev)) allowed = true;
  }
  if (!allowed) {
    return PermissionDenied("interface '" + std::string(dev) + "' in network namespace '" +
                            std::string(netns) +
                            "' is outside the allowlist: the namespace was not created by "
                            "faultline (use --allow " +
                            std::string(netns) + "/" + std::string(dev) + " or FAULTLINE_ALLOW)");
  }
  FL_ASSIGN_OR_RETURN(NlSock sock, NlSock::ConnectInNetns(netns));
  auto link = GetLink(sock, dev);
  if (!link.ok()) {
    if (link.status().code() == Code::kNotFound) {
      return NotFound("unknown interface '" + std::string(dev) + "' in network namespace '" +
                      std::string(netns) + "'");
    }
    return link.status();
  }
  return Status::Ok();
}

}  // namespace faultline
