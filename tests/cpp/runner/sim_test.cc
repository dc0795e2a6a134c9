// The GPU-hour simulator against closed forms (no failures; fail-stop with Poisson failures and
// a fixed interval; Young/Daly's interval beats half and double it), failover priced from a
// calibration, the calibration built from reports, and config errors with their place.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>

#include "runner/sim/calibration.h"
#include "runner/sim/sim_report.h"
#include "runner/sim/simulator.h"

namespace faultline::sim {
namespace {

// Only GPU failures, at a job MTBF of `mtbf_h` hours.
SimConfig GpuOnly(double mtbf_h, int64_t gpus = 1000) {
  SimConfig c = SimConfig::Defaults();
  for (auto& m : c.classes) {
    m.rate_per_unit_hour = m.cls == FaultClass::kGpu ? 1.0 / (mtbf_h * gpus) : 0.0;
  }
  c.gpus = gpus;
  return c;
}

const PolicyResult& Of(const ScaleResult& r, Policy p) { return r.policies[static_cast<int>(p)]; }

// The policy of `r` whose PolicyName is `name`.
const PolicyResult& Named(const ScaleResult& r, const std::string& name) {
  for (const PolicyResult& p : r.policies) {
    if (name == PolicyName(p.policy)) return p;
  }
  ADD_FAILURE() << "no policy " << name;
  return r.policies.front();
}

// GPU-hours the breakdown charges to `cause`; -1 when it has no such row.
double CauseHours(const PolicyResult& p, const std::string& cause) {
  for (const auto& [c, h] : p.breakdown) {
    if (c == cause) return h;
  }
  return -1.0;
}

double BreakdownSum(const PolicyResult& p) {
  double s = 0;
  for (const auto& [k, v] : p.breakdown) s += v;
  return s;
}

TEST(Simulator, NoFailuresNoLoss) {
  SimConfig c = SimConfig::Defaults();
  c.rate_scale = 0;
  c.days = 10;
  ScaleResult r = Simulate(c, nullptr, 3);
  for (const auto& p : r.policies) {
    EXPECT_EQ(p.gpu_hours_lost.mean, 0) << PolicyName(p.policy);
    EXPECT_DOUBLE_EQ(p.effective_ratio.mean, 1.0);
    EXPECT_FALSE(std::isfinite(p.checkpoint_interval_s));  // Young/Daly: nothing to protect
    EXPECT_EQ(p.failures_mean, 0);
  }
  // A fixed interval without failures costs exactly its checkpoints: C / (tau + C).
  c.checkpoint_interval_s = 540;
  c.checkpoint_cost_s = 60;
  ScaleResult fixed = Simulate(c, nullptr, 2);
  EXPECT_NEAR(Of(fixed, Policy::kFailStop).effective_ratio.mean, 0.9, 1e-9);
}

TEST(Simulator, FailStopMatchesTheClosedFormWithinTwoPercent) {
  SimConfig c = GpuOnly(/*mtbf_h=*/2.0);
  c.days = 60;
  c.checkpoint_interval_s = 1800;
  c.checkpoint_cost_s = 120;
  c.restart_cost_s = 600;
  ScaleResult r = Simulate(c, nullptr, 40);
  const double share = FailStopUsefulShare(c.JobRatePerSecond(), 1800, 120, 600);
  const double expected_lost_gpu_h = (1 - share) * c.days * 24 * static_cast<double>(c.gpus);
  const PolicyResult& p = Of(r, Policy::kFailStop);
  EXPECT_NEAR(p.gpu_hours_lost.mean, expected_lost_gpu_h, 0.02 * expected_lost_gpu_h)
      << "closed form useful share " << share;
  EXPECT_NEAR(p.effective_ratio.mean, share, 0.02 * share);
  // The confidence interval is seed-to-seed noise: it has a width, and 4x the seeds halve it.
  const double half40 = (p.gpu_hours_lost.hi - p.gpu_hours_lost.lo) / 2;
  EXPECT_GT(half40, 0);
  ScaleResult r10 = Simulate(c, nullptr, 10, /*base_seed=*/99);
  const double half10 =
      (Of(r10, Policy::kFailStop).gpu_hours_lost.hi - Of(r10, Policy::kFailStop).gpu_hours_lost.lo) / 2;
  EXPECT_GT(half10 / half40, 2.0 / 1.6);
  EXPECT_LT(half10 / half40, 2.0 * 1.6);
  // Every lost GPU-hour is attributed to a cause.
  EXPECT_NEAR(BreakdownSum(p), p.gpu_hours_lost.mean, 1e-6 * p.gpu_hours_lost.mean);
  // GPU failures fail-stop under every policy: failover is the same here.
  EXPECT_NEAR(Of(r, Policy::kFailover).gpu_hours_lost.mean, p.gpu_hours_lost.mean, 1e-9);
}

// A restart as long as half the MTBF: a failure during a restart starts it over (Daly's
// complete model); a simulator that absorbed such failures would lose about 10 % less here
// (e^(L R) = 1.65 against 1 + L R = 1.5).
TEST(Simulator, FailStopClosedFormHoldsWhenRestartsAreLong) {
  SimConfig c = GpuOnly(/*mtbf_h=*/2.0);
  c.days = 120;
  c.checkpoint_interval_s = 1800;
  c.checkpoint_cost_s = 120;
  c.restart_cost_s = 3600;
  ScaleResult r = Simulate(c, nullptr, 40);
  const double share = FailStopUsefulShare(c.JobRatePerSecond(), 1800, 120, 3600);
  EXPECT_NEAR(Of(r, Policy::kFailStop).effective_ratio.mean, share, 0.02 * share);
}

// Free checkpoints (cost 0) are continuous: a restart loses only its own time. A restart
// succeeds with probability e^(-L R) (a failure during it starts it over), so the useful share
// of the time is e^(-L R), Daly's form as tau -> 0.
TEST(Simulator, FreeCheckpointsLoseNoWork) {
  SimConfig c = GpuOnly(10.0);
  c.days = 30;
  c.checkpoint_cost_s = 0;
  c.restart_cost_s = 300;
  ASSERT_TRUE(CheckSimulable(c, 3).ok());
  ScaleResult r = Simulate(c, nullptr, 20);
  const PolicyResult& p = Of(r, Policy::kFailStop);
  EXPECT_FALSE(std::isfinite(p.checkpoint_interval_s));
  EXPECT_LE(p.gpu_hours_lost.mean,
            p.restarts_mean * 300 * static_cast<double>(c.gpus) / 3600 * (1 + 1e-9));
  const double lost_share = 1 - std::exp(-c.JobRatePerSecond() * 300);
  EXPECT_NEAR(1 - p.effective_ratio.mean, lost_share, 0.15 * lost_share);
}

TEST(Simulator, InputsItCannotSimulateAreRefused) {
  SimConfig c = SimConfig::Defaults();
  EXPECT_TRUE(CheckSimulable(c, 1).ok());
  SimConfig nan_days = c;
  nan_days.days = std::nan("");
  EXPECT_FALSE(CheckSimulable(nan_days, 1).ok());
  SimConfig nan_scale = c;
  nan_scale.rate_scale = std::nan("");
  EXPECT_FALSE(CheckSimulable(nan_scale, 1).ok());
  SimConfig tiny_ckpt = c;
  tiny_ckpt.checkpoint_cost_s = 1e-9;  // Young/Daly would check-point every few ms
  EXPECT_FALSE(CheckSimulable(tiny_ckpt, 1).ok());
  SimConfig tiny_tau = c;
  tiny_tau.checkpoint_interval_s = 1e-9;
  EXPECT_FALSE(CheckSimulable(tiny_tau, 1).ok());
  SimConfig huge = c;
  huge.gpus = 10'000'000;
  huge.days = 3650;
  huge.rate_scale = 100;
  Status st = CheckSimulable(huge, 1);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("failures per run"), std::string::npos) << st.message();
}

TEST(Simulator, YoungDalyIntervalBeatsHalfAndDoubleIt) {
  // MTBF 24 h, C = 60 s: C / M is small, where the first-order formula holds.
  SimConfig c = GpuOnly(24.0);
  c.days = 365;
  c.checkpoint_cost_s = 60;
  c.restart_cost_s = 300;
  ScaleResult yd = Simulate(c, nullptr, 30);
  const double tau = Of(yd, Policy::kFailStop).checkpoint_interval_s;
  EXPECT_NEAR(tau, std::sqrt(2 * 24 * 3600.0 * 60), 1e-6);
  for (double f : {0.5, 2.0}) {
    SimConfig o = c;
    o.checkpoint_interval_s = tau * f;
    ScaleResult other = Simulate(o, nullptr, 30);
    EXPECT_LT(Of(yd, Policy::kFailStop).gpu_hours_lost.mean,
              Of(other, Policy::kFailStop).gpu_hours_lost.mean)
        << "interval x" << f;
    // And so says the closed form.
    const double rate = c.JobRatePerSecond();
    EXPECT_GT(FailStopUsefulShare(rate, tau, 60, 300), FailStopUsefulShare(rate, tau * f, 60, 300));
  }
}

nlohmann::json Report(const std::string& ccl, const std::string& kind, const std::string& outcome,
                      double stall_ms, std::optional<double> ratio) {
  return {{"schema", "faultline.report/v2"},
          {"ccl", ccl},
          {"outcome", outcome},
          {"faults",
           {{{"id", "f"}, {"type", kind}, {"applied_s", 2.0}, {"reverted_s", 2.5}}}},
          {"per_fault",
           {{{"id", "f"},
             {"stall_ms", stall_ms},
             {"failover_latency_ms", 12.0},
             {"recovery_ms", nullptr},
             {"degraded_ratio", ratio ? nlohmann::json(*ratio) : nlohmann::json(nullptr)}}}}};
}

TEST(Calibration, ReportsBecomeSamplesPerCclAndKind) {
  Calibration cal;
  ASSERT_TRUE(AddReport(Report("ftccl", "link_down", "survived", 80, std::nullopt), "a", &cal).ok());
  ASSERT_TRUE(AddReport(Report("ftccl", "link_down", "survived", 20, std::nullopt), "b", &cal).ok());
  ASSERT_TRUE(AddReport(Report("gloo", "port_drop", "hung", 10000, std::nullopt), "c", &cal).ok());
  // Wrong-typed fields are not taken (and do not throw); a wrong result is not survival.
  nlohmann::json odd = Report("ftccl", "link_down", "survived", 5, std::nullopt);
  odd["faults"][0]["type"] = 1;
  EXPECT_TRUE(AddReport(odd, "odd", &cal).ok());
  nlohmann::json wrong = Report("ftccl", "port_drop", "survived", 5, std::nullopt);
  wrong["correctness"] = {{"checked", true}, {"wrong", 3}};
  ASSERT_TRUE(AddReport(wrong, "w", &cal).ok());
  EXPECT_EQ(cal.Find("ftccl", "port_drop")->Survived(), 0);
  EXPECT_FALSE(Calibration::FromJson(nlohmann::json{{"schema", 1}}).ok());
  nlohmann::json v1 = Report("ftccl", "link_down", "survived", 1, std::nullopt);
  v1["schema"] = "faultline.report/v1";
  EXPECT_FALSE(AddReport(v1, "old", &cal).ok());  // another schema: refused, not mixed in
  EXPECT_FALSE(AddReport(nlohmann::json::array(), "x", &cal).ok());
  const KindCalibration* ld = cal.Find("ftccl", "link_down");
  ASSERT_NE(ld, nullptr);
  ASSERT_EQ(ld->samples.size(), 2u);
  EXPECT_EQ(ld->Survived(), 2);
  EXPECT_DOUBLE_EQ(*ld->samples[0].stall_ms, 80);
  EXPECT_DOUBLE_EQ(*ld->samples[0].fault_for_s, 0.5);
  EXPECT_FALSE(ld->samples[0].degraded_ratio.has_value());
  EXPECT_EQ(cal.Find("gloo", "port_drop")->Survived(), 0);
  EXPECT_EQ(cal.sources, (std::vector<std::string>{"a", "b", "c", "odd", "w"}));
  // Round trip through the file format.
  auto back = Calibration::FromJson(cal.ToJson());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->Find("ftccl", "link_down")->samples.size(), 2u);
  EXPECT_FALSE(Calibration::FromJson(nlohmann::json{{"schema", "nope"}}).ok());
}

