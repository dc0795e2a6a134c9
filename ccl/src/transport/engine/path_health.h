// PathHealth: what the chunk engine knows about whether one path (a connection to a peer over
// one rail and channel) works. It keeps the round-trip estimate (as TCP's RTO: srtt and rttvar),
// the longest recent wait for progress, the probes outstanding, the suspicion flag and the flap
// damping (downs within the flap window and the hold-down they earn).
//
// A path is *suspect* when it showed no progress within its suspicion timeout, its link went
// down, or the peer reported its end down: it then carries no new data and is probed until it
// answers. It returns to use on an answer after its hold-down, which doubles with every down
// within the flap window (up to a maximum), or on any answer while no other path to its peer
// works.
//
// Pure: no I/O, no clock reads (every call is given `now`); unit-tested on synthetic times.
// Thread-safety: none; a path belongs to the progress thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>

#include "ftccl/communicator.h"

namespace ftccl::transport::engine {

class PathHealth final {
 public:
  using TimePoint = Clock::time_point;

  // The knobs of suspicion and damping (CommOptions: suspect_floor, suspect_ceiling,
  // flap_window, failback_holddown, failback_holddown_max).
  struct Params {
    Millis suspect_floor{0};
    Millis suspect_ceiling{0};
    Millis flap_window{0};
    Millis holddown{0};
    Millis holddown_max{0};
    static Params From(const CommOptions& o);
  };

  // A round-trip sample in ms (an acknowledged chunk sent once, or an answered probe).
  // Negative samples are ignored.
  void RttSample(double ms);
  // A sign of progress at `now`: something sent here was acknowledged or a probe answered.
  // `busy_since` is when the path last got data outstanding (epoch: idle); the gap since the
  // previous progress counts toward the longest wait only while the path had work.
  void Progress(TimePoint now, TimePoint busy_since);
  // The longest wait decays (x0.8 per sampling period): a slow start is forgotten.
  void DecayGap() { max_gap_ms_ *= 0.8; }
  // The suspicion timeout: the largest of srtt + 4 rttvar and twice the longest recent wait
  // for progress, plus four times the progress thread's own recent lateness, clamped to
  // [suspect_floor, suspect_ceiling].
  Clock::duration SuspectTimeout(const Params& p, double tick_lag_ms) const;
  // The suspicion timeout once another path delivered a chunk sent after this path's oldest
  // outstanding one: srtt + 4 rttvar plus four times the progress thread's lateness, clamped
  // as SuspectTimeout (the longest recent wait is left out: the overtaking is the evidence).
  Clock::duration OvertakenTimeout(const Params& p, double tick_lag_ms) const;
  // Counts a down transition at `now` for damping: the hold-down becomes holddown x
  // 2^(n-1) for n downs within the flap window, at most holddown_max, and never shrinks.
  void RecordDown(TimePoint now, const Params& p);
  // Takes back the down counted at `at`, if it is the latest one: the hold-down returns to what
  // it was before it. False (nothing changes) if another down came after it or it has left the
  // window.
  bool WithdrawDown(TimePoint at);

  // Whether the hold-down earned by its downs still keeps this path out of use at `now`.
  bool Held(TimePoint now) const { return now < hold_until_; }
  // Whether this suspect path, having answered its latest probe at `now`, returns to use:
  // once its hold-down is over, or at once while no other path to its peer works
  // (`only_path`). Damping keeps a flapping path out while a better one exists; it never
  // leaves a peer with no path when one answers. A path released early keeps its downs: if it
  // goes down again, it is held down for longer (RecordDown).
  bool Readmit(TimePoint now, bool only_path) const { return only_path || !Held(now); }

  // A probe goes out at `now`; returns its nonce.
  uint64_t ProbeSent(TimePoint now);
  // Whether `nonce` answers the latest probe; if so, samples its round trip and clears the
  // outstanding probe.
  bool ProbeAnswered(uint64_t nonce, TimePoint now);
  // A fresh connection in this slot: progress from `now`, nothing outstanding.
  void Restart(TimePoint now);

  bool suspect = false;         // out of use until an answer after the hold-down
  bool up_since_down = false;  // suspect, but it answered since (or its carrier came back and went)
  bool carrier_back = false;    // suspect, and its rail's carrier returned since its down
  bool failback_pending = false;  // back in use: its next data chunk is a failback

  TimePoint last_progress() const { return last_progress_; }
  TimePoint last_probe() const { return last_ping_; }
  // When the oldest unanswered probe went out (epoch: none outstanding).
  TimePoint probe_outstanding_since() const { return ping_outstanding_since_; }
  TimePoint hold_until() const { return hold_until_; }
  size_t downs_in_window() const { return downs_.size(); }
  // The oldest down counted in downs_in_window (epoch: none).
  TimePoint oldest_down() const { return downs_.empty() ? TimePoint{} : downs_.front(); }
  double srtt_ms() const { return srtt_ms_; }
  double rttvar_ms() const { return rttvar_ms_; }
  bool have_rtt() const { return have_rtt_; }
  double max_gap_ms() const { return max_gap_ms_; }

 private:
  TimePoint last_ping_{};
  uint64_t ping_nonce_ = 0;
  std::deque<TimePoint> downs_;
  TimePoint hold_until_{};
  TimePoint hold_before_latest_{};  // hold_until_ before the latest down (WithdrawDown)
  TimePoint last_progress_{};
  TimePoint ping_outstanding_since_{};
  double srtt_ms_ = 0;
  double rttvar_ms_ = 0;
  double max_gap_ms_ = 0;
  bool have_rtt_ = false;
};

}  // namespace ftccl::transport::engine
