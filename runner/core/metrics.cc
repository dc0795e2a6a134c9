#include "runner/core/metrics.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "reports/metric_table.h"
#include "runner/core/fault_kind.h"

namespace faultline::runner {
namespace {

constexpr double kNsPerMs = 1e6;

std::optional<double> Median(std::vector<double> v) {
  if (v.empty()) return std::nullopt;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void TakeMax(std::optional<double>* acc, const std::optional<double>& v) {
  if (v && (!*acc || *v > **acc)) *acc = v;
}
void TakeMin(std::optional<double>* acc, const std::optional<double>& v) {
  if (v && (!*acc || *v < **acc)) *acc = v;
}

const MetricsOptions::FaultModel* FindModel(const MetricsOptions& o, const std::string& id) {
  for (const auto& m : o.faults) {
    if (m.id == id) return &m;
  }
  return nullptr;
}

// Ranks a successful shrink left out (policy shrink).
std::set<int> ShrunkOut(const History& h) {
  std::set<int> out;
  for (const ShrinkRecord& s : h.shrinks) {
    if (s.ok) out.insert(s.excluded.begin(), s.excluded.end());
  }
  return out;
}

Outcome ClassifyOutcome(const History& h, const MetricsOptions& o, std::string* reason) {
  if (h.watchdog_fired) {
    *reason = "the watchdog fired: the run did not finish in time";
    return Outcome::kHung;
  }
  if (h.ranks.empty()) {
    *reason = "no rank reported how it ended";
    return Outcome::kCrashed;
  }
  for (const RankEnd& r : h.ranks) {
    if (r.exit == RankExit::kError && r.watchdog) {
      *reason = "rank " + std::to_string(r.rank) +
                "'s watchdog ended it: a library call did not return by its deadline plus grace";
      return Outcome::kHung;
    }
  }
  // Ranks a successful shrink left out (policy shrink): whatever they return afterwards (a
  // stopped rank wakes up to a revoked group) is not the job's error.
  const std::set<int> shrunk_out = ShrunkOut(h);
  int completed = 0, errors = 0, killed = 0, left_out = 0;
  for (const RankEnd& r : h.ranks) {
    if (r.exit == RankExit::kError && shrunk_out.count(r.rank) > 0) {
      ++left_out;
      continue;
    }
    switch (r.exit) {
      case RankExit::kCrashed:
        *reason = "rank " + std::to_string(r.rank) + " crashed";
        return Outcome::kCrashed;
      case RankExit::kCompleted:
        ++completed;
        break;
      case RankExit::kError:
        ++errors;
        break;
      case RankExit::kKilled:
        ++killed;
        break;
    }
  }
  if (errors == 0) {
    if (completed == 0) {
      *reason = "every rank was killed";
      return Outcome::kCrashed;
    }
    *reason = std::to_string(completed) + " ranks completed every collective";
    if (left_out > 0) *reason += " (" + std::to_string(left_out) + " left out by a shrink)";
    return Outcome::kSurvived;
  }
  if (completed > 0) {
    *reason = std::to_string(completed) + " ranks completed but " + std::to_string(errors) +
              " returned an error";
    return Outcome::kCrashed;
  }
  // The bound counts from the fault that came last before the first error (an earlier fault
  // the job survived is not what it aborted on), or from the first error without one.
  int64_t first_error = INT64_MAX;
  int64_t last_error = 0;
  int last_rank = -1;
  for (const RankEnd& r : h.ranks) {
    if (r.exit != RankExit::kError) continue;
    const int64_t t = r.first_error_ns.value_or(r.end_ns);
    first_error = std::min(first_error, t);
    if (last_rank < 0 || t > last_error) {
      last_error = t;
      last_rank = r.rank;
    }
  }
  std::optional<int64_t> origin;
  for (const FaultRecord& f : h.faults) {
    if (f.applied_ns && *f.applied_ns <= first_error && (!origin || *f.applied_ns > *origin)) {
      origin = f.applied_ns;
    }
  }
  if (!origin) origin = first_error;
  if (last_rank >= 0 && last_error - *origin > o.abort_bound_ns) {
    *reason = "rank " + std::to_string(last_rank) + " returned its error " +
              std::to_string((last_error - *origin) / 1'000'000) +
              " ms after the fault, beyond the abort bound of " +
              std::to_string(o.abort_bound_ns / 1'000'000) + " ms";
    return Outcome::kHung;
  }
  *reason = std::to_string(errors) + " ranks returned an error within the abort bound";
  return Outcome::kAbortedClean;
}

}  // namespace

const char* OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kSurvived:
      return "survived";
    case Outcome::kAbortedClean:
      return "aborted_clean";
    case Outcome::kHung:
      return "hung";
    case Outcome::kCrashed:
      return "crashed";
  }
  return "?";
}

