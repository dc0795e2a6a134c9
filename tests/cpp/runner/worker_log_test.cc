// The worker log's reader: every line type round-trips, a log cut off by a killed rank still
// loads, and anything else that is malformed is an error naming the line.
#include "runner/core/worker_log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>

namespace faultline::runner {
namespace {

WorkerHeader SampleHeader() {
  WorkerHeader h;
  h.rank = 2;
  h.size = 4;
  h.ccl = "ftccl";
  h.op = "allreduce";
  h.dtype = "f32";
  h.redop = "sum";
  h.bytes = 1 << 20;
  h.count = 1 << 18;
  h.busbw_factor = 1.5;
  h.rails = {"198.18.0.3", "198.18.1.3"};
  h.pid = 1234;
  h.check = true;
  h.warmup = 1;
  h.iters = 2;
  h.timeout_ms = 5000;
  h.seed = 7;
  h.rails_used = std::vector<int>{0};
  h.ccl_version = "0.1.0";
  h.ccl_knobs = {{"NCCL_IB_HCA", "=mlx5_0:1"}, {"NCCL_IB_TIMEOUT", ""}};
  return h;
}

WorkerOp Op(int64_t index, int64_t start, int64_t end, uint64_t wrong) {
  WorkerOp op;
  op.index = index;
  op.start_ns = start;
  op.end_ns = end;
  op.bytes = 1 << 20;
  op.wrong = wrong;
  op.warmup = index == 0;
  return op;
}

std::string SampleLog() {
  CclEvent e;
  e.time_ns = 250;
  e.kind = EventKind::kPathDown;
  e.path = 1;
  e.peer = 3;
  e.reason = "connection reset";
  WorkerOp failed = Op(2, 300, 400, 0);
  failed.ok = false;
  failed.wrong.reset();
  failed.error = "UNAVAILABLE: PEER_LOST: rank 1";
  WorkerEnd end;
  end.ok = false;
  end.message = "collective 2: PEER_LOST";
  end.t_ns = 410;
  end.first_error_ns = 400;
  end.watchdog = true;
  SyncRecord sync;
  sync.after_index = 1;
  sync.start_ns = 205;
  sync.end_ns = 230;
  return WorkerHeaderLine(SampleHeader()) + WorkerOpLine(Op(0, 100, 150, 0)) +
         WorkerOpLine(Op(1, 160, 200, 3)) + WorkerSyncLine(sync) + WorkerEventLine(e) +
         WorkerOpLine(failed) + WorkerEndLine(end);
}

TEST(WorkerLogTest, EveryLineTypeRoundTrips) {
  auto log = ParseWorkerLog(SampleLog(), "r2.log");
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  const WorkerHeader& h = log->header;
  EXPECT_EQ(h.rank, 2);
  EXPECT_EQ(h.size, 4);
  EXPECT_EQ(h.ccl, "ftccl");
  EXPECT_EQ(h.bytes, 1u << 20);
  EXPECT_EQ(h.count, 1u << 18);
  EXPECT_DOUBLE_EQ(h.busbw_factor, 1.5);
  EXPECT_EQ(h.rails, (std::vector<std::string>{"198.18.0.3", "198.18.1.3"}));
  EXPECT_EQ(h.pid, 1234);
  EXPECT_EQ(h.iters, 2);
  EXPECT_FALSE(h.duration_ns.has_value());
  EXPECT_EQ(h.seed, 7u);
  EXPECT_EQ(h.rails_used, std::vector<int>{0});
  EXPECT_EQ(h.ccl_version, "0.1.0");
  EXPECT_EQ(h.ccl_knobs, (std::map<std::string, std::string>{{"NCCL_IB_HCA", "=mlx5_0:1"},
                                                             {"NCCL_IB_TIMEOUT", ""}}));
  ASSERT_EQ(log->syncs.size(), 1u);
  EXPECT_EQ(log->syncs[0].rank, 2);
  EXPECT_EQ(log->syncs[0].after_index, 1);
  EXPECT_EQ(log->syncs[0].start_ns, 205);
  EXPECT_EQ(log->syncs[0].end_ns, 230);
  EXPECT_TRUE(log->syncs[0].ok);
  ASSERT_EQ(log->ops.size(), 3u);
  EXPECT_EQ(log->ops[0].rank, 2);
  EXPECT_EQ(log->ops[1].index, 1);
  EXPECT_EQ(log->ops[1].start_ns, 160);
  EXPECT_EQ(log->ops[1].end_ns, 200);
  EXPECT_FALSE(log->ops[0].wrong);
  EXPECT_TRUE(log->ops[1].wrong);
  EXPECT_TRUE(log->ops[1].ok);
  EXPECT_FALSE(log->ops[2].ok);
  EXPECT_FALSE(log->ops[2].wrong);
  EXPECT_EQ(log->wrong_elements, 3u);
  EXPECT_EQ(log->first_error, "UNAVAILABLE: PEER_LOST: rank 1");
  ASSERT_EQ(log->events.size(), 1u);
  EXPECT_EQ(log->events[0].rank, 2);
  EXPECT_EQ(log->events[0].kind, EventKind::kPathDown);
  EXPECT_EQ(log->events[0].path, 1);
  EXPECT_EQ(log->events[0].time_ns, 250);
  EXPECT_EQ(log->events[0].reason, "connection reset");
  EXPECT_EQ(log->events[0].peer, 3);
  ASSERT_TRUE(log->end.has_value());
  EXPECT_EQ(log->end->rank, 2);
  EXPECT_EQ(log->end->exit, RankExit::kError);
  EXPECT_EQ(log->end->end_ns, 410);
  EXPECT_EQ(log->end->first_error_ns, 400);
  EXPECT_TRUE(log->end->watchdog);
  EXPECT_EQ(log->end_message, "collective 2: PEER_LOST");
  EXPECT_FALSE(log->truncated);
}

// Policy shrink: the shrink line and the group of the collectives after it.
TEST(WorkerLogTest, ShrinkLineAndGroupOfLaterCollectivesRoundTrip) {
  ShrinkRecord s;
  s.start_ns = 410;
  s.end_ns = 430;
  s.excluded = {1};
  s.group = 3;
  ShrinkRecord bad = s;
  bad.ok = false;
  bad.error = "TIMEOUT: only 2 of 3 ranks joined";
  WorkerOp after = Op(3, 440, 450, 0);
  after.group = 3;
  const std::string text = WorkerHeaderLine(SampleHeader()) + WorkerOpLine(Op(0, 100, 150, 0)) +
                           WorkerShrinkLine(s) + WorkerOpLine(after) + WorkerShrinkLine(bad);
  auto log = ParseWorkerLog(text, "r2.log");
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  ASSERT_EQ(log->shrinks.size(), 2u);
  EXPECT_EQ(log->shrinks[0].rank, 2);
  EXPECT_EQ(log->shrinks[0].start_ns, 410);
  EXPECT_EQ(log->shrinks[0].end_ns, 430);
  EXPECT_EQ(log->shrinks[0].excluded, std::vector<int>{1});
  EXPECT_EQ(log->shrinks[0].group, 3);
  EXPECT_TRUE(log->shrinks[0].ok);
  EXPECT_FALSE(log->shrinks[1].ok);
  EXPECT_EQ(log->shrinks[1].error, "TIMEOUT: only 2 of 3 ranks joined");
  ASSERT_EQ(log->ops.size(), 2u);
  EXPECT_EQ(log->ops[0].group, 0);
  EXPECT_EQ(log->ops[1].group, 3);
  // Lies about the group: larger than the world, this rank excluded, a rank outside it.
  const std::string head = WorkerHeaderLine(SampleHeader());
  ShrinkRecord self = s;
  self.excluded = {2};
  ShrinkRecord outside = s;
  outside.excluded = {4};
  ShrinkRecord big = s;
  big.group = 5;
  WorkerOp op_big = after;
  op_big.group = 5;
  for (const std::string& line : {WorkerShrinkLine(self), WorkerShrinkLine(outside),
                                  WorkerShrinkLine(big), WorkerOpLine(op_big)}) {
    auto bad_log = ParseWorkerLog(head + line, "r2.log");
    EXPECT_FALSE(bad_log.ok()) << line;
  }
}

// A rejoin after repair: the grow line of a member and of a joiner, and the lies refused.
TEST(WorkerLogTest, GrowLineRoundTripsAndRefusesLies) {
  GrowRecord member;
  member.start_ns = 500;
  member.end_ns = 540;
  member.joined = {1};
  member.group = 4;
  GrowRecord failed = member;
  failed.ok = false;
  failed.error = "TIMEOUT: rank 3 did not join";
  failed.group = 3;
  const std::string head = WorkerHeaderLine(SampleHeader());  // rank 2 of 4
  auto log = ParseWorkerLog(head + WorkerGrowLine(member) + WorkerGrowLine(failed), "r2.log");
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  ASSERT_EQ(log->grows.size(), 2u);
  EXPECT_EQ(log->grows[0].rank, 2);
  EXPECT_EQ(log->grows[0].start_ns, 500);
  EXPECT_EQ(log->grows[0].end_ns, 540);
  EXPECT_EQ(log->grows[0].joined, std::vector<int>{1});
  EXPECT_EQ(log->grows[0].group, 4);
  EXPECT_FALSE(log->grows[0].joiner);
  EXPECT_TRUE(log->grows[0].ok);
  EXPECT_FALSE(log->grows[1].ok);
  EXPECT_EQ(log->grows[1].error, "TIMEOUT: rank 3 did not join");
  GrowRecord joiner = member;
  joiner.joined = {2};
  joiner.joiner = true;
  log = ParseWorkerLog(head + WorkerGrowLine(joiner), "r2.log");
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_TRUE(log->grows.at(0).joiner);
  // A joiner that is not among the joined, a member that is, nobody joined, a rank outside
  // the world, a group larger than it.
  GrowRecord not_self = joiner;
  not_self.joined = {1};
  GrowRecord self_member = member;
  self_member.joined = {2};
  GrowRecord none = member;
  none.joined = {};
  GrowRecord outside = member;
  outside.joined = {4};
  GrowRecord big = member;
  big.group = 5;
  for (const GrowRecord& g : {not_self, self_member, none, outside, big}) {
    EXPECT_FALSE(ParseWorkerLog(head + WorkerGrowLine(g), "r2.log").ok()) << WorkerGrowLine(g);
  }
}

TEST(WorkerLogTest, ReadyLineSaysWhenTheRankJoined) {
  WorkerHeader h;
  h.rank = 1;
  h.size = 2;
  const std::string head = WorkerHeaderLine(h);
  auto none = ParseWorkerLog(head, "r1.log");
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none->ready_ns.has_value());  // a worker that never said: unknown, not 0
  auto log = ParseWorkerLog(head + WorkerReadyLine(4242), "r1.log");
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_EQ(log->ready_ns, 4242);
  auto twice = ParseWorkerLog(head + WorkerReadyLine(1) + WorkerReadyLine(2), "r1.log");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("r1.log:3: a second ready line"), std::string::npos)
      << twice.status().ToString();
}