// Only network failures (links), to see failover priced from the calibration.
SimConfig NetworkOnly() {
  SimConfig c = SimConfig::Defaults();
  for (auto& m : c.classes) {
    m.rate_per_unit_hour = m.cls == FaultClass::kNetwork ? 1.0 / (4.0 * 1024) : 0.0;  // MTBF 4 h
  }
  c.gpus = 1024;
  c.gpus_per_host = 8;
  c.rails_per_host = 8;  // 1024 links
  c.days = 60;
  c.checkpoint_interval_s = 1800;
  return c;
}

TEST(Simulator, FailoverCostsWhatTheCalibrationMeasured) {
  SimConfig c = NetworkOnly();
  Calibration survives;
  for (const char* kind : {"link_down", "port_drop"}) {
    ASSERT_TRUE(AddReport(Report("ftccl", kind, "survived", 50, 0.875), "r", &survives).ok());
  }
  ScaleResult r = Simulate(c, &survives, 20);
  const double stop = Of(r, Policy::kFailStop).gpu_hours_lost.mean;
  const double over = Of(r, Policy::kFailover).gpu_hours_lost.mean;
  EXPECT_GT(stop, 0);
  EXPECT_LT(over, 0.5 * stop);  // a 50 ms stall and 7/8 bandwidth instead of a restart
  EXPECT_EQ(Of(r, Policy::kFailover).restarts_mean, 0);
  EXPECT_LE(Of(r, Policy::kAdaptive).gpu_hours_lost.mean, over + 1e-9);
  EXPECT_NEAR(BreakdownSum(Of(r, Policy::kFailover)), over, 1e-6 * over);
  // A CCL whose runs never survived: failover is fail-stop.
  Calibration dies;
  for (const char* kind : {"link_down", "port_drop"}) {
    ASSERT_TRUE(AddReport(Report("ftccl", kind, "aborted_clean", 50, std::nullopt), "r", &dies).ok());
  }
  ScaleResult d = Simulate(c, &dies, 20);
  EXPECT_NEAR(Of(d, Policy::kFailover).gpu_hours_lost.mean, Of(d, Policy::kFailStop).gpu_hours_lost.mean,
              1e-9);
  // A measured ratio above 1 (noise) is not a speed-up: failover never gains time.
  Calibration noisy;
  for (const char* kind : {"link_down", "port_drop"}) {
    ASSERT_TRUE(AddReport(Report("ftccl", kind, "survived", 0, 1.3), "r", &noisy).ok());
  }
  ScaleResult n = Simulate(c, &noisy, 5);
  for (const auto& [cause, h] : Of(n, Policy::kFailover).breakdown) EXPECT_GE(h, 0) << cause;
  const double noisy_lost = Of(n, Policy::kFailover).gpu_hours_lost.mean;
  EXPECT_NEAR(BreakdownSum(Of(n, Policy::kFailover)), noisy_lost, 1e-6 * noisy_lost);
  // No calibration: the model is used, and said.
  ScaleResult m = Simulate(c, nullptr, 2);
  bool said = false;
  for (const auto& n : Of(m, Policy::kFailover).notes) said |= n.find("config's model") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(Calibration, PoliciesAreKeptApartAndTrainingFiguresRead) {
  Calibration cal;
  ASSERT_TRUE(AddReport(Report("ftccl", "link_down", "survived", 80, 0.5), "plain", &cal).ok());
  nlohmann::json stop = Report("ftccl", "link_down", "survived", 900, std::nullopt);
  stop["policy"] = "fail_stop";
  stop["train"] = {{"goodput_ratio", 0.8},
                   {"restarts", {{{"cost_ms", 600.0}}, {{"cost_ms", 700.0}}, {{"cost_ms", nullptr}}}},
                   {"decisions", nlohmann::json::array()}};
  ASSERT_TRUE(AddReport(stop, "stop", &cal).ok());
  nlohmann::json ad = Report("ftccl", "link_down", "survived", 40, 0.6);
  ad["policy"] = "adaptive";
  ad["train"] = {{"goodput_ratio", 0.95},
                 {"restarts", nlohmann::json::array()},
                 {"decisions", {{{"chosen", "failover"}}, {{"chosen", "shrink"}}}}};
  ASSERT_TRUE(AddReport(ad, "ad", &cal).ok());
  // A report without a policy is failover's; the fail_stop run is not mixed into it.
  const KindCalibration* fo = cal.Find("ftccl", "link_down");
  ASSERT_NE(fo, nullptr);
  ASSERT_EQ(fo->samples.size(), 1u);
  EXPECT_EQ(fo->samples[0].source, "plain");
  EXPECT_FALSE(fo->samples[0].goodput_ratio.has_value());
  const KindCalibration* fs = cal.Find("ftccl", "link_down", "fail_stop");
  ASSERT_NE(fs, nullptr);
  EXPECT_EQ(fs->samples[0].restarts, 3);
  EXPECT_DOUBLE_EQ(*fs->samples[0].restart_cost_ms, 650);  // the two measured
  EXPECT_DOUBLE_EQ(*fs->samples[0].goodput_ratio, 0.8);
  const KindCalibration* a = cal.Find("ftccl", "link_down", "adaptive");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->samples[0].decisions, (std::vector<std::string>{"failover", "shrink"}));
  EXPECT_EQ(cal.Find("ftccl", "link_down", "wait"), nullptr);
  auto back = Calibration::FromJson(cal.ToJson());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->Find("ftccl", "link_down", "fail_stop")->samples[0].restarts, 3);
  EXPECT_EQ(back->Find("ftccl", "link_down", "adaptive")->samples[0].decisions.size(), 2u);
  // A file written before policies were recorded: its entries are failover's.
  nlohmann::json old = cal.ToJson();
  for (auto& e : old["entries"]) e.erase("policy");
  auto legacy = Calibration::FromJson(old);
  ASSERT_TRUE(legacy.ok()) << legacy.status().ToString();
  EXPECT_EQ(legacy->Find("ftccl", "link_down", "fail_stop"), nullptr);
}

