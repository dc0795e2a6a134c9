// The train workload's model and checkpoints (faultline-worker --workload train): pure
// arithmetic, so that every gradient, allreduce result and final parameter vector is known
// exactly, and the checkpoint file format. No clocks, no CCL; thread-safe.
//
// The model. P = grad_bytes / 4 f32 parameters p[i], 0 at step 0. Samples are one stream of ids
// 0, 1, 2, ...; a step of a group of g ranks hands the member at position q (world-rank order)
// the samples [base + q B, base + (q + 1) B), base = samples of the steps before. Sample x
// contributes v(x, i) = ((x + i + seed) mod 16) - 8 to gradient element i; a rank's gradient is
// the sum over its samples (BlockSum), the step's allreduce (sum) gives BlockSum over the whole
// step block [base, base + g B), and p[i] -= that. So after any sequence of steps and group
// sizes, p[i] = -BlockSum(0, samples, i): the parameters depend only on the samples done.
//
// Exactness: 16 consecutive samples contribute -8 to an element, so |BlockSum(f, n, i)| <=
// n / 2 + 128; with at most kMaxSamples samples every partial sum, gradient and parameter is an
// integer below 2^24 in magnitude and exact in f32, whatever the reduction order.
//
// Checkpoint file (native byte order; the job's ranks share one architecture):
//   "FLTCKPT\0" | u32 version (1) | i64 steps done | u64 samples done | u64 P | u64 seed |
//   u32 n excluded | i32 excluded world ranks [n] | f32 params [P] | u64 FNV-1a 64 of all before
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"

namespace faultline::runner::train {

// Samples one job may process and keep its f32 parameters exact (see above).
inline constexpr uint64_t kMaxSamples = uint64_t{1} << 24;

// v(x, i) for one sample.
int64_t SampleValue(uint64_t x, uint64_t i, uint64_t seed);
// Sum of v(x, i) over x in [first, first + count), in O(1).
int64_t BlockSum(uint64_t first, uint64_t count, uint64_t i, uint64_t seed);

// The gradient of the samples [first, first + count) into out[0..params).
void FillGradient(uint64_t first, uint64_t count, uint64_t seed, float* out, uint64_t params);
// Elements of `got` that differ from the gradient of [first, first + count).
uint64_t CountWrongGradient(uint64_t first, uint64_t count, uint64_t seed, const float* got,
                            uint64_t params);
// 0.5 x mean(p[i]^2): the synthetic objective.
double Loss(const std::vector<float>& params);
// SHA-256 (lowercase hex) of the parameters' bytes.
std::string ParamSha256(const std::vector<float>& params);

struct Checkpoint {
  int64_t steps = 0;     // steps done
  uint64_t samples = 0;  // samples done (the next step's base)
  uint64_t seed = 0;
  std::vector<int> excluded;  // world ranks the group had left out
  std::vector<float> params;
};

inline constexpr uint32_t kCheckpointVersion = 1;

// The file's bytes.
std::string EncodeCheckpoint(const Checkpoint& c);
// Parses `bytes` (named `name` in errors): kInvalidArgument for a truncated or corrupt file
// (magic, version, checksum, sizes), or one whose P or seed is not `params` / `seed`.
Result<Checkpoint> DecodeCheckpoint(const std::string& bytes, const std::string& name,
                                    uint64_t params, uint64_t seed);

// DIR/rank-<rank>.ckpt and DIR/rank-<rank>.prev.ckpt.
std::string CheckpointPath(const std::string& dir, int rank);
std::string PrevCheckpointPath(const std::string& dir, int rank);

// Writes `c` as this rank's newest checkpoint, atomically: the newest so far becomes the
// previous one, the new file is written to a temporary name, fsynced, renamed over the newest
// and the directory fsynced. Returns the file's size. Errors name the path.
// `on_visible` (if set) is called with the size as soon as the file has its newest name, before
// the directory's fsync: what a process killed from then on leaves for the next incarnation
// to resume from, so a record of the checkpoint written there is never missing for one
// (a rank killed during the directory's fsync, tens of ms on a busy disk, left a checkpoint
// its log did not have).
Result<uint64_t> WriteCheckpoint(const std::string& dir, int rank, const Checkpoint& c,
                                 const std::function<void(uint64_t)>& on_visible = {});
// Reads and checks the file at `path` (kNotFound when there is none).
Result<Checkpoint> ReadCheckpoint(const std::string& path, uint64_t params, uint64_t seed);

}  // namespace faultline::runner::train
