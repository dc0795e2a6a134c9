#include "runner/sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <set>

#include "runner/policy/cost_model.h"

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
  int rail = 0;     // network classes: the rail of its host that failed
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
    a.rail = std::min(c.rails_per_host - 1, static_cast<int>(u(rng) * c.rails_per_host));
    out.push_back(a);
  }
  return out;
}

// The calibration with every entry's samples drawn again with replacement (one bootstrap
// resample).
Calibration Resample(const Calibration& cal, uint64_t seed) {
  std::mt19937_64 rng(Mix(seed ^ 0x5bd1e995ULL));
  Calibration out = cal;
  for (KindCalibration& e : out.entries) {
    const std::vector<FaultSample> orig = e.samples;
    std::uniform_int_distribution<size_t> pick(0, orig.size() - 1);
    for (FaultSample& s : e.samples) s = orig[pick(rng)];
  }
  return out;
}

// What one failure costs under a policy: a restart (after `stall_s` where a wait held first),
// or a stall and then degraded running for `window_s` (infinite: until the next restart).
struct Action {
  bool restart = true;
  double stall_s = 0;
  double ratio = 1;    // bandwidth while degraded / healthy
  double compute = 1;  // the job's compute while degraded / healthy (a shrink drops a host)
  double window_s = 0;
  std::optional<double> grow_s;  // a shrink's: stall to take the host back when the window ends
  std::string unpriced;          // non-empty: a cost it needs was not measured
};