// Runs of a CCL under policy adaptive whose selector ended on shrink (the measured cost of a
// shrink) for a lost rank (rank_kill), with this stall.
Calibration ShrinkRuns(const char* kind, double stall_ms) {
  Calibration cal;
  nlohmann::json ad = Report("ftccl", kind, "survived", stall_ms, std::nullopt);
  ad["policy"] = "adaptive";
  ad["train"] = {{"restarts", nlohmann::json::array()}, {"decisions", {{{"chosen", "shrink"}}}}};
  EXPECT_TRUE(AddReport(ad, "ad", &cal).ok());
  return cal;
}

// A count of what the cost model chose per run under adaptive; -1 when it has no such row.
double Chosen(const PolicyResult& p, const std::string& action) {
  for (const auto& [a, n] : p.actions) {
    if (a == action) return n;
  }
  return -1;
}

// Only GPU failures, a restart so dear that the cost model always shrinks, and free
// continuous checkpoints (nothing else is lost): every shrink costs one host of the job's
// compute from the failure on. With no grow, only a restart gives the host back, and nothing
// restarts here, so the job keeps each host off to the horizon T. With n failures of rate L so
// far, the compute left is (1 - f)^n, f = hosts' share; its mean at t is e^(-L f t), so the
// expected lost share of the horizon is 1 - (1 - e^(-L f T)) / (L f T), plus the stalls.
// (A shrink priced until the repair, as before, loses ~L T x repair x f: 20x less here.)
TEST(Simulator, ShrinkWithoutGrowRunsDegradedUntilTheNextRestart) {
  SimConfig c = GpuOnly(/*mtbf_h=*/24.0, /*gpus=*/1024);
  c.days = 30;
  c.checkpoint_cost_s = 0;
  c.restart_cost_s = 10 * 86400.0;
  c.bootstrap = 0;
  c.grow_cost_s.reset();  // no grow (the defaults carry the measured one)
  const double stall_s = 0.2;
  const Calibration cal = ShrinkRuns("rank_kill", stall_s * 1000);
  ScaleResult r = Simulate(c, &cal, 60);
  const PolicyResult& a = Of(r, Policy::kAdaptive);
  ASSERT_TRUE(a.unpriced.empty()) << a.unpriced;
  EXPECT_EQ(a.restarts_mean, 0);
  EXPECT_NEAR(Chosen(a, "shrink"), a.failures_mean, 1e-9);
  const double T = c.days * 86400.0, L = c.JobRatePerSecond();
  const double f = 8.0 / 1024;
  const double lost_share = 1 - (1 - std::exp(-L * f * T)) / (L * f * T);
  const double expect_h = (lost_share * T + a.failures_mean * stall_s) * c.gpus / 3600.0;
  EXPECT_NEAR(CauseHours(a, "gpu"), expect_h, 0.05 * expect_h);
  EXPECT_NEAR(a.gpu_hours_lost.mean, expect_h, 0.05 * expect_h);

  // A restart (here: every "other" failure) makes the job whole again: the shrinks end at the
  // next restart, so the GPU failures cost less than in the same job without restarts. Two
  // days, so that a restart of 1500 s still costs more than any shrink (n R > k T).
  SimConfig short_job = c;
  short_job.days = 2;
  short_job.restart_cost_s = 1500;
  SimConfig with_restarts = short_job;
  for (auto& m : with_restarts.classes) {
    if (m.cls == FaultClass::kOther) m.rate_per_unit_hour = 1.0 / (6.0 * 1024);
  }
  ScaleResult nr = Simulate(short_job, &cal, 400);
  ScaleResult wr = Simulate(with_restarts, &cal, 400);
  EXPECT_EQ(Of(nr, Policy::kAdaptive).restarts_mean, 0);
  EXPECT_GT(Of(wr, Policy::kAdaptive).restarts_mean, 0);
  EXPECT_LT(CauseHours(Of(wr, Policy::kAdaptive), "gpu"),
            0.6 * CauseHours(Of(nr, Policy::kAdaptive), "gpu"));

  // A measured grow (the knob) ends each shrink at the repair, at the grow's stall: each
  // failure then costs stall + repair x f + grow.
  SimConfig grow = c;
  grow.grow_cost_s = 30;
  ScaleResult g = Simulate(grow, &cal, 60);
  const PolicyResult& ag = Of(g, Policy::kAdaptive);
  const double grow_h = ag.failures_mean * (stall_s + c.repair_s * f + 30) * c.gpus / 3600.0;
  EXPECT_NEAR(CauseHours(ag, "gpu"), grow_h, 0.05 * grow_h);
}

