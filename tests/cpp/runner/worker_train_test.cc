// faultline-worker --workload train as the runner starts it: real ftccl ranks over loopback
// rails. A run's parameters on every rank equal the model's closed form computed here; resuming
// from its checkpoints gives the same parameters as a straight run; under fail_stop a killed
// rank makes the others stop for a restart (exit 11); under shrink the survivors finish; under
// adaptive a killed rank leads to a logged, valid decision.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "injector/sock_diag.h"
#include "runner/core/report_json.h"
#include "runner/core/worker_log.h"
#include "runner/exec/launcher.h"
#include "runner/policy/cost_model.h"
#include "runner/worker/worker.h"
#include "tests/cpp/runner/worker_group.h"

namespace faultline::runner {
namespace {

using std::chrono::milliseconds;

constexpr uint64_t kGradBytes = 4096;
constexpr int kBatch = 8;

// CLOCK_MONOTONIC, the clock of the ranks' log lines.
int64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0) close(fd);
    return 0;
  }
  close(fd);
  return ntohs(a.sin_port);
}

// The parameters' SHA-256 after `samples` samples, straight from the model's definition:
// p[i] = -sum over x < samples of (((x + i + seed) mod 16) - 8).
std::string ExpectedSha(uint64_t samples, uint64_t seed) {
  std::vector<float> p(kGradBytes / 4);
  for (uint64_t i = 0; i < p.size(); ++i) {
    int64_t sum = 0;
    for (uint64_t x = 0; x < samples; ++x) sum += static_cast<int64_t>((x + i + seed) % 16) - 8;
    p[i] = static_cast<float>(-sum);
  }
  return Sha256Hex(std::string(reinterpret_cast<const char*>(p.data()), p.size() * 4));
}

// A train job's ranks; one directory for logs and checkpoints, removed at the end.
class TrainJob {
 public:
  // Rails 127.0.<rail_net>.<rank + 1> and 127.0.<rail_net + 1>.<rank + 1>.
  explicit TrainJob(int ranks, int rail_net = 1) : ranks_(ranks), rail_net_(rail_net) {
    char tmpl[] = "/tmp/faultline_train_test_XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  ~TrainJob() {
    launcher_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  TrainJob(const TrainJob&) = delete;
  TrainJob& operator=(const TrainJob&) = delete;

  std::string LogPath(int rank) const {
    return dir_ + "/" + name_ + "-rank" + std::to_string(rank) + ".log";
  }
  std::string CheckpointDir() const { return dir_; }

  // Starts every rank of one incarnation (`name` names its logs).
  void Start(const std::string& name, std::vector<std::string> extra) {
    name_ = name;
    launcher_.reset();
    const std::string bootstrap = "127.0.0.1:" + std::to_string(FreePort());
    std::vector<LaunchSpec> world;
    for (int r = 0; r < ranks_; ++r) {
      std::vector<std::string> args = {
          FAULTLINE_WORKER_BIN,
          "--ccl",
          "ftccl",
          "--rank",
          std::to_string(r),
          "--size",
          std::to_string(ranks_),
          "--bootstrap",
          bootstrap,
          "--rails",
          "127.0." + std::to_string(rail_net_) + "." + std::to_string(r + 1) + ",127.0." +
              std::to_string(rail_net_ + 1) + "." + std::to_string(r + 1),
          "--log",
          LogPath(r),
          "--init-timeout",
          "20s",
          "--timeout",
          "10s",
          "--seed",
          "3",
          "--workload",
          "train",
          "--grad-bytes",
          std::to_string(kGradBytes) + "b",
          "--batch",
          std::to_string(kBatch),
          "--checkpoint-dir",
          dir_};
      args.insert(args.end(), extra.begin(), extra.end());
      LaunchSpec spec;
      spec.argv = std::move(args);
      spec.placement.global_rank = r;
      world.push_back(std::move(spec));
    }
    auto launcher = LocalNetnsLauncher::Create({""}, "");
    ASSERT_TRUE(launcher.ok()) << launcher.status().ToString();
    launcher_ = std::move(launcher).value();
    auto handles = launcher_->StartWorld(world);
    ASSERT_TRUE(handles.ok()) << handles.status().ToString();
  }

  pid_t pid(int rank) const { return launcher_->LocalPid(rank).value_or(-1); }
  Exit Wait(int rank, milliseconds limit) { return WaitOrKill(*launcher_, rank, limit); }

  bool WaitForSteps(int rank, size_t steps, milliseconds limit) {
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - start < limit) {
      auto log = LoadWorkerLog(LogPath(rank));
      if (log.ok() && log->ops.size() >= steps) return true;
      std::this_thread::sleep_for(milliseconds(10));
    }
    return false;
  }

