#include "runner/core/history.h"

namespace faultline::runner {
namespace {

struct EventName {
  EventKind kind;
  const char* name;
};
constexpr EventName kEventNames[] = {
    {EventKind::kPathDown, "path_down"}, {EventKind::kMigrated, "migrated"},
    {EventKind::kResumed, "resumed"},    {EventKind::kRebalanced, "rebalanced"},
    {EventKind::kRelayOn, "relay_on"},   {EventKind::kRelayOff, "relay_off"},
    {EventKind::kPathUp, "path_up"},     {EventKind::kFailback, "failback"},
    {EventKind::kAbort, "abort"},
};

}  // namespace

const char* EventKindName(EventKind k) {
  for (const auto& e : kEventNames) {
    if (e.kind == k) return e.name;
  }
  return "?";
}

std::optional<EventKind> ParseEventKind(const std::string& name) {
  for (const auto& e : kEventNames) {
    if (name == e.name) return e.kind;
  }
  return std::nullopt;
}

}  // namespace faultline::runner