// A grow cost prices a shrink only for a library that can grow its group (the can_grow
// trait); the others stay degraded until the next restart whatever the knob says.
TEST(Simulator, GrowCostOnlyForALibraryThatCanGrow) {
  SimConfig c;
  c.grow_cost_s = 2.5;
  c.ccl = "ftccl";
  ASSERT_TRUE(c.GrowCost().has_value());
  EXPECT_EQ(*c.GrowCost(), 2.5);
  EXPECT_EQ(c.ToJson()["grow_cost_priced_s"], 2.5);
  c.ccl = "gloo";
  EXPECT_FALSE(c.GrowCost().has_value());
  EXPECT_TRUE(c.ToJson()["grow_cost_priced_s"].is_null());
  c.ccl = "ftccl";
  c.grow_cost_s.reset();
  EXPECT_FALSE(c.GrowCost().has_value());
}

// The cost model (runner/policy/cost_model.h) decides at the simulated time: with free
// checkpoints (age 0) and a lost rank, a shrink of k ranks costs n S + k H and a restart n R,
// H the horizon left, so the selector restarts until H falls below H* = n (R - S) / k and
// shrinks after. The expected shrinks per run are L H*, the restarts L (T - H*) plus the
// failures during a restart (each restarts it again). Replaying a measured run's choice, or
// shrinking everywhere, fails this.
TEST(Simulator, AdaptiveDecidesWithTheCostModelAtTheHorizon) {
  SimConfig c = GpuOnly(/*mtbf_h=*/4.0, /*gpus=*/1024);
  c.days = 30;
  c.checkpoint_cost_s = 0;
  c.restart_cost_s = 600;
  c.bootstrap = 0;
  const double stall_s = 0.2;
  const Calibration cal = ShrinkRuns("rank_kill", stall_s * 1000);
  ScaleResult r = Simulate(c, &cal, 60);
  const PolicyResult& a = Of(r, Policy::kAdaptive);
  const double L = c.JobRatePerSecond(), T = c.days * 86400.0;
  const double h_star = 1024 * (600 - stall_s) / 8;
  EXPECT_NEAR(Chosen(a, "shrink"), L * h_star, 0.15 * L * h_star);
  EXPECT_GT(Chosen(a, "fail_stop"), 0.8 * L * (T - h_star));
  EXPECT_EQ(Chosen(a, "failover"), 0);  // not applicable to a lost rank
  EXPECT_EQ(Chosen(a, "wait"), 0);
  // Where no run of the CCL ever shrank, shrink is not offered: adaptive is fail-stop.
  ScaleResult none = Simulate(c, nullptr, 10);
  EXPECT_NEAR(Of(none, Policy::kAdaptive).gpu_hours_lost.mean,
              Of(none, Policy::kFailStop).gpu_hours_lost.mean, 1e-6);
  EXPECT_EQ(Chosen(Of(none, Policy::kAdaptive), "shrink"), 0);
}