  // Every rank completed; returns their common sha (checked equal), empty on failure.
  std::string ExpectAllCompleted(int64_t steps, uint64_t samples) {
    std::string sha;
    for (int r = 0; r < ranks_; ++r) {
      const Exit e = Wait(r, milliseconds(60000));
      EXPECT_EQ(e.code, kWorkerExitOk) << name_ << " rank " << r;
      auto log = LoadWorkerLog(LogPath(r));
      EXPECT_TRUE(log.ok()) << log.status().ToString();
      if (!log.ok()) return "";
      EXPECT_EQ(log->header.workload, "train");
      EXPECT_EQ(log->wrong_elements, 0u) << name_ << " rank " << r;
      for (const OpRecord& op : log->ops) EXPECT_TRUE(op.ok);
      EXPECT_TRUE(log->end && log->end->exit == RankExit::kCompleted) << log->end_message;
      EXPECT_TRUE(log->result.has_value());
      if (!log->result) return "";
      EXPECT_EQ(log->result->steps, steps);
      EXPECT_EQ(log->result->samples, samples);
      if (r == 0) sha = log->result->param_sha256;
      EXPECT_EQ(log->result->param_sha256, sha) << "rank " << r << " disagrees";
    }
    return sha;
  }

 private:
  int ranks_;
  int rail_net_;
  std::string dir_;
  std::string name_;
  std::unique_ptr<LocalNetnsLauncher> launcher_;
};

TEST(WorkerTrainTest, ParametersAreTheModelsAndResumeMatchesAStraightRun) {
  constexpr int kRanks = 3;
  TrainJob job(kRanks);
  job.Start("first", {"--steps", "20", "--checkpoint-every", "5", "--compute-ms", "2"});
  const std::string sha20 = job.ExpectAllCompleted(20, 20 * kRanks * kBatch);
  EXPECT_EQ(sha20, ExpectedSha(20 * kRanks * kBatch, 3));
  for (int r = 0; r < kRanks; ++r) {
    auto log = LoadWorkerLog(job.LogPath(r));
    ASSERT_TRUE(log.ok());
    ASSERT_EQ(log->ops.size(), 20u);
    ASSERT_EQ(log->checkpoints.size(), 4u);
    EXPECT_EQ(log->checkpoints.back().step, 20);
    EXPECT_EQ(log->checkpoints.back().samples, 20u * kRanks * kBatch);
    EXPECT_TRUE(log->resumes.empty());
  }
  job.Start("resumed", {"--steps", "30", "--resume", "--incarnation", "1", "--compute-ms", "2"});
  const std::string resumed = job.ExpectAllCompleted(30, 30 * kRanks * kBatch);
  for (int r = 0; r < kRanks; ++r) {
    auto log = LoadWorkerLog(job.LogPath(r));
    ASSERT_TRUE(log.ok());
    ASSERT_EQ(log->resumes.size(), 1u);
    EXPECT_EQ(log->resumes[0].step, 20);
    ASSERT_EQ(log->ops.size(), 10u);
    EXPECT_EQ(log->ops.front().index, 20);
    EXPECT_EQ(log->header.train->incarnation, 1);
  }
  TrainJob straight(kRanks);
  straight.Start("straight", {"--steps", "30", "--compute-ms", "2"});
  EXPECT_EQ(straight.ExpectAllCompleted(30, 30 * kRanks * kBatch), resumed);
  EXPECT_EQ(resumed, ExpectedSha(30 * kRanks * kBatch, 3));
}

// fail_stop: a killed rank makes every other rank abort and ask for a restart.
TEST(WorkerTrainTest, FailStopEndsTheOthersForARestart) {
  constexpr int kRanks = 3;
  TrainJob job(kRanks);
  job.Start("failstop", {"--steps", "100000", "--checkpoint-every", "5", "--compute-ms", "5",
                         "--policy", "fail_stop"});
  ASSERT_TRUE(job.WaitForSteps(0, 8, milliseconds(20000))) << "the job never got going";
  kill(job.pid(1), SIGKILL);
  for (int r : {0, 2}) {
    const Exit e = job.Wait(r, milliseconds(15000));
    EXPECT_EQ(e.code, kWorkerExitRestart) << "rank " << r;
    auto log = LoadWorkerLog(job.LogPath(r));
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    ASSERT_TRUE(log->end.has_value());
    EXPECT_TRUE(log->end->restart) << log->end_message;
    EXPECT_EQ(log->end->exit, RankExit::kError);
    EXPECT_EQ(log->wrong_elements, 0u);
    EXPECT_FALSE(log->result.has_value());
  }
  EXPECT_EQ(job.Wait(1, milliseconds(1000)).signal, SIGKILL);
}