nlohmann::json MetricValues::ToJson() const {
  auto v = [](const std::optional<double>& x) -> nlohmann::json {
    return x ? nlohmann::json(*x) : nlohmann::json(nullptr);
  };
  return {{reports::kBaselineBusbwGbps, v(baseline_busbw_gbps)},
          {reports::kStallMs, v(stall_ms)},
          {reports::kDetectionMs, v(detection_ms)},
          {reports::kFailoverFirstMs, v(failover_first_ms)},
          {reports::kFailoverLatencyMs, v(failover_latency_ms)},
          {reports::kRecoveryMs, v(recovery_ms)},
          {reports::kDegradedRatio, v(degraded_ratio)},
          {reports::kGoodputLossPct, v(goodput_loss_pct)}};
}

std::optional<double> CapacityLeft(const Topology& topology,
                                   const std::vector<const FaultSpec*>& specs,
                                   const std::optional<std::vector<int>>& rails_used) {
  if (topology.hosts <= 0 || topology.rails <= 0) return std::nullopt;
  const bool per_rank = topology.per_rank_nics();
  if (per_rank && topology.ranks_per_host <= 0) return std::nullopt;
  std::vector<bool> used(topology.rails, !rails_used.has_value());
  if (rails_used) {
    for (int r : *rails_used) {
      if (r >= 0 && r < topology.rails) used[r] = true;
    }
  }
  // cap[h][p]: fraction of port p's rate left on host h. A port is a rail with shared NICs,
  // and rank l's port on rail r (p = l * rails + r) with per-rank NICs.
  const int ports = per_rank ? topology.ranks_per_host * topology.rails : topology.rails;
  std::vector<std::vector<double>> cap(topology.hosts, std::vector<double>(ports, 1.0));
  // 0: the rails' capacity is not known (an inventory whose kernels did not say): a fault whose
  // share depends on it (one that differs between two port rates) leaves an unknown capacity.
  const bool rate_known = topology.rail_gbps > 0;
  const double rail_bps = rate_known ? topology.rail_gbps * 1e9 : 1e9;
  for (const FaultSpec* f : specs) {
    const faults::FaultDescriptor& d = f->descriptor();
    if (d.capacity == faults::CapacityEffect::kNone) continue;
    if (d.capacity == faults::CapacityEffect::kUnknown || !f->target.rail) return std::nullopt;
    if (!rails_used) return std::nullopt;  // which rails it takes from is not known
    if (per_rank && !f->target.rank) return std::nullopt;
    if (*f->target.rail < 0 || *f->target.rail >= topology.rails) return std::nullopt;
    if (!used[*f->target.rail]) continue;  // a rail the library does not use
    const int port =
        per_rank ? *f->target.rank * topology.rails + *f->target.rail : *f->target.rail;
    double& c = cap[f->target.host][port];
    const double share = d.port_share(*f, rail_bps);
    if (!rate_known && share != d.port_share(*f, 1e12)) return std::nullopt;
    c = std::min(c, share);
  }
  double worst = 1.0;
  for (const auto& host : cap) {
    double sum = 0;
    int n = 0;
    for (int p = 0; p < ports; ++p) {
      if (!used[p % topology.rails]) continue;
      sum += host[p];
      ++n;
    }
    if (n > 0) worst = std::min(worst, sum / n);
  }
  return worst;
}

MetricsOptions MetricsOptionsFor(const Scenario& scenario,
                                 const std::optional<std::vector<int>>& rails_used) {
  MetricsOptions o;
  o.topology = scenario.topology;
  o.check = scenario.workload.check;
  // A run judged by `reproduce:` (an incident replay on the fail-stop library) counts a clean
  // abort within the incident's own bound.
  o.abort_bound_ns = scenario.JudgedByReproduce(scenario.ccl) ? scenario.reproduce->within_ns
                                                              : scenario.expect.abort_within_ns;
  o.warmup_ns = scenario.workload.warmup_ns;
  o.warmup_iters = scenario.workload.warmup_iters;
  if (scenario.expect.recovery) {
    o.recovery_pct = scenario.expect.recovery->pct;
    o.sustain_ns = static_cast<int64_t>(scenario.expect.recovery->sustain_ms * kNsPerMs);
  }
  for (const FaultSpec& f : scenario.faults) {
    MetricsOptions::FaultModel m;
    m.id = f.id;
    m.permanent = f.Permanent();
    // The level to recover to: what the permanent faults in force (this one included when
    // it is permanent) leave of the capacity.
    std::vector<const FaultSpec*> in_force;
    for (const FaultSpec& g : scenario.faults) {
      if (g.Permanent() && g.at_ns <= f.at_ns) in_force.push_back(&g);
    }
    m.capacity = CapacityLeft(scenario.topology, in_force, rails_used);
    if (f.target.port && !f.descriptor().rank_target()) {
      m.port_rank = f.target.GlobalRank(scenario.topology).value_or(-1);
    }
    if (f.descriptor().target == faults::TargetShape::kRankPath) m.peer = f.params.peer;
    o.faults.push_back(std::move(m));
  }
  return o;
}