// A library that dies of every link fault (no failover), transient outages of mean m = 60 s,
// a wait bound W = 120 s, a selector that expects every outage to last m (selector_outage:
// mean), free checkpoints: it waits at every failure, since m <= W and waiting m costs less
// than a restart. An outage longer than W then restarts the job after the wait. Priced at the
// wait bound, per failure: E[D; D <= W] + P(D > W) (W + R), with
// E[D; D <= W] = m (1 - e^(-W/m)) - W e^(-W/m). Holding for the whole outage would cost m.
TEST(Simulator, WaitIsPricedAtItsBoundNotTheWholeOutage) {
  SimConfig c = NetworkOnly();
  c.days = 30;
  c.checkpoint_cost_s = 0;
  c.checkpoint_interval_s.reset();
  c.restart_cost_s = 600;
  c.wait_bound_s = 120;
  c.selector_outage = "mean";
  c.bootstrap = 0;
  for (auto& m : c.classes) m.transient_fraction = 1;
  Calibration dies;
  ASSERT_TRUE(AddReport(Report("ftccl", "link_down", "aborted_clean", 50, std::nullopt), "r", &dies).ok());
  ScaleResult r = Simulate(c, &dies, 40);
  const PolicyResult& a = Of(r, Policy::kAdaptive);
  const double m = c.transient_outage_s, W = c.wait_bound_s, R = c.restart_cost_s;
  const double p_long = std::exp(-W / m);
  const double held = m * (1 - p_long) - W * p_long;
  // Every decision is a wait (failures during a restart restart it without one).
  EXPECT_NEAR(Chosen(a, "wait"), a.failures_mean, 0.02 * a.failures_mean);
  EXPECT_NEAR(a.restarts_mean, a.failures_mean * p_long, 0.1 * a.failures_mean * p_long);
  const double expect_h = a.failures_mean * (held + p_long * (W + R)) * c.gpus / 3600.0;
  EXPECT_NEAR(CauseHours(a, "network"), expect_h, 0.05 * expect_h);
}

