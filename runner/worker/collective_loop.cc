#include "runner/worker/collective_loop.h"

#include <algorithm>
#include <map>
#include <vector>

namespace faultline::runner {

int CollectiveLoop::Run() {
  spec_.coll = o_.op;
  spec_.dtype = o_.dtype;
  spec_.redop = o_.redop;
  spec_.root = o_.root;
  spec_.ranks = o_.size;
  spec_.seed = o_.seed;
  layout_ = workload::LayoutFor(o_.op, o_.dtype, o_.size, o_.bytes);
  if (!rank_.log().Write(WorkerHeaderLine(Header()))) {
    return rank_.InternalFailure("cannot write the log");
  }
  const size_t ts = workload::DTypeSize(o_.dtype);
  const int buffers = rank_.NewBuffers(layout_.send_elems * ts, layout_.recv_elems * ts);
  if (buffers != kWorkerExitOk) return buffers;
  workload::FillInput(spec_, layout_, o_.rank, rank_.send());
  args_.coll = o_.op;
  args_.send = rank_.send();
  args_.recv = rank_.recv();
  args_.count = layout_.count;
  args_.dtype = o_.dtype;
  args_.redop = o_.redop;
  args_.root = o_.root;

  const int joined = rank_.Join(rank_.InitOf(), args_);
  if (joined != kWorkerExitOk) return joined;
  rank_.WaitForStart();
  const int exit_code = Loop();
  if (exit_code != kWorkerExitOk) return exit_code;
  const Status st = rank_.Guarded("final barrier", o_.timeout, std::nullopt,
                                  [&] { return rank_.ccl().Finish(o_.timeout); });
  if (!st.ok()) return rank_.Fail("final barrier: " + st.ToString(), NowNs());
  rank_.DrainEvents();
  const auto stats = rank_.ccl().Stats();
  if (!stats.empty()) {
    const std::map<std::string, uint64_t> counters(stats.begin(), stats.end());
    if (!rank_.log().Write(WorkerStatsLine(NowNs(), counters))) {
      return rank_.InternalFailure("cannot write the log");
    }
  }
  WorkerEnd end;
  end.ok = true;
  end.message = "completed " + std::to_string(next_index_) + " collectives";
  end.t_ns = NowNs();
  if (!rank_.log().Write(WorkerEndLine(end))) return rank_.InternalFailure("cannot write the log");
  return kWorkerExitOk;
}

WorkerHeader CollectiveLoop::Header() const {
  WorkerHeader h = rank_.HeaderBase();
  h.op = workload::CollName(o_.op);
  h.dtype = workload::DTypeName(o_.dtype);
  h.redop = workload::IsReduction(o_.op) ? workload::RedOpName(o_.redop) : "none";
  h.root = o_.root;
  h.bytes = layout_.bytes;
  h.count = layout_.count;
  h.busbw_factor = workload::BusBwFactor(o_.op, o_.size);
  h.check = o_.check;
  h.warmup = o_.warmup;
  h.iters = o_.iters;
  if (o_.duration) h.duration_ns = o_.duration->count();
  return h;
}

bool CollectiveLoop::Shrinks() const { return o_.policy == "shrink" && rank_.ccl().CanShrink(); }

int CollectiveLoop::Loop() {
  const int64_t total = o_.iters ? o_.warmup + *o_.iters : -1;
  int64_t stop_at = 0;
  for (;;) {
    if (total >= 0 && next_index_ >= total) return kWorkerExitOk;
    if (total < 0 && next_index_ >= o_.warmup && next_index_ > 0) {
      bool stop = false;
      const int code = AgreeToStop(NowNs() >= stop_at, &stop);
      if (code != kWorkerExitOk) return code;
      if (stop) return kWorkerExitOk;
    }
    if (o_.check) workload::PoisonOutput(spec_, layout_, args_.recv);
    WorkerOp op;
    op.index = next_index_;
    op.bytes = layout_.bytes;
    op.warmup = next_index_ < o_.warmup;
    if (rank_.group_size() != o_.size) op.group = rank_.group_size();
    op.start_ns = NowNs();
    if (next_index_ == 0 && o_.duration) {
      stop_at = (o_.start_at_ns ? std::max(*o_.start_at_ns, op.start_ns) : op.start_ns) +
                o_.duration->count();
    }
    const Status st = rank_.RunCall("collective " + std::to_string(op.index), args_, op);
    op.end_ns = NowNs();
    rank_.DrainEvents();
    if (!st.ok()) {
      rank_.LogFailedOp(&op, st);
      if (Shrinks()) {
        const int code = ShrinkAfter("collective " + std::to_string(op.index), op.end_ns, st);
        if (code != kWorkerExitOk) return code;
        ++next_index_;
        continue;
      }
      return rank_.Fail("collective " + std::to_string(op.index) + ": " + st.ToString(), op.end_ns);
    }
    if (o_.check) {
      op.wrong = CountWrong();
    }
    if (!rank_.log().Write(WorkerOpLine(op))) return rank_.InternalFailure("cannot write the log");
    ++next_index_;
  }
}

// After collective `what` failed with `why`: the group shrinks without the rank the library
// lost, and this rank's buffers, inputs and checks become those of its place in the new group.
// kWorkerExitOk to go on; the error exit when no rank was lost (the failure was something else)
// or the shrink failed.
int CollectiveLoop::ShrinkAfter(const std::string& what, int64_t failed_ns, const Status& why) {
  const int lost = rank_.ccl().LostRank();
  if (lost == o_.rank || lost < 0) return rank_.FailUnshrinkable(what, failed_ns, why, lost);
  int64_t took_ns = 0;
  const int shrunk = rank_.ShrinkWithout({lost}, what, failed_ns, why, &took_ns);
  if (shrunk != kWorkerExitOk) return shrunk;
  std::vector<int> members = rank_.Members();
  // A rooted collective keeps its root, at that rank's place in the new group.
  auto root = std::find(members.begin(), members.end(), o_.root);
  if (root == members.end()) {
    return rank_.Fail(what + ": the root rank " + std::to_string(o_.root) +
                          " was lost; a rooted collective cannot go on",
                      failed_ns);
  }
  spec_.root = static_cast<int>(root - members.begin());
  args_.root = spec_.root;
  // Fresh buffers for the new group: the failed collective's stay revoked (and allocated)
  // until the end, as the library promised never to touch them again.
  spec_.ranks = rank_.group_size();
  layout_ = workload::LayoutFor(o_.op, o_.dtype, rank_.group_size(), o_.bytes);
  expected_.clear();  // the new group's result differs
  const size_t ts = workload::DTypeSize(o_.dtype);
  const int buffers = rank_.NewBuffers(layout_.send_elems * ts, layout_.recv_elems * ts);
  if (buffers != kWorkerExitOk) return buffers;
  workload::FillInput(spec_, layout_, rank_.group_rank(), rank_.send());
  args_.send = rank_.send();
  args_.recv = rank_.recv();
  args_.count = layout_.count;
  const Status st = rank_.Prepare(args_);
  if (!st.ok()) return rank_.Fail("prepare after the shrink: " + st.ToString(), NowNs());
  return kWorkerExitOk;
}

uint64_t CollectiveLoop::CountWrong() {
  // Up to this size a rank keeps a reference copy of its result; beyond it every value is
  // recomputed at each check (slow, but no second buffer of that size).
  constexpr size_t kMaxReferenceBytes = size_t{256} << 20;
  const size_t bytes = layout_.recv_elems * workload::DTypeSize(o_.dtype);
  if (bytes > kMaxReferenceBytes) {
    return workload::CountWrong(spec_, layout_, rank_.group_rank(), args_.recv);
  }
  if (expected_.empty()) {
    expected_.resize(bytes);
    workload::FillExpected(spec_, layout_, rank_.group_rank(), expected_.data());
  }
  return workload::CountWrongAgainst(spec_, layout_, expected_.data(), args_.recv);
}

// One-element allreduce (max) of `done`: every rank learns whether any rank's time is up.
int CollectiveLoop::AgreeToStop(bool done, bool* stop) {
  stop_send_ = done ? 1 : 0;
  stop_recv_ = -1;
  workload::OpArgs a;
  a.coll = workload::Coll::kAllReduce;
  a.send = &stop_send_;
  a.recv = &stop_recv_;
  a.count = 1;
  a.dtype = workload::DType::kI32;
  a.redop = workload::RedOp::kMax;
  SyncRecord sync;
  sync.rank = o_.rank;
  sync.after_index = next_index_ - 1;
  sync.start_ns = NowNs();
  const Status st = rank_.RunCall("stop agreement", a);
  sync.end_ns = NowNs();
  sync.ok = st.ok();
  rank_.log().Write(WorkerSyncLine(sync));
  rank_.DrainEvents();
  if (!st.ok() && Shrinks()) {
    // A rank lost during the agreement: shrink, then agree again in the smaller group.
    const int code = ShrinkAfter("stop agreement", sync.end_ns, st);
    if (code != kWorkerExitOk) return code;
    return AgreeToStop(done, stop);
  }
  if (!st.ok()) return rank_.Fail("stop agreement: " + st.ToString(), NowNs());
  if (stop_recv_ != 0 && stop_recv_ != 1) {
    return rank_.Fail("stop agreement: wrong result " + std::to_string(stop_recv_), NowNs());
  }
  *stop = stop_recv_ == 1;
  return kWorkerExitOk;
}

}  // namespace faultline::runner
