#include "runner/core/metrics.h"

#include <algorithm>
#include <map>
#include <set>

#include "runner/faults/registry.h"

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

// Time of the first event of `kind` at or after `from` that `match` accepts.
template <typename Match>
std::optional<int64_t> FirstEvent(const History& h, EventKind kind, int64_t from, Match match) {
  std::optional<int64_t> best;
  for (const CclEvent& e : h.events) {
    if (e.kind != kind || e.time_ns < from || !match(e)) continue;
    if (!best || e.time_ns < *best) best = e.time_ns;
  }
  return best;
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
  int completed = 0, errors = 0, killed = 0;
  for (const RankEnd& r : h.ranks) {
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
  return {{"baseline_busbw_gbps", v(baseline_busbw_gbps)},
          {"stall_ms", v(stall_ms)},
          {"detection_ms", v(detection_ms)},
          {"failover_latency_ms", v(failover_latency_ms)},
          {"recovery_ms", v(recovery_ms)},
          {"degraded_ratio", v(degraded_ratio)},
          {"goodput_loss_pct", v(goodput_loss_pct)}};
}

std::optional<double> CapacityLeft(const Topology& topology,
                                   const std::vector<const FaultSpec*>& specs) {
  if (topology.hosts <= 0 || topology.rails <= 0) return std::nullopt;
  const bool per_rank = topology.per_rank_nics();
  if (per_rank && topology.ranks_per_host <= 0) return std::nullopt;
  // cap[h][p]: fraction of port p's rate left on host h. A port is a rail with shared NICs,
  // and rank l's port on rail r (p = l * rails + r) with per-rank NICs.
  const int ports = per_rank ? topology.ranks_per_host * topology.rails : topology.rails;
  std::vector<std::vector<double>> cap(topology.hosts, std::vector<double>(ports, 1.0));
  const double rail_bps = topology.rail_gbps * 1e9;
  for (const FaultSpec* f : specs) {
    const faults::FaultDescriptor& d = f->descriptor();
    if (d.capacity == faults::CapacityEffect::kNone) continue;
    if (d.capacity == faults::CapacityEffect::kUnknown || !f->target.rail) return std::nullopt;
    if (per_rank && !f->target.rank) return std::nullopt;
    const int port =
        per_rank ? *f->target.rank * topology.rails + *f->target.rail : *f->target.rail;
    double& c = cap[f->target.host][port];
    c = std::min(c, d.port_share(*f, rail_bps));
  }
  double worst = 1.0;
  for (const auto& host : cap) {
    double sum = 0;
    for (double c : host) sum += c;
    worst = std::min(worst, sum / ports);
  }
  return worst;
}

MetricsOptions MetricsOptionsFor(const Scenario& scenario) {
  MetricsOptions o;
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
    m.capacity = CapacityLeft(scenario.topology, in_force);
    if (f.target.port && !f.descriptor().rank_target()) {
      m.port_rank = f.target.GlobalRank(scenario.topology).value_or(-1);
    }
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
    a.ranks.insert(r.rank);
  }
  const double factor = BusBwFactor(h.op, h.world_size);
  std::vector<CompletedOp> out;
  for (const auto& [index, a] : by_index) {
    if (!a.ok) continue;
    bool all = true;
    for (int r = 0; r < h.world_size && all; ++r) {
      all = a.ranks.count(r) > 0 || killed.count(r) > 0;
    }
    if (!all || a.end <= a.start) continue;
    CompletedOp op;
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

RunMetrics ComputeMetrics(const History& h, const MetricsOptions& o) {
  RunMetrics rm;
  const std::vector<CompletedOp> ops = CompleteOps(h);
  rm.completed_ops = static_cast<int64_t>(ops.size());
  std::vector<CompletedOp> measured;
  for (const CompletedOp& op : ops) {
    if (op.index >= o.warmup_iters && op.start_ns >= h.run_start_ns + o.warmup_ns) {
      measured.push_back(op);
    }
  }

  std::optional<int64_t> first_fault;
  for (const FaultRecord& f : h.faults) {
    if (f.applied_ns && (!first_fault || *f.applied_ns < *first_fault)) first_fault = f.applied_ns;
  }
  std::vector<double> base_bw, base_time;
  for (const CompletedOp& op : measured) {
    if (first_fault && op.end_ns > *first_fault) continue;
    base_bw.push_back(op.busbw_gbps);
    base_time.push_back(static_cast<double>(op.end_ns - op.start_ns));
  }
  std::optional<double> baseline = Median(base_bw);
  if (baseline && *baseline <= 0) baseline.reset();  // barrier: nothing to compare with
  const std::optional<double> base_op_ns = Median(base_time);
  rm.overall.baseline_busbw_gbps = baseline;

  // Completion instants, with the run's ends, for stall gaps.
  std::vector<int64_t> marks = {h.run_start_ns, h.run_end_ns};
  for (const CompletedOp& op : ops) marks.push_back(op.end_ns);
  std::sort(marks.begin(), marks.end());

  if (h.faults.empty()) {
    // A fault-free run has no stall by definition.
    rm.overall.stall_ms = baseline ? std::optional<double>(0.0) : std::nullopt;
  }

  // Rolling busbw at measured[j] within the window measured[first..last]: bytes over busy time
  // of the collectives from j on that together span at least kRollingWindowNs; near `last`, over
  // the collectives back from `last` that span as much (never before `first`). One collective's
  // time jitters with the scheduling of a busy host; the throughput over a window is what recovers
  // or not.
  const double factor = BusBwFactor(h.op, h.world_size);
  auto rolling = [&](size_t j, size_t first, size_t last) {
    size_t from = j, to = j;
    if (measured[last].end_ns - measured[j].start_ns >= kRollingWindowNs) {
      while (to < last && measured[to].end_ns - measured[j].start_ns < kRollingWindowNs) ++to;
    } else {
      to = last;
      while (from > first && measured[last].end_ns - measured[from].start_ns < kRollingWindowNs)
        --from;
    }
    // Bytes over the collectives' own times, like each collective's busbw (the worker's time
    // between collectives, e.g. checking results, is not the network's).
    uint64_t bytes = 0;
    int64_t busy = 0;
    for (size_t k = from; k <= to; ++k) {
      bytes += measured[k].bytes;
      busy += measured[k].end_ns - measured[k].start_ns;
    }
    return busy > 0 ? static_cast<double>(bytes) * 8.0 / static_cast<double>(busy) * factor : 0.0;
  };

  bool all_recovered = true;
  bool any_applied = false;
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
    int64_t e = h.run_end_ns;
    const faults::FaultDescriptor& kind = faults::DescriptorOf(f.kind);
    if (!permanent && !kind.one_shot() && f.reverted_ns && *f.reverted_ns > a) {
      e = *f.reverted_ns;
    }
    MetricValues& v = fm.values;

    if (baseline && base_op_ns) {
      int64_t gap = 0;
      for (size_t k = 0; k + 1 < marks.size(); ++k) {
        if (marks[k] < e && marks[k + 1] > a) gap = std::max(gap, marks[k + 1] - marks[k]);
      }
      v.stall_ms = std::max(0.0, (static_cast<double>(gap) - *base_op_ns) / kNsPerMs);
    }

    if (h.events_supported) {
      const bool link = !kind.rank_target() && f.target.rail.has_value();
      const int rail = f.target.rail.value_or(-1);
      // A fault on one rank's port only touches the paths that end at that rank.
      const int owner = model ? model->port_rank : -1;
      auto touches = [&](const CclEvent& ev) {
        return owner < 0 || ev.rank == owner || ev.peer == owner;
      };
      auto down = FirstEvent(h, EventKind::kPathDown, a, [&](const CclEvent& ev) {
        return !link || (ev.path == rail && touches(ev));
      });
      if (down) v.detection_ms = static_cast<double>(*down - a) / kNsPerMs;
      auto resumed = FirstEvent(h, EventKind::kResumed, a, [&](const CclEvent& ev) {
        return !link || (ev.path != rail && touches(ev));
      });
      if (resumed) v.failover_latency_ms = static_cast<double>(*resumed - a) / kNsPerMs;
    }

    const std::optional<double> capacity = model ? model->capacity : std::optional<double>(1.0);
    if (baseline && capacity) {
      const double threshold = o.recovery_pct / 100.0 * *baseline * *capacity;
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
      const int64_t half = a + (h.run_end_ns - a) / 2;
      std::vector<double> steady;
      for (const CompletedOp& op : measured) {
        if (op.start_ns >= half) steady.push_back(op.busbw_gbps);
      }
      if (auto m = Median(steady)) v.degraded_ratio = *m / *baseline;
    }

    if (baseline && e > a) {
      double delivered = 0;  // Gbit/s x ns
      for (const CompletedOp& op : ops) {
        const int64_t lo = std::max(op.start_ns, a), hi = std::min(op.end_ns, e);
        if (hi > lo) delivered += op.busbw_gbps * static_cast<double>(hi - lo);
      }
      v.goodput_loss_pct = 100.0 * (1.0 - delivered / (*baseline * static_cast<double>(e - a)));
    }

    TakeMax(&rm.overall.stall_ms, v.stall_ms);
    TakeMax(&rm.overall.detection_ms, v.detection_ms);
    TakeMax(&rm.overall.failover_latency_ms, v.failover_latency_ms);
    TakeMax(&rm.overall.recovery_ms, v.recovery_ms);
    TakeMin(&rm.overall.degraded_ratio, v.degraded_ratio);
    TakeMax(&rm.overall.goodput_loss_pct, v.goodput_loss_pct);
    rm.per_fault.push_back(fm);
  }
  if (!any_applied || !all_recovered) rm.overall.recovery_ms.reset();

  std::set<int64_t> wrong;
  for (const OpRecord& r : h.ops) {
    if (r.wrong) wrong.insert(r.index);
  }
  rm.wrong_results = static_cast<int64_t>(wrong.size());
  rm.outcome = ClassifyOutcome(h, o, &rm.outcome_reason);
  return rm;
}

}  // namespace faultline::runner