// A drawn run that survived without a measured stall is not a free failure: the policy that
// would draw it is unpriced, with the reason, and the JSON carries null, not a number.
TEST(Simulator, AnUnmeasuredStallIsUnpricedNotZero) {
  SimConfig c = NetworkOnly();
  c.days = 5;
  nlohmann::json no_stall = Report("ftccl", "link_down", "survived", 0, std::nullopt);
  no_stall["per_fault"][0]["stall_ms"] = nullptr;
  Calibration cal;
  ASSERT_TRUE(AddReport(no_stall, "nostall", &cal).ok());
  ASSERT_TRUE(AddReport(Report("ftccl", "port_drop", "survived", 50, 0.9), "r", &cal).ok());
  ScaleResult r = Simulate(c, &cal, 4);
  const PolicyResult& fo = Of(r, Policy::kFailover);
  EXPECT_NE(fo.unpriced.find("without a measured stall (nostall)"), std::string::npos) << fo.unpriced;
  EXPECT_TRUE(Of(r, Policy::kFailStop).unpriced.empty());
  nlohmann::json j = SimulationJson(c, {r}, 4, &cal, "cal.json", "faultline simulate ...");
  EXPECT_TRUE(j["policies"]["failover"]["gpu_hours_lost"].is_null());
  EXPECT_TRUE(j["policies"]["failover"]["unpriced"].is_string());
  EXPECT_FALSE(j["policies"]["fail_stop"]["gpu_hours_lost"].is_null());
  EXPECT_TRUE(j["scales"][0]["differences_gpu_hours_lost"]["failover - fail_stop"].contains("unpriced"));
}

// A single-rail library on an 8-rail host is hit only by failures of its rail: 1/8 of NIC and
// link failures. Here every permanent one kills it (a restart) and every transient one it
// survives, so its restarts are 1/8 of the permanent failures; told it uses every rail, all.
TEST(Simulator, AFailureOnARailTheLibraryNeverUsesCostsItNothing) {
  SimConfig c = NetworkOnly();
  c.ccl = "gloo";
  c.days = 30;
  c.bootstrap = 0;
  Calibration cal;
  ASSERT_TRUE(AddReport(Report("gloo", "link_down", "survived", 900, std::nullopt), "a", &cal).ok());
  ASSERT_TRUE(AddReport(Report("gloo", "port_drop", "hung", 10000, std::nullopt), "b", &cal).ok());
  std::string why;
  EXPECT_EQ(c.RailsUsed(&why), 1);
  EXPECT_NE(why.find("one network interface"), std::string::npos) << why;
  ScaleResult one = Simulate(c, &cal, 40);
  const double permanent = 0.5 * Of(one, Policy::kFailover).failures_mean;
  EXPECT_NEAR(Of(one, Policy::kFailover).restarts_mean, permanent / 8, 0.15 * permanent / 8);
  EXPECT_NEAR(Of(one, Policy::kFailStop).restarts_mean, 2 * permanent / 8, 0.15 * 2 * permanent / 8);
  bool said = false;
  for (const auto& n : Of(one, Policy::kFailover).notes) said |= n.find("uses 1 of 8 rails") != std::string::npos;
  EXPECT_TRUE(said);
  SimConfig all = c;
  all.ccl_rails = 8;
  ScaleResult every = Simulate(all, &cal, 40);
  EXPECT_NEAR(Of(every, Policy::kFailover).restarts_mean, permanent, 0.1 * permanent);
}

// The ratio a degraded run measured is labelled with the bed it was measured on.
TEST(Simulator, ARatioSaysTheBedItWasMeasuredOn) {
  SimConfig c = NetworkOnly();
  c.days = 2;
  nlohmann::json rep = Report("ftccl", "port_drop", "survived", 20, 0.99);
  rep["environment"] = {{"knobs", {{"rail_gbps", 1.0}}}};
  Calibration cal;
  ASSERT_TRUE(AddReport(rep, "r", &cal).ok());
  ASSERT_TRUE(cal.entries[0].samples[0].rail_gbps.has_value());
  // The file keeps it.
  auto back = Calibration::FromJson(cal.ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->entries[0].samples[0].rail_gbps, 1.0);
  ScaleResult r = Simulate(c, &cal, 2);
  bool said = false;
  for (const auto& n : Of(r, Policy::kFailover).notes) said |= n.find("test bed of 1 Gbps per rail") != std::string::npos;
  EXPECT_TRUE(said);
}

// The interval of a policy priced from a calibration carries the calibration's sampling:
// samples that disagree widely (a 10 ms and a 20 min stall) widen it against seeds alone;
// samples that agree leave it as it was.
TEST(Simulator, IntervalsIncludeTheCalibrationsOwnUncertainty) {
  SimConfig c = NetworkOnly();
  c.days = 10;
  for (auto& m : c.classes) m.transient_fraction = 1;
  auto half = [&](const Calibration& cal, int boots) {
    SimConfig b = c;
    b.bootstrap = boots;
    const Interval i = Of(Simulate(b, &cal, 20), Policy::kFailover).gpu_hours_lost;
    return (i.hi - i.lo) / 2;
  };
  Calibration spread;
  ASSERT_TRUE(AddReport(Report("ftccl", "link_down", "survived", 10, std::nullopt), "a", &spread).ok());
  ASSERT_TRUE(AddReport(Report("ftccl", "link_down", "survived", 1.2e6, std::nullopt), "b", &spread).ok());
  EXPECT_GT(half(spread, 20), 1.5 * half(spread, 0));
  Calibration same;
  for (const char* s : {"a", "b"}) {
    ASSERT_TRUE(AddReport(Report("ftccl", "link_down", "survived", 50, std::nullopt), s, &same).ok());
  }
  EXPECT_NEAR(half(same, 20), half(same, 0), 1e-9 * (1 + half(same, 0)));
}

