// FaultMatrix: the fault state the ranks of a train job gather at a step boundary (policies
// shrink and adaptive), and the pure functions every rank computes from it.
//
// The gathered vector is one allreduce (max) of int64 slots, minima as negated values:
//   kNews .. kDown            the group's summary (see Slot)
//   one score slot per world rank (1: affected, 2: cut off, + kOwnPortDown)
//   with at most kMaxMatrixRanks world ranks, kBlocks blocks of world x world slots: the paths
//   each rank sees down (block kDownBlock, 0/1), and the library's measured throughput from each
//   rank to each in kB/s at fault-free steps (block kRefRateBlock).
// Every rank fills only its own slots (FillLocal); the allreduce makes the group's view, and
// every function below gives the same answer on every rank for the same vector.
//
// Pure: no clock and no I/O. Thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "runner/worker/path_tracker.h"
#include "workload/adapters/ccl_adapter.h"

namespace faultline::runner {

class FaultMatrix final {
 public:
  enum Slot : size_t {
    kNews = 0,      // a fault seen since the last boundary
    kClass,         // 0 none, 1 link, 2 nic
    kNegStart,      // -(earliest outage start, ns)
    kExpected,      // expected outage, ns (max; kPermanent: permanent; 0: already over)
    kNegBandwidth,  // -(surviving bandwidth fraction, ppm)
    kDown,          // a path down now
    kSlots,
  };
  static constexpr int64_t kPermanent = std::numeric_limits<int64_t>::max();
  // Added to a rank's score slot when its own rail port went down during the fault.
  static constexpr int64_t kOwnPortDown = 4;
  static constexpr int kMaxMatrixRanks = 16;
  static constexpr int kDownBlock = 0, kRefRateBlock = 1, kBlocks = 2;

  // REQUIRES: world >= 1.
  explicit FaultMatrix(int world) : world_(world) {}

  int world() const { return world_; }
  // Whether the per-pair blocks are gathered (world <= kMaxMatrixRanks).
  bool HasMatrix() const { return world_ <= kMaxMatrixRanks; }
  // The number of slots of the gathered vector.
  size_t Size() const;
  size_t ScoreSlot(int rank) const { return kSlots + static_cast<size_t>(rank); }
  // REQUIRES: HasMatrix(), 0 <= from, to < world.
  size_t MatrixSlot(int from, int to, int block = kDownBlock) const;
  // The pair's value in `block`, the better of its two directions (the ring uses one).
  int64_t PairRate(const std::vector<int64_t>& v, int a, int b, int block) const;

  // What one rank contributes.
  struct Local {
    int rank = 0;
    std::vector<int> members;  // the group's world ranks, in order
    int rails = 0;             // this rank's rails
    const PathTracker* paths = nullptr;
    // The library's damping state (asked only while a path is down); none: not damped.
    std::optional<workload::adapters::FlapDamping> damping;
    int64_t now_ns = 0;
    bool own_port_down = false;     // this rank's own port went down during the fault
    std::vector<double> ref_rates;  // bytes/s to each world rank at fault-free steps
    // The fault-free steps' count and total allreduce time, and the last step's.
    int64_t clean_steps = 0;
    int64_t clean_ar_ns = 0;
    int64_t last_ar_ns = 0;
  };
  // This rank's slots of a vector of Size() zeros.
  // REQUIRES: v->size() == Size(), local.paths set.
  void FillLocal(const Local& local, std::vector<int64_t>* v) const;

  // The ranks a shrink must drop so that no member has a path down to another: a greedy
  // vertex cover of the down paths among `members` (most down paths first; on a tie a rank
  // whose own port went down, then the lowest world rank, the coordinator too), at most
  // members.size() - 1 ranks, sorted. Without the matrix: the one rank of the highest score
  // other than the coordinator (members.front()), or none.
  std::vector<int> AffectedCover(const std::vector<int64_t>& v,
                                 const std::vector<int>& members) const;

  // The step time after dropping `cover` (policy::RingStepTimeEstimate), from the slowest link
  // of each ring (the members' now, the survivors' after; consecutive in rank order, the last
  // to the first) in the reference-rate block; a survivors' pair never measured counts as the
  // group's slowest. nullopt without the matrix, with an empty cover, or when no pair of the
  // members' ring was measured.
  std::optional<double> ShrunkStepTime(const std::vector<int64_t>& v,
                                       const std::vector<int>& members,
                                       const std::vector<int>& cover, double step_time_s,
                                       double comm_fraction) const;

 private:
  int world_;
};

}  // namespace faultline::runner