std::vector<CompletedOp> CompleteOps(const History& h) {
  std::set<int> killed;
  for (const RankEnd& r : h.ranks) {
    if (r.exit == RankExit::kKilled) killed.insert(r.rank);
  }
  struct Acc {
    int64_t start = 0, end = 0;
    uint64_t bytes = 0;
    bool ok = true;
    int group = 0;  // the largest group a rank reported for it; 0: the world
    std::set<int> ranks;
  };
  std::map<int64_t, Acc> by_index;
  for (const OpRecord& r : h.ops) {
    auto [it, fresh] = by_index.try_emplace(r.index);
    Acc& a = it->second;
    if (fresh) {
      a.start = r.start_ns;
      a.end = r.end_ns;
    }
    a.start = std::min(a.start, r.start_ns);
    a.end = std::max(a.end, r.end_ns);
    a.bytes = std::max(a.bytes, r.bytes);
    a.ok = a.ok && r.ok;
    a.group = std::max(a.group, r.group);
    a.ranks.insert(r.rank);
  }
  // Ranks a successful shrink left out: not expected in the collectives of a smaller group.
  const std::set<int> shrunk_out = ShrunkOut(h);
  std::vector<CompletedOp> out;
  for (const auto& [index, a] : by_index) {
    if (!a.ok) continue;
    bool all = true;
    for (int r = 0; r < h.world_size && all; ++r) {
      all = a.ranks.count(r) > 0 || killed.count(r) > 0 ||
            (a.group > 0 && shrunk_out.count(r) > 0);
    }
    if (!all || a.end <= a.start) continue;
    const double factor = BusBwFactor(h.op, a.group > 0 ? a.group : h.world_size);
    CompletedOp op;
    op.factor = factor;
    op.index = index;
    op.start_ns = a.start;
    op.end_ns = a.end;
    op.bytes = a.bytes;
    op.busbw_gbps =
        static_cast<double>(a.bytes) * 8.0 / static_cast<double>(a.end - a.start) * factor;
    out.push_back(op);
  }
  std::sort(out.begin(), out.end(),
            [](const CompletedOp& x, const CompletedOp& y) { return x.start_ns < y.start_ns; });
  return out;
}

int64_t WindowEndNs(const History& h) {
  int64_t end = 0;
  for (const OpRecord& r : h.ops) end = std::max(end, r.end_ns);
  return end > 0 ? end : h.run_end_ns;
}

bool FlowCrosses(const FaultRecord& f, const MetricsOptions::FaultModel* model, const Topology& t,
                 int rank, int peer, int path) {
  if (rank == peer || rank < 0 || peer < 0) return false;
  const faults::FaultDescriptor& kind = faults::DescriptorOf(f.kind);
  const int rph = std::max(1, t.ranks_per_host);
  auto host_of = [&](int g) { return g / rph; };
  if (kind.target == faults::TargetShape::kRank) {
    const std::optional<int> g = f.target.GlobalRank(t);
    return g && (rank == *g || peer == *g);
  }
  if (f.target.rail && path != *f.target.rail) return false;
  if (kind.target == faults::TargetShape::kRankPath) {
    const std::optional<int> g = f.target.GlobalRank(t);
    if (!g) return false;
    const int other = model ? model->peer : -1;
    if (other < 0) return rank == *g || peer == *g;
    return (rank == *g && peer == other) || (rank == other && peer == *g);
  }
  // A link or socket fault on a rail port: one end of the flow sits behind that port.
  const int owner = model ? model->port_rank : -1;
  if (owner >= 0) return rank == owner || peer == owner;
  return host_of(rank) == f.target.host || host_of(peer) == f.target.host;
}

namespace {

// Whether rank g sits behind the fault's target: the rank of a rank fault (and the peer of a
// connection fault), the owner of a per-rank port, or a rank on the host of a rail fault.
bool RankOnTarget(const FaultRecord& f, const MetricsOptions::FaultModel* model, const Topology& t,
                  int g) {
  const faults::FaultDescriptor& kind = faults::DescriptorOf(f.kind);
  if (kind.rank_target()) {
    const std::optional<int> r = f.target.GlobalRank(t);
    return (r && *r == g) || (model && model->peer == g);
  }
  if (model && model->port_rank >= 0) return g == model->port_rank;
  return g / std::max(1, t.ranks_per_host) == f.target.host;
}

}  // namespace