constexpr double kStepS = 1.0;  // the step time the cost model is evaluated with (simulator.h)

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
  // A failure the CCL sees: every failure but one of a rail it never uses.
  bool Hits(const Arrival& a) const { return !Network(a.cls) || a.rail < c_.RailsUsed(); }
  // Share of a class's failures the CCL sees.
  double HitShare(FaultClass cls) const {
    return Network(cls) ? static_cast<double>(c_.RailsUsed()) / c_.rails_per_host : 1.0;
  }

  const KindCalibration* Entry(const std::string& kind, const std::string& policy) const {
    if (cal_ == nullptr || kind.empty()) return nullptr;
    const KindCalibration* e = cal_->Find(c_.ccl, kind, policy);
    return e != nullptr && !e->samples.empty() ? e : nullptr;
  }

  // The samples standing for this failure under `policy`'s runs: for a transient one, faults
  // that were reverted (held for a while and healed); for a permanent one, all of the kind.
  std::vector<const FaultSample*> Samples(FaultClass cls, bool transient,
                                          const std::string& policy = "failover") const {
    std::vector<const FaultSample*> out;
    const ClassModel& m = Model(cls);
    const KindCalibration* e = Entry(transient ? m.transient_kind : m.permanent_kind, policy);
    if (e == nullptr) return out;
    for (const FaultSample& s : e->samples) {
      if (!transient || s.fault_for_s) out.push_back(&s);
    }
    return out;
  }

  // Adaptive runs of the class's kinds whose selector ended on shrink without a restart: the
  // measured cost of a shrink.
  std::vector<const FaultSample*> ShrinkSamples(FaultClass cls) const {
    std::vector<const FaultSample*> out;
    const ClassModel& m = Model(cls);
    std::set<std::string> kinds = {m.transient_kind, m.permanent_kind};
    for (const std::string& kind : kinds) {
      const KindCalibration* e = Entry(kind, "adaptive");
      if (e == nullptr) continue;
      for (const FaultSample& s : e->samples) {
        if (s.survived && s.restarts == 0 && !s.decisions.empty() &&
            s.decisions.back() == "shrink") {
          out.push_back(&s);
        }
      }
    }
    return out;
  }

  static const FaultSample& Draw(const std::vector<const FaultSample*>& v, double draw) {
    return *v[std::min(v.size() - 1, static_cast<size_t>(draw * static_cast<double>(v.size())))];
  }

  double DegradedS(const Arrival& a) const { return a.transient ? a.outage_s : c_.repair_s; }

  Action Failover(const Arrival& a) const {
    Action f;
    f.window_s = DegradedS(a);
    const std::vector<const FaultSample*> samples = Samples(a.cls, a.transient);
    if (samples.empty()) {  // the config's model
      f.restart = CapacityRatio() <= 0;
      f.stall_s = f.restart ? 0 : c_.model_stall_s;
      f.ratio = CapacityRatio();
      return f;
    }
    const FaultSample& s = Draw(samples, a.draw);
    f.restart = !s.survived;
    if (f.restart) return f;
    if (!s.stall_ms) {
      f.unpriced = "a drawn " + (a.transient ? Model(a.cls).transient_kind : Model(a.cls).permanent_kind) +
                   " run of " + c_.ccl + " survived without a measured stall (" + s.source + ")";
      return f;
    }
    f.stall_s = *s.stall_ms / 1000.0;
    // A ratio above 1 is measurement noise around "not degraded".
    f.ratio = std::min(1.0, s.degraded_ratio.value_or(CapacityRatio()));
    if (f.ratio <= 0) f.restart = true;
    return f;
  }

  // The cost model's choice for this failure at time t (simulator.h, adaptive), and its price.
  Action Adaptive(const Arrival& a, double t, double pending, policy::RecoveryPolicy* chosen) const {
    using policy::RecoveryPolicy;
    const double horizon = c_.days * 86400.0;
    const bool network = Network(a.cls);
    const Action fo = network ? Failover(a) : Action{};
    if (!fo.unpriced.empty()) return fo;
    const std::vector<const FaultSample*> shrinks = ShrinkSamples(a.cls);
    const int world = static_cast<int>(std::min<int64_t>(c_.gpus, 1 << 30));
    *chosen = RecoveryPolicy::kFailStop;
    if (world < 2) return Action{};
    policy::PolicyState st;
    st.fault_class = !network ? policy::FaultClassKind::kRank
                     : a.cls == FaultClass::kNic ? policy::FaultClassKind::kNic
                                                 : policy::FaultClassKind::kLink;
    st.world_size = world;
    st.steps_remaining = static_cast<int64_t>(std::max(0.0, horizon - t) / kStepS);
    st.step_time_s = kStepS;
    st.comm_fraction = c_.comm_fraction;
    st.surviving_bandwidth_fraction = network && !fo.restart ? std::clamp(fo.ratio, 0.0, 1.0) : 0.0;
    if (network && c_.selector_outage == "mean") st.expected_outage_s = c_.transient_outage_s;
    if (network && c_.selector_outage == "exact" && a.transient) st.expected_outage_s = a.outage_s;
    st.checkpoint_age_s = pending;
    st.restart_cost_s = c_.restart_cost_s;
    const double shrink_stall =
        shrinks.empty() ? 0 : Draw(shrinks, a.draw).stall_ms.value_or(-1) / 1000.0;
    const bool shrink_offered = !shrinks.empty() && shrink_stall >= 0;
    // A shrink never measured is given the model's cap as its cost, so that the model neither
    // picks it nor falls back to it after a wait.
    st.shrink_cost_s = shrink_offered ? shrink_stall : policy::kMaxLostGpuSeconds / world;
    st.shrink_ranks = std::max(1, std::min(c_.gpus_per_host, world - 1));
    st.failover_switch_cost_s = fo.restart ? 0 : fo.stall_s;
    st.wait_bound_s = c_.wait_bound_s;
    const policy::PolicyDecision d = policy::Decide(st);
    auto offered = [&](RecoveryPolicy p) {
      const policy::PolicyEstimate& e = d.options[static_cast<int>(p)];
      return e.applicable && (p != RecoveryPolicy::kShrink || shrink_offered);
    };
    // The cheapest offered option, in the cost model's order for equal costs.
    auto cheapest = [&](std::optional<RecoveryPolicy> skip) {
      RecoveryPolicy best = RecoveryPolicy::kFailStop;
      double least = std::numeric_limits<double>::infinity();
      for (RecoveryPolicy p : {RecoveryPolicy::kFailover, RecoveryPolicy::kWait,
                               RecoveryPolicy::kShrink, RecoveryPolicy::kFailStop}) {
        if (p == skip || !offered(p)) continue;
        const double cost = d.options[static_cast<int>(p)].lost_gpu_seconds;
        if (cost < least) {
          least = cost;
          best = p;
        }
      }
      return best;
    };
    RecoveryPolicy pick = offered(d.chosen) ? d.chosen : cheapest(std::nullopt);
    *chosen = pick;
    const double hosts_left =
        static_cast<double>(c_.gpus - st.shrink_ranks) / static_cast<double>(c_.gpus);
    auto price = [&](RecoveryPolicy p) {
      Action f;
      switch (p) {
        case RecoveryPolicy::kFailover:
          return fo;
        case RecoveryPolicy::kShrink:
          f.restart = false;
          f.stall_s = shrink_stall;
          f.compute = hosts_left;
          if (c_.GrowCost()) {
            f.window_s = network ? DegradedS(a) : c_.repair_s;
            f.grow_s = *c_.GrowCost();
          } else {
            f.window_s = std::numeric_limits<double>::infinity();
          }
          return f;
        default:
          return f;  // a restart
      }
    };
    if (pick != RecoveryPolicy::kWait) return price(pick);
    // Held for the outage, at most the wait bound; past it, the fallback from the wait's end.
    const double outage = DegradedS(a);
    if (outage <= c_.wait_bound_s) {
      Action f;
      f.restart = false;
      f.stall_s = outage;
      return f;
    }
    std::optional<RecoveryPolicy> fb = d.options[static_cast<int>(RecoveryPolicy::kWait)].fallback;
    if (!fb || !offered(*fb)) fb = cheapest(RecoveryPolicy::kWait);
    Action f = price(*fb);
    f.stall_s += c_.wait_bound_s;
    if (std::isfinite(f.window_s) && !f.grow_s) f.window_s = std::max(0.0, f.window_s - c_.wait_bound_s);
    return f;
  }

  // Probability that failover survives a failure of `cls` it sees (for the restart rate).
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