TEST(WorkerLogTest, StatsLineCarriesTheCclCounters) {
  WorkerHeader h;
  h.rank = 0;
  h.size = 2;
  const std::string head = WorkerHeaderLine(h);
  auto none = ParseWorkerLog(head, "r0.log");
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none->stats.has_value());  // a CCL without counters writes no line
  const std::map<std::string, uint64_t> counters = {{"chunks_numbered_to_rank1", 3115},
                                                    {"chunks_accepted_from_rank1", 3118}};
  auto log = ParseWorkerLog(head + WorkerStatsLine(77, counters), "r0.log");
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_EQ(log->stats, counters);
  auto twice =
      ParseWorkerLog(head + WorkerStatsLine(1, counters) + WorkerStatsLine(2, counters), "r0.log");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("r0.log:3: a second stats line"), std::string::npos)
      << twice.status().ToString();
  auto negative =
      ParseWorkerLog(head + R"({"type":"stats","t_ns":1,"counters":{"acks_sent":-1}})" "\n",
                     "r0.log");
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("counter acks_sent is not a count"),
            std::string::npos)
      << negative.status().ToString();
}

TEST(WorkerLogTest, CutOffLastLineIsIgnored) {
  const std::string full = SampleLog();
  // Cut in the middle of the failed op's line: the end line and half of that op are lost.
  const size_t op_start = full.find("{\"bytes\"", full.find("\"event\""));
  ASSERT_NE(op_start, std::string::npos);
  auto log = ParseWorkerLog(full.substr(0, op_start + 20), "r2.log");
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_TRUE(log->truncated);
  EXPECT_EQ(log->ops.size(), 2u);
  EXPECT_EQ(log->events.size(), 1u);
  EXPECT_FALSE(log->end.has_value());

  // Cut exactly after a newline: nothing is truncated, the end is just missing.
  auto clean = ParseWorkerLog(full.substr(0, op_start), "r2.log");
  ASSERT_TRUE(clean.ok()) << clean.status().ToString();
  EXPECT_FALSE(clean->truncated);
  EXPECT_EQ(clean->ops.size(), 2u);
}

