#include "runner/sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>

namespace faultline::sim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kMaxFailuresPerRun = 5e7;  // about 2 GB of arrivals for one seed

uint64_t Mix(uint64_t x) {  // SplitMix64 finalizer
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

struct Arrival {
  double t = 0;
  FaultClass cls = FaultClass::kGpu;
  bool transient = false;
  double outage_s = 0;
  double draw = 0;  // uniform in [0, 1): which calibration sample
};

std::vector<Arrival> Arrivals(const SimConfig& c, uint64_t seed) {
  std::mt19937_64 rng(Mix(seed));
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> rates;
  double total = 0;
  for (const auto& m : c.classes) {
    rates.push_back(m.rate_per_unit_hour / 3600.0 * c.Units(m.cls) * c.rate_scale);
    total += rates.back();
  }
  std::vector<Arrival> out;
  if (total <= 0) return out;
  const double horizon = c.days * 86400.0;
  double t = 0;
  for (;;) {
    t += -std::log1p(-u(rng)) / total;
    if (t >= horizon) break;
    Arrival a;
    a.t = t;
    double pick = u(rng) * total;
    size_t i = 0;
    while (i + 1 < rates.size() && pick >= rates[i]) pick -= rates[i++];
    a.cls = c.classes[i].cls;
    a.transient = u(rng) < c.classes[i].transient_fraction;
    a.outage_s = -std::log1p(-u(rng)) * c.transient_outage_s;
    a.draw = u(rng);
    out.push_back(a);
  }
  return out;
}

// What failover does about one failure of a network class: drawn from the calibration.
struct FailoverCost {
  bool restart = true;
  double stall_s = 0;
  double ratio = 1;    // bandwidth while degraded / healthy
  double compute = 1;  // the job's compute while degraded / healthy (a shrink drops a host)
};

class Pricer {
 public:
  Pricer(const SimConfig& c, const Calibration* cal) : c_(c), cal_(cal) {}

  const ClassModel& Model(FaultClass cls) const {
    for (const auto& m : c_.classes) {
      if (m.cls == cls) return m;
    }
    return c_.classes.front();
  }
  bool Network(FaultClass cls) const { return !Model(cls).transient_kind.empty(); }
  double CapacityRatio() const {
    return c_.rails_per_host > 1 ? (c_.rails_per_host - 1.0) / c_.rails_per_host : 0.0;
  }

  const KindCalibration* Entry(FaultClass cls, bool transient,
                               const std::string& policy = "failover") const {
    if (cal_ == nullptr) return nullptr;
    const ClassModel& m = Model(cls);
    const KindCalibration* e =
        cal_->Find(c_.ccl, transient ? m.transient_kind : m.permanent_kind, policy);
    return e != nullptr && !e->samples.empty() ? e : nullptr;
  }

  // The samples standing for this failure under `policy`'s runs: for a transient one, faults
  // that were reverted (held for a while and healed); for a permanent one, all of the kind.
  std::vector<const FaultSample*> Samples(FaultClass cls, bool transient,
                                          const std::string& policy = "failover") const {
    std::vector<const FaultSample*> out;
    const KindCalibration* e = Entry(cls, transient, policy);
    if (e == nullptr) return out;
    for (const FaultSample& s : e->samples) {
      if (!transient || s.fault_for_s) out.push_back(&s);
    }
    return out;
  }

  FailoverCost Failover(const Arrival& a) const {
    FailoverCost f;
    const std::vector<const FaultSample*> samples = Samples(a.cls, a.transient);
    if (samples.empty()) {  // the config's model
      f.restart = CapacityRatio() <= 0;
      f.stall_s = c_.model_stall_s;
      f.ratio = CapacityRatio();
      return f;
    }
    const size_t i = std::min(samples.size() - 1,
                              static_cast<size_t>(a.draw * static_cast<double>(samples.size())));
    const FaultSample& s = *samples[i];
    f.restart = !s.survived;
    f.stall_s = s.stall_ms.value_or(0) / 1000.0;
    // A ratio above 1 is measurement noise around "not degraded".
    f.ratio = std::min(1.0, s.degraded_ratio.value_or(CapacityRatio()));
    return f;
  }

  // The failure as the selector of measured adaptive training runs of this kind handled it.
  // The drawn run gives the action its selector ended on; the action is priced by the same
  // rule as the fixed policy that takes it, at this job's scale (a run's own ratio is of its
  // few ranks' steps, which would not carry over):
  //   restarted (fail_stop chosen, or a run that did not survive): a restart;
  //   shrink: the run's measured stall, then the job without the failed part's host (compute
  //           (hosts - 1) / hosts, full bandwidth among the rest) until the part works again,
  //           when the host rejoins;
  //   wait (last): held for the whole outage;
  //   failover, or no decision (the library's own recovery): failover's drawn cost.
  // nullopt without such runs (the model).
  std::optional<FailoverCost> Adaptive(const Arrival& a, double degraded_s) const {
    const std::vector<const FaultSample*> samples = Samples(a.cls, a.transient, "adaptive");
    if (samples.empty()) return std::nullopt;
    const size_t i = std::min(samples.size() - 1,
                              static_cast<size_t>(a.draw * static_cast<double>(samples.size())));
    const FaultSample& s = *samples[i];
    const std::string last = s.decisions.empty() ? "" : s.decisions.back();
    FailoverCost f;
    if (!s.survived || s.restarts > 0 || last == "fail_stop") return f;  // restart
    // A lost GPU or host cannot be failed over or waited out: only a shrink keeps the job.
    if (!Network(a.cls) && last != "shrink") return f;
    if (last == "shrink") {
      const double hosts = static_cast<double>(c_.Hosts());
      f.restart = hosts <= 1;
      f.stall_s = s.stall_ms.value_or(0) / 1000.0;
      f.ratio = 1;
      f.compute = hosts > 1 ? (hosts - 1) / hosts : 0;
      return f;
    }
    if (last == "wait") {
      f.restart = false;
      f.stall_s = degraded_s;
      return f;
    }
    return Failover(a);
  }

  // Share of measured adaptive runs of a non-network class (a lost rank) whose selector did
  // not restart the job: it shrank. 0 without such runs.
  double AdaptiveKeepShare(FaultClass cls) const {
    if (Network(cls)) return 0;
    const auto samples = Samples(cls, false, "adaptive");
    if (samples.empty()) return 0;
    double kept = 0;
    for (const FaultSample* s : samples) {
      if (s->survived && s->restarts == 0 && !s->decisions.empty() &&
          s->decisions.back() == "shrink") {
        kept += 1;
      }
    }
    return kept / static_cast<double>(samples.size());
  }

  // Probability that failover survives a failure of `cls` (for the restart rate).
  double SurviveShare(FaultClass cls) const {
    const ClassModel& m = Model(cls);
    if (m.transient_kind.empty()) return 0;
    auto share = [&](bool transient) {
      const auto samples = Samples(cls, transient);
      if (samples.empty()) return CapacityRatio() > 0 ? 1.0 : 0.0;
      double kept = 0;  // survived with some bandwidth left (ratio 0 restarts)
      for (const FaultSample* s : samples) {
        if (s->survived && s->degraded_ratio.value_or(CapacityRatio()) > 0) kept += 1;
      }
      return kept / static_cast<double>(samples.size());
    };
    return m.transient_fraction * share(true) + (1 - m.transient_fraction) * share(false);
  }

  double Speed(double ratio) const {
    if (ratio <= 0) return 0;
    return 1.0 / (c_.comm_fraction / ratio + 1.0 - c_.comm_fraction);
  }

 private:
  const SimConfig& c_;
  const Calibration* cal_;
};

struct Outcome {
  double useful_s = 0;
  double restarts = 0;
  std::vector<double> lost_s = std::vector<double>(kNumClasses, 0.0);
  double checkpoint_s = 0;
};

// A stretch of degraded running: a network part lost until `end`, leaving `ratio` of the
// bandwidth; charged to its class.
struct Window {
  double end = 0;
  double ratio = 1;
  int cls = 0;
  double compute = 1;  // a shrink's: the job's compute left
};

Outcome RunPolicy(const SimConfig& c, const Pricer& pricer, Policy policy, double tau,
                  const std::vector<Arrival>& arrivals) {
  const double horizon = c.days * 86400.0;
  const double ckpt = c.checkpoint_cost_s;
  // A free checkpoint is taken continuously: nothing computed is ever lost.
  const bool continuous = ckpt <= 0;
  Outcome o;
  double t = 0, committed = 0, pending = 0, ckpt_left = 0, restart_until = -1;
  std::vector<Window> windows;  // active degraded windows

  // Overlapping losses compound: each window removes (1 - ratio) of the bandwidth, and a
  // shrink's window multiplies the compute left.
  auto combined_ratio = [&] {
    double lost = 0;
    for (const Window& w : windows) lost += 1 - w.ratio;
    return std::max(0.0, 1 - lost);
  };
  auto compute_left = [&] {
    double c = 1;
    for (const Window& w : windows) c *= w.compute;
    return c;
  };
  auto advance = [&](double to) {
    to = std::min(to, horizon);
    while (t < to) {
      windows.erase(std::remove_if(windows.begin(), windows.end(),
                                   [&](const Window& w) { return w.end <= t; }),
                    windows.end());
      double limit = to;
      for (const Window& w : windows) limit = std::min(limit, w.end);
      const double bandwidth_speed = windows.empty() ? 1.0 : pricer.Speed(combined_ratio());
      const double speed = bandwidth_speed * compute_left();
      if (ckpt_left > 0) {
        const double dt = std::min(ckpt_left, limit - t);
        t += dt;
        ckpt_left -= dt;
        o.checkpoint_s += dt;
        if (ckpt_left <= 1e-9) {
          ckpt_left = 0;
          committed += pending;
          pending = 0;
        }
        continue;
      }
      double dt = limit - t;
      if (!continuous && std::isfinite(tau) && speed > 0) {
        dt = std::min(dt, (tau - pending) / speed);
      }
      const double work = dt * speed;
      (continuous ? committed : pending) += work;
      if (!windows.empty() && speed < 1) {
        // The slowdown, shared among the windows: the bandwidth part by the bandwidth each
        // took, and each shrink by the compute it took.
        double share_sum = 0, compute_sum = 0;
        for (const Window& w : windows) {
          share_sum += 1 - w.ratio;
          compute_sum += 1 - w.compute;
        }
        const double weight = (1 - bandwidth_speed) + compute_sum;
        for (const Window& w : windows) {
          const double part = (share_sum > 0 ? (1 - bandwidth_speed) * (1 - w.ratio) / share_sum : 0) +
                              (1 - w.compute);
          o.lost_s[w.cls] += dt * (1 - speed) * (weight > 0 ? part / weight : 0);
        }
      }
      t += dt;
      if (!continuous && std::isfinite(tau) && pending >= tau * (1 - 1e-12)) {
        pending = tau;
        ckpt_left = ckpt;
      }
    }
  };
  auto restart = [&](int cls) {
    o.lost_s[cls] += pending;
    pending = 0;
    ckpt_left = 0;
    const double r = std::min(c.restart_cost_s, horizon - t);
    o.lost_s[cls] += r;
    t += r;
    restart_until = t;
    windows.clear();  // the faulty parts are swapped at the restart
    o.restarts += 1;
  };

  for (const Arrival& a : arrivals) {
    if (a.t < restart_until) continue;  // absorbed by the restart in progress
    advance(a.t);  // one arriving during a stall is handled when the stall ends
    if (t >= horizon) break;
    const int cls = static_cast<int>(a.cls);
    // GPU, host and other failures restart the job, except under adaptive where its measured
    // runs of a lost rank say what the selector did (Pricer::Adaptive).
    const bool by_adaptive_runs = policy == Policy::kAdaptive && !pricer.Network(a.cls) &&
                                  !pricer.Samples(a.cls, false, "adaptive").empty();
    if (policy == Policy::kFailStop || (!pricer.Network(a.cls) && !by_adaptive_runs)) {
      restart(cls);
      continue;
    }
    const double degraded_s = a.transient ? a.outage_s : c.repair_s;
    const std::optional<FailoverCost> measured =
        policy == Policy::kAdaptive ? pricer.Adaptive(a, degraded_s) : std::nullopt;
    const FailoverCost f = measured ? *measured : pricer.Failover(a);
    if (f.restart || f.ratio <= 0 || f.compute <= 0) {
      restart(cls);
      continue;
    }
    if (policy == Policy::kAdaptive && !measured) {
      // The cheaper of the two for this failure, as a selector with exact estimates of this
      // failure's costs would choose (greedy: it does not weigh what a restart also clears).
      const double speed = pricer.Speed(f.ratio);
      const double failover_cost = f.stall_s + degraded_s * (1 - speed);
      const double restart_cost = pending + c.restart_cost_s;
      if (restart_cost < failover_cost) {
        restart(cls);
        continue;
      }
    }
    const double s = std::min(f.stall_s, horizon - t);
    t += s;
    o.lost_s[cls] += s;
    windows.push_back({t + degraded_s, f.ratio, cls, f.compute});
  }
  advance(horizon);
  o.useful_s = committed + pending;
  return o;
}

Interval Summarize(const std::vector<double>& v) {
  Interval r;
  if (v.empty()) return r;
  double sum = 0;
  for (double x : v) sum += x;
  r.mean = sum / static_cast<double>(v.size());
  double var = 0;
  for (double x : v) var += (x - r.mean) * (x - r.mean);
  const double n = static_cast<double>(v.size());
  const double half = v.size() > 1 ? 1.96 * std::sqrt(var / (n - 1)) / std::sqrt(n) : 0.0;
  r.lo = r.mean - half;
  r.hi = r.mean + half;
  return r;
}

}  // namespace

