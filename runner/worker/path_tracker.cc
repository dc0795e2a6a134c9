#include "runner/worker/path_tracker.h"

#include <algorithm>
#include <iterator>

namespace faultline::runner {

void PathTracker::Fault(int64_t t_ns) {
  news_ = true;
  ++faults_seen_;
  if (!first_fault_ns_) first_fault_ns_ = t_ns;
  if (!news_since_ns_ || t_ns < *news_since_ns_) news_since_ns_ = t_ns;
}

void PathTracker::Note(const CclEvent& e, const std::vector<int>& excluded) {
  if (e.peer >= 0 && std::find(excluded.begin(), excluded.end(), e.peer) != excluded.end()) {
    return;
  }
  switch (e.kind) {
    case EventKind::kPathDown: {
      Path& p = paths_[{e.peer, e.path}];
      if (!p.down_since) {
        p.down_since = e.time_ns;
        p.waited_out = false;
      }
      Fault(e.time_ns);
      break;
    }
    case EventKind::kPathUp: {
      auto it = paths_.find({e.peer, e.path});
      if (it != paths_.end() && it->second.down_since) {
        it->second.outage_ns += std::max<int64_t>(0, e.time_ns - *it->second.down_since);
        ++it->second.outages;
        it->second.down_since.reset();
      }
      break;
    }
    case EventKind::kRelayOn:
      relay_on_ = true;
      Fault(e.time_ns);
      break;
    case EventKind::kRelayOff:
      relay_on_ = false;
      break;
    case EventKind::kAbort:
      Fault(e.time_ns);
      break;
    default:
      break;
  }
  if (!news_) news_since_ns_.reset();
}

bool PathTracker::AnyPathDown() const {
  for (const auto& [key, p] : paths_) {
    if (p.down_since) return true;
  }
  return false;
}

bool PathTracker::AnyPathToWaitFor() const {
  for (const auto& [key, p] : paths_) {
    if (p.down_since && !p.waited_out) return true;
  }
  return false;
}

void PathTracker::MarkWaitedOut() {
  for (auto& [key, p] : paths_) {
    if (p.down_since) p.waited_out = true;
  }
}

void PathTracker::ForgetRanks(const std::vector<int>& ranks) {
  for (auto it = paths_.begin(); it != paths_.end();) {
    const bool gone = std::find(ranks.begin(), ranks.end(), it->first.first) != ranks.end();
    it = gone ? paths_.erase(it) : std::next(it);
  }
  news_ = false;
  news_since_ns_.reset();
}

void PathTracker::ClearNews(bool all) {
  news_ = false;
  if (all) {
    first_fault_ns_.reset();
    news_since_ns_.reset();
  }
}

}  // namespace faultline::runner