TEST(WorkerLogTest, MalformedLinesAreErrorsWithTheirLineNumber) {
  const std::string header = WorkerHeaderLine(SampleHeader());
  const std::string op = WorkerOpLine(Op(0, 1, 2, 0));
  auto bad_json = ParseWorkerLog(header + op + "{\"type\":\"op\",\n" + op, "x.log");
  ASSERT_FALSE(bad_json.ok());
  EXPECT_NE(bad_json.status().message().find("x.log:3:"), std::string::npos)
      << bad_json.status().message();

  auto missing_field = ParseWorkerLog(header + "{\"type\":\"op\",\"index\":0}\n", "x.log");
  ASSERT_FALSE(missing_field.ok());
  EXPECT_NE(missing_field.status().message().find("x.log:2:"), std::string::npos);

  auto unknown = ParseWorkerLog(header + "{\"type\":\"gossip\"}\n", "x.log");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("gossip"), std::string::npos);

  auto bad_kind = ParseWorkerLog(
      header + "{\"type\":\"event\",\"t_ns\":1,\"kind\":\"meltdown\",\"path\":0,\"reason\":\"\"}\n",
      "x.log");
  ASSERT_FALSE(bad_kind.ok());
  EXPECT_NE(bad_kind.status().message().find("meltdown"), std::string::npos);

  WorkerEnd end;
  end.t_ns = 5;
  auto after_end = ParseWorkerLog(header + WorkerEndLine(end) + op, "x.log");
  ASSERT_FALSE(after_end.ok());
  EXPECT_NE(after_end.status().message().find("x.log:3:"), std::string::npos);
}

