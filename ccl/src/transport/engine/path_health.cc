#include "transport/engine/path_health.h"

#include <algorithm>
#include <cmath>

namespace ftccl::transport::engine {

PathHealth::Params PathHealth::Params::From(const CommOptions& o) {
  Params p;
  p.suspect_floor = o.suspect_floor;
  p.suspect_ceiling = o.suspect_ceiling;
  p.flap_window = o.flap_window;
  p.holddown = o.failback_holddown;
  p.holddown_max = o.failback_holddown_max;
  return p;
}

void PathHealth::RttSample(double ms) {
  if (ms < 0) return;
  if (!have_rtt_) {
    srtt_ms_ = ms;
    rttvar_ms_ = ms / 2;
    have_rtt_ = true;
  } else {
    rttvar_ms_ = 0.75 * rttvar_ms_ + 0.25 * std::abs(srtt_ms_ - ms);
    srtt_ms_ = 0.875 * srtt_ms_ + 0.125 * ms;
  }
}

void PathHealth::Progress(TimePoint now, TimePoint busy_since) {
  const bool busy = busy_since != TimePoint{} || ping_outstanding_since_ != TimePoint{};
  if (busy && last_progress_ != TimePoint{}) {
    TimePoint from = last_progress_;
    if (busy_since != TimePoint{}) from = std::max(from, busy_since);
    const double gap = std::chrono::duration<double, std::milli>(now - from).count();
    max_gap_ms_ = std::max(max_gap_ms_, gap);
  }
  last_progress_ = now;
}

Clock::duration PathHealth::SuspectTimeout(const Params& p, double tick_lag_ms) const {
  const double floor = static_cast<double>(p.suspect_floor.count());
  const double ceiling = static_cast<double>(p.suspect_ceiling.count());
  double ms = have_rtt_ ? srtt_ms_ + 4 * rttvar_ms_ : 0;
  ms = std::max(ms, 2 * max_gap_ms_) + 4 * tick_lag_ms;
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double, std::milli>(std::clamp(ms, floor, ceiling)));
}

Clock::duration PathHealth::OvertakenTimeout(const Params& p, double tick_lag_ms) const {
  const double floor = static_cast<double>(p.suspect_floor.count());
  const double ceiling = static_cast<double>(p.suspect_ceiling.count());
  const double ms = (have_rtt_ ? srtt_ms_ + 4 * rttvar_ms_ : 0) + 4 * tick_lag_ms;
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double, std::milli>(std::clamp(ms, floor, ceiling)));
}

void PathHealth::RecordDown(TimePoint now, const Params& p) {
  while (!downs_.empty() && now - downs_.front() > p.flap_window) downs_.pop_front();
  downs_.push_back(now);
  hold_before_latest_ = hold_until_;
  auto hold = p.holddown;
  for (size_t i = 1; i < downs_.size() && hold < p.holddown_max; ++i) hold *= 2;
  hold = std::min(hold, p.holddown_max);
#ifndef FTCCL_PLANTED_DAMP_FOREVER  // a planted bug (FTCCL_PLANTED_BUGS, tests only)
  hold_until_ = std::max(hold_until_, now + std::chrono::duration_cast<Clock::duration>(hold));
#else
  // The hold-down taken in seconds instead of milliseconds: 100 s after one down.
  hold_until_ = std::max(hold_until_, now + std::chrono::seconds(hold.count()));
#endif
}

bool PathHealth::WithdrawDown(TimePoint at) {
  if (downs_.empty() || downs_.back() != at) return false;
  downs_.pop_back();
  hold_until_ = hold_before_latest_;
  return true;
}

uint64_t PathHealth::ProbeSent(TimePoint now) {
  last_ping_ = now;
  if (ping_outstanding_since_ == TimePoint{}) ping_outstanding_since_ = now;
  return ++ping_nonce_;
}

bool PathHealth::ProbeAnswered(uint64_t nonce, TimePoint now) {
  if (nonce != ping_nonce_) return false;
  RttSample(std::chrono::duration<double, std::milli>(now - last_ping_).count());
  ping_outstanding_since_ = {};
  return true;
}

void PathHealth::Restart(TimePoint now) {
  ping_outstanding_since_ = {};
  last_progress_ = now;
}

}  // namespace ftccl::transport::engine