// A difference between two policies is paired (same failures): GPU failures restart the job
// under both fail_stop and failover, so their difference is exactly 0 with no width, although
// each has a width of its own.
TEST(Simulator, PolicyDifferencesArePaired) {
  SimConfig c = GpuOnly(/*mtbf_h=*/6.0);
  c.days = 20;
  ScaleResult r = Simulate(c, nullptr, 10);
  ASSERT_EQ(r.differences.size(), 3u);
  const PolicyDifference& d = r.differences[0];
  EXPECT_EQ(d.a, Policy::kFailover);
  EXPECT_EQ(d.b, Policy::kFailStop);
  EXPECT_GT(Of(r, Policy::kFailStop).gpu_hours_lost.hi - Of(r, Policy::kFailStop).gpu_hours_lost.lo, 0);
  EXPECT_EQ(d.gpu_hours_lost.mean, 0);
  EXPECT_EQ(d.gpu_hours_lost.hi - d.gpu_hours_lost.lo, 0);
  // And a non-zero one is the difference of the means.
  const PolicyDifference& ad = r.differences[1];
  EXPECT_NEAR(ad.gpu_hours_lost.mean,
              Of(r, Policy::kAdaptive).gpu_hours_lost.mean - Of(r, Policy::kFailStop).gpu_hours_lost.mean,
              1e-6 * (1 + Of(r, Policy::kFailStop).gpu_hours_lost.mean));
}

// Every class's source cites counts with the share each is of the paper's 419 interruptions,
// and that share is the count's (148 of 419 is 35.3 %, not the 30.1 % the table prints).
TEST(SimConfig, ClassSharesMatchTheCountsTheyCite) {
  const SimConfig c = SimConfig::Defaults();
  double counted = 0;
  for (const auto& m : c.classes) {
    const std::string& s = m.source;
    const size_t at = s.find("% of 419)");
    ASSERT_NE(at, std::string::npos) << s;
    const size_t open = s.rfind(" (", at);
    ASSERT_NE(open, std::string::npos);
    size_t digits = open;
    while (digits > 0 && std::isdigit(static_cast<unsigned char>(s[digits - 1]))) --digits;
    ASSERT_LT(digits, open) << s;
    const double count = std::stod(s.substr(digits, open - digits));
    const double share = std::stod(s.substr(open + 2, at - open - 2));
    EXPECT_NEAR(share, 100 * count / 419, 0.05) << s;
    counted += count;
  }
  EXPECT_EQ(counted, 268 + 46 + 7 + 35 + 63);
  EXPECT_NE(c.classes[0].source.find("Faulty GPU 148"), std::string::npos);
}

// The interval is the 95 % interval of the mean over seeds: symmetric about the mean, and four
// times the seeds make it about half as wide (an interval of single runs' spread would not
// narrow). Lost GPU-hours and the effective ratio come from the same useful time per seed:
// lost = gpus x horizon x (1 - ratio), for the mean and the interval alike.
TEST(Simulator, ConfidenceIntervalIsTheMeansOverSeeds) {
  SimConfig c = SimConfig::Defaults();
  c.gpus = 8192;
  c.days = 30;
  const ScaleResult few = Simulate(c, nullptr, 8), many = Simulate(c, nullptr, 32);
  const double gpu_h = static_cast<double>(c.gpus) * c.days * 24;
  for (const ScaleResult* r : {&few, &many}) {
    for (const PolicyResult& p : r->policies) {
      const Interval& g = p.gpu_hours_lost;
      EXPECT_LT(g.lo, g.mean) << PolicyName(p.policy);
      EXPECT_LT(g.mean, g.hi) << PolicyName(p.policy);
      EXPECT_NEAR(g.mean - g.lo, g.hi - g.mean, 1e-9 * g.mean) << PolicyName(p.policy);
      EXPECT_NEAR(g.mean, gpu_h * (1 - p.effective_ratio.mean), 1e-6 * g.mean);
      EXPECT_NEAR(g.hi - g.mean, gpu_h * (p.effective_ratio.mean - p.effective_ratio.lo),
                  1e-6 * g.mean);
    }
  }
  for (size_t p = 0; p < few.policies.size(); ++p) {
    const double w8 = few.policies[p].gpu_hours_lost.hi - few.policies[p].gpu_hours_lost.lo;
    const double w32 = many.policies[p].gpu_hours_lost.hi - many.policies[p].gpu_hours_lost.lo;
    EXPECT_GT(w32 / w8, 0.3) << p;
    EXPECT_LT(w32 / w8, 0.75) << p;
  }
}

TEST(Simulator, SameSeedsSameResult) {
  SimConfig c = SimConfig::Defaults();
  c.gpus = 16384;
  c.days = 30;
  ScaleResult a = Simulate(c, nullptr, 5, 7), b = Simulate(c, nullptr, 5, 7);
  ScaleResult other = Simulate(c, nullptr, 5, 8);
  for (size_t p = 0; p < a.policies.size(); ++p) {
    EXPECT_EQ(a.policies[p].gpu_hours_lost.mean, b.policies[p].gpu_hours_lost.mean) << p;
    EXPECT_EQ(a.policies[p].gpu_hours_lost.lo, b.policies[p].gpu_hours_lost.lo) << p;
    // The seed drives the draws: other seeds, other failures and another loss.
    EXPECT_NE(a.policies[p].gpu_hours_lost.mean, other.policies[p].gpu_hours_lost.mean) << p;
  }
  // The defaults reproduce the source's rate: 419 interruptions in 54 days at 16,384 GPUs.
  EXPECT_NEAR(c.JobRatePerSecond() * 54 * 86400, 419, 1e-6);
}