RunMetrics ComputeMetrics(const History& h, const MetricsOptions& o) {
  RunMetrics rm;
  const int64_t window_end = WindowEndNs(h);
  const std::vector<CompletedOp> ops = CompleteOps(h);
  rm.completed_ops = static_cast<int64_t>(ops.size());
  std::vector<CompletedOp> measured;
  for (const CompletedOp& op : ops) {
    if (op.index >= o.warmup_iters && op.start_ns >= h.run_start_ns + o.warmup_ns) {
      measured.push_back(op);
    }
  }
  if (!measured.empty()) rm.measured_from_ns = measured.front().start_ns;

  // Cycles: each complete collective owns the time since the previous one's end.
  std::vector<CompletedOp> by_end = ops;
  std::sort(by_end.begin(), by_end.end(),
            [](const CompletedOp& x, const CompletedOp& y) { return x.end_ns < y.end_ns; });
  struct Cycle {
    int64_t index, from, to;
    double gbps;  // cycle busbw
  };
  std::vector<Cycle> cycles;
  // The first collective has no cycle: nothing before it says when its cycle began.
  for (size_t k = 1; k < by_end.size(); ++k) {
    const int64_t from = by_end[k - 1].end_ns;
    const int64_t to = by_end[k].end_ns;
    if (to <= from) continue;
    cycles.push_back(
        {by_end[k].index, from, to,
         static_cast<double>(by_end[k].bytes) * 8.0 / static_cast<double>(to - from) *
                    by_end[k].factor});
  }

  std::optional<int64_t> first_fault;
  for (const FaultRecord& f : h.faults) {
    if (f.applied_ns && (!first_fault || *f.applied_ns < *first_fault)) first_fault = f.applied_ns;
  }
  std::vector<double> base_bw, base_time;
  std::set<int64_t> base_index;
  for (const CompletedOp& op : measured) {
    if (first_fault && op.end_ns > *first_fault) continue;
    base_bw.push_back(op.busbw_gbps);
    base_time.push_back(static_cast<double>(op.end_ns - op.start_ns));
    base_index.insert(op.index);
  }
  std::optional<double> baseline = Median(base_bw);
  if (baseline && *baseline <= 0) baseline.reset();  // barrier: nothing to compare with
  const std::optional<double> base_op_ns = Median(base_time);
  if (baseline && base_op_ns) rm.baseline_op_ms = *base_op_ns / kNsPerMs;
  // The baseline cycle busbw: delivered over elapsed time across the baseline cycles (not a
  // median of per-cycle rates, which a right-skewed spread of cycles pulls above the rate the
  // job actually sustains, so that even a window without a fault would read as a loss).
  auto cycle_rate = [&](const std::set<int64_t>& which) -> std::optional<double> {
    double delivered = 0;  // Gbit/s x ns
    int64_t elapsed = 0;
    for (const Cycle& c : cycles) {
      if (!which.count(c.index)) continue;
      delivered += c.gbps * static_cast<double>(c.to - c.from);
      elapsed += c.to - c.from;
    }
    if (elapsed <= 0 || delivered <= 0) return std::nullopt;
    return delivered / static_cast<double>(elapsed);
  };
  std::optional<double> base_cycle = cycle_rate(base_index);
  rm.overall.baseline_busbw_gbps = baseline;
  // The level recovery is judged against: the baseline collectives' bytes over their own
  // times, the same estimator as the rolling busbw it is compared with. The median of
  // per-collective rates sits above it wherever the collectives' times spread (a few slow
  // ones pull the rate down, not the median), so a job whose collectives after the fault look
  // exactly like those before would read as not yet recovered.
  // Bytes over the collectives' own times, like each collective's busbw (the worker's time
  // between collectives, e.g. checking results, is not the network's): Gbit/s, 0 when none.
  auto busy_rate = [&](auto&& ops) {
    double busbits = 0;  // bytes x 8 x each collective's own busbw factor
    int64_t busy = 0;
    for (const CompletedOp* op : ops) {
      busbits += static_cast<double>(op->bytes) * 8.0 * op->factor;
      busy += op->end_ns - op->start_ns;
    }
    return busy > 0 ? busbits / static_cast<double>(busy) : 0.0;
  };
  std::optional<double> base_rate;
  if (baseline) {
    std::vector<const CompletedOp*> base_ops;
    for (const CompletedOp& op : measured) {
      if (base_index.count(op.index)) base_ops.push_back(&op);
    }
    if (const double r = busy_rate(base_ops); r > 0) base_rate = r;
  }

  // Completion instants for stall gaps.
  std::vector<int64_t> completions;
  for (const CompletedOp& op : ops) completions.push_back(op.end_ns);
  std::sort(completions.begin(), completions.end());
  // The longest gap between consecutive marks (the completions within [from, to] plus from
  // and to themselves) that overlaps [a, e].
  auto longest_gap = [&](int64_t from, int64_t to, int64_t a, int64_t e) {
    std::vector<int64_t> marks = {from, to};
    for (int64_t c : completions) {
      if (c > from && c < to) marks.push_back(c);
    }
    std::sort(marks.begin(), marks.end());
    int64_t gap = 0;
    for (size_t k = 0; k + 1 < marks.size(); ++k) {
      if (marks[k] < e && marks[k + 1] > a) gap = std::max(gap, marks[k + 1] - marks[k]);
    }
    return gap;
  };
  auto stall_of = [&](int64_t gap) -> std::optional<double> {
    if (!baseline || !base_op_ns) return std::nullopt;
    return std::max(0.0, (static_cast<double>(gap) - *base_op_ns) / kNsPerMs);
  };
  // Delivered cycle busbw x time over [a, e], against the baseline cycle.
  auto goodput_loss = [&](int64_t a, int64_t e) -> std::optional<double> {
    if (!base_cycle || e <= a) return std::nullopt;
    double delivered = 0;  // Gbit/s x ns
    for (const Cycle& c : cycles) {
      const int64_t lo = std::max(c.from, a), hi = std::min(c.to, e);
      if (hi > lo) delivered += c.gbps * static_cast<double>(hi - lo);
    }
    return 100.0 * (1.0 - delivered / (*base_cycle * static_cast<double>(e - a)));
  };

  if (h.faults.empty() && !measured.empty()) {
    // A fault-free run: the same rules over the measured window, so both read their noise.
    const int64_t from = measured.front().start_ns;
    rm.overall.stall_ms = stall_of(longest_gap(from, window_end, from, window_end));
    // Goodput as a fault that changes nothing would read it at mid-run: the baseline cycle
    // from the measured cycles ending in the first half, the loss over the second half. What
    // it reads is the metric's own noise on this run.
    const int64_t mid = from + (window_end - from) / 2;
    std::set<int64_t> first_half;
    for (const CompletedOp& op : measured) {
      if (op.end_ns <= mid) first_half.insert(op.index);
    }
    base_cycle = cycle_rate(first_half);
    rm.overall.goodput_loss_pct = goodput_loss(mid, window_end);
  }

  // Rolling busbw at measured[j] within the window measured[first..last]: bytes over busy time
  // of the collectives from j on that together span at least kRollingWindowNs and number at
  // least kRollingMinOps; near `last`, over the collectives back from `last` that do as much
  // (never before `first`). One collective's time jitters with the scheduling of a busy host;
  // the throughput over a window is what recovers or not.
  auto rolling = [&](size_t j, size_t first, size_t last) {
    size_t from = j, to = j;
    auto short_of = [&](size_t lo, size_t hi) {  // [lo, hi] spans too little or holds too few
      return measured[hi].end_ns - measured[lo].start_ns < kRollingWindowNs ||
             hi - lo + 1 < kRollingMinOps;
    };
    if (!short_of(j, last)) {
      while (to < last && short_of(j, to)) ++to;
    } else {
      to = last;
      while (from > first && short_of(from, last)) --from;
    }
    std::vector<const CompletedOp*> window;
    for (size_t k = from; k <= to; ++k) window.push_back(&measured[k]);
    return busy_rate(window);
  };

  std::set<int> killed;
  for (const RankEnd& r : h.ranks) {
    if (r.exit == RankExit::kKilled) killed.insert(r.rank);
  }
  // Each rank's ok collectives, by start.
  std::map<int, std::vector<const OpRecord*>> rank_ops;
  for (const OpRecord& r : h.ops) {
    if (r.ok) rank_ops[r.rank].push_back(&r);
  }
  for (auto& [rank, v] : rank_ops) {
    std::sort(v.begin(), v.end(),
              [](const OpRecord* x, const OpRecord* y) { return x->start_ns < y->start_ns; });
  }

  // The job gave up after its last collective: the runner's watchdog ended it, or a rank
  // reported its first error (a collective, the stop agreement, its own watchdog) after the
  // last collective ended. A rank that died without a word, or a library's teardown that hung
  // (the rank exits without an error), is not taken for one: the workload may have been done.
  bool gave_up = h.watchdog_fired;
  for (const RankEnd& r : h.ranks) {
    gave_up = gave_up || (r.first_error_ns && *r.first_error_ns >= window_end);
  }

  bool all_recovered = true;
  bool all_converged = true;
  bool any_applied = false;
  // Overall figures that stay null because an applied fault's own figure is null: the worst
  // over faults cannot be told when one of them was not measured.
  bool stall_missing = false, detection_missing = false, first_missing = false;
  bool loss_missing = false, degraded_missing = false, any_permanent = false;
  for (const FaultRecord& f : h.faults) {
    FaultMetrics fm;
    fm.id = f.id;
    fm.values.baseline_busbw_gbps = baseline;
    if (!f.applied_ns) {
      rm.per_fault.push_back(fm);
      continue;
    }
    any_applied = true;
    const MetricsOptions::FaultModel* model = FindModel(o, f.id);
    const bool permanent = model && model->permanent;
    const int64_t a = *f.applied_ns;
    int64_t e = window_end;
    const faults::FaultDescriptor& kind = faults::DescriptorOf(f.kind);
    if (!permanent && !kind.one_shot() && f.reverted_ns && *f.reverted_ns > a) {
      e = std::min(*f.reverted_ns, window_end);
    }
    MetricValues& v = fm.values;

    // Where no collective ended after the fault, or the job gave up after its last collective
    // ended with the fault still in force (window_end is the last end of any rank's
    // collective; the one in flight at the fault may end just after it), the gap runs from
    // that end to the first error a rank reported after it (e.g. from the ranks' stop
    // agreement, which is no measured collective) or, with none, to the end of the run (ranks
    // that hung until the runner's watchdog, or died without a word): a stall measured up to
    // when the job gave up or was ended, not none.
    int64_t stall_to = window_end, stall_e = e;
    if ((window_end <= a || (gave_up && e >= window_end)) && h.run_end_ns > a) {
      const int64_t after = std::max(a, window_end);
      stall_to = std::max(h.run_end_ns, after);
      for (const RankEnd& r : h.ranks) {
        if (r.first_error_ns && *r.first_error_ns >= after) {
          stall_to = std::min(stall_to, *r.first_error_ns);
        }
      }
      stall_e = std::max(stall_e, stall_to);
    }
    v.stall_ms = stall_of(longest_gap(h.run_start_ns, stall_to, a, stall_e));

    // Collective progress: every affected rank completed a collective it started after a.
    {
      std::vector<int> affected;
      for (int g = 0; g < h.world_size; ++g) {
        if (!killed.count(g) && RankOnTarget(f, model, o.topology, g)) affected.push_back(g);
      }
      if (affected.empty()) {
        for (int g = 0; g < h.world_size; ++g) {
          if (!killed.count(g)) affected.push_back(g);
        }
      }
      std::optional<int64_t> done = a;
      for (int g : affected) {
        std::optional<int64_t> first;
        for (const OpRecord* r : rank_ops[g]) {
          if (r->start_ns >= a && r->end_ns <= window_end) {
            first = r->end_ns;
            break;
          }
        }
        if (!first) {
          done.reset();
          break;
        }
        done = std::max(*done, *first);
      }
      if (done && !affected.empty()) fm.progress_ms = static_cast<double>(*done - a) / kNsPerMs;
    }

    // Path events: the affected flows.
    if (h.events_supported) {
      std::map<std::tuple<int, int, int>, Flow> flows;
      for (const CclEvent& ev : h.events) {
        if (ev.kind != EventKind::kPathDown || ev.time_ns < a || ev.time_ns > e) continue;
        if (!FlowCrosses(f, model, o.topology, ev.rank, ev.peer, ev.path)) continue;
        auto [it, fresh] = flows.try_emplace({ev.rank, ev.peer, ev.path});
        if (fresh || ev.time_ns < it->second.down_ns) {
          it->second.rank = ev.rank;
          it->second.peer = ev.peer;
          it->second.path = ev.path;
          it->second.down_ns = ev.time_ns;
        }
      }
      std::optional<int64_t> first_down, first_resumed, last_resumed, last_resumed_all;
      bool never = false, never_all = false;
      for (auto& [key, fl] : flows) {
        if (!first_down || fl.down_ns < *first_down) first_down = fl.down_ns;
        for (const CclEvent& ev : h.events) {
          if (ev.kind == EventKind::kResumed && ev.rank == fl.rank && ev.peer == fl.peer &&
              ev.time_ns >= fl.down_ns && ev.time_ns <= window_end &&
              (!fl.resumed_ns || ev.time_ns < *fl.resumed_ns)) {
            fl.resumed_ns = ev.time_ns;
          }
        }
        // Every flow, idle or not.
        if (!fl.resumed_ns) {
          never_all = true;
        } else if (!last_resumed_all || *fl.resumed_ns > *last_resumed_all) {
          last_resumed_all = fl.resumed_ns;
        }
        if (!fl.resumed_ns || *fl.resumed_ns > e) {
          // Idle while down: a collective ran start to end inside [down, e] without it.
          for (const CompletedOp& op : ops) {
            if (op.start_ns >= fl.down_ns && op.end_ns <= e) {
              fl.counted = false;
              break;
            }
          }
        }
        if (!fl.counted) continue;
        if (!fl.resumed_ns) {
          never = true;
          continue;
        }
        if (!first_resumed || *fl.resumed_ns < *first_resumed) first_resumed = fl.resumed_ns;
        if (!last_resumed || *fl.resumed_ns > *last_resumed) last_resumed = fl.resumed_ns;
      }
      if (first_down) v.detection_ms = static_cast<double>(*first_down - a) / kNsPerMs;
      if (first_resumed) v.failover_first_ms = static_cast<double>(*first_resumed - a) / kNsPerMs;
      if (!flows.empty() && !never_all && last_resumed_all) {
        fm.all_flows_ms = static_cast<double>(*last_resumed_all - a) / kNsPerMs;
      }
      if (!flows.empty()) {
        fm.convergence = "path_events";
        if (never) {
          fm.never_converged = true;
        } else if (last_resumed) {
          v.failover_latency_ms = static_cast<double>(*last_resumed - a) / kNsPerMs;
        }
      }
      for (auto& [key, fl] : flows) fm.flows.push_back(fl);
      std::sort(fm.flows.begin(), fm.flows.end(), [](const Flow& x, const Flow& y) {
        return std::tie(x.down_ns, x.rank, x.peer, x.path) <
               std::tie(y.down_ns, y.rank, y.peer, y.path);
      });
    }
    if (fm.convergence.empty() || (!fm.never_converged && !v.failover_latency_ms)) {
      // No path events (or every flow reported down was idle): collective progress.
      fm.convergence = "collective_progress";
      v.failover_latency_ms = fm.progress_ms;
      fm.never_converged = !fm.progress_ms.has_value();
    }
    if (fm.never_converged) all_converged = false;

    const std::optional<double> capacity = model ? model->capacity : std::optional<double>(1.0);
    if (base_rate && capacity) {
      const double threshold = o.recovery_pct / 100.0 * *base_rate * *capacity;
      for (size_t i = 0; i < measured.size() && !v.recovery_ms; ++i) {
        if (measured[i].start_ns < a) continue;
        const int64_t until = measured[i].start_ns + o.sustain_ns;
        size_t last = i;
        while (last + 1 < measured.size() && measured[last].end_ns < until) ++last;
        const bool covered = measured[last].end_ns >= until;
        bool good = covered;
        for (size_t j = i; j <= last && good; ++j) good = rolling(j, i, last) >= threshold;
        if (good && covered) {
          v.recovery_ms = static_cast<double>(measured[i].start_ns - a) / kNsPerMs;
        }
      }
    }
    if (baseline && !v.recovery_ms) all_recovered = false;

    if (permanent && baseline) {
      const int64_t half = a + (window_end - a) / 2;
      std::vector<double> steady;
      for (const CompletedOp& op : measured) {
        if (op.start_ns >= half) steady.push_back(op.busbw_gbps);
      }
      if (auto m = Median(steady)) v.degraded_ratio = *m / *baseline;
    }

    v.goodput_loss_pct = goodput_loss(a, e);

    stall_missing = stall_missing || !v.stall_ms;
    detection_missing = detection_missing || !v.detection_ms;
    first_missing = first_missing || !v.failover_first_ms;
    loss_missing = loss_missing || !v.goodput_loss_pct;
    // degraded_ratio applies to permanent faults only: a transient fault has none to miss.
    if (permanent) {
      any_permanent = true;
      degraded_missing = degraded_missing || !v.degraded_ratio;
    }
    TakeMax(&rm.overall.stall_ms, v.stall_ms);
    TakeMax(&rm.overall.detection_ms, v.detection_ms);
    TakeMax(&rm.overall.failover_first_ms, v.failover_first_ms);
    TakeMax(&rm.overall.failover_latency_ms, v.failover_latency_ms);
    TakeMax(&rm.overall.recovery_ms, v.recovery_ms);
    TakeMin(&rm.overall.degraded_ratio, v.degraded_ratio);
    TakeMax(&rm.overall.goodput_loss_pct, v.goodput_loss_pct);
    rm.per_fault.push_back(fm);
  }
  if (!any_applied || !all_recovered) rm.overall.recovery_ms.reset();
  if (!any_applied || !all_converged) rm.overall.failover_latency_ms.reset();
  if (stall_missing) rm.overall.stall_ms.reset();
  if (detection_missing) rm.overall.detection_ms.reset();
  if (first_missing) rm.overall.failover_first_ms.reset();
  if (loss_missing) rm.overall.goodput_loss_pct.reset();
  if (!any_permanent || degraded_missing) rm.overall.degraded_ratio.reset();

  if (o.check) {
    std::set<int64_t> wrong;
    for (const OpRecord& r : h.ops) {
      if (r.wrong) wrong.insert(r.index);
    }
    rm.wrong_results = static_cast<int64_t>(wrong.size());
  }
  rm.outcome = ClassifyOutcome(h, o, &rm.outcome_reason);
  return rm;
}