constexpr int kNumActions = 4;  // policy::RecoveryPolicy fail_stop .. shrink

struct Outcome {
  double useful_s = 0;
  double restarts = 0;
  std::vector<double> lost_s = std::vector<double>(kNumClasses, 0.0);
  double checkpoint_s = 0;
  std::vector<double> actions = std::vector<double>(kNumActions, 0.0);
  std::string unpriced;
};

// A stretch of degraded running: a network part lost until `end`, leaving `ratio` of the
// bandwidth, or a shrink's host gone; charged to its class.
struct Window {
  double end = 0;
  double ratio = 1;
  int cls = 0;
  double compute = 1;            // a shrink's: the job's compute left
  std::optional<double> grow_s;  // a shrink's: the stall that takes the host back at `end`
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
    double cl = 1;
    for (const Window& w : windows) cl *= w.compute;
    return cl;
  };
  auto advance = [&](double to) {
    to = std::min(to, horizon);
    while (t < to) {
      // A shrink that ends takes its host back, at the grow's stall.
      for (const Window& w : windows) {
        if (w.end <= t && w.grow_s) {
          const double s = std::min(*w.grow_s, horizon - t);
          t += s;
          o.lost_s[w.cls] += s;
        }
      }
      windows.erase(std::remove_if(windows.begin(), windows.end(),
                                   [&](const Window& w) { return w.end <= t; }),
                    windows.end());
      if (t >= to) break;
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
          const double part =
              (share_sum > 0 ? (1 - bandwidth_speed) * (1 - w.ratio) / share_sum : 0) +
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
    windows.clear();  // the faulty parts are swapped, and a shrunk job is whole again
    o.restarts += 1;
  };

  for (const Arrival& a : arrivals) {
    if (!pricer.Hits(a)) continue;  // a rail the CCL never uses
    const int cls = static_cast<int>(a.cls);
    if (a.t < restart_until) {
      // The restart in progress fails with it and starts over (Daly's complete model).
      const double end = std::min(horizon, a.t + c.restart_cost_s);
      o.lost_s[cls] += end - t;
      t = end;
      restart_until = t;
      o.restarts += 1;
      continue;
    }
    advance(a.t);  // one arriving during a stall is handled when the stall ends
    if (t >= horizon) break;
    if (policy == Policy::kFailStop || (policy == Policy::kFailover && !pricer.Network(a.cls))) {
      restart(cls);
      continue;
    }
    Action f;
    if (policy == Policy::kAdaptive) {
      policy::RecoveryPolicy chosen = policy::RecoveryPolicy::kFailStop;
      f = pricer.Adaptive(a, t, pending, &chosen);
      if (f.unpriced.empty()) o.actions[static_cast<int>(chosen)] += 1;
    } else {
      f = pricer.Failover(a);
    }
    if (!f.unpriced.empty()) {
      if (o.unpriced.empty()) o.unpriced = f.unpriced;
      continue;
    }
    const double s = std::min(f.stall_s, horizon - t);
    t += s;
    o.lost_s[cls] += s;
    if (f.restart || f.ratio <= 0 || f.compute <= 0) {
      restart(cls);
      continue;
    }
    windows.push_back({t + f.window_s, f.ratio, cls, f.compute, f.grow_s});
  }
  advance(horizon);
  o.useful_s = committed + pending;
  return o;
}

