#include "runner/worker/train_loop.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <utility>

namespace faultline::runner {

TrainLoop::TrainLoop(Rank* rank)
    : rank_(*rank),
      o_(rank->options()),
      policy_(policies::MakePolicy(o_.policy)),
      matrix_(o_.size),
      ports_(PortWatch::ForRails(o_.rank, o_.rails)) {
  rank_.SetEventSink([this](const CclEvent& e) { paths_.Note(e, rank_.excluded()); });
}

WorkerHeader TrainLoop::Header() const {
  WorkerHeader h = rank_.HeaderBase();
  h.op = workload::CollName(workload::Coll::kAllReduce);
  h.dtype = workload::DTypeName(workload::DType::kF32);
  h.redop = workload::RedOpName(workload::RedOp::kSum);
  h.bytes = o_.grad_bytes;
  h.count = Params();
  h.busbw_factor = workload::BusBwFactor(workload::Coll::kAllReduce, o_.size);
  h.check = true;
  h.warmup = 0;
  h.iters = o_.steps;
  h.workload = "train";
  TrainHeader t;
  t.steps = o_.steps;
  t.batch = o_.batch;
  t.compute_ms = o_.compute_ms;
  t.grad_bytes = o_.grad_bytes;
  t.checkpoint_every = o_.checkpoint_every;
  t.policy = o_.policy;
  t.incarnation = o_.incarnation;
  t.wait_bound_ms = o_.wait_bound.count();
  // Written before the group is joined: the newest step this rank's own checkpoints offer.
  // The step every rank agreed on is the resume line's (the same unless a rank lacked it).
  for (const train::Checkpoint& c : candidates_) t.start_step = std::max(t.start_step, c.steps);
  h.train = t;
  return h;
}

int TrainLoop::Run() {
  if (policy_ == nullptr) return rank_.InternalFailure("unknown policy " + o_.policy);
  if (o_.resume) LoadLocalCheckpoints();
  if (!rank_.log().Write(WorkerHeaderLine(Header()))) {
    return rank_.InternalFailure("cannot write the log");
  }
  params_.assign(Params(), 0.0f);
  const int fresh = FreshBuffers();
  if (fresh != kWorkerExitOk) return fresh;
  workload::adapters::CclInit init = rank_.InitOf();
  if (policy_->WaitsForLostPeers()) init.peer_loss_timeout = o_.wait_bound;
  const int joined = rank_.Join(init, args_);
  if (joined != kWorkerExitOk) return joined;
  // Paths the library could not set up at init (a rail down at start: ftccl starts on the
  // others) are the state this incarnation starts in, logged and followed like any path event.
  rank_.DrainEvents();
  if (policy_->ForgetsStartupFaults()) paths_.ClearNews(/*all=*/true);
  if (o_.resume) {
    const int code = AgreeOnResume();
    if (code != kWorkerExitOk) return code;
  }
  last_ckpt_step_ = step_;
  rank_.WaitForStart();
  const int code = Loop();
  CloseRejoin();
  if (code != kWorkerExitOk) return code;
  const Status st = rank_.Guarded("final barrier", o_.timeout, std::nullopt,
                                  [&] { return rank_.ccl().Finish(o_.timeout); });
  if (!st.ok()) return rank_.Fail("final barrier: " + st.ToString(), NowNs());
  rank_.DrainEvents();
  TrainResult result;
  result.rank = o_.rank;
  result.param_sha256 = train::ParamSha256(params_);
  result.loss = train::Loss(params_);
  result.steps = step_;
  result.samples = base_;
  if (!rank_.log().Write(WorkerResultLine(result))) {
    return rank_.InternalFailure("cannot write the log");
  }
  WorkerEnd end;
  end.ok = true;
  end.message = "completed " + std::to_string(step_) + " training steps";
  end.t_ns = NowNs();
  if (!rank_.log().Write(WorkerEndLine(end))) return rank_.InternalFailure("cannot write the log");
  return kWorkerExitOk;
}

int TrainLoop::FreshBuffers() {
  const int code = rank_.NewBuffers(Elements() * 4, Elements() * 4);
  if (code != kWorkerExitOk) return code;
  args_ = workload::OpArgs();
  args_.coll = workload::Coll::kAllReduce;
  args_.send = rank_.send();
  args_.recv = rank_.recv();
  args_.count = Elements();
  args_.dtype = workload::DType::kF32;
  args_.redop = workload::RedOp::kSum;
  return kWorkerExitOk;
}

// This rank's newest and previous checkpoints that can be read and fit this job; the others
// are named on stderr and left out.
void TrainLoop::LoadLocalCheckpoints() {
  resume_start_ns_ = NowNs();
  for (const std::string& path : {train::CheckpointPath(o_.checkpoint_dir, o_.rank),
                                  train::PrevCheckpointPath(o_.checkpoint_dir, o_.rank)}) {
    auto c = train::ReadCheckpoint(path, Params(), o_.seed);
    if (!c.ok()) {
      if (c.status().code() != Code::kNotFound) {
        std::fprintf(stderr, "faultline-worker: rank %d: not resuming from it: %s\n", o_.rank,
                     c.status().ToString().c_str());
      }
      continue;
    }
    if (c->steps > o_.steps) {
      std::fprintf(stderr,
                   "faultline-worker: rank %d: not resuming from %s: it holds %lld steps, "
                   "more than --steps\n",
                   o_.rank, path.c_str(), static_cast<long long>(c->steps));
      continue;
    }
    candidates_.push_back(std::move(c).value());
  }
}

// Every rank resumes from the newest step count that every rank has a checkpoint of (each
// rank's newest or previous one), or all start from step 0. The full world runs again.
int TrainLoop::AgreeOnResume() {
  int64_t newest = -1;
  for (const train::Checkpoint& c : candidates_) newest = std::max(newest, c.steps);
  std::vector<int64_t> v = {-newest};  // min as the max of negated values; none: 1
  Status st = Control(&v, "resume agreement");
  if (!st.ok()) return rank_.Fail("resume agreement: " + st.ToString(), NowNs());
  const int64_t common = -v[0];
  const train::Checkpoint* have = nullptr;
  for (const train::Checkpoint& c : candidates_) {
    if (c.steps == common) have = &c;
  }
  const int64_t samples = have != nullptr ? static_cast<int64_t>(have->samples) : 0;
  v = {have == nullptr ? 1 : 0, samples, -samples};
  st = Control(&v, "resume agreement");
  if (!st.ok()) return rank_.Fail("resume agreement: " + st.ToString(), NowNs());
  if (common < 0 || v[0] != 0) {
    if (!candidates_.empty()) {
      std::fprintf(stderr,
                   "faultline-worker: rank %d: no checkpoint every rank has; starting from "
                   "step 0\n",
                   o_.rank);
    }
    return kWorkerExitOk;
  }
  if (v[1] != -v[2]) {
    std::fprintf(stderr,
                 "faultline-worker: rank %d: the ranks' checkpoints of step %lld disagree on "
                 "the samples done; starting from step 0\n",
                 o_.rank, static_cast<long long>(common));
    return kWorkerExitOk;
  }
  params_ = have->params;
  base_ = have->samples;
  step_ = common;
  ResumeRecord r;
  r.rank = o_.rank;
  r.step = step_;
  r.samples = base_;
  r.start_ns = resume_start_ns_;
  r.end_ns = NowNs();
  if (!rank_.log().Write(WorkerResumeLine(r))) return rank_.InternalFailure("cannot write the log");
  return kWorkerExitOk;
}

// An allreduce (max) of small i64 values between the ranks of the group, in place; not a
// training step and not logged as one.
Status TrainLoop::Control(std::vector<int64_t>* values, const std::string& what) {
  ctl_send_ = *values;
  ctl_recv_.assign(values->size(), 0);
  workload::OpArgs a;
  a.coll = workload::Coll::kAllReduce;
  a.send = ctl_send_.data();
  a.recv = ctl_recv_.data();
  a.count = ctl_send_.size();
  a.dtype = workload::DType::kI64;
  a.redop = workload::RedOp::kMax;
  const Status st = rank_.RunCall(what, a);
  rank_.DrainEvents();
  if (st.ok()) *values = ctl_recv_;
  return st;
}

policies::LocalView TrainLoop::Local() const {
  policies::LocalView local;
  local.news = paths_.news();
  local.any_path_down = paths_.AnyPathDown();
  local.path_to_wait_for = paths_.AnyPathToWaitFor();
  return local;
}

int TrainLoop::Loop() {
  const uint64_t batch = static_cast<uint64_t>(o_.batch);
  while (step_ < o_.steps) {
    policies::Action edge = policy_->AtStepEdge(Local());
    if (edge.kind == policies::Action::kFailStop) {
      return FailStop(edge.why, paths_.first_fault_ns().value_or(NowNs()));
    }
    bool again = false;
    const int grown = MaybeGrow(&again);
    if (grown != kWorkerExitOk) return grown;
    if (again) continue;
    const int boundary = StepBoundary();
    if (boundary != kWorkerExitOk) return boundary;
    if (rejoined_) {
      rejoined_ = false;  // back in the group: its next step's boundary, with the others
      continue;
    }
    const int64_t faults_before = paths_.faults_seen();
    const bool down_before = paths_.AnyPathDown();
    WorkerOp op;
    op.index = step_;
    op.bytes = o_.grad_bytes;
    if (rank_.group_size() != o_.size) op.group = rank_.group_size();
    op.start_ns = NowNs();
    const uint64_t g = static_cast<uint64_t>(rank_.group_size());
    float* send = static_cast<float*>(rank_.send());
    train::FillGradient(base_ + static_cast<uint64_t>(rank_.group_rank()) * batch, batch, o_.seed,
                        send, Params());
    SleepUntilNs(op.start_ns + o_.compute_ms * 1000000);
    const int64_t ar_start = NowNs();
    op.compute_ns = ar_start - op.start_ns;
    if (policy_->Flagged()) send[Params()] = policy_->Flag(Local()) ? 1.0f : 0.0f;
    std::memset(rank_.recv(), 0xff, Elements() * 4);  // NaN: a result never written is wrong
    const std::string what = "step " + std::to_string(step_);
    const Status st = rank_.RunCall(what, args_, op);
    op.end_ns = NowNs();
    rank_.DrainEvents();
    if (!st.ok()) {
      rank_.LogFailedOp(&op, st);
      const int code = AfterFailedCall(what, op.end_ns, st);
      if (code != kWorkerExitOk) return code;
      continue;  // the step again, in the smaller group, from the same base
    }
    const float* total = static_cast<const float*>(rank_.recv());
    op.wrong = train::CountWrongGradient(base_, g * batch, o_.seed, total, Params());
    // Exact: every value is an integer below 2^24 in magnitude (train_model.h).
    for (uint64_t i = 0; i < Params(); ++i) params_[i] -= total[i];
    // Not a number (a result never written, a lying peer) asks for the boundary too.
    if (policy_->Flagged()) attention_ = !(total[Params()] == 0.0f);
    prev_base_ = base_;
    base_ += g * batch;
    if (!rank_.log().Write(WorkerOpLine(op))) return rank_.InternalFailure("cannot write the log");
    ++step_;
    last_ar_ns_ = op.end_ns - ar_start;
    // The library reported a fault during this step: its allreduce's excess over the clean
    // mean is what switching to the surviving paths cost the job.
    if (paths_.faults_seen() != faults_before && !down_before && clean_steps_ > 0) {
      switch_ns_ = std::max<int64_t>(0, last_ar_ns_ - clean_ar_ns_ / clean_steps_);
    }
    if (paths_.faults_seen() == faults_before && !down_before && !paths_.AnyPathDown()) {
      ++clean_steps_;
      clean_step_ns_ += op.end_ns - op.start_ns;
      clean_ar_ns_ += last_ar_ns_;
      if (policy_->MeasuresPeerRates()) {
        std::vector<double> rates = rank_.ccl().PeerRates();
        // A peer not measured this time keeps its earlier reference.
        if (ref_rates_.size() != rates.size()) ref_rates_.assign(rates.size(), 0.0);
        for (size_t r = 0; r < rates.size(); ++r) {
          if (rates[r] > 0) ref_rates_[r] = rates[r];
        }
      }
    }
    edge = policy_->AtStepEdge(Local());
    if (edge.kind == policies::Action::kFailStop) {
      return FailStop(edge.why, paths_.first_fault_ns().value_or(NowNs()));
    }
    if (o_.checkpoint_every > 0 && step_ % o_.checkpoint_every == 0) {
      const int code = WriteCheckpoint();
      if (code != kWorkerExitOk) return code;
    }
  }
  return kWorkerExitOk;
}

int TrainLoop::WriteCheckpoint() {
  CheckpointRecord rec;
  rec.rank = o_.rank;
  rec.step = step_;
  rec.samples = base_;
  rec.start_ns = NowNs();
  train::Checkpoint c;
  c.steps = step_;
  c.samples = base_;
  c.seed = o_.seed;
  c.excluded = rank_.excluded();
  c.params = params_;
  // Logged the moment the file has its name (the next incarnation may resume from it from
  // then on): the line's write time runs to there; the policies' estimate of a checkpoint's
  // cost takes the whole write, the directory's fsync after it included.
  bool logged = false;
  auto written = train::WriteCheckpoint(o_.checkpoint_dir, o_.rank, c, [&](uint64_t bytes) {
    rec.end_ns = NowNs();
    rec.bytes = bytes;
    logged = rank_.log().Write(WorkerCheckpointLine(rec));
  });
  if (!written.ok()) {
    return rank_.EndWith(kWorkerExitInternal, "checkpoint of step " + std::to_string(step_) + ": " +
                                                  written.status().ToString());
  }
  if (!logged) return rank_.InternalFailure("cannot write the log");
  last_ckpt_step_ = step_;
  last_ckpt_write_ns_ = NowNs() - rec.start_ns;
  return kWorkerExitOk;
}

// A training step or control collective failed: what the policy does about it.
// kWorkerExitOk to go on in a (smaller) group; otherwise the exit code.
int TrainLoop::AfterFailedCall(const std::string& what, int64_t failed_ns, const Status& why) {
  paths_.NoteFirstFault(failed_ns);
  const policies::Action action = policy_->OnFailedCall(rank_.ccl().CanShrink());
  if (action.kind == policies::Action::kFailStop) {
    return FailStop(what + ": " + why.ToString(), failed_ns);
  }
  if (action.kind != policies::Action::kShrinkLostRank) {
    return rank_.Fail(what + ": " + why.ToString(), failed_ns);
  }
  const int lost = rank_.ccl().LostRank();
  if (lost == o_.rank || lost < 0) return rank_.FailUnshrinkable(what, failed_ns, why, lost);
  const int group_before = rank_.group_size();
  // The first evidence of the loss: the failed call, or the library's news before it.
  const int64_t evidence_ns = std::min(failed_ns, paths_.news_since_ns().value_or(failed_ns));
  // Measured before the shrink, which restarts the measurements for the new group.
  const policy::PolicyState before = BaseState(group_before);
  base_sources_ = InputSources();
  int code = ShrinkWithout({lost}, what, failed_ns, why);
  if (code != kWorkerExitOk) return code;
  code = FreshBuffers();
  if (code != kWorkerExitOk) return code;
  const Status st = rank_.Prepare(args_);
  if (!st.ok()) return rank_.Fail("prepare after the shrink: " + st.ToString(), NowNs());
  code = AgreeOnStep();
  if (code != kWorkerExitOk) return code;
  policies::RankLossView loss;
  loss.lost = lost;
  loss.group_before = group_before;
  loss.group_after = rank_.group_size();
  loss.coordinator = rank_.group_rank() == 0;
  loss.outage_so_far_s = std::max<int64_t>(0, NowNs() - failed_ns) / 1e9;
  loss.before = before;
  loss.evidence_ns = evidence_ns;
  const policies::Action next = policy_->AfterRankLoss(loss);
  if (next.kind != policies::Action::kShare) return kWorkerExitOk;
  std::optional<policy::RecoveryPolicy> chosen;
  if (next.request) chosen = DecideAndLog(*next.request);
  code = ShareDecision(&chosen);
  if (code != kWorkerExitOk) return code;
  const policies::Action apply = policy_->ApplyAfterRankLoss(chosen, lost);
  if (apply.kind == policies::Action::kFailStop) return FailStop(apply.why, failed_ns);
  WriteDecision(NowNs());  // going on in the shrunk group: in effect now
  return kWorkerExitOk;
}

// The group shrinks without `lost`; the fault that led here is dealt with (the left-out
// ranks' paths and the news about them are forgotten), and the new group's own pace is the
// reference from here on.
int TrainLoop::ShrinkWithout(const std::vector<int>& lost, const std::string& what,
                             int64_t failed_ns, const Status& why) {
  int64_t took_ns = 0;
  const int code = rank_.ShrinkWithout(lost, what, failed_ns, why, &took_ns);
  if (code != kWorkerExitOk) return code;
  last_shrink_ns_ = took_ns;
  boundary_from_step_ = step_;  // the new group agrees at its first boundary
  paths_.ForgetRanks(lost);
  clean_steps_ = 0;
  clean_step_ns_ = 0;
  clean_ar_ns_ = 0;
  ref_rates_.clear();
  return kWorkerExitOk;
}

// After a shrink for a lost rank. A ring allreduce can complete on some members before the
// rank died and fail on the others, so the survivors may be one step apart: they agree on the
// earliest step, and a member ahead undoes its last step exactly (the update was the step's
// block sum, recomputed from its samples) to redo it with the others. More than one step apart
// is not possible (every step is a collective of all of them) and fails the rank.
int TrainLoop::AgreeOnStep() {
  std::vector<int64_t> v = {-step_, step_};
  const Status st = Control(&v, "step agreement");
  if (!st.ok()) return AfterFailedCall("step agreement", NowNs(), st);
  const int64_t earliest = -v[0], latest = v[1];
  // The first boundary of the new group runs on every member (StepBoundary): at the step
  // they agree on, not at the one each shrank at.
  boundary_from_step_ = earliest;
  if (latest - earliest > 1 || step_ - earliest > 1) {
    return rank_.EndWith(kWorkerExitInternal, "after the shrink the group is at steps " +
                                                  std::to_string(earliest) + ".." +
                                                  std::to_string(latest) + ", more than one apart");
  }
  if (step_ == earliest) return kWorkerExitOk;
  std::vector<float> block(Params());
  train::FillGradient(prev_base_, base_ - prev_base_, o_.seed, block.data(), Params());
  for (uint64_t i = 0; i < Params(); ++i) params_[i] += block[i];  // exact (train_model.h)
  std::fprintf(stderr,
               "faultline-worker: rank %d: step %lld completed here but not on every survivor: "
               "undone, redone in the smaller group\n",
               o_.rank, static_cast<long long>(earliest));
  base_ = prev_base_;
  step_ = earliest;
  return kWorkerExitOk;
}

}  // namespace faultline::runner