TEST(WorkerLogTest, HeaderMustComeFirst) {
  EXPECT_FALSE(ParseWorkerLog("", "x.log").ok());
  EXPECT_FALSE(ParseWorkerLog("{\"type\":\"hea", "x.log").ok());  // killed while writing it
  EXPECT_FALSE(ParseWorkerLog(WorkerOpLine(Op(0, 1, 2, 0)), "x.log").ok());
  const std::string header = WorkerHeaderLine(SampleHeader());
  EXPECT_FALSE(ParseWorkerLog(header + header, "x.log").ok());
  std::string other_schema = header;
  other_schema.replace(other_schema.find("faultline.worker/v1"), 19, "faultline.worker/v9");
  EXPECT_FALSE(ParseWorkerLog(other_schema, "x.log").ok());
}

TEST(WorkerLogTest, LoadsAFileAndReportsAMissingOne) {
  char path[] = "/tmp/faultline_worker_log_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  {
    std::ofstream out(path);
    out << SampleLog();
  }
  auto log = LoadWorkerLog(path);
  std::remove(path);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_EQ(log->ops.size(), 3u);
  auto missing = LoadWorkerLog(std::string(path) + ".absent");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
}

// A training workload's log (faultline_torch): the header names it, the result line carries
// the parameters' hash and loss (null for a NaN), and a malformed hash is refused.
TEST(WorkerLogTest, TrainingResultLineRoundTrips) {
  WorkerHeader h = SampleHeader();
  h.workload = "torch_ddp";
  TrainResult r;
  r.param_sha256 = std::string(32, 'f') + std::string(32, '0');
  r.loss = 2.25;
  WorkerEnd end;
  end.t_ns = 99;
  auto log = ParseWorkerLog(WorkerHeaderLine(h) + WorkerResultLine(r) + WorkerEndLine(end), "t");
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_EQ(log->header.workload, "torch_ddp");
  ASSERT_TRUE(log->result.has_value());
  EXPECT_EQ(log->result->rank, 2);
  EXPECT_EQ(log->result->param_sha256, r.param_sha256);
  EXPECT_DOUBLE_EQ(log->result->loss, 2.25);

  // A collectives log names no workload and keeps the default.
  auto plain = ParseWorkerLog(WorkerHeaderLine(SampleHeader()), "t");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->header.workload, "collectives");
  EXPECT_FALSE(plain->result.has_value());

  r.loss = std::nan("");
  const std::string nan_line = WorkerResultLine(r);
  EXPECT_NE(nan_line.find("\"loss\":null"), std::string::npos) << nan_line;
  auto nan_log = ParseWorkerLog(WorkerHeaderLine(h) + nan_line, "t");
  ASSERT_TRUE(nan_log.ok()) << nan_log.status().ToString();
  EXPECT_TRUE(std::isnan(nan_log->result->loss));
}