const char* FaultClassName(FaultClass c) {
  switch (c) {
    case FaultClass::kGpu: return "gpu";
    case FaultClass::kHost: return "host";
    case FaultClass::kNic: return "nic";
    case FaultClass::kNetwork: return "network";
    case FaultClass::kOther: return "other";
  }
  return "?";
}

const char* PolicyName(Policy p) {
  switch (p) {
    case Policy::kFailStop: return "fail_stop";
    case Policy::kFailover: return "failover";
    case Policy::kAdaptive: return "adaptive";
  }
  return "?";
}

nlohmann::json Interval::ToJson() const {
  return {{"mean", mean}, {"ci95", {lo, hi}}};
}

double FailStopUsefulShare(double rate, double tau, double ckpt, double restart) {
  if (rate <= 0) return std::isfinite(tau) ? tau / (tau + ckpt) : 1.0;
  return tau / ((std::expm1(rate * (tau + ckpt))) * (1.0 / rate + restart));
}


Status CheckSimulable(const SimConfig& c, int seeds) {
  if (!std::isfinite(c.days) || c.days <= 0) return InvalidArgument("days must be a finite number > 0");
  if (!std::isfinite(c.rate_scale) || c.rate_scale < 0) {
    return InvalidArgument("rate-scale must be a finite number >= 0");
  }
  if (seeds < 1) return InvalidArgument("seeds must be >= 1");
  if (c.checkpoint_cost_s != 0 && c.checkpoint_cost_s < 1) {
    return InvalidArgument("checkpoint_cost must be 0 (free, continuous) or at least 1 s");
  }
  if (c.checkpoint_interval_s && *c.checkpoint_interval_s < 1) {
    return InvalidArgument("checkpoint_interval must be at least 1 s");
  }
  const double horizon = c.days * 86400.0;
  const double failures = c.JobRatePerSecond() * horizon;
  if (!std::isfinite(failures) || failures > kMaxFailuresPerRun) {
    return InvalidArgument("about " + std::to_string(static_cast<int64_t>(failures)) +
                           " failures per run: more than the " +
                           std::to_string(static_cast<int64_t>(kMaxFailuresPerRun)) +
                           " this simulator takes (lower --gpus, --days or --rate-scale)");
  }
  return Status();
}

