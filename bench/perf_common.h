// Shared harness of the collective benchmarks ftccl-perf and gloo-perf (nccl-tests style).
//
// A benchmark program supplies a PerfBackend: which library (its adapter in
// workload/adapters/, the one layer the worker and the tests use too) and what to say about it.
// PerfMain does the rest, identically for every library:
//  - parses the command line (CLI11; the flags of nccl-tests where they exist),
//  - binds the bootstrap listener on 127.0.0.1:0 and forks one process per rank,
//  - in every rank: fills the inputs, warms up, times `iters` back-to-back collectives per size,
//    and with --check runs one more collective into a poisoned output and counts the elements
//    that differ from the analytically known result,
//  - gathers every rank's mean per-iteration time and wrong count over a pipe to the parent,
//    which prints a table row once all ranks reported a size (time = max over ranks) and
//    writes the same as JSON with -J.
//
// Rail r of rank k is the loopback address 127.0.(r+1).(k+1); every 127/8 address is on lo.
//
// Nothing here throws across its interface: CLI11 and backend exceptions are caught inside and
// become exit codes or Status values. Not thread-safe; each rank is one process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "workload/adapters/ccl_adapter.h"
#include "workload/check_values.h"
#include "workload/collective.h"

namespace faultline::bench {

// The collectives, types, layouts and check values are the shared workload library's
// (workload/); the benchmarks use them under their old names. busbw factors are called as
// workload::BusBwFactor: one rule, one place.
using workload::BF16Codec;
using workload::BF16ToFloat;
using workload::Coll;
using workload::CollName;
using workload::Combine;
using workload::DispatchType;
using workload::DType;
using workload::DTypeName;
using workload::DTypeSize;
using workload::FloatToBF16;
using workload::FloatToHalf;
using workload::HalfCodec;
using workload::HalfToFloat;
using workload::IsReduction;
using workload::LayoutFor;
using workload::OpArgs;
using workload::ParseBytes;
using workload::ParseColl;
using workload::ParseDType;
using workload::ParseRedOp;
using workload::PlainCodec;
using workload::RedOp;
using workload::RedOpName;
using workload::SizeLayout;
using ::faultline::Status;

struct PerfOptions {
  Coll coll = Coll::kAllReduce;
  size_t min_bytes = 32 << 20;
  size_t max_bytes = 32 << 20;
  double factor = 2;
  int iters = 20;
  int warmup = 5;
  int ranks = 4;
  int rails = 2;
  // "A.B": rail r of rank k at A.B.r.(10+k) (e.g. the soft-RoCE lab's rxe rails); empty: loopback.
  std::string rail_net;
  bool check = false;
  DType dtype = DType::kF32;
  RedOp redop = RedOp::kSum;
  int root = 0;
  int timeout_s = 120;  // deadline of one collective; the parent also kills ranks silent this long
  std::string json_path;
};

// Sizes from min to max, multiplying by factor (> 1); always includes min, never exceeds max.
std::vector<size_t> SizeSweep(size_t min_bytes, size_t max_bytes, double factor);

// What the check values of these options depend on (workload/check_values.h).
workload::CheckSpec SpecOf(const PerfOptions& o);
// Fills `send` of `rank` with the check values of this collective and size.
void FillInput(const PerfOptions& o, const SizeLayout& l, int rank, void* send);
// Counts the elements of `recv` on `rank` that differ from the known result.
uint64_t CountWrong(const PerfOptions& o, const SizeLayout& l, int rank, const void* recv);

struct PerfBackend {
  // The library: a workload::adapters::CreateCclAdapter name ("ftccl", "gloo").
  std::string name;
  // Extra header lines (e.g. how rails are used); may be empty.
  std::vector<std::string> notes;
  // Parent side: rejects options the library cannot run; nullptr accepts everything.
  std::function<Status(const PerfOptions&)> validate;
  // Parent side: effective knobs of the library, echoed in the header and the JSON.
  std::function<std::vector<std::pair<std::string, std::string>>(const PerfOptions&)> knobs;
  // Rank side: adjusts the adapter's CclInit after the harness filled it in (rank, size,
  // bootstrap and its listener on rank 0, rails, the run's scratch directory as the store,
  // op_timeout = --timeout); nullptr keeps it.
  std::function<void(const PerfOptions&, workload::adapters::CclInit*)> configure;
};

// The whole program. Returns the exit code: 0 all fine; 1 wrong elements found; 2 bad
// command line; 3 a rank failed, crashed or hung (the message says which and why).
int PerfMain(int argc, char** argv, const PerfBackend& backend);

}  // namespace faultline::bench