TEST(WorkerLogTest, MalformedTrainingResultIsAnError) {
  const std::string head = WorkerHeaderLine(SampleHeader());
  for (const std::string& bad : {
           std::string(R"({"type":"result","param_sha256":"abc","loss":1})"),
           std::string(R"({"type":"result","param_sha256":")") + std::string(64, 'G') +
               R"(","loss":1})",
           std::string(R"({"type":"result","loss":1})"),
       }) {
    auto log = ParseWorkerLog(head + bad + "\n", "t");
    ASSERT_FALSE(log.ok()) << bad;
    EXPECT_NE(log.status().message().find("t:2:"), std::string::npos) << log.status().ToString();
  }
  TrainResult r;
  r.param_sha256 = std::string(64, 'a');
  auto twice = ParseWorkerLog(head + WorkerResultLine(r) + WorkerResultLine(r), "t");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("second result"), std::string::npos);
}


// The train workload's lines: header object, compute_ns, checkpoint, resume, hold, decision,
// the result's steps and samples, and the end line's restart.
TEST(WorkerLogTest, TrainLinesRoundTrip) {
  WorkerHeader h = SampleHeader();
  h.workload = "train";
  TrainHeader t;
  t.steps = 30;
  t.batch = 8;
  t.compute_ms = 20;
  t.grad_bytes = 4096;
  t.checkpoint_every = 5;
  t.policy = "adaptive";
  t.incarnation = 2;
  t.wait_bound_ms = 3000;
  t.start_step = 20;
  h.train = t;
  WorkerOp op = Op(20, 100, 200, 0);
  op.compute_ns = 20000000;
  CheckpointRecord c{0, 25, 600, 300, 350, 4152};
  ResumeRecord r{0, 20, 480, 10, 90};
  HoldRecord hold{0, 210, 290, true};
  DecisionRecord d;
  d.t_ns = 295;
  d.latency_ns = 1234;
  d.decision = {{"kind", "policy_decision"}, {"chosen", "wait"}, {"inputs", {{"world_size", 3}}}};
  TrainResult res;
  res.param_sha256 = std::string(64, 'a');
  res.loss = 12.5;
  res.steps = 30;
  res.samples = 720;
  WorkerEnd end;
  end.ok = false;
  end.message = "fail_stop";
  end.t_ns = 400;
  end.first_error_ns = 380;
  end.restart = true;
  const std::string text = WorkerHeaderLine(h) + WorkerResumeLine(r) + WorkerOpLine(op) +
                           WorkerHoldLine(hold) + WorkerDecisionLine(d) +
                           WorkerCheckpointLine(c) + WorkerResultLine(res) + WorkerEndLine(end);
  auto log = ParseWorkerLog(text, "r2.log");
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_EQ(log->header.workload, "train");
  ASSERT_TRUE(log->header.train.has_value());
  EXPECT_EQ(log->header.train->steps, 30);
  EXPECT_EQ(log->header.train->batch, 8);
  EXPECT_EQ(log->header.train->compute_ms, 20);
  EXPECT_EQ(log->header.train->grad_bytes, 4096u);
  EXPECT_EQ(log->header.train->checkpoint_every, 5);
  EXPECT_EQ(log->header.train->policy, "adaptive");
  EXPECT_EQ(log->header.train->incarnation, 2);
  EXPECT_EQ(log->header.train->wait_bound_ms, 3000);
  EXPECT_EQ(log->header.train->start_step, 20);
  ASSERT_EQ(log->ops.size(), 1u);
  EXPECT_EQ(log->ops[0].index, 20);
  EXPECT_NE(WorkerOpLine(op).find("\"compute_ns\":20000000"), std::string::npos);
  ASSERT_EQ(log->checkpoints.size(), 1u);
  EXPECT_EQ(log->checkpoints[0].rank, 2);  // the header's
  EXPECT_EQ(log->checkpoints[0].step, 25);
  EXPECT_EQ(log->checkpoints[0].samples, 600u);
  EXPECT_EQ(log->checkpoints[0].start_ns, 300);
  EXPECT_EQ(log->checkpoints[0].end_ns, 350);
  EXPECT_EQ(log->checkpoints[0].bytes, 4152u);
  ASSERT_EQ(log->resumes.size(), 1u);
  EXPECT_EQ(log->resumes[0].step, 20);
  EXPECT_EQ(log->resumes[0].samples, 480u);
  EXPECT_EQ(log->resumes[0].end_ns, 90);
  ASSERT_EQ(log->holds.size(), 1u);
  EXPECT_TRUE(log->holds[0].returned);
  EXPECT_EQ(log->holds[0].end_ns - log->holds[0].start_ns, 80);
  ASSERT_EQ(log->decisions.size(), 1u);
  EXPECT_EQ(log->decisions[0].rank, 2);
  EXPECT_EQ(log->decisions[0].chosen, "wait");
  EXPECT_EQ(log->decisions[0].latency_ns, 1234);
  EXPECT_EQ(log->decisions[0].decision, d.decision);
  ASSERT_TRUE(log->result.has_value());
  EXPECT_EQ(log->result->steps, 30);
  EXPECT_EQ(log->result->samples, 720u);
  ASSERT_TRUE(log->end.has_value());
  EXPECT_TRUE(log->end->restart);
  EXPECT_TRUE(log->restart);
  EXPECT_EQ(log->end->exit, RankExit::kError);
  // A collectives log has none of it.
  auto plain = ParseWorkerLog(WorkerHeaderLine(SampleHeader()) + WorkerEndLine(WorkerEnd{}), "x");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->header.train.has_value());
  EXPECT_FALSE(plain->restart);
  EXPECT_EQ(WorkerHeaderLine(SampleHeader()).find("train"), std::string::npos);
}

