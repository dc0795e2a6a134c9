// The analytically known values of a collective workload: what every rank puts into its send
// buffer and what every rank must find in its receive buffer afterwards, so that an output can be
// checked element by element without a reference run. Input element i of rank r is a small
// integer drawn from a hash of (r, i): a misplaced block, a stale buffer or a missing
// contribution shows up, and every result is exact in every type (only avg of floating types
// needs a tolerance). Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

#include "workload/collective.h"

namespace faultline::workload {

// What the values depend on.
struct CheckSpec {
  Coll coll = Coll::kAllReduce;
  DType dtype = DType::kF32;
  RedOp redop = RedOp::kSum;
  int root = 0;       // broadcast
  int ranks = 1;      // world size
  uint64_t seed = 0;  // varies the inputs; every rank uses the same
};

// Fills `send` (l.send_elems elements) of `rank` with its input values.
void FillInput(const CheckSpec& o, const SizeLayout& l, int rank, void* send);
// Counts the elements of `recv` (l.recv_elems elements) on `rank` that differ from the known
// result. Poison the buffer before the collective (PoisonOutput) so that an element the
// collective never wrote counts as wrong.
uint64_t CountWrong(const CheckSpec& o, const SizeLayout& l, int rank, const void* recv);
// Writes the known result of `rank` (l.recv_elems elements) into `expected`: a reference copy
// for a workload that checks the same collective many times (CountWrongAgainst).
void FillExpected(const CheckSpec& o, const SizeLayout& l, int rank, void* expected);
// CountWrong against a reference copy from FillExpected (same spec, layout and rank): the same
// count, at the cost of comparing two buffers instead of recomputing every value.
uint64_t CountWrongAgainst(const CheckSpec& o, const SizeLayout& l, const void* expected,
                           const void* recv);
// Fills `recv` with a pattern that is never a result (NaN in floating types, all ones else).
void PoisonOutput(const CheckSpec& o, const SizeLayout& l, void* recv);

}  // namespace faultline::workload
