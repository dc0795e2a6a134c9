// CollectiveCheck: runs one collective on a rank and checks this rank's output element by
// element against the reference (reference.h). Used inside rank processes only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ftccl/communicator.h"
#include "rank_launcher.h"

namespace ftccl::test {

// One collective call, identical on every rank.
struct CollCase {
  CollKind kind = CollKind::kAllReduce;
  DataType dt = DataType::kF32;
  ReduceOp op = ReduceOp::kSum;     // reducing collectives only
  int root = 0;                     // broadcast and reduce only
  size_t count = 0;                 // the API's count argument
  uint64_t salt = 1;                // selects the input data
  size_t misalign = 0;              // byte offset of send and recv from 64-byte alignment
  bool null_recv_off_root = false;  // reduce: non-root ranks pass recv == nullptr

  // "allreduce f16 prod count=150001 root=0": which case failed, with its parameters.
  std::string Name() const;
};

bool IsReducing(CollKind kind);
// Whether the collective's buffers hold `count` elements per rank block (allgather,
// reducescatter, alltoall) rather than `count` elements in all.
bool HasBlocks(CollKind kind);

// Runs `c` on `comm`, then checks the result, the guard zones and that the send buffer was
// not modified; every wrong element or guard is reported through `reporter` (the first few in
// detail). Returns the collective's Status; `*correct` tells whether the output was checked and
// found right (false when the collective failed).
Status RunAndCheck(Communicator& comm, const CollCase& c, RankReporter& reporter, bool* correct,
                   Millis timeout = Millis(0));

// Calls the collective of `c` with the given raw buffers (no checking).
Status CallCollective(Communicator& comm, const CollCase& c, const void* send, void* recv,
                      Millis timeout = Millis(0));

// Reports every CommStats counter of `comm` as a value ("crc_errors", ...).
void ReportStats(const Communicator& comm, RankReporter& reporter);

}  // namespace ftccl::test
