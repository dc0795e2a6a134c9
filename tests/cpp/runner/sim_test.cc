// The GPU-hour simulator against closed forms (no failures; fail-stop with Poisson failures and
// a fixed interval; Young/Daly's interval beats half and double it), failover priced from a
// calibration, the calibration built from reports, and config errors with their place.
#include <gtest/gtest.h>

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

// A restart as long as half the MTBF: failures during restarts are absorbed (the model); a
// simulator that restarted the restart would lose tens of percent more here.
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

// Free checkpoints (cost 0) are continuous: a restart loses only its own time.
TEST(Simulator, FreeCheckpointsLoseNoWork) {
  SimConfig c = GpuOnly(10.0);
  c.days = 30;
  c.checkpoint_cost_s = 0;
  c.restart_cost_s = 300;
  ASSERT_TRUE(CheckSimulable(c, 3).ok());
  ScaleResult r = Simulate(c, nullptr, 3);
  const PolicyResult& p = Of(r, Policy::kFailStop);
  EXPECT_FALSE(std::isfinite(p.checkpoint_interval_s));
  EXPECT_NEAR(p.gpu_hours_lost.mean, p.restarts_mean * 300 * static_cast<double>(c.gpus) / 3600,
              1e-6 * p.gpu_hours_lost.mean);
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

TEST(Simulator, AdaptiveCostsWhatItsCalibratedRunsMeasured) {
  SimConfig c = NetworkOnly();
  Calibration cal;
  for (const char* kind : {"link_down", "port_drop"}) {
    ASSERT_TRUE(AddReport(Report("ftccl", kind, "survived", 50, 0.875), "fo", &cal).ok());
  }
  ScaleResult model = Simulate(c, &cal, 10);
  // The model picks failover's cheap cost: no restarts, and says it is a model.
  EXPECT_EQ(Of(model, Policy::kAdaptive).restarts_mean, 0);
  bool said_model = false;
  for (const auto& n : Of(model, Policy::kAdaptive).notes) {
    said_model |= n.find("no runs of ftccl under policy adaptive") != std::string::npos;
  }
  EXPECT_TRUE(said_model);
  // Adaptive runs whose selector restarted the job: the adaptive row restarts at each failure,
  // as measured, however cheap failover's draw is.
  for (const char* kind : {"link_down", "port_drop"}) {
    nlohmann::json ad = Report("ftccl", kind, "survived", 50, 0.875);
    ad["policy"] = "adaptive";
    ad["train"] = {{"restarts", {{{"cost_ms", 650.0}}}}, {"decisions", {{{"chosen", "fail_stop"}}}}};
    ASSERT_TRUE(AddReport(ad, "ad", &cal).ok());
  }
  ScaleResult measured = Simulate(c, &cal, 10);
  EXPECT_GT(Of(measured, Policy::kAdaptive).restarts_mean, 0);
  EXPECT_EQ(Of(measured, Policy::kFailover).restarts_mean, 0);
  EXPECT_GT(Of(measured, Policy::kAdaptive).gpu_hours_lost.mean,
            Of(measured, Policy::kFailover).gpu_hours_lost.mean);
  bool said_measured = false;
  for (const auto& n : Of(measured, Policy::kAdaptive).notes) {
    said_measured |= n.find("under policy adaptive: each failure takes the action") != std::string::npos;
  }
  EXPECT_TRUE(said_measured);
}

// Adaptive runs whose selector ended on shrink (at a few ranks their steps then ran faster:
// a ratio above 1): the job goes on without the failed part's host until the part works again,
// so each failure costs its stall plus its degraded time over the hosts, not nothing. A run
// that ended holding (wait) costs the whole outage.
TEST(Simulator, AdaptiveShrinkCostsAHostUntilThePartWorks) {
  SimConfig c = NetworkOnly();
  const double stall_s = 0.05;
  auto with_last = [&](const char* last) {
    Calibration cal;
    for (const char* kind : {"link_down", "port_drop"}) {
      EXPECT_TRUE(AddReport(Report("ftccl", kind, "survived", 50, 0.875), "fo", &cal).ok());
      nlohmann::json ad = Report("ftccl", kind, "survived", stall_s * 1000, 1.2);
      ad["policy"] = "adaptive";
      ad["train"] = {{"restarts", nlohmann::json::array()},
                     {"decisions", {{{"chosen", "failover"}}, {{"chosen", last}}}}};
      EXPECT_TRUE(AddReport(ad, "ad", &cal).ok());
    }
    return cal;
  };
  const double hosts = static_cast<double>(c.Hosts());
  const ClassModel* net = nullptr;
  for (const auto& m : c.classes) {
    if (m.cls == FaultClass::kNetwork) net = &m;
  }
  ASSERT_NE(net, nullptr);
  // Expected degraded time of one failure: a transient outage or the repair.
  const double degraded =
      net->transient_fraction * c.transient_outage_s + (1 - net->transient_fraction) * c.repair_s;
  const Calibration shrink = with_last("shrink");
  ScaleResult r = Simulate(c, &shrink, 40);
  const PolicyResult& a = Of(r, Policy::kAdaptive);
  EXPECT_EQ(a.restarts_mean, 0);
  const double expect_h = a.failures_mean * (stall_s + degraded / hosts) * c.gpus / 3600.0;
  EXPECT_NEAR(CauseHours(a, "network"), expect_h, 0.05 * expect_h);
  // One host of 128 costs less than 1/8 of every link's bandwidth for the same time.
  EXPECT_LT(a.gpu_hours_lost.mean, Of(r, Policy::kFailover).gpu_hours_lost.mean);

  const Calibration wait = with_last("wait");
  ScaleResult w = Simulate(c, &wait, 40);
  const PolicyResult& aw = Of(w, Policy::kAdaptive);
  EXPECT_EQ(aw.restarts_mean, 0);
  const double hold_h = aw.failures_mean * degraded * c.gpus / 3600.0;
  EXPECT_NEAR(CauseHours(aw, "network"), hold_h, 0.05 * hold_h);
}

// A lost GPU restarts the job under fail_stop and failover. Under adaptive, where the
// calibration has adaptive runs that lost a rank, a drawn run's selector decides: one that
// shrank keeps the job going without that host until it is replaced; one that chose fail_stop
// restarts it. Without such runs, adaptive fail-stops too, and says so.
TEST(Simulator, AdaptiveLostRankRunsDecideGpuFailures) {
  SimConfig c = SimConfig::Defaults();
  for (auto& m : c.classes) {
    m.rate_per_unit_hour = m.cls == FaultClass::kGpu ? 1.0 / (8.0 * 1024) : 0.0;  // MTBF 8 h
  }
  c.gpus = 1024;
  c.days = 60;
  const double hosts = static_cast<double>(c.Hosts());
  auto lost_rank_runs = [](const char* last) {
    Calibration cal;
    nlohmann::json ad = Report("ftccl", "rank_kill", "survived", 200, std::nullopt);
    ad["policy"] = "adaptive";
    ad["train"] = {
        {"restarts", std::string(last) == "fail_stop" ? nlohmann::json{{{"cost_ms", 900.0}}}
                                                      : nlohmann::json::array()},
        {"decisions", {{{"chosen", last}}}}};
    EXPECT_TRUE(AddReport(ad, "ad", &cal).ok());
    return cal;
  };
  const Calibration shrink = lost_rank_runs("shrink");
  ScaleResult r = Simulate(c, &shrink, 40);
  const PolicyResult& a = Of(r, Policy::kAdaptive);
  EXPECT_EQ(a.restarts_mean, 0);
  EXPECT_GT(Of(r, Policy::kFailover).restarts_mean, 0);
  const double expect_h = a.failures_mean * (0.2 + c.repair_s / hosts) * c.gpus / 3600.0;
  EXPECT_NEAR(CauseHours(a, "gpu"), expect_h, 0.05 * expect_h);
  EXPECT_LT(a.gpu_hours_lost.mean, Of(r, Policy::kFailover).gpu_hours_lost.mean);
  // Nothing restarts it, so Young/Daly's interval is unbounded (no checkpoint to pay for).
  EXPECT_GT(a.checkpoint_interval_s, Of(r, Policy::kFailover).checkpoint_interval_s);

  const Calibration stop = lost_rank_runs("fail_stop");
  ScaleResult s2 = Simulate(c, &stop, 40);
  EXPECT_NEAR(Of(s2, Policy::kAdaptive).gpu_hours_lost.mean,
              Of(s2, Policy::kFailStop).gpu_hours_lost.mean, 1e-6);

  ScaleResult none = Simulate(c, nullptr, 5);
  EXPECT_NEAR(Of(none, Policy::kAdaptive).gpu_hours_lost.mean,
              Of(none, Policy::kFailStop).gpu_hours_lost.mean, 1e-6);
  bool said = false;
  for (const auto& n : Of(none, Policy::kAdaptive).notes) {
    said |= n.find("gpu (rank_kill): no runs of ftccl under policy adaptive") != std::string::npos;
  }
  EXPECT_TRUE(said);
}

TEST(Simulator, AdaptiveRestartsWhenDegradedRunningCostsMore) {
  // Permanent faults that leave 1 % of the bandwidth until a repair 10 days later: running
  // degraded costs more than a restart, which the adaptive model picks.
  SimConfig c = NetworkOnly();
  c.repair_s = 10 * 86400.0;
  c.comm_fraction = 0.9;
  for (auto& m : c.classes) m.transient_fraction = 0;
  Calibration cal;
  ASSERT_TRUE(AddReport(Report("ftccl", "port_drop", "survived", 50, 0.01), "r", &cal).ok());
  ScaleResult r = Simulate(c, &cal, 10);
  EXPECT_LT(Of(r, Policy::kAdaptive).gpu_hours_lost.mean, Of(r, Policy::kFailover).gpu_hours_lost.mean);
  EXPECT_LT(Of(r, Policy::kAdaptive).gpu_hours_lost.mean, Of(r, Policy::kFailStop).gpu_hours_lost.mean * 1.0001);
}

TEST(Simulator, SameSeedsSameResult) {
  SimConfig c = SimConfig::Defaults();
  c.gpus = 16384;
  c.days = 30;
  ScaleResult a = Simulate(c, nullptr, 5, 7), b = Simulate(c, nullptr, 5, 7);
  EXPECT_EQ(a.policies[0].gpu_hours_lost.mean, b.policies[0].gpu_hours_lost.mean);
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
    EXPECT_EQ(j["policies"][p]["gpu_hours_lost"]["ci95"].size(), 2u);
    EXPECT_EQ(j["policies"][p], j["scales"][0]["policies"][p]);
  }
  EXPECT_GT(j["scales"][1]["policies"]["fail_stop"]["gpu_hours_lost"]["mean"].get<double>(),
            j["scales"][0]["policies"]["fail_stop"]["gpu_hours_lost"]["mean"].get<double>());
  EXPECT_NE(j["inputs"]["classes"]["network"]["source"].get<std::string>().find("Network Switch/Cable 35 (8.4%)"),
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