ScaleResult Simulate(const SimConfig& c, const Calibration* cal, int seeds, uint64_t base_seed) {
  Pricer pricer(c, cal);
  ScaleResult r;
  r.gpus = c.gpus;
  r.hosts = c.Hosts();
  const double rate = c.JobRatePerSecond();
  r.failures_per_day = rate * 86400;
  r.mtbf_h = rate > 0 ? 1 / rate / 3600 : kInf;
  const double horizon = c.days * 86400.0;
  std::set<std::string> modelled, capacity_ratio, adaptive_measured, adaptive_modelled,
      adaptive_stops;
  for (const auto& m : c.classes) {
    if (m.transient_kind.empty()) {
      // A lost GPU or host: adaptive's runs of a lost rank, or fail-stop.
      if (m.permanent_kind.empty()) continue;
      const std::string what = std::string(FaultClassName(m.cls)) + " (" + m.permanent_kind + ")";
      const auto adaptive = pricer.Samples(m.cls, false, "adaptive");
      if (adaptive.empty()) {
        adaptive_stops.insert(what);
      } else {
        adaptive_measured.insert(what + ": " + std::to_string(adaptive.size()) + " runs");
      }
      continue;
    }
    for (bool tr : {true, false}) {
      const std::string what = std::string(FaultClassName(m.cls)) + " " +
                               (tr ? "transient" : "permanent") + " (" +
                               (tr ? m.transient_kind : m.permanent_kind) + ")";
      const auto adaptive = pricer.Samples(m.cls, tr, "adaptive");
      (adaptive.empty() ? adaptive_modelled : adaptive_measured)
          .insert(what + (adaptive.empty() ? "" : ": " + std::to_string(adaptive.size()) + " runs"));
      const auto samples = pricer.Samples(m.cls, tr);
      if (samples.empty()) {
        modelled.insert(what);
        continue;
      }
      for (const FaultSample* s : samples) {
        if (s->survived && !s->degraded_ratio) capacity_ratio.insert(what);
      }
    }
  }
  struct Acc {
    PolicyResult pr;
    std::vector<double> lost_gpu_h, ratios;
    std::vector<double> breakdown = std::vector<double>(kNumClasses + 1, 0.0);
    double restarts = 0, failures = 0;
  };
  std::vector<Acc> acc(kNumPolicies);
  for (int p = 0; p < kNumPolicies; ++p) {
    const Policy policy = static_cast<Policy>(p);
    PolicyResult& pr = acc[p].pr;
    pr.policy = policy;
    // The rate of restarts this policy sees: every failure under fail-stop; under failover
    // and adaptive the network failures it survives drop out.
    double restart_rate = 0;
    for (const auto& m : c.classes) {
      const double cr = m.rate_per_unit_hour / 3600.0 * c.Units(m.cls) * c.rate_scale;
      const double kept = policy == Policy::kFailStop ? 0
                          : policy == Policy::kAdaptive && !pricer.Network(m.cls)
                              ? pricer.AdaptiveKeepShare(m.cls)
                              : pricer.SurviveShare(m.cls);
      restart_rate += cr * (1 - kept);
    }
    if (c.checkpoint_interval_s) {
      pr.checkpoint_interval_s = *c.checkpoint_interval_s;
    } else if (restart_rate <= 0 || c.checkpoint_cost_s <= 0) {
      pr.checkpoint_interval_s = kInf;  // nothing to protect, or checkpoints are free
    } else {
      const double m = 1 / restart_rate, ck = c.checkpoint_cost_s;
      pr.checkpoint_interval_s = std::max(1.0, std::sqrt(2 * m * ck));
      // Daly's higher-order optimum (2006), beside it.
      const double daly = ck < 2 * m ? std::sqrt(2 * ck * m) *
                                               (1 + std::sqrt(ck / (2 * m)) / 3 + ck / (2 * m) / 9) -
                                           ck
                                     : m;
      pr.daly_interval_s = daly;
      if (std::abs(daly - pr.checkpoint_interval_s) > 0.05 * daly) {
        pr.notes.push_back("Young/Daly first order drifts here: C/M = " +
                           std::to_string(ck / m) + "; Daly's higher-order interval is " +
                           std::to_string(daly) + " s");
      }
    }
  }
  // One seed at a time: its arrivals, then every policy over the same arrivals.
  for (int s = 0; s < seeds; ++s) {
    const std::vector<Arrival> arrivals = Arrivals(c, base_seed * 1000003ULL + s);
    for (int p = 0; p < kNumPolicies; ++p) {
      Acc& a = acc[p];
      const Outcome o =
          RunPolicy(c, pricer, static_cast<Policy>(p), a.pr.checkpoint_interval_s, arrivals);
      a.lost_gpu_h.push_back((horizon - o.useful_s) * static_cast<double>(c.gpus) / 3600.0);
      a.ratios.push_back(o.useful_s / horizon);
      for (int k = 0; k < kNumClasses; ++k) a.breakdown[k] += o.lost_s[k];
      a.breakdown[kNumClasses] += o.checkpoint_s;
      a.restarts += o.restarts;
      a.failures += static_cast<double>(arrivals.size());
    }
  }
  for (int p = 0; p < kNumPolicies; ++p) {
    Acc& a = acc[p];
    PolicyResult& pr = a.pr;
    pr.gpu_hours_lost = Summarize(a.lost_gpu_h);
    pr.effective_ratio = Summarize(a.ratios);
    pr.restarts_mean = a.restarts / seeds;
    pr.failures_mean = a.failures / seeds;
    for (int k = 0; k <= kNumClasses; ++k) {
      const std::string name =
          k < kNumClasses ? FaultClassName(static_cast<FaultClass>(k)) : "checkpoint";
      pr.breakdown.emplace_back(name, a.breakdown[k] / seeds * static_cast<double>(c.gpus) / 3600.0);
    }
    if (pr.policy != Policy::kFailStop) {
      for (const auto& m : modelled) {
        pr.notes.push_back("no calibration for " + c.ccl + ": " + m +
                           "; the config's model is used (survive, stall " +
                           std::to_string(c.model_stall_s) + " s, capacity ratio)");
      }
      for (const auto& m : capacity_ratio) {
        pr.notes.push_back(m + ": runs of " + c.ccl +
                           " that survived measured no degraded ratio (only permanent faults "
                           "have one); the capacity ratio (rails - 1) / rails is used");
      }
    }
    if (pr.policy == Policy::kAdaptive) {
      for (const auto& m : adaptive_measured) {
        pr.notes.push_back(m + " of " + c.ccl +
                           " under policy adaptive: each failure takes the action a drawn "
                           "run's selector ended on, priced by the rule of the policy that "
                           "takes it (a restart; failover's drawn cost; a shrink: the run's "
                           "stall, then the job without that host, (hosts - 1) / hosts of its "
                           "compute, until the part works again and the host rejoins)");
      }
      for (const auto& m : adaptive_stops) {
        pr.notes.push_back(m + ": no runs of " + c.ccl +
                           " under policy adaptive that lost a rank; fail-stop, as under the "
                           "other policies");
      }
      for (const auto& m : adaptive_modelled) {
        pr.notes.push_back(
            m + ": no runs of " + c.ccl +
            " under policy adaptive; a model, not a measurement: the cheaper of failover's "
            "drawn cost and a restart, as an idealised greedy selector with exact estimates "
            "of that failure's costs would choose");
      }
    }
    r.policies.push_back(std::move(pr));
  }
  return r;
}

}  // namespace faultline::sim