// shrink: the survivors redo the failed step without the killed rank and finish, every
// result checked.
TEST(WorkerTrainTest, ShrinkSurvivorsFinish) {
  constexpr int kRanks = 3;
  constexpr int kSteps = 60;
  TrainJob job(kRanks);
  job.Start("shrink", {"--steps", std::to_string(kSteps), "--compute-ms", "20", "--policy",
                       "shrink"});
  ASSERT_TRUE(job.WaitForSteps(0, 5, milliseconds(20000))) << "the job never got going";
  kill(job.pid(2), SIGKILL);
  std::string sha;
  for (int r : {0, 1}) {
    EXPECT_EQ(job.Wait(r, milliseconds(30000)).code, kWorkerExitOk) << "rank " << r;
    auto log = LoadWorkerLog(job.LogPath(r));
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    EXPECT_EQ(log->wrong_elements, 0u);
    ASSERT_EQ(log->shrinks.size(), 1u);
    EXPECT_EQ(log->shrinks[0].excluded, std::vector<int>{2});
    ASSERT_TRUE(log->result.has_value());
    EXPECT_EQ(log->result->steps, kSteps);
    // The parameters are still the model's for the samples the lineage did.
    EXPECT_EQ(log->result->param_sha256, ExpectedSha(*log->result->samples, 3));
    EXPECT_LT(*log->result->samples, uint64_t{kSteps} * kRanks * kBatch);
    EXPECT_GT(*log->result->samples, uint64_t{kSteps} * (kRanks - 1) * kBatch);
    if (sha.empty()) sha = log->result->param_sha256;
    EXPECT_EQ(log->result->param_sha256, sha);
  }
}