// The mean over seeds, with a 95 % interval from the seeds' standard error and `cal_var`, the
// calibration's variance of the mean (bootstrap), added.
Interval Summarize(const std::vector<double>& v, double cal_var) {
  Interval r;
  if (v.empty()) return r;
  double sum = 0;
  for (double x : v) sum += x;
  r.mean = sum / static_cast<double>(v.size());
  double var = 0;
  for (double x : v) var += (x - r.mean) * (x - r.mean);
  const double n = static_cast<double>(v.size());
  const double seed_var = v.size() > 1 ? var / (n - 1) / n : 0.0;
  const double half = 1.96 * std::sqrt(seed_var + cal_var);
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
  // Daly's complete form: E[T] = e^(L R) (e^(L a) - 1) / L.
  return tau * rate / (std::exp(rate * restart) * std::expm1(rate * (tau + ckpt)));
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
  std::string rails_rule;
  const int rails_used = c.RailsUsed(&rails_rule);
  std::set<std::string> modelled, capacity_ratio, shrink_measured, shrink_unmeasured, beds;
  for (const auto& m : c.classes) {
    if (m.transient_kind.empty() && m.permanent_kind.empty()) continue;
    const std::string cname = FaultClassName(m.cls);
    const auto shrinks = pricer.ShrinkSamples(m.cls);
    (shrinks.empty() ? shrink_unmeasured : shrink_measured)
        .insert(cname + (shrinks.empty() ? "" : ": " + std::to_string(shrinks.size()) + " runs"));
    if (m.transient_kind.empty()) continue;
    for (bool tr : {true, false}) {
      const std::string what = cname + " " + (tr ? "transient" : "permanent") + " (" +
                               (tr ? m.transient_kind : m.permanent_kind) + ")";
      const auto samples = pricer.Samples(m.cls, tr);
      if (samples.empty()) {
        modelled.insert(what);
        continue;
      }
      for (const FaultSample* s : samples) {
        if (s->survived && !s->degraded_ratio) capacity_ratio.insert(what);
        if (s->survived && s->degraded_ratio) {
          beds.insert(s->rail_gbps ? std::to_string(static_cast<int>(std::lround(*s->rail_gbps))) +
                                         " Gbps per rail"
                                   : std::string("a rail speed the report did not record"));
        }
      }
    }
  }
  struct Acc {
    PolicyResult pr;
    std::vector<double> lost_gpu_h, ratios;
    std::vector<double> breakdown = std::vector<double>(kNumClasses + 1, 0.0);
    std::vector<double> actions = std::vector<double>(kNumActions, 0.0);
    double restarts = 0, failures = 0;
  };
  std::vector<Acc> acc(kNumPolicies);
  auto young_daly = [&](PolicyResult& pr, double restart_rate) {
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
  };
  for (int p = 0; p < kNumPolicies; ++p) {
    const Policy policy = static_cast<Policy>(p);
    PolicyResult& pr = acc[p].pr;
    pr.policy = policy;
    // The rate of restarts this policy sees: every failure the CCL sees under fail-stop; under
    // failover the network failures it survives drop out. Adaptive's: measured below.
    double restart_rate = 0;
    for (const auto& m : c.classes) {
      const double cr =
          m.rate_per_unit_hour / 3600.0 * c.Units(m.cls) * c.rate_scale * pricer.HitShare(m.cls);
      const double kept = policy == Policy::kFailStop ? 0 : pricer.SurviveShare(m.cls);
      restart_rate += cr * (1 - kept);
    }
    if (policy != Policy::kAdaptive) young_daly(pr, restart_rate);
  }
  // Adaptive's restart rate: a pilot run over the first seed's failures at failover's
  // interval (what the cost model picks depends on the state, so no share is known ahead).
  {
    const std::vector<Arrival> pilot = Arrivals(c, base_seed * 1000003ULL);
    const Outcome o = RunPolicy(c, pricer, Policy::kAdaptive,
                                acc[static_cast<int>(Policy::kFailover)].pr.checkpoint_interval_s,
                                pilot);
    young_daly(acc[static_cast<int>(Policy::kAdaptive)].pr, o.restarts / horizon);
  }
  // The calibration's resamples (none without a calibration: nothing to resample).
  const int boots = cal != nullptr && !cal->entries.empty() ? std::max(0, c.bootstrap) : 0;
  r.bootstrap = boots;
  std::vector<Calibration> resampled;
  for (int b = 0; b < boots; ++b) resampled.push_back(Resample(*cal, base_seed * 7919ULL + b));
  std::vector<Pricer> pricers;
  for (const Calibration& rc : resampled) pricers.emplace_back(c, &rc);
  // boot_means[b][p]: the mean loss of policy p over the seeds under resample b.
  std::vector<std::vector<double>> boot_means(boots, std::vector<double>(kNumPolicies, 0.0));
  std::vector<std::string> unpriced(kNumPolicies);
  // One seed at a time: its arrivals, then every policy over the same arrivals.
  for (int s = 0; s < seeds; ++s) {
    const std::vector<Arrival> arrivals = Arrivals(c, base_seed * 1000003ULL + s);
    for (int p = 0; p < kNumPolicies; ++p) {
      Acc& a = acc[p];
      const Outcome o =
          RunPolicy(c, pricer, static_cast<Policy>(p), a.pr.checkpoint_interval_s, arrivals);
      if (!o.unpriced.empty() && unpriced[p].empty()) unpriced[p] = o.unpriced;
      a.lost_gpu_h.push_back((horizon - o.useful_s) * static_cast<double>(c.gpus) / 3600.0);
      a.ratios.push_back(o.useful_s / horizon);
      for (int k = 0; k < kNumClasses; ++k) a.breakdown[k] += o.lost_s[k];
      a.breakdown[kNumClasses] += o.checkpoint_s;
      for (int k = 0; k < kNumActions; ++k) a.actions[k] += o.actions[k];
      a.restarts += o.restarts;
      a.failures += static_cast<double>(arrivals.size());
      for (int b = 0; b < boots; ++b) {
        const Outcome ob = RunPolicy(c, pricers[b], static_cast<Policy>(p),
                                     a.pr.checkpoint_interval_s, arrivals);
        if (!ob.unpriced.empty() && unpriced[p].empty()) unpriced[p] = ob.unpriced;
        boot_means[b][p] += (horizon - ob.useful_s) * static_cast<double>(c.gpus) / 3600.0 / seeds;
      }
    }
  }
  // The calibration's variance of a statistic given its value under each resample.
  auto boot_var = [&](const std::function<double(int)>& of) {
    if (boots < 2) return 0.0;
    double sum = 0, sq = 0;
    for (int b = 0; b < boots; ++b) sum += of(b);
    const double mean = sum / boots;
    for (int b = 0; b < boots; ++b) sq += (of(b) - mean) * (of(b) - mean);
    return sq / (boots - 1);
  };
  for (int p = 0; p < kNumPolicies; ++p) {
    Acc& a = acc[p];
    PolicyResult& pr = a.pr;
    const double cal_var = boot_var([&](int b) { return boot_means[b][p]; });
    pr.gpu_hours_lost = Summarize(a.lost_gpu_h, cal_var);
    // The ratio is 1 - lost / (G x horizon): its calibration variance follows.
    const double scale = horizon * static_cast<double>(c.gpus) / 3600.0;
    pr.effective_ratio = Summarize(a.ratios, cal_var / (scale * scale));
    pr.restarts_mean = a.restarts / seeds;
    pr.failures_mean = a.failures / seeds;
    pr.unpriced = unpriced[p];
    for (int k = 0; k <= kNumClasses; ++k) {
      const std::string name =
          k < kNumClasses ? FaultClassName(static_cast<FaultClass>(k)) : "checkpoint";
      pr.breakdown.emplace_back(name, a.breakdown[k] / seeds * static_cast<double>(c.gpus) / 3600.0);
    }
    if (pr.policy == Policy::kAdaptive) {
      for (int k = 0; k < kNumActions; ++k) {
        pr.actions.emplace_back(policy::RecoveryPolicyName(static_cast<policy::RecoveryPolicy>(k)),
                                a.actions[k] / seeds);
      }
    }
    if (rails_used < c.rails_per_host) {
      pr.notes.push_back("rails: " + c.ccl + " uses " + std::to_string(rails_used) + " of " +
                         std::to_string(c.rails_per_host) + " rails per host (" + rails_rule +
                         "); a NIC or link failure on another rail costs it nothing, so it sees " +
                         std::to_string(rails_used) + "/" + std::to_string(c.rails_per_host) +
                         " of them");
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
      for (const auto& b : beds) {
        pr.notes.push_back("degraded ratios of " + c.ccl + " were measured on a test bed of " + b +
                           ", which the benchmark does not saturate: they do not say how a "
                           "saturated production fabric slows down");
      }
    }
    if (pr.policy == Policy::kAdaptive) {
      pr.notes.push_back(
          "at each failure the cost model (runner/policy/cost_model.h) chooses at the "
          "simulated time, over the job's remaining horizon; the outage is " +
          std::string(c.selector_outage == "exact"
                          ? "told to it (an oracle, not a live selector)"
                      : c.selector_outage == "mean"
                          ? "expected to last the mean transient outage (a history's estimate)"
                          : "unknown to it (treated as permanent)") +
          "; its checkpoint interval follows the restarts of a pilot run");
      pr.notes.push_back(
          c.GrowCost()
              ? "shrink: the job runs without the host until the part works again, then takes "
                "it back at the grow cost of " +
                    std::to_string(*c.GrowCost()) + " s"
              : std::string(c.grow_cost_s ? "shrink: " + c.ccl + " cannot grow its group"
                                          : "shrink: no grow has been measured") +
                    ", so the job runs without the host until its next restart (a later "
                    "failure that restarts it; no planned restart, so at worst to the "
                    "horizon)");
      for (const auto& m : shrink_measured) {
        pr.notes.push_back("shrink stall of " + m + " of " + c.ccl +
                           " under policy adaptive that ended on shrink (drawn)");
      }
      for (const auto& m : shrink_unmeasured) {
        pr.notes.push_back(m + ": no run of " + c.ccl +
                           " under policy adaptive ended on shrink; shrink is not offered");
      }
    }
    r.policies.push_back(std::move(pr));
  }
  // Paired differences: the same failures and the same resample on both sides.
  const std::pair<Policy, Policy> pairs[] = {{Policy::kFailover, Policy::kFailStop},
                                             {Policy::kAdaptive, Policy::kFailStop},
                                             {Policy::kAdaptive, Policy::kFailover}};
  for (const auto& [pa, pb] : pairs) {
    const int ia = static_cast<int>(pa), ib = static_cast<int>(pb);
    PolicyDifference d;
    d.a = pa;
    d.b = pb;
    std::vector<double> diff(seeds);
    for (int s = 0; s < seeds; ++s) diff[s] = acc[ia].lost_gpu_h[s] - acc[ib].lost_gpu_h[s];
    d.gpu_hours_lost =
        Summarize(diff, boot_var([&](int b) { return boot_means[b][ia] - boot_means[b][ib]; }));
    d.unpriced = !unpriced[ia].empty() ? unpriced[ia] : unpriced[ib];
    r.differences.push_back(d);
  }
  return r;
}

}  // namespace faultline::sim
