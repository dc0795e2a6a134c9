// Striping: how the chunk engine spreads a peer's chunks over its paths by what each carries.
//
// PathRate measures one path: the payload outstanding on it (sent, not yet known delivered),
// what it delivered, and its throughput over sampling periods, counted only while it had data
// outstanding (idle time, the algorithm waiting for a peer, says nothing about the path); a
// period with under 20 ms of busy time carries its bytes and busy time over to the next. A
// period in which the path had more to carry than it took (it blocked, or hit its window) is
// *saturated* and measures its capacity; so is one whose busy time held a backlog (on average
// more than `backlog_bytes` outstanding, a chunk: more than one chunk's round trip at a time,
// so the path, not the algorithm or an acknowledgement, set the pace), which a path whose
// window and socket buffer take a whole message never reaches by blocking. Any other period
// only shows that it can carry at least as much, and moves a lower rate up by the same average
// (never down). A path holds at most `path_queue` worth of data at its measured rate (its
// window), so a slow path takes less and the others take the rest.
//
// Shares and LargestShift turn the rates of a peer's paths into the striping announced in a
// `rebalanced` event (a shift of kRebalanceNews of the traffic or more).
//
// Pure: no I/O, no clock reads; unit-tested. Thread-safety: none (the progress thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "ftccl/communicator.h"

namespace ftccl::transport::engine {

// A probe ends once it has carried this much busy time (Engine::SampleRates); the least busy
// time PathRate::CloseEarly measures.
inline constexpr double kProbeBusy = 0.01;  // seconds

class PathRate final {
 public:
  using TimePoint = Clock::time_point;
  // Sampling period: long enough to see past the bursts a token bucket lets through.
  static constexpr auto kPeriod = std::chrono::milliseconds(100);

  // `bytes` of payload now outstanding here (sent, or assigned to be sent).
  void Add(uint64_t bytes, TimePoint now);
  // `bytes` no longer outstanding here (delivered, or moved to another path).
  void Remove(uint64_t bytes, TimePoint now);
  // `bytes` reached the peer over this path.
  void Delivered(uint64_t bytes) { credited_ += bytes; }
  // The path had more to carry than it took in this period.
  void MarkSaturated() { saturated_ = true; }

  // How much may be outstanding: `path_queue` at the measured rate, at least two chunks;
  // unlimited before the first measurement or with path_queue 0.
  uint64_t Window(Millis path_queue, uint64_t chunk_bytes) const;

  struct SampleResult {
    bool period_over = false;  // a sampling period ended (whether or not it measured)
    bool updated = false;      // the rate changed
  };
  // Closes the sampling period if it is over at `now`. `usable`: the path is alive (a dead
  // one restarts its sampling); `suspect`: a saturated period of a suspect path measures
  // nothing; `backlog_bytes`: the mean outstanding over the busy time above which a period
  // is saturated (UINT64_MAX: only a block or the window marks one).
  SampleResult Sample(TimePoint now, bool usable, bool suspect,
                      uint64_t backlog_bytes = UINT64_MAX);

  // The period so far, read without closing it: what the path delivered per second of busy
  // time, and that busy time.
  struct Running {
    double rate = 0;  // bytes per second of busy time; 0 with no busy time
    double busy_s = 0;
  };
  Running Current(TimePoint now) const;
  // Closes the period now, with kProbeBusy of busy time or more, as Sample would at its end,
  // counting it saturated: a sharp slowdown seen against the path's siblings (which shows that
  // what it delivered is what it can), or a probe that delivered at twice the rate (a healed
  // path), which a full period would follow only after kPeriod.
  SampleResult CloseEarly(TimePoint now, uint64_t backlog_bytes = UINT64_MAX);
  // A fresh connection: nothing outstanding, no rate yet.
  void Restart();
  // Starts a new sampling period at `now`, dropping what the current one gathered (a probe,
  // measured on its own).
  void RestartPeriod(TimePoint now);

  uint64_t outstanding() const { return outstanding_; }
  TimePoint busy_since() const { return busy_since_; }
  double rate() const { return rate_; }  // bytes per second; 0 until measured

 private:
  // Adds outstanding x time since the last change to backlog_.
  void Accrue(TimePoint now);
  // Closes the period at `now`: the measurement and the restart of Sample, given at least
  // `min_busy_s` of busy time.
  SampleResult Close(TimePoint now, bool suspect, uint64_t backlog_bytes, double min_busy_s);

  uint64_t outstanding_ = 0;
  uint64_t credited_ = 0;
  double backlog_ = 0;      // outstanding bytes x seconds over the current busy time
  TimePoint accrued_at_{};  // when backlog_ was last brought up to date
  uint64_t sample_bytes_ = 0;
  TimePoint sample_start_{};
  TimePoint busy_since_{};  // outstanding > 0 since (epoch: idle)
  Clock::duration busy_{};  // busy time within the current sample
  bool saturated_ = false;
  double rate_ = 0;
};

// Earliest finish: a path leaves the next chunk to another of the peer's paths that would
// deliver it sooner, counting what each already has outstanding, by more than kFinishSlack.
// The window alone (at least two chunks per path) lets a path at a tenth of its neighbour's
// rate carry two of every few chunks of a slice, and the slice waits for its slowest chunk.
// A path without a measured rate is not compared (it takes its window).
inline constexpr double kFinishSlack = 1.25;
struct PathLoad {
  double rate = 0;  // bytes per second; 0: not measured
  uint64_t outstanding = 0;
};
bool LeaveToFaster(const PathLoad& self, const std::vector<PathLoad>& others,
                   uint64_t chunk_bytes);
// A path that has left chunks to others and not been measured for this long takes its window
// for kProbeFor, so that its rate is measured again (a healed path would otherwise never be
// seen healed).
inline constexpr auto kProbeEvery = std::chrono::milliseconds(1000);
inline constexpr auto kProbeFor = std::chrono::milliseconds(150);

// A shift of this share of a peer's traffic or more is announced (kRebalanced).
inline constexpr double kRebalanceNews = 0.15;

// Each usable path's share of the total measured throughput: (path id, rate) in, (path id,
// share) out for the paths with a rate > 0. Empty when no path has a rate.
std::map<int, double> Shares(const std::vector<std::pair<int, double>>& rates);

// The path whose share changed most between `before` and `after` (a path missing from one
// has share 0 there) and by how much; {-1, 0} when `after` is empty.
std::pair<int, double> LargestShift(const std::map<int, double>& before,
                                    const std::map<int, double>& after);

}  // namespace ftccl::transport::engine