// adaptive: the survivors of a killed rank shrink, rank 0 asks the cost model (a rank fault)
// and logs a valid decision; every survivor applies the same choice.
TEST(WorkerTrainTest, AdaptiveDecidesAfterALostRank) {
  constexpr int kRanks = 3;
  TrainJob job(kRanks);
  job.Start("adaptive", {"--steps", "60", "--compute-ms", "20", "--checkpoint-every", "10",
                         "--policy", "adaptive", "--restart-cost-ms", "500"});
  ASSERT_TRUE(job.WaitForSteps(0, 5, milliseconds(20000))) << "the job never got going";
  const int64_t killed_ns = MonotonicNs();
  kill(job.pid(2), SIGKILL);
  std::vector<int> codes;
  for (int r : {0, 1}) codes.push_back(job.Wait(r, milliseconds(30000)).code);
  const int64_t done_ns = MonotonicNs();
  auto log0 = LoadWorkerLog(job.LogPath(0));
  ASSERT_TRUE(log0.ok()) << log0.status().ToString();
  ASSERT_GE(log0->decisions.size(), 1u);
  const DecisionRecord& d = log0->decisions.front();
  // The reaction runs from the first evidence of the loss (after the kill) to the action in
  // effect (after the decision was made), and is reported as exactly that difference.
  const nlohmann::json& re = d.decision["reaction"];
  ASSERT_TRUE(re["evidence_ns"].is_number() && re["effect_ns"].is_number() && re["ms"].is_number())
      << re.dump();
  const int64_t evidence = re["evidence_ns"].get<int64_t>(),
                effect = re["effect_ns"].get<int64_t>();
  EXPECT_GE(evidence, killed_ns);
  EXPECT_LE(evidence, d.t_ns);
  EXPECT_GE(effect, d.t_ns);
  EXPECT_DOUBLE_EQ(re["ms"].get<double>(), (effect - evidence) / 1e6);
  EXPECT_GT(re["ms"].get<double>(), d.latency_ns / 1e6);  // more than the cost-model call
  // Each cost input says where it came from: the restart cost was given as measured; no
  // shrink had been made when the state was taken (the survivors' shrink came after it).
  const nlohmann::json& src = d.decision["input_sources"];
  EXPECT_EQ(src["restart_cost_s"].get<std::string>().rfind("measured", 0), 0u) << src.dump();
  EXPECT_EQ(src["shrink_cost_s"].get<std::string>().rfind("default", 0), 0u) << src.dump();
  EXPECT_EQ(d.decision["inputs"]["shrink_cost_s"], 0.05);
  EXPECT_TRUE(policy::ValidateDecisionJson(d.decision).ok())
      << policy::ValidateDecisionJson(d.decision).ToString();
  EXPECT_EQ(d.decision["inputs"]["fault_class"], "rank");
  EXPECT_EQ(d.decision["inputs"]["world_size"], kRanks);
  EXPECT_EQ(d.decision["inputs"]["restart_cost_s"], 0.5);
  // The decision came after the kill, and its latency is a measured time within the span from
  // the kill to the survivors' exit (a timer that is not read, or reads another clock or unit,
  // falls outside it).
  EXPECT_GE(d.t_ns, killed_ns);
  EXPECT_GT(d.latency_ns, 0);
  EXPECT_LT(d.latency_ns, done_ns - killed_ns);
  std::printf("[ adaptive ] rank 0 chose %s in %lld ns\n", d.chosen.c_str(),
              static_cast<long long>(d.latency_ns));
  // The choice is the cost model's on the state the coordinator logged: the same decision and
  // the same estimate for every option.
  auto state = policy::PolicyStateFromJson(d.decision["inputs"]);
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  const policy::PolicyDecision model = policy::Decide(*state);
  EXPECT_EQ(d.chosen, policy::RecoveryPolicyName(model.chosen));
  ASSERT_EQ(d.decision["options"].size(), model.options.size());
  for (size_t i = 0; i < model.options.size(); ++i) {
    const nlohmann::json& o = d.decision["options"][i];
    EXPECT_EQ(o["policy"], policy::RecoveryPolicyName(model.options[i].policy)) << i;
    EXPECT_EQ(o["applicable"], model.options[i].applicable) << i;
    EXPECT_DOUBLE_EQ(o["lost_gpu_s"].get<double>(), model.options[i].lost_gpu_seconds) << i;
  }
  // Both survivors did what rank 0 chose.
  const int expected = d.chosen == "fail_stop" ? kWorkerExitRestart : kWorkerExitOk;
  EXPECT_EQ(codes, (std::vector<int>{expected, expected}));
  auto log1 = LoadWorkerLog(job.LogPath(1));
  ASSERT_TRUE(log1.ok());
  EXPECT_TRUE(log1->decisions.empty());  // only the coordinator logs decisions
  EXPECT_EQ(log0->wrong_elements + log1->wrong_elements, 0u);
}