TEST(WorkerLogTest, MalformedTrainLinesAreErrors) {
  WorkerHeader h = SampleHeader();
  h.workload = "train";
  h.train = TrainHeader{30, 8, 20, 4096, 5, "wait", 0, 5000, 0};
  const std::string head = WorkerHeaderLine(h);
  auto error_of = [](const std::string& text) {
    auto log = ParseWorkerLog(text, "r2.log");
    EXPECT_FALSE(log.ok()) << text;
    return log.ok() ? std::string() : log.status().ToString();
  };
  WorkerHeader no_train = SampleHeader();
  no_train.workload = "train";
  EXPECT_NE(error_of(WorkerHeaderLine(no_train)).find("\"train\" object"), std::string::npos);
  EXPECT_NE(error_of(head + "{\"type\":\"checkpoint\",\"step\":5}\n").find("r2.log:2"),
            std::string::npos);
  EXPECT_NE(error_of(head + "{\"type\":\"checkpoint\",\"step\":0,\"samples\":0,\"start_ns\":1,"
                            "\"end_ns\":2,\"bytes\":3}\n")
                .find("step below 1"),
            std::string::npos);
  EXPECT_NE(error_of(head + "{\"type\":\"hold\",\"start_ns\":5,\"end_ns\":4,\"returned\":true}\n")
                .find("ends before"),
            std::string::npos);
  EXPECT_NE(error_of(head + "{\"type\":\"hold\",\"start_ns\":5,\"end_ns\":6,\"returned\":1}\n")
                .find("mistyped"),
            std::string::npos);
  EXPECT_NE(error_of(head + "{\"type\":\"decision\",\"t_ns\":1,\"latency_ns\":2,\"decision\":3}\n")
                .find("not an object"),
            std::string::npos);
  EXPECT_NE(error_of(head + "{\"type\":\"resume\",\"step\":-1,\"samples\":0,\"start_ns\":1,"
                            "\"end_ns\":2}\n")
                .find("negative step"),
            std::string::npos);
  ResumeRecord r{0, 5, 40, 1, 2};
  EXPECT_NE(error_of(head + WorkerResumeLine(r) + WorkerResumeLine(r)).find("second resume"),
            std::string::npos);
  EXPECT_NE(error_of(head + "{\"type\":\"end\",\"status\":\"ok\",\"t_ns\":1,\"restart\":true}\n")
                .find("restart with status ok"),
            std::string::npos);
}