// The samples of the newest checkpoint that every rank of its group wrote in the same
// incarnation; 0 when there is none.
uint64_t CheckpointedSamples(const History& h) {
  // (incarnation, step) -> ranks that wrote it, and its samples.
  std::map<std::pair<int, int64_t>, std::pair<std::set<int>, uint64_t>> written;
  for (const CheckpointRecord& c : h.checkpoints) {
    auto& w = written[{c.incarnation, c.step}];
    w.first.insert(c.rank);
    w.second = c.samples;
  }
  const std::set<int> shrunk_out = ShrunkOut(h);
  uint64_t best = 0;
  for (const auto& [key, w] : written) {
    // The group that wrote it: the world less the ranks a shrink had left out by then (a
    // shrunk group's checkpoint names its own members only).
    bool all = true;
    for (int r = 0; r < h.world_size && all; ++r) all = w.first.count(r) > 0 || shrunk_out.count(r) > 0;
    if (all) best = std::max(best, w.second);
  }
  return best;
}

TrainingMetrics ComputeTraining(const History& h, int64_t warmup_iters, bool train) {
  TrainingMetrics t;
  int64_t first = 0, last = 0;
  for (const CompletedOp& op : CompleteOps(h)) {
    if (op.index < warmup_iters) continue;
    if (t.steps_completed == 0) first = op.start_ns;
    last = std::max(last, op.end_ns);
    ++t.steps_completed;
  }
  if (t.steps_completed > 0 && last > first) t.steps_per_s = t.steps_completed / ((last - first) / 1e9);
  double loss_sum = 0;
  int losses = 0;
  for (const TrainResult& r : h.results) {
    ++t.ranks_reported;
    if (!t.param_sha256) {
      t.param_sha256 = r.param_sha256;
    } else if (*t.param_sha256 != r.param_sha256) {
      t.param_sha256_agree = false;
    }
    if (!std::isnan(r.loss)) {
      loss_sum += r.loss;
      ++losses;
    }
  }
  if (!t.param_sha256_agree) t.param_sha256.reset();
  if (losses > 0) t.final_loss = loss_sum / losses;
  if (train) {
    for (const TrainResult& r : h.results) {
      if (r.samples) t.useful_samples = std::min(t.useful_samples.value_or(UINT64_MAX), *r.samples);
    }
    const bool finished = t.useful_samples.has_value();
    t.finished = finished;
    if (!finished) t.useful_samples = CheckpointedSamples(h);
    // A job that did not finish held its GPUs until its last rank gave up (or was stopped),
    // not only until its last step, and pays the restart that resubmits it (TrainingMetrics).
    int64_t end = WindowEndNs(h);
    bool priced = true;
    if (!finished) {
      for (const RankEnd& r : h.ranks) end = std::max(end, r.end_ns);
      int64_t sum = 0, n = 0;
      for (const RestartRecord& r : h.restarts) {
        if (r.cost_ns) sum += *r.cost_ns, ++n;
      }
      if (n > 0) {
        t.resubmission_s = static_cast<double>(sum) / n / 1e9;
      } else {
        priced = false;
      }
    }
    if (priced && end > h.run_start_ns) {
      t.job_time_s = static_cast<double>(end - h.run_start_ns) / 1e9 + t.resubmission_s.value_or(0);
      t.samples_per_s = static_cast<double>(*t.useful_samples) / *t.job_time_s;
    }
  }
  return t;
}

nlohmann::json TrainingMetrics::ToJson() const {
  using nlohmann::json;
  return {{reports::kStepsCompleted, steps_completed},
          {reports::kStepsPerS, steps_per_s ? json(*steps_per_s) : json(nullptr)},
          {reports::kParamSha256, param_sha256 ? json(*param_sha256) : json(nullptr)},
          {reports::kParamSha256Agree, param_sha256_agree},
          {reports::kRanksReported, ranks_reported},
          {reports::kFinalLoss, final_loss ? json(*final_loss) : json(nullptr)},
          {reports::kGoodputRatio, goodput_ratio ? json(*goodput_ratio) : json(nullptr)}};
}

}  // namespace faultline::runner