// adaptive with a flapping path: rank 1's rail-1 connections are reset again and again (as the
// injector's conn_reset does), each time after the path came back. The library damps the
// path; the coordinator's estimate of the outage then covers the flapping to come and the
// hold-down the library will keep (policy::FlappingOutageRemaining: with ftccl's default
// damping, 100 ms doubling per down, at least 3.2 s from a third down), not the mean of the
// path's past outages (tens of ms here) or as long again as the outage so far (the path is
// held down for at most 1.6 s after the fifth reset, so that estimate stays near 2 s).
TEST(WorkerTrainTest, AdaptivePricesAFlappingPathWithTheLibrarysHoldDown) {
  constexpr int kRanks = 3;
  // Rails of its own (127.0.5.x, 127.0.6.x): the resets must not reach the other tests' jobs.
  TrainJob job(kRanks, 5);
  job.Start("flapping", {"--steps", "150", "--compute-ms", "20", "--checkpoint-every", "50",
                         "--policy", "adaptive", "--relaunch-ms", "250"});
  ASSERT_TRUE(job.WaitForSteps(0, 10, milliseconds(20000))) << "the job never got going";
  int resets = 0;
  for (int i = 0; i < 5; ++i) {
    auto conns = ListTcpConnections("");
    ASSERT_TRUE(conns.ok()) << conns.status().ToString();
    std::vector<TcpSocketInfo> mine;
    TcpFilter f;
    f.src = "127.0.6.2";  // rank 1, rail 1
    for (const auto& c : conns.value()) {
      if (f.Matches(c)) mine.push_back(c);
    }
    auto n = DestroyTcpSockets("", mine);
    if (!n.ok() && n.status().code() == Code::kUnavailable) {
      GTEST_SKIP() << "this kernel cannot destroy sockets: " << n.status().ToString();
    }
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    resets += n.value();
    std::this_thread::sleep_for(milliseconds(250));
  }
  EXPECT_GE(resets, 5);
  for (int r = 0; r < kRanks; ++r) job.Wait(r, milliseconds(40000));
  auto log0 = LoadWorkerLog(job.LogPath(0));
  ASSERT_TRUE(log0.ok()) << log0.status().ToString();
  ASSERT_GE(log0->decisions.size(), 1u);
  double longest_ahead = 0;  // the most any decision expected of the outage beyond now
  for (const DecisionRecord& d : log0->decisions) {
    EXPECT_TRUE(policy::ValidateDecisionJson(d.decision).ok())
        << policy::ValidateDecisionJson(d.decision).ToString();
    const auto& in = d.decision["inputs"];
    // No restart measured yet: the estimate includes the runner's relaunch it was given.
    EXPECT_GE(in["restart_cost_s"].get<double>(), 0.25);
    EXPECT_EQ(d.decision["input_sources"]["restart_cost_s"].get<std::string>().rfind(
                  "estimate: the runner's relaunch measured at setup (250 ms)", 0),
              0u)
        << d.decision["input_sources"].dump();
    // A path fault's evidence is the outage's start the ranks gathered.
    EXPECT_TRUE(d.decision["reaction"]["ms"].is_number()) << d.decision["reaction"].dump();
    if (in["expected_outage_s"].is_null()) continue;
    longest_ahead = std::max(
        longest_ahead, in["expected_outage_s"].get<double>() - in["outage_so_far_s"].get<double>());
  }
  std::printf("[ flapping ] %zu decisions; the longest outage still expected: %.3f s\n",
              log0->decisions.size(), longest_ahead);
  EXPECT_GE(longest_ahead, 3.0);
  EXPECT_EQ(log0->wrong_elements, 0u);
}

TEST(WorkerTrainTest, BadTrainCommandLinesStartNothing) {
  auto run = [](std::vector<std::string> extra) {
    std::vector<std::string> args = {FAULTLINE_WORKER_BIN, "--ccl", "ftccl", "--rank", "0",
                                     "--size", "2", "--bootstrap", "127.0.0.1:1", "--rails",
                                     "127.0.1.1", "--log", "/nonexistent/never.log"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto launcher = LocalNetnsLauncher::Create({""}, "");
    if (!launcher.ok()) return -2;
    LaunchSpec spec;
    spec.argv = std::move(args);
    auto h = (*launcher)->Start(spec);
    if (!h.ok()) return -3;
    auto status = (*launcher)->Wait(*h, INT64_MAX);
    return status.ok() && status->state == ExitStatus::State::kExited ? status->code : -1;
  };
  const std::vector<std::string> ok = {"--workload", "train", "--steps", "5", "--grad-bytes",
                                       "4KiB"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> a = ok;
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  EXPECT_EQ(run({"--workload", "train", "--grad-bytes", "4KiB"}), kWorkerExitUsage);  // steps
  EXPECT_EQ(run({"--workload", "train", "--steps", "5"}), kWorkerExitUsage);  // grad bytes
  EXPECT_EQ(run({"--workload", "train", "--steps", "5", "--grad-bytes", "4099b"}),
            kWorkerExitUsage);  // not whole f32 elements
  EXPECT_EQ(run(with({"--iters", "3"})), kWorkerExitUsage);
  EXPECT_EQ(run(with({"--op", "allgather"})), kWorkerExitUsage);
  EXPECT_EQ(run(with({"--check"})), kWorkerExitUsage);
  EXPECT_EQ(run(with({"--checkpoint-every", "2"})), kWorkerExitUsage);  // no directory
  EXPECT_EQ(run(with({"--resume"})), kWorkerExitUsage);
  EXPECT_EQ(run(with({"--policy", "sometimes"})), kWorkerExitUsage);
  EXPECT_EQ(run(with({"--batch", "100000000"})), kWorkerExitUsage);  // beyond exact f32
  EXPECT_EQ(run({"--iters", "1", "--policy", "fail_stop"}), kWorkerExitUsage);  // collectives
  EXPECT_EQ(run({"--iters", "1", "--steps", "4"}), kWorkerExitUsage);
  // Valid, but the log cannot be written: the worker's own failure.
  EXPECT_EQ(run(ok), kWorkerExitInternal);
}

}  // namespace
}  // namespace faultline::runner
