#include "transport/engine/striping.h"

#include <algorithm>
#include <cmath>

namespace ftccl::transport::engine {

void PathRate::Accrue(TimePoint now) {
  if (outstanding_ > 0 && accrued_at_ != TimePoint{} && now > accrued_at_) {
    backlog_ += static_cast<double>(outstanding_) *
                std::chrono::duration<double>(now - accrued_at_).count();
  }
  accrued_at_ = now;
}

void PathRate::Add(uint64_t bytes, TimePoint now) {
  Accrue(now);
  if (outstanding_ == 0) busy_since_ = now;
  outstanding_ += bytes;
}

void PathRate::Remove(uint64_t bytes, TimePoint now) {
  Accrue(now);
  outstanding_ -= std::min(outstanding_, bytes);
  if (outstanding_ == 0 && busy_since_ != TimePoint{}) {
    busy_ += now - busy_since_;
    busy_since_ = {};
  }
}

uint64_t PathRate::Window(Millis path_queue, uint64_t chunk_bytes) const {
  if (path_queue.count() == 0 || rate_ <= 0) return UINT64_MAX;
  const double w = rate_ * std::chrono::duration<double>(path_queue).count();
  return std::max<uint64_t>(2 * chunk_bytes, static_cast<uint64_t>(w));
}

PathRate::SampleResult PathRate::Sample(TimePoint now, bool usable, bool suspect,
                                        uint64_t backlog_bytes) {
  SampleResult r;
  if (sample_start_ == TimePoint{} || !usable) {
    sample_start_ = now;
    sample_bytes_ = credited_;
    saturated_ = false;
    busy_ = {};
    backlog_ = 0;
    accrued_at_ = now;
    return r;
  }
  if (now - sample_start_ < kPeriod) return r;
  return Close(now, suspect, backlog_bytes, 0.02);
}

PathRate::Running PathRate::Current(TimePoint now) const {
  Running out;
  if (sample_start_ == TimePoint{}) return out;
  Clock::duration busy = busy_;
  if (busy_since_ != TimePoint{} && now > busy_since_) busy += now - busy_since_;
  out.busy_s = std::chrono::duration<double>(busy).count();
  if (out.busy_s > 0) out.rate = static_cast<double>(credited_ - sample_bytes_) / out.busy_s;
  return out;
}

PathRate::SampleResult PathRate::CloseEarly(TimePoint now, uint64_t backlog_bytes) {
  if (sample_start_ == TimePoint{}) return {};
  saturated_ = true;  // measured against its siblings: what it delivered is what it can
  return Close(now, /*suspect=*/false, backlog_bytes, kProbeBusy);
}

PathRate::SampleResult PathRate::Close(TimePoint now, bool suspect, uint64_t backlog_bytes,
                                       double min_busy_s) {
  // An average slow enough not to follow every burst: a tenfold slowdown shows within about
  // 200 ms over full periods.
  constexpr double kWeight = 0.3;
  SampleResult r;
  auto restart = [&] {
    sample_start_ = now;
    sample_bytes_ = credited_;
    saturated_ = false;
  };
  r.period_over = true;
  Accrue(now);
  if (busy_since_ != TimePoint{}) {
    busy_ += now - busy_since_;
    busy_since_ = now;
  }
  const double secs = std::chrono::duration<double>(busy_).count();
  if (secs < min_busy_s) {
    // Too little busy time to measure (20 ms for a period): a burst shorter than that (one
    // collective between compute phases, on a fast link) adds its bytes and busy time to the
    // next period's instead of being dropped, so bursty traffic is measured over its bursts.
    sample_start_ = now;
    return r;
  }
  busy_ = {};
  // A backlog over the busy time: more than a chunk outstanding on average (by a byte at
  // least: one chunk at a time, exactly, is no backlog), so the path, not the round trip of
  // each chunk's acknowledgement, set the pace.
  const bool backlog = backlog_ / secs > static_cast<double>(backlog_bytes) + 1.0;
  backlog_ = 0;
  const double sample = static_cast<double>(credited_ - sample_bytes_) / secs;
  if ((saturated_ || backlog) && !suspect) {
    // A sharp change (a throttled path, a healed one) is followed faster.
    const double w = sample < rate_ / 2 || sample > rate_ * 2 ? 0.5 : kWeight;
    rate_ = rate_ <= 0 ? sample : (1 - w) * rate_ + w * sample;
    r.updated = true;
  } else if (sample > rate_) {
    // Not saturated: the path carried at least this much. Followed as a saturated sample is,
    // not taken outright: a token bucket lets a burst through at the port's own speed after
    // every idle gap, so one short busy period can read well above the shaped rate, and a
    // maximum kept for good would hold the path above its neighbours for as long as nothing
    // saturates it (measured: 1.39 Gbps kept for a 1 Gbps rail, 56 % of the striping against
    // its equal neighbour's 44 %, after a failback).
    rate_ = rate_ <= 0 ? sample : (1 - kWeight) * rate_ + kWeight * sample;
    r.updated = true;
  }
  restart();
  return r;
}

void PathRate::Restart() {
  outstanding_ = 0;
  busy_since_ = {};
  busy_ = {};
  backlog_ = 0;
  accrued_at_ = {};
  rate_ = 0;
  sample_start_ = {};
}

void PathRate::RestartPeriod(TimePoint now) {
  Accrue(now);
  sample_start_ = now;
  sample_bytes_ = credited_;
  saturated_ = false;
  busy_ = {};
  backlog_ = 0;
  if (busy_since_ != TimePoint{}) busy_since_ = now;
}

bool LeaveToFaster(const PathLoad& self, const std::vector<PathLoad>& others,
                   uint64_t chunk_bytes) {
  if (self.rate <= 0) return false;
  const double c = static_cast<double>(chunk_bytes);
  const double mine = (static_cast<double>(self.outstanding) + c) / self.rate;
  for (const PathLoad& o : others) {
    if (o.rate <= 0) continue;
    const double theirs = (static_cast<double>(o.outstanding) + c) / o.rate;
    if (mine > kFinishSlack * theirs) return true;
  }
  return false;
}

std::map<int, double> Shares(const std::vector<std::pair<int, double>>& rates) {
  double total = 0;
  for (const auto& [id, rate] : rates) total += rate;
  std::map<int, double> shares;
  if (total <= 0) return shares;
  for (const auto& [id, rate] : rates) {
    if (rate > 0) shares[id] = rate / total;
  }
  return shares;
}

std::pair<int, double> LargestShift(const std::map<int, double>& before,
                                    const std::map<int, double>& after) {
  int moved = -1;
  double most = 0;
  for (const auto& [id, share] : after) {
    auto old = before.find(id);
    const double d = std::abs(share - (old == before.end() ? 0.0 : old->second));
    if (d > most) {
      most = d;
      moved = id;
    }
  }
  return {moved, most};
}

}  // namespace ftccl::transport::engine
