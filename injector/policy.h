// Target policy: which namespaces and interfaces a fault may touch.
//
// A fault may touch an interface only when its namespace exists and
//   (a) the project created the namespace: its name carries the project prefix "fl-" or a
//       "netns" entry in the journal records it, or
//   (b) the allowlist names it: "NETNS/DEV" (one interface) or "NETNS/*" (all of them).
// The allowlist comes from --allow flags and the FAULTLINE_ALLOW environment variable
// (comma-separated). Everything else is refused with PermissionDenied. Immutable after
// construction; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace faultline {

class Journal;

class TargetPolicy final {
 public:
  // `specs` are "NETNS/DEV" or "NETNS/*"; FAULTLINE_ALLOW is added when `use_env`.
  static Result<TargetPolicy> Create(const std::vector<std::string>& specs, const Journal* journal,
                                     bool use_env = true);

  // The namespace exists and is project-owned or named by at least one allowlist entry.
  Status CheckNetns(std::string_view netns) const;
  // The namespace exists and holds `dev`, and the pair is allowed.
  Status CheckInterface(std::string_view netns, std::string_view dev) const;
  bool ProjectOwned(std::string_view netns) const;

 private:
  TargetPolicy() = default;
  std::vector<std::pair<std::string, std::string>> allow_;  // (netns, dev or "*")
  const Journal* journal_ = nullptr;
};

}  // namespace faultline
