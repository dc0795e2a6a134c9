// PathTracker: what one rank knows of its own paths' state, followed from the library's
// events (path_down / path_up / relay_on / relay_off / abort) during the train workload. It
// is the input of the recovery policies (policies/policy.h) and of the rank's row of the
// fault-state matrix (fault_matrix.h).
//
// Pure bookkeeping: no clock and no I/O (event times are the events' own). Not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "runner/core/history.h"

namespace faultline::runner {

class PathTracker final {
 public:
  struct Path {
    std::optional<int64_t> down_since;  // down now, since then
    int64_t outage_ns = 0;              // past outages' total length and count
    int64_t outages = 0;
    // A hold already waited the whole bound for this outage: the wait policy does not hold
    // for it again (it falls back to the library's failover until the path returns).
    bool waited_out = false;
  };
  using Key = std::pair<int, int>;  // (peer world rank, path)

  // Follows one event. Events about a world rank in `excluded` (a rank already left out: its
  // connections' last words) are ignored. path_down, relay_on and abort are faults: each sets
  // the news flag, counts in faults_seen() and first_fault_ns(), and moves news_since_ns()
  // back to its time; path_up ends the path's outage (counted in its history).
  void Note(const CclEvent& e, const std::vector<int>& excluded);

  bool AnyPathDown() const;
  // A path down whose outage no hold has yet waited out: what the wait policy holds for.
  bool AnyPathToWaitFor() const;
  // Marks every path down now as waited out (a hold waited the whole bound).
  void MarkWaitedOut();
  // After a shrink without `ranks`: their paths and the news that led to it are forgotten.
  void ForgetRanks(const std::vector<int>& ranks);
  // Clears the news flag (handed over at a step boundary) and, with `all`, the first fault
  // and news times too (fail_stop: the faults before the first step are not the run's).
  void ClearNews(bool all = false);
  // The first fault of the run, where the caller saw it another way (a failed call).
  void NoteFirstFault(int64_t t_ns) {
    if (!first_fault_ns_) first_fault_ns_ = t_ns;
  }

  const std::map<Key, Path>& paths() const { return paths_; }
  bool news() const { return news_; }
  bool relay_on() const { return relay_on_; }
  int64_t faults_seen() const { return faults_seen_; }
  std::optional<int64_t> first_fault_ns() const { return first_fault_ns_; }
  // The earliest fault time among the news not yet handed over; unset without news.
  std::optional<int64_t> news_since_ns() const { return news_since_ns_; }

 private:
  void Fault(int64_t t_ns);

  std::map<Key, Path> paths_;
  bool relay_on_ = false;
  bool news_ = false;  // a fault event since the last step boundary
  int64_t faults_seen_ = 0;
  std::optional<int64_t> first_fault_ns_;
  std::optional<int64_t> news_since_ns_;
};

}  // namespace faultline::runner
