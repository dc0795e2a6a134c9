// CollectiveLoop: the collectives workload of one rank (worker.h): joins the group, runs the
// warm-up and then --iters collectives or collectives until --duration has passed, checks every
// output against the analytically known values and logs each. Duration-bounded loops end on
// the same collective on every rank (a one-element allreduce of "my time is up" before each
// iteration). Under policy shrink, a collective failed by a lost rank is followed by a shrink
// of the group without it, and the loop goes on in the smaller group.
#pragma once

#include <cstdint>
#include <vector>

#include "runner/worker/rank.h"
#include "workload/check_values.h"
#include "workload/collective.h"

namespace faultline::runner {

class CollectiveLoop final {
 public:
  // REQUIRES: rank->Open() succeeded; `rank` outlives the loop.
  explicit CollectiveLoop(Rank* rank) : rank_(*rank), o_(rank->options()) {}
  CollectiveLoop(const CollectiveLoop&) = delete;
  CollectiveLoop& operator=(const CollectiveLoop&) = delete;

  // Runs the workload to its end. Returns the exit code.
  int Run();

 private:
  WorkerHeader Header() const;
  int Loop();
  int ShrinkAfter(const std::string& what, int64_t failed_ns, const Status& why);
  int AgreeToStop(bool done, bool* stop);
  bool Shrinks() const;
  uint64_t CountWrong();

  Rank& rank_;
  const WorkerOptions& o_;
  workload::CheckSpec spec_;
  workload::SizeLayout layout_;
  workload::OpArgs args_;
  int64_t next_index_ = 0;
  // The known result of this rank's collective, computed once (FillExpected) and compared
  // with every output: recomputing it costs ~0.3 s of CPU per 64 MiB on every rank and every
  // collective, which on a small host steals the CPU of the ranks whose next collective has
  // begun. Empty until the first check, and again after a shrink changes the result.
  std::vector<unsigned char> expected_;
  // Members, not locals: a library may touch them until it is destroyed.
  int32_t stop_send_ = 0;
  int32_t stop_recv_ = 0;
};

}  // namespace faultline::runner