// The units each class's rate is per (simulator.h): GPUs, hosts (a partly filled host counts),
// and the NIC ports and links of the hosts; the job's rate is their sum.
TEST(SimConfig, FailureUnitsPerClass) {
  SimConfig c = SimConfig::Defaults();
  c.gpus = 1001;
  c.gpus_per_host = 8;
  c.rails_per_host = 4;
  c.rate_scale = 2;
  EXPECT_EQ(c.Hosts(), 126);
  EXPECT_DOUBLE_EQ(c.Units(FaultClass::kGpu), 1001);
  EXPECT_DOUBLE_EQ(c.Units(FaultClass::kOther), 1001);
  EXPECT_DOUBLE_EQ(c.Units(FaultClass::kHost), 126);
  EXPECT_DOUBLE_EQ(c.Units(FaultClass::kNic), 126 * 4);
  EXPECT_DOUBLE_EQ(c.Units(FaultClass::kNetwork), 126 * 4);
  double per_hour = 0;
  for (const auto& m : c.classes) per_hour += m.rate_per_unit_hour * c.Units(m.cls);
  EXPECT_NEAR(c.JobRatePerSecond(), per_hour / 3600 * 2, 1e-15);
}

TEST(SimConfig, YamlOverridesAndErrorsWithTheirPlace) {
  SimConfig c = SimConfig::Defaults();
  ASSERT_TRUE(c.ApplyYaml("restart_cost: 5min\ncheckpoint_interval: 30min\n"
                          "classes: {nic: {transient_fraction: 0.2}}\n",
                          "c.yaml")
                  .ok());
  EXPECT_DOUBLE_EQ(c.restart_cost_s, 300);
  EXPECT_DOUBLE_EQ(*c.checkpoint_interval_s, 1800);
  bool sourced = false;
  for (const auto& s : c.sources) sourced |= s == "restart_cost: config c.yaml";
  EXPECT_TRUE(sourced);
  for (const auto& [text, what] : std::vector<std::pair<std::string, std::string>>{
           {"restart_cost: soon\n", "c.yaml:1:15: restart_cost must be a duration"},
           {"bogus: 1\n", "c.yaml:1:1: unknown key 'bogus'"},
           {"classes: {gpu: {rate_per_unit_hour: 0.001}}\n", "without its source"},
           {"classes: {disk: {}}\n", "unknown class 'disk'"},
           {"comm_fraction: 2\n", "comm_fraction must be a number"},
           {"ccl: [a, b]\n", "c.yaml:1:6: ccl must be a scalar"},
           {"classes: {gpu: {source: {x: 1}, rate_per_unit_hour: 1e-5}}\n", "gpu.source must be a scalar"},
           {"gpus_per_host: 8.5\n", "gpus_per_host must be a whole number"},
       }) {
    SimConfig d = SimConfig::Defaults();
    Status st = d.ApplyYaml(text, "c.yaml");
    ASSERT_FALSE(st.ok()) << text;
    EXPECT_NE(st.message().find(what), std::string::npos) << st.message();
  }
}

TEST(SimReport, JsonCarriesEveryPolicyPerScaleAndTheInputs) {
  SimConfig c = SimConfig::Defaults();
  c.days = 5;
  std::vector<ScaleResult> scales;
  for (int64_t g : {1024, 10240}) {
    c.gpus = g;
    scales.push_back(Simulate(c, nullptr, 3));
  }
  c.gpus = 1024;
  nlohmann::json j = SimulationJson(c, scales, 3, nullptr, "", "faultline simulate ...");
  ASSERT_EQ(j["scales"].size(), 2u);
  for (const char* p : {"fail_stop", "failover", "adaptive"}) {
    ASSERT_TRUE(j["policies"].contains(p)) << p;
    // The first scale's figures, as Simulate gave them (not the last scale's).
    const PolicyResult& first = Named(scales[0], p);
    const nlohmann::json& lost = j["policies"][p]["gpu_hours_lost"];
    EXPECT_EQ(lost["mean"].get<double>(), first.gpu_hours_lost.mean) << p;
    EXPECT_EQ(lost["ci95"], nlohmann::json::array({first.gpu_hours_lost.lo, first.gpu_hours_lost.hi}))
        << p;
    EXPECT_NE(lost["mean"].get<double>(), Named(scales[1], p).gpu_hours_lost.mean) << p;
  }
  EXPECT_GT(j["scales"][1]["policies"]["fail_stop"]["gpu_hours_lost"]["mean"].get<double>(),
            j["scales"][0]["policies"]["fail_stop"]["gpu_hours_lost"]["mean"].get<double>());
  EXPECT_NE(j["inputs"]["classes"]["network"]["source"].get<std::string>().find("Network Switch/Cable 35 (8.4% of 419)"),
            std::string::npos);
  const std::string md = SimulationMarkdown(j);
  EXPECT_NE(md.find("| 10240 |"), std::string::npos) << md;
  EXPECT_NE(md.find("Modelled, not measured"), std::string::npos);
  const std::string html = SimulationHtml(j);
  EXPECT_NE(html.find("<polyline"), std::string::npos);
  EXPECT_NE(html.find("<rect"), std::string::npos);
}

}  // namespace
}  // namespace faultline::sim