// A fleet run's rank writes its host's clock; the runner moves every point in time of its log
// onto its own clock by the host's measured offset, and leaves durations alone.
TEST(WorkerLogTest, MapToRunnerClockMovesEveryTimeAndNoDuration) {
  WorkerHeader h = SampleHeader();
  h.workload = "train";
  TrainHeader t;
  t.steps = 30;
  t.batch = 8;
  t.policy = "adaptive";
  h.train = t;
  WorkerOp op = Op(20, 100, 200, 0);
  op.compute_ns = 20000000;
  CclEvent e;
  e.time_ns = 150;
  e.kind = EventKind::kPathDown;
  e.path = 0;
  SyncRecord sync;
  sync.after_index = 20;
  sync.start_ns = 205;
  sync.end_ns = 209;
  ShrinkRecord sh;
  sh.start_ns = 410;
  sh.end_ns = 430;
  sh.excluded = {1};
  sh.group = 3;
  CheckpointRecord c{0, 25, 600, 300, 350, 4152};
  ResumeRecord r{0, 20, 480, 10, 90};
  HoldRecord hold{0, 210, 290, true};
  DecisionRecord d;
  d.t_ns = 295;
  d.latency_ns = 1234;
  d.decision = {{"kind", "policy_decision"}, {"chosen", "wait"}};
  WorkerEnd end;
  end.ok = false;
  end.message = "x";
  end.t_ns = 500;
  end.first_error_ns = 480;
  const std::string text = WorkerHeaderLine(h) + WorkerReadyLine(5) + WorkerResumeLine(r) +
                           WorkerOpLine(op) + WorkerEventLine(e) + WorkerSyncLine(sync) +
                           WorkerHoldLine(hold) + WorkerDecisionLine(d) + WorkerShrinkLine(sh) +
                           WorkerCheckpointLine(c) + WorkerEndLine(end);
  auto log = ParseWorkerLog(text, "r.log");
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  WorkerLog m = *log;
  const int64_t off = 1'000'000'000'000;  // the host's clock is 1000 s ahead
  MapWorkerLogToRunnerClock(&m, off);
  EXPECT_EQ(*m.ready_ns, 5 - off);
  EXPECT_EQ(m.ops[0].start_ns, 100 - off);
  EXPECT_EQ(m.ops[0].end_ns, 200 - off);
  EXPECT_EQ(m.events[0].time_ns, 150 - off);
  EXPECT_EQ(m.syncs[0].start_ns, 205 - off);
  EXPECT_EQ(m.syncs[0].end_ns, 209 - off);
  EXPECT_EQ(m.shrinks[0].start_ns, 410 - off);
  EXPECT_EQ(m.shrinks[0].end_ns, 430 - off);
  EXPECT_EQ(m.checkpoints[0].start_ns, 300 - off);
  EXPECT_EQ(m.checkpoints[0].end_ns, 350 - off);
  EXPECT_EQ(m.resumes[0].start_ns, 10 - off);
  EXPECT_EQ(m.resumes[0].end_ns, 90 - off);
  EXPECT_EQ(m.holds[0].start_ns, 210 - off);
  EXPECT_EQ(m.holds[0].end_ns, 290 - off);
  EXPECT_EQ(m.decisions[0].t_ns, 295 - off);
  ASSERT_TRUE(m.end.has_value());
  EXPECT_EQ(m.end->end_ns, 500 - off);
  EXPECT_EQ(*m.end->first_error_ns, 480 - off);
  // Durations, counts and positions stay.
  EXPECT_EQ(m.decisions[0].latency_ns, 1234);
  EXPECT_EQ(m.ops[0].index, log->ops[0].index);
  EXPECT_EQ(m.checkpoints[0].samples, log->checkpoints[0].samples);
  // And back: the same log.
  MapWorkerLogToRunnerClock(&m, -off);
  EXPECT_EQ(m.ops[0].start_ns, log->ops[0].start_ns);
  EXPECT_EQ(*m.ready_ns, *log->ready_ns);
}

}  // namespace
}  // namespace faultline::runner
